package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
)

// Messages (API.md "Waiting and resuming" and "Messages: ids and message start"): POST /messages resumes the
// callback nodes waiting for a message name and correlation id, starts the templates whose start trigger is that
// message, or queues the message until a node waits for it. A message_id makes a retried request harmless.

// MessageIDWindow is how long a message_id is remembered: a request with the same id within it answers the
// first request's answer and does nothing else.
const MessageIDWindow = 7 * 24 * time.Hour

// messageIDLease is how long a request may hold a message id without an answer before a retry may take it over
// (no request runs that long: its process died).
const messageIDLease = time.Minute

// MessageParams are a message sent to the engine (POST /messages).
type MessageParams struct {
	Name          string
	CorrelationID string
	Data          json.RawMessage
	TTL           string // a Go duration, 1s to 720h; "" is 1h
	// MessageID de-duplicates: the same id within MessageIDWindow replays the first answer (at most 128 characters).
	MessageID string
}

// MessageResult is what POST /messages answers.
type MessageResult struct {
	Resumed int  `json:"resumed"`
	Queued  bool `json:"queued"`
	// Started are the instances the message started (templates with a message start trigger of that name).
	Started []string `json:"started"`
	// Conflicts are the templates it did not start because an instance of theirs with the message's correlation
	// id is running.
	Conflicts []string `json:"conflicts"`
	// Duplicate is true when the answer is the replay of an earlier request with the same message_id.
	Duplicate bool `json:"duplicate"`
}

// SendMessage resumes every callback node waiting for the message name and correlation id and starts one
// instance of each template whose latest version starts on the message; when it did neither, the message is
// queued until its TTL (default 1h) and matched when such a node activates (oldest first, each once). With a
// message_id seen in the last 7 days it answers that request's answer with duplicate true and does nothing.
func (e *Engine) SendMessage(ctx context.Context, actor *model.Principal, req MessageParams) (*MessageResult, error) {
	if req.Name == "" || len(req.Name) > 255 || req.CorrelationID == "" || len(req.CorrelationID) > 255 {
		return nil, model.CodedError(model.EINVALID, "invalid_message", "name and correlation_id are required (at most 255 characters each)")
	}
	if len(req.MessageID) > 128 || (req.MessageID != "" && strings.TrimSpace(req.MessageID) == "") {
		return nil, model.CodedError(model.EINVALID, "invalid_message_id", "message_id must be 1 to 128 characters")
	}
	if !actor.IsAdmin() && !actor.Token {
		return nil, model.CodedError(model.EFORBIDDEN, "not_allowed", "messages are sent by business systems (API tokens) or admins")
	}
	ttl := time.Hour
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 || d > 30*24*time.Hour {
			return nil, model.CodedError(model.EINVALID, "invalid_ttl", "ttl must be a duration between 1s and 720h, like 1h")
		}
		ttl = d
	}
	data := json.RawMessage(strings.TrimSpace(string(req.Data)))
	if len(data) == 0 || string(data) == "null" {
		data = json.RawMessage("{}")
	}
	if data[0] != '{' || !json.Valid(data) {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if err := model.CheckDocumentDepth("data", data); err != nil {
		return nil, err
	}
	if req.MessageID == "" {
		return e.sendMessage(ctx, actor, req, data, ttl)
	}
	if prev, err := e.claimMessageID(ctx, actor.TenantID, req.MessageID); err != nil || prev != nil {
		return prev, err
	}
	res, err := e.sendMessage(ctx, actor, req, data, ttl)
	// The answer (or the release of the id) must be stored even when the caller has gone.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err != nil {
		if aerr := e.store.AbandonMessageID(sctx, actor.TenantID, req.MessageID); aerr != nil {
			e.log.ErrorContext(ctx, "engine: unable to release a message id", "message_id", req.MessageID, "err", aerr)
		}
		return nil, err
	}
	ans, _ := json.Marshal(res)
	if ferr := e.store.FinishMessageID(sctx, actor.TenantID, req.MessageID, ans); ferr != nil {
		e.log.ErrorContext(ctx, "engine: unable to store the answer of a message id", "message_id", req.MessageID, "err", ferr)
	}
	return res, nil
}

// claimMessageID claims a message id for this request (nil, nil) or returns the first request's answer marked
// duplicate. While the first request still runs it waits for its answer (up to 10s; then 409
// message_in_progress).
func (e *Engine) claimMessageID(ctx context.Context, tenant, id string) (*MessageResult, error) {
	deadline := time.Now().Add(10 * time.Second)
	wait := 5 * time.Millisecond
	for {
		now := e.clock.Now().UTC()
		ans, claimed, err := e.store.ClaimMessageID(ctx, tenant, id, now, now.Add(-messageIDLease))
		switch {
		case err != nil:
			return nil, err
		case claimed:
			return nil, nil
		case ans != nil:
			var prev MessageResult
			if err := json.Unmarshal(ans, &prev); err != nil {
				return nil, fmt.Errorf("engine: stored answer of message %s: %w", id, err)
			}
			prev.Duplicate = true
			return &prev, nil
		case time.Now().After(deadline):
			return nil, model.CodedError(model.ECONFLICT, "message_in_progress", "a message with message_id %q is still being handled; retry later", id)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// sendMessage does the work of SendMessage: resume, start, or queue.
func (e *Engine) sendMessage(ctx context.Context, actor *model.Principal, req MessageParams, data json.RawMessage, ttl time.Duration) (*MessageResult, error) {
	res := &MessageResult{Started: []string{}, Conflicts: []string{}}
	hash := messageHash(req.Name, req.CorrelationID)
	resumed, err := e.deliver(ctx, actor, hash, data, req.Name)
	res.Resumed = resumed
	if err != nil {
		return nil, err
	}
	starters, err := e.startOnMessage(ctx, actor, req, data, res)
	if err != nil {
		return nil, err
	}
	if resumed > 0 || starters > 0 {
		// A message that starts processes is not queued: its start was its effect (or its conflict).
		return res, nil
	}
	now := e.clock.Now().UTC()
	m := &model.Message{ID: uuid.Must(uuid.NewV7()).String(), TenantID: actor.TenantID, Name: req.Name, CorrelationID: req.CorrelationID, Hash: hash,
		Data: data, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := e.store.QueueMessage(ctx, m); err != nil {
		return nil, err
	}
	// A node may have started waiting between the first look and the queueing: look once more, and hand it the
	// queued message (consumed in the same transaction, so it is never matched twice).
	bs, err := e.store.FindBookmarks(ctx, actor.TenantID, hash)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		_, err := e.update(ctx, "message", actor.TenantID, b.InstanceID, actor.Username, func(s *step) error {
			ns := s.node(b.NodeID)
			if ns == nil || ns.NodeInstanceID != b.NodeInstanceID || !ns.Active() || s.inst.Ended() {
				return errStale
			}
			s.w.ConsumeMessage = append(s.w.ConsumeMessage, m.ID)
			return s.resumeWait(ns, data, "message.received", map[string]any{"message": req.Name})
		})
		switch {
		case err == nil:
			res.Resumed = 1
			return res, nil
		case errors.Is(err, errStale) || model.IsKind(err, model.ENOTFOUND):
		case errors.Is(err, model.ErrStaleRead):
			res.Queued = true
			return res, nil // a node activating meanwhile consumed it
		default:
			return nil, err
		}
	}
	res.Queued = true
	return res, nil
}

func (e *Engine) deliver(ctx context.Context, actor *model.Principal, hash string, data json.RawMessage, name string) (int, error) {
	bs, err := e.store.FindBookmarks(ctx, actor.TenantID, hash)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range bs {
		_, err := e.update(ctx, "message", actor.TenantID, b.InstanceID, actor.Username, func(s *step) error {
			ns := s.node(b.NodeID)
			if ns == nil || ns.NodeInstanceID != b.NodeInstanceID || !ns.Active() || s.inst.Ended() {
				return errStale
			}
			return s.resumeWait(ns, data, "message.received", map[string]any{"message": name})
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, errStale) || model.IsKind(err, model.ENOTFOUND):
		default:
			return n, err
		}
	}
	return n, nil
}

// startOnMessage starts one instance of each template whose latest published version starts on the message
// (seed: 消息开始): the message's data is the context, its correlation id the instance's, its sender the
// initiator. A template with a running instance of that correlation id is reported in Conflicts instead. It
// returns how many templates start on the message.
func (e *Engine) startOnMessage(ctx context.Context, actor *model.Principal, req MessageParams, data json.RawMessage, res *MessageResult) (int, error) {
	triggers, err := e.store.MessageTriggers(ctx, actor.TenantID, req.Name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, tr := range triggers {
		c, err := e.templates.Compiled(ctx, actor.TenantID, tr.Key, 0)
		if err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				continue
			}
			return n, err
		}
		if st := c.Def.Start().Trigger; st.Kind != model.TriggerMessage || st.Message != req.Name {
			continue // a newer version starts otherwise; its publish is updating the index
		}
		n++
		running, _, err := e.store.ListInstances(ctx, model.InstanceFilter{TenantID: actor.TenantID, Template: tr.Key, Status: model.StatusRunning,
			CorrelationID: req.CorrelationID, Page: model.Page{Limit: 1}})
		if err != nil {
			return n, err
		}
		if len(running) > 0 {
			res.Conflicts = append(res.Conflicts, tr.Key)
			continue
		}
		v, err := e.StartCompiled(ctx, actor.TenantID, actor.Username, c, data, req.CorrelationID, "")
		if err != nil {
			var de *model.Error
			if errors.As(err, &de) && de.Kind == model.ECONFLICT && de.Code == "correlation_taken" {
				res.Conflicts = append(res.Conflicts, tr.Key) // started meanwhile by another request
				continue
			}
			return n, err
		}
		res.Started = append(res.Started, v.ID)
	}
	return n, nil
}
