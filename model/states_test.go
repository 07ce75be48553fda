package model_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
)

// Every allowed move reaches its state, and every other (move, state) pair of a table is refused with an error
// that wraps ErrTransition and names the kind, the move and the state.
func TestTablesAllowTheirRowsAndNothingElse(t *testing.T) {
	nodeStates := []model.NodeState{model.NodeNone, model.NodeActive, model.NodeWaiting, model.NodeCompleted, model.NodeRejected,
		model.NodeSkipped, model.NodeFailed, model.NodeCancelled, model.NodeReset}
	taskStatuses := append([]model.TaskStatus{model.TaskNone}, model.TaskStatuses...)
	instanceStatuses := append([]model.InstanceStatus{model.StatusNone}, model.InstanceStatuses...)
	t.Run("node", func(t *testing.T) { checkTable(t, model.NodeMachine, nodeStates) })
	t.Run("task", func(t *testing.T) { checkTable(t, model.TaskMachine, taskStatuses) })
	t.Run("instance", func(t *testing.T) { checkTable(t, model.InstanceMachine, instanceStatuses) })
}

func checkTable[S ~string](t *testing.T, m *model.Machine[S], states []S) {
	t.Helper()
	allowed := 0
	for _, row := range m.Transitions {
		if !slices.Contains(states, row.To) {
			t.Errorf("%s: %s leads to %q, which is not a state", m.Kind, row.Move, row.To)
		}
		for _, from := range states {
			got, err := m.Next(row.Move, from)
			if slices.Contains(row.From, from) {
				allowed++
				if err != nil || got != row.To {
					t.Errorf("%s: %s from %q = %q, %v; want %q", m.Kind, row.Move, from, got, err, row.To)
				}
				continue
			}
			var te *model.TransitionError
			if !errors.Is(err, model.ErrTransition) || !errors.As(err, &te) || te.Kind != m.Kind || te.Move != row.Move || te.From != string(from) {
				t.Errorf("%s: %s from %q = %q, %v; want a refusal", m.Kind, row.Move, from, got, err)
			}
			if got != from {
				t.Errorf("%s: a refused %s from %q answers %q, want the state unchanged", m.Kind, row.Move, from, got)
			}
		}
	}
	if allowed == 0 {
		t.Fatalf("%s: no move is allowed", m.Kind)
	}
	if _, err := m.Next("no-such-move", states[0]); !errors.Is(err, model.ErrTransition) {
		t.Errorf("%s: an unknown move is not refused: %v", m.Kind, err)
	}
}

func TestTransitionErrorReads(t *testing.T) {
	_, err := model.NodeMachine.Next(model.MoveComplete, model.NodeSkipped)
	if err == nil || err.Error() != "node: complete is not allowed from skipped" {
		t.Fatalf("error %v", err)
	}
	_, err = model.TaskMachine.Next(model.MoveApprove, model.TaskNone)
	if err == nil || err.Error() != "task: approve is not allowed from none" {
		t.Fatalf("error %v", err)
	}
	wrapped := fmt.Errorf("engine: instance i1: %w", err)
	if !errors.Is(wrapped, model.ErrTransition) {
		t.Fatal("a wrapped refusal is not ErrTransition")
	}
}

// Examples a reader of the tables would check first.
func TestTablesSayWhatTheEngineDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a reclaim reopens a completed node", model.NodeMachine.Allows(model.MoveReopen, model.NodeCompleted)},
		{"a skipped node never completes", !model.NodeMachine.Allows(model.MoveComplete, model.NodeSkipped)},
		{"an active node is not activated again", !model.NodeMachine.Allows(model.MoveActivate, model.NodeActive)},
		{"a return reenters a completed node", model.NodeMachine.Allows(model.MoveReenter, model.NodeCompleted)},
		{"a decided task is not decided again", !model.TaskMachine.Allows(model.MoveApprove, model.TaskApproved)},
		{"a waiting task is not decided", !model.TaskMachine.Allows(model.MoveReject, model.TaskWaiting)},
		{"a reclaim reopens an approved task", model.TaskMachine.Allows(model.MoveReclaim, model.TaskApproved)},
		{"an ended instance does not end again", !model.InstanceMachine.Allows(model.MoveTerminate, model.StatusCompleted)},
		{"a jump repairs a failed instance", model.InstanceMachine.Allows(model.MoveRepair, model.StatusFailed)},
	} {
		if !tc.ok {
			t.Error(tc.name)
		}
	}
}

func TestMermaidDrawsEveryRow(t *testing.T) {
	got := model.TaskMachine.Mermaid()
	if !strings.HasPrefix(got, "stateDiagram-v2\n") {
		t.Fatalf("diagram %q", got)
	}
	for _, want := range []string{"    [*] --> pending: open\n", "    pending --> cancelled: cancel\n", "    waiting --> cancelled: cancel\n",
		"    approved --> pending: reclaim\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("diagram lacks %q:\n%s", want, got)
		}
	}
	arrows := 0
	for _, row := range model.TaskMachine.Transitions {
		arrows += len(row.From)
	}
	if n := strings.Count(got, "-->"); n != arrows {
		t.Errorf("%d arrows, want %d", n, arrows)
	}
}
