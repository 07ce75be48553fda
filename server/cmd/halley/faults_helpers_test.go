package main

// Helpers of the fault tests (faults_test.go): real halley, redis-server and mariadbd processes on loopback ports,
// an HTTP client that reports transport errors instead of failing the test, and a step load that records what
// was acknowledged.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
)

// requireFaults skips the test unless HALLEY_FAULTS=1 (`make faults` sets it): these tests kill and restart
// processes and take tens of seconds.
func requireFaults(t *testing.T) {
	t.Helper()
	if os.Getenv("HALLEY_FAULTS") != "1" {
		t.Skip("fault test: set HALLEY_FAULTS=1 or run `make faults`")
	}
}

// syncBuffer is a bytes.Buffer a process writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// halleyProc is one halley process; restart keeps its environment and data directory and takes a new port.
type halleyProc struct {
	t    *testing.T
	name string
	bin  string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
}

func startHalley(t *testing.T, name, bin string, env ...string) *halleyProc {
	t.Helper()
	h := &halleyProc{t: t, name: name, bin: bin, env: append([]string{"HALLEY_DATA_DIR=" + t.TempDir()}, env...), logs: &syncBuffer{}}
	t.Cleanup(func() {
		if h.running() {
			h.kill()
		}
		if t.Failed() {
			t.Logf("logs of %s:\n%s", h.name, tail(h.logs.String(), 4000))
		}
	})
	h.start()
	return h
}

func (h *halleyProc) start() {
	h.t.Helper()
	addr := freeAddr(h.t)
	cmd := exec.Command(h.bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + addr}, h.env...)
	fmt.Fprintf(h.logs, "--- start on %s\n", addr)
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	base := "http://" + addr
	if !testkit.Eventually(60*time.Second, 50*time.Millisecond, func() bool { return readyz(base) == http.StatusOK }) {
		cmd.Process.Kill()
		cmd.Wait()
		h.t.Fatalf("%s: /readyz never answered 200:\n%s", h.name, tail(h.logs.String(), 4000))
	}
	h.mu.Lock()
	h.cmd, h.base = cmd, base
	h.mu.Unlock()
}

// URL is the process's base URL; "" while it is down.
func (h *halleyProc) URL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base
}

func (h *halleyProc) running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cmd != nil
}

// kill sends SIGKILL: no drain, no shutdown hook.
func (h *halleyProc) kill() {
	h.mu.Lock()
	cmd := h.cmd
	h.cmd, h.base = nil, ""
	h.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// readyz returns the status of GET /readyz, 0 when nothing answers.
func readyz(base string) int {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// service is a redis-server or mariadbd run by a test on a loopback port; stop and start keep its data dir.
type service struct {
	t    *testing.T
	name string
	args []string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *syncBuffer
	up   func() bool
}

func (s *service) start() {
	s.t.Helper()
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	if !testkit.Eventually(60*time.Second, 50*time.Millisecond, s.up) {
		s.t.Fatalf("%s did not come up:\n%s", s.name, tail(s.logs.String(), 4000))
	}
}

// stop signals the process and waits for it to exit.
func (s *service) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		s.t.Errorf("%s did not stop on %v within 60 s", s.name, sig)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

// startRedis runs a private redis-server without persistence, so a restart loses every key.
func startRedis(t *testing.T) *service {
	t.Helper()
	bin := testkit.RequireTool(t, "redis-server", "")
	port := freePort(t)
	s := &service{t: t, name: "redis-server", port: port, logs: &syncBuffer{},
		args: []string{bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--daemonize", "no"}}
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), DialTimeout: time.Second, MaxRetries: -1})
	s.up = func() bool { return rdb.Ping(context.Background()).Err() == nil }
	t.Cleanup(func() { rdb.Close(); s.stop(syscall.SIGKILL) })
	s.start()
	return s
}

func (s *service) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// startMariaDB runs a private mariadbd on a fresh data directory (root without a password on 127.0.0.1).
func startMariaDB(t *testing.T) *service {
	t.Helper()
	bin := testkit.RequireTool(t, "mariadbd", "")
	install := testkit.RequireTool(t, "mariadb-install-db", "")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// As root, mariadbd refuses to start without --user; run it as root, which owns the temporary directory.
	var asUser []string
	if os.Geteuid() == 0 {
		asUser = []string{"--user=root"}
	}
	out, err := exec.Command(install, append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, asUser...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	s := &service{t: t, name: "mariadbd", port: port, logs: &syncBuffer{},
		args: append([]string{bin, "--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=300"}, asUser...)}
	db := s.mysql(t, "mysql")
	s.up = func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx) == nil
	}
	t.Cleanup(func() { db.Close(); s.stop(syscall.SIGKILL) })
	s.start()
	return s
}

// mysqlURL is the Halley URL of database name on a private mariadbd.
func (s *service) mysqlURL(name string) string {
	return fmt.Sprintf("mysql://root@%s/%s", s.addr(), name)
}

// mysql opens database name on a private mariadbd.
func (s *service) mysql(t *testing.T, name string) *sql.DB {
	t.Helper()
	return openSQL(t, s.mysqlURL(name))
}

// openSQL opens a Halley MySQL URL with database/sql, for the test's own checks.
func openSQL(t *testing.T, u string) *sql.DB {
	t.Helper()
	_, dsn, err := store.ParseURL(u, "")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() })
	return db
}

// historyEvents returns the events of the history rows matching where ("" for all), one per event: a step's events
// share a row, so a condition on action or node_id in SQL would miss all but a step's first.
func historyEvents(t *testing.T, db *sql.DB, where string, args ...any) []model.HistoryEvent {
	t.Helper()
	evs, err := store.ScanHistory(context.Background(), db, where, args...)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkFiredOnce checks that every timer has exactly one timer.fired event (data.timer_id) and returns the number of
// timer.fired events.
func checkFiredOnce(t *testing.T, db *sql.DB) int {
	t.Helper()
	firedOf := map[string]int{}
	n := 0
	for _, e := range historyEvents(t, db, "") {
		if e.Action == "timer.fired" {
			firedOf[gjson.GetBytes(e.Data, "timer_id").String()]++
			n++
		}
	}
	var bad []string
	for _, id := range queryStrings(t, db, "SELECT id FROM timers") {
		if firedOf[id] != 1 {
			bad = append(bad, fmt.Sprintf("%s (%d)", id, firedOf[id]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d timers did not fire exactly once, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	return n
}

// queryInt runs a query that returns one integer.
func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// queryStrings runs a query that returns one string column.
func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// api calls Halley; a transport error is returned, not fatal, because the tests provoke them.
type api struct {
	hc    *http.Client
	token string
}

func newAPI() *api {
	return &api{hc: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// reply is what a call got.
type reply struct {
	status int
	body   map[string]any
	err    error // transport error: no answer
}

func (r reply) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

func (r reply) code() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

// outcome names a reply for the tallies: the status, or the kind of transport error.
func (r reply) outcome() string {
	if r.err != nil {
		var ne net.Error
		switch {
		case errors.As(r.err, &ne) && ne.Timeout():
			return "timeout"
		case strings.Contains(r.err.Error(), "connection refused"):
			return "refused"
		default:
			return "reset"
		}
	}
	if c := r.code(); c != "" {
		return strconv.Itoa(r.status) + " " + c
	}
	return strconv.Itoa(r.status)
}

func (a *api) call(ctx context.Context, base, method, path string, body any, idemKey string) reply {
	if base == "" {
		return reply{err: errors.New("connection refused: the process is down")}
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	res, err := a.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	out := reply{status: res.StatusCode}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{err: err}
	}
	_ = json.Unmarshal(b, &out.body) // a body that is not JSON is left empty: callers check the status
	return out
}

// mustCall is call for the setup and the checks, where anything but a 2xx fails the test.
func (a *api) mustCall(t *testing.T, base, method, path string, body any) map[string]any {
	t.Helper()
	r := a.call(t.Context(), base, method, path, body, "")
	if !r.ok() {
		t.Fatalf("%s %s: %d %v %v", method, path, r.status, r.body, r.err)
	}
	return r.body
}

const faultAdminPassword = "fault-test-pw"

// faultEnv is the environment every halley of a fault test shares (replicas share the secret).
func faultEnv(extra ...string) []string {
	return append([]string{"HALLEY_ADMIN_PASSWORD=" + faultAdminPassword,
		"HALLEY_SECRET=fault-test-secret-fault-test-secret-0123", "HALLEY_LOG_LEVEL=warn",
		"HALLEY_IDEMPOTENCY_LEASE=" + faultIdempotencyLease.String(), "HALLEY_REDIS_PREFIX=" + newRedisPrefix()}, extra...)
}

// newRedisPrefix is a HALLEY_REDIS_PREFIX no other test run uses: test runs sharing one Redis (this machine's, a
// CI runner's) never see each other's timers, job locks, wake-ups or login attempts. The processes of one test
// share it (one env), as the replicas of one deployment do.
func newRedisPrefix() string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("halley-test-%d-%s:", os.Getpid(), hex.EncodeToString(b[:]))
}

// uniqueRedisPrefix is newRedisPrefix, with the test's keys in the Redis at redisURL deleted when it ends.
func uniqueRedisPrefix(t *testing.T, redisURL string) string {
	p := newRedisPrefix()
	t.Cleanup(func() { dropRedisPrefix(t, redisURL, p) })
	return p
}

// redisKeys lists the keys that match pattern.
func redisKeys(t *testing.T, redisURL, pattern string) []string {
	t.Helper()
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// dropRedisPrefix deletes every key under prefix: the deployment's Redis lost its data (and nobody else's).
func dropRedisPrefix(t *testing.T, redisURL, prefix string) {
	t.Helper()
	if prefix == "" {
		t.Fatal("dropRedisPrefix needs a prefix: it must never flush another run's keys")
	}
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	if keys := redisKeys(t, redisURL, prefix+"*"); len(keys) > 0 {
		if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func (a *api) login(t *testing.T, base string) {
	t.Helper()
	out := a.mustCall(t, base, "POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": faultAdminPassword})
	a.token = out["token"].(string)
}

func (a *api) publish(t *testing.T, base, key string, def map[string]any) {
	t.Helper()
	a.mustCall(t, base, "POST", "/api/v1/templates", map[string]any{"key": key, "definition": def})
	a.mustCall(t, base, "POST", "/api/v1/templates/"+key+"/publish", nil)
}

// approvalsDefinition is a template of n sequential approval nodes decided by the user named in context.approver.
func approvalsDefinition(n int) map[string]any {
	nodes := []any{map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}}}
	var edges []any
	prev := "start"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("a%d", i)
		nodes = append(nodes, map[string]any{"id": id, "type": "approval", "approvers": map[string]any{"context": "approver"}, "sign": "or"})
		edges = append(edges, map[string]any{"from": prev, "to": id})
		prev = id
	}
	nodes = append(nodes, map[string]any{"id": "end", "type": "end"})
	edges = append(edges, map[string]any{"from": prev, "to": "end"})
	return map[string]any{"nodes": nodes, "edges": edges}
}

// pendingTasks returns the ids of the instance's pending tasks.
func (a *api) pendingTasks(ctx context.Context, base, instance string) ([]string, reply) {
	r := a.call(ctx, base, "GET", "/api/v1/tasks?status=pending&instance_id="+instance, nil, "")
	if !r.ok() {
		return nil, r
	}
	items, _ := r.body["items"].([]any)
	ids := make([]string, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if id, _ := m["id"].(string); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids, r
}

// ledger records what a load was told: acknowledged starts (instance id → Idempotency-Key) and approvals
// (task ids), requests that got no answer (to retry with their key), and a tally of outcomes per phase.
type ledger struct {
	mu       sync.Mutex
	phase    string
	started  map[string]string
	approved map[string]bool
	lost     []request
	lostN    int // requests without an answer, including those retried since
	tally    map[string]map[string]int
}

// request is a POST sent with an Idempotency-Key.
type request struct {
	path string
	body any
	key  string
}

func newLedger() *ledger {
	return &ledger{phase: "before", started: map[string]string{}, approved: map[string]bool{}, tally: map[string]map[string]int{}}
}

func (l *ledger) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

func (l *ledger) count(op string, r reply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.phase + " " + op
	if l.tally[k] == nil {
		l.tally[k] = map[string]int{}
	}
	l.tally[k][r.outcome()]++
}

// outcomes counts the replies with outcome in the phases whose name starts with phase.
func (l *ledger) outcomes(phase, outcome string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, m := range l.tally {
		if strings.HasPrefix(k, phase) {
			n += m[outcome]
		}
	}
	return n
}

func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "acknowledged: %d starts, %d approvals; %d requests without an answer", len(l.started), len(l.approved), l.lostN)
	keys := slices.Sorted(maps.Keys(l.tally))
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-24s %v", k, l.tally[k])
	}
	return b.String()
}

// stepLoad runs workers that each start an instance of template key (with its Idempotency-Key as correlation
// id, so the test can find what a start did) and approve its tasks one by one, until ctx is done. Worker i sends
// to bases()[i % len]; an empty base means that process is down, and the worker waits.
func stepLoad(ctx context.Context, a *api, workers int, key string, bases func() []string, l *ledger) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pause := func() {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			for n := 0; ctx.Err() == nil; n++ {
				bs := bases()
				base := bs[w%len(bs)]
				if base == "" {
					pause()
					continue
				}
				idem := fmt.Sprintf("%s-w%d-%d", key, w, n)
				body := map[string]any{"template": key, "correlation_id": idem, "context": map[string]any{"approver": "admin"}}
				r := a.call(ctx, base, "POST", "/api/v1/instances", body, idem)
				if ctx.Err() != nil {
					return
				}
				l.count("start", r)
				if !l.record(request{"/api/v1/instances", body, idem}, r) {
					pause()
					continue
				}
				id, _ := r.body["id"].(string)
				for ctx.Err() == nil {
					tasks, tr := a.pendingTasks(ctx, base, id)
					if ctx.Err() != nil {
						return
					}
					l.count("tasks", tr)
					if !tr.ok() || len(tasks) == 0 {
						break
					}
					tkey := "approve-" + tasks[0]
					path := "/api/v1/tasks/" + tasks[0] + "/approve"
					ar := a.call(ctx, base, "POST", path, map[string]any{"comment": "ok"}, tkey)
					if ctx.Err() != nil {
						return
					}
					l.count("approve", ar)
					if !l.record(request{path, map[string]any{"comment": "ok"}, tkey}, ar) {
						break
					}
				}
			}
		}()
	}
	return &wg
}

// record notes an acknowledged request, or one without an answer; true when it was acknowledged.
func (l *ledger) record(req request, r reply) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.err != nil:
		l.lost = append(l.lost, req)
		l.lostN++
		return false
	case !r.ok():
		return false
	case req.path == "/api/v1/instances":
		id, _ := r.body["id"].(string)
		l.started[id] = req.key
	default:
		l.approved[strings.TrimSuffix(strings.TrimPrefix(req.path, "/api/v1/tasks/"), "/approve")] = true
	}
	return true
}

// retried is a request that got no answer, and what sending it again with the same key got.
type retried struct {
	req   request
	reply reply
}

// faultIdempotencyLease is the HALLEY_IDEMPOTENCY_LEASE of the fault tests' processes: how long a key whose
// request died with its process stays in flight before a retry finds out what became of it.
const faultIdempotencyLease = 2 * time.Second

// retryLost sends every request that got no answer again with the same Idempotency-Key, once the keys' lease has
// passed, and records the answers: a stored response replayed, the result of work that committed but whose answer
// was lost (rebuilt), or the request executed now. A key still refused as in progress is stuck: an error.
func (l *ledger) retryLost(t *testing.T, a *api, base string) []retried {
	t.Helper()
	l.mu.Lock()
	lost := l.lost
	l.lost = nil
	l.mu.Unlock()
	if len(lost) > 0 {
		time.Sleep(faultIdempotencyLease + 500*time.Millisecond) // real processes: their keys age in real time
	}
	out := make([]retried, 0, len(lost))
	for _, req := range lost {
		r := a.call(t.Context(), base, "POST", req.path, req.body, req.key)
		if r.err != nil {
			t.Fatalf("retry %s: %v", req.path, r.err)
		}
		if r.code() == "idempotency_committed" {
			// Its work was committed by the request that died (whose key a failed answer had released): as the
			// error says, sending it again gets that work's result.
			r = a.call(t.Context(), base, "POST", req.path, req.body, req.key)
		}
		if c := r.code(); c == "idempotency_in_progress" || c == "idempotency_committed" {
			t.Errorf("retry of %s with key %s after the lease: %s (the key is stuck)", req.path, req.key, c)
		}
		out = append(out, retried{req, r})
		l.record(req, r)
	}
	return out
}

// summarize tallies retried requests by operation and outcome; for those refused as still in progress it also
// says whether the request had committed (an instance with the key as correlation id, an approved task) or not.
func summarize(t *testing.T, db *sql.DB, rs []retried) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range rs {
		op := "approve"
		if r.req.path == "/api/v1/instances" {
			op = "start"
		}
		k := op + " " + r.reply.outcome()
		if r.reply.code() == "idempotency_in_progress" {
			committed := false
			if op == "start" {
				committed = queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE correlation_id = ?", r.req.key) > 0
			} else {
				task := strings.TrimSuffix(strings.TrimPrefix(r.req.path, "/api/v1/tasks/"), "/approve")
				committed = queryInt(t, db, "SELECT COUNT(*) FROM tasks WHERE id = ? AND status = 'approved'", task) > 0
			}
			if committed {
				k += " (committed)"
			} else {
				k += " (nothing committed)"
			}
		}
		out[k]++
	}
	return out
}

// checkAcknowledged checks the database against the ledger: every acknowledged start is one instance row and
// its Idempotency-Key made exactly one instance; every acknowledged approval is an approved task with exactly one
// decision in the history; no task anywhere has two decisions.
func checkAcknowledged(t *testing.T, db *sql.DB, l *ledger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, key := range l.started {
		if n := queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE id = ?", id); n != 1 {
			t.Errorf("acknowledged start %s: %d instance rows", id, n)
		}
		if n := queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE correlation_id = ?", key); n != 1 {
			t.Errorf("Idempotency-Key %s made %d instances", key, n)
		}
	}
	approvals := map[string]int{} // task id → its approvals in the history
	decisions := map[string]int{} // task id → its approvals and rejections
	for _, e := range historyEvents(t, db, "") {
		if e.TaskID == "" || e.Action != "task.approved" && e.Action != "task.rejected" {
			continue
		}
		decisions[e.TaskID]++
		if e.Action == "task.approved" {
			approvals[e.TaskID]++
		}
	}
	var dup []string
	for id, n := range decisions {
		if n > 1 {
			dup = append(dup, id)
		}
	}
	for id := range l.approved {
		var status string
		if err := db.QueryRow("SELECT status FROM tasks WHERE id = ?", id).Scan(&status); err != nil {
			t.Errorf("acknowledged approval of task %s: %v", id, err)
			continue
		}
		if status != "approved" {
			t.Errorf("acknowledged approval of task %s: status %s", id, status)
		}
		if n := approvals[id]; n != 1 {
			t.Errorf("task %s: %d approvals in the history", id, n)
		}
	}
	if len(dup) > 0 {
		t.Errorf("tasks with two decisions: %v", dup)
	}
	if dup := queryStrings(t, db, "SELECT correlation_id FROM instances GROUP BY correlation_id HAVING COUNT(*) > 1"); len(dup) > 0 {
		t.Errorf("Idempotency-Keys that made two instances: %v", dup)
	}
}

// finishRunning approves the open tasks of every running instance until each one completes, proving that none
// is stuck; it returns how many it finished.
func finishRunning(t *testing.T, a *api, base string, db *sql.DB) int {
	t.Helper()
	ids := queryStrings(t, db, "SELECT id FROM instances WHERE status = 'running'")
	for _, id := range ids {
		ok := testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
			inst := a.mustCall(t, base, "GET", "/api/v1/instances/"+id, nil)
			if inst["status"] != "running" {
				return true
			}
			tasks, r := a.pendingTasks(t.Context(), base, id)
			if !r.ok() {
				t.Fatalf("tasks of %s: %s", id, r.outcome())
			}
			for _, task := range tasks {
				if r := a.call(t.Context(), base, "POST", "/api/v1/tasks/"+task+"/approve", map[string]any{"comment": "finish"}, ""); !r.ok() && r.status != http.StatusConflict {
					t.Fatalf("approve %s of %s: %s %v", task, id, r.outcome(), r.body)
				}
			}
			return false
		})
		if !ok {
			inst := a.mustCall(t, base, "GET", "/api/v1/instances/"+id, nil)
			t.Fatalf("instance %s is stuck: %v", id, inst)
		}
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status <> 'completed'"); n != 0 {
		t.Errorf("%d instances did not complete", n)
	}
	return len(ids)
}
