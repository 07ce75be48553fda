package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
)

// TestReadmePath walks the README's own setup on the real binary, the way a new user does: in a copy of the
// repository, `make run` with every default (so the data dir is the relative ./data, and the admin password is the
// default one), then `make templates`, then one instance of the ready-made cache-resource-change template through
// its create-cache plugin to its end, with the plugin's output visible in its run log.
//
// Only HALLEY_ADDR is set (to a free port, so that tests can run side by side); `make templates` has to find the
// server from it. The binary is built by the test and put where `make build` puts it; both make targets run with
// -o build, so that the test does not rebuild the UI (the UI has its own end-to-end test).
func TestReadmePath(t *testing.T) {
	for _, tool := range []string{"make", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI=true: %v", tool, err)
			}
			t.Skipf("%s not found: %v", tool, err)
		}
	}
	repo := copyRepository(t)
	bin := buildHalley(t)
	if err := os.MkdirAll(filepath.Join(repo, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(repo, "bin", "halley"), 0o755)

	addr := freeAddr(t)
	base := "http://" + addr
	env := readmeEnv("HALLEY_ADDR=" + addr)

	// make run
	var logs syncBuffer
	run := exec.Command("make", "-o", "build", "run")
	run.Dir, run.Env, run.Stdout, run.Stderr = repo, env, &logs, &logs
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // make and halley: stopped together
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-run.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { run.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("make run output:\n%s", tail(logs.String(), 60))
		}
	})
	if !testkit.Eventually(60*time.Second, 50*time.Millisecond, func() bool { return readyz(base) == http.StatusOK }) {
		t.Fatalf("make run: /readyz never answered 200:\n%s", logs.String())
	}
	data := filepath.Join(repo, "data")
	// The runs' work dir is outside the data dir, which the plugin sandbox closes to the plugin uids.
	work := filepath.Join(os.TempDir(), "halley-plugins")
	if !strings.Contains(logs.String(), "data_dir="+data) || !strings.Contains(logs.String(), "plugin_work_dir="+work) {
		t.Fatalf("the start log does not give the absolute paths (under %s, and %s):\n%s", data, work, logs.String())
	}

	// make templates: the server is found from HALLEY_ADDR, the password is the default.
	load := exec.Command("make", "-o", "build", "templates")
	load.Dir, load.Env = repo, env
	out, err := load.CombinedOutput()
	if err != nil {
		t.Fatalf("make templates: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "uploaded plugin create-cache") || !strings.Contains(string(out), "published cache-resource-change") {
		t.Fatalf("make templates did not upload the plugin and publish the templates:\n%s", out)
	}

	// The bootstrap admin still has the default password: login says so.
	var login struct {
		Token                  string `json:"token"`
		PasswordChangeRequired bool   `json:"password_change_required"`
	}
	readmeCall(t, base, "", "POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "admin"}, 200, &login)
	if !login.PasswordChangeRequired {
		t.Error("login as admin with the default password must answer password_change_required: true")
	}
	admin := login.Token
	for _, u := range []map[string]any{
		{"username": "lena", "password": "lena-password", "display_name": "Lena Lead"},
		{"username": "dev", "password": "dev-password", "display_name": "Dev Eloper", "manager": "lena"},
	} {
		readmeCall(t, base, admin, "POST", "/api/v1/users", u, 201, nil)
	}
	dev := readmeLogin(t, base, "dev", "dev-password")
	lena := readmeLogin(t, base, "lena", "lena-password")

	var inst struct {
		ID     string         `json:"id"`
		Status string         `json:"status"`
		Ctx    map[string]any `json:"context"`
	}
	readmeCall(t, base, dev, "POST", "/api/v1/instances", map[string]any{"template": "cache-resource-change", "title": "Cache for orders",
		"context": map[string]any{"memory_gb": 8, "cluster": "sh-redis-01", "app": "orders"}}, 201, &inst)
	var tasks struct {
		Items []struct {
			ID         string `json:"id"`
			InstanceID string `json:"instance_id"`
		} `json:"items"`
	}
	readmeCall(t, base, lena, "GET", "/api/v1/tasks?assignee=me&status=pending", nil, 200, &tasks)
	if len(tasks.Items) != 1 || tasks.Items[0].InstanceID != inst.ID {
		t.Fatalf("the initiator's manager should have one task of %s: %+v", inst.ID, tasks.Items)
	}
	readmeCall(t, base, lena, "POST", "/api/v1/tasks/"+tasks.Items[0].ID+"/approve", map[string]any{"comment": "fine"}, 200, nil)

	// The automatic node runs create-cache; a failed run fails the test at once with its recorded error.
	type pluginRun struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Error    string `json:"error"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	var runs struct {
		Items []pluginRun `json:"items"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		readmeCall(t, base, admin, "GET", "/api/v1/instances/"+inst.ID, nil, 200, &inst)
		readmeCall(t, base, admin, "GET", "/api/v1/plugins/create-cache/runs?instance_id="+inst.ID, nil, 200, &runs)
		for _, r := range runs.Items {
			if r.Status == "failed" || r.Status == "timed_out" {
				t.Fatalf("the create-cache run %s: error %q, stderr %q", r.Status, r.Error, r.Stderr)
			}
		}
		if inst.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s still running after 60 s; plugin runs: %+v", inst.ID, runs.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if inst.Status != "completed" {
		t.Fatalf("instance %s is %s, want completed; plugin runs: %+v", inst.ID, inst.Status, runs.Items)
	}
	cache, _ := inst.Ctx["cache"].(map[string]any)
	if cache["status"] != "created" || cache["cluster"] != "sh-redis-01" || !strings.HasPrefix(fmt.Sprint(cache["id"]), "cache-sh-redis-01-") {
		t.Fatalf("the plugin's output is not in the context: %v", inst.Ctx)
	}
	if len(runs.Items) != 1 {
		t.Fatalf("want one create-cache run, got %+v", runs.Items)
	}
	r := runs.Items[0]
	if r.Status != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 || r.Error != "" ||
		!strings.Contains(r.Stdout, fmt.Sprint(cache["id"])) || !strings.Contains(r.Stderr, "created cache") {
		t.Fatalf("the run log does not show the plugin's run: %+v", r)
	}
	// Everything landed under the copy's ./data, the folder the README names.
	// Plugin files and run logs are in the database; the plugin's file was cached under plugins/sha256.
	for _, p := range []string{"halley.db", "secret", filepath.Join("plugins", "sha256")} {
		if _, err := os.Stat(filepath.Join(data, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// readmeEnv is the environment of a user who set nothing: this process's environment without any HALLEY_*
// setting, plus extra.
func readmeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HALLEY_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// copyRepository copies the repository's files (tracked and untracked, not ignored: what a fresh clone plus the
// change under test holds) into a temporary directory and returns it.
func copyRepository(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("no Makefile at the repository root %s: %v", root, err)
	}
	dst := filepath.Join(t.TempDir(), "halley")
	var files []string
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		// Not a git checkout (a source archive): everything but what builds and runs produce.
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				switch rel {
				case ".git", "bin", "data", "frontend/node_modules", "frontend/dist":
					return filepath.SkipDir
				}
				return nil
			}
			files = append(files, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, src, filepath.Join(dst, f), fi.Mode().Perm())
	}
	return dst
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func readmeLogin(t *testing.T, base, user, password string) string {
	t.Helper()
	var res struct {
		Token string `json:"token"`
	}
	readmeCall(t, base, "", "POST", "/api/v1/auth/login", map[string]string{"username": user, "password": password}, 200, &res)
	return res.Token
}

// readmeCall sends a JSON request and fails the test unless the answer has status want.
func readmeCall(t *testing.T, base, token, method, path string, body any, want int, into any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s (want %d)", method, path, res.StatusCode, b, want)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}
