package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// userHZ is the unit of the CPU times in /proc (USER_HZ, 100 on every Linux ABI Go supports).
const userHZ = 100

// cpuSnap is a snapshot of CPU time: per watched process, and for the whole machine.
type cpuSnap struct {
	at      time.Time
	procs   map[string]time.Duration // name → user+system time
	busy    time.Duration            // machine: all CPUs, not idle or iowait
	steal   time.Duration            // machine: time the hypervisor gave to other guests
	total   time.Duration            // machine: all CPUs, everything
	missing []string
}

// cpuWatch knows the processes whose CPU time a suite reports: Halley (by pid), the database server (found
// by name) and this tool.
type cpuWatch map[string]int

func newCPUWatch(halleyPID int) cpuWatch {
	w := cpuWatch{"bench": os.Getpid()}
	if halleyPID > 0 {
		w["halley"] = halleyPID
	}
	if pid := pinned("mysqld"); pid > 0 {
		w["mysqld"] = pid
	} else if pid := findProcess("mariadbd", "mysqld"); pid > 0 {
		w["mysqld"] = pid
	}
	if pid := pinned("redis"); pid > 0 {
		w["redis"] = pid
	} else if pid := findProcess("redis-server"); pid > 0 {
		w["redis"] = pid
	}
	return w
}

// serverPIDs are the pids the database and Redis servers under test report themselves (set when a suite
// connects): other mariadbd or redis-server processes on the machine (tests' private servers) are then not
// mistaken for them. Without a connection the servers are found by name.
var serverPIDs sync.Map

func pinned(name string) int {
	if v, ok := serverPIDs.Load(name); ok {
		return v.(int)
	}
	return 0
}

// pinMySQLPID reads the server's pid file (@@pid_file, relative to @@datadir when not absolute).
func pinMySQLPID(ctx context.Context, db *sql.DB) {
	var file, dir string
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file, @@datadir").Scan(&file, &dir); err != nil {
		return
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		serverPIDs.Store("mysqld", pid)
	}
}

// pinRedisPID asks Redis for its process_id.
func pinRedisPID(rdb *redis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil && pid > 0 {
				serverPIDs.Store("redis", pid)
			}
		}
	}
}

func (w cpuWatch) snap() cpuSnap {
	s := cpuSnap{at: time.Now(), procs: map[string]time.Duration{}}
	for name, pid := range w {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			s.missing = append(s.missing, name)
			continue
		}
		d, err := parseProcStat(string(b))
		if err != nil {
			s.missing = append(s.missing, name)
			continue
		}
		if name == "halley" {
			// Halley's long-lived children too (the warm Python runtime's fork server, whose reaped children —
			// the forked plugin runs — are in its own cutime): Halley reaps them only when they exit.
			d += childrenCPU(pid)
		}
		s.procs[name] = d
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.busy, s.steal, s.total, _ = parseSystemStat(string(b))
	}
	return s
}

// CPUUse is the CPU time spent over a phase: cores busy on average per process and for the whole machine
// (which includes other people's jobs on a shared machine), and CPU milliseconds per unit of work.
type CPUUse struct {
	WallS        float64            `json:"wall_s"`
	Cores        map[string]float64 `json:"cores"`         // average cores used, per process
	MsPerOp      map[string]float64 `json:"cpu_ms_per_op"` // CPU ms per step / commit / run, per process
	MachineBusy  float64            `json:"machine_busy"`  // fraction of all CPUs busy (every process)
	MachineCores float64            `json:"machine_cores"` // cores busy, every process
	Other        float64            `json:"other_cores"`   // cores busy outside the watched processes
	Steal        float64            `json:"steal"`         // fraction of all CPU time taken by the hypervisor
}

// cpuBetween computes the use between two snapshots for ops units of work.
func cpuBetween(a, b cpuSnap, ops int64) CPUUse {
	wall := b.at.Sub(a.at)
	u := CPUUse{WallS: round3(wall.Seconds()), Cores: map[string]float64{}, MsPerOp: map[string]float64{}}
	if wall <= 0 {
		return u
	}
	var watched time.Duration
	for name, end := range b.procs {
		start, ok := a.procs[name]
		if !ok {
			continue
		}
		d := end - start
		watched += d
		u.Cores[name] = round3(d.Seconds() / wall.Seconds())
		if ops > 0 {
			u.MsPerOp[name] = round3(float64(d) / float64(time.Millisecond) / float64(ops))
		}
	}
	if tot := b.total - a.total; tot > 0 {
		busy := b.busy - a.busy
		u.MachineBusy = round3(float64(busy) / float64(tot))
		u.MachineCores = round3(busy.Seconds() / wall.Seconds())
		u.Other = round3(max(0, (busy-watched).Seconds()/wall.Seconds()))
		u.Steal = round3(float64(b.steal-a.steal) / float64(tot))
	}
	return u
}

func (u CPUUse) String() string {
	var parts []string
	for _, n := range []string{"halley", "mysqld", "redis", "bench"} {
		if c, ok := u.Cores[n]; ok {
			p := fmt.Sprintf("%s %.2f cores", n, c)
			if m, ok := u.MsPerOp[n]; ok {
				p += fmt.Sprintf(" (%.2f ms/op)", m)
			}
			parts = append(parts, p)
		}
	}
	return fmt.Sprintf("%s; machine %.2f cores busy (%.0f%%), %.2f of them outside these processes; steal %.1f%%",
		strings.Join(parts, ", "), u.MachineCores, u.MachineBusy*100, u.Other, u.Steal*100)
}

// childrenCPU is the CPU time (parseProcStat) of pid's live children.
func childrenCPU(pid int) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if ppid, err := parsePPID(string(b)); err != nil || ppid != pid {
			continue
		}
		if d, err := parseProcStat(string(b)); err == nil {
			sum += d
		}
	}
	return sum
}

// parsePPID returns the parent pid of a /proc/<pid>/stat line.
func parsePPID(s string) (int, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command field")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("proc stat: %d fields after the command", len(f))
	}
	return strconv.Atoi(f[1])
}

// parseProcStat returns utime+stime+cutime+cstime of a /proc/<pid>/stat line: the process and its children
// that it has waited for (plugin processes count for Halley, python3 children for the bare loop). The command
// name (field 2) is in parentheses and may hold spaces, so the fields are counted after the last ')'.
func parseProcStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command field")
	}
	f := strings.Fields(s[i+1:])
	// After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17) → indexes 11..14 here.
	if len(f) < 15 {
		return 0, fmt.Errorf("proc stat: %d fields after the command", len(f))
	}
	var sum int64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: bad CPU time %q", v)
		}
		sum += n
	}
	return ticks(sum), nil
}

// parseSystemStat returns busy, steal and total CPU time from the "cpu " line of /proc/stat (busy excludes idle
// and iowait, and includes steal).
func parseSystemStat(s string) (busy, steal, total time.Duration, err error) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var sum, idle, st int64
		for i, v := range f[1:] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("/proc/stat: %v", err)
			}
			if i >= 8 { // guest and guest_nice are already counted in user and nice
				break
			}
			sum += n
			switch i {
			case 3, 4: // idle, iowait
				idle += n
			case 7:
				st = n
			}
		}
		return ticks(sum - idle), ticks(st), ticks(sum), nil
	}
	return 0, 0, 0, fmt.Errorf("/proc/stat: no cpu line")
}

// cpuMeter measures CPU use over a phase that begins after a delay (the warm-up).
type cpuMeter struct {
	w     cpuWatch
	start chan cpuSnap
}

func startCPU(w cpuWatch, after time.Duration) *cpuMeter {
	m := &cpuMeter{w: w, start: make(chan cpuSnap, 1)}
	go func() {
		time.Sleep(after) // bounded by the phase's own warm-up
		m.start <- w.snap()
	}()
	return m
}

// stop ends the phase: the CPU used since it began, for ops units of work.
func (m *cpuMeter) stop(ops int64) CPUUse {
	end := m.w.snap()
	return cpuBetween(<-m.start, end, ops)
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// findProcess returns the pid of the first process whose command name is one of names, or 0.
func findProcess(names ...string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(b))
		for _, n := range names {
			if comm == n {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid
			}
		}
	}
	return 0
}

// dbBound is the most a suite's ratio can be on this machine by the database's own CPU: the rate MariaDB would
// reach at the CPU it spent per op (u's mysqld ms per op) if it had every core of the machine to itself —
// Halley, the load generator and everything else costing nothing — over the yardstick's rate. A ratio target
// above it cannot be met here by any change to Halley's own work, only by an op that costs the database less.
// An estimate, not a law: MariaDB's CPU per op falls somewhat as the rate rises (more commits share a group),
// and the yardstick's own loop shared the machine with its client.
func dbBound(u *CPUUse, cores int, yardstick float64) *float64 {
	if u == nil || cores <= 0 || yardstick <= 0 {
		return nil
	}
	ms := u.MsPerOp["mysqld"]
	if ms <= 0 {
		return nil
	}
	return ratio(float64(cores)*1000/ms, yardstick)
}
