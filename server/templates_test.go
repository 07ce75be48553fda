package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/templates"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func twoStep(approver string, extraNode bool) map[string]any {
	nodes := []any{
		map[string]any{"id": "start", "type": "start", "name": "Apply", "trigger": map[string]any{"kind": "manual"}},
		map[string]any{"id": "lead", "type": "approval", "name": "Lead", "approvers": map[string]any{"users": []string{approver}}},
		map[string]any{"id": "end", "type": "end"},
	}
	edges := []any{map[string]any{"from": "start", "to": "lead"}, map[string]any{"from": "lead", "to": "end"}}
	if extraNode {
		nodes = append(nodes, map[string]any{"id": "boss", "type": "approval", "name": "Boss", "approvers": map[string]any{"users": []string{approver}}})
		edges = []any{map[string]any{"from": "start", "to": "lead"}, map[string]any{"from": "lead", "to": "boss"}, map[string]any{"from": "boss", "to": "end"}}
	}
	return map[string]any{"nodes": nodes, "edges": edges}
}

func TestTemplateLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		r := e.do("POST", "/api/v1/templates", e.admin, map[string]any{"key": "leave", "name": "Leave", "description": "days off", "definition": twoStep("bob", false)}, nil)
		if r.Status != 201 || r.JSON["latest_version"] != nil || r.JSON["draft"] == nil {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/templates", e.admin, map[string]any{"key": "leave", "definition": twoStep("bob", false)}, nil), 409, "template_exists")
		assertError(t, e.do("POST", "/api/v1/templates", e.admin, map[string]any{"key": "Bad Key", "definition": twoStep("bob", false)}, nil), 400, "invalid_key")
		assertError(t, e.do("POST", "/api/v1/templates", bob, map[string]any{"key": "mine", "definition": twoStep("bob", false)}, nil), 403, "admin_required")

		r = e.do("POST", "/api/v1/templates/leave/publish", e.admin, nil, nil)
		if r.Status != 201 || fmt.Sprint(r.JSON["version"]) != "1" || r.JSON["key"] != "leave" {
			t.Fatalf("publish 1: %d %s", r.Status, r.Body)
		}
		// An instance started on version 1 stays on it.
		r = e.do("POST", "/api/v1/instances", bob, map[string]any{"template": "leave", "context": map[string]any{"days": 2}}, nil)
		inst := r.JSON["id"].(string)
		if r.Status != 201 || fmt.Sprint(r.JSON["version"]) != "1" {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}

		r = e.do("PUT", "/api/v1/templates/leave/draft", e.admin, map[string]any{"definition": twoStep("bob", true)}, nil)
		if r.Status != 200 || r.JSON["validation"].(map[string]any)["valid"] != true {
			t.Fatalf("draft: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("PUT", "/api/v1/templates/leave/draft", bob, map[string]any{"definition": twoStep("bob", true)}, nil), 403, "admin_required")
		assertError(t, e.do("POST", "/api/v1/templates/leave/publish", bob, nil, nil), 403, "admin_required")
		r = e.do("POST", "/api/v1/templates/leave/publish", e.admin, nil, nil)
		if r.Status != 201 || fmt.Sprint(r.JSON["version"]) != "2" {
			t.Fatalf("publish 2: %d %s", r.Status, r.Body)
		}
		r = e.do("GET", "/api/v1/templates/leave/versions/1", bob, nil, nil)
		if r.Status != 200 || strings.Contains(string(r.Body), `"boss"`) || r.JSON["published_by"] != "admin" || r.JSON["published_at"] == nil {
			t.Fatalf("version 1 changed: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/templates/leave/versions/2", bob, nil, nil)
		if !strings.Contains(string(r.Body), `"boss"`) {
			t.Fatalf("version 2: %s", r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/templates/leave/versions/3", bob, nil, nil), 404, "not_found")
		assertError(t, e.do("GET", "/api/v1/templates/leave/versions/x", bob, nil, nil), 400, "invalid_version")
		r = e.do("GET", "/api/v1/templates/leave", bob, nil, nil)
		if r.Status != 200 || fmt.Sprint(r.JSON["latest_version"]) != "2" || len(r.JSON["versions"].([]any)) != 2 {
			t.Fatalf("get: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/templates", bob, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["key"] != "leave" {
			t.Fatalf("list: %s", r.Body)
		}
		// The running instance still follows version 1: approving lead completes it (no boss step).
		r = e.do("GET", "/api/v1/tasks", bob, nil, nil)
		task := r.JSON["items"].([]any)[0].(map[string]any)["id"].(string)
		if r = e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, map[string]any{"comment": "ok"}, nil); r.Status != 200 {
			t.Fatalf("approve: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/instances/"+inst, bob, nil, nil)
		if r.JSON["status"] != "completed" {
			t.Fatalf("v1 instance: %s", r.Body)
		}
		// Diagram of a version: Mermaid text.
		r = e.do("GET", "/api/v1/templates/leave/versions/2/diagram", bob, nil, nil)
		if r.Status != 200 || !strings.HasPrefix(string(r.Body), "flowchart TD") || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("diagram: %d %q", r.Status, r.Body)
		}
	})
}

func TestInvalidDraftIsSavedButNotPublished(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		cyclic := map[string]any{"nodes": []any{
			map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "x", "type": "auto"}, map[string]any{"id": "y", "type": "auto"}, map[string]any{"id": "end", "type": "end"}},
			"edges": []any{map[string]any{"from": "start", "to": "x"}, map[string]any{"from": "x", "to": "y"}, map[string]any{"from": "y", "to": "x"}, map[string]any{"from": "y", "to": "end"}}}
		r := e.do("POST", "/api/v1/templates", e.admin, map[string]any{"key": "loop", "definition": cyclic}, nil)
		if r.Status != 201 || r.JSON["validation"].(map[string]any)["valid"] != false {
			t.Fatalf("create invalid: %d %s", r.Status, r.Body)
		}
		r = e.do("PUT", "/api/v1/templates/loop/draft", e.admin, map[string]any{"definition": cyclic}, nil)
		v := r.JSON["validation"].(map[string]any)
		if r.Status != 200 || v["valid"] != false || !strings.Contains(fmt.Sprint(v["errors"]), "cycle") {
			t.Fatalf("draft invalid: %d %s", r.Status, r.Body)
		}
		r = e.do("POST", "/api/v1/templates/loop/publish", e.admin, nil, nil)
		assertError(t, r, 422, "invalid_definition")
		errs := r.JSON["error"].(map[string]any)["details"].(map[string]any)["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["code"] != "cycle" {
			t.Fatalf("422 details: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/templates/loop", e.admin, nil, nil)
		if r.JSON["latest_version"] != nil {
			t.Fatalf("an invalid draft must not publish: %s", r.Body)
		}
		assertError(t, e.do("PUT", "/api/v1/templates/loop/draft", e.admin, map[string]any{"definition": []int{1}}, nil), 400, "invalid_definition")
		assertError(t, e.do("PUT", "/api/v1/templates/nope/draft", e.admin, map[string]any{"definition": cyclic}, nil), 404, "not_found")
		assertError(t, e.do("POST", "/api/v1/templates/nope/publish", e.admin, nil, nil), 404, "not_found")
		// Starting an unpublished template is refused.
		assertError(t, e.do("POST", "/api/v1/instances", e.admin, map[string]any{"template": "loop"}, nil), 422, "not_published")
		r = e.do("POST", "/api/v1/templates/validate", e.admin, map[string]any{"definition": cyclic}, nil)
		if r.Status != 200 || r.JSON["valid"] != false {
			t.Fatalf("validate: %s", r.Body)
		}
	})
}

func TestConditionTester(t *testing.T) {
	e := newEnv(t, storetest.Open(t, store.SQLite), nil)
	r := e.do("POST", "/api/v1/conditions/evaluate", e.admin, map[string]any{"condition": map[string]any{"level": map[string]any{"$gte": 3}}, "context": map[string]any{"level": 4}}, nil)
	if r.Status != 200 || r.JSON["result"] != true {
		t.Fatalf("evaluate: %s", r.Body)
	}
	r = e.do("POST", "/api/v1/conditions/evaluate", e.admin, map[string]any{"condition": map[string]any{"level": map[string]any{"$bogus": 3}}, "context": map[string]any{}}, nil)
	assertError(t, r, 400, "bad_condition")
	if !strings.Contains(r.JSON["error"].(map[string]any)["message"].(string), "$bogus") {
		t.Fatalf("the reason must name the operator: %s", r.Body)
	}
	assertError(t, e.do("POST", "/api/v1/conditions/evaluate", e.admin, map[string]any{"condition": map[string]any{}, "context": "x"}, nil), 400, "invalid_context")
}

func TestReadyMadeTemplatesPublish(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// The production body limit: the ready-made templates are larger than the tests' 4 KiB.
		e := newEnv(t, s, func(d *server.Deps) { d.BodyLimit = 1 << 20 })
		all, err := templates.Ordered() // the env checks sub-processes at publish, as the composition root does
		if err != nil || len(all) < 4 {
			t.Fatalf("templates.Ordered: %d %v", len(all), err)
		}
		for _, tp := range all {
			if r := e.do("POST", "/api/v1/templates", e.admin, tp, nil); r.Status != 201 {
				t.Fatalf("create %s: %s", tp.Key, r.Body)
			}
			if r := e.do("POST", "/api/v1/templates/"+tp.Key+"/publish", e.admin, nil, nil); r.Status != 201 {
				t.Fatalf("publish %s: %s", tp.Key, r.Body)
			}
		}
	})
}

// TestDefinitionSchemaRoute: the schema is public, served as JSON Schema with cache headers, and is the schema
// the server validates with: a definition it refuses breaks the schema's rules.
func TestDefinitionSchemaRoute(t *testing.T) {
	e := newEnv(t, storetest.Open(t, store.SQLite), nil)
	r := e.do("GET", "/api/v1/schemas/definition.json", "", nil, nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/schema+json" {
		t.Fatalf("GET schema: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	if string(r.Body) != model.DefinitionSchema {
		t.Error("the served schema is not model.DefinitionSchema")
	}
	if r.JSON["$schema"] != "https://json-schema.org/draft/2020-12/schema" || r.JSON["$defs"].(map[string]any)["Node"] == nil {
		t.Errorf("not the definition schema: %.200s", r.Body)
	}
	etag := r.Header.Get("ETag")
	if etag == "" || !strings.Contains(r.Header.Get("Cache-Control"), "max-age=") {
		t.Errorf("cache headers: ETag %q, Cache-Control %q", etag, r.Header.Get("Cache-Control"))
	}
	r = e.do("GET", "/api/v1/schemas/definition.json", "", nil, map[string]string{"If-None-Match": etag})
	if r.Status != 304 || len(r.Body) != 0 {
		t.Errorf("revalidation: %d, %d bytes", r.Status, len(r.Body))
	}
	r = e.do("GET", "/api/v1/schemas/definition.json", "", nil, map[string]string{"If-None-Match": `"other"`})
	if r.Status != 200 {
		t.Errorf("another ETag: %d", r.Status)
	}
	// A bearer token is not needed, and a bad one does not matter.
	if r = e.do("GET", "/api/v1/schemas/definition.json", "not-a-token", nil, nil); r.Status != 200 {
		t.Errorf("with a bad token: %d", r.Status)
	}

	// Any JSON Schema validator given the served schema agrees with POST /templates/validate about shape.
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(r.Body)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("served.json", doc); err != nil {
		t.Fatal(err)
	}
	served, err := c.Compile("served.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		def   map[string]any
		valid bool
	}{
		{"valid", twoStep("bob", false), true},
		{"unknown sign", withNode(twoStep("bob", false), map[string]any{"id": "x", "type": "approval", "approvers": map[string]any{"users": []string{"a"}}, "sign": "some"}), false},
		{"field of another type", withNode(twoStep("bob", false), map[string]any{"id": "x", "type": "delay", "interval": 5, "sign": "all"}), false},
	} {
		res := e.do("POST", "/api/v1/templates/validate", e.admin, map[string]any{"definition": tc.def}, nil)
		var inst any
		b, _ := json.Marshal(tc.def)
		inst, _ = jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		schemaOK := served.Validate(inst) == nil
		if schemaOK != tc.valid {
			t.Errorf("%s: the served schema says valid=%v", tc.name, schemaOK)
		}
		if !tc.valid && res.JSON["valid"] != false {
			t.Errorf("%s: validate answered %s", tc.name, res.Body)
		}
	}
}

// withNode returns def with one more node (unconnected: only its own fields matter here).
func withNode(def map[string]any, n map[string]any) map[string]any {
	out := map[string]any{"edges": def["edges"], "nodes": append(append([]any{}, def["nodes"].([]any)...), n)}
	return out
}
