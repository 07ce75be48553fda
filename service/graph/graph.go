// Package graph checks process template definitions before they are published and renders them (and instances
// of them) as Mermaid flowcharts.
//
// Validation reports every problem at once, each with a code from API.md and the node ids at fault, so that the
// designer can mark them all. A definition's shape is checked by its JSON Schema (model.DefinitionSchema,
// generated from the Go types; schema.go), compiled once; what a schema cannot express is checked here by hand.
// The graph checks follow Comet's: exactly one start, at least one end, no cycle
// (Kahn's algorithm; the strongly connected components of what Kahn leaves over give the actual cycles), every
// node reachable from the start and able to reach an end. All of it is O(V+E) over adjacency lists.
package graph

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/robfig/cron/v3"
)

// Options are the checks the caller wires in.
type Options struct {
	// CheckCondition compiles an edge condition (a MongoDB-style query) and returns an error naming the operator
	// or path at fault. Nil checks only that each condition is a JSON object.
	CheckCondition func(raw []byte) error
}

// Result is the answer of POST /templates/validate.
type Result struct {
	Valid  bool                    `json:"valid"`
	Errors []model.ValidationError `json:"errors"` // never null
	// Warnings do not stop publishing (e.g. unknown_user: a static approver that is no user today); never null.
	Warnings []model.ValidationError `json:"warnings"`
}

// Validate parses raw against the definition schema (Parse) and checks what it could parse (Check).
func Validate(raw []byte, opts Options) Result {
	r, _ := ValidateParsed(raw, opts)
	return r
}

// ValidateParsed is Validate that also returns what Parse could read of the definition (nil when its top level
// is unusable), for a caller that looks further into it (the unknown_user warnings) without parsing it again.
func ValidateParsed(raw []byte, opts Options) (Result, *model.Definition) {
	d, errs := Parse(raw)
	if d != nil {
		errs = append(errs, Check(d, opts)...)
	}
	errs = dedupe(errs)
	return Result{Valid: len(errs) == 0, Errors: errs, Warnings: []model.ValidationError{}}, d
}

// ValidateDefinition validates a definition built in code or read leniently: the schema (on its JSON form) and
// Check. It returns every problem found (an empty, non-nil slice when there is none).
func ValidateDefinition(d *model.Definition, opts Options) []model.ValidationError {
	if d == nil {
		return []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil, "there is no definition")}
	}
	return dedupe(append(schemaErrors(d), Check(d, opts)...))
}

// Check runs the checks a schema cannot express on a definition that Parse returned: the graph (one start, an
// end, no cycle, every node reachable and able to reach an end, edges between existing nodes, unique ids), the
// targets of branches, the rules that tie fields together (approvers, votes, timeouts) and the semantics of
// values (cron expressions, conditions, times, IP lists). It returns an empty, non-nil slice when all is well.
func Check(d *model.Definition, opts Options) []model.ValidationError {
	if d == nil {
		return []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil, "there is no definition")}
	}
	v := &validator{
		d:    d,
		opts: opts,
		errs: []model.ValidationError{},
		idx:  make(map[string]int32, len(d.Nodes)),
		cron: cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow),
	}
	v.checkIDs()
	for i := range d.Nodes {
		v.checkNode(i, &d.Nodes[i])
	}
	v.checkEdges()
	v.checkStructure()
	v.checkTitlePatterns()
	return v.errs
}

type validator struct {
	d    *model.Definition
	opts Options
	errs []model.ValidationError
	cron cron.Parser

	idx  map[string]int32 // node id → index of its first node
	arcs []arc            // explicit edges between known nodes, then implicit branch arcs
}

// arc is one directed connection between node indices. Branch arcs (on_timeout, timeout_branch, catch) count
// for reachability and cycles like edges do: a node reached only through a timeout branch is reachable.
type arc struct{ from, to int32 }

func (v *validator) add(code string, nodes []string, format string, args ...any) {
	v.errs = append(v.errs, model.NewValidationError(code, nodes, format, args...))
}

// at returns the node ids to blame, leaving out empty ones.
func at(ids ...string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// label names a node in messages: its id, or its position when it has none.
func label(i int, n *model.Node) string {
	if n.ID == "" {
		return fmt.Sprintf("#%d", i+1)
	}
	return n.ID
}

// checkIDs reports duplicate node ids and builds the id index (first node wins). Missing, malformed and long ids
// are the schema's.
func (v *validator) checkIDs() {
	var dups map[string]int
	for i := range v.d.Nodes {
		id := v.d.Nodes[i].ID
		if id == "" {
			continue
		}
		if _, seen := v.idx[id]; seen {
			if dups == nil {
				dups = map[string]int{}
			}
			dups[id]++
			continue
		}
		v.idx[id] = int32(i)
	}
	if dups == nil {
		return
	}
	for i := range v.d.Nodes { // in definition order
		id := v.d.Nodes[i].ID
		if n, ok := dups[id]; ok && v.idx[id] == int32(i) {
			v.add(model.CodeDuplicateID, at(id), "node id %q is used by %d nodes", id, n+1)
		}
	}
}

// first reports whether node i is the one its id names (not a duplicate, not id-less).
func (v *validator) first(i int) bool {
	id := v.d.Nodes[i].ID
	j, ok := v.idx[id]
	return ok && id != "" && j == int32(i)
}

// checkEdges reports edges to or from missing nodes, bad conditions, misused default edges, duplicate edges and
// edges that enter a start or error node or leave an end or terminate node.
func (v *validator) checkEdges() {
	n := len(v.d.Nodes)
	outs := make([]int32, n)     // outgoing edges per node
	defaults := make([]int32, n) // default edges among them
	var edgeIDs map[string]int
	pairs := make(map[[2]int32]int, len(v.d.Edges))
	var intoStart, intoError, outOfEnd []int32 // node indices, once each
	flagged := map[int32]bool{}
	mark := func(list *[]int32, n int32) {
		if !flagged[n] {
			flagged[n] = true
			*list = append(*list, n)
		}
	}
	v.arcs = slices.Grow(v.arcs, len(v.d.Edges))
	for i := range v.d.Edges {
		e := &v.d.Edges[i]
		if e.ID != "" {
			if edgeIDs == nil {
				edgeIDs = map[string]int{}
			}
			if j, dup := edgeIDs[e.ID]; dup {
				v.add(model.CodeDuplicateID, at(e.From, e.To), "edge id %q is used by edges #%d and #%d", e.ID, j+1, i+1)
			} else {
				edgeIDs[e.ID] = i
			}
		}
		from, fromOK := v.idx[e.From]
		to, toOK := v.idx[e.To]
		// An edge without from or to is the schema's to report.
		if e.From != "" && !fromOK {
			v.add(model.CodeUnknownNode, at(e.From), "%s comes from node %q, which does not exist", edgeName(i, e), e.From)
		}
		if e.To != "" && !toOK {
			v.add(model.CodeUnknownNode, at(e.To), "%s goes to node %q, which does not exist", edgeName(i, e), e.To)
		}
		hasCond := e.HasCondition()
		if fromOK {
			outs[from]++
			if e.Default {
				defaults[from]++
			}
		}
		if e.Default && hasCond {
			v.add(model.CodeBadNode, at(e.From, e.To), "%s is a default edge and has a condition: a default edge is taken exactly when no sibling is, so drop one of them", edgeName(i, e))
		}
		if hasCond {
			v.checkCondition(i, e)
		}
		if !fromOK || !toOK {
			continue
		}
		p := [2]int32{from, to}
		if j, dup := pairs[p]; dup {
			v.add(model.CodeBadNode, at(e.From, e.To), "edges #%d and #%d both go from %q to %q", j+1, i+1, e.From, e.To)
			continue
		}
		pairs[p] = i
		v.arcs = append(v.arcs, arc{from, to})
		switch v.d.Nodes[to].Type {
		case model.NodeStart:
			mark(&intoStart, to)
		case model.NodeError:
			mark(&intoError, to)
		}
		switch v.d.Nodes[from].Type {
		case model.NodeEnd, model.NodeTerminate:
			mark(&outOfEnd, from)
		}
	}
	for _, n := range intoStart {
		v.add(model.CodeBadNode, at(v.d.Nodes[n].ID), "start node %q has incoming edges: a start node begins the process", v.d.Nodes[n].ID)
	}
	for _, n := range intoError {
		v.add(model.CodeBadNode, at(v.d.Nodes[n].ID), "error node %q has incoming edges: it is activated by unhandled errors only", v.d.Nodes[n].ID)
	}
	for _, n := range outOfEnd {
		node := &v.d.Nodes[n]
		v.add(model.CodeBadNode, at(node.ID), "%s node %q has outgoing edges: it ends the process", node.Type, node.ID)
	}
	for i := range v.d.Nodes { // in definition order
		id := v.d.Nodes[i].ID
		switch {
		case defaults[i] > 1:
			v.add(model.CodeBadNode, at(id), "node %q has %d default edges; at most one edge from a node may be the default", id, defaults[i])
		case defaults[i] == 1 && outs[i] == 1:
			v.add(model.CodeBadNode, at(id), "node %q has a default edge but no other outgoing edge: a default edge is taken when no sibling is, so make it a plain edge", id)
		}
	}
}

func edgeName(i int, e *model.Edge) string {
	if e.ID != "" {
		return fmt.Sprintf("edge %q (%s → %s)", e.ID, e.From, e.To)
	}
	return fmt.Sprintf("edge #%d (%s → %s)", i+1, e.From, e.To)
}

func (v *validator) checkCondition(i int, e *model.Edge) {
	c := bytes.TrimSpace(e.Condition)
	if c[0] != '{' || v.opts.CheckCondition == nil {
		return // a condition that is not an object is the schema's to report
	}
	if err := v.opts.CheckCondition(c); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "condition") {
			msg = "condition: " + msg
		}
		v.add(model.CodeBadCondition, at(e.From, e.To), "%s: %s", edgeName(i, e), msg)
	}
}

// checkStructure checks the graph as a whole: the start and end nodes, reachability, dead ends and cycles.
func (v *validator) checkStructure() {
	nodes := v.d.Nodes
	var starts, errNodes []string
	var startIdx, errIdx, endIdx []int32
	ends := 0
	for i := range nodes {
		if !v.first(i) {
			continue
		}
		switch nodes[i].Type {
		case model.NodeStart:
			starts = append(starts, nodes[i].ID)
			startIdx = append(startIdx, int32(i))
		case model.NodeError:
			errNodes = append(errNodes, nodes[i].ID)
			errIdx = append(errIdx, int32(i))
		case model.NodeEnd:
			ends++
			endIdx = append(endIdx, int32(i))
		case model.NodeTerminate:
			endIdx = append(endIdx, int32(i))
		}
	}
	switch {
	case len(starts) == 0:
		v.add(model.CodeNoStart, nil, "the template has no start node")
	case len(starts) > 1:
		v.add(model.CodeMultipleStarts, starts, "the template has %d start nodes (%s); it needs exactly one", len(starts), strings.Join(starts, ", "))
	}
	if ends == 0 {
		v.add(model.CodeNoEnd, nil, "the template has no end node")
	}
	if len(errNodes) > 1 {
		v.add(model.CodeBadNode, errNodes, "the template has %d error nodes (%s); it may have at most one", len(errNodes), strings.Join(errNodes, ", "))
	}

	g := newCSR(len(nodes), v.arcs)
	if len(startIdx) > 0 {
		// The error node has no incoming edges by design: it and what it leads to are reachable too.
		seen := g.bfs(append(startIdx, errIdx...), false)
		v.reportUnseen(seen, model.CodeUnreachable, "is not reachable from the start", "are not reachable from the start", func(t string) bool { return t == model.NodeError })
	}
	if len(endIdx) > 0 {
		seen := g.bfs(endIdx, true)
		v.reportUnseen(seen, model.CodeDeadEnd, "cannot reach an end or terminate node", "cannot reach an end or terminate node", func(t string) bool { return t == model.NodeEnd || t == model.NodeTerminate })
	}
	for _, c := range g.cycles() {
		ids := make([]string, len(c))
		for k, n := range c {
			ids[k] = nodes[n].ID
		}
		v.add(model.CodeCycle, ids, "cycle: %s", cyclePath(ids))
	}
}

// reportUnseen adds one error listing the nodes (in definition order) that a search did not reach.
func (v *validator) reportUnseen(seen []bool, code, one, many string, exempt func(nodeType string) bool) {
	var ids []string
	for i := range v.d.Nodes {
		if !seen[i] && v.first(i) && !exempt(v.d.Nodes[i].Type) {
			ids = append(ids, v.d.Nodes[i].ID)
		}
	}
	switch len(ids) {
	case 0:
	case 1:
		v.add(code, ids, "node %q %s", ids[0], one)
	default:
		v.add(code, ids, "%d nodes %s: %s", len(ids), many, listIDs(ids))
	}
}

func listIDs(ids []string) string {
	const max = 20
	if len(ids) <= max {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:max], ", "), len(ids)-max)
}

func cyclePath(ids []string) string {
	const max = 30
	shown := ids
	if len(ids) > max {
		shown = ids[:max]
	}
	s := strings.Join(shown, " → ")
	if len(ids) > max {
		return fmt.Sprintf("%s → … (%d nodes) → %s", s, len(ids), ids[0])
	}
	return s + " → " + ids[0]
}

// dedupe drops repeated errors (same code, message and nodes), keeping the first.
func dedupe(errs []model.ValidationError) []model.ValidationError {
	out := make([]model.ValidationError, 0, len(errs))
	seen := make(map[string]bool, len(errs))
	for _, e := range errs {
		if e.Nodes == nil {
			e.Nodes = []string{}
		}
		k := e.Code + "\x00" + e.Message + "\x00" + strings.Join(e.Nodes, "\x00")
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}
