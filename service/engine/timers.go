package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
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
//
// The timer rows of the batch are read in one query. Timers of instances are fired together: one transaction
// per tenant and round (UpdateInstances) locks their instances, applies each timer and marks the timer rows
// fired, so the statements and the commit are paid per batch rather than per timer. A round holds at most one
// timer per instance; a second timer of the same instance goes to the next round, which sees the first one's
// effect. Each timer keeps its own outcome: one that fails is left out of the transaction and returned for
// retry, the others commit. A round whose transaction fails as a whole falls back to firing each of its timers
// alone. Timers of no instance (crontab starts) go to the cron handler.
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
	var fires []timerFire
	seen := make(map[string]bool, len(batch))
	for i, d := range batch {
		t := byID[d.ID]
		if t == nil || t.Status != model.TimerPending || seen[d.ID] {
			continue // a second copy of one id in a batch is acknowledged with the first
		}
		seen[d.ID] = true
		if t.InstanceID == "" {
			if e.cron == nil {
				errs[i] = fmt.Errorf("engine: no handler for timer %s (%s)", t.ID, t.Kind)
				continue
			}
			errs[i] = e.cron(ctx, t)
			continue
		}
		fires = append(fires, timerFire{pos: i, t: t})
	}
	bs, ok := e.store.(model.BatchInstanceStore)
	if !ok || e.noBatchTimers {
		for _, f := range fires {
			errs[f.pos] = e.fireOne(ctx, f.t)
		}
		return errs
	}
	e.fireTimers(ctx, bs, fires, errs)
	return errs
}

// timerFire is a timer to fire and its place in the scheduler's batch.
type timerFire struct {
	pos int
	t   *model.Timer
}

// timerGroupMax bounds the instances one firing transaction locks (a scheduler batch is at most 4,096).
const timerGroupMax = 256

// fireTimers fires timers of instances in rounds (see HandleTimers) and puts each timer's outcome in errs.
func (e *Engine) fireTimers(ctx context.Context, bs model.BatchInstanceStore, fires []timerFire, errs []error) {
	var tenants []string
	byTenant := map[string][]timerFire{}
	for _, f := range fires {
		if _, ok := byTenant[f.t.TenantID]; !ok {
			tenants = append(tenants, f.t.TenantID)
		}
		byTenant[f.t.TenantID] = append(byTenant[f.t.TenantID], f)
	}
	for _, tenant := range tenants {
		todo := byTenant[tenant]
		for len(todo) > 0 {
			// A round: the first timer (in due order) of each instance not yet in it, up to timerGroupMax.
			in := make(map[string]bool, min(len(todo), timerGroupMax))
			var round, rest []timerFire
			for _, f := range todo {
				if len(round) < timerGroupMax && !in[f.t.InstanceID] {
					in[f.t.InstanceID] = true
					round = append(round, f)
					continue
				}
				rest = append(rest, f)
			}
			e.fireRound(ctx, bs, tenant, round, errs)
			todo = rest
		}
	}
}

// fireRound fires timers of distinct instances of one tenant in one transaction. A timer whose step needs reads
// outside the transaction (a template compiled for the first time in this process) runs again in a further
// transaction once they are done, like update does for one instance.
func (e *Engine) fireRound(ctx context.Context, bs model.BatchInstanceStore, tenant string, round []timerFire, errs []error) {
	answers := map[string]readAnswer{} // shared by the round's steps: they often need the same template
	todo := round
	for attempt := 0; len(todo) > 0; attempt++ {
		byInst := make(map[string]timerFire, len(todo))
		ids := make([]string, len(todo))
		for i, f := range todo {
			byInst[f.t.InstanceID] = f
			ids[i] = f.t.InstanceID
		}
		rds := make(map[string]*reads, len(todo))
		done := make(map[string]*model.Work, len(todo))
		res, err := bs.UpdateInstances(ctx, tenant, ids, func(w *model.Work) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("engine: timer of instance %s panicked: %v\n%s", w.Instance.ID, p, debug.Stack())
				}
			}()
			f := byInst[w.Instance.ID]
			rd := &reads{answers: answers, pending: map[string]func(ctx context.Context) (any, error){}}
			rds[w.Instance.ID] = rd
			c, err := e.compiledIn(ctx, rd, tenant, w.Instance.Template, w.Instance.Version)
			if err == nil {
				r := e.newRun(ctx, w, c, model.ActorSystem)
				r.reads = rd
				if r.inst.Ended() {
					w.FiredTimers = append(w.FiredTimers, f.t.ID)
				} else {
					err = r.fire(f.t)
				}
			}
			if len(rd.pending) > 0 {
				return errNeedRead // whatever the step did without the answers is left out
			}
			if err != nil {
				return err
			}
			done[w.Instance.ID] = w
			return nil
		})
		if err != nil {
			// The transaction failed as a whole (a database error, a queued message taken meanwhile): nothing
			// was written; each timer is fired alone, with its own retries.
			e.log.Warn("engine: firing timers together failed; firing them one by one", "timers", len(todo), "err", err)
			for _, f := range todo {
				errs[f.pos] = e.fireOne(ctx, f.t)
			}
			return
		}
		var again []timerFire
		need := &reads{answers: answers, pending: map[string]func(ctx context.Context) (any, error){}}
		for _, f := range todo {
			err := res[f.t.InstanceID]
			switch {
			case err == nil:
				e.committed(done[f.t.InstanceID])
			case errors.Is(err, errNeedRead) && attempt < maxReadRounds:
				maps.Copy(need.pending, rds[f.t.InstanceID].pending)
				again = append(again, f)
			case model.IsKind(err, model.ENOTFOUND):
				// The instance is gone (purged): nothing to fire.
			default:
				e.log.Error("engine: timer failed; it will be retried", "timer_id", f.t.ID, "instance_id", f.t.InstanceID, "err", err)
				errs[f.pos] = err
			}
		}
		if len(again) > 0 {
			if err := need.fetch(ctx); err != nil {
				for _, f := range again {
					errs[f.pos] = err
				}
				return
			}
		}
		todo = again
	}
}

// fireOne fires one timer in a transaction of its own.
func (e *Engine) fireOne(ctx context.Context, t *model.Timer) error {
	err := e.FireTimer(ctx, t.TenantID, t)
	if err != nil {
		e.log.Error("engine: timer failed; it will be retried", "timer_id", t.ID, "instance_id", t.InstanceID, "err", err)
	}
	return err
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
// data). Timers the scheduler holds already, or has leased to a handler, are left alone. Rows armed less than
// grace ago are skipped: their timer.arm outbox row may not have reached the scheduler yet, and re-adding them
// would be a false "missing" (the periodic job passes a minute; at start-up, 0 re-arms everything).
func (e *Engine) RearmTimers(ctx context.Context, s scheduler.Scheduler, grace time.Duration) (int, error) {
	ts, err := e.timerStore()
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-grace) // the store stamps created_at with the wall clock, not the engine's clock
	added, after := 0, ""
	for {
		rows, err := ts.PendingTimers(ctx, after, 2000)
		if err != nil {
			return added, err
		}
		if len(rows) == 0 {
			return added, nil
		}
		items := make([]scheduler.Item, 0, len(rows))
		for _, t := range rows {
			if grace > 0 && t.CreatedAt.After(cutoff) {
				continue
			}
			items = append(items, scheduler.Item{ID: t.ID, Due: t.DueAt})
		}
		if len(items) > 0 {
			n, err := s.Ensure(ctx, items...)
			if err != nil {
				return added, err
			}
			added += n
		}
		after = rows[len(rows)-1].ID
	}
}
