//go:build linux

package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
)

// TestLeavesMadeAheadAndGivenBackAfter: a run takes a cgroup leaf made ahead while earlier runs went on, and what a
// finished run took (its directory, its leaf, its uid) is given back after its result: with one plugin uid the
// next run starts only once the previous run's directory is gone, the reserve is topped up, no leaf serves two
// runs, and Close leaves nothing in the cgroup. Spawned and forked runs alike.
func TestLeavesMadeAheadAndGivenBackAfter(t *testing.T) {
	needRoot(t, "for a cgroup of its own and a plugin uid")
	testkit.RequirePython(t, DefaultPath)
	for _, spawn := range []bool{true, false} {
		t.Run(fmt.Sprintf("spawn=%v", spawn), func(t *testing.T) {
			sb, dir := internalSandbox(t, 1, 13) // one uid: each run waits until the previous one has given it back
			if sb.cgroupDir == "" || !sb.dropUID {
				t.Fatalf("no cgroup leaves or no plugin uid here: %+v", sb.Report())
			}
			r := &ProcessRunner{Sandbox: sb, Spawn: spawn}
			t.Cleanup(r.Close)
			leaves := func() []string {
				m, _ := filepath.Glob(filepath.Join(sb.cgroupDir, fmt.Sprintf("%s%d-*", leafPrefix, os.Getpid())))
				for i := range m {
					m[i] = filepath.Base(m[i])
				}
				return m
			}
			file := filepath.Join(dir, "where.py")
			src := `import json, os, sys
prev = json.load(sys.stdin)["context"].get("prev", "")
cg = open("/proc/self/cgroup").read().strip().rsplit("/", 1)[-1]
print(json.dumps({"context": {"cgroup": cg, "dir": os.getcwd(), "prev_seen": bool(prev) and os.path.exists(prev)}}))
`
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := Spec{Name: "where", Version: 1, Runtime: RuntimePython, Path: file}
			used := map[string]bool{}
			prev := ""
			for i := range 4 {
				ahead := leaves() // what was made ahead of this run (nothing before the first)
				ctx, _ := json.Marshal(map[string]string{"prev": prev})
				res := r.Run(t.Context(), spec, Input{RunID: fmt.Sprintf("run-%d", i), Context: ctx})
				if res.Err != nil {
					t.Fatalf("run %d: %v (stderr %q)", i, res.Err, res.Stderr)
				}
				c := res.Output.Context
				cg, runDir := fmt.Sprint(c["cgroup"]), fmt.Sprint(c["dir"])
				if !strings.HasPrefix(cg, leafPrefix) || used[cg] {
					t.Fatalf("run %d ran in cgroup %q (used before: %v)", i, cg, used[cg])
				}
				used[cg] = true
				if i > 0 && !slices.Contains(ahead, cg) {
					t.Errorf("run %d made its leaf %s on its own path; made ahead: %v", i, cg, ahead)
				}
				if fmt.Sprint(c["prev_seen"]) != "false" {
					t.Errorf("run %d saw the previous run's directory %s", i, prev)
				}
				prev = runDir
				sb.Settle()
				if _, err := os.Lstat(runDir); !os.IsNotExist(err) {
					t.Errorf("run %d's directory is still there: %v", i, err)
				}
				if now := leaves(); len(now) != leafReserve || slices.Contains(now, cg) {
					t.Errorf("after run %d the cgroup holds %v; want %d fresh leaves, not the run's own %s", i, now, leafReserve, cg)
				}
			}
			r.Close()
			if left := leaves(); len(left) != 0 {
				t.Errorf("after Close the cgroup still holds %v", left)
			}
			if entries, err := os.ReadDir(sb.cfg.WorkRoot); err != nil || len(entries) != 0 {
				t.Errorf("after Close the work root holds %v (%v)", entries, err)
			}
		})
	}
}
