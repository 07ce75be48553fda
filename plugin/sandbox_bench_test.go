//go:build linux

package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

// BenchmarkRun measures one run of a trivial plugin with and without the sandbox, spawned and (python) forked from
// the warm runtime (the -spawn modes spawn python too; binaries are always spawned): the difference is the sandbox's
// per-run overhead (the init stage's exec and its mounts, prlimit's exec, the cgroup leaf, the uid switch, chown and
// removal of the run directory); network-off adds the network namespace and the seccomp filter.
//
// Runs go HALLEY_BENCH_PARALLEL per core at once (1 unless set; make bench's plugins suite runs 4 on 2 cores), and
// cpu-ms/op is the whole machine's busy time a run (/proc/stat): the children, the fork server and the kernel's work
// for them included, which a process's own CPU time does not show.
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 200x ./plugin/
//	HALLEY_BENCH_PARALLEL=2 go test -run '^$' -bench 'BenchmarkRun/python' -benchtime 400x ./plugin/
func BenchmarkRun(b *testing.B) {
	parallel := 1
	if v, err := strconv.Atoi(os.Getenv("HALLEY_BENCH_PARALLEL")); err == nil && v > 0 {
		parallel = v
	}
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
	cfg := plugin.DefaultSandboxConfig(8) // a uid for each run in flight
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
				busy := machineBusy(b)
				b.SetParallelism(parallel)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if res := r.Run(context.Background(), spec, in); res.Err != nil {
							b.Error(res.Err)
							return
						}
					}
				})
				b.ReportMetric(float64(busy().Milliseconds())/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// machineBusy starts counting the machine's busy CPU time (every core, /proc/stat: user, nice, system, irq and
// softirq — not idle, iowait, or steal, the hypervisor's time); the function it returns gives the time since.
func machineBusy(b *testing.B) func() time.Duration {
	b.Helper()
	read := func() time.Duration {
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			b.Fatal(err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
		var busy int64
		for i, f := range fields[1:] {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatalf("/proc/stat: %q", line)
			}
			if i != 3 && i != 4 && i < 7 { // not idle, iowait, steal; not guest (counted in user)
				busy += n
			}
		}
		return time.Duration(busy) * time.Second / 100 // USER_HZ
	}
	start := read()
	return func() time.Duration { return read() - start }
}
