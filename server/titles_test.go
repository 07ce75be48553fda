package server_test

import (
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// A template's title pattern names each instance; the labels travel with the template; a title the starter gives
// wins; a resubmit that changed the data renders the title again.
func TestTitlePatternsAndLabels(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.clock.set(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
		r := e.do("POST", "/api/v1/users", e.admin, M{"username": "hana", "password": "pw-hana-123", "display_name": "Hana 花",
			"password_change_required": false}, nil)
		if r.Status != 201 {
			t.Fatalf("create user: %s", r.Body)
		}
		hana := e.do("POST", "/api/v1/auth/login", "", M{"username": "hana", "password": "pw-hana-123"}, nil).JSON["token"].(string)
		bob := e.mkUser("bob")
		def := M{
			"title_pattern": "{initiator} · {days} days of {leave.type} leave",
			"i18n": M{
				"zh-CN": M{"name": "请假申请", "description": "年假、病假", "title_pattern": "{initiator} · {days} 天{leave.type}（{date}）"},
				"en":    M{"name": "Leave request"},
			},
			"nodes": []any{
				M{"id": "start", "type": "start", "trigger": M{"kind": "manual"}, "i18n": M{"zh-CN": M{"name": "发起"}, "en": M{"name": "Apply"}}},
				appr("lead", "bob"), M{"id": "end", "type": "end"}},
			"edges": []any{edge("start", "lead"), edge("lead", "end")},
		}
		if r := e.do("POST", "/api/v1/templates", e.admin, M{"key": "leave", "name": "Leave", "definition": def}, nil); r.Status != 201 {
			t.Fatalf("create: %s", r.Body)
		} else if l, _ := r.JSON["i18n"].(M); l == nil || l["zh-CN"].(M)["name"] != "请假申请" {
			t.Fatalf("the template's labels must come with it: %s", r.Body)
		}
		if r := e.do("POST", "/api/v1/templates/leave/publish", e.admin, nil, nil); r.Status != 201 {
			t.Fatalf("publish: %s", r.Body)
		}
		list := e.do("GET", "/api/v1/templates", hana, nil, nil)
		if !contains(string(list.Body), `"i18n":{"en":{"name":"Leave request"},"zh-CN":{"name":"请假申请","description":"年假、病假"}}`) {
			t.Fatalf("the list must carry the labels: %s", list.Body)
		}

		r = e.do("POST", "/api/v1/instances", hana, M{"template": "leave", "context": M{"days": 3, "leave": M{"type": "annual"}}}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %s", r.Body)
		}
		id := r.JSON["id"].(string)
		titles, _ := r.JSON["title_i18n"].(M)
		if r.JSON["title"] != "Hana 花 · 3 days of annual leave" || titles["zh-CN"] != "Hana 花 · 3 天annual（2026-11-28）" ||
			titles["en"] != "Hana 花 · 3 days of annual leave" {
			t.Fatalf("title %v, titles %v", r.JSON["title"], titles)
		}
		// Lists carry both renderings.
		l := e.do("GET", "/api/v1/instances?mine=true", hana, nil, nil)
		if !contains(string(l.Body), `"title_i18n":{"en":"Hana 花 · 3 days of annual leave","zh-CN":"Hana 花 · 3 天annual（2026-11-28）"}`) {
			t.Fatalf("the list must carry the titles: %s", l.Body)
		}
		// A missing value renders empty.
		r = e.do("POST", "/api/v1/instances", hana, M{"template": "leave", "context": M{"days": 2}}, nil)
		if r.JSON["title"] != "Hana 花 · 2 days of leave" {
			t.Fatalf("title %v", r.JSON["title"])
		}
		// The starter's title wins.
		r = e.do("POST", "/api/v1/instances", hana, M{"template": "leave", "title": "My own", "context": M{"days": 2}}, nil)
		if r.JSON["title"] != "My own" || r.JSON["title_i18n"] != nil {
			t.Fatalf("title %v %v", r.JSON["title"], r.JSON["title_i18n"])
		}
		// A resubmit with other data renders the title again.
		if r := e.act(bob, id, "lead/bob", "return", M{"to": "start", "comment": "one day less"}); r.Status != 200 {
			t.Fatalf("return: %s", r.Body)
		}
		if r := e.act(hana, id, "start/hana", "approve", M{"data": M{"days": 2}}); r.Status != 200 {
			t.Fatalf("resubmit: %s", r.Body)
		}
		got := e.instance(id)
		if got.JSON["title"] != "Hana 花 · 2 days of annual leave" || got.JSON["title_i18n"].(M)["zh-CN"] != "Hana 花 · 2 天annual（2026-11-28）" {
			t.Fatalf("after the resubmit: %v %v", got.JSON["title"], got.JSON["title_i18n"])
		}

		// The plain title (inboxes, notifications) is in the initiator's language when they chose one.
		if r := e.do("PUT", "/api/v1/me", bob, M{"language": "zh-CN", "display_name": "王 Bob"}, nil); r.Status != 200 {
			t.Fatalf("patch: %s", r.Body)
		}
		r = e.do("POST", "/api/v1/instances", bob, M{"template": "leave", "context": M{"days": 1, "leave": M{"type": "sick"}}}, nil)
		if r.JSON["title"] != "王 Bob · 1 天sick（2026-11-28）" || r.JSON["title_i18n"].(M)["en"] != "王 Bob · 1 days of sick leave" {
			t.Fatalf("title %v %v", r.JSON["title"], r.JSON["title_i18n"])
		}

		// An unknown placeholder is refused at publish, with what is wrong.
		formDef := M{"title_pattern": "{initiator} · {dayz}", "nodes": []any{
			M{"id": "start", "type": "start", "trigger": M{"kind": "form", "form": M{"kind": "components", "fields": []any{
				M{"id": "days", "type": "number", "label": "Days", "field": "days"}}}}},
			M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "end")}}
		e.do("POST", "/api/v1/templates", e.admin, M{"key": "bad-title", "name": "Bad", "definition": formDef}, nil)
		r = e.do("POST", "/api/v1/templates/bad-title/publish", e.admin, nil, nil)
		assertError(t, r, 422, "invalid_definition")
		if !contains(string(r.Body), `"code":"bad_title_pattern"`) || !contains(string(r.Body), `{dayz} is no field of the start form`) {
			t.Fatalf("publish must say what is wrong: %s", r.Body)
		}
	})
}
