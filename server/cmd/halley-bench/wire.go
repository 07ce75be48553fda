package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// The step load's requests go over wire, a keep-alive HTTP/1.1 connection driven by the client's own goroutine,
// not through net/http's Transport. The generator shares the machine with Halley and MariaDB, and the Transport
// moves every request through two goroutines of its own per connection (writeLoop and readLoop) and back: at 16
// clients that was a fifth of the machine's CPU a step on the 2-core VMs, most of it scheduling those hand-offs
// (docs/benchmarks.md, "A lighter load generator"). Responses are still parsed by net/http (http.ReadResponse:
// Content-Length and chunked bodies alike); only the connection handling is the client's own.

// wireMode names how the step load talks HTTP: "lean" (wire) or "std" (net/http's client).
type wireMode string

const (
	wireLean wireMode = "lean"
	wireStd  wireMode = "std"
)

func parseWireMode(s string) (wireMode, error) {
	switch m := wireMode(s); m {
	case wireLean, wireStd:
		return m, nil
	}
	return "", fmt.Errorf("--http must be lean or std, not %q", s)
}

// wireTimeout bounds one request, as the net/http client's Timeout does.
const wireTimeout = 60 * time.Second

// wire is one client's connection. Not safe for concurrent use: each load worker has its own.
type wire struct {
	addr string // host:port
	host string // the Host header
	conn net.Conn
	br   *bufio.Reader
	req  []byte // the request being written, reused
	body bytes.Buffer
	stop func() bool // unregisters the context's hook on conn
}

func newWire(base string) (*wire, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("--http lean speaks plain http only, not %s (use --http std)", u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &wire{addr: addr, host: u.Host}, nil
}

// close drops the connection; the next request dials again.
func (w *wire) close() {
	if w.conn == nil {
		return
	}
	w.stop()
	_ = w.conn.Close()
	w.conn, w.br, w.stop = nil, nil, nil
}

func (w *wire) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return err
	}
	w.conn = c
	w.br = bufio.NewReaderSize(c, 16<<10)
	// A cancelled load stops a request in flight: the connection's deadline moves to the past.
	w.stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return nil
}

// do sends one request (body: JSON, nil for none) and returns the body of a 2xx answer, valid until the next
// call. A non-2xx answer is an *apiError, as client.do's.
func (w *wire) do(ctx context.Context, method, path, token string, body []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if w.conn == nil {
		if err := w.dial(ctx); err != nil {
			return nil, err
		}
	}
	b := w.req[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, w.host...)
	b = append(b, "\r\nUser-Agent: halley-bench\r\n"...)
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	if body != nil {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n\r\n"...)
		b = append(b, body...)
	} else {
		b = append(b, "\r\n"...)
	}
	w.req = b
	_ = w.conn.SetDeadline(time.Now().Add(wireTimeout))
	if _, err := w.conn.Write(b); err != nil {
		w.close()
		return nil, err
	}
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		w.close()
		return nil, err
	}
	w.body.Reset()
	_, err = w.body.ReadFrom(io.LimitReader(resp.Body, 64<<20))
	_ = resp.Body.Close()
	if err != nil {
		w.close()
		return nil, err
	}
	if resp.Close {
		w.close() // the server ends the connection after this answer
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, answerError(resp.StatusCode, w.body.Bytes())
	}
	return w.body.Bytes(), nil
}

// errBadAnswer is a 2xx answer without what the load needs from it.
var errBadAnswer = errors.New("bad answer")

// pendingIn returns the first pending task assigned to user in the JSON array at path of the answer b, or "".
// Only those fields are read (gjson): decoding whole answers was a tenth of the generator's CPU.
func pendingIn(b []byte, path, user string) string {
	var id string
	gjson.GetBytes(b, path).ForEach(func(_, t gjson.Result) bool {
		if t.Get("status").Str == "pending" && t.Get("assignee").Str == user {
			id = t.Get("id").Str
			return false
		}
		return true
	})
	return id
}
