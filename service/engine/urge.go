package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/halley-bpm/halley/model"
)

// UrgeInterval is how long after an urge the same instance cannot be urged again (API.md "Urge").
const UrgeInterval = 10 * time.Minute

// Urge (催办) tells the assignee of every pending task of a running instance to decide: task.urged (an event the
// notifications deliver, and a history item) per task, each task marked urged_at. Only the initiator or an admin
// urges; an instance urged less than UrgeInterval ago answers 429 rate_limited with retry_after. The last urge is
// kept in the instance's state, so the limit holds across replicas and racing requests: the instance's row lock
// serialises them, and exactly one urge per window passes. It returns the number of tasks urged.
func (e *Engine) Urge(ctx context.Context, actor *model.Principal, id, comment string) (int, error) {
	if len(comment) > 4000 {
		return 0, model.CodedError(model.EINVALID, "invalid_comment", "comment must be at most 4000 characters")
	}
	n := 0
	_, err := e.update(ctx, "urge", actor.TenantID, id, actor.Username, func(s *step) error {
		n = 0
		switch {
		case s.inst.Initiator != actor.Username && !actor.IsAdmin():
			return model.CodedError(model.EFORBIDDEN, "not_allowed", "only the initiator or an admin may urge an instance")
		case s.inst.Ended():
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s: there is nothing to urge", id, s.inst.Status)
		}
		if last := s.inst.State.UrgedAt; last != nil && s.now.Before(last.Add(UrgeInterval)) {
			secs := int(math.Ceil(last.Add(UrgeInterval).Sub(s.now).Seconds()))
			return model.CodedError(model.ERATELIMITED, "urged_recently", "instance %s was urged at %s; urge it again in %d seconds",
				id, last.Format(time.RFC3339), secs).WithDetails(map[string]any{"retry_after": secs})
		}
		now := s.now
		for _, t := range s.w.Tasks {
			if t.Status != model.TaskPending {
				continue
			}
			t.UrgedAt = &now
			s.changed(t)
			s.history("task.urged", t.NodeID, t.ID, comment, map[string]any{"assignee": t.Assignee})
			s.event("task.urged", t.NodeID, t, eventExtra{Actor: actor.Username, Comment: comment, NodeName: t.NodeName})
			n++
		}
		s.inst.State.UrgedAt = &now
		s.history("instance.urged", "", "", comment, map[string]any{"tasks": n})
		return nil
	})
	if errors.Is(err, model.ErrNoInstance) {
		return 0, model.CodedError(model.ENOTFOUND, "instance_not_found", "instance %q not found", id)
	}
	return n, err
}
