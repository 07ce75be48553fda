package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// Sub-processes (API.md "Sub-processes", docs/engine.md "Sub-processes"). A subprocess node starts its children
// in the parent's step: their instances and first steps are written in the parent's transaction (Work.Children).
// The node then waits. A child's end writes a subprocess.ended outbox row in the child's last step; the outbox
// dispatcher hands it to ChildrenEnded, whose step on the parent runs inside the dispatch transaction, so the
// parent resumes exactly when the row is deleted: never lost, never twice. A node visit that ends while children
// still run (terminate, withdraw, jump, return, a completion reached, a failure) writes a subprocess.cancel row
// per running child; CancelChild terminates it in a step of its own, which cancels its children the same way.

// waitingForChildren is NodeVisit.WaitingFor of a subprocess node waiting for its children.
const waitingForChildren = "subprocess"

// pinSubprocesses records, at the instance's start, the latest published version of every template its
// subprocess nodes start without a version: the children of this instance all run that version.
func (s *step) pinSubprocesses() error {
	for i := range s.c.Def.Nodes {
		n := &s.c.Def.Nodes[i]
		if n.Type != model.NodeSubprocess || n.Version > 0 || n.Template == "" {
			continue
		}
		if _, ok := s.inst.State.Pins[n.Template]; ok {
			continue
		}
		v, err := s.latestVersion(n.Template)
		if err != nil {
			return err
		}
		if v == 0 {
			continue // not published (any more): the node fails when it runs
		}
		if s.inst.State.Pins == nil {
			s.inst.State.Pins = map[string]int{}
		}
		s.inst.State.Pins[n.Template] = v
	}
	return nil
}

// latestVersion reads the latest published version of a template (0 when it has none or does not exist).
func (s *step) latestVersion(key string) (int, error) {
	v, err := s.read("latest\x00"+s.inst.TenantID+"\x00"+key, func(ctx context.Context) (any, error) {
		c, err := s.e.templates.Compiled(ctx, s.inst.TenantID, key, 0)
		if err != nil {
			return 0, err
		}
		return c.Version, nil
	})
	switch {
	case err == nil:
		return v.(int), nil
	case model.IsKind(err, model.ENOTFOUND), model.IsKind(err, model.EUNPROCESSABLE):
		return 0, nil
	}
	return 0, err
}

// startSubprocess starts the children of a subprocess node's visit and parks the node until they end.
func (s *step) startSubprocess(n *model.Node, ns *model.NodeVisit) error {
	depth := 1
	if p := s.inst.State.Parent; p != nil {
		depth = p.Depth + 1
	}
	if depth > model.MaxSubprocessDepth {
		return s.nodeError(n.ID, model.NodeErrSubprocessDepth,
			fmt.Sprintf("a child of this instance would be nested %d deep; sub-processes nest at most %d deep", depth, model.MaxSubprocessDepth))
	}
	version := n.Version
	if version == 0 {
		version = s.inst.State.Pins[n.Template]
	}
	if version == 0 {
		v, err := s.latestVersion(n.Template)
		if err != nil {
			return err
		}
		version = v
	}
	if version == 0 {
		return s.subprocessFailed(n.ID, fmt.Sprintf("template %q has no published version", n.Template), nil)
	}
	c, err := s.e.compiledIn(s.ctx, s.reads, s.inst.TenantID, n.Template, version)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return s.subprocessFailed(n.ID, fmt.Sprintf("template %q has no version %d", n.Template, version), nil)
		}
		return err
	}
	items := []gjson.Result{{}}
	if n.ForEach != "" {
		v := s.contextValue(n.ForEach)
		if !v.IsArray() {
			return s.subprocessFailed(n.ID, fmt.Sprintf("for_each: context path %q holds no array", n.ForEach), nil)
		}
		items = v.Array()
		if len(items) > model.MaxChildren {
			return s.nodeError(n.ID, model.NodeErrTooManyChildren,
				fmt.Sprintf("for_each: %q has %d elements; a sub-process starts at most %d children", n.ForEach, len(items), model.MaxChildren))
		}
	}
	sub := &model.SubVisit{Need: len(items), ForEach: n.ForEach != ""}
	if n.Completion.Min > 0 {
		sub.Need = min(n.Completion.Min, len(items))
	}
	ns.Sub = sub
	if len(items) == 0 {
		s.history("subprocess.completed", n.ID, "", "", map[string]any{"children": 0})
		if err := s.setContextPath(n.ID+".items", json.RawMessage("[]")); err != nil {
			return err
		}
		return s.complete(n.ID)
	}
	if err := s.moveNode(ns, model.MoveWait); err != nil {
		return err
	}
	ns.WaitingFor = waitingForChildren
	sub.Outputs = make([]json.RawMessage, len(items))
	for i, item := range items {
		doc, err := s.childInput(n, item, i)
		if err != nil {
			return s.subprocessFailed(n.ID, err.Error(), nil)
		}
		ref := &model.ParentRef{InstanceID: s.inst.ID, NodeID: n.ID, NodeInstanceID: ns.NodeInstanceID, Index: i, Depth: depth}
		w, err := s.startChild(c, ref, doc)
		if err != nil {
			return err
		}
		s.w.Children = append(s.w.Children, w)
		sub.Children = append(sub.Children, w.Instance.ID)
		s.inst.State.Children = append(s.inst.State.Children, &model.ChildRef{ID: w.Instance.ID, Template: c.Key, Version: c.Version,
			NodeID: n.ID, NodeInstanceID: ns.NodeInstanceID, Index: i, Status: model.StatusRunning}) // its end is told through the outbox, even in its first step
	}
	s.history("subprocess.started", n.ID, "", "", map[string]any{"template": c.Key, "version": c.Version, "children": sub.Children, "need": sub.Need})
	return nil
}

// childInput builds a child's context: the input mapping (child path <- parent path, "$" the whole document),
// then item and index with for_each.
func (s *step) childInput(n *model.Node, item gjson.Result, index int) (json.RawMessage, error) {
	doc := []byte("{}")
	keys := make([]string, 0, len(n.Input))
	for k := range n.Input {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { // "$" first: the other paths write into it
		if (keys[i] == "$") != (keys[j] == "$") {
			return keys[i] == "$"
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		raw := s.pathValue(s.inst.Context, n.Input[k])
		if k == "$" {
			if !gjson.ParseBytes(raw).IsObject() {
				return nil, fmt.Errorf("input: %q -> \"$\": the child's whole context must be an object", n.Input[k])
			}
			doc = append([]byte(nil), raw...)
			continue
		}
		var err error
		if doc, err = sjson.SetRawBytes(doc, k, raw); err != nil {
			return nil, fmt.Errorf("input: child path %q: %v", k, err)
		}
	}
	if n.ForEach != "" {
		var err error
		if doc, err = sjson.SetRawBytes(doc, "item", []byte(item.Raw)); err != nil {
			return nil, err
		}
		if doc, err = sjson.SetBytes(doc, "index", index); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// pathValue reads a gjson path of a document ("$": the whole document); null when absent.
func (s *step) pathValue(doc []byte, path string) json.RawMessage {
	if path == "$" {
		if len(doc) == 0 {
			return json.RawMessage("{}")
		}
		return json.RawMessage(doc)
	}
	v := gjson.GetBytes(doc, path)
	if !v.Exists() {
		return json.RawMessage("null")
	}
	return json.RawMessage(v.Raw)
}

// startChild runs a child's first step on a new instance (same tenant, the parent's initiator) and returns its
// work, to be inserted with the parent's.
func (s *step) startChild(c *template.Compiled, parent *model.ParentRef, doc json.RawMessage) (*model.Work, error) {
	// A child is titled by its template's title pattern like any start, else by its template's name.
	title, titles, _ := s.e.titles(s.ctx, s.inst.TenantID, s.inst.Initiator, c, s.now, doc)
	if title == "" {
		titles = nil
		title = c.Name
	}
	if title == "" {
		title = c.Key
	}
	inst := &model.Instance{ID: uuid.Must(uuid.NewV7()).String(), TenantID: s.inst.TenantID, Template: c.Key, Version: c.Version, Title: title,
		TitleI18n: titles, Initiator: s.inst.Initiator, Context: doc, CreatedAt: s.now}
	inst.State.Parent = parent
	w := &model.Work{Instance: inst}
	cs := s.e.newStep(s.ctx, w, c, s.actor)
	cs.reads = s.reads
	err := cs.start(map[string]any{"template": c.Key, "version": c.Version, "parent_instance_id": parent.InstanceID, "parent_node_id": parent.NodeID})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// subprocessFailed is the node error subprocess_failed; data says which child and how it ended.
func (s *step) subprocessFailed(nodeID, msg string, data any) error {
	f := &model.NodeFailure{Code: model.NodeErrSubprocessFailed, NodeID: nodeID, Message: msg}
	if data != nil {
		f.Data, _ = json.Marshal(data)
	}
	return s.nodeFailure(f)
}

// notifyParent tells the parent of a child that just ended (finish) through the outbox.
func (s *step) notifyParent() {
	p := s.inst.State.Parent
	if p == nil {
		return
	}
	end := model.ChildEnd{Parent: *p, ChildID: s.inst.ID, Status: s.inst.Status, Error: s.inst.State.Error}
	if s.inst.Status == model.StatusCompleted {
		end.Context = s.inst.Context
	}
	payload, _ := json.Marshal(end)
	s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxChildEnded, Ref: p.InstanceID, Payload: payload})
}

// releaseChildren asks for the end of the running children of a subprocess node's visit that is ending (or
// failing): each gets a subprocess.cancel outbox row. Their ends are recorded but move the visit no more.
func (s *step) releaseChildren(ns *model.NodeVisit, reason string) {
	if ns.Sub == nil {
		return
	}
	for _, id := range ns.Sub.Children {
		ref := s.child(id)
		if ref == nil || ref.Status.Ended() || ref.Cancelled {
			continue
		}
		ref.Cancelled = true
		payload, _ := json.Marshal(model.ChildCancel{ParentID: s.inst.ID, NodeID: ns.NodeID, Reason: reason})
		s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxChildCancel, Ref: id, Payload: payload})
	}
	ns.Sub.Outputs = nil
}

// child returns the record of a child instance, or nil.
func (s *step) child(id string) *model.ChildRef {
	for _, c := range s.inst.State.Children {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// childEnded records a child's end and moves its node's visit when it still waits for it: a completed child's
// output is kept, and the node completes once enough children did; a child that ended otherwise fails the node
// (subprocess_failed) once the completion can no longer be met.
func (s *step) childEnded(end model.ChildEnd) error {
	ref := s.child(end.ChildID)
	if ref == nil || ref.Status.Ended() {
		return nil // unknown, or told twice
	}
	ref.Status = end.Status
	s.history("subprocess.child_ended", ref.NodeID, "", "", map[string]any{"child_id": ref.ID, "status": end.Status, "index": ref.Index})
	ns := s.node(ref.NodeID)
	if ref.Cancelled || s.inst.Ended() || ns == nil || ns.NodeInstanceID != ref.NodeInstanceID || ns.State != model.NodeWaiting ||
		ns.WaitingFor != waitingForChildren || ns.Sub == nil {
		return nil // the visit is over: a child it cancelled, or one that ended after it
	}
	n := s.c.Def.Node(ref.NodeID)
	sub := ns.Sub
	if end.Status == model.StatusCompleted {
		sub.Completed++
		out, err := s.childOutput(n, end.Context)
		if err != nil {
			return s.subprocessFailed(n.ID, err.Error(), map[string]any{"child_id": ref.ID, "status": end.Status})
		}
		if ref.Index < len(sub.Outputs) {
			sub.Outputs[ref.Index] = out
		}
		if sub.Completed < sub.Need {
			return nil
		}
		return s.subprocessDone(n, ns)
	}
	sub.Failed++
	if len(sub.Children)-sub.Failed >= sub.Need {
		return nil // enough children may still complete
	}
	s.releaseChildren(ns, "a sibling sub-process "+string(end.Status))
	data := map[string]any{"child_id": ref.ID, "status": end.Status, "index": ref.Index}
	if end.Error != nil {
		data["error"] = end.Error
	}
	return s.subprocessFailed(n.ID, fmt.Sprintf("child instance %s of template %q ended %s", ref.ID, ref.Template, end.Status), data)
}

// childOutput maps a completed child's context through the node's output (parent path <- child path). Without
// for_each the mapping is applied to the parent's context at once; with it, it is the child's element of
// <node id>.items.
func (s *step) childOutput(n *model.Node, doc json.RawMessage) (json.RawMessage, error) {
	keys := make([]string, 0, len(n.Output))
	for k := range n.Output {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []byte("{}")
	for _, k := range keys {
		raw := s.pathValue(doc, n.Output[k])
		if n.ForEach == "" {
			if err := s.setOutput(k, raw); err != nil {
				return nil, err
			}
			continue
		}
		var err error
		if k == "$" {
			out = append([]byte(nil), raw...)
		} else if out, err = sjson.SetRawBytes(out, k, raw); err != nil {
			return nil, fmt.Errorf("output: path %q: %v", k, err)
		}
	}
	return out, nil
}

// setOutput writes one output mapping into the parent's context ("$": the child's object merged at the top).
func (s *step) setOutput(path string, raw json.RawMessage) error {
	if path == "$" {
		if !gjson.ParseBytes(raw).IsObject() {
			return errors.New("output: \"$\" takes an object")
		}
		return s.mergeContext(raw)
	}
	b, err := sjson.SetRawBytes(s.inst.Context, path, raw)
	if err != nil {
		return fmt.Errorf("output: path %q: %v", path, err)
	}
	s.inst.Context = b
	return nil
}

// subprocessDone completes a subprocess node whose completion is met; the children still running are cancelled
// as the visit ends.
func (s *step) subprocessDone(n *model.Node, ns *model.NodeVisit) error {
	sub := ns.Sub
	if sub.ForEach {
		items := make([]json.RawMessage, len(sub.Outputs))
		for i, o := range sub.Outputs {
			items[i] = o
			if len(o) == 0 {
				items[i] = json.RawMessage("null") // not completed (terminated once the completion was met)
			}
		}
		raw, _ := json.Marshal(items)
		if err := s.setContextPath(n.ID+".items", raw); err != nil {
			return err
		}
	}
	s.history("subprocess.completed", n.ID, "", "", map[string]any{"completed": sub.Completed, "children": len(sub.Children)})
	return s.complete(n.ID)
}

// parentRunning reports whether an instance is a child whose parent still runs (its initiator may then not
// withdraw it: the parent decides).
func (s *step) parentRunning() (bool, error) {
	p := s.inst.State.Parent
	if p == nil {
		return false, nil
	}
	v, err := s.read("instance-status\x00"+p.InstanceID, func(ctx context.Context) (any, error) {
		inst, _, err := s.e.store.GetInstance(ctx, s.inst.TenantID, p.InstanceID)
		if err != nil {
			return model.StatusNone, err
		}
		return inst.Status, nil
	})
	switch {
	case model.IsKind(err, model.ENOTFOUND), model.IsKind(err, model.EGONE):
		return false, nil
	case err != nil:
		return false, err
	}
	return v.(model.InstanceStatus) == model.StatusRunning, nil
}

// dispatchKey marks a context whose store calls join the outbox dispatch's transaction (see ChildrenEnded).
type dispatchKey struct{}

// inDispatch reports whether ctx is an outbox handler's: its steps run alone, in the dispatch's transaction.
func inDispatch(ctx context.Context) bool { return ctx.Value(dispatchKey{}) != nil }

// ChildrenEnded resumes a parent with the ends of its children (the subprocess.ended outbox rows of one parent),
// in one step. It is an outbox handler's: ctx is the dispatch's, and the step is written in the dispatch's
// transaction, which deletes the rows. A parent that is gone is nothing to resume.
func (e *Engine) ChildrenEnded(ctx context.Context, tenant, parentID string, ends []model.ChildEnd) error {
	_, err := e.update(context.WithValue(ctx, dispatchKey{}, true), "subprocess.ended", tenant, parentID, model.ActorSystem, func(s *step) error {
		for _, end := range ends {
			if err := s.childEnded(end); err != nil {
				return err
			}
		}
		return nil
	})
	if model.IsKind(err, model.ENOTFOUND) || model.IsKind(err, model.EGONE) {
		return nil
	}
	return err
}

// CancelChild terminates a child whose parent's node visit ended (a subprocess.cancel outbox row), in the
// dispatch's transaction like ChildrenEnded. Its own children are cancelled in turn.
func (e *Engine) CancelChild(ctx context.Context, tenant, childID string, c model.ChildCancel) error {
	_, err := e.update(context.WithValue(ctx, dispatchKey{}, true), "subprocess.cancel", tenant, childID, model.ActorSystem, func(s *step) error {
		if s.inst.Ended() {
			return nil
		}
		reason := c.Reason
		if reason == "" {
			reason = "parent node ended"
		}
		return s.finish(model.MoveTerminate, fmt.Sprintf("parent %s node %s: %s", c.ParentID, c.NodeID, reason))
	})
	if model.IsKind(err, model.ENOTFOUND) || model.IsKind(err, model.EGONE) {
		return nil
	}
	return err
}

// childViews lists an instance's children for its view.
func childViews(inst *model.Instance) []ChildView {
	out := make([]ChildView, 0, len(inst.State.Children))
	for _, c := range inst.State.Children {
		out = append(out, ChildView{ID: c.ID, Template: c.Template, Status: c.Status, NodeID: c.NodeID, Index: c.Index})
	}
	return out
}

// childNotes are the diagram's words on each subprocess node: how many of its children are in which status, e.g.
// "2 completed, 1 running".
// childStatusWords say the statuses of children in the diagram's languages (the web UI's words, status.*).
var childStatusWords = map[string]map[model.InstanceStatus]string{
	model.LangZhCN: {model.StatusRunning: "进行中", model.StatusCompleted: "已完成", model.StatusRejected: "已拒绝",
		model.StatusTerminated: "已终止", model.StatusFailed: "失败", model.StatusWithdrawn: "已撤回"},
}

func childNotes(inst *model.Instance, lang string) map[string]string {
	if len(inst.State.Children) == 0 {
		return nil
	}
	counts := map[string]map[model.InstanceStatus]int{}
	for _, c := range inst.State.Children {
		if ns := inst.State.Nodes[c.NodeID]; ns == nil || ns.NodeInstanceID != c.NodeInstanceID {
			continue // a child of an earlier visit
		}
		if counts[c.NodeID] == nil {
			counts[c.NodeID] = map[model.InstanceStatus]int{}
		}
		counts[c.NodeID][c.Status]++
	}
	notes := make(map[string]string, len(counts))
	for id, byStatus := range counts {
		var parts []string
		for _, st := range model.InstanceStatuses {
			if n := byStatus[st]; n > 0 {
				word := string(st)
				if w, ok := childStatusWords[lang][st]; ok {
					word = w
				}
				parts = append(parts, fmt.Sprintf("%d %s", n, word))
			}
		}
		notes[id] = strings.Join(parts, ", ")
	}
	return notes
}
