package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// tcpProxy forwards a loopback port to a real service once started: before that, the port refuses
// connections, like a database or Redis that is still booting.
type tcpProxy struct {
	t      *testing.T
	addr   string // what clients dial
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn // both ends of every proxied connection, closed at cleanup
}

func newProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: freeAddr(t), target: target}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ln != nil {
			p.ln.Close()
		}
		for _, c := range p.conns { // before the test database is dropped (cleanups run last first)
			c.Close()
		}
	})
	return p
}

func (p *tcpProxy) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer s.Close()
				p.mu.Lock()
				p.conns = append(p.conns, c, s)
				p.mu.Unlock()
				// Either side closing closes both: when halley's end goes, MariaDB must see its session end (and
				// roll back what it held), or the test database's DROP waits on its metadata locks for a day.
				go func() {
					_, _ = io.Copy(s, c)
					s.Close()
					c.Close()
				}()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
}

// getStatus returns the status and JSON body of a GET, 0 when nothing answers.
func getStatus(u string) (int, map[string]any) {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(u)
	if err != nil {
		return 0, nil
	}
	defer r.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body) // a body that is not JSON is left empty: callers check the status
	return r.StatusCode, body
}

// jsonLines parses every line of a JSON log; a line that is not a JSON object fails the test.
func jsonLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		out = append(out, m)
	}
	return out
}

func countLogs(lines []map[string]any, match func(m map[string]any) bool) int {
	n := 0
	for _, m := range lines {
		if match(m) {
			n++
		}
	}
	return n
}

// TestStartBeforeTheDatabase starts the real binary while neither its MySQL nor its Redis accepts connections:
// it must listen at once (/healthz 200, /readyz 503, the API 503 `starting`), log each attempt to reach the
// database, become ready once both are up, and write only JSON lines with HALLEY_LOG_FORMAT=json — go-redis's
// complaints about the missing Redis included.
func TestStartBeforeTheDatabase(t *testing.T) {
	bin := buildHalley(t)
	dbURL, err := url.Parse(storetest.URL(t, store.MySQL))
	if err != nil {
		t.Fatal(err)
	}
	redisURL, err := url.Parse(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dbProxy, redisProxy := newProxy(t, dbURL.Host), newProxy(t, redisURL.Host)
	dbURL.Host, redisURL.Host = dbProxy.addr, redisProxy.addr

	addr := freeAddr(t)
	base := "http://" + addr
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + addr, "HALLEY_DATA_DIR=" + t.TempDir(),
		"HALLEY_DATABASE_URL=" + dbURL.String(), "HALLEY_REDIS_URL=" + redisURL.String(), "HALLEY_REDIS_PREFIX=" + uniqueRedisPrefix(t, storetest.RedisURL(t)),
		"HALLEY_LOG_FORMAT=json", "HALLEY_DB_WAIT=60s", "HALLEY_ADMIN_PASSWORD=startup-test-pw"}
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("logs:\n%s", tail(logs.String(), 6000))
		}
	})

	if !testkit.Eventually(20*time.Second, 50*time.Millisecond, func() bool { s, _ := getStatus(base + "/healthz"); return s == http.StatusOK }) {
		t.Fatal("/healthz never answered while the database was down")
	}
	if s, body := getStatus(base + "/readyz"); s != http.StatusServiceUnavailable || body["status"] != "starting" {
		t.Fatalf("/readyz while waiting for the database = %d %v; want 503 starting", s, body)
	}
	if s, body := getStatus(base + "/api/v1/templates"); s != http.StatusServiceUnavailable || body["error"].(map[string]any)["code"] != "starting" {
		t.Fatalf("the API while starting = %d %v; want 503 starting", s, body)
	}
	retrying := func(m map[string]any) bool {
		return strings.Contains(m["msg"].(string), "database is not reachable yet") && m["attempt"] != nil
	}
	if !testkit.Eventually(20*time.Second, 50*time.Millisecond, func() bool { return countLogs(jsonLines(t, logs.String()), retrying) >= 3 }) {
		t.Fatal("no log line per attempt to reach the database")
	}

	dbProxy.start()
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { return strings.Contains(logs.String(), "halley is serving") }) {
		t.Fatal("halley did not start once the database was up")
	}
	// Redis is still down: the process is up, but not ready, and go-redis has things to say.
	if s, body := getStatus(base + "/readyz"); s != http.StatusServiceUnavailable || body["checks"].(map[string]any)["redis"] == "ok" {
		t.Fatalf("/readyz without redis = %d %v; want 503 naming redis", s, body)
	}
	goRedis := func(m map[string]any) bool { return m["component"] == "go-redis" }
	if !testkit.Eventually(20*time.Second, 50*time.Millisecond, func() bool { return countLogs(jsonLines(t, logs.String()), goRedis) > 0 }) {
		t.Fatal("go-redis logged nothing while redis was down (or not through slog)")
	}
	redisProxy.start()
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { s, _ := getStatus(base + "/readyz"); return s == http.StatusOK }) {
		t.Fatal("/readyz never became 200 once redis was up")
	}
	if s, _ := getStatus(base + "/api/v1/templates"); s != http.StatusUnauthorized {
		t.Fatalf("the API once ready = %d; want 401 (no token)", s)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("exit after SIGTERM: %v", exitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	lines := jsonLines(t, logs.String())
	if n := countLogs(lines, retrying); n < 3 {
		t.Errorf("%d retry lines", n)
	}
	for _, m := range lines {
		if m["time"] == nil || m["level"] == nil || m["msg"] == nil {
			t.Errorf("log line without time, level or msg: %v", m)
		}
	}
}

// TestDatabaseWaitGivesUp: with HALLEY_DB_WAIT=2s and no database, halley gives up after a few logged attempts
// and exits 1 with a JSON error line that says so.
func TestDatabaseWaitGivesUp(t *testing.T) {
	bin := buildHalley(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + freeAddr(t), "HALLEY_DATA_DIR=" + t.TempDir(),
		"HALLEY_DATABASE_URL=mysql://nobody:x@" + freeAddr(t) + "/halley", "HALLEY_LOG_FORMAT=json", "HALLEY_DB_WAIT=2s"}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v; want status 1\n%s", err, out)
	}
	if took < 2*time.Second || took > 20*time.Second {
		t.Errorf("gave up after %v; want about HALLEY_DB_WAIT (2s)", took)
	}
	lines := jsonLines(t, string(out))
	last := lines[len(lines)-1]
	if last["level"] != "ERROR" || !strings.Contains(last["err"].(string), "gave up after") {
		t.Fatalf("last line %v; want an ERROR saying it gave up", last)
	}
	if n := countLogs(lines, func(m map[string]any) bool { return m["attempt"] != nil }); n < 2 {
		t.Fatalf("%d attempts logged; want several", n)
	}
}
