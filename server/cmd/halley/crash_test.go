package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

type client struct {
	t     *testing.T
	base  string
	token string
}

func (c *client) call(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out) // a body that is not JSON is left empty: callers check the status
	return res.StatusCode, out
}

// TestCrashKeepsTimers starts instances that wait on delay timers, kills Halley with SIGKILL before the timers
// are due, starts it again on the same database, and checks that every timer fires exactly once.
func TestCrashKeepsTimers(t *testing.T) {
	bin := buildHalley(t)
	cases := []struct {
		name  string
		env   func(t *testing.T) []string
		redis bool
	}{
		{"sqlite+memory", func(t *testing.T) []string { return nil }, false},
		{"mysql+redis", func(t *testing.T) []string {
			// A prefix of its own: another test run on the same Redis never sees (or drops) this run's timers.
			ru := storetest.RedisURL(t)
			return []string{"HALLEY_DATABASE_URL=" + storetest.URL(t, store.MySQL), "HALLEY_REDIS_URL=" + ru,
				"HALLEY_REDIS_PREFIX=" + uniqueRedisPrefix(t, ru)}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			env := append(tc.env(t), "HALLEY_ADMIN_PASSWORD=crash-test-pw", "HALLEY_SECRET=crash-test-secret-crash-test-secret-1234")
			env = append(env, "HALLEY_DATA_DIR="+data)
			cmd, base, logs := startWith(t, bin, data, env)
			c := &client{t: t, base: base}
			_, out := c.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "crash-test-pw"})
			c.token = out["token"].(string)
			def := map[string]any{"nodes": []any{
				map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
				map[string]any{"id": "wait", "type": "delay", "interval": 3},
				map[string]any{"id": "end", "type": "end"},
			}, "edges": []any{map[string]any{"from": "start", "to": "wait"}, map[string]any{"from": "wait", "to": "end"}}}
			if st, out := c.call("POST", "/api/v1/templates", map[string]any{"key": "crash", "definition": def}); st != 201 {
				t.Fatalf("template: %d %v", st, out)
			}
			c.call("POST", "/api/v1/templates/crash/publish", nil)
			const n = 20
			var ids []string
			for i := 0; i < n; i++ {
				st, out := c.call("POST", "/api/v1/instances", map[string]any{"template": "crash"})
				if st != 201 {
					t.Fatalf("start: %d %v", st, out)
				}
				ids = append(ids, out["id"].(string))
			}
			// SIGKILL: no shutdown, no chance to flush anything.
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if tc.redis {
				// Redis keeps what was armed; make it lose everything of this deployment too: the database must be
				// enough.
				dropRedisPrefix(t, envValue(env, "HALLEY_REDIS_URL"), envValue(env, "HALLEY_REDIS_PREFIX"))
			}
			_, base, logs2 := startWith(t, bin, data, env)
			c.base = base
			_, out = c.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "crash-test-pw"})
			c.token = out["token"].(string)
			deadline := time.Now().Add(30 * time.Second)
			for _, id := range ids {
				for {
					_, inst := c.call("GET", "/api/v1/instances/"+id, nil)
					if inst["status"] == "completed" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("instance %s is %v after the restart\nlogs before:\n%s\nlogs after:\n%s", id, inst["status"], logs, logs2)
					}
					time.Sleep(100 * time.Millisecond)
				}
				_, h := c.call("GET", "/api/v1/instances/"+id+"/history", nil)
				fired := 0
				for _, e := range h["items"].([]any) {
					if e.(map[string]any)["action"] == "timer.fired" {
						fired++
					}
				}
				if fired != 1 {
					t.Fatalf("instance %s: timer fired %d times", id, fired)
				}
			}
		})
	}
}

func envValue(env []string, k string) string {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return strings.TrimPrefix(kv, k+"=")
		}
	}
	return ""
}

// startWith starts the binary with exactly env (plus PATH and a fresh address) and waits for /readyz.
func startWith(t *testing.T, bin, data string, env []string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + addr}, env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := http.Get(base + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return cmd, base, &logs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
