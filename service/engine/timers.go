package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/scheduler"
)

// TimerKinds are the kinds of timers the engine fires (FireTimers): the composition root routes them to it
// (scheduler.Handlers). A kind added to run.fire belongs here too.
var TimerKinds = []string{model.TimerDelay, model.TimerCallbackTimeout, model.TimerApprovalTimeout, model.TimerRetry, model.TimerPluginTimeout}

var _ scheduler.TimerHandler = (*Engine)(nil)

// FireTimers fires due timers of instances (scheduler.Route hands them over: pending rows of the engine's kinds,
// each id once). Timers of node visits that are over do nothing but get marked fired, so a re-delivered timer
// fires once.
//
// Timers are fired together: one transaction per tenant and round (UpdateInstances) locks their instances,
// applies each timer and marks the timer rows fired, so the statements and the commit are paid per batch rather
// than per timer. A round holds at most one timer per instance; a second timer of the same instance goes to the
// next round, which sees the first one's effect. Each timer keeps its own outcome: one that fails is left out of
// the transaction and returned for retry, the others commit. A round whose transaction fails as a whole falls
// back to firing each of its timers alone.
func (e *Engine) FireTimers(ctx context.Context, timers []*model.Timer) []error {
	ctx = model.ForTimerFiring(ctx) // on the connections the store keeps for timers
	if e.group != nil {
		e.group.firing.Add(1) // step groups yield while timers fire (group.go)
		defer e.group.firing.Add(-1)
	}
	errs := make([]error, len(timers))
	fires := make([]timerFire, 0, len(timers))
	for i, t := range timers {
		if t.InstanceID == "" {
			errs[i] = fmt.Errorf("engine: timer %s (%s) belongs to no instance", t.ID, t.Kind)
			continue
		}
		fires = append(fires, timerFire{pos: i, t: t})
	}
	if e.noBatchTimers {
		for _, f := range fires {
			errs[f.pos] = e.fireOne(ctx, f.t)
		}
		return errs
	}
	e.fireTimers(ctx, fires, errs)
	return errs
}

// fireTimer handles a due timer of an instance (the scheduler calls it). Timers of node visits that are over, or
// already handled, do nothing.
func (e *Engine) fireTimer(ctx context.Context, tenant string, t *model.Timer) error {
	_, err := e.update(ctx, "timer", tenant, t.InstanceID, model.ActorSystem, firing(t))
	if model.IsKind(err, model.ENOTFOUND) {
		return nil
	}
	return err
}

// firing is the action of a step that fires timer t: a timer of an ended instance is only marked fired.
func firing(t *model.Timer) action {
	return func(s *step) error {
		if s.inst.Ended() {
			s.w.FiredTimers = append(s.w.FiredTimers, t.ID)
			return nil
		}
		return s.fire(t)
	}
}

// timerFire is a timer to fire and its place in the scheduler's batch.
type timerFire struct {
	pos int
	t   *model.Timer
}

// timerGroupMax bounds the instances one firing transaction locks (a scheduler batch is at most 4,096).
const timerGroupMax = 256

// fireTimers fires timers of instances in rounds (see FireTimers) and puts each timer's outcome in errs.
func (e *Engine) fireTimers(ctx context.Context, fires []timerFire, errs []error) {
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
			e.fireRound(ctx, tenant, round, errs)
			todo = rest
		}
	}
}

// fireRound fires timers of distinct instances of one tenant in one transaction. A timer whose step needs reads
// outside the transaction (a template compiled for the first time in this process) runs again in a further
// transaction once they are done, like update does for one instance.
func (e *Engine) fireRound(ctx context.Context, tenant string, round []timerFire, errs []error) {
	answers := map[string]readAnswer{} // shared by the round's steps: they often need the same template
	todo := round
	for attempt := 0; len(todo) > 0; attempt++ {
		txs := make(stepTxs, len(todo))
		ids := make([]string, len(todo))
		for i, f := range todo {
			txs[f.t.InstanceID] = &stepTx{e: e, ctx: ctx, name: "timer", tenant: tenant, instance: f.t.InstanceID, actor: model.ActorSystem,
				act: firing(f.t), reads: &reads{answers: answers, pending: map[string]func(ctx context.Context) (any, error){}}}
			ids[i] = f.t.InstanceID
		}
		began := time.Now()
		res, err := e.store.UpdateInstances(ctx, tenant, ids, txs.apply)
		if err != nil {
			// The transaction failed as a whole (a database error, a queued message taken meanwhile): nothing
			// was written; each timer is fired alone, with its own retries.
			e.log.WarnContext(ctx, "engine: firing timers together failed; firing them one by one", "timers", len(todo), "err", err)
			for _, f := range todo {
				errs[f.pos] = e.fireOne(ctx, f.t)
			}
			return
		}
		var again []timerFire
		need := &reads{answers: answers, pending: map[string]func(ctx context.Context) (any, error){}}
		for _, f := range todo {
			t, err := txs[f.t.InstanceID], res[f.t.InstanceID]
			switch {
			case err == nil:
				e.committed(t.done.w)
				_ = t.ended(began, nil)
			case errors.Is(err, errNeedRead) && attempt < maxReadRounds:
				maps.Copy(need.pending, t.reads.pending)
				again = append(again, f)
			case model.IsKind(err, model.ENOTFOUND):
				// The instance is gone (purged): nothing to fire.
			default:
				e.log.ErrorContext(ctx, "engine: timer failed; it will be retried", "timer_id", f.t.ID, "instance_id", f.t.InstanceID, "err", err)
				errs[f.pos] = t.ended(began, err)
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

// stepTxs are the steps of a batch by instance id; apply runs the work's own (the store's fn for the batch).
type stepTxs map[string]*stepTx

func (ts stepTxs) apply(w *model.Work) error { return ts[w.Instance.ID].apply(w) }

// fireOne fires one timer in a transaction of its own.
func (e *Engine) fireOne(ctx context.Context, t *model.Timer) error {
	err := e.fireTimer(ctx, t.TenantID, t)
	if err != nil {
		e.log.ErrorContext(ctx, "engine: timer failed; it will be retried", "timer_id", t.ID, "instance_id", t.InstanceID, "err", err)
	}
	return err
}
