package engine

import (
	"fmt"

	"github.com/halley-bpm/halley/model"
)

// Joins (API.md "Semantics changes"). Every incoming edge of a node ends up taken, pruned (routing did not choose
// it) or killed (its source was rejected or failed). A node's join looks at the tally of its incoming edges and
// says whether the node waits, activates, or is skipped — as pruned or as killed, which is what its outgoing edges
// then become (skipping propagates: dead-path elimination that tells routing from rejection).

// edgeTally counts the states of a node's incoming edges; open edges have no state yet.
type edgeTally struct{ taken, pruned, killed, open int }

// joinVerdict is what a join decides from its tally.
type joinVerdict int

const (
	joinWait       joinVerdict = iota // an open edge may still change the answer
	joinFire                          // activate the node
	joinSkipPruned                    // skip it; its outgoing edges are pruned
	joinSkipKilled                    // skip it; its outgoing edges are killed
)

func (v joinVerdict) String() string {
	return [...]string{"wait", "fire", "skip-pruned", "skip-killed"}[v]
}

// joinFunc decides one join kind; min is N of {"min":N}.
type joinFunc func(t edgeTally, min int) joinVerdict

// joins holds one function per join kind.
var joins = map[string]joinFunc{
	model.JoinAnd: joinAnd,
	model.JoinOr:  joinOr,
	model.JoinMin: joinMin,
}

// joinAnd is the synchronizing merge: it activates once every incoming edge is taken or pruned and at least one
// is taken, so it merges exactly the branches routing chose. One killed edge skips it as killed at once; all
// pruned skip it as pruned.
func joinAnd(t edgeTally, _ int) joinVerdict {
	switch {
	case t.killed > 0:
		return joinSkipKilled
	case t.open > 0:
		return joinWait
	case t.taken > 0:
		return joinFire
	}
	return joinSkipPruned
}

// joinOr activates with the first taken edge (later arrivals are absorbed) and is skipped when none can still be
// taken: as killed when one of them was killed, else as pruned.
func joinOr(t edgeTally, _ int) joinVerdict {
	switch {
	case t.taken > 0:
		return joinFire
	case t.open > 0:
		return joinWait
	case t.killed > 0:
		return joinSkipKilled
	}
	return joinSkipPruned
}

// joinMin activates at min taken edges and is skipped when fewer than min can still be taken: as killed when an
// edge was killed, else as pruned (routing chose fewer branches than the join needs).
func joinMin(t edgeTally, min int) joinVerdict {
	switch {
	case t.taken >= min:
		return joinFire
	case t.taken+t.open >= min:
		return joinWait
	case t.killed > 0:
		return joinSkipKilled
	}
	return joinSkipPruned
}

// tally counts the states of a node's incoming edges.
func (s *step) tally(id string) edgeTally {
	var t edgeTally
	for _, i := range s.c.IncomingIndexes(id) {
		switch s.inst.State.Edges[i] {
		case model.EdgeTaken:
			t.taken++
		case model.EdgePruned:
			t.pruned++
		case model.EdgeKilled:
			t.killed++
		default:
			t.open++
		}
	}
	return t
}

// verdict applies a node's join to its incoming edges.
func (s *step) verdict(n *model.Node) joinVerdict {
	f := joins[n.JoinMode()]
	if f == nil {
		f = joinAnd // validation refuses other modes; an unknown one behaves as the default
	}
	return f(s.tally(n.ID), n.Join.Min)
}

// consider activates or skips a node whose incoming edges changed, according to its join.
func (s *step) consider(id string) error {
	if cur := s.node(id); cur != nil && s.visitIsCurrent(cur) {
		return nil // the join fired already (or the node was skipped): later arrivals change nothing
	}
	n := s.c.Def.Node(id)
	switch v := s.verdict(n); v {
	case joinFire:
		if n.Join.CancelRest {
			if err := s.cancelRest(id); err != nil { // cancelrest.go
				return err
			}
		}
		return s.activate(id, model.MoveActivate)
	case joinSkipPruned:
		if t := s.tally(id); t.taken+t.open > 0 {
			// Chosen branches end here (a partial join that routing gave too few branches): if that leaves no end
			// reachable, the instance fails with no_route at this node rather than being "rejected".
			s.stranded = &model.NodeFailure{Code: model.NodeErrNoRoute, NodeID: id,
				Message: fmt.Sprintf("join %s of node %q cannot activate: routing chose only %d of its incoming edges", n.Join, id, t.taken+t.open)}
		}
		return s.skip(id, model.EdgePruned)
	case joinSkipKilled:
		return s.skip(id, model.EdgeKilled)
	}
	return nil
}

// couldFire reports whether a node not yet decided may still activate (for the reachability of an end).
func (s *step) couldFire(id string) bool {
	switch s.verdict(s.c.Def.Node(id)) {
	case joinSkipPruned, joinSkipKilled:
		return false
	}
	return true
}

// skip marks a node skipped and gives its outgoing edges the skip's state (pruned or killed).
func (s *step) skip(id string, as byte) error {
	ns, err := s.newVisit(s.c.Def.Node(id), model.MoveSkip)
	if err != nil {
		return err
	}
	ns.EndedAt = ns.StartedAt
	s.history("node.skipped", id, "", "", map[string]any{"as": edgeStateName(as)})
	return s.markOutgoing(id, as)
}

// Why the edges of this step were killed, for the status of an instance they leave without a reachable end.
const (
	causeNone      = 0
	causeRejection = 1
	causeFailure   = 2
)

// kill gives every outgoing edge of a rejected or failed node the killed state and advances.
func (s *step) kill(id string, cause int) error {
	s.cause = max(s.cause, cause)
	return s.markOutgoing(id, model.EdgeKilled)
}

// markOutgoing sets every outgoing edge of a node to st (pruned or killed) and considers their targets.
func (s *step) markOutgoing(id string, st byte) error {
	idx := s.edgeIndexes(id)
	for _, i := range idx {
		s.inst.State.Edges[i] = st
	}
	if len(idx) == 0 {
		return s.settle()
	}
	return s.propagate(idx)
}

// edgeStateName names an edge state for history and diagrams.
func edgeStateName(st byte) string {
	switch st {
	case model.EdgeTaken:
		return "taken"
	case model.EdgePruned:
		return "pruned"
	case model.EdgeKilled:
		return "killed"
	}
	return ""
}

// upgradeEdges turns the EdgeDead of an instance written before pruned and killed were told apart into one of
// them, from what its source became: completed → pruned (routing did not choose the edge); skipped → what the
// source's own incoming edges say (killed when one of them is killed, else pruned); rejected, failed, cancelled
// → killed. Nodes the old engine had decided stay decided, so a running instance goes on as before, and its
// remaining joins follow the new rules.
func (s *step) upgradeEdges() {
	st := s.inst.State.Edges
	legacy := false
	for _, e := range st {
		if e == model.EdgeDead {
			legacy = true
			break
		}
	}
	if !legacy {
		return
	}
	skippedAs := map[string]byte{}
	var asSkipped func(id string) byte
	asSkipped = func(id string) byte {
		if v, ok := skippedAs[id]; ok {
			return v
		}
		skippedAs[id] = model.EdgePruned // a DAG has no cycle; this only guards a corrupt state
		v := model.EdgePruned
		for _, i := range s.c.IncomingIndexes(id) {
			if s.upgradeEdge(i, asSkipped) == model.EdgeKilled {
				v = model.EdgeKilled
			}
		}
		skippedAs[id] = v
		return v
	}
	for i := range st {
		s.upgradeEdge(i, asSkipped)
	}
}

// upgradeEdge converts edge i if it is EdgeDead and returns its state.
func (s *step) upgradeEdge(i int, asSkipped func(string) byte) byte {
	st := s.inst.State.Edges
	if st[i] != model.EdgeDead {
		return st[i]
	}
	v := model.EdgeKilled
	if src := s.node(s.c.Def.Edges[i].From); src != nil {
		switch src.State {
		case model.NodeCompleted:
			v = model.EdgePruned
		case model.NodeSkipped:
			v = asSkipped(src.NodeID)
		}
	}
	st[i] = v
	return v
}
