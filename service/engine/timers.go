package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/scheduler"
)

// timerStore returns the store's timer side.
func (e *Engine) timerStore() (model.TimerStore, error) {
	if ts, ok := e.store.(model.TimerStore); ok {
		return ts, nil
	}
	return nil, fmt.Errorf("engine: the store does not keep timers")
}

// SetCronHandler sets who handles timers that belong to no instance (crontab starts, the trigger service).
func (e *Engine) SetCronHandler(h func(ctx context.Context, t *model.Timer) error) { e.cron = h }

// HandleTimers is the scheduler's handler: it fires each due timer whose row is still pending. A timer whose
// row is gone, fired or cancelled is acknowledged without effect, so a re-delivered timer fires once.
func (e *Engine) HandleTimers(ctx context.Context, batch []scheduler.Due) []error {
	errs := make([]error, len(batch))
	ts, err := e.timerStore()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	ids := make([]string, len(batch))
	for i, d := range batch {
		ids[i] = d.ID
	}
	rows, err := ts.GetTimers(ctx, ids)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	byID := make(map[string]*model.Timer, len(rows))
	for _, t := range rows {
		byID[t.ID] = t
	}
	for i, d := range batch {
		t := byID[d.ID]
		if t == nil || t.Status != model.TimerPending {
			continue
		}
		if t.InstanceID == "" {
			if e.cron == nil {
				errs[i] = fmt.Errorf("engine: no handler for timer %s (%s)", t.ID, t.Kind)
				continue
			}
			errs[i] = e.cron(ctx, t)
			continue
		}
		if err := e.FireTimer(ctx, t.TenantID, t); err != nil {
			e.log.Error("engine: timer failed; it will be retried", "timer_id", t.ID, "instance_id", t.InstanceID, "err", err)
			errs[i] = err
		}
	}
	return errs
}

// TimerOutbox returns the outbox handlers that arm and cancel timers in the scheduler.
func TimerOutbox(s scheduler.Scheduler) (arm, cancel outbox.Handler) {
	arm = func(ctx context.Context, items []model.OutboxItem) error {
		its := make([]scheduler.Item, 0, len(items))
		for _, it := range items {
			var p struct {
				Due int64 `json:"due"`
			}
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				return fmt.Errorf("engine: bad timer.arm payload for %s: %w", it.Ref, err)
			}
			its = append(its, scheduler.Item{ID: it.Ref, Due: time.UnixMilli(p.Due)})
		}
		return s.Schedule(ctx, its...)
	}
	cancel = func(ctx context.Context, items []model.OutboxItem) error {
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.Ref
		}
		return s.Cancel(ctx, ids...)
	}
	return arm, cancel
}

// RearmTimers makes sure every pending timer row is in the scheduler (after a start, or when Redis lost its
// data). Timers the scheduler holds already, or has leased to a handler, are left alone.
func (e *Engine) RearmTimers(ctx context.Context, s scheduler.Scheduler) (int, error) {
	ts, err := e.timerStore()
	if err != nil {
		return 0, err
	}
	added, after := 0, ""
	for {
		rows, err := ts.PendingTimers(ctx, after, 2000)
		if err != nil {
			return added, err
		}
		if len(rows) == 0 {
			return added, nil
		}
		items := make([]scheduler.Item, len(rows))
		for i, t := range rows {
			items[i] = scheduler.Item{ID: t.ID, Due: t.DueAt}
		}
		n, err := s.Ensure(ctx, items...)
		if err != nil {
			return added, err
		}
		added += n
		after = rows[len(rows)-1].ID
	}
}
