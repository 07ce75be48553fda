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
