package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/templates"
	exampleplugins "github.com/halley-bpm/halley/templates/plugins"
)

func examplePlugins() ([]exampleplugins.File, error) { return exampleplugins.All() }

// runs records every plugin run the test executors completed.
type runs struct {
	mu   sync.Mutex
	done map[string]int
	ch   chan string
}

func newRuns() *runs { return &runs{done: map[string]int{}, ch: make(chan string, 1000)} }

func (r *runs) complete(j plugin.Job, _ plugin.Result, err error) {
	r.mu.Lock()
	r.done[j.RunID]++
	r.mu.Unlock()
	r.ch <- j.RunID
}

// wait blocks until n more runs completed (10 s guard against a hung test, not a timing assumption).
func (r *runs) wait(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-r.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d plugin runs completed", i, n)
		}
	}
}

// newExecutor returns a real executor (real child processes) reporting to rec and logging runs in st, not yet
// running; now is the env's clock: leases are set and checked on the same clock the test moves.
func newExecutor(t *testing.T, st plugin.RunLogStore, rec *runs, worker string, now func() time.Time) *plugin.Executor {
	t.Helper()
	return newExecutorWith(t, st, rec, worker, now, &plugin.ProcessRunner{WorkRoot: t.TempDir()})
}

// newExecutorWith is newExecutor with a runner of the test's.
func newExecutorWith(t *testing.T, st plugin.RunLogStore, rec *runs, worker string, now func() time.Time, runner plugin.Runner) *plugin.Executor {
	t.Helper()
	logs, err := plugin.NewDBLog(st)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := plugin.NewExecutor(runner,
		plugin.ExecutorOptions{Workers: 2, PollInterval: 10 * time.Millisecond, Lease: 30 * time.Second, WorkerID: worker, OnComplete: rec.complete,
			Logs: logs, Logger: testkit.Quiet(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// runExecutor runs ex on the queue until the test ends.
func runExecutor(t *testing.T, ex *plugin.Executor, q plugin.Queue) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ex.Run(ctx, q); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// startExecutor runs a real executor that claims the env's engine's runs until the test ends.
func startExecutor(t *testing.T, d *server.Deps, rec *runs, worker string, now func() time.Time) {
	t.Helper()
	runExecutor(t, newExecutor(t, d.Plugins, rec, worker, now), d.Engine.PluginQueue())
}

// withPlugins allows small plugin uploads and, with rec, runs an executor that claims the runs.
func withPlugins(t *testing.T, rec *runs) func(*server.Deps) {
	return func(d *server.Deps) {
		d.PluginMaxSize = 64 << 10
		if rec != nil {
			startExecutor(t, d, rec, "w1", d.Engine.Now)
		}
	}
}

func (e *env) upload(name, runtime, timeout string, file []byte, token string) resp {
	e.t.Helper()
	return e.uploadWith(map[string]string{"name": name, "runtime": runtime, "timeout": timeout}, file, token)
}

// uploadWith uploads a plugin with the given multipart fields (empty ones are left out).
func (e *env) uploadWith(fields map[string]string, file []byte, token string) resp {
	e.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, k := range []string{"name", "runtime", "timeout", "network", "warm"} {
		if v := fields[k]; v != "" {
			_ = mw.WriteField(k, v)
		}
	}
	fw, _ := mw.CreateFormFile("file", "plugin.py")
	_, _ = fw.Write(file)
	mw.Close()
	req, _ := http.NewRequest("POST", e.url+"/api/v1/plugins", &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	r := resp{Status: res.StatusCode, Body: body}
	_ = json.Unmarshal(body, &r.JSON) // a body that is not JSON is left empty: callers check the status
	return r
}

const editContext = `import json, sys
d = json.load(sys.stdin)
print(json.dumps({"context": {"checked_by": "plugin", "phase_seen": d["phase"], "node_seen": d["node"]["id"]}}))
`

func TestPluginUpload(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, withPlugins(t, nil))
		bob := e.mkUser("bob")
		r := e.upload("edit-ctx", "python", "5s", []byte(editContext), e.admin)
		sum := sha256.Sum256([]byte(editContext))
		if r.Status != 201 || fmt.Sprint(r.JSON["version"]) != "1" || r.JSON["sha256"] != hex.EncodeToString(sum[:]) || fmt.Sprint(r.JSON["size"]) != fmt.Sprint(len(editContext)) || r.JSON["runtime"] != "python" {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		if r = e.upload("edit-ctx", "python", "", []byte(editContext+"\n"), e.admin); r.Status != 201 || fmt.Sprint(r.JSON["version"]) != "2" {
			t.Fatalf("second upload: %s", r.Body)
		}
		for _, bad := range []string{"../x", "a/b", "Edit", "", ".", strings.Repeat("a", 65), "sandbox"} {
			assertError(t, e.upload(bad, "python", "", []byte("print(1)"), e.admin), 400, "")
		}
		assertError(t, e.upload("ok-name", "ruby", "", []byte("x"), e.admin), 400, "invalid_runtime")
		assertError(t, e.upload("ok-name", "python", "3d", []byte("x"), e.admin), 400, "invalid_timeout")
		assertError(t, e.upload("big", "python", "", bytes.Repeat([]byte("#"), 100<<10), e.admin), 413, "")
		assertError(t, e.upload("mine", "python", "", []byte("print(1)"), bob), 403, "admin_required")
		r = e.do("GET", "/api/v1/plugins/edit-ctx", e.admin, nil, nil)
		if r.Status != 200 || len(r.JSON["versions"].([]any)) != 2 || fmt.Sprint(r.JSON["version"]) != "2" {
			t.Fatalf("get: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/plugins", e.admin, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 {
			t.Fatalf("list: %s", r.Body)
		}
		if _, err := s.GetPlugin(ctx0, "default", "big", 0); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatal("a refused upload left a row")
		}
		assertError(t, e.do("GET", "/api/v1/plugins/nope", e.admin, nil, nil), 404, "plugin_not_found")
	})
}

func TestPluginsInNodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		e := newEnv(t, s, withPlugins(t, rec))
		bob := e.mkUser("bob")
		e.upload("edit-ctx", "python", "5s", []byte(editContext), e.admin)
		e.upload("say-no", "python", "5s", []byte(`print('{"decision": "reject"}')`), e.admin)
		e.publish("pre-after", []any{start(M{"kind": "manual"}),
			M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "plugins": M{"pre": []string{"edit-ctx"}, "after": []string{"edit-ctx@1"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "pre-after"}, nil)
		id := r.JSON["id"].(string)
		if len(r.JSON["tasks"].([]any)) != 0 || nodeState(r, "lead") != "active" {
			t.Fatalf("tasks before the pre plugin finished: %s", r.Body)
		}
		rec.wait(t, 1)
		r = e.instance(id)
		if len(r.JSON["tasks"].([]any)) != 1 || r.JSON["context"].(M)["phase_seen"] != "pre" || r.JSON["context"].(M)["node_seen"] != "lead" {
			t.Fatalf("after the pre plugin: %s", r.Body)
		}
		task := r.JSON["tasks"].([]any)[0].(M)["id"].(string)
		if r = e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{}, nil); r.Status != 200 {
			t.Fatalf("approve: %s", r.Body)
		}
		if r = e.instance(id); r.JSON["status"] != "running" || nodeState(r, "lead") != "active" {
			t.Fatalf("the node must wait for its after plugin: %s", r.Body)
		}
		rec.wait(t, 1)
		if r = e.instance(id); r.JSON["status"] != "completed" || r.JSON["context"].(M)["phase_seen"] != "after" {
			t.Fatalf("after the after plugin: %s", r.Body)
		}
		runs := e.do("GET", "/api/v1/plugins/edit-ctx/runs?instance_id="+id+"&date="+e.clock.Now().UTC().Format("2006-01-02"), e.admin, nil, nil)
		items := runs.JSON["items"].([]any)
		if len(items) != 2 || items[0].(M)["status"] != "succeeded" || items[0].(M)["exit_code"] != float64(0) || items[0].(M)["duration_ms"] == nil {
			t.Fatalf("run log: %s", runs.Body)
		}
		assertError(t, e.do("GET", "/api/v1/plugins/edit-ctx/runs?date=yesterday", e.admin, nil, nil), 400, "invalid_date")
		// The record of every attempt, from the database.
		runID := items[0].(M)["id"].(string)
		if lg := e.do("GET", "/api/v1/plugin-runs/"+runID+"/log", e.admin, nil, nil); lg.Status != 200 ||
			!strings.Contains(string(lg.Body), "=== run "+runID+" attempt 1 ===") || !strings.Contains(string(lg.Body), "status:      succeeded") ||
			!strings.HasPrefix(lg.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("run log: %d %s", lg.Status, lg.Body)
		}
		assertError(t, e.do("GET", "/api/v1/plugin-runs/"+runID+"/log", bob, nil, nil), 403, "admin_required")
		assertError(t, e.do("GET", "/api/v1/plugin-runs/nope/log", e.admin, nil, nil), 404, "plugin_log_not_found")

		// An auto node whose plugin decides "reject" rejects; no end is reachable, so the instance is rejected.
		e.publish("auto-no", []any{start(M{"kind": "manual"}), M{"id": "check", "type": "auto", "plugins": M{"pre": []string{"say-no"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "check"), edge("check", "end")})
		id = e.do("POST", "/api/v1/instances", e.admin, M{"template": "auto-no"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		if r = e.instance(id); r.JSON["status"] != "rejected" || nodeState(r, "check") != "rejected" {
			t.Fatalf("auto reject: %s", r.Body)
		}
		// A skipped node runs no plugins.
		e.publish("skip-plugins", []any{start(M{"kind": "manual"}), M{"id": "maybe", "type": "auto", "plugins": M{"pre": []string{"edit-ctx"}}}, M{"id": "end", "type": "end", "join": "or"}},
			[]any{M{"from": "start", "to": "maybe", "condition": M{"go": true}}, M{"from": "start", "to": "end", "default": true}, edge("maybe", "end")})
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "skip-plugins"}, nil)
		if r.JSON["status"] != "completed" || nodeState(r, "maybe") != "skipped" {
			t.Fatalf("skip: %s", r.Body)
		}
		if runs := e.do("GET", "/api/v1/plugins/edit-ctx/runs?instance_id="+r.JSON["id"].(string), e.admin, nil, nil); len(runs.JSON["items"].([]any)) != 0 {
			t.Fatalf("a skipped node ran a plugin: %s", runs.Body)
		}
	})
}

func TestPluginFailuresAndAsync(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		e := newEnv(t, s, withPlugins(t, rec))
		e.mkUser("bob")
		marker := filepath.Join(t.TempDir(), "attempts")
		flaky := fmt.Sprintf(`import json, os, sys
p = %q
n = int(open(p).read()) if os.path.exists(p) else 0
open(p, "w").write(str(n + 1))
if n == 0:
    sys.stderr.write("first try fails\n")
    sys.exit(3)
print(json.dumps({"context": {"flaky_ok": n + 1}}))
`, marker)
		e.upload("flaky", "python", "5s", []byte(flaky), e.admin)
		e.upload("broken", "python", "5s", []byte("import sys\nsys.exit(3)\n"), e.admin)
		e.upload("later", "python", "5s", []byte(`print('{"async": true}')`), e.admin)

		// Retry, then success.
		e.publish("retry-ok", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"flaky"}},
			"error_handler": M{"operation": "retry", "retry": M{"count": 2, "period": "30s"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "retry-ok"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		if r := e.instance(id); nodeState(r, "work") != "waiting" {
			t.Fatalf("first failure must schedule a retry: %s", r.Body)
		}
		e.advance(31 * time.Second)
		e.fireDue()
		rec.wait(t, 1)
		if r := e.instance(id); r.JSON["status"] != "completed" || r.JSON["context"].(M)["flaky_ok"] != float64(2) {
			t.Fatalf("retry then success: %s", r.Body)
		}
		runs := e.do("GET", "/api/v1/plugins/flaky/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)
		if len(runs) != 2 || runs[1].(M)["status"] != "failed" || runs[1].(M)["exit_code"] != float64(3) || !strings.Contains(runs[1].(M)["stderr"].(string), "first try fails") {
			t.Fatalf("runs: %v", runs)
		}

		// Retries exhausted → catch branch.
		e.publish("retry-catch-plugin", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"broken"}},
			"error_handler": M{"operation": "retry", "retry": M{"count": 1, "period": "10s"}, "catch": M{"branch": "fix"}}},
			M{"id": "fix", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}, M{"id": "end2", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end"), edge("fix", "end2")})
		id = e.do("POST", "/api/v1/instances", e.admin, M{"template": "retry-catch-plugin"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		e.advance(11 * time.Second)
		e.fireDue()
		rec.wait(t, 1)
		if r := e.instance(id); nodeState(r, "work") != "failed" || nodeState(r, "fix") != "active" || !strings.Contains(fmt.Sprint(r.JSON["context"].(M)["error"]), "exit") {
			t.Fatalf("retry exhausted → catch: %s", r.Body)
		}

		// Async: the plugin answers {"async": true}; its system finishes it through the signed result URL.
		e.publish("async", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"later"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		id = e.do("POST", "/api/v1/instances", e.admin, M{"template": "async"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		if r := e.instance(id); nodeState(r, "work") != "active" || r.JSON["status"] != "running" {
			t.Fatalf("async plugin must leave the node waiting: %s", r.Body)
		}
		run := e.do("GET", "/api/v1/plugins/later/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)[0].(M)
		if run["status"] != "waiting" {
			t.Fatalf("run: %v", run)
		}
		runID := run["id"].(string)
		var in struct {
			CallbackURL string `json:"callback_url"`
		}
		stored, _ := s.GetRun(ctx0, "default", runID)
		if err := json.Unmarshal(stored.Input, &in); err != nil {
			t.Fatal(err)
		}
		path := strings.TrimPrefix(in.CallbackURL, "http://halley.test")
		assertError(t, e.do("POST", "/api/v1/plugin-runs/"+runID+"/result?token=forged", "", M{"status": "succeeded"}, nil), 401, "invalid_result_token")
		assertError(t, e.do("POST", path, "", M{"status": "maybe"}, nil), 400, "invalid_status")
		// A decision other than approve or reject was stored and read as approve.
		assertError(t, e.do("POST", path, "", M{"status": "succeeded", "data": M{"context": M{}, "decision": "maybe"}}, nil), 400, "invalid_decision")
		assertError(t, e.do("POST", path, "", M{"status": "succeeded", "data": M{"context": M{}, "decision": 1}}, nil), 400, "invalid_decision")
		if r := e.instance(id); nodeState(r, "work") != "active" {
			t.Fatalf("a refused result moved the node: %s", r.Body)
		}
		r := e.do("POST", path, "", M{"status": "succeeded", "data": M{"ticket": "T-1"}}, nil)
		if r.Status != 200 || r.JSON["status"] != "succeeded" {
			t.Fatalf("result: %d %s", r.Status, r.Body)
		}
		if r = e.instance(id); r.JSON["status"] != "completed" || r.JSON["context"].(M)["ticket"] != "T-1" {
			t.Fatalf("after the result: %s", r.Body)
		}
		assertError(t, e.do("POST", path, "", M{"status": "succeeded"}, nil), 409, "run_closed")
		assertError(t, e.do("POST", "/api/v1/plugin-runs/nope/result", e.admin, M{"status": "failed"}, nil), 404, "")
	})
}

// TestRunErrorBeforeStart: a run that fails before its process starts (a runner that cannot prepare it, a plugin
// file gone from the database) records why; the run log shows the error, with no exit code (none exists).
func TestRunErrorBeforeStart(t *testing.T) {
	cases := []struct {
		name   string
		runner func(t *testing.T) plugin.Runner
		break_ func(t *testing.T, s *store.Store, sha string)
		want   string
		// prepared: the run fails while its claim prepares it (its file cannot be fetched), before an executor
		// gets it: no OnComplete to wait for.
		prepared bool
	}{
		{"a relative work root (the embedded default's old bug)", func(t *testing.T) plugin.Runner {
			return &plugin.ProcessRunner{WorkRoot: "data/plugin-work"}
		}, nil, `WorkRoot "data/plugin-work" must be an absolute directory`, false},
		{"no interpreter", func(t *testing.T) plugin.Runner {
			return &plugin.ProcessRunner{WorkRoot: t.TempDir(), Python: "/nonexistent/python3"}
		}, nil, "interpreter /nonexistent/python3 is not an executable file", false},
		{"the plugin file is gone", func(t *testing.T) plugin.Runner {
			return &plugin.ProcessRunner{WorkRoot: t.TempDir()}
		}, func(t *testing.T, s *store.Store, sha string) {
			for _, table := range []string{"blob_chunks", "blobs"} {
				if err := s.DB().Exec("DELETE FROM "+table+" WHERE sha256 = ?", sha).Error; err != nil {
					t.Fatal(err)
				}
			}
		}, "is not stored in the database", true},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rec := newRuns()
				e := newEnv(t, s, func(d *server.Deps) {
					withPlugins(t, nil)(d)
					runExecutor(t, newExecutorWith(t, s, rec, "w1", d.Engine.Now, tc.runner(t)), d.Engine.PluginQueue())
				})
				up := e.upload("probe", "python", "5s", []byte(editContext), e.admin)
				if up.Status != 201 {
					t.Fatalf("upload: %d %s", up.Status, up.Body)
				}
				if tc.break_ != nil {
					tc.break_(t, s, up.JSON["sha256"].(string))
				}
				key := fmt.Sprintf("before-start-%d", time.Now().UnixNano())
				e.publish(key, []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"after": []string{"probe"}}}, M{"id": "end", "type": "end"}},
					[]any{edge("start", "work"), edge("work", "end")})
				id := e.do("POST", "/api/v1/instances", e.admin, M{"template": key}, nil).JSON["id"].(string)
				runs := func() []any {
					return e.do("GET", "/api/v1/plugins/probe/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)
				}
				if tc.prepared {
					deadline := time.Now().Add(10 * time.Second)
					// The claim commits the run running, then records it failed: wait for the second commit.
					for items := runs(); len(items) == 0 || items[0].(M)["status"] == "queued" || items[0].(M)["status"] == "running"; items = runs() {
						if time.Now().After(deadline) {
							t.Fatalf("the run was never failed: %v", runs())
						}
						time.Sleep(20 * time.Millisecond)
					}
				} else {
					rec.wait(t, 1)
				}
				items := runs()
				if len(items) != 1 {
					t.Fatalf("runs: %v", items)
				}
				run := items[0].(M)
				if run["status"] != "failed" || run["exit_code"] != nil || !strings.Contains(fmt.Sprint(run["error"]), tc.want) {
					t.Fatalf("the run must be failed, without exit code, with an error naming %q: %v", tc.want, run)
				}
				if r := e.instance(id); r.JSON["status"] == "completed" || nodeState(r, "work") != "failed" || !strings.Contains(nodeField(r, "work", "error"), tc.want) {
					t.Fatalf("the instance must not complete and its node must carry the error: %s", r.Body)
				}
			})
		}
	})
}

// nodeField is a field of the node state of id in an instance answer, as text ("" when absent).
func nodeField(r resp, id, field string) string {
	for _, n := range r.JSON["nodes"].([]any) {
		if n.(M)["node_id"] == id && n.(M)[field] != nil {
			return fmt.Sprint(n.(M)[field])
		}
	}
	return ""
}

// TestTwoExecutorsAndRescue: two executors on two store connections share the runs of one MySQL database, each
// run executed exactly once; a run held by a dead worker is rescued after its lease.
func TestTwoExecutorsAndRescue(t *testing.T) {
	u := storetest.URL(t, store.MySQL)
	open := func() *store.Store {
		st, err := store.Open(context.Background(), store.Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	s1 := open()
	if _, err := s1.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := open()
	rec := newRuns()
	e := newEnv(t, s1, func(d *server.Deps) {
		withPlugins(t, nil)(d)
		startExecutor(t, d, rec, "w1", d.Engine.Now)
	})
	// The second executor is another process's: its own engine on its own connections, its own plugin cache
	// (files come from the database).
	eng2 := enginetest.New(t, s2, template.New(s2, template.Options{Clock: e.clock}), s2, engine.Options{Clock: e.clock})
	runExecutor(t, newExecutor(t, s2, rec, "w2", e.clock.Now), eng2.PluginQueue())
	count := filepath.Join(t.TempDir(), "count")
	if err := os.WriteFile(count, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.upload("tick", "python", "5s", []byte(fmt.Sprintf(`open(%q, "a").write("x")
print("{}")
`, count)), e.admin)
	e.publish("ticks", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}}, M{"id": "end", "type": "end"}},
		[]any{edge("start", "work"), edge("work", "end")})
	const n = 30
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.do("POST", "/api/v1/instances", e.admin, M{"template": "ticks"}, nil).JSON["id"].(string)
	}
	rec.wait(t, n)
	for _, id := range ids {
		if st := e.instance(id).JSON["status"]; st != "completed" {
			t.Fatalf("instance %s %v", id, st)
		}
	}
	b, _ := os.ReadFile(count)
	if len(b) != n {
		t.Fatalf("%d executions for %d runs", len(b), n)
	}
	for id, c := range rec.done {
		if c != 1 {
			t.Fatalf("run %s completed %d times", id, c)
		}
	}
}

// TestRunRescue: a worker claims a run and dies; when its lease expires a live executor runs it (attempt 2).
func TestRunRescue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		var deps server.Deps
		e := newEnv(t, s, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			deps = *d
		})
		e.upload("tick", "python", "5s", []byte("print('{\"context\": {\"ticked\": true}}')\n"), e.admin)
		e.publish("ticks", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "ticks"}, nil).JSON["id"].(string)
		claimed, err := s.ClaimRuns(context.Background(), "dead-worker", 10, e.clock.Now(), e.clock.Now().Add(time.Minute))
		if err != nil || len(claimed) != 1 {
			t.Fatalf("dead worker claim: %v %v", claimed, err)
		}
		startExecutor(t, &deps, rec, "live", deps.Engine.Now)
		// While the lease holds, the live executor leaves the run alone.
		if again, _ := s.ClaimRuns(context.Background(), "probe", 10, e.clock.Now(), e.clock.Now().Add(time.Minute)); len(again) != 0 {
			t.Fatalf("a leased run was claimed again: %v", again)
		}
		e.advance(2 * time.Minute) // past the lease
		rec.wait(t, 1)
		r, _ := s.GetRun(context.Background(), "default", claimed[0].ID)
		if r.Status != model.RunSucceeded || r.Attempt != 2 {
			t.Fatalf("rescued run: %+v", r)
		}
		if st := e.instance(id).JSON["status"]; st != "completed" {
			t.Fatalf("instance after the rescue: %v", st)
		}
	})
}

// TestStaleClaimLeasesFromTheRunsCreation: a claim whose transaction runs late (here: its now is before the run
// existed, as when the clock moved on while the claim waited for a lock) must not lease the newer run until a time
// already past — the next claim would take it again while it still executes (two processes of one run). The
// lease runs from the run's creation then. Found as a flaky TestPluginFailuresAndAsync under load.
func TestStaleClaimLeasesFromTheRunsCreation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, withPlugins(t, nil))
		e.upload("tick", "python", "5s", []byte("print('{\"context\": {\"ticked\": true}}')\n"), e.admin)
		e.publish("ticks", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		before := e.clock.Now()
		e.advance(time.Minute)
		e.do("POST", "/api/v1/instances", e.admin, M{"template": "ticks"}, nil)
		stale, err := s.ClaimRuns(context.Background(), "late", 10, before, before.Add(30*time.Second))
		if err != nil || len(stale) != 1 {
			t.Fatalf("late claim: %v %v", stale, err)
		}
		if lu := stale[0].LeaseUntil; lu == nil || lu.Before(stale[0].CreatedAt.Add(30*time.Second)) {
			t.Fatalf("the late claim leased the run until %v, before its creation (%v) + the lease", lu, stale[0].CreatedAt)
		}
		e.advance(time.Second)
		if again, err := s.ClaimRuns(context.Background(), "w", 10, e.clock.Now(), e.clock.Now().Add(30*time.Second)); err != nil || len(again) != 0 {
			t.Fatalf("a run still leased was claimed again: %v %v", again, err)
		}
	})
}

// TestCacheTemplateEndToEnd runs the ready-made cache-resource-change template (seeds/003) with its example
// plugin create-cache: a large request goes through the owner and the SRE lead, then the auto node's plugin
// creates the cache and writes it into the context.
func TestCacheTemplateEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		e := newEnv(t, s, func(d *server.Deps) { withPlugins(t, rec)(d); d.BodyLimit = 1 << 20 }) // the ready-made template is larger than 4 KiB
		mgr := e.mkUser("mgr")
		lee := e.mkUser("lee", "sre-lead")
		r := e.do("POST", "/api/v1/users", e.admin, M{"username": "alice", "password": "pw-alice-123", "manager": "mgr"}, nil)
		if r.Status != 201 {
			t.Fatalf("alice: %s", r.Body)
		}
		alice := e.do("POST", "/api/v1/auth/login", "", M{"username": "alice", "password": "pw-alice-123"}, nil).JSON["token"].(string)
		pls, err := examplePlugins()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pls {
			if r := e.upload(p.Name, p.Runtime, "30s", p.Source, e.admin); r.Status != 201 {
				t.Fatalf("upload %s: %s", p.Name, r.Body)
			}
		}
		all, _ := templates.All()
		for _, tp := range all {
			if tp.Key == "cache-resource-change" {
				e.do("POST", "/api/v1/templates", e.admin, tp, nil)
				if r := e.do("POST", "/api/v1/templates/"+tp.Key+"/publish", e.admin, nil, nil); r.Status != 201 {
					t.Fatalf("publish: %s", r.Body)
				}
			}
		}
		id := e.do("POST", "/api/v1/instances", alice, M{"template": "cache-resource-change", "context": M{"memory_gb": 64, "cluster": "sh-001", "app": "feed"}}, nil).JSON["id"].(string)
		e.act(mgr, id, "owner/mgr", "approve", M{})
		e.act(lee, id, "sre_lead/lee", "approve", M{})
		rec.wait(t, 1)
		r = e.instance(id)
		cache, _ := r.JSON["context"].(M)["cache"].(M)
		if r.JSON["status"] != "completed" || cache["status"] != "created" || cache["cluster"] != "sh-001" {
			t.Fatalf("cache template: %s", r.Body)
		}
	})
}

// TestHandOver: runs queued while the attached executor has a free worker are written leased to it and run
// without a claim; a polling executor on the same database races it. Every run executes exactly once, and a
// sync trigger returns the plugin's result.
func TestHandOver(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		clk := &testClock{t: time.Now()}
		local := newExecutor(t, s, rec, "local", clk.Now) // the engine's own: runs are handed to it at the commit
		e := newEnvWith(t, s, wiring{clock: clk, executor: local}, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			runExecutor(t, local, d.Engine.PluginQueue())
			startExecutor(t, d, rec, "poller", d.Engine.Now)
		})
		count := filepath.Join(t.TempDir(), "count")
		if err := os.WriteFile(count, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		e.upload("tick", "python", "5s", []byte(fmt.Sprintf(`import json, sys
d = json.load(sys.stdin)
open(%q, "a").write("x")
print(json.dumps({"context": {"echo": d["context"].get("n")}}))
`, count)), e.admin)
		e.publish("ticks", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		const n = 12
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[i] = e.do("POST", "/api/v1/instances", e.admin, M{"template": "ticks", "context": M{"n": i}}, nil).JSON["id"].(string)
			}()
		}
		wg.Wait()
		rec.wait(t, n)
		for i, id := range ids {
			r := e.instance(id)
			if r.JSON["status"] != "completed" || r.JSON["context"].(M)["echo"] != float64(i) {
				t.Fatalf("instance %s: %s", id, r.Body)
			}
		}
		if b, _ := os.ReadFile(count); len(b) != n {
			t.Fatalf("%d executions for %d runs", len(b), n)
		}
		rec.mu.Lock()
		for id, c := range rec.done {
			if c != 1 {
				t.Fatalf("run %s completed %d times", id, c)
			}
		}
		rec.mu.Unlock()
		if handed := e.rowCount("plugin_runs", "lease_owner = ? AND attempt = 1 AND status = ?", "local", model.RunSucceeded); handed == 0 {
			t.Fatalf("no run was handed over")
		}
		if queued := e.rowCount("outbox", "kind = ?", model.OutboxPluginRun); queued+e.rowCount("plugin_runs", "lease_owner = ?", "local") < n {
			t.Fatalf("a run neither handed over nor queued through the outbox")
		}

		// A sync trigger waits for the plugin's result and answers with it.
		e.publish("sync-tick", []any{start(M{"kind": "sync-api", "module": "t", "function": "tick"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "work"), edge("work", "end")})
		r := e.do("POST", "/api/v1/trigger/sync/t/tick?wait=10", "", M{"n": 42}, nil)
		if r.Status != 200 || r.JSON["status"] != "completed" || r.JSON["context"].(M)["echo"] != float64(42) {
			t.Fatalf("sync trigger: %d %s", r.Status, r.Body)
		}
	})
}

// deadExecutor is a local executor that takes every run (until it is off) and dies between the commit and the
// hand-over: offered runs are never run.
type deadExecutor struct{ off atomic.Bool }

func (d *deadExecutor) Available() bool          { return !d.off.Load() }
func (*deadExecutor) WorkerID() string           { return "dead" }
func (*deadExecutor) Lease() time.Duration       { return time.Minute }
func (*deadExecutor) Offer(jobs ...plugin.Job)   {}
func (*deadExecutor) StopRuns(map[string]string) {}

// TestHandOverLost: a run written leased to the local executor whose process dies before the hand-over is left
// alone while its lease holds, then claimed by another executor as attempt 2.
func TestHandOverLost(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		var deps server.Deps
		dead := &deadExecutor{}
		e := newEnvWith(t, s, wiring{executor: dead}, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			deps = *d
		})
		e.upload("tick", "python", "5s", []byte("print('{\"context\": {\"ticked\": true}}')\n"), e.admin)
		e.publish("ticks", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"tick"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "work"), edge("work", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "ticks"}, nil).JSON["id"].(string)
		dead.off.Store(true)
		if n := e.rowCount("plugin_runs", "instance_id = ? AND status = ? AND lease_owner = ? AND started_at IS NOT NULL AND lease_until IS NOT NULL",
			id, model.RunRunning, "dead"); n != 1 {
			t.Fatalf("the run is not written leased: %d", n)
		}
		startExecutor(t, &deps, rec, "live", deps.Engine.Now)
		if again, _ := s.ClaimRuns(context.Background(), "probe", 10, e.clock.Now(), e.clock.Now().Add(time.Minute)); len(again) != 0 {
			t.Fatalf("a leased run was claimed: %v", again)
		}
		e.advance(2 * time.Minute) // past the lease
		rec.wait(t, 1)
		runs := e.do("GET", "/api/v1/plugins/tick/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)
		if len(runs) != 1 || runs[0].(M)["status"] != "succeeded" || runs[0].(M)["attempt"] != float64(2) {
			t.Fatalf("rescued run: %v", runs)
		}
		if st := e.instance(id).JSON["status"]; st != "completed" {
			t.Fatalf("instance after the rescue: %v", st)
		}
	})
}

// rowCount counts the rows of a table matching where.
func (e *env) rowCount(table, where string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.store.DB().Table(table).Where(where, args...).Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// sandboxFor returns a sandbox as production builds it, with uids of the server package's own (63000 on) and a
// work root the plugin uids can reach. Under CI (root) every protection the tests rely on must be in force.
func sandboxFor(t *testing.T, uid int) *plugin.Sandbox {
	t.Helper()
	cfg := plugin.DefaultSandboxConfig(2)
	cfg.UID, cfg.GID = uid, uid
	work := t.TempDir()
	for _, p := range []string{work, filepath.Dir(work)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg.WorkRoot = filepath.Join(work, "work")
	cfg.Logger = testkit.Quiet()
	sb, err := plugin.NewSandbox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	for _, n := range []string{plugin.ProtectUser, plugin.ProtectNetwork, plugin.ProtectUnixSockets, plugin.ProtectPrivateTmp} {
		if p := sb.Report().Protection(n); !p.InForce {
			if os.Getenv("CI") == "true" {
				t.Fatalf("sandbox protection %s is not in force: %s", n, p.Detail)
			}
			t.Skipf("sandbox protection %s is not in force: %s", n, p.Detail)
		}
	}
	return sb
}

// TestPluginWarmOption: warm=false is validated, stored, answered, and makes the executor spawn that plugin's runs
// (a fresh interpreter whose parent is this process) where the others are forked by the warm runtime.
func TestPluginWarmOption(t *testing.T) {
	testkit.RequirePython(t, "")
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		runner := &plugin.ProcessRunner{WorkRoot: t.TempDir()}
		t.Cleanup(runner.Close)
		e := newEnv(t, s, func(d *server.Deps) {
			d.PluginMaxSize = 64 << 10
			runExecutor(t, newExecutorWith(t, s, rec, "w1", d.Engine.Now, runner), d.Engine.PluginQueue())
		})
		src := []byte("import json, os\nprint(json.dumps({\"context\": {\"ppid\": os.getppid()}}))\n")
		for _, c := range []struct{ name, warm string }{{"cold", "false"}, {"cold0", "0"}, {"warm", ""}, {"warm1", "1"}, {"warmt", "true"}} {
			r := e.uploadWith(map[string]string{"name": c.name, "runtime": "python", "warm": c.warm}, src, e.admin)
			want := !strings.HasPrefix(c.name, "cold")
			if r.Status != 201 || r.JSON["warm"] != want {
				t.Fatalf("upload warm=%q: %d %s", c.warm, r.Status, r.Body)
			}
		}
		for _, bad := range []string{"yes", "TRUE", "off", "2"} {
			assertError(t, e.uploadWith(map[string]string{"name": "odd", "runtime": "python", "warm": bad}, src, e.admin), 422, "invalid_warm")
		}
		if _, err := s.GetPlugin(ctx0, "default", "odd", 0); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatal("a refused upload left a row")
		}
		r := e.do("GET", "/api/v1/plugins/cold", e.admin, nil, nil)
		if r.JSON["warm"] != false || r.JSON["versions"].([]any)[0].(M)["warm"] != false {
			t.Fatalf("get cold: %s", r.Body)
		}
		if r = e.do("GET", "/api/v1/plugins/warm", e.admin, nil, nil); r.JSON["warm"] != true {
			t.Fatalf("get warm: %s", r.Body)
		}
		warmOf := map[string]any{}
		for _, it := range e.do("GET", "/api/v1/plugins", e.admin, nil, nil).JSON["items"].([]any) {
			warmOf[it.(M)["name"].(string)] = it.(M)["warm"]
		}
		if warmOf["cold"] != false || warmOf["warm"] != true || warmOf["cold0"] != false || warmOf["warm1"] != true {
			t.Fatalf("list: %v", warmOf)
		}
		if p, err := s.GetPlugin(ctx0, "default", "cold", 1); err != nil || p.Warm {
			t.Fatalf("stored: %+v %v", p, err)
		}

		// Through the engine's queue and the executor: the cold plugin's parent is this process (spawned), the
		// warm one's is the fork server.
		me := strconv.Itoa(os.Getpid())
		for _, name := range []string{"cold", "warm"} {
			e.publish("path-"+name, []any{start(M{"kind": "manual"}), M{"id": "call", "type": "auto", "plugins": M{"pre": []string{name}}}, M{"id": "end", "type": "end"}},
				[]any{edge("start", "call"), edge("call", "end")})
			id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "path-" + name}, nil).JSON["id"].(string)
			rec.wait(t, 1)
			r = e.instance(id)
			if r.JSON["status"] != "completed" {
				t.Fatalf("%s: %s", name, r.Body)
			}
			ppid := fmt.Sprint(r.JSON["context"].(M)["ppid"])
			if spawned := ppid == me; spawned != (name == "cold") {
				t.Errorf("%s plugin: parent %s, this process %s: want spawned=%v", name, ppid, me, name == "cold")
			}
		}
	})
}

func TestPluginNetworkOptionAndSandboxReport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		sb := sandboxFor(t, 63000)
		e := newEnv(t, s, func(d *server.Deps) {
			d.PluginMaxSize, d.PluginSandbox = 64<<10, sb
			runExecutor(t, newExecutorWith(t, s, rec, "w1", d.Engine.Now, &plugin.ProcessRunner{Sandbox: sb}), d.Engine.PluginQueue())
		})
		bob := e.mkUser("bob")

		// A loopback listener both plugins try to reach.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("hi"))
				c.Close()
			}
		}()
		_, port, _ := net.SplitHostPort(l.Addr().String())
		src := []byte(`import json, socket
try:
    got = socket.create_connection(("127.0.0.1", ` + port + `), timeout=5).recv(2).decode()
except OSError as e:
    got = "error: " + (e.strerror or str(e))
print(json.dumps({"context": {"got": got}}))
`)
		r := e.uploadWith(map[string]string{"name": "offline", "runtime": "python", "network": "off"}, src, e.admin)
		if r.Status != 201 || r.JSON["network"] != "off" {
			t.Fatalf("upload network=off: %d %s", r.Status, r.Body)
		}
		if r = e.uploadWith(map[string]string{"name": "online", "runtime": "python"}, src, e.admin); r.Status != 201 || r.JSON["network"] != "on" {
			t.Fatalf("upload without network: %d %s", r.Status, r.Body)
		}
		assertError(t, e.uploadWith(map[string]string{"name": "odd", "runtime": "python", "network": "sometimes"}, src, e.admin), 400, "invalid_network")
		if _, err := s.GetPlugin(ctx0, "default", "odd", 0); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatal("a refused upload left a row")
		}
		if r = e.do("GET", "/api/v1/plugins/offline", e.admin, nil, nil); r.JSON["network"] != "off" || r.JSON["versions"].([]any)[0].(M)["network"] != "off" {
			t.Fatalf("get: %s", r.Body)
		}
		if p, err := s.GetPlugin(ctx0, "default", "offline", 1); err != nil || p.Network != model.NetworkOff {
			t.Fatalf("stored: %+v %v", p, err)
		}

		// Each runs as an auto node's plugin, through the engine's queue and the sandboxed executor.
		for name, want := range map[string]string{"offline": "error: Network is unreachable", "online": "hi"} {
			e.publish("net-"+name, []any{start(M{"kind": "manual"}), M{"id": "call", "type": "auto", "plugins": M{"pre": []string{name}}}, M{"id": "end", "type": "end"}},
				[]any{edge("start", "call"), edge("call", "end")})
			id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "net-" + name}, nil).JSON["id"].(string)
			rec.wait(t, 1)
			if r = e.instance(id); r.JSON["status"] != "completed" || r.JSON["context"].(M)["got"] != want {
				t.Errorf("%s: %s, want context.got %q", name, r.Body, want)
			}
		}

		// What is in force, for admins only.
		r = e.do("GET", "/api/v1/plugins/sandbox", e.admin, nil, nil)
		if r.Status != 200 || r.JSON["plugins_run"] != true || r.JSON["uids"] != "63000-63001" {
			t.Fatalf("sandbox: %d %s", r.Status, r.Body)
		}
		names := map[string]bool{}
		for _, p := range r.JSON["protections"].([]any) {
			p := p.(M)
			names[p["name"].(string)] = p["in_force"].(bool)
			if p["detail"] == "" {
				t.Errorf("protection without a detail: %v", p)
			}
		}
		if len(names) != 10 || !names["user"] || !names["network_off"] || !names["environment"] || !names["no_unix_sockets"] || !names["private_tmp"] {
			t.Errorf("protections: %v", names)
		}
		assertError(t, e.do("GET", "/api/v1/plugins/sandbox", bob, nil, nil), 403, "admin_required")
		assertError(t, e.do("GET", "/api/v1/plugins/sandbox", "", nil, nil), 401, "")
	})
}
