package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/halley-bpm/halley/model"
)

// taskAction locks the task's instance and, in one step, runs act on the task after the common checks (taskStep):
// it exists (404), it is the caller's or the caller is an admin (403), it is pending (409).
func (e *Engine) taskAction(ctx context.Context, name string, actor *model.Principal, taskID string, act func(s *step, t *model.Task) error) (*model.Work, error) {
	instID := instanceOf(taskID)
	if instID == "" {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	w, err := e.update(ctx, name, actor.TenantID, instID, actor.Username, taskStep{id: taskID, actor: actor, act: act}.run)
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
	if errors.Is(err, model.ErrNoInstance) {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	return w, err
}

// taskStep is the step of a task action: the task's checks, then the action on it.
type taskStep struct {
	id    string
	actor *model.Principal
	act   func(s *step, t *model.Task) error
}

func (ts taskStep) run(s *step) error {
	t := s.task(ts.id)
	if t == nil {
		// Not open (or unknown): why is read after the transaction. Reading it here would take a second
		// connection while this one holds the row lock; with every pooled connection held by a request racing on
		// the same instance, that read would wait forever.
		return errTaskNotOpen
	}
	if t.Assignee != ts.actor.Username && !ts.actor.IsAdmin() {
		return model.CodedError(model.EFORBIDDEN, "not_assignee", "task %s is not yours", ts.id)
	}
	if t.Status != model.TaskPending {
		return model.CodedError(model.ECONFLICT, "task_not_pending", "task %s is %s: it is not its turn yet", ts.id, t.Status).
			WithDetails(map[string]any{"status": t.Status})
	}
	if s.inst.Ended() {
		return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s", s.inst.ID, s.inst.Status)
	}
	return ts.act(s, t)
}

// errTaskNotOpen aborts a task action whose task is not open; taskAction then says why (404, 403 or 409).
var errTaskNotOpen = errors.New("engine: task is not open")

// Approve approves a pending task; data (a JSON object, or empty) is written into the context as the task's form
// allows (formdata.go). attachments (ids of uploaded files, API.md "Attachments") go with the comment into the
// history.
func (e *Engine) Approve(ctx context.Context, actor *model.Principal, taskID, comment string, data json.RawMessage, attachments ...model.FileRef) (*Decided, error) {
	return e.decide(ctx, actor, taskID, decision{Approve: true, Comment: comment, Data: data, Attachments: attachments})
}

// Reject rejects a pending task. data is checked as approve checks it, and not written.
func (e *Engine) Reject(ctx context.Context, actor *model.Principal, taskID, comment string, data json.RawMessage, attachments ...model.FileRef) (*Decided, error) {
	return e.decide(ctx, actor, taskID, decision{Comment: comment, Data: data, Attachments: attachments})
}

func (e *Engine) decide(ctx context.Context, actor *model.Principal, taskID string, d decision) (*Decided, error) {
	if len(d.Comment) > 4000 {
		return nil, model.CodedError(model.EINVALID, "invalid_comment", "comment must be at most 4000 characters")
	}
	d.Data = json.RawMessage(strings.TrimSpace(string(d.Data)))
	if len(d.Data) > 0 && string(d.Data) != "null" && d.Data[0] != '{' {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if err := model.CheckDocumentDepth("data", d.Data); err != nil {
		return nil, err
	}
	ids := make([]string, len(d.Attachments))
	for i, a := range d.Attachments {
		ids[i] = a.ID
	}
	if err := model.CheckAttachmentIDs("attachments", ids); err != nil {
		return nil, err
	}
	d.By = actor.Username
	name := "reject"
	if d.Approve {
		name = "approve"
	}
	var out *model.Task
	w, err := e.taskAction(ctx, name, actor, taskID, func(s *step, t *model.Task) error {
		out = t
		return s.decide(t, d)
	})
	if err != nil {
		return nil, err
	}
	res := &Decided{Task: out, NextTasks: []*model.Task{}}
	for _, t := range w.Tasks {
		if t.Status == model.TaskPending && t.Assignee == actor.Username {
			res.NextTasks = append(res.NextTasks, t)
		}
	}
	return res, nil
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

// Transfer hands a pending task to another user and returns the new task.
func (e *Engine) Transfer(ctx context.Context, actor *model.Principal, taskID, to, comment string) (*model.Task, error) {
	if err := model.ValidUsername(to); err != nil {
		return nil, err
	}
	if err := e.checkAssignable(ctx, actor.TenantID, to); err != nil {
		return nil, err
	}
	var out *model.Task
	_, err := e.taskAction(ctx, "transfer", actor, taskID, func(s *step, t *model.Task) error {
		nt, err := s.transfer(t, to, comment, actor.Username)
		out = nt
		return err
	})
	return out, err
}

// AddSignResult is what add-sign answers: the task and the tasks it created.
type AddSignResult struct {
	Task    *model.Task   `json:"task"`
	Created []*model.Task `json:"created"`
}

// AddSign adds signers before, after or beside (position: before, after, parallel) a pending task.
func (e *Engine) AddSign(ctx context.Context, actor *model.Principal, taskID string, users []string, position, comment string) (*AddSignResult, error) {
	if len(users) == 0 || len(users) > 20 {
		return nil, model.CodedError(model.EINVALID, "invalid_users", "users must list 1 to 20 usernames")
	}
	users = dedupe(users)
	for _, u := range users {
		if err := e.checkAssignable(ctx, actor.TenantID, u); err != nil {
			return nil, err
		}
	}
	switch position {
	case signBefore, signAfter, signParallel:
	default:
		return nil, model.CodedError(model.EINVALID, "invalid_position", "position must be before, after or parallel")
	}
	var out AddSignResult
	_, err := e.taskAction(ctx, "add_sign", actor, taskID, func(s *step, t *model.Task) error {
		created, err := s.addSign(t, users, position, comment)
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
