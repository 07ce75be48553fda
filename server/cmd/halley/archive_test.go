package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func quickDefinition() map[string]any {
	return map[string]any{"nodes": []any{
		map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
		map[string]any{"id": "end", "type": "end"},
	}, "edges": []any{map[string]any{"from": "start", "to": "end"}}}
}

// TestArchiveEndToEnd runs the real binary with a retention of one second: finished instances disappear from
// the database into the archive, their GETs (instance, history, diagram, tasks) answer 410 archived, a running
// instance stays, and `halley archive show` prints an archived one back.
func TestArchiveEndToEnd(t *testing.T) {
	bin := buildHalley(t)
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			dataDir := t.TempDir()
			env := faultEnv("HALLEY_INSTANCE_RETENTION=1s", "HALLEY_INSTANCE_RETENTION_SWEEP=1s", "HALLEY_ARCHIVE_DIR="+dataDir+"/archive")
			if d == store.MySQL {
				env = append(env, "HALLEY_DATABASE_URL="+storetest.URL(t, d))
			} else {
				env = append(env, "HALLEY_DATABASE_URL=sqlite://"+dataDir+"/halley.db")
			}
			h := startHalley(t, "halley", bin, env...)
			cl := newAPI()
			cl.login(t, h.URL())
			cl.publish(t, h.URL(), "quick", quickDefinition())
			cl.publish(t, h.URL(), "approvals", approvalsDefinition(1))
			done := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "quick"})["id"].(string)
			approved := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "approvals", "context": map[string]any{"approver": "admin"}})
			task := approved["tasks"].([]any)[0].(map[string]any)["id"].(string)
			cl.mustCall(t, h.URL(), "POST", "/api/v1/tasks/"+task+"/approve", map[string]any{})
			running := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "approvals", "context": map[string]any{"approver": "admin"}})["id"].(string)

			gone := func(path string) bool {
				r := cl.call(t.Context(), h.URL(), "GET", path, nil, "")
				return r.status == http.StatusGone && r.code() == "archived"
			}
			if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
				return gone("/api/v1/instances/"+done) && gone("/api/v1/instances/"+approved["id"].(string))
			}) {
				t.Fatalf("finished instances were not archived: %v", cl.call(t.Context(), h.URL(), "GET", "/api/v1/instances/"+done, nil, ""))
			}
			for _, p := range []string{"/api/v1/instances/" + done + "/history", "/api/v1/instances/" + done + "/diagram", "/api/v1/tasks/" + task} {
				if !gone(p) {
					t.Errorf("GET %s: %v; want 410 archived", p, cl.call(t.Context(), h.URL(), "GET", p, nil, ""))
				}
			}
			if r := cl.call(t.Context(), h.URL(), "GET", "/api/v1/instances/"+running, nil, ""); r.status != http.StatusOK {
				t.Fatalf("the running instance: %d %v", r.status, r.body)
			}
			if r := cl.call(t.Context(), h.URL(), "GET", "/api/v1/instances/no-such-id", nil, ""); r.status != http.StatusNotFound {
				t.Fatalf("an unknown id: %d; want 404", r.status)
			}

			show := func(args ...string) (string, string, error) {
				cmd := exec.Command(bin, append([]string{"archive", "show"}, args...)...)
				cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HALLEY_DATA_DIR=" + dataDir}, env...)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				return out.String(), errb.String(), err
			}
			out, errOut, err := show(task[:strings.LastIndexByte(task, '.')])
			if err != nil {
				t.Fatalf("archive show: %v\n%s", err, errOut)
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatalf("archive show printed no JSON: %v\n%s", err, out)
			}
			rows := rec["rows"].(map[string]any)
			if rec["id"] != approved["id"] || rec["status"] != "completed" || len(rows["tasks"].([]any)) != 1 || len(rows["history"].([]any)) < 4 {
				t.Fatalf("archived record: %s", out)
			}
			if out, _, err := show("--raw", done); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, done) {
				t.Fatalf("archive show --raw: %v %q", err, out)
			}
			if _, errOut, err := show(running); err == nil || !strings.Contains(errOut, "still in the database") {
				t.Fatalf("archive show of a running instance: %v %s", err, errOut)
			}
			if _, errOut, err := show("nope"); err == nil || !strings.Contains(errOut, "was not archived") {
				t.Fatalf("archive show of an unknown id: %v %s", err, errOut)
			}
		})
	}
}
