package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

const stampPlugin = `import json, sys
d = json.load(sys.stdin)
sys.stderr.write("stamp was here for %s\n" % d["node_id"])
print(json.dumps({"context": {"stamped": VERSION}}))
`

func stampSource(version int) []byte {
	return []byte(strings.Replace(stampPlugin, "VERSION", fmt.Sprint(version), 1))
}

// text GETs a plain-text answer.
func (a *api) text(t *testing.T, base, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestPluginsOnEveryReplica runs three halley processes over one MariaDB and one Redis, each with a data
// directory of its own (no shared filesystem): a plugin uploaded through A runs on B and on C (started later),
// its run log reads the same through A and B, and a version whose file only A's disk had (a deployment from
// before plugin files were in the database) runs on B once A has started and imported it.
func TestPluginsOnEveryReplica(t *testing.T) {
	bin := buildHalley(t)
	testkit.RequirePython(t, "")
	dbURL := storetest.URL(t, store.MySQL)
	redisURL := storetest.RedisURL(t)
	prefix := uniqueRedisPrefix(t, redisURL)
	env := faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_REDIS_URL="+redisURL, "HALLEY_REDIS_PREFIX="+prefix)
	pluginDirA := t.TempDir()
	a := startHalley(t, "halley-a", bin, append(env, "HALLEY_PLUGIN_DIR="+pluginDirA)...)
	b := startHalley(t, "halley-b", bin, env...)
	cl := newAPI()
	cl.login(t, a.URL())
	cl.upload(t, a.URL(), map[string]string{"name": "stamp", "runtime": "python", "timeout": "20s"}, string(stampSource(1)))
	def := func(plugin string) map[string]any {
		return map[string]any{"nodes": []any{
			map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "work", "type": "auto", "plugins": map[string]any{"pre": []string{plugin}}},
			map[string]any{"id": "end", "type": "end"},
		}, "edges": []any{map[string]any{"from": "start", "to": "work"}, map[string]any{"from": "work", "to": "end"}}}
	}
	cl.publish(t, a.URL(), "stamped", def("stamp@1"))

	// run starts an instance through a replica (whose executor takes the run at commit) and waits for its end.
	run := func(h *halleyProc, key string) map[string]any {
		t.Helper()
		id := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": key})["id"].(string)
		var inst map[string]any
		if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
			inst = cl.mustCall(t, h.URL(), "GET", "/api/v1/instances/"+id, nil)
			return inst["status"] != "running"
		}) {
			t.Fatalf("instance %s still running: %v", id, inst)
		}
		return inst
	}
	if inst := run(b, "stamped"); inst["status"] != "completed" || inst["context"].(map[string]any)["stamped"] != float64(1) {
		t.Fatalf("the plugin uploaded through A, run on B: %v", inst)
	}
	runs := cl.mustCall(t, a.URL(), "GET", "/api/v1/plugins/stamp/runs", nil)["items"].([]any)
	if len(runs) != 1 || runs[0].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("runs seen through A: %v", runs)
	}
	runID := runs[0].(map[string]any)["id"].(string)
	statusA, logA := cl.text(t, a.URL(), "/api/v1/plugin-runs/"+runID+"/log")
	statusB, logB := cl.text(t, b.URL(), "/api/v1/plugin-runs/"+runID+"/log")
	if statusA != 200 || statusB != 200 || logA != logB || !strings.Contains(logA, "stamp was here for work") || !strings.Contains(logA, "succeeded") {
		t.Fatalf("the run log through A (%d) and B (%d):\n%s\n---\n%s", statusA, statusB, logA, logB)
	}

	// Every Redis key of this deployment is under its prefix: the timers, and the failed-login counters.
	if r := cl.call(t.Context(), a.URL(), "POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "wrong-password"}, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d %v", r.status, r.body)
	}
	keys := redisKeys(t, redisURL, prefix+"*")
	if !slices.Contains(keys, prefix+"{rl}:login:user:admin") || !slices.Contains(keys, prefix+"{timers}:alive") {
		t.Fatalf("keys under %s: %v; want the login counter and the timers' sentinel", prefix, keys)
	}

	// A replica started later catches up.
	c := startHalley(t, "halley-c", bin, env...)
	if inst := run(c, "stamped"); inst["status"] != "completed" {
		t.Fatalf("a replica started after the upload: %v", inst)
	}

	// A deployment from before: version 2's row exists, but its file is only on A's disk.
	legacy := stampSource(2)
	sum := sha256.Sum256(legacy)
	sha := hex.EncodeToString(sum[:])
	db := openSQL(t, dbURL)
	if _, err := db.Exec("INSERT INTO plugins (tenant_id, name, version, runtime, timeout_ms, sha256, size, uploaded_by, created_at) VALUES ('default', 'stamp', 2, 'python', 20000, ?, ?, 'admin', NOW(6))",
		sha, len(legacy)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(pluginDirA, "stamp", "2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sha), legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	cl.publish(t, a.URL(), "stamped-v2", def("stamp@2"))
	inst := run(b, "stamped-v2")
	if inst["status"] != "failed" || !strings.Contains(fmt.Sprint(inst), "upload the plugin again") {
		t.Fatalf("a version whose file no replica has imported yet: %v", inst)
	}
	d := startHalley(t, "halley-d", bin, env...) // a replica without the file says so at start
	if !strings.Contains(d.logs.String(), "has no file in the database or on this replica") {
		t.Errorf("no warning at start about the version without a file:\n%s", tail(d.logs.String(), 2000))
	}
	a.kill()
	a.start() // A imports the files of its plugin directory at start
	if inst := run(b, "stamped-v2"); inst["status"] != "completed" || inst["context"].(map[string]any)["stamped"] != float64(2) {
		t.Fatalf("after A imported its file, on B: %v", inst)
	}
}
