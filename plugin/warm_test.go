//go:build linux

package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/plugin"
)

// confinement is a python plugin that reports what confines it: every line of the sandbox report that a process
// can see from inside.
const confinement = `
import json, os, resource, socket
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
             "SigBlk", "SigIgn", "SigCgt"):
        st[k] = v.split()
def ns(name):
    return os.readlink("/proc/self/ns/" + name)
def attempt(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return type(e).__name__
out = {
    "status": st,
    "limits": {n: resource.getrlimit(getattr(resource, n)) for n in
               ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_CORE")},
    "cgroup": open("/proc/self/cgroup").read().strip(),
    "ns": {n: ns(n) for n in ("mnt", "ipc", "net")},
    "tmp": sorted(os.listdir("/tmp")) + sorted(os.listdir("/dev/shm")) + sorted(os.listdir("/var/tmp")),
    "run": sorted(os.listdir("/run")),
    "cwd": os.getcwd(),
    "fds": sorted(os.listdir("/proc/self/fd")),
    "env": dict(os.environ),
    "unix_socket": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
    "pgid_is_pid": os.getpgid(0) == os.getpid(),
    "ppid": os.getppid(),
    "pid": os.getpid(),
    "argv0": __import__("sys").argv[0],
    "name": __name__,
}
print(json.dumps({"context": out}))
`

// TestWarmRunsAreConfinedLikeSpawnedOnes runs the same plugin forked from the warm runtime and spawned, with the
// network on and off, and compares what confines it: uid and groups, capabilities, no_new_privs, the seccomp
// filter, signals, rlimits, the cgroup leaf, namespaces, private folders, descriptors, environment.
func TestWarmRunsAreConfinedLikeSpawnedOnes(t *testing.T) {
	requirePython(t)
	cfg := sandboxConfig(t, 8)
	warm := sandboxed(t, cfg, plugin.ProtectLimits, plugin.ProtectCgroup, plugin.ProtectPrivateTmp, plugin.ProtectNetwork, plugin.ProtectUnixSockets)
	spawn := &plugin.ProcessRunner{Sandbox: warm.Sandbox, Spawn: true}
	host := map[string]string{}
	for _, n := range []string{"mnt", "ipc", "net"} {
		host[n], _ = os.Readlink("/proc/self/ns/" + n)
	}
	for _, netOff := range []bool{false, true} {
		t.Run(fmt.Sprintf("network off %v", netOff), func(t *testing.T) {
			spec := pythonSpec(t, confinement)
			spec.NetworkOff = netOff
			got := map[bool]map[string]any{}
			for _, r := range []*plugin.ProcessRunner{warm, spawn} {
				out := mustSucceed(t, run(t, r, spec, input("run-conf", `{}`))).Context
				forked := fmt.Sprint(out["ppid"]) != strconv.Itoa(os.Getpid())
				if forked == r.Spawn {
					t.Fatalf("Spawn=%v but the plugin's parent is %v (this process %d)", r.Spawn, out["ppid"], os.Getpid())
				}
				// What differs by nature between two runs: pids, the run's directory and uid slot, namespace ids.
				for _, k := range []string{"ppid", "pid"} {
					delete(out, k)
				}
				dir := out["cwd"].(string)
				if !strings.HasPrefix(dir, cfg.WorkRoot+"/run-") || out["argv0"] != dir+"/plugin.py" || out["name"] != "__main__" {
					t.Errorf("cwd %v argv0 %v name %v", dir, out["argv0"], out["name"])
				}
				out["cwd"], out["argv0"] = "<run dir>", "<run dir>/plugin.py"
				env := out["env"].(map[string]any)
				for _, k := range []string{"HOME", "TMPDIR", "PYTHONPATH"} {
					if env[k] != dir {
						t.Errorf("env %s = %v, want the run dir", k, env[k])
					}
					env[k] = "<run dir>"
				}
				st := out["status"].(map[string]any)
				uid := fmt.Sprint(st["Uid"].([]any)[0])
				if n, _ := strconv.Atoi(uid); n < cfg.UID || n >= cfg.UID+cfg.UIDs {
					t.Errorf("uid %v outside %d+%d", uid, cfg.UID, cfg.UIDs)
				}
				st["Uid"], st["Gid"] = "<run uid>", fmt.Sprint(st["Gid"])
				cg := out["cgroup"].(string)
				if !strings.Contains(cg, "/halley-run-"+strconv.Itoa(os.Getpid())+"-") {
					t.Errorf("cgroup %q is not a run leaf of this process", cg)
				}
				out["cgroup"] = "<leaf>"
				nss := out["ns"].(map[string]any)
				for n, v := range nss {
					own := v != host[n]
					if want := n != "net" || netOff; own != want {
						t.Errorf("namespace %s of its own: %v, want %v", n, own, want)
					}
					nss[n] = own
				}
				got[r.Spawn] = out
			}
			for k, f := range got[false] {
				if s := got[true][k]; !reflect.DeepEqual(f, s) {
					a, _ := json.Marshal(f)
					b, _ := json.Marshal(s)
					t.Errorf("%s: a forked run has %s, a spawned one %s", k, a, b)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			// And the values themselves are the sandbox's.
			out := got[false]
			st := out["status"].(map[string]any)
			if fmt.Sprint(st["NoNewPrivs"]) != "[1]" || fmt.Sprint(st["CapEff"]) != "[0000000000000000]" ||
				fmt.Sprint(st["CapPrm"]) != "[0000000000000000]" || fmt.Sprint(st["CapAmb"]) != "[0000000000000000]" || fmt.Sprint(st["Groups"]) != "[]" {
				t.Errorf("status %v: want no_new_privs, no capabilities, no groups", st)
			}
			if wantSeccomp := map[bool]string{true: "[2]", false: "[0]"}[netOff]; fmt.Sprint(st["Seccomp"]) != wantSeccomp {
				t.Errorf("Seccomp %v, want %s", st["Seccomp"], wantSeccomp)
			}
			if l := fmt.Sprint(out["limits"].(map[string]any)["RLIMIT_AS"]); l != fmt.Sprintf("[%d %d]", cfg.AddressSpace, cfg.AddressSpace) {
				t.Errorf("RLIMIT_AS %s", l)
			}
			// /tmp, /dev/shm and /var/tmp are empty but for the way to the run's directory, bound back into /tmp.
			wantTmp := "[]"
			if rest, ok := strings.CutPrefix(cfg.WorkRoot, "/tmp/"); ok {
				wantTmp = "[" + strings.Split(rest, "/")[0] + "]"
			}
			if fmt.Sprint(out["tmp"]) != wantTmp || fmt.Sprint(out["fds"]) != "[0 1 2 3]" || out["pgid_is_pid"] != true {
				t.Errorf("tmp %v fds %v pgid_is_pid %v", out["tmp"], out["fds"], out["pgid_is_pid"])
			}
			if want := map[bool]string{true: "PermissionError", false: "ok"}[netOff]; out["unix_socket"] != want {
				t.Errorf("unix socket: %v, want %s", out["unix_socket"], want)
			}
		})
	}
}

// isolation is a plugin that leaves a secret everywhere a later run might find it (a file in its directory, in
// /tmp and /dev/shm, its environment, a module attribute, a module of its own in sys.modules, a large buffer on
// its heap) and reports whether it found any other run's secret there, its memory included.
const isolation = `
import json, os, re, sys
secret = json.load(sys.stdin)["context"]["secret"]  # this run's: in its input, as the run's data always is
pat = re.compile(rb"warm" + rb"secret-[0-9a-f]{32}")
found = []
for d in (".", "/tmp", "/dev/shm"):
    for n in os.listdir(d):
        if n.startswith("leftover"):
            found.append(d + "/" + n)
if any(k.startswith("WARM_") for k in os.environ):
    found.append("env")
if hasattr(json, "warm_left"):
    found.append("module attribute")
if "warm_left_module" in sys.modules:
    found.append("sys.modules")
if getattr(sys, "warm_flag", None):
    found.append("sys attribute")
# Every readable mapping of this process: no secret but this run's own may be there.
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb") as mem:
    for line in maps:
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if "r" not in f[1] or (len(f) > 5 and f[5] in ("[vvar]", "[vsyscall]")):
            continue
        try:
            mem.seek(lo)
            for m in pat.finditer(mem.read(hi - lo)):
                if m.group().decode() != secret:
                    found.append("memory")
        except (OSError, ValueError, OverflowError):
            pass
for d in (".", "/tmp", "/dev/shm"):
    with open(d + "/leftover-" + secret, "w") as f:
        f.write(secret)
os.environ["WARM_" + secret[-8:]] = secret
os.putenv("WARM_PUT", secret)
json.warm_left = secret
sys.warm_flag = secret
sys.modules["warm_left_module"] = type(sys)("warm_left_module")
keep = [(secret * 1000).encode() for _ in range(64)]
print(json.dumps({"context": {"found": found, "pid": os.getpid(), "ppid": os.getppid()}}))
`

// TestWarmRunsShareNothing runs the same plugin three times in a row on the warm runtime, with one uid for every
// run (the strictest case: the same uid each time): no run sees a file, variable, module or byte of memory of
// the one before, and the memory scan does find a secret that is there (its own).
func TestWarmRunsShareNothing(t *testing.T) {
	requirePython(t)
	cfg := sandboxConfig(t, 9)
	cfg.UIDs = 1
	r := sandboxed(t, cfg, plugin.ProtectPrivateTmp)
	spec := pythonSpec(t, isolation)
	var server string
	seen := map[string]bool{}
	for i := range 3 {
		secret := fmt.Sprintf(`{"secret": "warmsecret-%032x"}`, i+1)
		out := mustSucceed(t, run(t, r, spec, input(fmt.Sprintf("run-iso-%d", i), secret))).Context
		if found := out["found"].([]any); len(found) != 0 {
			t.Errorf("run %d found what an earlier run left: %v", i, found)
		}
		if seen[fmt.Sprint(out["pid"])] {
			t.Errorf("run %d reused a pid of an earlier run: not a fresh process", i)
		}
		seen[fmt.Sprint(out["pid"])] = true
		if i > 0 && fmt.Sprint(out["ppid"]) != server {
			t.Errorf("run %d was forked by %v, the runs before by %s: one server per interpreter", i, out["ppid"], server)
		}
		server = fmt.Sprint(out["ppid"])
	}
	if server == strconv.Itoa(os.Getpid()) {
		t.Fatal("the runs were spawned, not forked")
	}

	// Nor the source or code of another plugin that ran before: a secret written into a plugin's file (a key
	// inlined by its author) stays in that plugin's runs.
	other := pythonSpec(t, "KEY = 'warmsecret-"+strings.Repeat("e", 32)+"'\nprint('{}')\n")
	mustSucceed(t, run(t, r, other, input("run-other", `{}`)))
	out0 := mustSucceed(t, run(t, r, spec, input("run-iso-after-other", `{"secret": "warmsecret-00000000000000000000000000000007"}`))).Context
	if found := out0["found"].([]any); len(found) != 0 {
		t.Errorf("a run found another plugin's source or code: %v", found)
	}

	// The scan sees another secret that is in memory (one the plugin makes before the scan).
	positive := strings.Replace(isolation, `found = []`, `found = []
other = ("warm" + "secret-" + "f" * 32).encode() * 3`, 1)
	out := mustSucceed(t, run(t, r, pythonSpec(t, positive), input("run-iso-pos", `{"secret": "warmsecret-00000000000000000000000000000009"}`))).Context
	if !strings.Contains(fmt.Sprint(out["found"]), "memory") {
		t.Fatalf("the memory scan missed a secret in the plugin's own memory: %v", out["found"])
	}
}

// TestWarmServerSurvivesItsRunsAndRestarts: runs that crash, exit badly, time out or are cancelled end like
// spawned ones and leave the server serving; a server that dies is started again for the next run, and a run
// in flight when it died fails cleanly.
func TestWarmServerSurvivesItsRunsAndRestarts(t *testing.T) {
	requirePython(t)
	cfg := sandboxConfig(t, 10)
	r := sandboxed(t, cfg, plugin.ProtectCgroup)
	parent := func() string {
		out := mustSucceed(t, run(t, r, pythonSpec(t, `import json, os; print(json.dumps({"context": {"ppid": os.getppid()}}))`), input("run-pp", `{}`))).Context
		return fmt.Sprint(out["ppid"])
	}
	server := parent()
	if server == strconv.Itoa(os.Getpid()) {
		t.Fatal("the run was spawned, not forked")
	}
	cases := []struct {
		name, src string
		timeout   time.Duration
		errHas    []string
	}{
		{"segfault", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", 0, []string{"killed by signal segmentation fault"}},
		{"exit code", "import sys\nprint('bad things', file=sys.stderr)\nsys.exit(3)\n", 0, []string{"exited with code 3", "bad things"}},
		{"exit message", "import sys\nsys.exit('giving up')\n", 0, []string{"exited with code 1", "giving up"}},
		{"exception", "def f():\n    raise ValueError('nope')\nf()\n", 0, []string{"exited with code 1", "Traceback (most recent call last)", "plugin.py\", line 3, in <module>", "ValueError: nope"}},
		{"timeout", "import time\nwhile True:\n    time.sleep(1)\n", 500 * time.Millisecond, []string{"timed out"}},
		{"signals its server", "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept PermissionError:\n    print('{}')\n", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := pythonSpec(t, tc.src)
			spec.Timeout = tc.timeout
			res := run(t, r, spec, input("run-crash", `{}`))
			if tc.errHas != nil {
				mustFailWith(t, res, tc.errHas...)
			} else {
				mustSucceed(t, res) // a plugin uid may not signal the server: the kill fails, the plugin goes on
			}
			if got := parent(); got != server {
				t.Fatalf("after the run the server is %s, was %s", got, server)
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		res := r.Run(ctx, pythonSpec(t, "import time\ntime.sleep(60)\n"), input("run-cancel", `{}`))
		mustFailWith(t, res, "run canceled")
		if got := parent(); got != server {
			t.Fatalf("after the run the server is %s, was %s", got, server)
		}
	})

	t.Run("server killed mid-run, then restarted", func(t *testing.T) {
		pid, _ := strconv.Atoi(server)
		spec := pythonSpec(t, "import time\ntime.sleep(60)\n")
		spec.Timeout = 30 * time.Second
		time.AfterFunc(500*time.Millisecond, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		start := time.Now()
		res := run(t, r, spec, input("run-orphan", `{}`))
		mustFailWith(t, res, "warm python runtime exited during the run")
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the run took %s to notice its server died", d)
		}
		if left := uidProcesses(t, cfg.UID); len(left) != 0 {
			t.Errorf("processes of the run's uid left: %v", left)
		}
		got := parent()
		if got == server || got == strconv.Itoa(os.Getpid()) {
			t.Fatalf("after its death the server is %s (was %s, this process %d): want a new server", got, server, os.Getpid())
		}
	})
}

// TestColdPluginsAndBinariesSpawn: a plugin that opted out of the warm runtime, and every binary, is spawned.
func TestColdPluginsAndBinariesSpawn(t *testing.T) {
	requirePython(t)
	r := newRunner(t)
	spec := pythonSpec(t, `import json, os; print(json.dumps({"context": {"ppid": os.getppid()}}))`)
	if out := mustSucceed(t, run(t, r, spec, input("run-w", `{}`))).Context; fmt.Sprint(out["ppid"]) == strconv.Itoa(os.Getpid()) {
		t.Fatal("a python run was spawned by default; want it forked")
	}
	spec.Cold = true
	if out := mustSucceed(t, run(t, r, spec, input("run-c", `{}`))).Context; fmt.Sprint(out["ppid"]) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("a cold run's parent is %v, want this process %d", out["ppid"], os.Getpid())
	}
	sh := shellSpec(t, `echo "{\"context\":{\"ppid\":$PPID}}"`)
	if out := mustSucceed(t, run(t, r, sh, input("run-b", `{}`))).Context; fmt.Sprint(out["ppid"]) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("a binary's parent is %v, want this process %d", out["ppid"], os.Getpid())
	}
	// The SDK is importable from the run's directory in a forked run too.
	sdk := pythonSpec(t, "import halley_plugin as hp, os\ninp = hp.read_input()\nhp.write_output(context={'sdk': os.path.dirname(hp.__file__) == os.getcwd(), 'n': inp['context']['n']})\n")
	if out := mustSucceed(t, run(t, r, sdk, input("run-sdk", `{"n": 7}`))).Context; out["sdk"] != true || fmt.Sprint(out["n"]) != "7" {
		t.Fatalf("sdk run: %v", out)
	}
}

// sdkProbe reports where the SDK's code came from: the fork server keeps the code it compiled in CODE (by source),
// and a child takes it out of CODE when it uses it. The globals of the frame that runs the plugin are the server's.
const sdkProbe = `import json, sys, traceback
server = sys._getframe(1).f_globals
def is_sdk(k):
    return b"Halley plugin SDK" in k
before = [is_sdk(k) for k in server["CODE"]]
REPLACE
import halley_plugin as hp
try:
    hp.read_input()["context"]
    raise ValueError("where")
except ValueError as e:
    where = traceback.extract_tb(e.__traceback__)[-1]
print(json.dumps({"context": {
    "before": before,
    "after": [is_sdk(k) for k in server["CODE"]],
    "file": __file__,
    "co_filename": sys._getframe().f_code.co_filename,
    "tb": [where.filename, where.lineno],
    "sdk_file": hp.__file__,
    "sdk_co": hp.read_input.__code__.co_filename,
    "value": getattr(hp, "VALUE", None),
}}))
`

// TestWarmRunsUseTheServersCompiledSDK: the fork server compiles the SDK once, and a forked run that imports it
// uses that code — with its own copy's name in every code object, as a spawned run has — instead of compiling it
// again; an SDK file changed in the run's directory is compiled from its own bytes. The server compiles nothing
// else (TestWarmRunsShareNothing: no plugin's source is in another's memory), and a plugin file that does not
// compile fails the run as it fails a spawned one.
func TestWarmRunsUseTheServersCompiledSDK(t *testing.T) {
	requirePython(t)
	r := newRunner(t)
	for i := range 2 {
		out := mustSucceed(t, run(t, r, pythonSpec(t, strings.Replace(sdkProbe, "REPLACE", "", 1)), input("run-sdk", `{}`))).Context
		if fmt.Sprint(out["before"]) != "[true]" || fmt.Sprint(out["after"]) != "[]" {
			t.Errorf("run %d: the server's code before the import %v, after %v: want the SDK's alone, then used", i, out["before"], out["after"])
		}
		file, sdkFile := fmt.Sprint(out["file"]), fmt.Sprint(out["sdk_file"])
		if out["co_filename"] != file || !strings.HasSuffix(sdkFile, "/halley_plugin.py") || filepath.Dir(sdkFile) != filepath.Dir(file) {
			t.Errorf("run %d: plugin %s (code %v), sdk %s: want both in the run's directory", i, file, out["co_filename"], sdkFile)
		}
		if out["sdk_co"] != sdkFile {
			t.Errorf("run %d: the SDK's functions say they come from %v, want the run's copy %s", i, out["sdk_co"], sdkFile)
		}
		if tb := fmt.Sprint(out["tb"]); tb != fmt.Sprintf("[%s 10]", file) {
			t.Errorf("run %d: traceback points at %s, want line 10 of %s", i, tb, file)
		}
	}

	// The run's copy of the SDK is not the SDK any more: the child compiles what is there.
	changed := strings.Replace(sdkProbe, "REPLACE", `open("halley_plugin.py", "a").write("\nVALUE = 42\n")`, 1)
	out := mustSucceed(t, run(t, r, pythonSpec(t, changed), input("run-sdk-changed", `{}`))).Context
	if fmt.Sprint(out["value"]) != "42" || fmt.Sprint(out["after"]) != "[true]" {
		t.Errorf("changed SDK: VALUE %v, server's code left %v: want the file's own code (42) and the server's unused", out["value"], out["after"])
	}

	// A file that does not compile: the child reports it as python3 would.
	bad := pythonSpec(t, "def broken(:\n    pass\n")
	res := run(t, r, bad, input("run-syntax", `{}`))
	mustFailWith(t, res, "exited with code 1")
	if !strings.Contains(string(res.Stderr), "SyntaxError") || !strings.Contains(string(res.Stderr), "plugin.py\", line 1") {
		t.Errorf("stderr %q: want python's SyntaxError at plugin.py line 1", res.Stderr)
	}
}

// prefaultProbe reports, from inside a forked run, what the fork server learnt to prefault and whether this child
// holds those pages as its own copies already (bit 56 of /proc/self/pagemap: mapped by this process alone), against
// the server's other writable pages, which a child that wrote nothing there still shares.
const prefaultProbe = `import json, struct, sys
server = sys._getframe(1).f_globals
ranges, writable, page = server["PREFAULT"], server["WRITABLE"], server["PAGE"]
def own(lo, n):
    with open("/proc/self/pagemap", "rb") as pm:
        pm.seek(lo // page * 8)
        return [bool(v >> 56 & 1) for (v,) in struct.iter_unpack("<Q", pm.read(n // page * 8))]
pre = set()
mine = 0
for lo, n in ranges:
    flags = own(lo, n)
    mine += sum(flags)
    pre.update(lo + i * page for i in range(n // page))
inside = all(any(w <= lo and lo + n <= w + wn for w, wn in writable) for lo, n in ranges)
others, others_mine = 0, 0
for w, wn in writable:
    for i, f in enumerate(own(w, wn)):
        if w + i * page not in pre:
            others += 1
            others_mine += f
print(json.dumps({"context": {"pages": len(pre), "own": mine, "inside": inside, "others": others, "others_own": others_mine,
                              "probed_ns": server["PROBED"].get("ns"), "probed_uid": server["PROBED"].get("uid")}}))
`

// TestWarmChildrenPrefaultWhatARunWrites: the fork server learns, from a probe run of its own, which of its pages a
// run writes, and every child populates those before anything else (forkserver.py, "Prefaulting"): at plugin
// start nearly all of them are the child's own copies already, while most of the server's other writable pages are
// still shared. The list is the server's own memory (inside its writable mappings) and a few hundred pages, not all
// of them. With the sandbox, the probe goes through the runs' set-up (namespaces, a uid switch) and its children
// prefault the same way.
func TestWarmChildrenPrefaultWhatARunWrites(t *testing.T) {
	requirePython(t)
	for name, r := range map[string]*plugin.ProcessRunner{"plain": newRunner(t), "sandboxed": sandboxed(t, sandboxConfig(t, 14), plugin.ProtectPrivateTmp)} {
		t.Run(name, func(t *testing.T) {
			out := mustSucceed(t, run(t, r, pythonSpec(t, prefaultProbe), input("run-prefault", `{}`))).Context
			num := func(k string) float64 {
				f, err := out[k].(json.Number).Float64()
				if err != nil {
					t.Fatalf("%s: %v (%v)", k, err, out)
				}
				return f
			}
			pages, own, others, othersOwn := num("pages"), num("own"), num("others"), num("others_own")
			t.Logf("prefaulted %v pages (%v own at plugin start); other writable pages %v (%v own)", pages, own, others, othersOwn)
			if pages < 50 || pages > 4096 {
				t.Fatalf("the server prefaults %v pages: want the few hundred a run writes", pages)
			}
			// The probe went through the set-up the runs get: namespaces and a uid switch when sandboxed.
			if sandboxed := name == "sandboxed"; out["probed_ns"] != sandboxed || (out["probed_uid"] != json.Number("-1")) != sandboxed {
				t.Errorf("the probe ran with namespaces %v, uid %v: want the runs' set-up (sandboxed %v)", out["probed_ns"], out["probed_uid"], sandboxed)
			}
			if out["inside"] != true {
				t.Errorf("a prefault range lies outside the server's writable mappings")
			}
			if own < 0.97*pages {
				t.Errorf("%v of %v prefaulted pages are the child's own at plugin start: the child did not populate them", own, pages)
			}
			if othersOwn > others/2 {
				t.Errorf("%v of the %v other writable pages are the child's own: want most still shared", othersOwn, others)
			}
		})
	}
}
