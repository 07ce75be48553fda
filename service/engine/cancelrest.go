package engine

import (
	"sort"

	"github.com/halley-bpm/halley/model"
)

// The cancelling partial join (API.md "Partial join"): {"min":N,"cancel_rest":true} activates at N taken
// incoming edges like {"min":N}, and then cancels the branches still running that can only lead into it
// (workflow patterns 29 and 32: cancelling discriminator / cancelling partial join). A branch that may reach an end
// without passing the join (by an edge, or by a node's catch, timeout or on_timeout branch) runs on.

// cancelRest cancels the active nodes upstream of join that cannot reach an end node other than through it.
func (s *step) cancelRest(join string) error {
	up := ancestors(s.c, join)
	escape := s.escapesWithout(join)
	ids := make([]string, 0, len(up))
	for id := range up {
		if ns := s.node(id); ns != nil && ns.Active() && !escape[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		ns := s.node(id)
		if err := s.endVisit(ns, model.MoveCancel); err != nil {
			return err
		}
		if err := s.cancelNodeTasks(ns.NodeInstanceID, "cancelled by the partial join of "+join); err != nil {
			return err
		}
		s.history("node.cancelled", id, "", "", map[string]any{"by_join": join})
	}
	return nil
}

// escapesWithout returns the nodes from which an end (or terminate) node is reachable without passing the node
// without: along edges and the branches a node may take (catch, timeout_branch, on_timeout branch).
func (s *step) escapesWithout(without string) map[string]bool {
	into := map[string][]string{} // target -> sources
	for _, e := range s.c.Def.Edges {
		into[e.To] = append(into[e.To], e.From)
	}
	for i := range s.c.Def.Nodes {
		n := &s.c.Def.Nodes[i]
		for _, b := range []string{n.ErrorHandler.Catch.Branch, n.TimeoutBranch, n.OnTimeout.Branch} {
			if b != "" {
				into[b] = append(into[b], n.ID)
			}
		}
	}
	out := map[string]bool{}
	var stack []string
	for i := range s.c.Def.Nodes {
		if n := &s.c.Def.Nodes[i]; (n.Type == model.NodeEnd || n.Type == model.NodeTerminate) && n.ID != without {
			out[n.ID] = true
			stack = append(stack, n.ID)
		}
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, from := range into[id] {
			if from != without && !out[from] {
				out[from] = true
				stack = append(stack, from)
			}
		}
	}
	return out
}
