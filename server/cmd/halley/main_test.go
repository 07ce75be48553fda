package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// buildHalley builds the real halley binary.
func buildHalley(t *testing.T) string {
	t.Helper()
	return testkit.GoBuild(t, ".", ".", "halley")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stop shuts Halley down as an operator would (SIGTERM), so that it gives back what it holds on the host (the
// plugin sandbox's cgroup leaves), and kills it when that takes more than ten seconds.
func stop(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// start runs the binary with a clean environment plus extra, and waits until /readyz answers 200.
func start(t *testing.T, bin string, extra ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + addr, "HALLEY_DATA_DIR=" + t.TempDir()}, extra...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(cmd) })
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := http.Get(url + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return cmd, url, &logs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never became 200; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBinaryServesAndShutsDownGracefully(t *testing.T) {
	bin := buildHalley(t)
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			extra := []string{"HALLEY_ADMIN_PASSWORD=bin-test-pw"}
			if d == store.MySQL {
				extra = append(extra, "HALLEY_DATABASE_URL="+storetest.URL(t, d))
			}
			cmd, url, logs := start(t, bin, extra...)
			res, err := http.Post(url+"/api/v1/auth/login", "application/json", strings.NewReader(`{"username":"admin","password":"bin-test-pw"}`))
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("login against the binary: %v %v", err, res)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(b), `"token"`) {
				t.Fatalf("login body %s", b)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no exit after SIGTERM\n%s", logs)
			}
			if !strings.Contains(logs.String(), "stopped") {
				t.Fatalf("no graceful shutdown in logs:\n%s", logs)
			}
			if strings.Contains(logs.String(), "bin-test-pw") {
				t.Fatal("the admin password was logged")
			}
		})
	}
}

func TestBinaryRefusesBadConfiguration(t *testing.T) {
	bin := buildHalley(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"HALLEY_LOG_LEVEL=loud", "HALLEY_DATA_DIR=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("bad configuration must fail the start")
	}
	if !strings.Contains(string(out), "HALLEY_LOG_LEVEL") {
		t.Fatalf("the error must name the setting: %s", out)
	}
}

// TestTemplatesLoad loads the ready-made templates and example plugins into a running Halley, twice: the second
// run changes nothing.
func TestTemplatesLoad(t *testing.T) {
	bin := buildHalley(t)
	_, url, _ := start(t, bin, "HALLEY_ADMIN_PASSWORD=load-test-pw")
	var out bytes.Buffer
	args := []string{"--url", url, "--password", "load-test-pw"}
	if err := loadTemplates(t.Context(), args, "", func(string) string { return "" }, &out); err != nil {
		t.Fatalf("load: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "published "); n < 7 || !strings.Contains(out.String(), "uploaded plugin create-cache") {
		t.Fatalf("first load:\n%s", out.String())
	}
	out.Reset()
	if err := loadTemplates(t.Context(), args, "", func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "published") || strings.Contains(out.String(), "uploaded") {
		t.Fatalf("a second load must change nothing:\n%s", out.String())
	}
}

// TestBinaryStopsWithinShutdownTimeout: SIGTERM while a plugin run is in flight stops the workers within
// HALLEY_SHUTDOWN_TIMEOUT: the run is killed (it would take a minute) and abandoned for another replica, the
// process logs "stopped" and exits 0.
func TestBinaryStopsWithinShutdownTimeout(t *testing.T) {
	bin := buildHalley(t)
	cmd, url, logs := start(t, bin, "HALLEY_ADMIN_PASSWORD=stop-test-pw", "HALLEY_SHUTDOWN_TIMEOUT=3s", "HALLEY_LOG_LEVEL=debug")
	token := login(t, url, "admin", "stop-test-pw")
	// The plugin runs as a uid of its own (the sandbox): the marker goes where that uid may write, outside the
	// /tmp of its own that it sees.
	drop := filepath.Join(hostDir(t), "drop")
	if err := os.Mkdir(drop, 0o777); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{drop: 0o777, filepath.Dir(drop): 0o711} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(drop, "started")
	src := "import time\nopen(" + strconv.Quote(marker) + ", 'w').write('x')\ntime.sleep(60)\nprint('{}')\n"
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("name", "slow")
	_ = mw.WriteField("runtime", "python")
	_ = mw.WriteField("timeout", "2m")
	fw, _ := mw.CreateFormFile("file", "slow.py")
	_, _ = fw.Write([]byte(src))
	mw.Close()
	if st, body := call(t, "POST", url+"/api/v1/plugins", token, mw.FormDataContentType(), &b); st != 201 {
		t.Fatalf("upload: %d %s", st, body)
	}
	def := `{"key":"slow","definition":{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"work","type":"auto","plugins":{"pre":["slow"]}},{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"work"},{"from":"work","to":"end"}]}}`
	if st, body := call(t, "POST", url+"/api/v1/templates", token, "application/json", strings.NewReader(def)); st != 201 {
		t.Fatalf("create template: %d %s", st, body)
	}
	if st, body := call(t, "POST", url+"/api/v1/templates/slow/publish", token, "application/json", nil); st != 201 {
		t.Fatalf("publish: %d %s", st, body)
	}
	if st, body := call(t, "POST", url+"/api/v1/instances", token, "application/json", strings.NewReader(`{"template":"slow"}`)); st != 201 {
		t.Fatalf("start: %d %s", st, body)
	}
	deadline := time.Now().Add(30 * time.Second) // a guard against a hung test
	for {
		if _, err := os.Stat(marker); err == nil {
			break // the plugin runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin never started; logs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit 20 s after SIGTERM with a 3 s shutdown timeout\n%s", logs)
	}
	took := time.Since(began)
	if took > 6*time.Second {
		t.Fatalf("the stop took %s with HALLEY_SHUTDOWN_TIMEOUT=3s\n%s", took, logs)
	}
	t.Logf("stopped %s after SIGTERM", took)
	out := logs.String()
	for _, want := range []string{"killing them", "plugin run abandoned at shutdown", "stopped"} {
		if !strings.Contains(out, want) {
			t.Fatalf("logs lack %q:\n%s", want, out)
		}
	}
	// Stopped in the reverse of the start order: the HTTP server first, the outbox dispatcher last.
	if h, d := strings.Index(out, `worker="http server"`), strings.LastIndex(out, `worker="outbox dispatcher"`); h < 0 || d < h {
		t.Fatalf("stop order: http at %d, outbox dispatcher at %d\n%s", h, d, out)
	}
}

func login(t *testing.T, url, user, pw string) string {
	t.Helper()
	st, body := call(t, "POST", url+"/api/v1/auth/login", "", "application/json", strings.NewReader(`{"username":"`+user+`","password":"`+pw+`"}`))
	if st != 200 {
		t.Fatalf("login: %d %s", st, body)
	}
	var r struct {
		Token string `json:"token"`
	}
	_ = json.Unmarshal([]byte(body), &r) // a body that is not JSON is left empty: callers check the status
	return r.Token
}

func call(t *testing.T, method, url, token, ctype string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Content-Type", ctype)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestTemplatesLoadFindsTheServer: without --url, `templates load` reads the configuration serve reads (file and
// environment) and targets HALLEY_PUBLIC_URL, else http://HALLEY_ADDR with 0.0.0.0 made 127.0.0.1; --url wins.
func TestTemplatesLoadFindsTheServer(t *testing.T) {
	bin := buildHalley(t)
	_, url, _ := start(t, bin, "HALLEY_ADMIN_PASSWORD=find-me-pw")
	port := url[strings.LastIndexByte(url, ':')+1:]
	yaml := filepath.Join(t.TempDir(), "halley.yaml")
	if err := os.WriteFile(yaml, []byte("addr: 0.0.0.0:"+port+"\nadmin_password: find-me-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := "127.0.0.1:1" // nothing listens there
	cases := []struct {
		name   string
		args   []string
		config string
		env    map[string]string
	}{
		{"HALLEY_ADDR and HALLEY_ADMIN_PASSWORD", nil, "", map[string]string{"HALLEY_ADDR": "127.0.0.1:" + port, "HALLEY_ADMIN_PASSWORD": "find-me-pw"}},
		{"the config file, 0.0.0.0 made loopback", nil, yaml, nil},
		{"--config after the command", []string{"--config", yaml}, "", nil},
		{"HALLEY_PUBLIC_URL over HALLEY_ADDR", nil, "", map[string]string{"HALLEY_ADDR": dead, "HALLEY_PUBLIC_URL": url, "HALLEY_ADMIN_PASSWORD": "find-me-pw"}},
		{"--url over both", []string{"--url", url, "--password", "find-me-pw"}, "", map[string]string{"HALLEY_ADDR": dead, "HALLEY_PUBLIC_URL": "http://" + dead}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			getenv := func(k string) string { return tc.env[k] }
			if err := loadTemplates(t.Context(), tc.args, tc.config, getenv, &out); err != nil {
				t.Fatalf("load: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "into http://127.0.0.1:"+port+"\n") || !strings.Contains(out.String(), "create-cache") {
				t.Fatalf("load did not target %s:\n%s", url, out.String())
			}
		})
	}
	t.Run("--config before the command, through the command line", func(t *testing.T) {
		var out, logs bytes.Buffer
		if err := run(t.Context(), []string{"--config", yaml, "templates", "load"}, func(string) string { return "" }, &out, &logs); err != nil {
			t.Fatalf("halley --config %s templates load: %v\n%s%s", yaml, err, out.String(), logs.String())
		}
		if !strings.Contains(out.String(), "into http://127.0.0.1:"+port+"\n") {
			t.Fatalf("load did not target %s:\n%s", url, out.String())
		}
	})
	t.Run("a server that is not there is named", func(t *testing.T) {
		var out bytes.Buffer
		err := loadTemplates(t.Context(), nil, "", func(k string) string { return map[string]string{"HALLEY_ADDR": "0.0.0.0:1"}[k] }, &out)
		if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1") || !strings.Contains(err.Error(), "--url") {
			t.Fatalf("want an error naming http://127.0.0.1:1 and --url, got %v", err)
		}
	})
}

// TestBinaryWiresCredentials: serve builds what the credentials issue needs from the configuration — the trigger
// rate limit (HALLEY_TRIGGER_RATE_LIMIT), login throttling and the audit recorder (GET /audit lists a change).
func TestBinaryWiresCredentials(t *testing.T) {
	bin := buildHalley(t)
	_, url, logs := start(t, bin, "HALLEY_ADMIN_PASSWORD=wire-me-pw", "HALLEY_TRIGGER_RATE_LIMIT=0.5") // bursts of 1
	if st, body := call(t, "POST", url+"/api/v1/trigger/async/erp/none", "", "application/json", strings.NewReader(`{}`)); st == 429 {
		t.Fatalf("first trigger call: %d %s", st, body)
	}
	if st, body := call(t, "POST", url+"/api/v1/trigger/async/erp/none", "", "application/json", strings.NewReader(`{}`)); st != 429 || !strings.Contains(body, "rate_limited") {
		t.Fatalf("second trigger call within 2 s: %d %s", st, body)
	}

	admin := login(t, url, "admin", "wire-me-pw")
	if st, body := call(t, "POST", url+"/api/v1/users", admin, "application/json", strings.NewReader(`{"username":"wendy","password":"wendy-pw-123"}`)); st != 201 {
		t.Fatalf("create user: %d %s", st, body)
	}
	st, body := call(t, "GET", url+"/api/v1/audit?action=user.create", admin, "", nil)
	if st != 200 || !strings.Contains(body, `"target":"wendy"`) || !strings.Contains(body, `"actor":"admin"`) {
		t.Fatalf("audit: %d %s", st, body)
	}

	for i := range 5 {
		if st, body := call(t, "POST", url+"/api/v1/auth/login", "", "application/json", strings.NewReader(`{"username":"wendy","password":"wrong-pw"}`)); st != 401 {
			t.Fatalf("failed login %d: %d %s", i+1, st, body)
		}
	}
	if st, body := call(t, "POST", url+"/api/v1/auth/login", "", "application/json", strings.NewReader(`{"username":"wendy","password":"wendy-pw-123"}`)); st != 429 || !strings.Contains(body, "too_many_attempts") {
		t.Fatalf("the right password after 5 failures: %d %s\n%s", st, body, logs)
	}
}
