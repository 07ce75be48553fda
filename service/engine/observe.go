package engine

import (
	"context"
	"time"

	"github.com/halley-bpm/halley/model"
)

// StepObserver is told about every step the engine ends: committed, or failed with its error. Metrics and traces
// hang here (Options.Observer); StepDone runs on the step's goroutine after its commit (or failure), so it must not
// block.
type StepObserver interface {
	StepDone(ctx context.Context, r StepReport)
}

// StepReport is what one step was and did.
type StepReport struct {
	// Action names the step: start, approve, reject, transfer, add_sign, return, reclaim, jump, terminate,
	// withdraw, resume (a callback or a bookmark), message, plugin_result, timer.
	Action     string
	TenantID   string
	InstanceID string
	// Template is the key of the instance's template when the step committed ("" when it failed, like Moves).
	Template string
	// Took is the wall time from the step's first attempt to its end, reads outside the transaction and the wait
	// for its group included.
	Took time.Duration
	// Err is why the step failed; nil when it committed.
	Err error
	// Moves are the transitions the committed step made, in order (none when it failed).
	Moves []Moved
}

// Moved is one transition of a step.
type Moved struct {
	Kind    string // node, task, instance
	Subject string // the node id, the task id or the instance id
	// NodeType is the type of the node moved (Kind node), "" otherwise.
	NodeType string
	Move     model.Move
	From     string
	To       string
}

// noObserver is the StepObserver of an engine nobody observes.
type noObserver struct{}

func (noObserver) StepDone(context.Context, StepReport) {}

// stepEnded tells the observer that a step ended and returns its error.
func (e *Engine) stepEnded(ctx context.Context, name, tenant, instanceID string, began time.Time, s *step, err error) error {
	if !e.observed {
		return err
	}
	r := StepReport{Action: name, TenantID: tenant, InstanceID: instanceID, Took: time.Since(began), Err: err}
	if s != nil {
		r.Moves = s.moves
		r.Template = s.inst.Template
	}
	e.observer.StepDone(ctx, r)
	return err
}

// moved records a transition of the step for its observer.
func (s *step) moved(kind, subject string, typ string, m model.Move, from, to string) {
	if s.observed {
		s.moves = append(s.moves, Moved{Kind: kind, Subject: subject, NodeType: typ, Move: m, From: from, To: to})
	}
}
