package engine

import (
	"encoding/json"
	"strconv"

	"github.com/halley-bpm/halley/model"
)

// InStepSink takes engine events within the step that raised them: what it writes for an event goes into the
// step's work and commits (or rolls back) with it, with no outbox row, no dispatch and no second transaction. The
// in-app notifications are such a sink (service/notify). An event the sink wants but does not take goes to the
// outbox, as every event EventSink wants does.
type InStepSink interface {
	// Wants says whether the sink would take the event; it reads memory only.
	Wants(tenant, event, template string) bool
	// Take adds the sink's rows for ev to w and reports whether it did. It runs under the instance's row lock,
	// inside the transaction, and may run again for the same event when the transaction is retried: it must not
	// read the database, and what it adds must be keyed by ev.Key. false sends the event to the outbox.
	Take(w *model.Work, ev *model.StepEvent) bool
	// Committed is told of a work it added rows to, after its commit.
	Committed(w *model.Work)
}

// NoInStep is the InStepSink of an engine whose events all go through the outbox.
var NoInStep InStepSink = noInStep{}

type noInStep struct{}

func (noInStep) Wants(string, string, string) bool       { return false }
func (noInStep) Take(*model.Work, *model.StepEvent) bool { return false }
func (noInStep) Committed(*model.Work)                   {}

// eventExtra are the fields some events add to the common ones.
type eventExtra struct {
	Users    []string // cc.created: who was copied
	NodeName string
	Actor    string // task.urged: who urged, and what they said
	Comment  string
}

// event hands an event to the in-step sink when it wants it, and writes it to the outbox when a subscriber wants
// it or the in-step sink did not take it.
func (s *step) event(name, nodeID string, t *model.Task, extra ...eventExtra) {
	s.events++
	tenant, tmpl := s.inst.TenantID, s.inst.Template
	inStep, outbox := s.e.inStep.Wants(tenant, name, tmpl), s.e.events.Wants(tenant, name, tmpl)
	if !inStep && !outbox {
		return
	}
	ev := &model.StepEvent{Key: s.inst.ID + "." + strconv.FormatInt(s.inst.Rev, 10) + "." + strconv.Itoa(s.events), Name: name, At: s.now,
		TenantID: tenant, InstanceID: s.inst.ID, Template: tmpl, Status: s.inst.Status, NodeID: nodeID, Task: t, Title: s.inst.Title,
		Initiator: s.inst.Initiator}
	if len(extra) > 0 {
		x := extra[0]
		ev.Users, ev.NodeName, ev.Actor, ev.Comment = x.Users, x.NodeName, x.Actor, x.Comment
	}
	s.eventLabels(ev)
	if inStep && !s.e.inStep.Take(s.w, ev) {
		outbox = true // the sink reads it from the outbox instead
	}
	if !outbox {
		return
	}
	p := map[string]any{"event": name, "key": ev.Key, "at": ev.At, "instance_id": ev.InstanceID, "template": tmpl, "status": ev.Status,
		"node_id": nodeID, "task": t, "title": ev.Title, "initiator": ev.Initiator}
	if len(extra) > 0 {
		x := extra[0]
		if x.Users != nil {
			p["users"] = x.Users
		}
		for k, v := range map[string]string{"node_name": x.NodeName, "actor": x.Actor, "comment": x.Comment} {
			if v != "" {
				p[k] = v
			}
		}
	}
	for k, v := range map[string]map[string]string{"title_i18n": ev.TitleI18n, "node_i18n": ev.NodeI18n, "template_i18n": ev.TemplateI18n} {
		if len(v) > 0 {
			p[k] = v
		}
	}
	if ev.TemplateName != "" {
		p["template_name"] = ev.TemplateName
	}
	if name == "instance.failed" && s.inst.State.Error != nil {
		p["error"] = s.inst.State.Error // subscribers learn why: the node error's code, node and message
		p["node_id"] = s.inst.State.Error.NodeID
	}
	payload, _ := json.Marshal(p)
	s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: tenant, Kind: model.OutboxEvent, Ref: name, Payload: payload})
}

// eventLabels adds the per-language texts notifications render in each recipient's language: the title, the
// node's name and the template's name. Each is bounded by the definition's label lengths; absent ones stay nil.
func (s *step) eventLabels(ev *model.StepEvent) {
	if len(s.inst.TitleI18n) > 0 {
		ev.TitleI18n = s.inst.TitleI18n
	}
	if s.c == nil || s.c.Def == nil {
		return
	}
	ev.TemplateName = s.c.Name
	var n *model.Node
	if ev.NodeID != "" {
		n = s.c.Def.Node(ev.NodeID)
	}
	for _, lang := range model.Languages {
		if t := s.c.Def.I18n.For(lang); t != nil && t.Name != "" {
			if ev.TemplateI18n == nil {
				ev.TemplateI18n = map[string]string{}
			}
			ev.TemplateI18n[lang] = t.Name
		}
		if n != nil {
			if name := n.I18n.Name(lang); name != "" {
				if ev.NodeI18n == nil {
					ev.NodeI18n = map[string]string{}
				}
				ev.NodeI18n[lang] = name
			}
		}
	}
}
