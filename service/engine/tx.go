package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// The transaction plumbing of a step. A public action (tasks.go, instances.go, moves.go, ...) hands update an
// action, a function of the step; update makes a stepTx, whose apply the store calls inside the instance's
// transaction (alone, or in a group: group.go), and after the commit tells the rest of the process (committed).

// action is what a public method does in a step, on the instance locked and loaded.
type action func(s *step) error

// stepTx is one step of one instance through its transaction: the store calls apply under the row lock, again
// after a deadlock, and update runs it again after reads outside the transaction. done is the work as written.
type stepTx struct {
	e        *Engine
	ctx      context.Context
	name     string // what the step does (StepReport.Action)
	tenant   string
	instance string
	actor    string
	act      action
	reads    *reads
	// fence and audit are the request's idempotency fence (its first step only) and audit entry: written with
	// the work, used once it committed.
	fence *model.IdempotencyFence
	audit *model.AuditEntry
	done  *step // the step whose work the store wrote
}

// update runs act on the locked instance in a step of its own and returns the work as committed. A step that needs
// reads which must not happen inside the transaction (see reads) is rolled back, the reads are done with no
// transaction open, and the step runs again with their answers.
func (e *Engine) update(ctx context.Context, name, tenant, instanceID, actor string, act action) (*model.Work, error) {
	t := &stepTx{e: e, ctx: ctx, name: name, tenant: tenant, instance: instanceID, actor: actor, act: act, reads: newReads(),
		audit: model.AuditFrom(ctx)}
	if f := model.IdempotencyFenceFrom(ctx); f != nil && !f.Spent() {
		t.fence = f // the first step of a request made with an Idempotency-Key carries the key's fence
	}
	began := time.Now()
	for round := 0; ; round++ {
		err := e.updateInstance(ctx, tenant, instanceID, t.apply)
		switch {
		case errors.Is(err, model.ErrStaleRead) && round < maxReadRounds:
			t.reads = newReads() // something read outside the transaction was taken meanwhile: read everything again
			continue
		case errors.Is(err, errNeedRead) && round < maxReadRounds:
			if err := t.reads.fetch(ctx); err != nil {
				return nil, t.ended(began, err)
			}
			continue
		case errors.Is(err, errNeedRead):
			return nil, t.ended(began, fmt.Errorf("engine: instance %s: the step still needs reads after %d rounds", instanceID, round+1))
		case err != nil:
			return nil, t.ended(began, err)
		}
		if t.fence != nil {
			t.fence.Use()
		}
		if t.audit != nil {
			t.audit.Stage()
			t.audit.Committed()
		}
		e.committed(t.done.w)
		return t.done.w, t.ended(began, nil)
	}
}

// ended tells the engine's observer that the step committed (err nil) or failed, and returns err.
func (t *stepTx) ended(began time.Time, err error) error {
	var done *step
	if err == nil {
		done = t.done
	}
	return t.e.stepEnded(t.ctx, t.name, t.tenant, t.instance, began, done, err)
}

// apply runs the step on a work the store loaded under the instance's row lock; it is the store's fn. A panic
// becomes the step's error: apply may run on a group leader, on no request's goroutine.
func (t *stepTx) apply(w *model.Work) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: step of instance %s panicked: %v\n%s", w.Instance.ID, p, debug.Stack())
		}
	}()
	c, err := t.e.compiledIn(t.ctx, t.reads, t.tenant, w.Instance.Template, w.Instance.Version)
	if err != nil {
		return err
	}
	var before map[string]any
	if t.audit != nil {
		before = auditState(w.Instance)
	}
	s := t.e.newStep(t.ctx, w, c, t.actor)
	s.reads = t.reads
	err = t.act(s)
	if len(t.reads.pending) > 0 {
		return errNeedRead // whatever the step did without the answers is rolled back
	}
	if err != nil {
		return err
	}
	if t.fence != nil {
		w.Fence = t.fence
	}
	if t.audit != nil {
		// The request's audit entry (model.WithAudit: an admin's jump, a terminate) is written with the step, with
		// the instance's status and active nodes before and after it.
		t.audit.SetBefore(before)
		t.audit.SetAfter(auditState(w.Instance))
		w.Audit = t.audit
	}
	t.done = s
	return nil
}

// updateInstance runs fn on the locked instance like the store's UpdateInstance, in a group unless group commit
// is off; a group whose transaction failed as a whole has fn run again alone.
func (e *Engine) updateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	if e.group == nil || inDispatch(ctx) { // an outbox handler's step joins the dispatch's transaction
		return e.store.UpdateInstance(ctx, tenant, id, fn)
	}
	err := e.group.update(ctx, tenant, id, fn)
	if errors.Is(err, errGroupFailed) {
		return e.store.UpdateInstance(ctx, tenant, id, fn)
	}
	return err
}

// createInstance stores a started instance like the store's CreateInstance, in a group unless group commit is off.
// The request's idempotency fence and audit entry are written with it.
func (e *Engine) createInstance(ctx context.Context, w *model.Work) error {
	fence, audit := model.IdempotencyFenceFrom(ctx), model.AuditFrom(ctx)
	if fence != nil && !fence.Spent() {
		w.Fence = fence
	}
	if audit != nil {
		// A start recorded as a change (an admin's override_trigger): its target is the new instance.
		if audit.Target == "" {
			audit.Target = w.Instance.ID
		}
		audit.Fill(nil, auditState(w.Instance))
		w.Audit = audit
	}
	var err error
	if e.group == nil {
		err = e.store.CreateInstance(ctx, w)
	} else if err = e.group.create(ctx, w); errors.Is(err, errGroupFailed) {
		err = e.store.CreateInstance(ctx, w)
	}
	if err != nil {
		return err
	}
	if w.Fence != nil {
		w.Fence.Use()
	}
	if audit != nil {
		audit.Stage()
		audit.Committed()
	}
	return nil
}

// auditState is what the audit log shows of an instance.
func auditState(inst *model.Instance) map[string]any {
	active := []string{}
	for id, n := range inst.State.Nodes {
		if n.Active() {
			active = append(active, id)
		}
	}
	sort.Strings(active)
	return map[string]any{"status": inst.Status, "active_nodes": active}
}

// committed runs after a transaction committed: hand the runs leased to this process's executor over, stop those
// of its runs the step closed, wake the dispatcher and whoever waits for the instance's end.
func (e *Engine) committed(w *model.Work) {
	if len(w.NewPluginRuns) > 0 {
		var mine []*model.PluginRun
		for _, r := range w.NewPluginRuns {
			if r.Status == model.RunRunning && r.LeaseOwner != "" {
				mine = append(mine, r)
			}
		}
		if len(mine) > 0 {
			e.plugins.handOver(mine)
		}
	}
	e.plugins.stopClosed(w.RunUpdates) // after the hand-over: a run queued and closed in one step is dropped
	for _, c := range w.Children {
		e.committed(c) // instances the step started (subprocess nodes)
	}
	if len(w.Outbox) > 0 {
		e.outbox.Notify()
	}
	if len(w.Notifications) > 0 || len(w.NotificationDeliveries) > 0 {
		e.inStep.Committed(w)
	}
	if w.Instance.Ended() {
		e.mu.Lock()
		ws := e.waiters[w.Instance.ID]
		delete(e.waiters, w.Instance.ID)
		e.mu.Unlock()
		if len(ws) == 0 && w.Instance.State.Awaited && e.ends != nil {
			// Its sync start waits on another replica. Nobody waits for an instance that is not awaited, nor on
			// another replica for one whose wait is here (a start waits where it was taken): those ends are not
			// published, which saves every replica a Redis message an end.
			e.ends.Publish(w.Instance.ID)
		}
		if len(ws) > 0 {
			end := *w.Instance // as committed; the waiters only read it
			for _, x := range ws {
				x.inst = &end
				close(x.done)
			}
		}
	}
}

// maxReadRounds bounds how often one step is run again for reads (each round answers at least one more).
const maxReadRounds = 16

// reads holds the answers of reads a step makes outside its transaction: the directory (roles, users,
// departments). Inside UpdateInstance the transaction holds a pooled connection and the instance row lock; a
// read on another connection would wait for a free one, and with every connection held by such a transaction
// (more concurrent steps than the pool has connections) none would ever come. So a step that needs an answer it
// does not have records the read and fails with errNeedRead; update does the reads with no transaction open and
// runs the step again (steps are deterministic given the instance and the answers). A step outside any
// transaction (StartCompiled) reads at once.
type reads struct {
	answers map[string]readAnswer
	pending map[string]func(ctx context.Context) (any, error)
}

type readAnswer struct {
	v   any
	err error
}

func newReads() *reads {
	return &reads{answers: map[string]readAnswer{}, pending: map[string]func(ctx context.Context) (any, error){}}
}

var errNeedRead = errors.New("engine: the step needs reads outside its transaction")

// read returns the answer of a read keyed by key (see reads).
func (s *step) read(key string, fn func(ctx context.Context) (any, error)) (any, error) {
	return s.reads.get(s.ctx, key, fn)
}

// get answers a read from what was fetched, or records it and returns errNeedRead; with rd nil (no transaction
// open) it reads at once.
func (rd *reads) get(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	if rd == nil {
		return fn(ctx)
	}
	if a, ok := rd.answers[key]; ok {
		return a.v, a.err
	}
	rd.pending[key] = fn
	return nil, errNeedRead
}

func loadedKey(tenant, key string, version int) string {
	return tenant + "\x00" + key + "\x00" + strconv.Itoa(version)
}

// compiledIn returns an instance's compiled version inside its transaction. The template service caches
// compiled versions for good (they are immutable), so once a version was loaded in this process it is
// answered from memory; the first time, it is read outside the transaction like any other read.
func (e *Engine) compiledIn(ctx context.Context, rd *reads, tenant, key string, version int) (*template.Compiled, error) {
	ck := loadedKey(tenant, key, version)
	if _, ok := e.loaded.Load(ck); ok {
		return e.templates.Compiled(ctx, tenant, key, version)
	}
	v, err := rd.get(ctx, "template\x00"+ck, func(ctx context.Context) (any, error) { return e.templates.Compiled(ctx, tenant, key, version) })
	if err != nil {
		return nil, err
	}
	e.loaded.Store(ck, true)
	return v.(*template.Compiled), nil
}

// fetch does the pending reads. A domain answer (e.g. ENOTFOUND) is kept for the step to judge; any other error
// fails the action, as a database error inside the transaction would.
func (rd *reads) fetch(ctx context.Context) error {
	for k, fn := range rd.pending {
		v, err := fn(ctx)
		if err != nil && model.ErrorKind(err) == model.EINTERNAL {
			return err
		}
		rd.answers[k] = readAnswer{v: v, err: err}
	}
	clear(rd.pending)
	return nil
}
