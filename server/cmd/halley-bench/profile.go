package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// profileFlags take a CPU profile of Halley during a suite's measured phase, from a net/http/pprof endpoint
// (Halley has none of its own; scripts/bench.sh builds the server under test with one, see docs/benchmarks.md).
type profileFlags struct {
	url     string
	out     string
	seconds int
}

func (p *profileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.url, "pprof", "", "base URL of Halley's net/http/pprof endpoint, e.g. http://127.0.0.1:6061 (loopback only; empty: no profile)")
	fs.StringVar(&p.out, "profile-out", "", "file for the CPU profile taken during the measured phase")
	fs.IntVar(&p.seconds, "profile-seconds", 20, "length of the CPU profile")
}

// profiler is a CPU profile being taken in the background.
type profiler struct {
	done chan error
}

// start begins a CPU profile of p.seconds if profiling is configured; wait returns its outcome.
func (p profileFlags) start(ctx context.Context, stderr io.Writer) *profiler {
	if p.url == "" || p.out == "" || p.seconds <= 0 {
		return nil
	}
	pr := &profiler{done: make(chan error, 1)}
	go func() {
		pr.done <- p.fetch(ctx)
	}()
	fmt.Fprintf(stderr, "profile: %d s CPU profile of Halley into %s\n", p.seconds, p.out)
	return pr
}

func (p profileFlags) fetch(ctx context.Context) error {
	u, err := checkLoopback(p.url)
	if err != nil {
		return fmt.Errorf("--pprof: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.seconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(u.String(), "/")+"/debug/pprof/profile?seconds="+strconv.Itoa(p.seconds), nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(p.out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy's error is the one to report
		return err
	}
	return f.Close()
}

// wait waits for the profile (nothing to wait for when none was asked for) and logs a failure: a missing
// profile never fails a suite.
func (pr *profiler) wait(stderr io.Writer) {
	if pr == nil {
		return
	}
	if err := <-pr.done; err != nil {
		fmt.Fprintln(stderr, "profile:", err)
	}
}

// mysqlCounters are the global status counters the steps suite reads before and after its measured phase.
var mysqlCounters = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit", "Com_rollback",
	"Innodb_deadlocks", "Innodb_row_lock_waits", "Innodb_os_log_fsyncs", "Innodb_data_fsyncs",
	"Innodb_buffer_pool_reads", "Innodb_buffer_pool_read_requests", // reads: pages that had to come from disk
	"Com_stmt_execute", "Com_stmt_prepare"} // step groups run on prepared statements, and prepared (HALLEY_DB_STMT_CACHE)

// globalStatus reads the counters. They are server-wide: other databases' traffic on the same server is
// included, so per-step figures derived from them are an upper bound.
func globalStatus(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, c := range mysqlCounters {
		want[c] = true
	}
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if want[k] {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out, rows.Err()
}

// statusDelta returns after - before per counter, and each counter divided by per (e.g. per step), rounded.
func statusDelta(before, after map[string]int64, per int64) (delta map[string]int64, each map[string]float64) {
	delta, each = map[string]int64{}, map[string]float64{}
	for k, a := range after {
		b, ok := before[k]
		if !ok {
			continue
		}
		delta[k] = a - b
		if per > 0 {
			each[k] = round3(float64(a-b) / float64(per))
		}
	}
	return delta, each
}
