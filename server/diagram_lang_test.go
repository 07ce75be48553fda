package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/templates"
)

// TestDiagramLanguageHTTP: ?lang= draws a diagram in the reader's language — node names from their labels,
// conditions as people read them with the forms' field labels, the edge words — and without it the diagram is
// what every client always got; another language is refused.
func TestDiagramLanguageHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob")
		list, err := templates.All()
		if err != nil {
			t.Fatal(err)
		}
		for _, tpl := range list {
			if tpl.Key == "leave" {
				f.publish("leave", string(tpl.Definition))
			}
		}
		get := func(path string) string {
			t.Helper()
			r := f.do("GET", path, f.tokens["ann"], nil, nil)
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			return string(r.Body)
		}
		wantLines := func(what, d string, lines ...string) {
			t.Helper()
			for _, l := range lines {
				if !strings.Contains(d, l) {
					t.Fatalf("%s lacks %q:\n%s", what, l, d)
				}
			}
		}
		base := "/api/v1/templates/leave/versions/1/diagram"
		plain := get(base)
		wantLines("plain", plain, `n1["Team lead"]`, `n1 -->|"days #gt; 3 or lead_review.escalate = true"| n2`, `n1 -->|"default"| n3`)
		if get(base+"?lang=") != plain {
			t.Fatal("an empty lang must draw the plain diagram")
		}
		wantLines("zh-CN", get(base+"?lang=zh-CN"), `n0(["提交申请"])`, `n1["直属上级审批"]`, `n2["部门负责人审批"]`,
			`n1 -->|"天数 #gt; 3 或 同时请部门负责人审批 = 是"| n2`, `n1 -->|"默认"| n3`)
		wantLines("en", get(base+"?lang=en"), `n1["Team lead"]`,
			`n1 -->|"Days #gt; 3 or Ask the department leader too = yes"| n2`, `n1 -->|"default"| n3`)
		for _, bad := range []string{"fr", "zh", "ZH-CN", "en-US"} {
			assertError(t, f.do("GET", base+"?lang="+bad, f.tokens["ann"], nil, nil), 400, "invalid_language")
		}

		// An instance: the states stay, the pruned edge's word and the labels are the reader's.
		f.publish("route", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"},"i18n":{"zh-CN":{"name":"申请"}}},
			{"id":"lead","type":"approval","approvers":{"users":["bob"]},"name":"Lead","i18n":{"zh-CN":{"name":"上级审批"},"en":{"name":"Team lead"}},
			 "form":{"fields":[{"id":"k","type":"select","label":"Kind","field":"kind","i18n":{"zh-CN":{"label":"类型"}},
			   "options":[{"label":"Sick","value":"sick","i18n":{"zh-CN":{"label":"病假"}}},{"label":"Annual","value":"annual"}]}]}},
			{"id":"big","type":"approval","approvers":{"users":["bob"]}},
			{"id":"end","type":"end","join":"or"}],
		 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"big","condition":{"kind":{"$in":["sick","annual"]},"days":{"$gte":10}}},
			{"from":"lead","to":"end","default":true},{"from":"big","to":"end"}]}`)
		id := f.start("ann", map[string]any{"template": "route", "context": json.RawMessage(`{"days": 2, "kind": "sick"}`)})
		f.wantOK(f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", nil), 200)
		f.wantInstance(id, "completed", nil)
		ib := "/api/v1/instances/" + id + "/diagram"
		wantLines("instance plain", get(ib), `n1["Lead"]`, `"kind in [sick,annual] and days #gt;= 10 · pruned"`, "class n0,n1,n3 completed")
		wantLines("instance zh-CN", get(ib+"?lang=zh-CN"), `n0(["申请"])`, `n1["上级审批"]`, `n2["big"]`,
			`"类型 属于 [病假,Annual] 且 days ≥ 10 · 未选中"`, `n1 -->|"默认"| n3`, "class n0,n1,n3 completed")
		wantLines("instance en", get(ib+"?lang=en"), `n1["Team lead"]`, `"Kind in [Sick,Annual] and days ≥ 10 · pruned"`)
		assertError(t, f.do("GET", ib+"?lang=de", f.tokens["ann"], nil, nil), 400, "invalid_language")
	})
}
