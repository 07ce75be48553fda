package template_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// TestDiagramNamesTheCalledTemplateInTheReadersLanguage: under ?lang= a subprocess node names the template it
// calls in that language (the called version's i18n name, else the template's name); a template without either,
// and the diagram without a language, draw its key.
func TestDiagramNamesTheCalledTemplateInTheReadersLanguage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		tpl := template.New(s, template.Options{})
		admin := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}
		publish := func(key, name, def string) {
			t.Helper()
			if _, err := tpl.Create(ctx, admin, template.CreateRequest{Key: key, Name: name, Definition: json.RawMessage(def)}); err != nil {
				t.Fatalf("create %s: %v", key, err)
			}
			if _, err := tpl.Publish(ctx, admin, key); err != nil {
				t.Fatalf("publish %s: %v", key, err)
			}
		}
		const callee = `"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"end"}]`
		publish("payment", "Payment", `{"i18n":{"zh-CN":{"name":"付款"}},`+callee+`}`)
		publish("nameless", "", `{`+callee+`}`)
		publish("claim", "Claim", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"pay","type":"subprocess","name":"Pay","i18n":{"zh-CN":{"name":"支付"}},"template":"payment"},
			{"id":"other","type":"subprocess","name":"Other","template":"nameless","version":1},
			{"id":"end","type":"end"}],
		 "edges":[{"from":"start","to":"pay"},{"from":"pay","to":"other"},{"from":"other","to":"end"}]}`)
		for _, tc := range []struct {
			lang       string
			pay, other string
		}{
			{"", `n1[["Pay ↳ payment"]]`, `n2[["Other ↳ nameless"]]`},
			{model.LangZhCN, `n1[["支付 ↳ 付款"]]`, `n2[["Other ↳ nameless"]]`},
			{model.LangEN, `n1[["Pay ↳ Payment"]]`, `n2[["Other ↳ nameless"]]`},
		} {
			d, err := tpl.Diagram(ctx, model.DefaultTenant, "claim", 0, nil, tc.lang)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(d, tc.pay) || !strings.Contains(d, tc.other) {
				t.Errorf("lang %q: want %s and %s in\n%s", tc.lang, tc.pay, tc.other, d)
			}
		}
	})
}
