package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/halley-bpm/halley/model"
)

// taskAction locks the task's instance and runs fn on the task after the common checks: it exists (404), it is
// the caller's or the caller is an admin (403), it is pending (409).
func (e *Engine) taskAction(ctx context.Context, actor *model.Principal, taskID string, fn func(s *step, t *model.Task) error) (*model.Work, error) {
	instID := InstanceOf(taskID)
	if instID == "" {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	w, err := e.update(ctx, actor.TenantID, instID, actor.Username, func(s *step) error {
		t := s.task(taskID)
		if t == nil {
			// Not open (or unknown): why is read after the transaction. Reading it here would take a second
			// connection while this one holds the row lock; with every pooled connection held by a request
			// racing on the same instance, that read would wait forever.
			return errTaskNotOpen
		}
		if t.Assignee != actor.Username && !actor.IsAdmin() {
			return model.CodedError(model.EFORBIDDEN, "not_assignee", "task %s is not yours", taskID)
		}
		if t.Status != model.TaskPending {
			return model.CodedError(model.ECONFLICT, "task_not_pending", "task %s is %s: it is not its turn yet", taskID, t.Status).
				WithDetails(map[string]any{"status": t.Status})
		}
		if s.inst.Ended() {
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s", s.inst.ID, s.inst.Status)
		}
		return fn(s, t)
	})
	if errors.Is(err, errTaskNotOpen) {
		old, gerr := e.store.GetTask(ctx, actor.TenantID, taskID)
		switch {
		case model.IsKind(gerr, model.ENOTFOUND):
			return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
		case gerr != nil:
			return nil, gerr
		case old.Assignee != actor.Username && !actor.IsAdmin():
			return nil, model.CodedError(model.EFORBIDDEN, "not_assignee", "task %s is not yours", taskID)
		}
		return nil, model.CodedError(model.ECONFLICT, "task_already_decided", "task %s is already %s", taskID, old.Status).
			WithDetails(map[string]any{"status": old.Status})
	}
	if model.IsKind(err, model.ENOTFOUND) && !strings.Contains(err.Error(), "task") {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	return w, err
}

// errTaskNotOpen aborts a task action whose task is not open; taskAction then says why (404, 403 or 409).
var errTaskNotOpen = errors.New("engine: task is not open")

// DecideRequest is the body of approve and reject.
type DecideRequest struct {
	Comment string          `json:"comment"`
	Data    json.RawMessage `json:"data"`
}

// Approve approves a pending task; data is written into the context as the task's form allows (formdata.go).
func (e *Engine) Approve(ctx context.Context, actor *model.Principal, taskID string, req DecideRequest) (*Decided, error) {
	return e.decide(ctx, actor, taskID, true, req)
}

// Reject rejects a pending task.
func (e *Engine) Reject(ctx context.Context, actor *model.Principal, taskID string, req DecideRequest) (*Decided, error) {
	return e.decide(ctx, actor, taskID, false, req)
}

func (e *Engine) decide(ctx context.Context, actor *model.Principal, taskID string, approve bool, req DecideRequest) (*Decided, error) {
	if len(req.Comment) > 4000 {
		return nil, model.CodedError(model.EINVALID, "invalid_comment", "comment must be at most 4000 characters")
	}
	data := json.RawMessage(strings.TrimSpace(string(req.Data)))
	if len(data) > 0 && string(data) != "null" && data[0] != '{' {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if err := model.CheckDocumentDepth("data", data); err != nil {
		return nil, err
	}
	var out *model.Task
	w, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		if err := s.decide(t, Decision{Approve: approve, Comment: req.Comment, Data: data, By: actor.Username}); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	d := &Decided{Task: out, NextTasks: []*model.Task{}}
	for _, t := range w.Tasks {
		if t.Status == model.TaskPending && t.Assignee == actor.Username {
			d.NextTasks = append(d.NextTasks, t)
		}
	}
	return d, nil
}

// Decided is the answer to approve and reject: the decided task and, in next_tasks, the instance's tasks pending
// for the same user once the decision is made (the next step of a process they approve step after step), so a
// client needs no GET /tasks to go on.
type Decided struct {
	*model.Task
	NextTasks []*model.Task `json:"next_tasks"`
}

// DecidedView rebuilds the answer of approve or reject of taskID on instanceID: the task as it is now and the
// caller's tasks of the instance pending now.
func (e *Engine) DecidedView(ctx context.Context, actor *model.Principal, taskID, instanceID string) (*Decided, error) {
	t, err := e.GetTask(ctx, actor, taskID)
	if err != nil {
		return nil, err
	}
	_, tasks, err := e.store.GetInstance(ctx, actor.TenantID, instanceID)
	if err != nil {
		return nil, err
	}
	d := &Decided{Task: t, NextTasks: []*model.Task{}}
	for _, nt := range tasks {
		if nt.Status == model.TaskPending && nt.Assignee == actor.Username {
			d.NextTasks = append(d.NextTasks, nt)
		}
	}
	return d, nil
}

// TransferRequest is the body of POST /tasks/{id}/transfer.
type TransferRequest struct {
	To      string `json:"to"`
	Comment string `json:"comment"`
}

// Transfer hands a pending task to another user and returns the new task.
func (e *Engine) Transfer(ctx context.Context, actor *model.Principal, taskID string, req TransferRequest) (*model.Task, error) {
	if err := model.ValidUsername(req.To); err != nil {
		return nil, err
	}
	if err := e.checkAssignable(ctx, actor.TenantID, req.To); err != nil {
		return nil, err
	}
	var out *model.Task
	_, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		nt, err := s.transfer(t, req.To, req.Comment, actor.Username)
		out = nt
		return err
	})
	return out, err
}

// AddSignRequest is the body of POST /tasks/{id}/add-sign.
type AddSignRequest struct {
	Users    []string `json:"users"`
	Position string   `json:"position"`
	Comment  string   `json:"comment"`
}

// AddSignResult is what add-sign answers: the task and the tasks it created.
type AddSignResult struct {
	Task    *model.Task   `json:"task"`
	Created []*model.Task `json:"created"`
}

// AddSign adds signers before, after or beside a pending task.
func (e *Engine) AddSign(ctx context.Context, actor *model.Principal, taskID string, req AddSignRequest) (*AddSignResult, error) {
	if len(req.Users) == 0 || len(req.Users) > 20 {
		return nil, model.CodedError(model.EINVALID, "invalid_users", "users must list 1 to 20 usernames")
	}
	users := dedupe(req.Users)
	for _, u := range users {
		if err := e.checkAssignable(ctx, actor.TenantID, u); err != nil {
			return nil, err
		}
	}
	switch req.Position {
	case SignBefore, SignAfter, SignParallel:
	default:
		return nil, model.CodedError(model.EINVALID, "invalid_position", "position must be before, after or parallel")
	}
	var out AddSignResult
	_, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		created, err := s.addSign(t, users, req.Position, req.Comment)
		out = AddSignResult{Task: t, Created: created}
		if out.Created == nil {
			out.Created = []*model.Task{}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
