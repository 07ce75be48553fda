package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// StartParams are what a start by hand gives (POST /instances).
type StartParams struct {
	Template      string
	Version       int // 0: the latest published version
	Context       json.RawMessage
	CorrelationID string
	Title         string
	// OverrideTrigger lets an admin start a template whose start trigger is not manual (its form, API or crontab
	// trigger is skipped); the history records it.
	OverrideTrigger bool
	// Initiator starts the instance on behalf of this user (API tokens only); the history records the token.
	Initiator string
}

// checkStart validates the fields every start shares and returns the context as a compact JSON object.
func checkStart(ctxDoc json.RawMessage, corr, title string) (json.RawMessage, error) {
	if len(corr) > 255 {
		return nil, model.CodedError(model.EINVALID, "invalid_correlation_id", "correlation_id must be at most 255 characters")
	}
	if len(title) > 500 {
		return nil, model.CodedError(model.EINVALID, "invalid_title", "title must be at most 500 characters")
	}
	doc := json.RawMessage(strings.TrimSpace(string(ctxDoc)))
	if len(doc) == 0 || string(doc) == "null" {
		return json.RawMessage("{}"), nil
	}
	if err := model.CheckDocumentDepth("context", doc); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, model.CodedError(model.EINVALID, "invalid_context", "context must be a JSON object")
	}
	b, _ := json.Marshal(m)
	return b, nil
}

// Start starts an instance of a published template (latest version unless one is given). Only templates started
// by hand (trigger manual) start here: the others have a trigger of their own, with its own checks (a form's
// members, an API trigger's credentials and IP allow-list), that this route must not skip; an admin may override
// with override_trigger (403 trigger_required otherwise). An API token may start on behalf of a user, who is then
// the initiator; the history names the token.
func (e *Engine) Start(ctx context.Context, actor *model.Principal, req StartParams) (*InstanceView, error) {
	if req.Template == "" {
		return nil, model.CodedError(model.EINVALID, "invalid_template", "template is required")
	}
	if req.Version < 0 {
		return nil, model.CodedError(model.EINVALID, "invalid_version", "version must be a positive number")
	}
	doc, err := checkStart(req.Context, req.CorrelationID, req.Title)
	if err != nil {
		return nil, err
	}
	if req.OverrideTrigger && !actor.IsAdmin() {
		return nil, model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may override a template's start trigger")
	}
	opts := startOptions{secrets: systemPrincipal(actor)}
	initiator := actor.Username
	if req.Initiator != "" {
		if initiator, err = e.onBehalfOf(ctx, actor, req.Initiator); err != nil {
			return nil, err
		}
		opts.actor = actor.Username
		opts.info = map[string]any{"on_behalf_of": initiator}
	}
	c, err := e.templates.Compiled(ctx, actor.TenantID, req.Template, req.Version)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) && req.Version == 0 {
			return nil, model.CodedError(model.ENOTFOUND, "template_not_found", "template %q not found", req.Template)
		}
		return nil, err
	}
	if c.Hidden {
		// A dynamic linear process's template ran once; starting it again would also show its steps to anyone.
		return nil, model.CodedError(model.ENOTFOUND, "template_not_found", "template %q not found", req.Template)
	}
	if kind := c.Def.Start().Trigger.Kind; kind != "" && kind != model.TriggerManual {
		if !req.OverrideTrigger {
			return nil, model.CodedError(model.EFORBIDDEN, "trigger_required", "template %q starts through its %s trigger, not here", req.Template, kind).
				WithDetails(map[string]any{"trigger": kind})
		}
		if opts.info == nil {
			opts.info = map[string]any{}
		}
		// The audit reads this: who bypassed which trigger.
		opts.info["override_trigger"] = kind
	} else if a := model.AuditFrom(ctx); a != nil && req.OverrideTrigger {
		// override_trigger on a template started by hand bypasses nothing: no override to audit (as the history
		// records none).
		a.Discard()
	}
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), actor.TenantID, initiator, c, doc, req.CorrelationID, req.Title, opts)
}

// onBehalfOf checks a start on behalf of a user: only API tokens may, and the user must exist and be enabled.
func (e *Engine) onBehalfOf(ctx context.Context, actor *model.Principal, username string) (string, error) {
	if !actor.Token {
		return "", model.CodedError(model.EFORBIDDEN, "not_allowed", "only API tokens may start an instance on behalf of a user")
	}
	if err := model.ValidUsername(username); err != nil {
		return "", model.CodedError(model.EUNPROCESSABLE, "unknown_user", "initiator %q is not a user", username)
	}
	u, err := e.dir.GetUser(ctx, actor.TenantID, username)
	switch {
	case model.IsKind(err, model.ENOTFOUND):
		return "", model.CodedError(model.EUNPROCESSABLE, "unknown_user", "initiator %q is not a user", username)
	case err != nil:
		return "", err
	case u.Disabled:
		return "", model.CodedError(model.EUNPROCESSABLE, "user_disabled", "initiator %q is disabled", username)
	}
	return u.Username, nil
}

// systemPrincipal reports a caller that acts for systems: an admin or an API token. Only they see signed URLs
// (callback URLs) and resume system waits (callbacks, messages, bookmarks).
func systemPrincipal(actor *model.Principal) bool {
	return actor != nil && (actor.IsAdmin() || actor.Token)
}

// startOptions are what a start records besides its instance.
type startOptions struct {
	actor   string         // who started it, when not the initiator (an API token on behalf of a user)
	info    map[string]any // added to the data of the instance.started history item
	secrets bool           // the answer shows signed URLs (callback URLs): for admins and API tokens
	awaited bool           // a sync start waits for its end (model.InstanceState.Awaited)
}

// LinearParams are what a dynamic linear process is started with (POST /instances/linear).
type LinearParams struct {
	Title         string
	Steps         []template.LinearStep
	Context       json.RawMessage
	CorrelationID string
}

// StartLinear starts a dynamic linear process (动态线性流程): a hidden one-off version built from the steps.
func (e *Engine) StartLinear(ctx context.Context, actor *model.Principal, req LinearParams) (*InstanceView, error) {
	doc, err := checkStart(req.Context, req.CorrelationID, req.Title)
	if err != nil {
		return nil, err
	}
	c, err := e.templates.CreateLinear(ctx, actor, req.Title, req.Steps)
	if err != nil {
		return nil, err
	}
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), actor.TenantID, actor.Username, c, doc, req.CorrelationID, req.Title,
		startOptions{secrets: systemPrincipal(actor)})
}

// StartCompiled starts an instance of a compiled version for an initiator (triggers use it directly). Its answer
// shows no signed URLs: triggers answer anonymous callers and users.
func (e *Engine) StartCompiled(ctx context.Context, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string) (*InstanceView, error) {
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), tenant, initiator, c, doc, corr, title, startOptions{})
}

func (e *Engine) startCompiled(ctx context.Context, id, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string,
	opts startOptions) (*InstanceView, error) {
	if err := c.CheckFiles(doc); err != nil { // every way in starts here
		return nil, err
	}
	var titles map[string]string
	if title == "" {
		if plain, by, ok := e.titles(ctx, tenant, initiator, c, e.clock.Now(), doc); ok && plain != "" {
			title, titles = plain, by
		}
	}
	if title == "" {
		title = c.Name // the template's name reads better in an inbox than its key
	}
	if title == "" {
		title = c.Key
	}
	actor := opts.actor
	if actor == "" {
		actor = initiator
	}
	started := map[string]any{"template": c.Key, "version": c.Version}
	for k, v := range opts.info {
		started[k] = v
	}
	began := time.Now()
	for attempt := 0; ; attempt++ {
		// The first step runs outside any transaction (its reads are made at once) and is inserted with the new
		// instance.
		now := e.clock.Now().UTC()
		inst := &model.Instance{ID: id, TenantID: tenant, Template: c.Key, Version: c.Version, Title: title, TitleI18n: titles,
			Initiator: initiator, CorrelationID: corr, Context: doc, CreatedAt: now}
		inst.State.Awaited = opts.awaited
		w := &model.Work{Instance: inst}
		s := e.newStep(ctx, w, c, actor)
		err := s.start(started)
		if err == nil {
			err = e.createInstance(ctx, w)
		}
		if errors.Is(err, model.ErrStaleRead) && attempt < 3 {
			continue // a queued message it consumed was taken by another step: start again from fresh reads
		}
		if err != nil {
			return nil, e.stepEnded(ctx, "start", tenant, id, began, nil, err)
		}
		e.loaded.Store(loadedKey(tenant, c.Key, c.Version), true)
		e.committed(w)
		return e.view(inst, w.Tasks, opts.secrets), e.stepEnded(ctx, "start", tenant, id, began, s, nil)
	}
}

// start is an instance's first step: it starts and its start node activates (and as much follows as can).
func (s *step) start(started map[string]any) error {
	if err := s.moveInstance(model.MoveStart); err != nil {
		return err
	}
	s.history("instance.started", "", "", "", started)
	s.event("instance.started", "", nil)
	if err := s.pinSubprocesses(); err != nil { // subprocess.go
		return err
	}
	return s.activate(s.c.Def.Start().ID, model.MoveActivate)
}

// StartCompiledAndWait starts an instance like StartCompiled and, unless it ended in its first step, waits up to
// wait for its end (sync triggers). It listens for the end before the start commits, so an end committed by this
// process is seen without reading the instance again; ended reports whether it ended within wait. The instance
// returned is the one at the end (or at the deadline).
func (e *Engine) StartCompiledAndWait(ctx context.Context, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string,
	wait time.Duration) (*InstanceView, *model.Instance, error) {
	id := uuid.Must(uuid.NewV7()).String()
	x, cancel := e.ended(id)
	defer cancel()
	v, err := e.startCompiled(ctx, id, tenant, initiator, c, doc, corr, title, startOptions{awaited: wait > 0})
	if err != nil {
		return nil, nil, err
	}
	if v.Ended() || wait <= 0 {
		return v, nil, nil
	}
	wctx, cancelWait := context.WithTimeout(ctx, wait)
	defer cancelWait()
	inst, err := e.waitEnd(wctx, tenant, id, x, false)
	if err != nil {
		return nil, nil, err
	}
	return v, inst, nil
}

// Terminate ends a running instance (admin or initiator).
func (e *Engine) Terminate(ctx context.Context, actor *model.Principal, id, reason string) (*InstanceView, error) {
	return e.end(ctx, actor, id, reason, model.MoveTerminate)
}

// Withdraw ends a running instance on behalf of its initiator.
func (e *Engine) Withdraw(ctx context.Context, actor *model.Principal, id, reason string) (*InstanceView, error) {
	return e.end(ctx, actor, id, reason, model.MoveWithdraw)
}

func (e *Engine) end(ctx context.Context, actor *model.Principal, id, reason string, m model.Move) (*InstanceView, error) {
	if len(reason) > 4000 {
		return nil, model.CodedError(model.EINVALID, "invalid_reason", "reason must be at most 4000 characters")
	}
	w, err := e.update(ctx, string(m), actor.TenantID, id, actor.Username, func(s *step) error {
		switch {
		case m == model.MoveWithdraw && s.inst.Initiator != actor.Username:
			return model.CodedError(model.EFORBIDDEN, "not_initiator", "only the initiator may withdraw an instance")
		case m == model.MoveTerminate && s.inst.Initiator != actor.Username && !actor.IsAdmin():
			return model.CodedError(model.EFORBIDDEN, "not_allowed", "only an admin or the initiator may terminate an instance")
		case s.inst.Ended():
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is already %s", id, s.inst.Status)
		case m == model.MoveWithdraw || !actor.IsAdmin():
			// A child of a running parent is the parent's to end (subprocess.go): its initiator may not.
			if running, err := s.parentRunning(); err != nil || running {
				if err == nil {
					err = model.CodedError(model.ECONFLICT, "parent_running", "instance %s is a sub-process of %s, which is running: the parent decides",
						id, s.inst.State.Parent.InstanceID).WithDetails(map[string]any{"parent_instance_id": s.inst.State.Parent.InstanceID})
				}
				return err
			}
		}
		return s.finish(m, reason)
	})
	if err != nil {
		return nil, err
	}
	return e.view(w.Instance, w.Tasks, true), nil
}

// endWaiter is one wait for an instance's end committed by this process: done is closed after inst is set. heard
// is closed when the end bus hears of an end of the instance (on any replica) or loses its subscription; nil
// without a bus or while its subscription is down.
type endWaiter struct {
	done chan struct{}
	inst *model.Instance

	heard    <-chan struct{}
	unlisten func()
}

// listen (again) on the end bus; the waiter polls quickly while it cannot.
func (e *Engine) listen(id string, x *endWaiter) {
	if x.unlisten != nil {
		x.unlisten()
	}
	x.heard, x.unlisten = nil, nil
	if e.ends == nil {
		return
	}
	if heard, stop, ok := e.ends.Listen(id); ok {
		x.heard, x.unlisten = heard, stop
	}
}

// ended returns a waiter closed when this process commits the end of the instance, listening on the end bus for an
// end committed by another replica. Callers also poll: without a bus, or when it misses a message.
func (e *Engine) ended(id string) (*endWaiter, func()) {
	x := &endWaiter{done: make(chan struct{})}
	e.mu.Lock()
	e.waiters[id] = append(e.waiters[id], x)
	e.mu.Unlock()
	e.listen(id, x) // before the start commits: no end published after it can be missed
	return x, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		cs := e.waiters[id]
		for i, y := range cs {
			if y == x {
				e.waiters[id] = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(e.waiters[id]) == 0 {
			delete(e.waiters, id)
		}
		if x.unlisten != nil {
			x.unlisten()
		}
	}
}

// Polling for an end committed by another replica starts at waitPollFirst and grows by half at every read up to
// waitPollMax: a sync call that is answered quickly (the usual case, and then by this process's own signal) costs
// no read, and one waiting for minutes costs a read every few seconds, not four a second. While the end bus
// listens, the waiter hears of such an end at once and polls only every waitPollMax, in case a message was lost.
const (
	waitPollFirst = 250 * time.Millisecond
	waitPollMax   = 5 * time.Second
)

// waitEnd waits for x, the end committed by this process, which carries the instance (no read). Another replica
// may end it instead: the end bus says so (then it reads the instance), and it also reads the instance now and
// then (waitPollFirst, growing to waitPollMax, on the engine's clock; every waitPollMax while the bus listens);
// readFirst reads once at once. When ctx is done it returns the instance as it is then.
func (e *Engine) waitEnd(ctx context.Context, tenant, id string, x *endWaiter, readFirst bool) (*model.Instance, error) {
	get := func() (*model.Instance, error) {
		// Read with a context of its own: the last look after ctx's deadline must still succeed.
		rctx, cancelRead := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelRead()
		inst, _, err := e.store.GetInstance(rctx, tenant, id)
		return inst, err
	}
	every := waitPollFirst
	if x.heard != nil {
		every = waitPollMax
	}
	poll := e.clock.NewTimer(every)
	defer poll.Stop()
	read := readFirst
	for {
		if read {
			inst, err := get()
			if err != nil || inst.Ended() || ctx.Err() != nil {
				return inst, err
			}
			read = false
		}
		select {
		case <-ctx.Done():
			read = true // the last look
		case <-x.done:
			return x.inst, nil
		case <-x.heard:
			read = true
			if e.listen(id, x); x.heard == nil { // the subscription dropped: poll quickly again
				every = waitPollFirst
				poll.Reset(every)
			}
		case <-poll.C():
			read = true
			if x.heard == nil {
				every = min(every*3/2, waitPollMax)
			}
			poll.Reset(every)
		}
	}
}
