//go:build linux

package plugin_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// capsProbe loads forkserver.py's functions (not its loop) and, in a forked child that switched to uid 65534, runs
// its clear_caps and prints the capability sets left. With keep set, the child asked the kernel to keep its
// permitted set through the switch (PR_SET_KEEPCAPS), as a Halley that is not root but holds CAP_SETUID keeps it.
const capsProbe = `
import os, sys
src = open("forkserver.py").read()
head, sep, _ = src.rpartition("\nmain()")
assert sep, "forkserver.py no longer ends with main()"
g = {"__name__": "forkserver_probe"}
exec(compile(head, "forkserver.py", "exec"), g)
keep = sys.argv[1] == "keep"
pid = os.fork()
if pid == 0:
    if keep:
        g["check"](g["libc"].prctl(8, 1, 0, 0, 0), "PR_SET_KEEPCAPS")
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    before = g["has_caps"]()
    g["clear_caps"](65534)
    status = open("/proc/self/status").read()
    print("before=%s" % before, *[l.replace("\t", "") for l in status.splitlines() if l.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb"))])
    sys.stdout.flush()
    os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
`

// TestForkServerClearsCapabilities: a forked run keeps no capability after its switch of uid, whether the kernel
// cleared them in the switch (Halley is root: the check finds none and leaves it there) or they survived it (a
// Halley that is not root but holds CAP_SETUID: clear_caps clears them and checks).
func TestForkServerClearsCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root to switch uids (CI runs as root)")
		}
		t.Skip("needs root")
	}
	for _, mode := range []string{"root", "keep"} {
		out, err := exec.Command("python3", "-I", "-c", capsProbe, mode).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		got := strings.TrimSpace(string(out))
		wantBefore := map[string]string{"root": "before=False", "keep": "before=True"}[mode]
		if !strings.HasPrefix(got, wantBefore+" ") {
			t.Errorf("%s: %q, want the child to start with %s", mode, got, wantBefore)
		}
		for _, set := range []string{"CapInh:0000000000000000", "CapPrm:0000000000000000", "CapEff:0000000000000000", "CapAmb:0000000000000000"} {
			if !strings.Contains(got, set) {
				t.Errorf("%s: %q, want %s", mode, got, set)
			}
		}
	}
}
