package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// update runs fn on a locked instance in a fresh step, and returns the instance afterwards. A step that needs
// reads which must not happen inside the transaction (see reads) is rolled back, the reads are done with no
// transaction open, and the step runs again with their answers.
func (e *Engine) update(ctx context.Context, tenant, instanceID, actor string, fn func(s *step) error) (*model.Work, error) {
	rd := newReads()
	for round := 0; ; round++ {
		var done *model.Work
		err := e.updateInstance(ctx, tenant, instanceID, func(w *model.Work) error {
			c, err := e.compiledIn(ctx, rd, tenant, w.Instance.Template, w.Instance.Version)
			if err != nil {
				return err
			}
			s := e.newStep(ctx, w, c, actor)
			s.reads = rd
			err = fn(s)
			if len(rd.pending) > 0 {
				return errNeedRead // whatever the step did without the answers is rolled back
			}
			if err != nil {
				return err
			}
			done = w
			return nil
		})
		if errors.Is(err, model.ErrStaleRead) && round < maxReadRounds {
			rd = newReads() // something read outside the transaction was taken meanwhile: read everything again
			continue
		}
		if errors.Is(err, errNeedRead) {
			if round >= maxReadRounds {
				return nil, fmt.Errorf("engine: instance %s: the step still needs reads after %d rounds", instanceID, round+1)
			}
			if err := rd.fetch(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		e.committed(done)
		return done, nil
	}
}

// updateInstance runs fn on the locked instance like the store's UpdateInstance, in a group unless group commit is off.
// The first step of a request made with an Idempotency-Key carries the key's fence (model.IdempotencyFence).
func (e *Engine) updateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) (err error) {
	if f := model.IdempotencyFenceFrom(ctx); f != nil && !f.Spent() {
		inner := fn
		fn = func(w *model.Work) error {
			if err := inner(w); err != nil {
				return err
			}
			w.Fence = f
			return nil
		}
		defer func() {
			if err == nil {
				f.Use()
			}
		}()
	}
	if a := model.AuditFrom(ctx); a != nil {
		fn = audited(a, fn)
		defer func() {
			if err == nil {
				a.Stage()
				a.Committed()
			}
		}()
	}
	if e.group == nil {
		return e.store.UpdateInstance(ctx, tenant, id, fn)
	}
	st := &groupStep{ctx: ctx, tenant: tenant, id: id, fn: fn, done: make(chan error, 1)}
	e.group.submit(st)
	err = <-st.done
	if errors.Is(err, errGroupFailed) {
		return e.store.UpdateInstance(ctx, tenant, id, fn)
	}
	return err
}

// createInstance stores a started instance like the store's CreateInstance, in a group unless group commit is off.
func (e *Engine) createInstance(ctx context.Context, w *model.Work) (err error) {
	if f := model.IdempotencyFenceFrom(ctx); f != nil && !f.Spent() {
		w.Fence = f
		defer func() {
			if err == nil {
				f.Use()
			}
		}()
	}
	if a := model.AuditFrom(ctx); a != nil {
		// A start recorded as a change (an admin's override_trigger): its target is the new instance.
		if a.Target == "" {
			a.Target = w.Instance.ID
		}
		a.Fill(nil, auditState(w.Instance))
		w.Audit = a
		defer func() {
			if err == nil {
				a.Stage()
				a.Committed()
			}
		}()
	}
	if e.group == nil {
		return e.store.CreateInstance(ctx, w)
	}
	st := &groupStep{ctx: ctx, tenant: w.Instance.TenantID, id: w.Instance.ID, create: w, done: make(chan error, 1)}
	e.group.submit(st)
	err = <-st.done
	if errors.Is(err, errGroupFailed) {
		return e.store.CreateInstance(ctx, w)
	}
	return err
}

// audited makes a step write the request's audit entry (model.WithAudit: an admin's jump, a terminate) with its
// other writes, in its transaction, with the instance's status and active nodes before and after the step.
func audited(a *model.AuditEntry, fn func(w *model.Work) error) func(w *model.Work) error {
	return func(w *model.Work) error {
		before := auditState(w.Instance)
		if err := fn(w); err != nil {
			return err
		}
		a.SetBefore(before)
		a.SetAfter(auditState(w.Instance))
		w.Audit = a
		return nil
	}
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
	if len(w.Outbox) > 0 {
		e.outbox.Notify()
	}
	if w.Instance.Ended() {
		e.mu.Lock()
		ws := e.waiters[w.Instance.ID]
		delete(e.waiters, w.Instance.ID)
		e.mu.Unlock()
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
