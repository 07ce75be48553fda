package engine

import (
	"context"

	"github.com/halley-bpm/halley/model"
)

// MoveInStep runs a step on instance id that writes a history item and then makes one move by the engine's own
// transition functions: of node's visit ("node"), of node's first open task ("task"), or of the instance
// ("instance"). Tests use it to see a refused move fail the whole step.
func MoveInStep(e *Engine, ctx context.Context, id, kind, node string, m model.Move) error {
	_, err := e.update(ctx, "test", model.DefaultTenant, id, model.ActorSystem, func(s *step) error {
		s.history("test.before_move", node, "", "", nil)
		switch kind {
		case "node":
			return s.moveNode(s.node(node), m)
		case "task":
			return s.moveTask(s.openTasks(s.node(node).NodeInstanceID, nil)[0], m, "")
		}
		return s.moveInstance(m)
	})
	return err
}

// What the engine's black-box tests reach inside the engine for; this file is compiled into its tests only.

// PluginOutcome is what became of a plugin run, as the plugin queue reports it.
type PluginOutcome = pluginOutcome

// GroupStats are the group-commit counters.
type GroupStats = groupStats

// PluginResult applies a plugin run's outcome as the plugin queue does.
func (e *Engine) PluginResult(ctx context.Context, pr *model.PluginRun, out PluginOutcome) error {
	return e.pluginResult(ctx, pr, out, false)
}

// FireTimer fires one timer in a transaction of its own, as the engine does when a batch's transaction failed.
func (e *Engine) FireTimer(ctx context.Context, tenant string, t *model.Timer) error {
	return e.fireTimer(ctx, tenant, t)
}

// WaitEnd waits until the instance ends or ctx is done, and returns it.
func (e *Engine) WaitEnd(ctx context.Context, tenant, id string) (*model.Instance, error) {
	x, cancel := e.ended(id)
	defer cancel()
	return e.waitEnd(ctx, tenant, id, x, true)
}

// GroupStats returns the group-commit counters (zero with Options.NoGroupCommit).
func (e *Engine) GroupStats() GroupStats {
	if e.group == nil {
		return GroupStats{}
	}
	e.group.mu.Lock()
	defer e.group.mu.Unlock()
	return e.group.stats
}

// ResultToken signs a plugin run's result URL.
func ResultToken(key []byte, runID string) string { return resultToken(key, runID) }
