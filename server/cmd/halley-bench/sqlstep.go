package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halley-bpm/halley/service/store"
)

// The sqlstep suite: the steps suite's flow — a start and four approvals of one instance per client at a time —
// as the statements the store sends for it, replayed on MySQL with no Halley in between. It answers what the
// database alone costs per step and so what steps ratio it allows at all, and what each part of a step costs:
// --read locked (a step's lock read: the instance FOR UPDATE and its open tasks), cached (no read; the first write
// checks the rev, as with the step cache), none (no read, no check); --history and --notifications drop those
// rows. The rows are an approval's, with its sizes (a ~1.2 KB state at the end); ids start with "sqlstep-", and
// the suite deletes them when it ends.

type sqlstepConfig struct {
	mysql             string
	clients, n        int
	read              string
	history, notices  bool
	baseline          bool
	baseDur, baseWarm time.Duration
}

// SQLStepFigures is the sqlstep suite's JSON line.
type SQLStepFigures struct {
	Suite         string           `json:"suite"`
	Clients       int              `json:"clients"`
	Read          string           `json:"read"`
	History       bool             `json:"history"`
	Notifications bool             `json:"notifications"`
	Instances     int              `json:"instances"`
	Steps         int64            `json:"steps"`
	DurationS     float64          `json:"duration_s"`
	StepsPerS     float64          `json:"steps_per_s"`
	Latency       Latency          `json:"step_latency"`
	CPU           CPUUse           `json:"cpu"`
	Baseline      *BaselineFigures `json:"baseline,omitempty"`
	// Ceiling is steps/s over the baseline's raw commits/s: the steps suite's ratio with a Halley that cost nothing.
	Ceiling *float64 `json:"ceiling,omitempty"`
	Machine Machine  `json:"machine"`
}

func runSQLStep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sqlstep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c sqlstepConfig
	fs.StringVar(&c.mysql, "mysql", "", "mysql://root@127.0.0.1:3306/db — a database with Halley's schema and no instances but this suite's (it migrates a missing schema)")
	fs.IntVar(&c.clients, "clients", 16, "clients, each running one instance's five steps at a time")
	fs.IntVar(&c.n, "n", 3000, "instances in all (five steps each)")
	fs.StringVar(&c.read, "read", "locked", "a step's read: locked (the lock read), cached (none; the write checks the rev), none")
	fs.BoolVar(&c.history, "history", true, "write the history row of each step")
	fs.BoolVar(&c.notices, "notifications", true, "write the notification row of each step")
	fs.BoolVar(&c.baseline, "baseline", true, "also run the raw single-row commit loop at the same clients (the steps suite's baseline)")
	fs.DurationVar(&c.baseDur, "baseline-duration", 10*time.Second, "measured time of the baseline")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	switch {
	case c.mysql == "":
		return fmt.Errorf("--mysql is required")
	case c.clients < 1 || c.clients > 512 || c.n < 1 || c.n > 1_000_000:
		return fmt.Errorf("--clients must be 1..512 and --n 1..1000000")
	case c.read != "locked" && c.read != "cached" && c.read != "none":
		return fmt.Errorf("--read must be locked, cached or none")
	}
	c.baseWarm = 2 * time.Second
	return sqlstepSuite(ctx, c, stdout, stderr)
}

func sqlstepSuite(ctx context.Context, c sqlstepConfig, stdout, stderr io.Writer) error {
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(ctx, store.Config{URL: c.mysql, MaxOpenConns: 2, StepCache: -1, Logger: quiet})
	if err != nil {
		return err
	}
	_, err = st.Migrate(ctx)
	_ = st.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db, err := openMySQL(c.mysql, c.clients)
	if err != nil {
		return err
	}
	defer db.Close()
	var others int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM instances WHERE id NOT LIKE 'sqlstep-%'").Scan(&others); err != nil {
		return err
	}
	if others > 0 {
		return fmt.Errorf("--mysql holds %d instances of its own: give the suite a database of its own", others)
	}
	defer sqlstepCleanUp(db)
	fig := &SQLStepFigures{Suite: "sqlstep", Clients: c.clients, Read: c.read, History: c.history, Notifications: c.notices, Instances: c.n,
		Machine: newMachine()}
	fig.Machine.versions(ctx, db, nil)
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	fmt.Fprintf(stderr, "sqlstep: %d clients, %d instances, read %s\n", c.clients, c.n, c.read)
	var next atomic.Int64
	recs := make([]*recorder, c.clients)
	errs := make(chan error, c.clients)
	meter := startCPU(newCPUWatch(0), 0)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range c.clients {
		recs[i] = newRecorder()
		wg.Go(func() {
			for k := next.Add(1); k <= int64(c.n) && ctx.Err() == nil; k = next.Add(1) {
				if err := sqlstepFlow(ctx, db, c, fmt.Sprintf("sqlstep-%s-%08d", run, k), fmt.Sprintf("user%03d", i), recs[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	all := newRecorder()
	for _, r := range recs {
		all.merge(r)
	}
	took := time.Since(t0)
	fig.Steps, fig.DurationS, fig.StepsPerS, fig.Latency = all.count, round3(took.Seconds()), perSecond(all.count, took), all.summary()
	fig.CPU = meter.stop(all.count)
	if c.baseline {
		fmt.Fprintf(stderr, "sqlstep: baseline, %d clients for %s\n", c.clients, c.baseDur)
		b, err := runBaseline(ctx, db, run, c.clients, c.baseWarm, c.baseDur)
		if err != nil {
			return err
		}
		fig.Baseline = b
		if b.CommitsPS > 0 {
			r := round3(fig.StepsPerS / b.CommitsPS)
			fig.Ceiling = &r
		}
	}
	fig.Machine.finish()
	summary := []string{fmt.Sprintf("sqlstep: %d steps (%d instances × 5) by %d clients, read %s, history %v, notifications %v: %.1f steps/s",
		fig.Steps, c.n, c.clients, c.read, c.history, c.notices, fig.StepsPerS),
		latencyLine("step", fig.Latency), "  cpu: " + fig.CPU.String()}
	if fig.Baseline != nil {
		summary = append(summary, fmt.Sprintf("  baseline: %.1f raw commits/s → ceiling (steps/s ÷ commits/s) %s", fig.Baseline.CommitsPS, fmtPtr(fig.Ceiling)))
	}
	return emit(stdout, summary, fig)
}

// sqlstepCleanUp deletes the suite's rows.
func sqlstepCleanUp(db *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, q := range []string{"DELETE FROM tasks WHERE id LIKE 'sqlstep-%'", "DELETE FROM history WHERE instance_id LIKE 'sqlstep-%'",
		"DELETE FROM notifications WHERE instance_id LIKE 'sqlstep-%'", "DELETE FROM instances WHERE id LIKE 'sqlstep-%'"} {
		_, _ = db.ExecContext(ctx, q)
	}
}

const (
	sqlstepInstanceCols = "id, tenant_id, tkey, version, title, title_i18n, status, initiator, correlation_id, context, state, rev, created_at, updated_at, ended_at"
	sqlstepTaskCols     = "id, tenant_id, instance_id, node_id, node_name, node_instance_id, assignee, status, kind, grp, position, parent_id, " +
		"after_signers, comment, data, decided_by, title, tkey, initiator, created_at, decided_at, auto, delegated_from, urged_at"
)

// sqlstepState is an approval flow's state after visits approvals: the steps suite's sizes.
func sqlstepState(visits int) string {
	var b strings.Builder
	b.WriteString(`{"nodes":{"start":{"name":"Apply","type":"start","state":"completed","visit":1,"started_at":"2026-11-29T19:18:58.250927346Z","ended_at":"2026-11-29T19:18:58.250927346Z","seq":1}`)
	for i := 1; i <= visits; i++ {
		fmt.Fprintf(&b, `,"step%d":{"name":"Step %d","type":"approval","state":"completed","visit":1,"started_at":"2026-11-29T19:18:52.258583138Z","ended_at":"2026-11-29T19:18:52.273452978Z","seq":%d,"groups":[{"total":1,"approved":1,"rejected":0,"outcome":"approved"}],"approved_by":["bench-user"]}`, i, i, 2*i)
	}
	b.WriteString(`},"edges":"AQEBAQE=","seq":10}`)
	return b.String()
}

// sqlstepFlow runs one instance's start and four approvals, each step a transaction as the store writes it.
func sqlstepFlow(ctx context.Context, db *sql.DB, c sqlstepConfig, inst, user string, rec *recorder) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	task := func(k int, status string, now time.Time) []any {
		var decided any
		if status != "pending" {
			decided = now
		}
		return []any{fmt.Sprintf("%s.t%d", inst, k), "default", inst, fmt.Sprintf("step%d", k), fmt.Sprintf("Step %d", k), fmt.Sprintf("%s.n%d", inst, k),
			user, status, "approval", 0, 0, "", "", "ok", "", "", "bench-steps", "bench-steps", user, now, decided, false, "", nil}
	}
	taskRow := "(" + placeholdersN(24) + ")"
	for k := 0; k <= 4; k++ {
		t0, now := time.Now(), time.Now().UTC()
		status := "running"
		if k == 4 {
			status = "completed"
		}
		instArgs := []any{inst, "default", "bench-steps", 1, "bench-steps", nil, status, user, "", `{"approver":"` + user + `"}`, sqlstepState(k + 1), k + 1, now, now, nil}
		var q strings.Builder
		var args []any
		if k == 0 {
			q.WriteString("START TRANSACTION;\nINSERT INTO instances (" + sqlstepInstanceCols + ") VALUES (" + placeholdersN(15) + ");\n")
			args = append(args, instArgs...)
			q.WriteString("INSERT INTO tasks (" + sqlstepTaskCols + ") VALUES " + taskRow + ";\n")
			args = append(args, task(1, "pending", now)...)
		} else {
			switch c.read {
			case "locked":
				rows, err := conn.QueryContext(ctx, "START TRANSACTION;\nSELECT "+sqlstepInstanceCols+" FROM instances WHERE id IN (?) AND tenant_id = ? ORDER BY id FOR UPDATE;\n"+
					"SELECT "+sqlstepTaskCols+" FROM tasks FORCE INDEX (idx_tasks_instance) WHERE instance_id IN (?) AND status IN (?, ?) ORDER BY id",
					inst, "default", inst, "pending", "waiting")
				if err != nil {
					return err
				}
				for {
					for rows.Next() {
					}
					if !rows.NextResultSet() {
						break
					}
				}
				if err := rows.Close(); err != nil {
					return err
				}
				q.WriteString("INSERT INTO instances (" + sqlstepInstanceCols + ") VALUES (" + placeholdersN(15) + ") ON DUPLICATE KEY UPDATE title = VALUES(title), " +
					"title_i18n = VALUES(title_i18n), status = VALUES(status), context = VALUES(context), state = VALUES(state), rev = VALUES(rev), " +
					"updated_at = VALUES(updated_at), ended_at = VALUES(ended_at), correlation_id = VALUES(correlation_id);\n")
				args = append(args, instArgs...)
			case "cached":
				res, err := conn.ExecContext(ctx, "START TRANSACTION;\nUPDATE instances SET status = ?, context = ?, state = ?, rev = ?, updated_at = ? WHERE id IN (?) AND tenant_id = ? AND rev = ?",
					status, instArgs[9], instArgs[10], k+1, now, inst, "default", k)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("sqlstep: instance %s not at rev %d", inst, k)
				}
			default: // none
				q.WriteString("START TRANSACTION;\nINSERT INTO instances (" + sqlstepInstanceCols + ") VALUES (" + placeholdersN(15) + ") ON DUPLICATE KEY UPDATE status = VALUES(status), " +
					"context = VALUES(context), state = VALUES(state), rev = VALUES(rev), updated_at = VALUES(updated_at);\n")
				args = append(args, instArgs...)
			}
			// The decided task and its successor in one upsert, as the store writes them.
			rowsSQL := taskRow
			targs := task(k, "approved", now)
			if k < 4 {
				rowsSQL = taskRow + ", " + taskRow
				targs = append(task(k+1, "pending", now), targs...)
			}
			q.WriteString("INSERT INTO tasks (" + sqlstepTaskCols + ") VALUES " + rowsSQL + " ON DUPLICATE KEY UPDATE status = VALUES(status), comment = VALUES(comment), " +
				"data = VALUES(data), decided_by = VALUES(decided_by), after_signers = VALUES(after_signers), assignee = VALUES(assignee), " +
				"decided_at = VALUES(decided_at), auto = VALUES(auto), urged_at = VALUES(urged_at);\n")
			args = append(args, targs...)
		}
		if c.history {
			q.WriteString("INSERT INTO history (tenant_id, instance_id, at, actor, action, node_id, task_id, comment, data, more_events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);\n")
			args = append(args, "default", inst, now, user, "task.approved", fmt.Sprintf("step%d", k), fmt.Sprintf("%s.t%d", inst, k), "ok", `{"assignee":"`+user+`"}`,
				`[{"action":"node.completed","node_id":"step1"},{"action":"node.activated","node_id":"step2"},{"action":"task.created","node_id":"step2","task_id":"`+
					inst+`.t5","data":{"assignee":"`+user+`","kind":"approval","status":"pending"}}]`)
		}
		if c.notices {
			q.WriteString("INSERT INTO notifications (id, tenant_id, username, dedupe_key, event, instance_id, task_id, title, node_name, message, link, created_at, read_at) " +
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id;\n")
			args = append(args, fmt.Sprintf("%s.%d", inst, k), "default", user, fmt.Sprintf("%s.%d.3/task.created", inst, k), "task.created", inst,
				fmt.Sprintf("%s.t%d", inst, k+1), "bench-steps", fmt.Sprintf("Step %d", k+1), "待审批：bench-steps", fmt.Sprintf("/tasks/%s.t%d", inst, k+1), now, nil)
		}
		q.WriteString("COMMIT")
		if _, err := conn.ExecContext(ctx, q.String(), args...); err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
		rec.ok(time.Since(t0))
	}
	return nil
}

func placeholdersN(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }
