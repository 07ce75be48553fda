package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbound"
)

// resolver answers from a table; a name with several answers gives the next one on each lookup (DNS rebinding),
// the last one repeating. Unknown names are "no such host".
type resolver struct {
	mu    sync.Mutex
	table map[string][]string
	calls map[string]int
}

func newResolver(table map[string][]string) *resolver {
	return &resolver{table: table, calls: map[string]int{}}
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.table[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(answers)-1)
	r.calls[host]++
	var out []netip.Addr
	for _, a := range strings.Split(answers[i], " ") {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func mustAllow(t *testing.T, s string) outbound.Allow {
	t.Helper()
	a, err := outbound.ParseAllow(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCheckURL(t *testing.T) {
	res := newResolver(map[string][]string{
		"loop.example.test":   {"127.0.0.1"},
		"mixed.example.test":  {"93.184.216.34 10.0.0.7"},
		"public.example.test": {"93.184.216.34 2606:2800:220:1:248:1893:25c8:1946"},
		"erp.corp.test":       {"10.20.1.5"},
		"crm.corp.test":       {"10.20.1.6"},
		"meta.example.test":   {"169.254.169.254"},
	})
	c := outbound.New(outbound.Options{Resolver: res, Allow: mustAllow(t, "10.30.0.0/16, 192.168.7.7, erp.corp.test")})
	wildcard := outbound.New(outbound.Options{Resolver: res, Allow: mustAllow(t, "*.corp.test")})

	cases := []struct {
		client  *outbound.Client
		url     string
		addr    string // "" = allowed
		rng     string
		hostOut string
	}{
		{c, "http://169.254.169.254/latest/meta-data/", "169.254.169.254", "link-local", ""},
		{c, "http://127.0.0.1:8080/hook", "127.0.0.1", "loopback", ""},
		{c, "http://127.9.9.9/hook", "127.9.9.9", "loopback", ""},
		{c, "http://[::1]:8080/hook", "::1", "loopback", ""},
		{c, "http://[::ffff:127.0.0.1]/hook", "127.0.0.1", "loopback", ""},
		{c, "http://0.0.0.0/hook", "0.0.0.0", "unspecified", ""},
		{c, "http://[::]/hook", "::", "unspecified", ""},
		{c, "http://10.1.2.3/hook", "10.1.2.3", "private", ""},
		{c, "http://172.16.5.4/hook", "172.16.5.4", "private", ""},
		{c, "http://192.168.1.1/hook", "192.168.1.1", "private", ""},
		{c, "http://100.64.0.1/hook", "100.64.0.1", "shared (CGNAT)", ""},
		{c, "http://[fe80::1]/hook", "fe80::1", "link-local", ""},
		{c, "http://[fd12:3456::1]/hook", "fd12:3456::1", "private", ""},
		{c, "http://239.1.2.3/hook", "239.1.2.3", "multicast", ""},
		{c, "http://loop.example.test/hook", "127.0.0.1", "loopback", "loop.example.test"},
		{c, "http://meta.example.test/hook", "169.254.169.254", "link-local", "meta.example.test"},
		{c, "http://mixed.example.test/hook", "10.0.0.7", "private", "mixed.example.test"},
		{c, "http://crm.corp.test/hook", "10.20.1.6", "private", "crm.corp.test"},
		// allowed
		{c, "https://public.example.test/hook", "", "", ""},
		{c, "https://93.184.216.34/hook", "", "", ""},
		{c, "http://10.30.4.5:9000/hook", "", "", ""},       // CIDR
		{c, "http://192.168.7.7/hook", "", "", ""},          // single IP
		{c, "http://erp.corp.test/hook", "", "", ""},        // host name
		{c, "http://unknown.example.test/hook", "", "", ""}, // does not resolve now: checked at connect time
		{wildcard, "http://crm.corp.test/hook", "", "", ""},
		{wildcard, "http://10.20.1.6/hook", "10.20.1.6", "private", ""}, // a name pattern allows names, not their addresses
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			err := tc.client.CheckURL(context.Background(), tc.url)
			if tc.addr == "" {
				if err != nil {
					t.Fatalf("CheckURL: %v, want allowed", err)
				}
				return
			}
			var me *model.Error
			if !errors.As(err, &me) || me.Code != "address_not_allowed" || me.Kind != model.EUNPROCESSABLE {
				t.Fatalf("CheckURL: %v (%T), want 422 address_not_allowed", err, err)
			}
			if me.Details["address"] != tc.addr || me.Details["range"] != tc.rng || me.Details["host"] != tc.hostOut {
				t.Errorf("details %v, want address %s range %s host %q", me.Details, tc.addr, tc.rng, tc.hostOut)
			}
			if !strings.Contains(me.Message, "HALLEY_OUTBOUND_ALLOW") || !strings.Contains(me.Message, tc.rng) {
				t.Errorf("message %q does not say what to do", me.Message)
			}
		})
	}
}

func TestParseAllow(t *testing.T) {
	a, err := outbound.ParseAllow(" 10.0.0.0/8 ,fd00::/8, 192.168.1.10, ERP.corp.test., *.svc.cluster.local ,")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); got != "10.0.0.0/8,fd00::/8,192.168.1.10,erp.corp.test,*.svc.cluster.local" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "http://x", "a b", "*.", "-x.test", "1.2.3.4:80"} {
		if _, err := outbound.ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

// server counts the requests it gets.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

func get(c *outbound.Client, url string) (int, error) {
	resp, err := c.HTTPClient(nil).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func mustBlock(t *testing.T, err error, addr string) {
	t.Helper()
	var b *outbound.BlockedError
	if !errors.As(err, &b) {
		t.Fatalf("error %v (%T), want a BlockedError", err, err)
	}
	if b.Addr.String() != addr {
		t.Errorf("blocked %s, want %s", b.Addr, addr)
	}
}

func TestConnectTimeGuard(t *testing.T) {
	srv := newServer(t, nil)
	port := srv.port()

	t.Run("loopback refused by default", func(t *testing.T) {
		_, err := get(outbound.New(outbound.Options{}), srv.URL)
		mustBlock(t, err, "127.0.0.1")
	})
	t.Run("metadata address refused", func(t *testing.T) {
		_, err := get(outbound.New(outbound.Options{}), "http://169.254.169.254/latest/meta-data/")
		mustBlock(t, err, "169.254.169.254")
	})
	t.Run("host name resolving to loopback refused", func(t *testing.T) {
		c := outbound.New(outbound.Options{Resolver: newResolver(map[string][]string{"hooks.example.test": {"127.0.0.1"}})})
		_, err := get(c, "http://hooks.example.test:"+port+"/")
		mustBlock(t, err, "127.0.0.1")
	})
	t.Run("DNS rebinding: public at creation, loopback at connect", func(t *testing.T) {
		res := newResolver(map[string][]string{"rebind.example.test": {"93.184.216.34", "127.0.0.1"}})
		c := outbound.New(outbound.Options{Resolver: res})
		u := "http://rebind.example.test:" + port + "/"
		if err := c.CheckURL(context.Background(), u); err != nil {
			t.Fatalf("creation check: %v", err)
		}
		_, err := get(c, u)
		mustBlock(t, err, "127.0.0.1")
	})
	t.Run("allowed by CIDR", func(t *testing.T) {
		code, err := get(outbound.New(outbound.Options{Allow: mustAllow(t, "127.0.0.0/8")}), srv.URL)
		if err != nil || code != 200 {
			t.Fatalf("got %d %v, want 200", code, err)
		}
	})
	t.Run("allowed by host name", func(t *testing.T) {
		c := outbound.New(outbound.Options{Allow: mustAllow(t, "hooks.corp.test"),
			Resolver: newResolver(map[string][]string{"hooks.corp.test": {"127.0.0.1"}})})
		code, err := get(c, "http://hooks.corp.test:"+port+"/")
		if err != nil || code != 200 {
			t.Fatalf("got %d %v, want 200", code, err)
		}
	})
	if srv.hits.Load() != 2 {
		t.Errorf("server got %d requests, want 2 (only the allowed ones)", srv.hits.Load())
	}
}

func TestIPv6LoopbackRefused(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on this machine: %v", err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	url := "http://" + l.Addr().String() + "/"

	_, err = get(outbound.New(outbound.Options{}), url)
	mustBlock(t, err, "::1")
	if code, err := get(outbound.New(outbound.Options{Allow: mustAllow(t, "::1")}), url); err != nil || code != 200 {
		t.Fatalf("allowed ::1: %d %v", code, err)
	}
	if hits.Load() != 1 {
		t.Errorf("hits %d, want 1", hits.Load())
	}
}

func TestRedirects(t *testing.T) {
	target := newServer(t, nil)
	res := newResolver(map[string][]string{"hooks.corp.test": {"127.0.0.1"}, "evil.example.test": {"127.0.0.1"}})
	var location atomic.Value
	front := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, location.Load().(string), http.StatusFound)
	})
	// The receiver is allowed by name; the address it redirects to is not.
	c := outbound.New(outbound.Options{Allow: mustAllow(t, "hooks.corp.test"), Resolver: res})
	frontURL := "http://hooks.corp.test:" + front.port() + "/"

	for _, tc := range []struct{ name, to string }{
		{"to a loopback literal", target.URL + "/"},
		{"to a name resolving to loopback", "http://evil.example.test:" + target.port() + "/"},
		{"to the metadata address", "http://169.254.169.254/latest/meta-data/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			location.Store(tc.to)
			_, err := get(c, frontURL)
			if err == nil {
				t.Fatal("redirect followed")
			}
			var b *outbound.BlockedError
			if !errors.As(err, &b) {
				t.Fatalf("error %v, want a BlockedError", err)
			}
		})
	}
	if target.hits.Load() != 0 {
		t.Errorf("the redirect target got %d requests", target.hits.Load())
	}
	if front.hits.Load() != 3 {
		t.Errorf("front got %d requests, want 3", front.hits.Load())
	}

	t.Run("caller's own redirect rules still apply", func(t *testing.T) {
		location.Store("http://hooks.corp.test:" + front.port() + "/again")
		hc := c.HTTPClient(func(req *http.Request, via []*http.Request) error { return fmt.Errorf("no redirects here") })
		_, err := hc.Get(frontURL)
		if err == nil || !strings.Contains(err.Error(), "no redirects here") {
			t.Fatalf("error %v", err)
		}
	})
}
