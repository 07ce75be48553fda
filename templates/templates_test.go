package templates_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
	"github.com/halley-bpm/halley/service/graph"
	"github.com/halley-bpm/halley/templates"
)

func checkCondition(raw []byte) error {
	_, err := condition.Compile(raw)
	return err
}

func all(t *testing.T) map[string]templates.Template {
	t.Helper()
	list, err := templates.All()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]templates.Template{}
	for _, tpl := range list {
		m[tpl.Key] = tpl
	}
	return m
}

// TestTemplatesValidate: every ready-made template passes the validation that publishing runs, with the real
// condition compiler.
func TestTemplatesValidate(t *testing.T) {
	list, err := templates.All()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, tpl := range list {
		keys = append(keys, tpl.Key)
		t.Run(tpl.Key, func(t *testing.T) {
			if tpl.File != tpl.Key+".json" {
				t.Errorf("key %q lives in %s", tpl.Key, tpl.File)
			}
			if tpl.Name == "" || len(tpl.Description) < 40 {
				t.Errorf("name %q / description %q too thin", tpl.Name, tpl.Description)
			}
			res := graph.Validate(tpl.Definition, graph.Options{CheckCondition: checkCondition})
			if !res.Valid || len(res.Errors) != 0 {
				t.Fatalf("invalid: %+v", res.Errors)
			}
			d, _ := graph.Parse(tpl.Definition)
			if src := graph.Mermaid(d, nil, nil); strings.Count(src, "\n") < len(d.Nodes)+len(d.Edges) {
				t.Errorf("diagram too short:\n%s", src)
			}
		})
	}
	want := []string{"cache-resource-change", "expense-form", "expense-lines", "leave", "nightly-report", "payment", "push-task-approval", "resource-provision", "table-permission"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v (sorted)", keys, want)
	}
}

// TestTemplatesMergeWithoutExplicitJoins: the ready-made templates merge their condition branches with the
// default join (the synchronizing "and" merges exactly the branches routing chose), as a user of a Chinese
// approval designer expects: no template needs "or" to make a default edge and a condition branch meet.
func TestTemplatesMergeWithoutExplicitJoins(t *testing.T) {
	for key, tpl := range all(t) {
		d, _ := graph.Parse(tpl.Definition)
		for _, n := range d.Nodes {
			if len(d.Incoming(n.ID)) > 1 && !n.Join.IsZero() {
				t.Errorf("%s: node %s has join %s; merges use the default", key, n.ID, n.Join)
			}
		}
	}
}

// The templates carry the scenarios they are named after.
func TestTemplatesScenarios(t *testing.T) {
	m := all(t)
	def := func(key string) *model.Definition {
		t.Helper()
		d, errs := graph.Parse(m[key].Definition)
		if d == nil || len(errs) > 0 {
			t.Fatalf("%s: %v", key, errs)
		}
		return d
	}
	evalEdge := func(e model.Edge, ctx string) bool {
		t.Helper()
		ok, err := condition.Evaluate(e.Condition, []byte(ctx))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	edgeTo := func(d *model.Definition, from, to string) model.Edge {
		t.Helper()
		for _, e := range d.Outgoing(from) {
			if e.To == to {
				return e
			}
		}
		t.Fatalf("no edge %s → %s", from, to)
		return model.Edge{}
	}

	t.Run("leave: the manager approves only more than 3 days", func(t *testing.T) {
		d := def("leave")
		toManager, toEnd := edgeTo(d, "lead", "manager"), edgeTo(d, "lead", "end")
		if !evalEdge(toManager, `{"days": 5}`) || evalEdge(toManager, `{"days": 3}`) {
			t.Error("lead → manager is not days > 3")
		}
		if !toEnd.Default || d.Node("end").JoinMode() != model.JoinAnd {
			t.Error("lead → end is not the default, or end does not merge with the default join")
		}
	})
	t.Run("leave: the team lead may escalate through a field of their form", func(t *testing.T) {
		d := def("leave")
		toManager := edgeTo(d, "lead", "manager")
		if !evalEdge(toManager, `{"days": 2, "lead_review": {"escalate": true}}`) || evalEdge(toManager, `{"days": 2, "lead_review": {"escalate": false}}`) {
			t.Error("lead → manager does not read the lead's escalate field")
		}
		f := model.ParseForm(d.Node("lead").Form)
		if !f.Editable("lead_review.escalate") || !f.Editable("lead_review.deputy") || f.Editable("days") || f.Field("days") == nil {
			t.Errorf("lead form = %+v", f)
		}
	})
	t.Run("cache: large changes need the SRE lead; create-cache runs after the create node", func(t *testing.T) {
		d := def("cache-resource-change")
		toLead := edgeTo(d, "owner", "sre_lead")
		if !evalEdge(toLead, `{"memory_gb": 64}`) || !evalEdge(toLead, `{"memory_gb": 8, "shared_cluster": true}`) || evalEdge(toLead, `{"memory_gb": 8}`) {
			t.Error("owner → sre_lead condition is wrong")
		}
		create := d.Node("create")
		if create.Type != model.NodeAuto || !slices.Equal(create.Plugins.After, []string{"create-cache"}) || create.ErrorHandler.Op() != model.ErrorOpRetry {
			t.Errorf("create node = %+v", create)
		}
		if d.ErrorNode() == nil {
			t.Error("no error node")
		}
	})
	t.Run("table permission: AND join of DBA and owner, security by level or department, auto grant", func(t *testing.T) {
		d := def("table-permission")
		reviewed := d.Node("reviewed")
		var from []string
		for _, e := range d.Incoming("reviewed") {
			from = append(from, e.From)
		}
		if reviewed.JoinMode() != model.JoinAnd || !slices.Equal(from, []string{"dba", "owner"}) {
			t.Errorf("reviewed joins %v with %s", from, reviewed.JoinMode())
		}
		if edgeTo(d, "leader", "dba").Condition == nil || !edgeTo(d, "leader", "grant").Default {
			t.Error("the level does not decide the chain")
		}
		sec := edgeTo(d, "reviewed", "security")
		if !evalEdge(sec, `{"level": 4, "department": "ops"}`) || !evalEdge(sec, `{"level": 2, "department": "hr"}`) || evalEdge(sec, `{"level": 3, "department": "ops"}`) {
			t.Error("reviewed → security condition is wrong")
		}
		if g := d.Node("grant"); g.Type != model.NodeAuto || !slices.Equal(g.Plugins.After, []string{"grant-table"}) {
			t.Errorf("grant node = %+v", g)
		}
		if d.Node("owner").Approvers.Context != "table.owner" {
			t.Error("the table owner does not come from the context")
		}
	})
	t.Run("push task: approvers from the context, parallel groups", func(t *testing.T) {
		d := def("push-task-approval")
		if a := d.Node("reviewer").Approvers; a.Context != "approvers.reviewer" {
			t.Errorf("reviewer approvers = %+v", a)
		}
		if g := d.Node("groups"); g.Approvers.GroupsContext != "approvers.groups" || g.GroupSignMode() != model.SignOr {
			t.Errorf("groups node = %+v", g)
		}
		if tr := d.Start().Trigger; tr.Kind != model.TriggerAsyncAPI || tr.Module != "push" || tr.Function != "task-approval" {
			t.Errorf("trigger = %+v", tr)
		}
	})
}

// TestTemplateForms: every form of the ready-made templates is one the UI renders and the engine reads: component
// forms whose fields have ids, labels and valid context paths. Approvers may change only what a condition or a
// later step needs from them: no approval form leaves a field the start form asks for editable.
func TestTemplateForms(t *testing.T) {
	for key, tpl := range all(t) {
		d, _ := graph.Parse(tpl.Definition)
		startFields := map[string]bool{}
		if tr := d.Start().Trigger; tr.Kind == model.TriggerForm {
			f := model.ParseForm(tr.Form)
			if f == nil {
				t.Errorf("%s: the start form binds no field", key)
				continue
			}
			for _, x := range f.Fields {
				startFields[x.Field] = true
			}
		}
		for _, n := range d.Nodes {
			raw := n.Form
			if n.Type == model.NodeStart {
				raw = n.Trigger.Form
			}
			if len(raw) == 0 {
				continue
			}
			var form struct {
				Kind   string `json:"kind"`
				Fields []struct {
					ID, Type, Label, Field string
					Readonly               bool
				} `json:"fields"`
			}
			if err := json.Unmarshal(raw, &form); err != nil || form.Kind != "components" || len(form.Fields) == 0 {
				t.Errorf("%s/%s: form is not a component form with fields: %s", key, n.ID, raw)
				continue
			}
			parsed := model.ParseForm(raw)
			for _, x := range form.Fields {
				if x.ID == "" || x.Label == "" || x.Type == "" || parsed.Field(x.Field) == nil {
					t.Errorf("%s/%s: field %+v lacks an id, label, type or valid path", key, n.ID, x)
				}
				if n.Type == model.NodeApproval && !x.Readonly && startFields[x.Field] {
					t.Errorf("%s/%s: an approver may change %q, which the applicant filled in", key, n.ID, x.Field)
				}
			}
		}
	}
}

// TestTemplatesSpeakBothLanguagesToEmployees: every ready-made template names itself, its steps and the fields
// of its forms in zh-CN and en, titles its requests with a pattern in both languages, and describes itself to the
// people who use it — no API paths, seeds or context JSON (those are in docs/templates.md).
func TestTemplatesSpeakBothLanguagesToEmployees(t *testing.T) {
	for key, tpl := range all(t) {
		d, errs := graph.Parse(tpl.Definition)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", key, errs)
		}
		for _, lang := range model.Languages {
			x := d.I18n.For(lang)
			if x == nil || x.Name == "" || len(x.Description) < 20 {
				t.Errorf("%s: no name or description in %s", key, lang)
			}
			if d.TitlePattern == "" || (lang == model.LangZhCN && x != nil && x.TitlePattern == "") {
				t.Errorf("%s: no title pattern in %s", key, lang)
			}
			for _, n := range d.Nodes {
				if n.I18n.Name(lang) == "" {
					t.Errorf("%s: node %s has no name in %s", key, n.ID, lang)
				}
			}
		}
		for _, text := range []string{tpl.Description, d.I18n.For(model.LangZhCN).Description} {
			for _, dev := range []string{"/api/", "seed", "Context:", "{\"", "POST ", "plugin", "sub-process"} {
				if strings.Contains(text, dev) {
					t.Errorf("%s: the description speaks to developers (%q): %s", key, dev, text)
				}
			}
		}
		for _, n := range d.Nodes {
			for _, raw := range []json.RawMessage{n.Form, n.Trigger.Form} {
				var f struct {
					Fields []struct {
						ID    string
						Label string
						I18n  map[string]struct{ Label string }
					}
				}
				if len(raw) == 0 {
					continue
				}
				if err := json.Unmarshal(raw, &f); err != nil {
					t.Fatal(err)
				}
				for _, x := range f.Fields {
					if x.I18n[model.LangZhCN].Label == "" || x.I18n[model.LangEN].Label != x.Label {
						t.Errorf("%s: field %s of %s lacks its labels: %+v", key, x.ID, n.ID, x.I18n)
					}
				}
			}
		}
	}
}
