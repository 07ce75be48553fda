package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// timerID names a node visit's timer: <node instance id>-<kind>[-<attempt>]. It carries the instance id (see
// InstanceOf), so a firing timer locks its instance without another read.
func timerID(ns *model.NodeState, kind string, attempt int) string {
	id := ns.NodeInstanceID + "-" + kind
	if attempt > 0 {
		id += "-" + strconv.Itoa(attempt)
	}
	return id
}

// timerKind returns the kind of one of a visit's timers from its id (see timerID).
func timerKind(ns *model.NodeState, id string) string {
	rest, ok := strings.CutPrefix(id, ns.NodeInstanceID+"-")
	if !ok {
		return ""
	}
	kind, _, _ := strings.Cut(rest, "-")
	return kind
}

// armTimer writes a timer row and tells the scheduler through the outbox. The due time is rounded up to the
// next whole millisecond (the scheduler's precision), so the row, the outbox and the scheduler agree and the
// timer never fires before the time asked for.
func (r *run) armTimer(ns *model.NodeState, kind string, due time.Time, payload any) {
	due = ceilMillisecond(due)
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	t := &model.Timer{ID: timerID(ns, kind, ns.Attempt), TenantID: r.inst.TenantID, InstanceID: r.inst.ID, NodeID: ns.NodeID,
		NodeInstanceID: ns.NodeInstanceID, Kind: kind, DueAt: due.UTC(), Status: model.TimerPending, Payload: raw, CreatedAt: r.now}
	r.w.NewTimers = append(r.w.NewTimers, t)
	ns.Timers = append(ns.Timers, t.ID)
	r.w.Outbox = append(r.w.Outbox, model.OutboxItem{TenantID: r.inst.TenantID, Kind: model.OutboxTimerArm, Ref: t.ID,
		Payload: json.RawMessage(fmt.Sprintf(`{"due":%d}`, due.UnixMilli()))})
}

// ceilMillisecond rounds t up to a whole millisecond.
func ceilMillisecond(t time.Time) time.Time {
	if f := t.Truncate(time.Millisecond); f.Before(t) {
		return f.Add(time.Millisecond)
	}
	return t
}

// cancelTimers cancels the pending timers of a node visit (rows and scheduler entries).
func (r *run) cancelTimers(ns *model.NodeState) {
	if len(ns.Timers) == 0 {
		return
	}
	r.w.CancelTimers = append(r.w.CancelTimers, ns.NodeInstanceID)
	for _, id := range ns.Timers {
		r.w.Outbox = append(r.w.Outbox, model.OutboxItem{TenantID: r.inst.TenantID, Kind: model.OutboxTimerCancel, Ref: id})
	}
	ns.Timers = nil
}

func (r *run) bookmark(ns *model.NodeState, kind, message string, payload any) *model.Bookmark {
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	b := &model.Bookmark{ID: ns.NodeInstanceID, TenantID: r.inst.TenantID, InstanceID: r.inst.ID, NodeID: ns.NodeID, NodeInstanceID: ns.NodeInstanceID,
		Kind: kind, MessageName: message, CorrelationID: r.inst.CorrelationID, Payload: raw, CreatedAt: r.now}
	if message != "" {
		b.Hash = MessageHash(message, r.inst.CorrelationID)
	}
	r.w.NewBookmarks = append(r.w.NewBookmarks, b)
	return b
}

// MessageHash is how a message finds the bookmarks waiting for it: SHA-256 of name and correlation id.
func MessageHash(name, correlationID string) string {
	h := sha256.Sum256([]byte("message\x00" + name + "\x00" + correlationID))
	return hex.EncodeToString(h[:])
}

// startDelay parks a delay node until its interval passes or its `until` time.
func (r *run) startDelay(n *model.Node, ns *model.NodeState) error {
	due := r.now.Add(n.Interval.Std())
	if n.Until != "" {
		t, err := r.untilTime(n.Until)
		if err != nil {
			return r.nodeError(n.ID, model.NodeErrBadUntil, err.Error())
		}
		due = t
	}
	if !due.After(r.now) {
		return r.complete(n.ID)
	}
	ns.State, ns.WaitingFor = model.NodeWaiting, "delay"
	r.bookmark(ns, model.BookmarkDelay, "", map[string]any{"due_at": due.UTC()})
	r.armTimer(ns, model.TimerDelay, due, nil)
	return nil
}

// untilTime reads an RFC 3339 time, or a context path holding one (or unix seconds).
func (r *run) untilTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	v := r.contextValue(s)
	switch v.Type {
	case gjson.String:
		t, err := time.Parse(time.RFC3339, v.Str)
		if err != nil {
			return time.Time{}, fmt.Errorf("until: context path %q holds %q, not an RFC 3339 time", s, v.Str)
		}
		return t, nil
	case gjson.Number:
		return time.Unix(v.Int(), 0), nil
	}
	return time.Time{}, fmt.Errorf("until: %q is neither an RFC 3339 time nor a context path holding one", s)
}

// CallbackToken signs a callback URL: HMAC-SHA256 over "<instance id>/<node instance id>".
func CallbackToken(key []byte, instanceID, nodeInstanceID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(instanceID + "/" + nodeInstanceID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// startCallback parks a callback node on a bookmark with a signed URL, an optional timeout and an optional
// message name; a message queued before it arrived resumes it at once.
func (r *run) startCallback(n *model.Node, ns *model.NodeState) error {
	ns.State, ns.WaitingFor = model.NodeWaiting, "callback"
	kind := model.BookmarkCallback
	if n.Message != "" {
		kind = model.BookmarkMessage
		ns.WaitingFor = "message"
	}
	r.bookmark(ns, kind, n.Message, map[string]any{"callback_url": ns.CallbackURL})
	if n.Timeout > 0 {
		r.armTimer(ns, model.TimerCallbackTimeout, r.now.Add(n.Timeout.Std()), nil)
	}
	if n.Message != "" && r.inst.CorrelationID != "" {
		hash := MessageHash(n.Message, r.inst.CorrelationID)
		v, err := r.read("message\x00"+hash, func(ctx context.Context) (any, error) {
			return r.e.store.FindMessage(ctx, r.inst.TenantID, hash, r.now)
		})
		if err != nil {
			return err
		}
		// A message queued before the node: consumed in this transaction (exclusively: see the store).
		if m, _ := v.(*model.Message); m != nil {
			r.w.ConsumeMessage = append(r.w.ConsumeMessage, m.ID)
			return r.resumeWait(ns, m.Data, "message.matched", map[string]any{"message": n.Message, "queued_at": m.CreatedAt})
		}
	}
	return nil
}

// resumeWait resumes a waiting callback node: the data becomes context.<node_id> and the node completes.
func (r *run) resumeWait(ns *model.NodeState, data json.RawMessage, action string, info map[string]any) error {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if ns.Type == model.NodeCallback {
		if err := r.setContextPath(ns.NodeID, data); err != nil {
			return err
		}
	} else if err := r.mergeContext(data); err != nil {
		return err
	}
	r.history(action, ns.NodeID, "", "", info)
	return r.complete(ns.NodeID)
}

// copyTo writes CC records for a node's cc people (抄送).
func (r *run) copyTo(n *model.Node, ns *model.NodeState) error {
	users, err := r.resolveUsers(n.CC)
	if err != nil {
		// A cc list that resolves to nobody must not stop the flow; it is recorded.
		r.history("cc.unresolved", n.ID, "", err.Error(), nil)
		return nil
	}
	for _, u := range users {
		r.w.CC = append(r.w.CC, &model.CCRecord{ID: r.nextID("c"), TenantID: r.inst.TenantID, InstanceID: r.inst.ID, NodeID: n.ID, Username: u, CreatedAt: r.now})
	}
	r.history("cc.sent", n.ID, "", "", map[string]any{"users": users})
	r.event("cc.created", n.ID, nil, map[string]any{"users": users, "node_name": n.Label()})
	return nil
}

// event writes an event to the outbox when somebody wants it (a subscription, the notifications); extra fields
// are added to its payload.
func (r *run) event(name, nodeID string, t *model.Task, extra ...map[string]any) {
	if !r.e.events.Wants(r.inst.TenantID, name, r.inst.Template) {
		return
	}
	ev := map[string]any{"event": name, "at": r.now, "instance_id": r.inst.ID, "template": r.inst.Template,
		"status": r.inst.Status, "node_id": nodeID, "task": t, "title": r.inst.Title, "initiator": r.inst.Initiator}
	for _, x := range extra {
		maps.Copy(ev, x)
	}
	if name == "instance.failed" && r.inst.State.Error != nil {
		ev["error"] = r.inst.State.Error // subscribers learn why: the node error's code, node and message
		ev["node_id"] = r.inst.State.Error.NodeID
	}
	payload, _ := json.Marshal(ev)
	r.w.Outbox = append(r.w.Outbox, model.OutboxItem{TenantID: r.inst.TenantID, Kind: model.OutboxEvent, Ref: name, Payload: payload})
}

// fire handles a due timer of a node visit.
func (r *run) fire(t *model.Timer) error {
	ns := r.node(t.NodeID)
	r.w.FiredTimers = append(r.w.FiredTimers, t.ID)
	if ns == nil || ns.NodeInstanceID != t.NodeInstanceID || !ns.Active() || !contains(ns.Timers, t.ID) {
		return nil // the visit is over: a cancelled timer that fired anyway does nothing
	}
	ns.Timers = remove(ns.Timers, t.ID)
	r.history("timer.fired", ns.NodeID, "", "", map[string]any{"kind": t.Kind, "timer_id": t.ID})
	r.event("timer.fired", ns.NodeID, nil)
	n := r.c.Def.Node(ns.NodeID)
	switch t.Kind {
	case model.TimerDelay:
		return r.complete(ns.NodeID)
	case model.TimerRetry:
		if ns.Chain != nil {
			// A failed plugin is retried alone: the chain goes on from where it failed, with a new timeout.
			ns.State = model.NodeActive
			for _, id := range append([]string(nil), ns.Timers...) {
				if timerKind(ns, id) == model.TimerPluginTimeout {
					r.dropTimer(ns, id) // the new run gets the whole timeout
				}
			}
			r.armPluginTimeout(n, ns)
			return r.queueRun(ns)
		}
		return r.activateRetry(ns.NodeID)
	case model.TimerPluginTimeout:
		return r.pluginTimedOut(n, ns)
	case model.TimerCallbackTimeout:
		if n.TimeoutBranch != "" {
			return r.branchAway(ns, n.TimeoutBranch, "callback timed out")
		}
		return r.nodeError(ns.NodeID, model.NodeErrCallbackTimeout, fmt.Sprintf("no callback within %s", n.Timeout))
	case model.TimerApprovalTimeout:
		switch {
		case n.OnTimeout.Branch != "":
			return r.branchAway(ns, n.OnTimeout.Branch, "approval timed out")
		case n.OnTimeout.Action == model.TimeoutApprove:
			r.cancelNodeTasks(ns.NodeInstanceID, "timed out: approved automatically")
			r.history("node.timeout_approved", ns.NodeID, "", "", nil)
			return r.complete(ns.NodeID)
		case n.OnTimeout.Action == model.TimeoutReject:
			r.history("node.timeout_rejected", ns.NodeID, "", "", nil)
			return r.reject(ns.NodeID, "timed out: rejected automatically")
		case n.OnTimeout.Action == model.TimeoutRemind:
			var who []string
			for _, x := range r.openTasks(ns.NodeInstanceID, func(x *model.Task) bool { return x.Status == model.TaskPending }) {
				who = append(who, x.Assignee)
				r.event("task.reminder", ns.NodeID, x)
			}
			r.history("task.reminder", ns.NodeID, "", "", map[string]any{"assignees": who})
			ns.Attempt++ // a new id for the next reminder timer
			r.armTimer(ns, model.TimerApprovalTimeout, r.now.Add(n.Timeout.Std()), nil)
			return nil
		}
		return r.nodeError(ns.NodeID, model.NodeErrApprovalTimeout, fmt.Sprintf("not decided within %s", n.Timeout))
	}
	return fmt.Errorf("engine: unknown timer kind %q", t.Kind)
}

// dropTimer removes one pending timer of a visit (its row is marked fired, the scheduler forgets it).
func (r *run) dropTimer(ns *model.NodeState, id string) {
	ns.Timers = remove(ns.Timers, id)
	r.w.FiredTimers = append(r.w.FiredTimers, id)
	r.w.Outbox = append(r.w.Outbox, model.OutboxItem{TenantID: r.inst.TenantID, Kind: model.OutboxTimerCancel, Ref: id})
}

// branchAway ends a node visit and continues at another node (timeout branches): the node's own outgoing
// edges are killed.
func (r *run) branchAway(ns *model.NodeState, to, reason string) error {
	r.endVisit(ns, model.NodeCancelled)
	r.cancelNodeTasks(ns.NodeInstanceID, reason)
	r.history("node.timeout_branch", ns.NodeID, "", reason, map[string]any{"branch": to})
	for _, i := range r.edgeIndexes(ns.NodeID) {
		r.inst.State.Edges[i] = model.EdgeKilled
	}
	if err := r.activate(to); err != nil {
		return err
	}
	return r.propagate(r.edgeIndexes(ns.NodeID))
}

// activateRetry runs a node again after its retry back-off, keeping its attempt count.
func (r *run) activateRetry(id string) error {
	prev := r.node(id)
	r.endVisit(prev, model.NodeFailed)
	if r.retryAttempt == nil {
		r.retryAttempt = map[string]int{}
	}
	r.retryAttempt[id] = prev.Attempt
	return r.activate(id)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func remove(xs []string, s string) []string {
	out := xs[:0]
	for _, x := range xs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
