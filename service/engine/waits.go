package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// timerID names a node visit's timer: <node instance id>-<kind>[-<attempt>]. It carries the instance id (see
// instanceOf), so a firing timer locks its instance without another read.
func timerID(ns *model.NodeVisit, kind string, attempt int) string {
	id := ns.NodeInstanceID + "-" + kind
	if attempt > 0 {
		id += "-" + strconv.Itoa(attempt)
	}
	return id
}

// timerKind returns the kind of one of a visit's timers from its id (see timerID).
func timerKind(ns *model.NodeVisit, id string) string {
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
func (s *step) armTimer(ns *model.NodeVisit, kind string, due time.Time, payload any) {
	due = ceilMillisecond(due)
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	t := &model.Timer{ID: timerID(ns, kind, ns.Attempt), TenantID: s.inst.TenantID, InstanceID: s.inst.ID, NodeID: ns.NodeID,
		NodeInstanceID: ns.NodeInstanceID, Kind: kind, DueAt: due.UTC(), Status: model.TimerPending, Payload: raw, CreatedAt: s.now}
	s.w.NewTimers = append(s.w.NewTimers, t)
	ns.Timers = append(ns.Timers, t.ID)
	s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxTimerArm, Ref: t.ID,
		Payload: model.TimerArmPayload(due)})
}

// ceilMillisecond rounds t up to a whole millisecond.
func ceilMillisecond(t time.Time) time.Time {
	if f := t.Truncate(time.Millisecond); f.Before(t) {
		return f.Add(time.Millisecond)
	}
	return t
}

// cancelTimers cancels the pending timers of a node visit (rows and scheduler entries).
func (s *step) cancelTimers(ns *model.NodeVisit) {
	if len(ns.Timers) == 0 {
		return
	}
	s.w.CancelTimers = append(s.w.CancelTimers, ns.NodeInstanceID)
	for _, id := range ns.Timers {
		s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxTimerCancel, Ref: id})
	}
	ns.Timers = nil
}

func (s *step) bookmark(ns *model.NodeVisit, kind, message string, payload any) *model.Bookmark {
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	b := &model.Bookmark{ID: ns.NodeInstanceID, TenantID: s.inst.TenantID, InstanceID: s.inst.ID, NodeID: ns.NodeID, NodeInstanceID: ns.NodeInstanceID,
		Kind: kind, MessageName: message, CorrelationID: s.inst.CorrelationID, Payload: raw, CreatedAt: s.now}
	if message != "" {
		b.Hash = messageHash(message, s.inst.CorrelationID)
	}
	s.w.NewBookmarks = append(s.w.NewBookmarks, b)
	return b
}

// messageHash is how a message finds the bookmarks waiting for it: SHA-256 of name and correlation id.
func messageHash(name, correlationID string) string {
	h := sha256.Sum256([]byte("message\x00" + name + "\x00" + correlationID))
	return hex.EncodeToString(h[:])
}

// startDelay parks a delay node until its interval passes or its `until` time.
func (s *step) startDelay(n *model.Node, ns *model.NodeVisit) error {
	due := s.now.Add(n.Interval.Std())
	if n.Until != "" {
		t, err := s.untilTime(n.Until)
		if err != nil {
			return s.nodeError(n.ID, model.NodeErrBadUntil, err.Error())
		}
		due = t
	}
	if !due.After(s.now) {
		return s.complete(n.ID)
	}
	if err := s.moveNode(ns, model.MoveWait); err != nil {
		return err
	}
	ns.WaitingFor = "delay"
	s.bookmark(ns, model.BookmarkDelay, "", map[string]any{"due_at": due.UTC()})
	s.armTimer(ns, model.TimerDelay, due, nil)
	return nil
}

// untilTime reads an RFC 3339 time, or a context path holding one (or unix seconds).
func (s *step) untilTime(spec string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, spec); err == nil {
		return t, nil
	}
	v := s.contextValue(spec)
	switch v.Type {
	case gjson.String:
		t, err := time.Parse(time.RFC3339, v.Str)
		if err != nil {
			return time.Time{}, fmt.Errorf("until: context path %q holds %q, not an RFC 3339 time", spec, v.Str)
		}
		return t, nil
	case gjson.Number:
		return time.Unix(v.Int(), 0), nil
	}
	return time.Time{}, fmt.Errorf("until: %q is neither an RFC 3339 time nor a context path holding one", spec)
}

// CallbackToken signs a callback URL: HMAC-SHA256 over "<instance id>/<node instance id>".
func CallbackToken(key []byte, instanceID, nodeInstanceID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(instanceID + "/" + nodeInstanceID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// startCallback parks a callback node on a bookmark with a signed URL, an optional timeout and an optional
// message name; a message queued before it arrived resumes it at once.
func (s *step) startCallback(n *model.Node, ns *model.NodeVisit) error {
	if err := s.moveNode(ns, model.MoveWait); err != nil {
		return err
	}
	ns.WaitingFor = "callback"
	kind := model.BookmarkCallback
	if n.Message != "" {
		kind = model.BookmarkMessage
		ns.WaitingFor = "message"
	}
	s.bookmark(ns, kind, n.Message, map[string]any{"callback_url": ns.CallbackURL})
	if n.Timeout > 0 {
		s.armTimer(ns, model.TimerCallbackTimeout, s.now.Add(n.Timeout.Std()), nil)
	}
	if n.Message != "" && s.inst.CorrelationID != "" {
		hash := messageHash(n.Message, s.inst.CorrelationID)
		v, err := s.read("message\x00"+hash, func(ctx context.Context) (any, error) {
			return s.e.store.FindMessage(ctx, s.inst.TenantID, hash, s.now)
		})
		if err != nil {
			return err
		}
		// A message queued before the node: consumed in this transaction (exclusively: see the store).
		if m, _ := v.(*model.Message); m != nil {
			s.w.ConsumeMessage = append(s.w.ConsumeMessage, m.ID)
			return s.resumeWait(ns, m.Data, "message.matched", map[string]any{"message": n.Message, "queued_at": m.CreatedAt})
		}
	}
	return nil
}

// resumeWait resumes a waiting callback node: the data becomes context.<node_id> and the node completes.
func (s *step) resumeWait(ns *model.NodeVisit, data json.RawMessage, action string, info map[string]any) error {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if ns.Type == model.NodeCallback {
		if err := s.setContextPath(ns.NodeID, data); err != nil {
			return err
		}
	} else if err := s.mergeContext(data); err != nil {
		return err
	}
	s.history(action, ns.NodeID, "", "", info)
	return s.complete(ns.NodeID)
}

// fire handles a due timer of a node visit.
func (s *step) fire(t *model.Timer) error {
	ns := s.node(t.NodeID)
	s.w.FiredTimers = append(s.w.FiredTimers, t.ID)
	if ns == nil || ns.NodeInstanceID != t.NodeInstanceID || !ns.Active() || !contains(ns.Timers, t.ID) {
		return nil // the visit is over: a cancelled timer that fired anyway does nothing
	}
	ns.Timers = remove(ns.Timers, t.ID)
	s.history("timer.fired", ns.NodeID, "", "", map[string]any{"kind": t.Kind, "timer_id": t.ID})
	s.event("timer.fired", ns.NodeID, nil)
	n := s.c.Def.Node(ns.NodeID)
	switch t.Kind {
	case model.TimerDelay:
		return s.complete(ns.NodeID)
	case model.TimerRetry:
		if ns.Chain != nil {
			// A failed plugin is retried alone: the chain goes on from where it failed, with a new timeout.
			if err := s.moveNode(ns, model.MoveResume); err != nil {
				return err
			}
			for _, id := range append([]string(nil), ns.Timers...) {
				if timerKind(ns, id) == model.TimerPluginTimeout {
					s.dropTimer(ns, id) // the new run gets the whole timeout
				}
			}
			s.armPluginTimeout(n, ns)
			return s.queueRun(ns)
		}
		return s.activateRetry(ns.NodeID)
	case model.TimerPluginTimeout:
		return s.pluginTimedOut(n, ns)
	case model.TimerCallbackTimeout:
		if n.TimeoutBranch != "" {
			return s.branchAway(ns, n.TimeoutBranch, "callback timed out")
		}
		return s.nodeError(ns.NodeID, model.NodeErrCallbackTimeout, fmt.Sprintf("no callback within %s", n.Timeout))
	case model.TimerApprovalTimeout:
		switch {
		case n.OnTimeout.Branch != "":
			return s.branchAway(ns, n.OnTimeout.Branch, "approval timed out")
		case n.OnTimeout.Action == model.TimeoutApprove:
			if err := s.cancelNodeTasks(ns.NodeInstanceID, "timed out: approved automatically"); err != nil {
				return err
			}
			s.history("node.timeout_approved", ns.NodeID, "", "", nil)
			return s.complete(ns.NodeID)
		case n.OnTimeout.Action == model.TimeoutReject:
			s.history("node.timeout_rejected", ns.NodeID, "", "", nil)
			return s.reject(ns.NodeID, "timed out: rejected automatically")
		case n.OnTimeout.Action == model.TimeoutRemind:
			var who []string
			for _, x := range s.openTasks(ns.NodeInstanceID, func(x *model.Task) bool { return x.Status == model.TaskPending }) {
				who = append(who, x.Assignee)
				s.event("task.reminder", ns.NodeID, x)
			}
			s.history("task.reminder", ns.NodeID, "", "", map[string]any{"assignees": who})
			ns.Attempt++ // a new id for the next reminder timer
			s.armTimer(ns, model.TimerApprovalTimeout, s.now.Add(n.Timeout.Std()), nil)
			return nil
		}
		return s.nodeError(ns.NodeID, model.NodeErrApprovalTimeout, fmt.Sprintf("not decided within %s", n.Timeout))
	}
	return fmt.Errorf("engine: unknown timer kind %q", t.Kind)
}

// dropTimer removes one pending timer of a visit (its row is marked fired, the scheduler forgets it).
func (s *step) dropTimer(ns *model.NodeVisit, id string) {
	ns.Timers = remove(ns.Timers, id)
	s.w.FiredTimers = append(s.w.FiredTimers, id)
	s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxTimerCancel, Ref: id})
}

// branchAway ends a node visit and continues at another node (timeout branches): the node's own outgoing
// edges are killed.
func (s *step) branchAway(ns *model.NodeVisit, to, reason string) error {
	if err := s.endVisit(ns, model.MoveCancel); err != nil {
		return err
	}
	if err := s.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
		return err
	}
	s.history("node.timeout_branch", ns.NodeID, "", reason, map[string]any{"branch": to})
	for _, i := range s.edgeIndexes(ns.NodeID) {
		s.inst.State.Edges[i] = model.EdgeKilled
	}
	if err := s.activate(to, model.MoveBranch); err != nil {
		return err
	}
	return s.propagate(s.edgeIndexes(ns.NodeID))
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
