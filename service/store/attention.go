package store

import (
	"context"
	"fmt"

	"github.com/halley-bpm/halley/model"
)

// stuckTasksSQL selects the open tasks (pending or waiting) of a tenant whose assignee is disabled or no longer
// exists; the users row is NULL for a deleted user.
const stuckTasksSQL = `SELECT t.id AS task_id, t.instance_id, t.node_id, t.node_name, t.assignee, u.username AS user_name, u.disabled
FROM tasks t LEFT JOIN users u ON u.tenant_id = t.tenant_id AND u.username = t.assignee
WHERE t.tenant_id = ? AND t.status IN (?, ?) AND t.assignee <> '' AND (u.username IS NULL OR u.disabled = ?)`

type stuckTaskRow struct {
	TaskID     string
	InstanceID string
	NodeID     string
	NodeName   string
	Assignee   string
	UserName   *string
	Disabled   *bool
}

// ListNeedsAttention lists, newest first, the failed instances of a tenant and its running instances with an open
// task for a disabled or deleted user. A failed instance carries its node error (reason "failed", error_code its
// code); a running one the stuck tasks (reason and error_code "assignee_disabled", or "assignee_deleted" when no
// task of a disabled user is among them).
func (s *Store) ListNeedsAttention(ctx context.Context, tenant string, p model.Page) ([]*model.AttentionItem, string, error) {
	db := s.db.WithContext(ctx)
	open := []any{tenant, string(model.TaskPending), string(model.TaskWaiting), true}
	q := db.Where("tenant_id = ?", tenant).
		Where("status = ? OR (status = ? AND id IN (SELECT instance_id FROM ("+stuckTasksSQL+") stuck))",
			append([]any{string(model.StatusFailed), string(model.StatusRunning)}, open...)...)
	if p.Cursor != "" {
		q = q.Where("id < ?", p.Cursor)
	}
	var rows []instanceRow
	if err := q.Order("id DESC").Limit(p.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list the instances needing attention: %w", err)
	}
	next := ""
	if len(rows) > p.Limit {
		rows = rows[:p.Limit]
		next = rows[len(rows)-1].ID
	}
	items := make([]*model.AttentionItem, 0, len(rows))
	byID := map[string]*model.AttentionItem{}
	var running []string
	for i := range rows {
		inst, err := rows[i].toModel(true)
		if err != nil {
			return nil, "", err
		}
		it := &model.AttentionItem{Instance: inst, Tasks: []model.AttentionTask{}}
		if inst.Status == model.StatusFailed {
			it.Reason, it.Error = model.AttentionFailed, inst.State.Error
			if it.Error != nil {
				it.ErrorCode = it.Error.Code
			}
		} else {
			running = append(running, inst.ID)
			byID[inst.ID] = it
		}
		inst.State = model.InstanceState{}
		items = append(items, it)
	}
	if len(running) > 0 {
		var stuck []stuckTaskRow
		err := db.Raw(stuckTasksSQL+" AND t.instance_id IN ? ORDER BY t.created_at, t.id", append(open, running)...).Scan(&stuck).Error
		if err != nil {
			return nil, "", fmt.Errorf("store: unable to list the stuck tasks: %w", err)
		}
		for _, r := range stuck {
			it := byID[r.InstanceID]
			reason := model.AttentionAssigneeDeleted
			if r.UserName != nil {
				reason = model.AttentionAssigneeDisabled
			}
			it.Tasks = append(it.Tasks, model.AttentionTask{TaskID: r.TaskID, NodeID: r.NodeID, NodeName: r.NodeName, Assignee: r.Assignee, Reason: reason})
			if it.Reason != model.AttentionAssigneeDisabled {
				it.Reason = reason
			}
		}
		for _, id := range running {
			byID[id].ErrorCode = byID[id].Reason
		}
	}
	// A running instance whose stuck task was decided or moved between the two queries is no longer listed.
	kept := items[:0]
	for _, it := range items {
		if it.Reason != "" {
			kept = append(kept, it)
		}
	}
	return kept, next, nil
}
