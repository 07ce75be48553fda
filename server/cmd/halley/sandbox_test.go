package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
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

// hostDir returns a fresh folder outside /tmp, /var/tmp and /dev/shm, which sandboxed runs see as empty
// folders of their own: what a test shares with plugins, or keeps from them to see the modes do, goes here. Under
// /run where Halley's tests run as root; elsewhere (no sandboxed runs) a temporary folder.
func hostDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	d, err := os.MkdirTemp("/run", "halley-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// upload posts a plugin as an admin would (multipart), failing the test unless it is stored.
func (a *api) upload(t *testing.T, base string, fields map[string]string, src string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", "plugin.py")
	_, _ = io.WriteString(fw, src)
	mw.Close()
	req, _ := http.NewRequest("POST", base+"/api/v1/plugins", &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if body, _ := io.ReadAll(res.Body); res.StatusCode != 201 {
		t.Fatalf("upload %v: %d %s", fields, res.StatusCode, body)
	}
}

// runPlugin runs a plugin as the pre plugin of an auto node and returns the finished instance.
func (a *api) runPlugin(t *testing.T, base, name string) map[string]any {
	t.Helper()
	if a.call(t.Context(), base, "GET", "/api/v1/templates/run-"+name, nil, "").status == 200 {
		goto run
	}
	a.publish(t, base, "run-"+name, map[string]any{
		"nodes": []any{map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "call", "type": "auto", "plugins": map[string]any{"pre": []string{name}}},
			map[string]any{"id": "end", "type": "end"}},
		"edges": []any{map[string]any{"from": "start", "to": "call"}, map[string]any{"from": "call", "to": "end"}}})
run:
	id := a.mustCall(t, base, "POST", "/api/v1/instances", map[string]any{"template": "run-" + name})["id"].(string)
	var inst map[string]any
	if !testkit.Eventually(60*time.Second, 50*time.Millisecond, func() bool {
		inst = a.mustCall(t, base, "GET", "/api/v1/instances/"+id, nil)
		return inst["status"] != "running"
	}) {
		t.Fatalf("plugin %s: the instance is still running: %v", name, inst)
	}
	return inst
}

// TestPluginSandboxInTheBinary runs hostile plugins through the real binary, as root like CI: they cannot read
// Halley's database, secret or environment, a 3 GiB allocation and a fork bomb fail their runs, and Halley keeps
// serving throughout.
func TestPluginSandboxInTheBinary(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the plugin sandbox test needs root to switch plugins to their own uid (CI runs as root)")
		}
		t.Skip("needs root")
	}
	bin := buildHalley(t)
	// Outside /tmp, where the plugins see the files and only their modes keep them out.
	data := filepath.Join(hostDir(t), "data")
	if err := os.Mkdir(data, 0o755); err != nil { // as an operator might have made it
		t.Fatal(err)
	}
	work := t.TempDir()
	for _, p := range []string{work, filepath.Dir(work)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	_, base, logs := start(t, bin, faultEnv("HALLEY_LOG_LEVEL=info", "HALLEY_DATA_DIR="+data, "HALLEY_PLUGIN_UID=63500",
		"HALLEY_PLUGIN_GID=63500", "HALLEY_PLUGIN_WORKERS=2", "HALLEY_PLUGIN_PROCESSES=32", "HALLEY_PLUGIN_WORK_DIR="+filepath.Join(work, "runs"))...)
	a := newAPI()
	a.login(t, base)

	a.upload(t, base, map[string]string{"name": "snoop", "runtime": "python"}, fmt.Sprintf(`
import json, os
def attempt(path):
    try:
        open(path, "rb").read(16)
        return "read"
    except Exception as e:
        return type(e).__name__
print(json.dumps({"context": {"uid": os.getuid(),
    "db": attempt(%[1]q), "secret": attempt(%[2]q), "environ": attempt("/proc/%%d/environ" %% os.getppid())}}))
`, filepath.Join(data, "halley.db"), filepath.Join(data, "secret")))
	a.upload(t, base, map[string]string{"name": "hog", "runtime": "python"}, "b = bytearray(3 << 30)\nprint('{}')\n")
	a.upload(t, base, map[string]string{"name": "bomb", "runtime": "python", "timeout": "2s"}, `
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
`)

	inst := a.runPlugin(t, base, "snoop")
	ctx, _ := inst["context"].(map[string]any)
	if inst["status"] != "completed" || ctx["db"] != "PermissionError" || ctx["secret"] != "PermissionError" || ctx["environ"] != "PermissionError" {
		t.Fatalf("snoop: %v", inst)
	}
	if uid := fmt.Sprint(ctx["uid"]); uid != "63500" && uid != "63501" {
		t.Errorf("the plugin ran as uid %s, want 63500 or 63501", uid)
	}

	if inst = a.runPlugin(t, base, "hog"); inst["status"] != "failed" {
		t.Fatalf("hog: %v", inst)
	}
	runs := a.mustCall(t, base, "GET", "/api/v1/plugins/hog/runs", nil)["items"].([]any)
	if len(runs) == 0 || runs[0].(map[string]any)["status"] != "failed" || !strings.Contains(fmt.Sprint(runs[0].(map[string]any)["stderr"]), "MemoryError") {
		t.Fatalf("hog runs: %v", runs)
	}

	// While the bomb goes off, Halley answers.
	done := make(chan map[string]any, 1)
	go func() { done <- a.runPlugin(t, base, "bomb") }()
	served := 0
	for len(done) == 0 {
		if readyz(base) != 200 {
			t.Fatalf("/readyz failed while the fork bomb ran; logs:\n%s", tail(logs.String(), 4000))
		}
		served++
		time.Sleep(50 * time.Millisecond)
	}
	if inst = <-done; inst["status"] != "failed" {
		t.Fatalf("bomb: %v", inst)
	}
	runs = a.mustCall(t, base, "GET", "/api/v1/plugins/bomb/runs", nil)["items"].([]any)
	if len(runs) == 0 || runs[0].(map[string]any)["status"] != "timed_out" {
		t.Fatalf("bomb runs: %v", runs)
	}
	t.Logf("/readyz answered %d times while the fork bomb ran", served)
	// And it still runs plugins afterwards.
	if inst = a.runPlugin(t, base, "snoop"); inst["status"] != "completed" {
		t.Fatalf("after the bomb: %v", inst)
	}

	rep := a.mustCall(t, base, "GET", "/api/v1/plugins/sandbox", nil)
	b, _ := json.Marshal(rep)
	inForce := map[string]bool{}
	for _, p := range rep["protections"].([]any) {
		inForce[p.(map[string]any)["name"].(string)] = p.(map[string]any)["in_force"].(bool)
	}
	if rep["plugins_run"] != true || rep["uids"] != "63500-63501" || !inForce["private_files"] || !inForce["user"] || !inForce["rlimits"] {
		t.Fatalf("sandbox report: %s", b)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("data dir mode %v %v, want 750", fi.Mode().Perm(), err)
	}
	if !strings.Contains(logs.String(), "plugin sandbox: in force") {
		t.Errorf("the start does not log the sandbox:\n%s", tail(logs.String(), 3000))
	}
}

// TestPluginSandboxWithFileCapabilities runs the binary the way the container image does: as an unprivileged
// user, with the capabilities of the Dockerfile permitted (not effective) on the file. Halley must raise them
// only where it needs them — its threads run with none effective — and still confine plugins fully: their own
// uid, Halley's files closed, a setsid daemon killed (by uid: the unprivileged user cannot create cgroups here),
// and read-only folders the plugin left removed.
func TestPluginSandboxWithFileCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root to set file capabilities and switch users (CI runs as root)")
		}
		t.Skip("needs root")
	}
	setcap, setpriv := testkit.RequireTool(t, "setcap", ""), testkit.RequireTool(t, "setpriv", "")
	const halleyUID = 63600
	// Outside /tmp, where the plugins see the data dir and only its modes keep them out.
	root := filepath.Join(hostDir(t), "root")
	if err := os.Mkdir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	// The binary where the unprivileged user can execute it, with the image's file capabilities.
	bin := filepath.Join(root, "halley")
	if b, err := os.ReadFile(buildHalley(t)); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	if out, err := exec.Command(setcap, "cap_setuid,cap_setgid,cap_chown,cap_kill,cap_sys_admin=p", bin).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v %s", err, out)
	}
	home := filepath.Join(root, "home")
	data := filepath.Join(home, "data")
	for _, d := range []string{home, data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, halleyUID, halleyUID); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	cmd := exec.Command(setpriv, "--reuid="+fmt.Sprint(halleyUID), "--regid="+fmt.Sprint(halleyUID), "--clear-groups", bin, "serve")
	cmd.Dir = home
	cmd.Env = faultEnv("PATH=/usr/bin:/bin", "HALLEY_LOG_LEVEL=info", "HALLEY_ADDR="+addr, "HALLEY_DATA_DIR="+data,
		"HALLEY_PLUGIN_UID=63610", "HALLEY_PLUGIN_GID=63610", "HALLEY_PLUGIN_WORKERS=2", "HALLEY_PLUGIN_WORK_DIR="+filepath.Join(home, "runs"))
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { return readyz(base) == 200 }) {
		t.Fatalf("not ready; logs:\n%s", logs.String())
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if !strings.Contains(string(status), "CapEff:\t0000000000000000") || !strings.Contains(string(status), fmt.Sprintf("Uid:\t%d", halleyUID)) {
		t.Fatalf("Halley must run as uid %d with no effective capability:\n%s", halleyUID, status)
	}

	a := newAPI()
	a.login(t, base)
	a.upload(t, base, map[string]string{"name": "leaver", "runtime": "python"}, fmt.Sprintf(`
import json, os, subprocess
def attempt(path):
    try:
        open(path, "rb").read(16)
        return "read"
    except Exception as e:
        return type(e).__name__
os.makedirs("keep/inner")
open("keep/inner/f", "w").write("x")
os.chmod("keep/inner", 0o500)
os.chmod("keep", 0o500)
d = subprocess.Popen(["sleep", "1000"], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(json.dumps({"context": {"uid": os.getuid(), "daemon": d.pid, "db": attempt(%[1]q), "secret": attempt(%[2]q),
    "environ": attempt("/proc/%%d/environ" %% os.getppid())}}))
`, filepath.Join(data, "halley.db"), filepath.Join(data, "secret")))
	inst := a.runPlugin(t, base, "leaver")
	ctx, _ := inst["context"].(map[string]any)
	if inst["status"] != "completed" || ctx["db"] != "PermissionError" || ctx["secret"] != "PermissionError" || ctx["environ"] != "PermissionError" {
		t.Fatalf("leaver: %v\nlogs:\n%s", inst, tail(logs.String(), 3000))
	}
	if uid := fmt.Sprint(ctx["uid"]); uid != "63610" && uid != "63611" {
		t.Errorf("the plugin ran as uid %s", uid)
	}
	var pid int
	_, _ = fmt.Sscan(fmt.Sprint(ctx["daemon"]), &pid)
	if pid == 0 || !testkit.Eventually(5*time.Second, 50*time.Millisecond, func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the setsid daemon %d outlived its run", pid)
	}
	// The directory goes after the run, off the result's path (box.finish), so it may outlive the instance's step.
	var entries []os.DirEntry
	var err error
	if !testkit.Eventually(10*time.Second, 50*time.Millisecond, func() bool {
		entries, err = os.ReadDir(filepath.Join(home, "runs"))
		return err == nil && len(entries) == 0
	}) {
		t.Errorf("the run's directory was not removed: %v %v", entries, err)
	}
	for _, want := range []string{`protection=user detail="each run in flight has its own uid (63610-63611)`,
		`protection=private_tmp detail="each run has a mount namespace of its own`, `protection=no_unix_sockets detail="runs of network=off plugins cannot create unix sockets`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the start log does not show %s:\n%s", want, tail(logs.String(), 3000))
		}
	}
	// With the file capabilities only: a network=off run reaches no unix socket, gets its own /tmp, and keeps
	// no capability.
	a.upload(t, base, map[string]string{"name": "offline", "runtime": "python", "network": "off"}, `
import json, os, socket
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix = "created"
except OSError as e:
    unix = type(e).__name__
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapPrm", "CapAmb", "CapInh"))]
print(json.dumps({"context": {"unix": unix, "tmp": sorted(os.listdir("/tmp")), "caps": caps, "uid": os.getuid()}}))
`)
	inst = a.runPlugin(t, base, "offline")
	ctx, _ = inst["context"].(map[string]any)
	if inst["status"] != "completed" || ctx["unix"] != "PermissionError" || fmt.Sprint(ctx["caps"]) != "[0000000000000000 0000000000000000 0000000000000000 0000000000000000]" {
		t.Fatalf("offline: %v\nlogs:\n%s", inst, tail(logs.String(), 3000))
	}
	if uid := fmt.Sprint(ctx["uid"]); uid != "63610" && uid != "63611" {
		t.Errorf("the network=off plugin ran as uid %s", uid)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
