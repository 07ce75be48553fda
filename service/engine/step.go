package engine

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// step is one engine transaction on one instance (docs/engine.md "One step = one transaction"): it mutates w
// (under the instance row lock) and is thrown away. Every method is deterministic given w, so the store may call
// the whole thing again after a deadlock.
type step struct {
	e            *Engine
	ctx          context.Context
	w            *model.Work
	c            *template.Compiled
	inst         *model.Instance
	now          time.Time
	actor        string
	retryAttempt map[string]int // attempt count carried into a node run again after its retry back-off
	// depth guards the recursion of automatic steps (a DAG cannot loop, but an error node catching its own
	// error could).
	depth int
	// advancing counts the propagations in progress. The instance is settled only when the outermost one is
	// done: halfway through, the targets of edges just taken are not activated yet, so nothing may look active
	// and a running instance would be rejected (or completed) too early.
	advancing int
	// reads are the answers of reads done outside the transaction (nil: read at once).
	reads *reads
	// cause is why this step killed edges (causeRejection, causeFailure), failure the node error of a failure
	// among them, and stranded a routing dead end (a partial join given too few branches, an ignored no_route):
	// they decide the status of an instance that this step leaves with no reachable end (see blocked).
	cause    int
	failure  *model.NodeFailure
	stranded *model.NodeFailure
	// observed: the engine has a StepObserver, and moves records the step's transitions for it.
	observed bool
	// events counts the events the step raised (their keys: model.StepEvent.Key).
	events int
	moves  []Moved
}

func (e *Engine) newStep(ctx context.Context, w *model.Work, c *template.Compiled, actor string) *step {
	if w.ChangedTasks == nil {
		w.ChangedTasks = map[string]*model.Task{}
	}
	st := &w.Instance.State
	if st.Nodes == nil {
		st.Nodes = map[string]*model.NodeVisit{}
	}
	if len(st.Edges) != len(c.Def.Edges) {
		edges := make([]byte, len(c.Def.Edges))
		copy(edges, st.Edges)
		st.Edges = edges
	}
	now := e.clock.Now().UTC()
	w.Instance.UpdatedAt = now
	w.Instance.Rev++
	s := &step{e: e, ctx: ctx, w: w, c: c, inst: w.Instance, now: now, actor: actor, observed: e.observed}
	// Room for what a step of an approval records (the decision, the node completed, the next node and its
	// task), allocated once rather than grown by appending.
	if s.observed {
		s.moves = make([]Moved, 0, 8)
	}
	if w.History == nil {
		w.History = make([]model.HistoryEvent, 0, 4)
	}
	s.upgradeEdges()
	return s
}

// nextID returns a new id within the instance: <instance id>.<prefix><n>. Ids of tasks and node visits carry
// their instance id, so an action on a task finds (and locks) its instance without another read.
func (s *step) nextID(prefix string) string {
	s.inst.State.Seq++
	return s.inst.ID + "." + prefix + strconv.Itoa(s.inst.State.Seq)
}

// instanceOf returns the instance id a task, node visit or bookmark id belongs to, or "".
func instanceOf(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '.' {
			return id[:i]
		}
	}
	return ""
}

func (s *step) history(action, nodeID, taskID, comment string, data any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = gojson.Marshal(data) // as encoding/json writes it (server/jsoncodec.go), at half the CPU
	}
	s.w.History = append(s.w.History, model.HistoryEvent{At: s.now, Actor: s.actor, Action: action, NodeID: nodeID, TaskID: taskID, Comment: comment, Data: raw})
}

func (s *step) node(id string) *model.NodeVisit { return s.inst.State.Nodes[id] }

func (s *step) sortedNodes() []*model.NodeVisit {
	out := make([]*model.NodeVisit, 0, len(s.inst.State.Nodes))
	for _, ns := range s.inst.State.Nodes {
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeInstanceID < out[j].NodeInstanceID })
	return out
}

func (s *step) edgeIndexes(from string) []int { return s.c.OutgoingIndexes(from) }

// contextValue reads a gjson path from the context.
func (s *step) contextValue(path string) gjson.Result { return gjson.GetBytes(s.inst.Context, path) }

// mergeContext shallow-merges the top-level fields of data (a JSON object) into the instance context.
func (s *step) mergeContext(data json.RawMessage) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(data, &patch); err != nil {
		return model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if len(patch) == 0 {
		return nil
	}
	var cur map[string]json.RawMessage
	if err := json.Unmarshal(s.inst.Context, &cur); err != nil || cur == nil {
		cur = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		cur[k] = v
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	s.inst.Context = b
	return nil
}

// setContextPath stores raw under a top-level key of the context (a node id: letters, digits, '-', '_').
func (s *step) setContextPath(key string, raw json.RawMessage) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	b, err := sjson.SetRawBytes(s.inst.Context, key, raw)
	if err != nil {
		return err
	}
	s.inst.Context = b
	return nil
}
