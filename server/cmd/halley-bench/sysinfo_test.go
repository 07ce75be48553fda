package main

import (
	"testing"
	"time"
)

func TestParseLoadAvg(t *testing.T) {
	l, err := parseLoadAvg("4.12 3.46 3.85 2/292 9856\n")
	if err != nil || l != [3]float64{4.12, 3.46, 3.85} {
		t.Errorf("parseLoadAvg = %v, %v", l, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "a b c"} {
		if _, err := parseLoadAvg(bad); err == nil {
			t.Errorf("parseLoadAvg(%q) accepted a bad line", bad)
		}
	}
}

func TestParseKBField(t *testing.T) {
	status := "Name:\thalley\nVmPeak:\t  812345 kB\nVmRSS:\t   38640 kB\nThreads:\t12\n"
	tests := []struct {
		field string
		want  int64
		ok    bool
	}{
		{"VmRSS:", 38640, true},
		{"VmPeak:", 812345, true},
		{"VmSwap:", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseKBField(status, tt.field)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseKBField(%s) = %d, %v; want %d, %v", tt.field, got, ok, tt.want, tt.ok)
		}
	}
	if kb, ok := parseKBField("MemTotal:       24683724 kB\nMemFree: 1 kB\n", "MemTotal:"); !ok || kb != 24683724 {
		t.Errorf("MemTotal = %d, %v", kb, ok)
	}
}

func TestInfoField(t *testing.T) {
	info := "# Memory\r\nused_memory:1858104\r\nused_memory_human:1.77M\r\nused_memory_rss:9000000\r\n"
	if got := infoField(info, "used_memory"); got != "1858104" {
		t.Errorf("used_memory = %q (a prefix of another field must not match)", got)
	}
	if got := infoField(info, "maxmemory"); got != "" {
		t.Errorf("missing field = %q, want empty", got)
	}
}

func TestParseProcStat(t *testing.T) {
	// The command holds spaces and a parenthesis; utime 150, stime 50, cutime 300, cstime 100 ticks.
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 300 100 20 0 12 0 12345 1000000 500 18446744073709551615"
	d, err := parseProcStat(line)
	if err != nil || d != 6*time.Second {
		t.Errorf("parseProcStat = %v, %v; want 6s", d, err)
	}
	if _, err := parseProcStat("4242 (x) S 1 2"); err == nil {
		t.Error("a short stat line was accepted")
	}
}

func TestParseSystemStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  100 10 50 760 40 0 0 40 30 0\ncpu0 50 5 25 400 20 0 0 0 15 0\nintr 1 2 3\n"
	busy, steal, total, err := parseSystemStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if busy != 2*time.Second || steal != 400*time.Millisecond || total != 10*time.Second {
		t.Errorf("busy %v steal %v total %v; want 2s, 0.4s and 10s (guest is inside user)", busy, steal, total)
	}
	if _, _, _, err := parseSystemStat("intr 1 2\n"); err == nil {
		t.Error("a stat without a cpu line was accepted")
	}
}

func TestCPUBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := cpuSnap{at: t0, procs: map[string]time.Duration{"halley": 10 * time.Second, "mysqld": 20 * time.Second}, busy: 100 * time.Second, steal: 5 * time.Second, total: 400 * time.Second}
	b := cpuSnap{at: t0.Add(10 * time.Second), procs: map[string]time.Duration{"halley": 15 * time.Second, "mysqld": 28 * time.Second},
		busy: 118 * time.Second, steal: 6 * time.Second, total: 420 * time.Second}
	u := cpuBetween(a, b, 1000)
	if u.Cores["halley"] != 0.5 || u.Cores["mysqld"] != 0.8 {
		t.Errorf("cores = %v, want halley 0.5, mysqld 0.8", u.Cores)
	}
	if u.MsPerOp["halley"] != 5 || u.MsPerOp["mysqld"] != 8 {
		t.Errorf("ms per op = %v, want halley 5, mysqld 8", u.MsPerOp)
	}
	if u.MachineBusy != 0.9 || u.MachineCores != 1.8 || u.Other != 0.5 || u.Steal != 0.05 {
		t.Errorf("machine busy %v, cores %v, other %v, steal %v; want 0.9, 1.8, 0.5, 0.05", u.MachineBusy, u.MachineCores, u.Other, u.Steal)
	}
}

func TestStatusDelta(t *testing.T) {
	before := map[string]int64{"Questions": 1000, "Com_commit": 100}
	after := map[string]int64{"Questions": 1900, "Com_commit": 200, "Innodb_deadlocks": 3}
	delta, each := statusDelta(before, after, 100)
	if delta["Questions"] != 900 || delta["Com_commit"] != 100 || each["Questions"] != 9 || each["Com_commit"] != 1 {
		t.Errorf("delta %v, per step %v", delta, each)
	}
	if _, ok := delta["Innodb_deadlocks"]; ok {
		t.Error("a counter missing before must not be reported")
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80/x", "http://127.0.0.2:9"} {
		if _, err := checkLoopback(ok); err != nil {
			t.Errorf("checkLoopback(%s): %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://example.com", "ftp://127.0.0.1/", "http://0.0.0.0:80", "::"} {
		if _, err := checkLoopback(bad); err == nil {
			t.Errorf("checkLoopback(%s) accepted a non-loopback URL", bad)
		}
	}
}
