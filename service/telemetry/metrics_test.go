package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/telemetry"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func gather(t *testing.T, m *telemetry.Metrics, names ...string) string {
	t.Helper()
	var b strings.Builder
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				for _, x := range mf.GetMetric() {
					labels := []string{}
					for _, l := range x.GetLabel() {
						labels = append(labels, l.GetName()+"="+l.GetValue())
					}
					v := x.GetGauge().GetValue() + x.GetCounter().GetValue() + float64(x.GetHistogram().GetSampleCount())
					fmt.Fprintf(&b, "%s{%s} %g\n", n, strings.Join(labels, ","), v)
				}
			}
		}
	}
	return b.String()
}

// Steps are counted by action and outcome: committed, or the error's kind (a bounded set: an error that is no
// model.Error is "internal"); the instance id never becomes a label.
func TestStepsByActionAndOutcome(t *testing.T) {
	m := telemetry.New(telemetry.Options{Clock: clock.NewFake(t0)})
	ctx := context.Background()
	m.StepDone(ctx, engine.StepReport{Action: "approve", InstanceID: "i1", Took: 20 * time.Millisecond})
	m.StepDone(ctx, engine.StepReport{Action: "approve", InstanceID: "i2", Took: 30 * time.Millisecond})
	m.StepDone(ctx, engine.StepReport{Action: "approve", InstanceID: "i3", Err: model.Errorf(model.ECONFLICT, "decided")})
	m.StepDone(ctx, engine.StepReport{Action: "timer", InstanceID: "i4", Err: errors.New("database gone")})
	got := gather(t, m, "halley_steps_total", "halley_step_duration_seconds")
	for _, want := range []string{
		"halley_steps_total{action=approve,outcome=committed} 2",
		"halley_steps_total{action=approve,outcome=conflict} 1",
		"halley_steps_total{action=timer,outcome=internal} 1",
		"halley_step_duration_seconds{action=approve} 3",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "i1") {
		t.Errorf("an instance id became a label:\n%s", got)
	}
}

// Timer lateness is observed for first deliveries only (a redelivery is late by its lease, by design), as the
// fake clock's now minus the due time; acks and errors are counted, and a batch answer of the wrong length acks
// nothing.
func TestTimerLateness(t *testing.T) {
	clk := clock.NewFake(t0.Add(7 * time.Second))
	m := telemetry.New(telemetry.Options{Clock: clk})
	h := m.Timers(func(_ context.Context, batch []scheduler.Due) []error {
		if len(batch) == 3 {
			return []error{nil, errors.New("busy"), nil}
		}
		return []error{nil} // wrong length
	})
	h(context.Background(), []scheduler.Due{{ID: "a", Due: t0, Attempt: 1}, {ID: "b", Due: t0.Add(6 * time.Second), Attempt: 1},
		{ID: "c", Due: t0.Add(-time.Hour), Attempt: 2}})
	h(context.Background(), []scheduler.Due{{ID: "d", Due: t0.Add(7 * time.Second), Attempt: 1}, {ID: "e", Due: t0, Attempt: 1}})
	const want = `
# HELP halley_timer_lateness_seconds How late timers were handed to their handler, after their due time.
# TYPE halley_timer_lateness_seconds histogram
halley_timer_lateness_seconds_bucket{le="0.005"} 1
halley_timer_lateness_seconds_bucket{le="0.01"} 1
halley_timer_lateness_seconds_bucket{le="0.025"} 1
halley_timer_lateness_seconds_bucket{le="0.05"} 1
halley_timer_lateness_seconds_bucket{le="0.1"} 1
halley_timer_lateness_seconds_bucket{le="0.25"} 1
halley_timer_lateness_seconds_bucket{le="0.5"} 1
halley_timer_lateness_seconds_bucket{le="1"} 2
halley_timer_lateness_seconds_bucket{le="2.5"} 2
halley_timer_lateness_seconds_bucket{le="5"} 2
halley_timer_lateness_seconds_bucket{le="10"} 4
halley_timer_lateness_seconds_bucket{le="30"} 4
halley_timer_lateness_seconds_bucket{le="60"} 4
halley_timer_lateness_seconds_bucket{le="300"} 4
halley_timer_lateness_seconds_bucket{le="+Inf"} 4
halley_timer_lateness_seconds_sum 15
halley_timer_lateness_seconds_count 4
# HELP halley_timers_fired_total Timers handled, by outcome (ok: acknowledged; error: left leased, delivered again).
# TYPE halley_timers_fired_total counter
halley_timers_fired_total{outcome="error"} 3
halley_timers_fired_total{outcome="ok"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "halley_timer_lateness_seconds", "halley_timers_fired_total"); err != nil {
		t.Fatal(err)
	}
}

// Plugin runs are counted by the status of their result, an abandoned or stopped run by that, and timed by
// their process's start and end.
func TestPluginRuns(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	ok := plugin.Result{StartedAt: t0, EndedAt: t0.Add(2 * time.Second)}
	m.PluginRunDone(plugin.Job{}, ok, nil)
	m.PluginRunDone(plugin.Job{}, plugin.Result{StartedAt: t0, EndedAt: t0.Add(time.Second), Err: errors.New("exit 1")}, nil)
	m.PluginRunDone(plugin.Job{}, plugin.Result{StartedAt: t0, EndedAt: t0.Add(time.Minute), TimedOut: true}, nil)
	m.PluginRunDone(plugin.Job{}, plugin.Result{}, plugin.ErrAbandoned)
	m.PluginRunDone(plugin.Job{}, plugin.Result{Stopped: "closed"}, fmt.Errorf("run x: %w", plugin.ErrStopped))
	got := gather(t, m, "halley_plugin_runs_total", "halley_plugin_run_seconds")
	for _, want := range []string{"status=succeeded} 1", "status=failed} 1", "status=timed_out} 1", "status=abandoned} 1", "status=stopped} 1",
		"halley_plugin_run_seconds{} 3"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// Failed deliveries are counted by kind, from many goroutines at once.
func TestDeliveriesFailed(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if i%4 == 0 {
				m.DeliveryFailed("smtp")
			} else {
				m.DeliveryFailed("subscription")
			}
		})
	}
	wg.Wait()
	got := gather(t, m, "halley_deliveries_failed_total")
	for _, want := range []string{"kind=smtp} 10", "kind=subscription} 30"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// The query gauges are exported as the last refresh saw them (the outbox's age as of the scrape) and no longer
// once that refresh is older than Stale: another replica refreshes them then. A failed refresh keeps the last.
func TestQueryGaugesGoStale(t *testing.T) {
	clk := clock.NewFake(t0)
	m := telemetry.New(telemetry.Options{Clock: clk, Stale: time.Minute})
	if got := gather(t, m, "halley_instances", "halley_outbox_pending"); got != "" {
		t.Fatalf("gauges before any refresh:\n%s", got)
	}
	snap := telemetry.Snapshot{Instances: map[model.InstanceStatus]int64{model.StatusRunning: 7, model.StatusFailed: 2}, TimersPending: 3,
		OutboxPending: 4, OutboxOldest: t0.Add(-10 * time.Second)}
	if err := m.Refresh(context.Background(), func(context.Context) (telemetry.Snapshot, error) { return snap, nil }); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	if err := m.Refresh(context.Background(), func(context.Context) (telemetry.Snapshot, error) {
		return telemetry.Snapshot{}, errors.New("db down")
	}); err == nil {
		t.Fatal("a failed refresh was not reported")
	}
	got := gather(t, m, "halley_instances", "halley_timers_pending", "halley_outbox_pending", "halley_outbox_oldest_age_seconds")
	for _, want := range []string{"halley_instances{status=running} 7", "halley_instances{status=failed} 2", "halley_instances{status=completed} 0",
		"halley_timers_pending{} 3", "halley_outbox_pending{} 4", "halley_outbox_oldest_age_seconds{} 30"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	clk.Advance(41 * time.Second)
	if got := gather(t, m, "halley_instances", "halley_timers_pending", "halley_outbox_pending", "halley_outbox_oldest_age_seconds"); got != "" {
		t.Errorf("stale gauges still exported:\n%s", got)
	}
}

// Readiness pings each check at scrape time.
func TestReadiness(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	m.Readiness(map[string]telemetry.Pinger{"database": pinger{}, "redis": pinger{errors.New("refused")}})
	got := gather(t, m, "halley_ready")
	for _, want := range []string{"halley_ready{check=database} 1", "halley_ready{check=redis} 0"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

type pinger struct{ err error }

func (p pinger) Ping(context.Context) error { return p.err }

// The step cache's counters are the store's, read at each scrape.
func TestStepCacheCounters(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	hits, stale := int64(7), int64(2)
	m.StepCache(func() (int64, int64) { return hits, stale })
	got := gather(t, m, "halley_step_cache_hits_total", "halley_step_cache_stale_total")
	for _, want := range []string{"halley_step_cache_hits_total{} 7", "halley_step_cache_stale_total{} 2"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	hits = 9
	if got := gather(t, m, "halley_step_cache_hits_total"); !strings.Contains(got, "halley_step_cache_hits_total{} 9\n") {
		t.Errorf("after more hits:\n%s", got)
	}
}

// How the step groups ran is the store's count, read at each scrape, one series per way.
func TestGroupStatementCounters(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	kept, prepared, text := int64(90), int64(4), int64(6)
	m.GroupStatements(func() (int64, int64, int64) { return kept, prepared, text })
	got := gather(t, m, "halley_db_group_statements_total")
	for _, want := range []string{`halley_db_group_statements_total{as=kept} 90`, `halley_db_group_statements_total{as=prepared} 4`,
		`halley_db_group_statements_total{as=text} 6`} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	kept = 91
	if got := gather(t, m, "halley_db_group_statements_total"); !strings.Contains(got, `halley_db_group_statements_total{as=kept} 91`+"\n") {
		t.Errorf("after one more:\n%s", got)
	}
}
