package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestStallWatch runs scripts/stallwatch.py (BENCH_WATCH=1 make bench) against a Halley stand-in whose /readyz
// hangs, and the real MySQL and Redis: it captures the goroutines, the processlist with InnoDB status and Redis
// INFO while the probe waits, samples InnoDB's counters every second, and stops by itself when the watched
// process is gone.
func TestStallWatch(t *testing.T) {
	mysqlURL, err := url.Parse(storetest.MySQLURL(t))
	if err != nil {
		t.Fatalf("HALLEY_TEST_MYSQL: %v", err)
	}
	redisURL, err := url.Parse(storetest.Require(t, "HALLEY_TEST_REDIS"))
	if err != nil {
		t.Fatalf("HALLEY_TEST_REDIS: %v", err)
	}
	for _, tool := range []string{"python3", "mysql", "redis-cli", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed by scripts/stallwatch.py: %v", tool, err)
		}
	}

	release, stall := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		default:
			return // ready until the stall begins
		}
		select { // a stall: the readiness probe waits until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.Handle("/debug/pprof/goroutine", pprof.Handler("goroutine"))
	halley := httptest.NewServer(mux)
	defer halley.Close()
	defer close(release)
	_, port, _ := net.SplitHostPort(halley.Listener.Addr().String())

	// The watched process: the watch stops once it is gone.
	target := exec.Command("sleep", "60")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Process.Kill(); _ = target.Wait() }()

	out := t.TempDir()
	myPort, redisPort := mysqlURL.Port(), redisURL.Port()
	if myPort == "" {
		myPort = "3306"
	}
	if redisPort == "" {
		redisPort = "6379"
	}
	watch := exec.Command("python3", filepath.Join("..", "..", "..", "scripts", "stallwatch.py"),
		"--halley-port", port, "--pprof-port", port, "--pid", strconv.Itoa(target.Process.Pid), "--out", out,
		"--mysql-host", mysqlURL.Hostname(), "--mysql-port", myPort, "--mysql-user", mysqlURL.User.Username(),
		"--redis-host", redisURL.Hostname(), "--redis-port", redisPort, "--trigger", "0.3", "--quiet", "0.5", "--max-events", "4")
	watch.Env = os.Environ()
	if pw, ok := mysqlURL.User.Password(); ok {
		watch.Env = append(watch.Env, "MYSQL_PWD="+pw)
	}
	var stderr strings.Builder
	watch.Stdout, watch.Stderr = &stderr, &stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- watch.Wait() }()
	defer func() { _ = watch.Process.Kill() }()

	// A write stall as well: the commit probe's row locked by a transaction of the test's (SELECT 1 would not
	// wait for it; a commit does).
	mysqlArgs := []string{"-h", mysqlURL.Hostname(), "-P", myPort, "-u", mysqlURL.User.Username(), "-N", "-B"}
	schema := "halley_stallwatch_" + strconv.Itoa(watch.Process.Pid)
	sqlOut := func(q string) string {
		cmd := exec.Command("mysql", append(mysqlArgs, "-e", q)...)
		cmd.Env = watch.Env
		b, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(b))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n := sqlOut("SELECT n FROM " + schema + ".probe WHERE id = 1"); n != "" && !strings.Contains(n, "ERROR") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit probe's table %s.probe was not made in 10 s:\n%s", schema, stderr.String())
		}
	}
	// First a statement of someone else's that runs long (as a write of Halley's waiting on a latch would): the
	// first capture names it.
	sleeper := exec.Command("mysql", append(mysqlArgs, "-e", "SELECT SLEEP(3)")...)
	sleeper.Env = watch.Env
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	time.Sleep(time.Second)

	locker := exec.Command("mysql", mysqlArgs...)
	locker.Env = watch.Env
	lockIn, err := locker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Process.Kill(); _ = locker.Wait() }()
	if _, err := io.WriteString(lockIn, "BEGIN; SELECT n FROM "+schema+".probe WHERE id = 1 FOR UPDATE;\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the lock taken: the next commit probe waits on it
	close(stall)

	// The capture: every file written, each with what it must hold.
	want := map[string]string{
		"goroutines.txt":      "goroutine profile: total",
		"goroutines-full.txt": "goroutine ",
		"mysql.txt":           "INNODB MONITOR OUTPUT",
		"redis.txt":           "redis_version:",
		"threads.txt":         "PID",
		"kernel.txt":          "halley (pid ",
		"mysql-waits.txt":     "performance_schema o", // on: the waits; off: how to turn it on
	}
	var folder string
	deadline := time.Now().Add(20 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dirs, _ := filepath.Glob(filepath.Join(out, "stall-*-0"))
		if len(dirs) == 0 {
			continue
		}
		complete := true
		for name, has := range want {
			b, _ := os.ReadFile(filepath.Join(dirs[0], name))
			complete = complete && strings.Contains(string(b), has)
		}
		if complete {
			folder = dirs[0]
			break
		}
	}
	if folder == "" {
		probes, _ := os.ReadFile(filepath.Join(out, "probes.log"))
		t.Fatalf("no complete capture in 20 s; probes.log:\n%s\nstallwatch output:\n%s", probes, stderr.String())
	}
	mysqlTxt, _ := os.ReadFile(filepath.Join(folder, "mysql.txt"))
	if !strings.Contains(string(mysqlTxt), "PROCESSLIST") && !strings.Contains(string(mysqlTxt), "\tUser\t") {
		t.Errorf("mysql.txt has no processlist:\n%.500s", mysqlTxt)
	}
	// Every stall is named by a capture: the next event comes half a second after one ends.
	var probes []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		probes, _ = os.ReadFile(filepath.Join(out, "probes.log"))
		named := map[string]bool{}
		for _, line := range strings.Split(string(probes), "\n") {
			if strings.Contains(line, "CAPTURE waiting={") {
				named["readyz"] = named["readyz"] || strings.Contains(line, "'halley_readyz'")
				named["commit"] = named["commit"] || strings.Contains(line, "'mysql_commit'")
				named["statement"] = named["statement"] || strings.Contains(line, "'mysql_statement'")
			}
		}
		if named["readyz"] && named["commit"] && named["statement"] {
			break
		}
	}
	for _, probe := range []string{"'halley_readyz'", "'mysql_commit'", "'mysql_statement'"} {
		if !strings.Contains(string(probes), probe) {
			t.Errorf("no capture names %s (readyz, the commit and the long statement all wait):\n%s", probe, probes)
		}
	}
	_ = lockIn.Close() // the locking transaction ends with its client
	_ = locker.Wait()

	// The samples: InnoDB's counters and the machine, every second.
	var samples string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(out, "samples.log"))
		if samples = string(b); strings.Contains(samples, "Innodb_lsn_current=") && strings.Contains(samples, "halley_rss_kb=") {
			break
		}
	}
	if !strings.Contains(samples, "Innodb_lsn_current=") || !strings.Contains(samples, "halley_rss_kb=") {
		t.Errorf("samples.log lacks InnoDB counters or machine samples:\n%.2000s", samples)
	}

	// The watched process ends: so does the watch, by itself.
	_ = target.Process.Kill()
	_ = target.Wait()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("stallwatch exited with %v:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("stallwatch still runs 10 s after the watched process ended")
	}
	if got := sqlOut("SHOW DATABASES LIKE '" + schema + "'"); got != "" {
		t.Errorf("the watch left its schema behind: %q", got)
	}
}
