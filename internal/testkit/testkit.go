// Package testkit is what the tests of several packages share: a logger that discards, the tools a test needs
// on the machine (python3, setcap...), a polled wait for what a real process does, the pid files plugins write,
// building a Go program, and the leave definition of the join tests. It imports nothing of Halley's, so any
// package's tests may use it.
package testkit

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Quiet is a logger that discards everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// RequireTool returns the path of an executable named name in the directories of path (a PATH list; "" is $PATH
// and then /usr/sbin and /usr/local/sbin). When there is none the test fails under CI=true and is skipped
// elsewhere.
func RequireTool(t testing.TB, name, path string) string {
	t.Helper()
	dirs := filepath.SplitList(path)
	if path == "" {
		dirs = append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/local/sbin")
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p) //nolint:gosec // G703: a test looks for a tool on the PATH it was given
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	where := strings.Join(dirs, string(filepath.ListSeparator))
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not on %s (CI=true requires it)", name, where)
	}
	t.Skipf("%s is not on %s; skipping (CI=true would fail)", name, where)
	return ""
}

// RequirePython is RequireTool of python3 (path: the plugins' PATH, or "" for the test's own).
func RequirePython(t testing.TB, path string) string {
	t.Helper()
	return RequireTool(t, "python3", path)
}

// Eventually polls cond every every until it holds (true) or timeout passed (false). For what a real process
// or another goroutine does, which no fake clock drives.
func Eventually(timeout, every time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); ; {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// WaitPids waits up to 30 s for the pid file a test plugin writes (its pids, separated by blanks) and returns
// them: a real process is observed by polling, with a deadline.
func WaitPids(t testing.TB, file string) []int {
	t.Helper()
	var b []byte
	if !Eventually(30*time.Second, 5*time.Millisecond, func() bool {
		var err error
		b, err = os.ReadFile(file)
		return err == nil && len(strings.TrimSpace(string(b))) > 0
	}) {
		t.Fatalf("the plugin never wrote %s", file)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s holds %q: %v", file, b, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// GoBuild builds the Go package target (a directory or a file, as `go build` takes it) in dir into a program
// called name, in a temporary folder of the test, and returns its path.
func GoBuild(t testing.TB, dir, target, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go toolchain not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(goBin, "build", "-o", bin, target) //nolint:gosec // G204: a test building its own program
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", target, err, out)
	}
	return bin
}

// LeaveDef is the leave request of the join tests (docs/engine.md, "Exclusive choice, then merge"): the manager
// (mia) approves; the director (dan) only for more than 3 days, a default edge goes straight to the end.
const LeaveDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"manager","type":"approval","approvers":{"users":["mia"]}},
	{"id":"director","type":"approval","approvers":{"users":["dan"]}},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"manager"},
	{"from":"manager","to":"director","condition":{"days":{"$gt":3}}},
	{"from":"manager","to":"end","default":true},
	{"from":"director","to":"end"}]}`
