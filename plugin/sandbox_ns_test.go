//go:build linux

package plugin_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/plugin"
)

// unixServer listens on a unix socket at path, world-writable (0777) as a careless service's would be, and
// greets every connection; it returns how many it accepted.
func unixServer(t *testing.T, path string) func() int {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			_, _ = c.Write([]byte("hello\n"))
			_ = c.Close()
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// pyList writes a list of strings as a Python literal.
func pyList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}

// unixProbe is a python plugin that connects to each unix socket of paths and reports the first line it read
// or the error, whether it could make a socketpair, what it sees in /run and what io_uring_setup answers.
const unixProbe = `
import json, os, socket
def greet(p):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(p)
        return s.recv(200).decode("latin-1").split("\n")[0][:40]
    except OSError as e:
        return "error: " + type(e).__name__ + ": " + (e.strerror or str(e))
def pair():
    try:
        a, b = socket.socketpair()
        a.send(b"x")
        return b.recv(1).decode()
    except OSError as e:
        return "error: " + str(e)
def uring():
    import ctypes, platform
    nr = {"x86_64": 425, "aarch64": 425}.get(platform.machine())
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(nr, 1, params)
    if fd >= 0:
        os.close(fd)
        return "created"
    return os.strerror(ctypes.get_errno())
try:
    run = sorted(os.listdir("/run"))
except OSError as e:
    run = ["error: " + str(e)]
print(json.dumps({"context": {"got": {p: greet(p) for p in PATHS}, "pair": pair(), "run": run, "uring": uring()}}))
`

// TestSandboxNetworkOffUnixSockets: a network=off plugin reaches no unix socket of the host — not one the test
// listens on (mode 0777, in /run and in /tmp), not the database's — while a network=on plugin reaches those
// outside /tmp (so the test would see a hole; /tmp is private to every run); it still gets a socketpair, and sees
// an empty /run.
func TestSandboxNetworkOffUnixSockets(t *testing.T) {
	requirePython(t)
	dir := hostDir(t)
	paths := []string{filepath.Join(dir, "svc.sock"), filepath.Join(reachableDir(t), "tmp-svc.sock")}
	var counts []func() int
	for _, p := range paths {
		counts = append(counts, unixServer(t, p))
	}
	const mariadb = "/run/mysqld/mysqld.sock"
	if _, err := os.Stat(mariadb); err == nil {
		paths = append(paths, mariadb)
	} else {
		t.Logf("no %s here: the database socket is not tried", mariadb)
	}
	r := sandboxed(t, sandboxConfig(t, 9), plugin.ProtectNetwork, plugin.ProtectUnixSockets, plugin.ProtectPrivateTmp)
	src := strings.Replace(unixProbe, "PATHS", pyList(paths), 1)

	off := pythonSpec(t, src)
	off.NetworkOff = true
	out := pluginReport(t, r, off)
	for _, p := range paths {
		if got := out["got"].(map[string]any)[p]; got != "error: PermissionError: Permission denied" {
			t.Errorf("network=off plugin, %s: got %q, want a refused socket", p, got)
		}
	}
	if out["pair"] != "x" {
		t.Errorf("network=off plugin: socketpair gave %v", out["pair"])
	}
	if fmt.Sprint(out["run"]) != "[]" {
		t.Errorf("network=off plugin sees %v in /run, want nothing", out["run"])
	}
	if out["uring"] != "Function not implemented" {
		t.Errorf("network=off plugin: io_uring_setup gave %v, want ENOSYS (io_uring makes sockets past the filter)", out["uring"])
	}
	for i, n := range counts {
		if n() != 0 {
			t.Fatalf("socket %s accepted %d connections from the network=off plugin", paths[i], n())
		}
	}

	out = pluginReport(t, r, pythonSpec(t, src))
	for i, p := range paths {
		got := fmt.Sprint(out["got"].(map[string]any)[p])
		switch {
		case strings.HasPrefix(p, os.TempDir()+"/"):
			// Every run has a /tmp of its own: the host's sockets there are beyond network=on plugins too.
			if got != "error: FileNotFoundError: No such file or directory" || counts[i]() != 0 {
				t.Errorf("network=on plugin, %s: got %q (%d accepted), want nothing there", p, got, counts[i]())
			}
		case p == mariadb:
			if strings.HasPrefix(got, "error:") {
				t.Errorf("network=on plugin could not reach %s (%s): the test would not see the hole", p, got)
			}
		case got != "hello" || counts[i]() != 1:
			t.Errorf("network=on plugin, %s: got %q (%d accepted); the test would not see the hole", p, got, counts[i]())
		}
	}
}

// tmpProbe writes a mark into /tmp, /var/tmp and /dev/shm, reports what it found there first, signals ready in
// the shared folder and waits for the test's go before it ends.
const tmpProbe = `
import json, os, time
seen = {}
for d in ("/tmp", "/var/tmp", "/dev/shm"):
    seen[d] = sorted(os.listdir(d))
    with open(os.path.join(d, "mark-" + MARK), "w") as f:
        f.write("planted by " + MARK)
def attempt(p):
    try:
        return open(p).read()
    except OSError as e:
        return type(e).__name__
other = {p: attempt(p) for p in OTHER}
if WAIT:
    open(os.path.join(SHARED, MARK + ".ready"), "w").close()
deadline = time.time() + 30
while WAIT and not os.path.exists(os.path.join(SHARED, "go")) and time.time() < deadline:
    time.sleep(0.01)
print(json.dumps({"context": {"seen": seen, "other": other}}))
`

// TestSandboxPrivateTmp: each run has its own /tmp, /var/tmp and /dev/shm. A run (network on) plants files there;
// a run of another plugin (network off, another uid) started while the first still runs, and one started after it
// ended, find nothing — neither the first run's files nor the host's — and nothing reaches the host's folders.
func TestSandboxPrivateTmp(t *testing.T) {
	requirePython(t)
	shared := filepath.Join(hostDir(t), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(os.TempDir(), fmt.Sprintf("halley-host-%d", os.Getpid()))
	if err := os.WriteFile(hostFile, []byte("the host's"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hostFile) })
	r := sandboxed(t, sandboxConfig(t, 10), plugin.ProtectPrivateTmp, plugin.ProtectNetwork, plugin.ProtectUnixSockets)
	spec := func(mark string, wait bool, off bool) plugin.Spec {
		var other []string
		for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
			other = append(other, filepath.Join(d, "mark-a"))
		}
		other = append(other, hostFile)
		src := strings.NewReplacer("MARK", fmt.Sprintf("%q", mark), "OTHER", pyList(other), "SHARED", fmt.Sprintf("%q", shared),
			"WAIT", map[bool]string{true: "True", false: "False"}[wait]).Replace(tmpProbe)
		s := pythonSpec(t, src)
		s.Name, s.NetworkOff = "tmp-"+mark, off
		return s
	}
	type result struct{ out map[string]any }
	first := make(chan result, 1)
	go func() {
		res := run(t, r, spec("a", true, false), input("run-a", `{}`))
		if res.Err != nil || res.Output == nil {
			first <- result{map[string]any{"err": fmt.Sprintf("%v %s", res.Err, res.Stderr)}}
			return
		}
		first <- result{res.Output.Context}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for { // a real process must be observed: polled, with a deadline
		if _, err := os.Stat(filepath.Join(shared, "a.ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never got ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// What a run may see in its /tmp: the path down to its own run directory, when the work root is there.
	own := map[string]string{"/tmp": "[]", "/var/tmp": "[]", "/dev/shm": "[]"}
	for d := range own {
		if rel, ok := strings.CutPrefix(r.Sandbox.WorkRoot(), d+"/"); ok {
			own[d] = "[" + strings.Split(rel, "/")[0] + "]"
		}
	}
	check := func(name string, out map[string]any, others bool) {
		t.Helper()
		for d, want := range own {
			if got := fmt.Sprint(out["seen"].(map[string]any)[d]); got != want {
				t.Errorf("%s found %s in %s, want %s", name, got, d, want)
			}
		}
		for p, got := range out["other"].(map[string]any) {
			if others && got != "FileNotFoundError" {
				t.Errorf("%s read %s: %v", name, p, got)
			}
		}
	}
	check("a run beside it", pluginReport(t, r, spec("b", false, true)), true)
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := <-first
	if a.out["err"] != nil {
		t.Fatalf("the first run: %v", a.out["err"])
	}
	check("the first run", a.out, false)
	check("a later run", pluginReport(t, r, spec("c", false, true)), true)
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		for _, m := range []string{"a", "b", "c"} {
			if _, err := os.Stat(filepath.Join(d, "mark-"+m)); !os.IsNotExist(err) {
				t.Errorf("run %s's file reached the host's %s: %v", m, d, err)
			}
		}
	}
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "the host's" {
		t.Errorf("the host's file: %q %v", b, err)
	}
}
