//go:build linux

package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

// BenchmarkRun measures one run of a trivial plugin with and without the sandbox, spawned and (python) forked from
// the warm runtime (the -spawn modes spawn python too; binaries are always spawned): the difference is the sandbox's
// per-run overhead (the init stage's exec and its mounts, prlimit's exec, the cgroup leaf, the uid switch, chown and
// removal of the run directory); network-off adds the network namespace and the seccomp filter.
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 200x ./plugin/
func BenchmarkRun(b *testing.B) {
	dir := b.TempDir()
	for _, p := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(p, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	sh := filepath.Join(dir, "echo.sh")
	py := filepath.Join(dir, "echo.py")
	if err := os.WriteFile(sh, []byte("#!/bin/sh\necho '{\"context\":{}}'\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(py, []byte("print('{\"context\":{}}')\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := plugin.DefaultSandboxConfig(1)
	cfg.UID, cfg.GID = testUIDBase+16*15, testUIDBase+16*15
	cfg.WorkRoot = filepath.Join(dir, "sandboxed")
	cfg.Logger = testkit.Quiet()
	sb := newSandbox(b, cfg)
	if !sb.Report().Protection(plugin.ProtectUser).InForce {
		b.Skip("the sandbox needs root here")
	}
	runners := map[string]*plugin.ProcessRunner{
		"bare":            {WorkRoot: filepath.Join(dir, "bare"), Spawn: true},
		"bare-warm":       {WorkRoot: filepath.Join(dir, "bare")},
		"sandboxed":       {Sandbox: sb},
		"sandboxed-spawn": {Sandbox: sb, Spawn: true},
	}
	for _, r := range runners {
		b.Cleanup(r.Close)
	}
	in := plugin.Input{RunID: "bench", Context: []byte(`{}`), Node: []byte(`{}`)}
	for _, rt := range []struct {
		name string
		spec plugin.Spec
	}{
		{"sh", plugin.Spec{Name: "echo", Version: 1, Runtime: plugin.RuntimeBinary, Path: sh}},
		{"python", plugin.Spec{Name: "echo", Version: 1, Runtime: plugin.RuntimePython, Path: py}},
	} {
		for _, mode := range []string{"bare", "bare-warm", "sandboxed", "sandboxed-spawn", "sandboxed-network-off", "sandboxed-spawn-network-off"} {
			b.Run(rt.name+"/"+mode, func(b *testing.B) {
				r, spec := runners[mode], rt.spec
				if base, ok := strings.CutSuffix(mode, "-network-off"); ok {
					r, spec.NetworkOff = runners[base], true
				}
				for b.Loop() {
					if res := r.Run(context.Background(), spec, in); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			})
		}
	}
}
