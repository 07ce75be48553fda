//go:build linux

package plugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

func TestPythonPluginEditsContext(t *testing.T) {
	spec := pythonSpec(t, `
import halley_plugin as hp
inp = hp.read_input()
ctx = inp["context"]
hp.log("level is", ctx["level"])
hp.write_output(context={
    "level": ctx["level"] + 1,
    "big_id": ctx["big_id"],
    "seen": {k: inp[k] for k in ("run_id", "instance_id", "node_id", "phase", "callback_url")},
    "node_type": inp["node"]["type"],
}, decision="approve")
`)
	res := run(t, newRunner(t), spec, input("run-1", `{"level": 2, "big_id": 12345678901234567890}`))
	out := mustSucceed(t, res)

	if out.Decision != plugin.DecisionApprove || out.Async {
		t.Errorf("decision %q async %v, want approve false", out.Decision, out.Async)
	}
	if got := fmt.Sprint(out.Context["level"]); got != "3" {
		t.Errorf("level = %s, want 3", got)
	}
	// Numbers come back as json.Number: an id above 2^53 keeps every digit.
	if got, ok := out.Context["big_id"].(json.Number); !ok || got.String() != "12345678901234567890" {
		t.Errorf("big_id = %#v, want json.Number 12345678901234567890", out.Context["big_id"])
	}
	seen, _ := out.Context["seen"].(map[string]any)
	want := map[string]any{"run_id": "run-1", "instance_id": "inst-1", "node_id": "grant", "phase": "after",
		"callback_url": "http://127.0.0.1:9/api/v1/callback/inst-1/ni-1?token=x"}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("plugin saw %s = %v, want %v", k, seen[k], v)
		}
	}
	if out.Context["node_type"] != "auto" {
		t.Errorf("node_type = %v, want auto", out.Context["node_type"])
	}
	if !strings.Contains(string(res.Stderr), "level is 2") {
		t.Errorf("stderr %q lacks the plugin's log line", res.Stderr)
	}
	if res.StartedAt.IsZero() || res.EndedAt.Before(res.StartedAt) {
		t.Errorf("times %v .. %v", res.StartedAt, res.EndedAt)
	}
}

// buildPlugin compiles a tiny Go plugin into a temp dir: a real ELF binary, not a script.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := `package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var in struct {
		RunID   string         ` + "`json:\"run_id\"`" + `
		NodeID  string         ` + "`json:\"node_id\"`" + `
		Phase   string         ` + "`json:\"phase\"`" + `
		Context map[string]any ` + "`json:\"context\"`" + `
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "bad input:", err)
		os.Exit(2)
	}
	if in.NodeID == "fail" {
		fmt.Fprintln(os.Stderr, "boom: the cache platform said no")
		os.Exit(3)
	}
	in.Context["handled_by"] = "go"
	in.Context["env_run_id"] = os.Getenv("HALLEY_RUN_ID")
	json.NewEncoder(os.Stdout).Encode(map[string]any{"context": in.Context, "decision": "reject"})
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return testkit.GoBuild(t, dir, "main.go", "plugin-bin")
}

func TestBinaryPlugin(t *testing.T) {
	bin := buildPlugin(t)
	spec := plugin.Spec{Name: "go-bin", Version: 2, Runtime: plugin.RuntimeBinary, Path: bin}
	r := newRunner(t)

	t.Run("exit code 3", func(t *testing.T) {
		in := input("run-b1", `{"a":1}`)
		in.NodeID = "fail"
		res := run(t, r, spec, in)
		mustFailWith(t, res, "exited with code 3", "boom: the cache platform said no")
		if res.ExitCode != 3 || res.TimedOut || res.Status() != plugin.StatusFailed {
			t.Errorf("exit %d timedOut %v status %s, want 3 false failed", res.ExitCode, res.TimedOut, res.Status())
		}
		if !strings.Contains(string(res.Stderr), "boom") {
			t.Errorf("stderr not captured: %q", res.Stderr)
		}
	})
	t.Run("success", func(t *testing.T) {
		out := mustSucceed(t, run(t, r, spec, input("run-b2", `{"a":1}`)))
		if out.Context["handled_by"] != "go" || out.Context["env_run_id"] != "run-b2" || out.Decision != "reject" {
			t.Errorf("output %+v", out)
		}
	})
}

// alive reports whether pid is a running process (a zombie waiting for its reaper counts as dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after "(comm)"
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// waitDead gives the kernel a moment to finish killing pids (SIGKILL is delivered asynchronously).
func waitDead(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d still alive after the run returned", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			runtime.Gosched()
		}
	}
}

// readPids reads the plugin's pid file, which must hold want pids; they are killed at the test's end.
func readPids(t *testing.T, file string, want int) []int {
	t.Helper()
	pids := testkit.WaitPids(t, file)
	if len(pids) != want {
		t.Fatalf("pid file has %d pids (%v), want %d", len(pids), pids, want)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pids
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	pidDir := t.TempDir()
	pidFile := filepath.Join(pidDir, "pids")
	cases := []struct {
		name string
		spec func(t *testing.T) plugin.Spec
	}{
		{"shell with a background grandchild", func(t *testing.T) plugin.Spec {
			return shellSpec(t, fmt.Sprintf("sleep 100 &\necho $! > %s\necho $$ >> %s\nsleep 100\n", pidFile, pidFile))
		}},
		{"python with a subprocess", func(t *testing.T) plugin.Spec {
			return pythonSpec(t, fmt.Sprintf(`
import os, subprocess, time
child = subprocess.Popen(["sleep", "100"])
with open(%q, "w") as f:
    f.write("%%d %%d\n" %% (child.pid, os.getpid()))
time.sleep(100)
`, pidFile))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(pidFile)
			spec := tc.spec(t)
			spec.Timeout = 1500 * time.Millisecond
			start := time.Now()
			res := run(t, newRunner(t), spec, input("run-t", `{}`))
			elapsed := time.Since(start)

			mustFailWith(t, res, "timed out after 1.5s")
			if !res.TimedOut || res.Status() != plugin.StatusTimedOut || res.ExitCode != -1 {
				t.Errorf("timedOut %v status %s exit %d, want true timed_out -1", res.TimedOut, res.Status(), res.ExitCode)
			}
			// The grandchild held stdout/stderr open; Run must not have waited for its sleep 100.
			if elapsed > spec.Timeout+5*time.Second {
				t.Errorf("Run took %s for a %s timeout", elapsed, spec.Timeout)
			}
			waitDead(t, readPids(t, pidFile, 2))
		})
	}
}

func TestExitedPluginLeavesNothingRunning(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	// The plugin answers and exits while a background child still holds its stdout.
	spec := shellSpec(t, fmt.Sprintf("sleep 100 &\necho $! > %s\necho '{\"context\":{\"done\":true}}'\n", pidFile))
	spec.Timeout = time.Minute
	start := time.Now()
	out := mustSucceed(t, run(t, newRunner(t), spec, input("run-e", `{}`)))
	if out.Context["done"] != true {
		t.Errorf("context %v", out.Context)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Run waited %s for the leftover child", elapsed)
	}
	waitDead(t, readPids(t, pidFile, 1))
}

func TestEscapedProcessCannotHoldRun(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	// A child in a new session escapes the process group kill but still holds the pipes: PipeGrace bounds it.
	spec := pythonSpec(t, fmt.Sprintf(`
import subprocess, json, sys
child = subprocess.Popen(["sleep", "100"], start_new_session=True)
open(%q, "w").write(str(child.pid))
print(json.dumps({"context": {"ok": 1}}))
`, pidFile))
	r := newRunner(t)
	r.PipeGrace = 200 * time.Millisecond
	start := time.Now()
	out := mustSucceed(t, run(t, r, spec, input("run-esc", `{}`)))
	readPids(t, pidFile, 1) // killed at cleanup
	if fmt.Sprint(out.Context["ok"]) != "1" {
		t.Errorf("context %v", out.Context)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Run waited %s for an escaped process", elapsed)
	}
}

func TestCanceledContextKillsPlugin(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	spec := shellSpec(t, fmt.Sprintf("echo $$ > %s\nexec sleep 100\n", pidFile))
	spec.Timeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan plugin.Result, 1)
	go func() { done <- newRunner(t).Run(ctx, spec, input("run-c", `{}`)) }()
	// Cancel once the plugin is surely running.
	for {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 {
			break
		}
		select {
		case res := <-done:
			t.Fatalf("run ended early: %v", res.Err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	select {
	case res := <-done:
		mustFailWith(t, res, "canceled")
		if res.TimedOut {
			t.Error("a canceled run is not a timeout")
		}
		if !errors.Is(res.Err, context.Canceled) {
			t.Errorf("error %v does not wrap context.Canceled", res.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	waitDead(t, readPids(t, pidFile, 1))
}

func TestOutputCap(t *testing.T) {
	const capBytes = 64 << 10
	spec := pythonSpec(t, `
import sys
chunk = "x" * (1 << 20)
for _ in range(50):
    sys.stdout.write(chunk)
sys.stdout.flush()
sys.stderr.write("e" * (3 << 20))
sys.stderr.write("THE END")
`)
	r := newRunner(t)
	r.OutputCap = capBytes

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, r, spec, input("run-big", `{}`))
	runtime.ReadMemStats(&after)

	mustFailWith(t, res, fmt.Sprintf("more than %d bytes", capBytes))
	if res.ExitCode != 0 {
		t.Errorf("exit %d, want 0 (the plugin ran to its end, the output was drained)", res.ExitCode)
	}
	if len(res.Stdout) != capBytes || !res.StdoutTruncated {
		t.Errorf("stdout %d bytes truncated=%v, want %d true", len(res.Stdout), res.StdoutTruncated, capBytes)
	}
	if len(res.Stderr) != capBytes || !res.StderrTruncated {
		t.Errorf("stderr %d bytes truncated=%v, want %d true", len(res.Stderr), res.StderrTruncated, capBytes)
	}
	// 53 MiB went through the pipes; Halley must have allocated a small fraction of that.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("allocated %d MiB while reading 53 MiB of output", alloc>>20)
	}
}

func TestInvalidOutput(t *testing.T) {
	cases := []struct {
		name   string
		stdout string
		errHas string
	}{
		{"nothing", "", "printed nothing"},
		{"text", "created it!", "not a JSON object"},
		{"array", `[{"context":{}}]`, "not a JSON object"},
		{"broken", `{"context": {"a": 1}`, "not valid JSON"},
		{"two objects", `{"context":{}} {"context":{}}`, "more than one JSON value"},
		{"object then text", `{"context":{}} done`, "more than one JSON value"},
		{"context not an object", `{"context": [1]}`, "not valid JSON"},
		{"bad decision", `{"decision":"maybe"}`, `decision "maybe"`},
	}
	r := newRunner(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := shellSpec(t, "cat <<'EOF'\n"+tc.stdout+"\nEOF\n")
			res := run(t, r, spec, input("run-i", `{}`))
			mustFailWith(t, res, tc.errHas)
			if res.ExitCode != 0 || res.Status() != plugin.StatusFailed {
				t.Errorf("exit %d status %s, want 0 failed", res.ExitCode, res.Status())
			}
		})
	}
	t.Run("whitespace around one object is fine", func(t *testing.T) {
		spec := shellSpec(t, "printf '\\n  \\t{\"context\":{\"a\":1},\"async\":true}\\n\\n  '\n")
		out := mustSucceed(t, run(t, r, spec, input("run-w", `{}`)))
		if !out.Async || fmt.Sprint(out.Context["a"]) != "1" {
			t.Errorf("output %+v", out)
		}
	})
}

func TestScrubbedEnvironment(t *testing.T) {
	t.Setenv("HALLEY_TEST_SECRET", "hunter2")
	t.Setenv("HALLEY_DATABASE_URL", "mysql://root:secret@db/halley")
	spec := pythonSpec(t, `
import os, json
print(json.dumps({"context": {"env": dict(os.environ), "cwd": os.getcwd()}}))
`)
	in := input("run-env", `{}`)
	out := mustSucceed(t, run(t, newRunner(t), spec, in))
	env, _ := out.Context["env"].(map[string]any)
	cwd, _ := out.Context["cwd"].(string)

	want := map[string]string{
		"PATH": plugin.DefaultPath, "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8", "PYTHONPATH": cwd,
		"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
		"HALLEY_RUN_ID": "run-env", "HALLEY_CALLBACK_URL": in.CallbackURL,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %v, want %q", k, env[k], v)
		}
	}
	var extra []string
	for k := range env {
		if _, ok := want[k]; !ok && k != "LC_CTYPE" { // python may set LC_CTYPE itself (locale coercion)
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("plugin saw variables Halley did not set: %v", extra)
	}
	for k, v := range env {
		if strings.Contains(fmt.Sprint(v), "hunter2") || strings.Contains(fmt.Sprint(v), "secret@db") {
			t.Errorf("secret leaked through %s", k)
		}
	}
}

func TestFreshWorkingDirectory(t *testing.T) {
	spec := pythonSpec(t, `
import os, json
existed = os.path.exists("marker.txt")
open("marker.txt", "w").write("from an earlier run")
os.makedirs("ro/sub")
os.chmod("ro", 0o500)  # the runner must still clean this up
print(json.dumps({"context": {"existed": existed, "cwd": os.getcwd()}}))
`)
	r := newRunner(t)
	first := mustSucceed(t, run(t, r, spec, input("run-w1", `{}`)))
	second := mustSucceed(t, run(t, r, spec, input("run-w2", `{}`)))

	if first.Context["existed"] != false || second.Context["existed"] != false {
		t.Errorf("marker visible to a later run: %v, %v", first.Context["existed"], second.Context["existed"])
	}
	d1, d2 := first.Context["cwd"].(string), second.Context["cwd"].(string)
	if d1 == d2 || !strings.HasPrefix(d1, r.WorkRoot+string(filepath.Separator)) {
		t.Errorf("working dirs %q and %q (work root %q)", d1, d2, r.WorkRoot)
	}
	entries, err := os.ReadDir(r.WorkRoot)
	if err != nil || len(entries) != 0 {
		t.Errorf("work root not cleaned up: %v %v", entries, err)
	}
}

func TestBadSpecs(t *testing.T) {
	script := writeFile(t, "p.py", "print('{}')", 0o644)
	cases := []struct {
		name   string
		runner *plugin.ProcessRunner
		spec   plugin.Spec
		errHas string
	}{
		{"unknown runtime", newRunner(t), plugin.Spec{Name: "p", Runtime: "ruby", Path: script}, "runtime"},
		{"relative path", newRunner(t), plugin.Spec{Name: "p", Runtime: plugin.RuntimePython, Path: "p.py"}, "not absolute"},
		{"missing file", newRunner(t), plugin.Spec{Name: "p", Runtime: plugin.RuntimeBinary, Path: "/nonexistent/p"}, "no such file"},
		{"not executable", newRunner(t), plugin.Spec{Name: "p", Runtime: plugin.RuntimeBinary, Path: script}, "unable to start"},
		{"missing interpreter", &plugin.ProcessRunner{WorkRoot: t.TempDir(), Python: "python-nope"},
			plugin.Spec{Name: "p", Runtime: plugin.RuntimePython, Path: script}, "not found"},
		{"no work root", &plugin.ProcessRunner{}, plugin.Spec{Name: "p", Runtime: plugin.RuntimeBinary, Path: "/bin/true"}, "WorkRoot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, tc.runner, tc.spec, input("run-x", `{}`))
			mustFailWith(t, res, tc.errHas)
			if res.ExitCode != -1 {
				t.Errorf("exit code %d, want -1 (never ran)", res.ExitCode)
			}
		})
	}
}

func TestCreateCacheTemplatePlugin(t *testing.T) {
	requirePython(t)
	path, err := filepath.Abs(filepath.Join("..", "templates", "plugins", "create-cache.py"))
	if err != nil {
		t.Fatal(err)
	}
	// Uploaded alone, as an admin would: through the file store, without the SDK next to it.
	fs, err := plugin.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stored, err := fs.Save("create-cache", 1, f, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	spec := plugin.Spec{Name: "create-cache", Version: 1, Runtime: plugin.RuntimePython, Path: stored.Path}
	r := newRunner(t)

	cases := []struct {
		name, ctx string
		size, app string
		cluster   string
		errHas    []string
	}{
		{name: "size_gb", ctx: `{"size_gb": 8, "cluster": "sh-redis-01", "app": "feed"}`,
			size: "8", app: "feed", cluster: "sh-redis-01"},
		// The context of the cache-resource-change template, which calls the size memory_gb.
		{name: "template context", ctx: `{"memory_gb": 16, "cluster": "sh-001", "app": "main.web.account", "shared_cluster": false}`,
			size: "16", app: "main.web.account", cluster: "sh-001"},
		{name: "no cluster", ctx: `{"size_gb": 8}`, errHas: []string{"exited with code 1", "cluster is required"}},
		{name: "size not a number", ctx: `{"memory_gb": "lots", "cluster": "c"}`,
			errHas: []string{"exited with code 1", "memory_gb must be a number"}},
		{name: "too big", ctx: `{"size_gb": 4096, "cluster": "c"}`, errHas: []string{"above the limit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, spec, input("run-cache", tc.ctx))
			if tc.errHas != nil {
				mustFailWith(t, res, tc.errHas...)
				return
			}
			cache, _ := mustSucceed(t, res).Context["cache"].(map[string]any)
			if cache["status"] != "created" || cache["cluster"] != tc.cluster || fmt.Sprint(cache["size_gb"]) != tc.size ||
				cache["app"] != tc.app || !strings.HasPrefix(fmt.Sprint(cache["id"]), "cache-"+tc.cluster+"-") {
				t.Errorf("cache = %v", cache)
			}
		})
	}
}

func TestSDKPostResult(t *testing.T) {
	type call struct {
		method, path, auth string
		body               map[string]any
	}
	calls := make(chan call, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		calls <- call{r.Method, r.URL.Path, r.Header.Get("Authorization"), body}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"run-async","status":"succeeded"}`))
	}))
	defer srv.Close()

	spec := pythonSpec(t, fmt.Sprintf(`
import halley_plugin as hp
inp = hp.read_input()
# explicit base URL and token
a = hp.post_result(inp["run_id"], "succeeded", {"ticket": 42}, base_url=%q, token="tok")
# base URL taken from HALLEY_CALLBACK_URL
b = hp.post_result(inp["run_id"], "failed")
hp.write_output(context={"answer": a["status"], "second": b["id"]}, async_=True)
`, srv.URL))
	in := input("run-async", `{}`)
	in.CallbackURL = srv.URL + "/api/v1/callback/inst-1/ni-1?token=abc"
	out := mustSucceed(t, run(t, newRunner(t), spec, in))
	if !out.Async || out.Context["answer"] != "succeeded" || out.Context["second"] != "run-async" {
		t.Errorf("output %+v", out)
	}
	first, second := <-calls, <-calls
	if first.method != http.MethodPost || first.path != "/api/v1/plugin-runs/run-async/result" ||
		first.auth != "Bearer tok" || first.body["status"] != "succeeded" ||
		fmt.Sprint(first.body["data"]) != "map[ticket:42]" {
		t.Errorf("first call %+v", first)
	}
	if second.path != "/api/v1/plugin-runs/run-async/result" || second.auth != "" || second.body["status"] != "failed" {
		t.Errorf("second call %+v", second)
	}
}
