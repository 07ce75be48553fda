//go:build linux

package plugin

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin/internal/runinit"
)

// TestSweepShared: where runs have no private /tmp, what the run's uid left at the top of /tmp, /var/tmp and
// /dev/shm (a file, a folder it closed with files in it) is deleted when the run ends; what others own stays.
func TestSweepShared(t *testing.T) {
	needRoot(t, "to own files as another uid")
	const uid, other = 62990, 62991
	var mine, theirs []string
	for _, d := range runinit.TmpDirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		f, dir, kept := filepath.Join(d, "halley-sweep-file"), filepath.Join(d, "halley-sweep-dir"), filepath.Join(d, "halley-sweep-other")
		for _, p := range []string{f, kept} {
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "deep"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "deep", "x"), []byte("x"), 0o400); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{f, dir, filepath.Join(dir, "deep"), filepath.Join(dir, "deep", "x")} {
			if err := os.Lchown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Join(dir, "deep"), 0o500); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(kept, other, other); err != nil {
			t.Fatal(err)
		}
		mine = append(mine, f, dir)
		theirs = append(theirs, kept)
		t.Cleanup(func() { _ = os.Remove(kept) })
	}
	s := &Sandbox{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.sweepShared(uid)
	for _, p := range mine {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	for _, p := range theirs {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("another uid's %s was deleted: %v", p, err)
		}
	}
}

// TestExecFailureOfTheInitStage: a run whose init stage failed (exit 125, its one line on stderr) never started;
// anything else with exit 125 is the plugin's own.
func TestExecFailureOfTheInitStage(t *testing.T) {
	b := &box{s: &Sandbox{nsInit: true, prlimit: []string{"/usr/bin/prlimit", "--"}}}
	for _, c := range []struct {
		code   int
		stderr string
		want   string
	}{
		{125, "halley-sandbox-init: mounting a private /tmp: operation not permitted\n", "the run could not be set up: mounting a private /tmp: operation not permitted"},
		{125, "halley-sandbox-init: one\ntwo\n", ""},
		{125, "Traceback...\n", ""},
		{1, "halley-sandbox-init: x\n", ""},
		{127, "prlimit: failed to execute /p: No such file or directory\n", "/p: No such file or directory"},
	} {
		got, ok := b.execFailure(c.code, []byte(c.stderr), "/p")
		if got != c.want || ok != (c.want != "") {
			t.Errorf("exit %d %q: %q %v, want %q", c.code, c.stderr, got, ok, c.want)
		}
	}
	b.s.nsInit = false
	if _, ok := b.execFailure(125, []byte("halley-sandbox-init: x\n"), "/p"); ok {
		t.Error("without an init stage, exit 125 is the plugin's")
	}
}

// internalSandbox is a sandbox with uids UIDs of test slot slot (62000 + 16 × slot, as sandbox_test.go counts them)
// and its work root in a fresh folder the plugin uids can reach, which it also returns.
func internalSandbox(t *testing.T, uids, slot int) (*Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultSandboxConfig(uids)
	cfg.UID, cfg.GID = 62000+16*slot, 62000+16*slot
	cfg.WorkRoot = filepath.Join(dir, "work")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	sb, err := NewSandbox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sb, dir
}

// needRoot fails under CI (which runs as root) and skips elsewhere when the test is not root.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs root %s (CI runs as root)", why)
		}
		t.Skip("needs root")
	}
}

// TestNoNewPrivsWithoutTheInitStage: a run spawned where the host allows no init stage still has no_new_privs
// (setpriv(1) sets it), like a run through the init stage and a forked one.
func TestNoNewPrivsWithoutTheInitStage(t *testing.T) {
	testkit.RequirePython(t, DefaultPath)
	sb, dir := internalSandbox(t, 2, 12)
	if sb.setpriv == "" {
		t.Fatal("no setpriv(1) on the plugins' PATH (util-linux)")
	}
	file := filepath.Join(dir, "nnp.py")
	src := "import json\nst = dict(l.split(':', 1) for l in open('/proc/self/status'))\nprint(json.dumps({'context': {'nnp': st['NoNewPrivs'].strip()}}))\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, nsInit := range []bool{true, false} {
		if nsInit && !sb.nsInit {
			continue
		}
		sb.nsInit = nsInit // as on a host without CAP_SYS_ADMIN: spawned directly as the run's uid
		for _, spawn := range []bool{true, false} {
			r := &ProcessRunner{Sandbox: sb, Spawn: spawn}
			res := r.Run(t.Context(), Spec{Name: "nnp", Version: 1, Runtime: RuntimePython, Path: file}, Input{RunID: "nnp"})
			r.Close()
			if res.Err != nil {
				t.Fatalf("init stage %v, spawn %v: %v (stderr %q)", nsInit, spawn, res.Err, res.Stderr)
			}
			if got := fmt.Sprint(res.Output.Context["nnp"]); got != "1" {
				t.Errorf("init stage %v, spawn %v: NoNewPrivs %s, want 1", nsInit, spawn, got)
			}
		}
	}
}
