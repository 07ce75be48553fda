package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cli runs the command line in this process with a clean environment (plus env) and returns what it printed.
func cli(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("halley %s ran until the deadline: it must return on its own", strings.Join(args, " "))
	}
	return out.String(), errOut.String(), err
}

// TestCommandLine is the table over every command: --help prints the command's usage and exits 0 without doing
// anything (no data directory, no listener), version prints the build, and unknown commands, unknown flags,
// stray arguments and unreadable config files are errors that name them.
func TestCommandLine(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data") // must never be created by a --help
	addr := freeAddr(t)
	env := map[string]string{"HALLEY_DATA_DIR": data, "HALLEY_ADDR": addr}
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	dir := t.TempDir() // a directory is no config file either
	cases := []struct {
		args    []string
		out     []string // substrings of stdout
		errWant string   // substring of the error; "" = exit status 0
	}{
		{args: []string{"--help"}, out: []string{"Usage:", "serve", "migrate", "templates", "archive", "doctor", "version", "--config"}},
		{args: []string{"doctor", "--help"}, out: []string{"halley doctor", "--json", "--replicas", "OK, WARN or FAIL"}},
		{args: []string{"doctor", "--replicas", "0"}, errWant: "--replicas must be at least 1"},
		{args: []string{"doctor", "extra"}, errWant: `unknown command "extra"`},
		{args: []string{"help"}, out: []string{"Usage:", "serve"}},
		{args: []string{"serve", "--help"}, out: []string{"Run the server", "Usage:", "halley serve", "--config"}},
		{args: []string{"help", "serve"}, out: []string{"Run the server"}},
		{args: []string{"migrate", "--help"}, out: []string{"Apply the database migrations", "halley migrate"}},
		{args: []string{"version", "--help"}, out: []string{"Print the version", "halley version"}},
		{args: []string{"templates", "--help"}, out: []string{"load", "ready-made"}},
		{args: []string{"templates", "load", "--help"}, out: []string{"-url", "-password", "-token"}},
		{args: []string{"archive", "--help"}, out: []string{"show", "retention sweep"}},
		{args: []string{"archive", "show", "--help"}, out: []string{"halley archive show INSTANCE_ID", "--raw", "HALLEY_ARCHIVE_DIR", "--config"}},
		{args: []string{"help", "archive", "show"}, out: []string{"--raw"}},
		{args: []string{"version"}, out: []string{"halley " + version, "go ", "platform", "module"}},
		{args: []string{"frobnicate"}, errWant: `unknown command "frobnicate"`},
		{args: []string{"--bogus"}, errWant: "--bogus"},
		{args: []string{"serve", "--bogus"}, errWant: "--bogus"},
		{args: []string{"migrate", "--bogus=1"}, errWant: "--bogus"},
		{args: []string{"version", "--bogus"}, errWant: "--bogus"},
		{args: []string{"templates", "load", "--bogus"}, errWant: "bogus"},
		{args: []string{"version", "extra"}, errWant: `"extra"`},
		{args: []string{"serve", "extra"}, errWant: `"extra"`},
		{args: []string{"templates"}, errWant: "needs a subcommand"},
		{args: []string{"archive"}, errWant: "needs a subcommand"},
		{args: []string{"archive", "show"}, errWant: "accepts 1 arg(s), received 0"},
		{args: []string{"archive", "show", "a", "b"}, errWant: "accepts 1 arg(s), received 2"},
		{args: []string{"archive", "show", "--bogus", "x"}, errWant: "--bogus"},
		// archive show reads: on a machine without a database it says so and leaves no empty halley.db behind.
		{args: []string{"archive", "show", "x"}, errWant: "no SQLite database at " + filepath.Join(data, "halley.db")},
		{args: []string{"archive", "show", "--config", missing, "x"}, errWant: missing},
		{args: []string{"--config", missing, "archive", "show", "x"}, errWant: missing},
		{args: []string{"serve", "--config", missing}, errWant: missing},
		{args: []string{"--config", missing, "serve"}, errWant: missing},
		{args: []string{"migrate", "--config", dir}, errWant: dir},
		{args: []string{"--config", missing}, errWant: missing},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, _, err := cli(t, env, tc.args...)
			switch {
			case tc.errWant == "" && err != nil:
				t.Fatalf("exit with %v, want 0; stdout:\n%s", err, out)
			case tc.errWant != "" && (err == nil || !strings.Contains(err.Error(), tc.errWant)):
				t.Fatalf("error %v, want one naming %q", err, tc.errWant)
			}
			for _, s := range tc.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("the command touched the data directory (%v): it must do nothing", err)
			}
			if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				c.Close()
				t.Fatal("something listens on HALLEY_ADDR: a server was started")
			}
		})
	}
}

// TestConfigFlagAfterTheCommand: --config works after the command as before it, and the file is really used: the
// database lands where the file says.
func TestConfigFlagAfterTheCommand(t *testing.T) {
	for _, order := range [][]string{{"migrate", "--config"}, {"--config"}} {
		dir := t.TempDir()
		db := filepath.Join(dir, "from-the-file.db")
		cfg := filepath.Join(dir, "halley.yaml")
		if err := os.WriteFile(cfg, []byte("data_dir: "+filepath.Join(dir, "data")+"\ndatabase_url: sqlite://"+db+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{}, order...), cfg)
		if len(order) == 1 {
			args = append(args, "migrate")
		}
		if _, logs, err := cli(t, nil, args...); err != nil {
			t.Fatalf("halley %s: %v\n%s", strings.Join(args, " "), err, logs)
		}
		if _, err := os.Stat(db); err != nil {
			t.Fatalf("halley %s: the database named in the file was not created: %v", strings.Join(args, " "), err)
		}
	}
}

// TestBinaryServesWithConfigFile: `halley serve --config x.yaml` listens where x.yaml says, with the admin password
// it gives (the environment holds neither).
func TestBinaryServesWithConfigFile(t *testing.T) {
	bin := buildHalley(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "x.yaml")
	yaml := "addr: " + addr + "\ndata_dir: " + filepath.Join(dir, "data") + "\nadmin_password: from-the-file-pw\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing ready at the file's addr %s; logs:\n%s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := http.Post("http://"+addr+"/api/v1/auth/login", "application/json", strings.NewReader(`{"username":"admin","password":"from-the-file-pw"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("login with the file's admin password: %v %v", err, res)
	}
	res.Body.Close()
}

// TestServeRefusesAnImpossibleSandbox: serve builds the plugin sandbox in its list; a configuration no host could
// run (a uid range past the largest uid) stops the start with an error naming the settings, before anything listens.
func TestServeRefusesAnImpossibleSandbox(t *testing.T) {
	addr := freeAddr(t)
	env := map[string]string{"HALLEY_DATA_DIR": filepath.Join(t.TempDir(), "data"), "HALLEY_ADDR": addr,
		"HALLEY_ADMIN_PASSWORD": "sandbox-test-pw", "HALLEY_PLUGIN_UID": "2147483647", "HALLEY_PLUGIN_WORKERS": "4"}
	_, logs, err := cli(t, env, "serve")
	if err == nil || !strings.Contains(err.Error(), "HALLEY_PLUGIN_*") || !strings.Contains(err.Error(), "the uid range from 2147483647 for 4 runs") {
		t.Fatalf("serve: %v, want the sandbox's refusal\n%s", err, logs)
	}
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("something listens on HALLEY_ADDR after a refused start")
	}
}
