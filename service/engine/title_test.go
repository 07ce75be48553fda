package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// TestTitleDefaultsToTheTemplateName: an instance started without a title is titled by its template's name (what
// an inbox shows), whether the version was compiled at publish or read back cold by another replica; a title given
// wins; a template created without a name falls back to its key.
func TestTitleDefaultsToTheTemplateName(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("bob")
		if _, err := h.tpl.Create(h.ctx, admin, template.CreateRequest{Key: "leave", Name: "请假申请", Definition: json.RawMessage(waitDef)}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.tpl.Publish(h.ctx, admin, "leave"); err != nil {
			t.Fatal(err)
		}
		h.publish("nameless", waitDef)

		title := func(eng *engine.Engine, req engine.StartParams) string {
			t.Helper()
			v, err := eng.Start(h.ctx, as("alice"), req)
			if err != nil {
				t.Fatal(err)
			}
			inst, _ := h.get(v.ID)
			if v.Title != inst.Title {
				t.Fatalf("the answer's title %q differs from the stored %q", v.Title, inst.Title)
			}
			return inst.Title
		}
		if got := title(h.eng, engine.StartParams{Template: "leave", Context: json.RawMessage(`{}`)}); got != "请假申请" {
			t.Fatalf("title %q, want the template's name", got)
		}
		replica := newEngine(t, s, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})
		if got := title(replica, engine.StartParams{Template: "leave", Context: json.RawMessage(`{}`)}); got != "请假申请" {
			t.Fatalf("title %q on a replica that compiled the version from the store, want the template's name", got)
		}
		if got := title(h.eng, engine.StartParams{Template: "leave", Title: "Alice, 3 days", Context: json.RawMessage(`{}`)}); got != "Alice, 3 days" {
			t.Fatalf("title %q, want the one given", got)
		}
		if got := title(h.eng, engine.StartParams{Template: "nameless", Context: json.RawMessage(`{}`)}); got != "nameless" {
			t.Fatalf("title %q, want the key of a template created without a name", got)
		}
	})
}
