package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWire drives wire against a net/http server: the request arrives as sent, Content-Length and chunked
// answers are read, an error answer is an *apiError, a server that closes the connection is dialled again,
// and a cancelled context stops a request in flight.
func TestWire(t *testing.T) {
	var conns atomic.Int32
	hang := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" ||
				r.Method != http.MethodPost || r.URL.RawQuery != "a=1" {
				http.Error(w, "bad request shape: "+r.Method+" "+r.Header.Get("Authorization"), http.StatusTeapot)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		case "/chunked":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"tasks":[{"id":"t1","status":"decided","assignee":"u"},`)
			w.(http.Flusher).Flush() // forces chunked encoding
			_, _ = io.WriteString(w, `{"id":"t2","status":"pending","assignee":"v"},{"id":"t3","status":"pending","assignee":"u"}]}`)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, `{}`)
		case "/fail":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"conflict","message":"already decided"}}`)
		case "/hang":
			arrived <- struct{}{}
			<-hang
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(hang)

	w, err := newWire(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	ctx := context.Background()

	b, err := w.do(ctx, http.MethodPost, "/echo?a=1", "tok", []byte(`{"id":"i1"}`))
	if err != nil || string(b) != `{"id":"i1"}` {
		t.Fatalf("echo: %q, %v", b, err)
	}
	b, err = w.do(ctx, http.MethodGet, "/chunked", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pendingIn(b, "tasks", "u"); got != "t3" {
		t.Fatalf("pending task of u in the chunked answer: %q, want t3 (body %s)", got, b)
	}
	if got := pendingIn(b, "tasks", "x"); got != "" {
		t.Fatalf("pending task of x: %q, want none", got)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for three requests, want one kept alive", n)
	}

	_, err = w.do(ctx, http.MethodGet, "/fail", "tok", nil)
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "conflict" || ae.Msg != "already decided" {
		t.Fatalf("error answer: %v", err)
	}
	if _, err = w.do(ctx, http.MethodPost, "/echo", "", []byte(`{}`)); !errors.As(err, &ae) || ae.Status != http.StatusTeapot {
		t.Fatalf("a request without its token and query reached the handler as a good one: %v", err)
	}

	if _, err = w.do(ctx, http.MethodGet, "/close", "tok", nil); err != nil {
		t.Fatal(err)
	}
	if w.conn != nil {
		t.Fatal("the connection was kept after the server said Connection: close")
	}
	if _, err = w.do(ctx, http.MethodPost, "/echo?a=1", "tok", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one more after the close)", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	w2, _ := newWire(srv.URL)
	defer w2.close()
	done := make(chan error, 1)
	go func() {
		_, err := w2.do(cctx, http.MethodGet, "/hang", "tok", nil)
		done <- err
	}()
	<-arrived // the request is in flight
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled request succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled request did not stop")
	}
}

func TestWireRefusesHTTPS(t *testing.T) {
	if _, err := newWire("https://127.0.0.1:8443"); err == nil || !strings.Contains(err.Error(), "--http std") {
		t.Fatalf("newWire(https): %v", err)
	}
	if _, err := parseWireMode("fast"); err == nil {
		t.Fatal("parseWireMode accepted an unknown mode")
	}
}
