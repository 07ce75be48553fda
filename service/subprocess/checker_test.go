package subprocess_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subprocess"
	"github.com/halley-bpm/halley/service/template"
)

var admin = &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}

// calling is a template whose subprocess node calls the templates named (one node each).
func calling(keys ...string) string {
	nodes := `{"id":"start","type":"start","trigger":{"kind":"manual"}}`
	edges := ""
	prev := "start"
	for i, k := range keys {
		id := "call" + string(rune('a'+i))
		nodes += `,{"id":"` + id + `","type":"subprocess","template":"` + k + `"}`
		edges += `{"from":"` + prev + `","to":"` + id + `"},`
		prev = id
	}
	return `{"nodes":[` + nodes + `,{"id":"end","type":"end"}],"edges":[` + edges + `{"from":"` + prev + `","to":"end"}]}`
}

// TestCheckerRefusesCyclesAndUnknownTemplates: publishing a template that calls itself directly, or through the
// published versions of others, is 422 subprocess_cycle naming the path; calling a template without a
// published version (or the version pinned) is 422 unknown_template; nothing is published then.
func TestCheckerRefusesCyclesAndUnknownTemplates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		tpl := template.New(s, template.Options{Publishers: []template.Publisher{subprocess.NewChecker(s)}})
		publish := func(key, def string) error {
			if _, err := tpl.Get(ctx, model.DefaultTenant, key); err != nil {
				if _, err := tpl.Create(ctx, admin, template.CreateRequest{Key: key, Definition: json.RawMessage(def)}); err != nil {
					t.Fatalf("create %s: %v", key, err)
				}
			} else if _, err := tpl.SaveDraft(ctx, admin, key, json.RawMessage(def)); err != nil {
				t.Fatalf("save %s: %v", key, err)
			}
			_, err := tpl.Publish(ctx, admin, key)
			return err
		}
		want := func(err error, code string, path ...string) {
			t.Helper()
			var de *model.Error
			if !errors.As(err, &de) || de.Kind != model.EUNPROCESSABLE || de.Code != code {
				t.Fatalf("error %v, want 422 %s", err, code)
			}
			if len(path) > 0 {
				got, _ := de.Details["path"].([]string)
				if strings.Join(got, ">") != strings.Join(path, ">") {
					t.Fatalf("path %v, want %v", got, path)
				}
			}
		}
		want(publish("a", calling("nowhere")), "unknown_template")
		if err := publish("leaf", calling()); err != nil {
			t.Fatal(err)
		}
		want(publish("pinned", strings.Replace(calling("leaf"), `"template":"leaf"`, `"template":"leaf","version":2`, 1)), "unknown_template")
		want(publish("self", calling("self")), "subprocess_cycle", "self", "self")
		if err := publish("a", calling("leaf")); err != nil {
			t.Fatal(err)
		}
		if err := publish("b", calling("leaf", "a")); err != nil {
			t.Fatal(err)
		}
		if err := publish("c", calling("b")); err != nil {
			t.Fatal(err)
		}
		// a calling c closes a → c → b → a
		want(publish("a", calling("leaf", "c")), "subprocess_cycle", "a", "c", "b", "a")
		if v, _ := s.LatestVersion(ctx, model.DefaultTenant, "a"); v != 1 {
			t.Fatalf("a refused publish stored version %d", v)
		}
		for _, k := range []string{"nowhere-x", "self", "pinned"} {
			if v, err := s.LatestVersion(ctx, model.DefaultTenant, k); err == nil && v != 0 {
				t.Errorf("%s has version %d", k, v)
			}
		}
	})
}
