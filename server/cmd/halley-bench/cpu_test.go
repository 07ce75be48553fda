package main

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestServerPIDs: the pids the servers under test report are their own processes, and the CPU watch uses them,
// whatever other mariadbd or redis-server processes run on the machine.
func TestServerPIDs(t *testing.T) {
	for _, c := range []struct {
		env, name string
		comms     []string
		open      func(raw string) error
	}{
		{"HALLEY_TEST_MYSQL", "mysqld", []string{"mariadbd", "mysqld"}, func(raw string) error {
			db, err := openMySQL(raw, 1)
			if err == nil {
				db.Close()
			}
			return err
		}},
		{"HALLEY_TEST_REDIS", "redis", []string{"redis-server"}, func(raw string) error {
			rdb, err := openRedis(raw)
			if err == nil {
				rdb.Close()
			}
			return err
		}},
	} {
		raw := os.Getenv(c.env)
		if raw == "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not set (CI=true)", c.env)
			}
			t.Logf("%s is not set: %s not checked", c.env, c.name)
			continue
		}
		if err := c.open(raw); err != nil {
			t.Fatal(err)
		}
		pid := pinned(c.name)
		if pid == 0 {
			t.Fatalf("%s: no pid pinned", c.name)
		}
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil {
			t.Fatalf("%s: pid %d: %v", c.name, pid, err)
		}
		if got := strings.TrimSpace(string(comm)); !slices.Contains(c.comms, got) {
			t.Fatalf("%s: pid %d is %q", c.name, pid, got)
		}
		if w := newCPUWatch(0); w[c.name] != pid {
			t.Fatalf("%s: the CPU watch uses pid %d, want %d", c.name, w[c.name], pid)
		}
	}
}

// TestChildrenCPU: the CPU time of a live child (as the fork server is Halley's) counts for its parent.
func TestChildrenCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done; exec sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := out.Read(make([]byte, 8)); err != nil { // the busy loop is over
		t.Fatal(err)
	}
	own, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	if ppid, err := parsePPID(string(own)); err != nil || ppid != os.Getpid() {
		t.Fatalf("parsePPID = %d, %v; want %d", ppid, err, os.Getpid())
	}
	want, _ := parseProcStat(string(own))
	if got := childrenCPU(os.Getpid()); got < want || want <= 0 {
		t.Fatalf("childrenCPU = %s, want at least the child's %s (> 0)", got, want)
	}
}

func TestDBBound(t *testing.T) {
	use := func(ms float64) *CPUUse { return &CPUUse{MsPerOp: map[string]float64{"mysqld": ms, "halley": 0.7}} }
	// 0.75 ms of MariaDB a step on 2 cores: at most 2,666.7 steps/s, 0.381 of 7,000 raw commits/s.
	if got := dbBound(use(0.75), 2, 7000); got == nil || *got != 0.381 {
		t.Errorf("dbBound = %s, want 0.381", fmtPtr(got))
	}
	for name, got := range map[string]*float64{
		"no CPU figures":      dbBound(nil, 2, 7000),
		"no MariaDB CPU":      dbBound(use(0), 2, 7000),
		"no cores":            dbBound(use(0.75), 0, 7000),
		"no yardstick":        dbBound(use(0.75), 2, 0),
		"MariaDB not watched": dbBound(&CPUUse{MsPerOp: map[string]float64{"halley": 0.7}}, 2, 7000),
	} {
		if got != nil {
			t.Errorf("%s: dbBound = %s, want none", name, fmtPtr(got))
		}
	}
}
