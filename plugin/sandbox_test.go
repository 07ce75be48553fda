//go:build linux

package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

// Every test here gets uids of its own (from 62000 on, 16 apart), so that concurrently running test packages
// and tests never share a uid: RLIMIT_NPROC counts per uid, and the cgroup-less mode kills by uid.
const testUIDBase = 62000

// reachableDir returns a fresh directory the plugin uids can enter (t.TempDir() and its parent are 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// newSandbox is plugin.NewSandbox for a configuration the test knows to be valid.
func newSandbox(t testing.TB, cfg plugin.SandboxConfig) *plugin.Sandbox {
	t.Helper()
	sb, err := plugin.NewSandbox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

// sandboxConfig is the production default with the test's own uid range and work root.
func sandboxConfig(t *testing.T, slot int) plugin.SandboxConfig {
	t.Helper()
	c := plugin.DefaultSandboxConfig(4)
	c.UID = testUIDBase + 16*slot
	c.GID = c.UID
	c.WorkRoot = filepath.Join(reachableDir(t), "work")
	c.Logger = testkit.Quiet()
	return c
}

// requireProtections fails under CI (which runs as root and must exercise the sandbox for real) and skips
// elsewhere when the host does not allow one of the named protections.
func requireProtections(t *testing.T, sb *plugin.Sandbox, names ...string) {
	t.Helper()
	rep := sb.Report()
	for _, n := range names {
		p := rep.Protection(n)
		if p.InForce {
			continue
		}
		msg := fmt.Sprintf("sandbox protection %q is not in force on this machine (Halley uid %d): %s", n, rep.HalleyUID, p.Detail)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

func sandboxed(t *testing.T, cfg plugin.SandboxConfig, need ...string) *plugin.ProcessRunner {
	t.Helper()
	sb := newSandbox(t, cfg)
	requireProtections(t, sb, append([]string{plugin.ProtectUser}, need...)...)
	r := &plugin.ProcessRunner{Sandbox: sb}
	t.Cleanup(r.Close)
	return r
}

func TestSandboxReport(t *testing.T) {
	requirePython(t)
	cfg := sandboxConfig(t, 0)
	sb := newSandbox(t, cfg)
	requireProtections(t, sb, plugin.ProtectUser, plugin.ProtectPrivate, plugin.ProtectProcess, plugin.ProtectEnvironment,
		plugin.ProtectLimits, plugin.ProtectCgroup, plugin.ProtectLeftovers, plugin.ProtectNetwork, plugin.ProtectUnixSockets, plugin.ProtectPrivateTmp)
	rep := sb.Report()
	if !rep.PluginsRun || rep.Refused != "" || rep.UIDs != "62000-62003" || rep.GID != 62000 || rep.WorkDir != cfg.WorkRoot ||
		rep.PythonError != "" || !filepath.IsAbs(rep.Python) {
		t.Fatalf("report %+v", rep)
	}
	if d := rep.Protection(plugin.ProtectLimits).Detail; !strings.Contains(d, "address space 512 MiB") || !strings.Contains(d, "processes 128") ||
		!strings.Contains(d, "open files 256") || !strings.Contains(d, "CPU seconds 600 s") || !strings.Contains(d, "file size 64 MiB") {
		t.Errorf("limits detail %q", d)
	}
	if len(rep.Protections) != 10 {
		t.Errorf("%d protections: %+v", len(rep.Protections), rep.Protections)
	}
	b, _ := json.Marshal(rep)
	for _, k := range []string{`"plugins_run":true`, `"protections":[{"name":"user","in_force":true,"detail":`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON %s lacks %s", b, k)
		}
	}
}

// pluginReport runs a python plugin and returns its output context.
func pluginReport(t *testing.T, r *plugin.ProcessRunner, spec plugin.Spec) map[string]any {
	t.Helper()
	return mustSucceed(t, run(t, r, spec, input("run-sbx", `{}`))).Context
}

// hostDir returns a fresh directory the plugin uids can enter, outside /tmp, /var/tmp and /dev/shm (which runs
// see empty): under /run, where root may write (the sandbox tests that use it need root anyway).
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/run", "halley-test-")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a directory outside /tmp: %v (CI runs as root)", err)
		}
		t.Skipf("a directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSandboxHalleysFilesAndProcessAreClosed(t *testing.T) {
	// A data dir as an operator may have made it: readable by everyone, with a database and a secret in it. Not
	// under /tmp, which runs see empty: the modes must keep plugins out where they do see the files.
	data := filepath.Join(hostDir(t), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	db, secret, conf := filepath.Join(data, "halley.db"), filepath.Join(data, "secret"), filepath.Join(hostDir(t), "halley.yaml")
	for _, f := range []string{db, secret, conf} {
		if err := os.WriteFile(f, []byte("top secret "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HALLEY_DATABASE_URL", "mysql://root:hunter2@db/halley")
	cfg := sandboxConfig(t, 1)
	cfg.PrivatePaths = []string{data, db, secret, conf}
	r := sandboxed(t, cfg, plugin.ProtectPrivate, plugin.ProtectProcess)

	for path, want := range map[string]os.FileMode{data: 0o750, db: 0o600, secret: 0o600, conf: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v %v, want %o", path, fi.Mode().Perm(), err, want)
		}
	}
	// The plugin's parent is Halley for a spawned run and the warm runtime's fork server for a forked one: both
	// are closed to it.
	for _, mode := range []struct {
		name  string
		spawn bool
	}{{"forked", false}, {"spawned", true}} {
		t.Run(mode.name, func(t *testing.T) {
			r := &plugin.ProcessRunner{Sandbox: r.Sandbox, Spawn: mode.spawn}
			t.Cleanup(r.Close)
			spec := pythonSpec(t, fmt.Sprintf(`
import json, os
def attempt(f):
    try:
        f()
        return "read"
    except Exception as e:
        return type(e).__name__
out = {
  "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "parent": os.getppid(),
  "db": attempt(lambda: open(%[1]q).read()),
  "secret": attempt(lambda: open(%[2]q).read()),
  "config": attempt(lambda: open(%[3]q).read()),
  "list_data": attempt(lambda: os.listdir(%[4]q)),
}
for who, pid in (("halley", %[5]d), ("parent", os.getppid())):
    out[who + "_environ"] = attempt(lambda: open("/proc/%%d/environ" %% pid).read())
    out[who + "_mem"] = attempt(lambda: open("/proc/%%d/mem" %% pid, "rb").read(1))
    out[who + "_fds"] = attempt(lambda: os.listdir("/proc/%%d/fd" %% pid))
print(json.dumps({"context": out}))
`, db, secret, conf, data, os.Getpid()))
			out := pluginReport(t, r, spec)
			if uid, _ := strconv.Atoi(fmt.Sprint(out["uid"])); uid < cfg.UID || uid >= cfg.UID+cfg.UIDs || fmt.Sprint(out["gid"]) != strconv.Itoa(cfg.GID) || fmt.Sprint(out["groups"]) != "[]" {
				t.Errorf("plugin ran as uid %v gid %v groups %v, want one of %d+%d, %d, []", out["uid"], out["gid"], out["groups"], cfg.UID, cfg.UIDs, cfg.GID)
			}
			if isHalley := fmt.Sprint(out["parent"]) == strconv.Itoa(os.Getpid()); isHalley != mode.spawn {
				t.Errorf("the plugin's parent is %v (this process is %d): a %s run's parent must be %s", out["parent"], os.Getpid(), mode.name,
					map[bool]string{true: "Halley", false: "the fork server"}[mode.spawn])
			}
			for _, k := range []string{"db", "secret", "config", "list_data", "halley_environ", "halley_mem", "halley_fds", "parent_environ", "parent_mem", "parent_fds"} {
				if out[k] != "PermissionError" {
					t.Errorf("%s: the plugin got %v, want PermissionError", k, out[k])
				}
			}
		})
	}
}

func TestSandboxAddressSpace(t *testing.T) {
	r := sandboxed(t, sandboxConfig(t, 2), plugin.ProtectLimits)
	spec := pythonSpec(t, `
import sys, json
n = int(sys.stdin.read() and 0 or 0)
small = bytearray(100 << 20)   # 100 MiB is fine under 512 MiB
sys.stderr.write("allocated 100 MiB\n")
big = bytearray(3 << 30)       # 3 GiB is not
print(json.dumps({"context": {"allocated": len(big)}}))
`)
	res := run(t, r, spec, input("run-mem", `{}`))
	mustFailWith(t, res, "exited with code 1", "MemoryError")
	if !strings.Contains(string(res.Stderr), "allocated 100 MiB") {
		t.Errorf("the plugin did not get as far as 100 MiB: %s", res.Stderr)
	}
}

func TestSandboxLimits(t *testing.T) {
	cfg := sandboxConfig(t, 3)
	cfg.CPUSeconds = 1
	r := sandboxed(t, cfg, plugin.ProtectLimits)
	cases := []struct {
		name, src string
		errHas    []string
	}{
		{"open files", `
import os
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(300)]
`, []string{"exited with code 1", "Too many open files"}},
		{"file size", `
with open("big", "wb") as f:
    for _ in range(80):
        f.write(b"x" * (1 << 20))
`, []string{"exited with code 1", "File too large"}},
		{"CPU seconds", `
while True:
    pass
`, []string{"killed by signal CPU time limit exceeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := pythonSpec(t, tc.src)
			spec.Timeout = time.Minute
			mustFailWith(t, run(t, r, spec, input("run-lim", `{}`)), tc.errHas...)
		})
	}
}

// uidProcesses lists the live processes whose real uid is uid.
func uidProcesses(t *testing.T, uid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) && alive(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// modes are the two ways leftovers are killed: with the run's cgroup, and by uid where there is no cgroup.
var modes = []struct {
	name   string
	cgroup string
	need   string
}{
	{"cgroup", "", plugin.ProtectCgroup},
	{"no cgroup", "off", plugin.ProtectLeftovers},
}

func TestSandboxForkLoopIsContained(t *testing.T) {
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cfg := sandboxConfig(t, 4+i)
			cfg.Processes = 24
			cfg.Cgroup = m.cgroup
			r := sandboxed(t, cfg, plugin.ProtectLimits, m.need)

			// Counts how far it gets: every child sleeps, so they all stay alive.
			counted := pythonSpec(t, `
import os, json, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.strerror
        break
    if pid == 0:
        time.sleep(1000)
        os._exit(0)
    n += 1
print(json.dumps({"context": {"forked": n, "error": err}}))
`)
			out := mustSucceed(t, run(t, r, counted, input("run-fork", `{}`))).Context
			if n, _ := strconv.Atoi(fmt.Sprint(out["forked"])); n < 10 || n >= 24 || out["error"] != "Resource temporarily unavailable" {
				t.Errorf("forked %v then %v; want fewer than 24 processes, then EAGAIN", out["forked"], out["error"])
			}
			waitNone(t, cfg.UID)

			// A real fork bomb: every process forks forever, ignoring failures; the timeout ends it.
			bomb := pythonSpec(t, `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`)
			bomb.Timeout = 1500 * time.Millisecond
			res := run(t, r, bomb, input("run-bomb", `{}`))
			if !res.TimedOut {
				t.Errorf("fork bomb: %+v, want timed out", res.Err)
			}
			waitNone(t, cfg.UID)
			// dash gives up when fork fails: the run fails, and what it forked dies with it.
			shBomb := shellSpec(t, "bomb() { while :; do bomb & done; }\nbomb\n")
			shBomb.Timeout = 5 * time.Second
			if res := run(t, r, shBomb, input("run-bomb", `{}`)); res.Status() == plugin.StatusSucceeded {
				t.Errorf("shell fork bomb succeeded")
			}
			waitNone(t, cfg.UID)
		})
	}
}

// waitNone waits until no process of uid is left (SIGKILL is asynchronous).
func waitNone(t *testing.T, uid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := uidProcesses(t, uid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes of uid %d outlived the run: %v", uid, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSandboxSetsidDaemonDiesWithTheRun(t *testing.T) {
	daemon := `
import json, os, subprocess
p = subprocess.Popen(["sleep", "1000"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps({"context": {"pid": p.pid, "sid": os.getsid(p.pid), "mine": os.getsid(0)}}))
`
	daemonPid := func(t *testing.T, r *plugin.ProcessRunner) int {
		out := pluginReport(t, r, pythonSpec(t, daemon))
		if out["sid"] == out["mine"] {
			t.Fatalf("the daemon did not get a session of its own: %v", out)
		}
		pid, _ := strconv.Atoi(fmt.Sprint(out["pid"]))
		return pid
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cfg := sandboxConfig(t, 6+i)
			cfg.Cgroup = m.cgroup
			r := sandboxed(t, cfg, m.need)
			pid := daemonPid(t, r)
			waitDead(t, []int{pid})
			waitNone(t, cfg.UID)
		})
	}
	t.Run("without a sandbox it survives", func(t *testing.T) {
		pid := daemonPid(t, newRunner(t))
		defer syscall.Kill(pid, syscall.SIGKILL)
		if !alive(pid) {
			t.Fatal("the daemon died without a sandbox: this test would not notice a sandbox that kills nothing")
		}
	})
}

func TestSandboxNetworkOff(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	r := sandboxed(t, sandboxConfig(t, 8), plugin.ProtectNetwork)
	src := `
import json, socket
try:
    s = socket.create_connection(("127.0.0.1", ` + port + `), timeout=5)
    got = s.recv(10).decode().strip()
except OSError as e:
    got = "error: " + (e.strerror or str(e))
print(json.dumps({"context": {"got": got}}))
`
	for _, tc := range []struct {
		off  bool
		want string
	}{{false, "hello"}, {true, "error: Network is unreachable"}} {
		spec := pythonSpec(t, src)
		spec.NetworkOff = tc.off
		if got := pluginReport(t, r, spec)["got"]; got != tc.want {
			t.Errorf("network off=%v: the plugin got %q, want %q", tc.off, got, tc.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if accepted != 1 {
		t.Errorf("the listener accepted %d connections, want 1 (the network=on plugin's)", accepted)
	}
	// Without a sandbox, a network=off plugin is refused rather than run with the network.
	spec := pythonSpec(t, src)
	spec.NetworkOff = true
	mustFailWith(t, run(t, newRunner(t), spec, input("run-net", `{}`)), "network off")
}

func TestSandboxRefusesRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root (CI runs as root)")
		}
		t.Skip("needs root")
	}
	cfg := sandboxConfig(t, 9)
	cfg.UID = 0
	sb := newSandbox(t, cfg)
	rep := sb.Report()
	if rep.PluginsRun || !strings.Contains(rep.Refused, "HALLEY_PLUGIN_ALLOW_ROOT=1") || rep.Protection(plugin.ProtectUser).InForce {
		t.Fatalf("report %+v", rep)
	}
	spec := shellSpec(t, `echo "{\"context\":{\"uid\":$(id -u)}}"`)
	res := run(t, &plugin.ProcessRunner{Sandbox: sb}, spec, input("run-root", `{}`))
	mustFailWith(t, res, "not run", "would run as root", "HALLEY_PLUGIN_ALLOW_ROOT=1")
	if res.ExitCode != -1 {
		t.Errorf("exit code %d, want -1 (never started)", res.ExitCode)
	}

	cfg.AllowRoot = true
	sb = newSandbox(t, cfg)
	if rep := sb.Report(); !rep.PluginsRun || rep.Refused != "" {
		t.Fatalf("with AllowRoot: %+v", rep)
	}
	out := mustSucceed(t, run(t, &plugin.ProcessRunner{Sandbox: sb}, spec, input("run-root", `{}`)))
	if fmt.Sprint(out.Context["uid"]) != "0" {
		t.Errorf("uid %v, want 0", out.Context["uid"])
	}
}

func TestSandboxedProtocol(t *testing.T) {
	cfg := sandboxConfig(t, 10)
	r := sandboxed(t, cfg, plugin.ProtectLimits, plugin.ProtectCgroup)

	t.Run("python with the SDK, the environment, a fresh directory", func(t *testing.T) {
		spec := pythonSpec(t, `
import halley_plugin as hp, os
inp = hp.read_input()
os.makedirs("ro/sub")
open("ro/sub/f", "w").write("x")
os.chmod("ro/sub", 0o500)
os.chmod("ro", 0o500)   # the runner must still clean this up
hp.write_output(context={"level": inp["context"]["level"] + 1, "env": sorted(os.environ), "cwd": os.getcwd(),
                         "home": os.environ["HOME"], "owner": os.stat(".").st_uid})
`)
		out := mustSucceed(t, run(t, r, spec, input("run-p", `{"level": 2}`))).Context
		if fmt.Sprint(out["level"]) != "3" || fmt.Sprint(out["owner"]) != strconv.Itoa(cfg.UID) || out["home"] != out["cwd"] ||
			!strings.HasPrefix(fmt.Sprint(out["cwd"]), cfg.WorkRoot+"/run-") {
			t.Errorf("output %v", out)
		}
		if got := fmt.Sprint(out["env"]); got != "[HALLEY_CALLBACK_URL HALLEY_RUN_ID HOME LANG LC_CTYPE PATH PYTHONDONTWRITEBYTECODE PYTHONPATH PYTHONUNBUFFERED TMPDIR]" &&
			got != "[HALLEY_CALLBACK_URL HALLEY_RUN_ID HOME LANG PATH PYTHONDONTWRITEBYTECODE PYTHONPATH PYTHONUNBUFFERED TMPDIR]" {
			t.Errorf("environment %s", got)
		}
		r.Sandbox.Settle()
		if entries, err := os.ReadDir(cfg.WorkRoot); err != nil || len(entries) != 0 {
			t.Errorf("work root not cleaned up: %v %v", entries, err)
		}
	})
	t.Run("a Go binary needs more than 512 MiB of address space", func(t *testing.T) {
		spec := plugin.Spec{Name: "go-bin", Version: 1, Runtime: plugin.RuntimeBinary, Path: buildPlugin(t)}
		res := run(t, r, spec, input("run-go", `{"a":1}`))
		mustFailWith(t, res, "exited with code 2")
		if !strings.Contains(string(res.Stderr), "failed to reserve page summary memory") {
			t.Errorf("stderr %s", excerptOf(res.Stderr))
		}
		big := cfg
		big.AddressSpace = 1 << 30
		big.WorkRoot = filepath.Join(reachableDir(t), "work")
		out := mustSucceed(t, run(t, &plugin.ProcessRunner{Sandbox: newSandbox(t, big)}, spec, input("run-go", `{"a":1}`)))
		if out.Context["handled_by"] != "go" {
			t.Errorf("output %+v", out)
		}
	})
	t.Run("timeout kills everything", func(t *testing.T) {
		spec := shellSpec(t, "sleep 100 &\nsetsid sleep 100 &\nsleep 100\n")
		spec.Timeout = time.Second
		res := run(t, r, spec, input("run-t", `{}`))
		if !res.TimedOut {
			t.Fatalf("%+v", res.Err)
		}
		waitNone(t, cfg.UID)
	})
	t.Run("runs in flight get distinct uids", func(t *testing.T) {
		spec := pythonSpec(t, `
import json, os, time
time.sleep(0.3)
print(json.dumps({"context": {"uid": os.getuid()}}))
`)
		var wg sync.WaitGroup
		uids := make([]string, 4)
		for i := range uids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := r.Run(context.Background(), spec, input("run-u", `{}`))
				if res.Err == nil {
					uids[i] = fmt.Sprint(res.Output.Context["uid"])
				}
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for _, u := range uids {
			n, _ := strconv.Atoi(u)
			if n < cfg.UID || n >= cfg.UID+cfg.UIDs || seen[u] {
				t.Errorf("uids %v: want 4 distinct uids in %d..%d", uids, cfg.UID, cfg.UID+cfg.UIDs-1)
				break
			}
			seen[u] = true
		}
	})
}

func excerptOf(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// cgroup2Root finds the cgroup v2 mount (for tests that make a cgroup folder of their own).
func cgroup2Root(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, " - cgroup2 "); i > 0 {
			if f := strings.Fields(l[:i]); len(f) >= 5 {
				return f[4]
			}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no cgroup v2 file system is mounted")
	}
	t.Skip("no cgroup v2 file system is mounted")
	return ""
}

func TestSandboxSweepsWhatADeadHalleyLeft(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root to make a cgroup folder (CI runs as root)")
		}
		t.Skip("needs root")
	}
	cg := filepath.Join(cgroup2Root(t), fmt.Sprintf("halley-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(cg) })
	// A pid that is surely gone: a process that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := gone.Process.Pid

	// What a Halley killed with -9 leaves: a run's cgroup with its plugin still running, and its directory with
	// a read-only folder in it owned by the plugin's uid.
	cfg := sandboxConfig(t, 11)
	cfg.Cgroup = cg
	leaf := filepath.Join(cg, fmt.Sprintf("halley-run-%d-0123456789abcdef", dead))
	if err := os.Mkdir(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("sleep", "1000")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill(); orphan.Wait() })
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.WorkRoot, fmt.Sprintf("run-%d-42", dead))
	if err := os.MkdirAll(filepath.Join(run, "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "ro", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(run, "ro"), run} {
		if err := os.Chown(p, cfg.UID, cfg.GID); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	// And a live Halley's run, which must stay.
	live := filepath.Join(cfg.WorkRoot, fmt.Sprintf("run-%d-43", os.Getppid()))
	if err := os.Mkdir(live, 0o700); err != nil {
		t.Fatal(err)
	}

	sb := newSandbox(t, cfg)
	requireProtections(t, sb, plugin.ProtectCgroup)
	if _, err := os.Stat(leaf); !os.IsNotExist(err) {
		t.Errorf("the dead Halley's cgroup is still there: %v", err)
	}
	if err := orphan.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the orphaned plugin was not killed: %v", err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("the dead Halley's run directory is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live Halley's run directory was removed: %v", err)
	}
}

func TestSandboxUnreachableWorkDir(t *testing.T) {
	cfg := sandboxConfig(t, 12)
	closed := filepath.Join(t.TempDir(), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil { // the plugin uids cannot enter it
		t.Fatal(err)
	}
	cfg.WorkRoot = filepath.Join(closed, "work")
	sb := newSandbox(t, cfg)
	requireProtections(t, sb, plugin.ProtectUser)
	rep := sb.Report()
	if rep.PluginsRun || !strings.Contains(rep.Refused, "cannot be entered by the plugin uids") {
		t.Fatalf("report %+v", rep)
	}
	mustFailWith(t, run(t, &plugin.ProcessRunner{Sandbox: sb}, shellSpec(t, "echo '{}'"), input("run-w", `{}`)),
		"not run", "cannot be entered by the plugin uids")
}

// TestSandboxedStartFailures: a sandboxed run whose plugin cannot be executed never started, as without the
// sandbox: "unable to start" and no exit code, although prlimit(1) is the process that executes it. A file that
// is neither ELF nor #! is refused rather than run by /bin/sh (execvp's fallback); a plugin that exits 127 by
// itself keeps its exit code.
func TestSandboxedStartFailures(t *testing.T) {
	r := sandboxed(t, sandboxConfig(t, 13), plugin.ProtectLimits)
	binary := func(content string) plugin.Spec {
		return plugin.Spec{Name: "broken", Version: 1, Runtime: plugin.RuntimeBinary, Path: writeFile(t, "plugin", content, 0o755)}
	}
	for _, tc := range []struct {
		name  string
		spec  plugin.Spec
		parts []string
	}{
		{"not a program", binary("this is not a program\necho '{}'\n"), []string{"unable to start", "exec format error"}},
		{"missing #! interpreter", binary("#!/nonexistent/sh\necho '{}'\n"), []string{"unable to start", "No such file or directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, tc.spec, input("run-start", `{}`))
			mustFailWith(t, res, tc.parts...)
			if res.ExitCode != -1 {
				t.Errorf("exit code %d, want -1 (never started); stderr %q", res.ExitCode, res.Stderr)
			}
		})
	}
	t.Run("a plugin's own exit 127", func(t *testing.T) {
		res := run(t, r, shellSpec(t, "echo 'prlimit: failed to execute nothing: no' >&2\nexit 127\n"), input("run-127", `{}`))
		mustFailWith(t, res, "exited with code 127")
		if res.ExitCode != 127 {
			t.Errorf("exit code %d, want 127", res.ExitCode)
		}
	})
}
