package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Machine describes where a figure was measured. The machine is shared with other engineers' jobs, so the load
// average at the start and end of a suite goes with every figure.
type Machine struct {
	NProc       int        `json:"nproc"`
	MemTotalMB  int64      `json:"mem_total_mb,omitempty"`
	LoadStart   [3]float64 `json:"loadavg_start"`
	LoadEnd     [3]float64 `json:"loadavg_end"`
	MariaDB     string     `json:"mysql_version,omitempty"`
	Redis       string     `json:"redis_version,omitempty"`
	GoVersion   string     `json:"go_version"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  time.Time  `json:"finished_at"`
	CommandLine string     `json:"command"`
}

func newMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), StartedAt: time.Now().UTC().Truncate(time.Second),
		CommandLine: "halley-bench " + strings.Join(os.Args[1:], " ")}
	m.LoadStart, _ = loadAvg()
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, ok := parseKBField(string(b), "MemTotal:"); ok {
			m.MemTotalMB = kb / 1024
		}
	}
	return m
}

func (m *Machine) finish() {
	m.LoadEnd, _ = loadAvg()
	m.FinishedAt = time.Now().UTC().Truncate(time.Second)
}

func (m *Machine) versions(ctx context.Context, db *sql.DB, rdb *redis.Client) {
	if db != nil {
		_ = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&m.MariaDB)
	}
	if rdb != nil {
		if s, err := rdb.Info(ctx, "server").Result(); err == nil {
			m.Redis = infoField(s, "redis_version")
		}
	}
}

func (m Machine) loadString() string {
	f := func(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }
	return "load average " + f(m.LoadStart) + " at start, " + f(m.LoadEnd) + " at end"
}

func loadAvg() ([3]float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}, err
	}
	return parseLoadAvg(string(b))
}

// parseLoadAvg reads the first three fields of /proc/loadavg.
func parseLoadAvg(s string) ([3]float64, error) {
	var l [3]float64
	f := strings.Fields(s)
	if len(f) < 3 {
		return l, fmt.Errorf("loadavg: %q has fewer than three fields", s)
	}
	for i := 0; i < 3; i++ {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return l, fmt.Errorf("loadavg: %v", err)
		}
		l[i] = v
	}
	return l, nil
}

// parseKBField finds "Name:   123 kB" in a /proc status-style text and returns 123.
func parseKBField(s, name string) (int64, bool) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, name))
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		return v, err == nil
	}
	return 0, false
}

// rssMB returns the resident set size of a process in MiB (VmRSS of /proc/<pid>/status).
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	kb, ok := parseKBField(string(b), "VmRSS:")
	if !ok {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return round3(float64(kb) / 1024), nil
}

// infoField returns a field of a Redis INFO answer ("name:value" lines).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimRight(line, "\r")
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return ""
}

// redisUsedMB returns INFO memory used_memory in MiB.
func redisUsedMB(ctx context.Context, rdb *redis.Client) (float64, error) {
	s, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(infoField(s, "used_memory"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redis INFO memory: used_memory: %v", err)
	}
	return round3(float64(v) / (1 << 20)), nil
}
