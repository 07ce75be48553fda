package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

type M = map[string]any

func start(trigger M) M { return M{"id": "start", "type": "start", "trigger": trigger} }

// publish creates and publishes a template, failing the test otherwise.
func (e *env) publish(key string, nodes []any, edges []any) {
	e.t.Helper()
	r := e.do("POST", "/api/v1/templates", e.admin, M{"key": key, "name": key, "definition": M{"nodes": nodes, "edges": edges}}, nil)
	if r.Status != 201 {
		e.t.Fatalf("create %s: %s", key, r.Body)
	}
	if v := r.JSON["validation"].(M); v["valid"] != true {
		e.t.Fatalf("template %s is invalid: %v", key, v["errors"])
	}
	if r = e.do("POST", "/api/v1/templates/"+key+"/publish", e.admin, nil, nil); r.Status != 201 {
		e.t.Fatalf("publish %s: %s", key, r.Body)
	}
}

func edge(from, to string) M { return M{"from": from, "to": to} }

func (e *env) instance(id string) resp {
	e.t.Helper()
	r := e.do("GET", "/api/v1/instances/"+id, e.admin, nil, nil)
	if r.Status != 200 {
		e.t.Fatalf("get instance: %s", r.Body)
	}
	return r
}

func nodeState(r resp, id string) string {
	for _, n := range r.JSON["nodes"].([]any) {
		if n.(M)["node_id"] == id {
			return n.(M)["state"].(string)
		}
	}
	return ""
}

func (e *env) history(id string) []string {
	r := e.do("GET", "/api/v1/instances/"+id+"/history", e.admin, nil, nil)
	var out []string
	for _, h := range r.JSON["items"].([]any) {
		out = append(out, h.(M)["action"].(string)+":"+h.(M)["node_id"].(string))
	}
	return out
}

func countOf(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

func (e *env) advance(d time.Duration) { e.clock.set(e.clock.Now().Add(d)) }

func TestAPITriggers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		e.publish("hr-leave", []any{
			start(M{"kind": "sync-api", "module": "hr", "function": "leave", "method": "post", "login_verification": "token", "header_token": "s3cret-token",
				"allow_remote_ips": "127.0.0.1/32, ::1"}),
			M{"id": "grant", "type": "auto"}, M{"id": "end", "type": "end"},
		}, []any{edge("start", "grant"), edge("grant", "end")})
		// The token is stored keyed-hashed and shown to nobody, admins included.
		if r := e.do("GET", "/api/v1/templates/hr-leave", e.admin, nil, nil); strings.Contains(string(r.Body), "s3cret-token") ||
			strings.Contains(string(r.Body), "sha256:") || gjson.GetBytes(r.Body, "draft.definition.nodes.0.trigger.header_token").String() != "***" {
			t.Fatalf("trigger secret shown: %s", r.Body)
		}
		var stored string
		s.DB().Raw("SELECT definition FROM template_versions WHERE tkey = ?", "hr-leave").Scan(&stored)
		if !strings.HasPrefix(gjson.Get(stored, "nodes.0.trigger.header_token").String(), "hmac-sha256:") || strings.Contains(stored, "s3cret-token") {
			t.Fatalf("trigger secret stored as %s", stored)
		}
		tok := map[string]string{"X-Halley-Token": "s3cret-token"}
		r := e.do("POST", "/api/v1/trigger/sync/hr/leave?dept=eng", "", M{"days": 2}, tok)
		if r.Status != 200 || r.JSON["status"] != "completed" || r.JSON["context"].(M)["days"] != float64(2) || r.JSON["context"].(M)["dept"] != "eng" || r.JSON["instance_id"] == "" {
			t.Fatalf("sync trigger: %d %s", r.Status, r.Body)
		}
		inst := e.instance(r.JSON["instance_id"].(string))
		if inst.JSON["initiator"] != "api:hr/leave" {
			t.Fatalf("initiator: %s", inst.Body)
		}
		r = e.do("GET", "/api/v1/trigger/sync/hr/leave", "", nil, tok)
		assertError(t, r, 405, "method_not_allowed")
		if r.Header.Get("Allow") != "POST" {
			t.Fatalf("Allow header: %q", r.Header.Get("Allow"))
		}
		assertError(t, e.do("POST", "/api/v1/trigger/sync/hr/leave", "", M{}, map[string]string{"X-Halley-Token": "wrong"}), 401, "invalid_trigger_credentials")
		assertError(t, e.do("POST", "/api/v1/trigger/sync/hr/leave", "", M{}, nil), 401, "invalid_trigger_credentials")
		assertError(t, e.do("POST", "/api/v1/trigger/sync/hr/nope", "", M{}, tok), 404, "trigger_not_found")
		assertError(t, e.do("POST", "/api/v1/trigger/async/hr/leave", "", M{}, tok), 404, "trigger_not_found")
		assertError(t, e.do("POST", "/api/v1/trigger/sync/hr/leave", "", "[1]", tok), 400, "invalid_context")

		// The route is owned: another template cannot publish it.
		r = e.do("POST", "/api/v1/templates", e.admin, M{"key": "thief", "definition": M{"nodes": []any{start(M{"kind": "async-api", "module": "hr", "function": "leave"}), M{"id": "end", "type": "end"}},
			"edges": []any{edge("start", "end")}}}, nil)
		assertError(t, e.do("POST", "/api/v1/templates/thief/publish", e.admin, nil, nil), 422, "trigger_taken")

		// IP allow-list, password login, async start, and a sync start that outlives its wait.
		e.publish("ops-remote", []any{start(M{"kind": "async-api", "module": "ops", "function": "remote", "allow_remote_ips": "10.0.0.0/8"}), M{"id": "end", "type": "end"}},
			[]any{edge("start", "end")})
		assertError(t, e.do("POST", "/api/v1/trigger/async/ops/remote", "", M{}, nil), 403, "ip_not_allowed")
		e.publish("ops-pw", []any{start(M{"kind": "async-api", "module": "ops", "function": "pw", "method": "put", "login_verification": "password",
			"header_user": "erp", "header_password": "erp-pass-1"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})
		assertError(t, e.do("PUT", "/api/v1/trigger/async/ops/pw", "", M{}, map[string]string{"X-Halley-User": "erp", "X-Halley-Password": "nope"}), 401, "")
		r = e.do("PUT", "/api/v1/trigger/async/ops/pw", "", M{"n": 1}, map[string]string{"X-Halley-User": "erp", "X-Halley-Password": "erp-pass-1"})
		if r.Status != 202 || r.JSON["instance_id"] == nil {
			t.Fatalf("async: %d %s", r.Status, r.Body)
		}
		if st := e.instance(r.JSON["instance_id"].(string)).JSON["status"]; st != "running" {
			t.Fatalf("async instance: %v", st)
		}
		e.publish("hr-slow", []any{start(M{"kind": "sync-api", "module": "hr", "function": "slow"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})
		r = e.do("POST", "/api/v1/trigger/sync/hr/slow?wait=0", "", M{}, nil)
		if r.Status != 202 || r.JSON["status"] != "running" {
			t.Fatalf("sync past its wait: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/trigger/sync/hr/slow?wait=x", "", M{}, nil), 400, "invalid_wait")
	})
}

func TestForms(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob, carol := e.mkUser("bob"), e.mkUser("carol")
		form := M{"fields": []any{M{"name": "days", "type": "number"}}}
		e.publish("open-form", []any{start(M{"kind": "form", "form": form}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		e.publish("team-form", []any{start(M{"kind": "form", "form": form, "members": []string{"bob"}}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		r := e.do("GET", "/api/v1/forms/open-form", "", nil, nil)
		if r.Status != 200 || r.JSON["form"] == nil || r.JSON["require_login"] != false {
			t.Fatalf("get form: %d %s", r.Status, r.Body)
		}
		r = e.do("POST", "/api/v1/forms/open-form/submit", "", M{"days": 3}, nil)
		if r.Status != 201 || r.JSON["initiator"] != model.InitiatorAnonymous || r.JSON["context"].(M)["days"] != float64(3) || r.JSON["status"] != "completed" {
			t.Fatalf("anonymous submit: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/forms/team-form", "", nil, nil), 401, "login_required")
		assertError(t, e.do("GET", "/api/v1/forms/team-form", carol, nil, nil), 403, "not_a_member")
		assertError(t, e.do("POST", "/api/v1/forms/team-form/submit", carol, M{}, nil), 403, "not_a_member")
		if r = e.do("POST", "/api/v1/forms/team-form/submit", bob, M{"days": 1}, nil); r.Status != 201 || r.JSON["initiator"] != "bob" {
			t.Fatalf("member submit: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/forms/nope", "", nil, nil), 404, "")
		assertError(t, e.do("POST", "/api/v1/forms/open-form/submit", "", "[]", nil), 400, "")
		// Anonymous submissions are rate-limited per IP (burst 5; one was used above).
		codes := []int{}
		for i := 0; i < 6; i++ {
			codes = append(codes, e.do("POST", "/api/v1/forms/open-form/submit", "", M{"i": i}, nil).Status)
		}
		if codes[len(codes)-1] != http.StatusTooManyRequests {
			t.Fatalf("no rate limit: %v", codes)
		}
	})
}

func TestDelayCallbackAndTimeoutBranch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.publish("waits", []any{start(M{"kind": "manual"}), M{"id": "wait", "type": "delay", "interval": 60},
			M{"id": "cb", "type": "callback", "timeout": "30s", "timeout_branch": "late"}, M{"id": "late", "type": "end"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "wait"), edge("wait", "cb"), edge("cb", "end")})
		r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "waits"}, nil)
		id := r.JSON["id"].(string)
		if nodeState(r, "wait") != "waiting" {
			t.Fatalf("delay not waiting: %s", r.Body)
		}
		e.advance(59 * time.Second)
		if n := e.fireDue(); n != 0 {
			t.Fatalf("%d timers fired early", n)
		}
		e.advance(2 * time.Second)
		if n := e.fireDue(); n != 1 {
			t.Fatalf("delay fired %d timers", n)
		}
		r = e.instance(id)
		if nodeState(r, "wait") != "completed" || nodeState(r, "cb") != "waiting" {
			t.Fatalf("after delay: %s", r.Body)
		}
		var url string
		for _, n := range r.JSON["nodes"].([]any) {
			if n.(M)["node_id"] == "cb" {
				url, _ = n.(M)["callback_url"].(string)
			}
		}
		if !strings.HasPrefix(url, "http://halley.test/api/v1/callback/"+id+"/") || !strings.Contains(url, "?token=") {
			t.Fatalf("callback url %q", url)
		}
		path := strings.TrimPrefix(url, "http://halley.test")
		assertError(t, e.do("POST", strings.Split(path, "?")[0]+"?token=forged", "", M{}, nil), 401, "invalid_callback_token")
		e.advance(31 * time.Second)
		if n := e.fireDue(); n != 1 {
			t.Fatalf("timeout fired %d", n)
		}
		r = e.instance(id)
		if r.JSON["status"] != "completed" || nodeState(r, "cb") != "cancelled" || nodeState(r, "late") != "completed" {
			t.Fatalf("timeout branch: %s", r.Body)
		}
		assertError(t, e.do("POST", path, "", M{"ok": true}, nil), 409, "already_resumed")
		h := e.history(id)
		if countOf(h, "timer.fired:wait") != 1 || countOf(h, "timer.fired:cb") != 1 || countOf(h, "node.timeout_branch:cb") != 1 {
			t.Fatalf("history: %v", h)
		}
		// A second fire of the same (already handled) timers does nothing.
		if n := e.fireDue(); n != 0 {
			t.Fatalf("handled timers still pending: %d", n)
		}

		// In time: the callback resumes the node with its body under context.<node id>.
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "waits"}, nil)
		id2 := r.JSON["id"].(string)
		e.advance(61 * time.Second)
		e.fireDue()
		for _, n := range e.instance(id2).JSON["nodes"].([]any) {
			if n.(M)["node_id"] == "cb" {
				url = n.(M)["callback_url"].(string)
			}
		}
		r = e.do("POST", strings.TrimPrefix(url, "http://halley.test"), "", M{"cache_id": "c-1"}, nil)
		if r.Status != 200 || r.JSON["status"] != "completed" || r.JSON["context"].(M)["cb"].(M)["cache_id"] != "c-1" {
			t.Fatalf("callback: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", strings.TrimPrefix(url, "http://halley.test"), "", M{}, nil), 409, "already_resumed")
		assertError(t, e.do("POST", "/api/v1/callback/"+id2+"/"+id2+".n999?token=x", "", M{}, nil), 401, "")
		assertError(t, e.do("POST", "/api/v1/callback/"+id2+"/"+id2+".n999", e.admin, M{}, nil), 404, "callback_not_found")
		// The cancelled timeout of the resumed visit never fires.
		e.advance(time.Hour)
		if n := e.fireDue(); n != 0 {
			t.Fatalf("a cancelled timer fired: %d", n)
		}
	})
}

func TestErrorHandlingAndTerminate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		// Approvers from a context path that is missing: a node error. Retry twice, then the catch branch.
		e.publish("retry-catch", []any{start(M{"kind": "manual"}),
			M{"id": "review", "type": "approval", "approvers": M{"context": "reviewer"}, "error_handler": M{"operation": "retry", "retry": M{"count": 2, "period": "10s"}, "catch": M{"branch": "fallback"}}},
			M{"id": "fallback", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}, M{"id": "end2", "type": "end"}},
			[]any{edge("start", "review"), edge("review", "end"), edge("fallback", "end2")})
		r := e.do("POST", "/api/v1/instances", e.admin, M{"template": "retry-catch"}, nil)
		id := r.JSON["id"].(string)
		if nodeState(r, "review") != "waiting" {
			t.Fatalf("retry not scheduled: %s", r.Body)
		}
		e.advance(11 * time.Second)
		e.fireDue()
		e.advance(11 * time.Second)
		e.fireDue()
		r = e.instance(id)
		if nodeState(r, "review") != "failed" || nodeState(r, "fallback") != "active" || r.JSON["status"] != "running" || r.JSON["context"].(M)["error"].(M)["node_id"] != "review" {
			t.Fatalf("retry then catch: %s", r.Body)
		}
		h := e.history(id)
		if countOf(h, "node.error:review") != 3 || countOf(h, "node.retry_scheduled:review") != 2 || countOf(h, "node.error_caught:review") != 1 {
			t.Fatalf("history: %v", h)
		}

		// throw (the default) with a global error node: the error node's path runs.
		e.publish("global-error", []any{start(M{"kind": "manual"}), M{"id": "review", "type": "approval", "approvers": M{"context": "reviewer"}},
			M{"id": "oops", "type": "error"}, M{"id": "notify", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}, M{"id": "end2", "type": "end"}},
			[]any{edge("start", "review"), edge("review", "end"), edge("oops", "notify"), edge("notify", "end2")})
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "global-error"}, nil)
		if nodeState(r, "review") != "failed" || nodeState(r, "oops") != "completed" || nodeState(r, "notify") != "active" || r.JSON["context"].(M)["error"].(M)["node_id"] != "review" {
			t.Fatalf("global error node: %s", r.Body)
		}
		// Without an error node the instance fails.
		e.publish("no-catcher", []any{start(M{"kind": "manual"}), M{"id": "review", "type": "approval", "approvers": M{"context": "reviewer"}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "review"), edge("review", "end")})
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "no-catcher"}, nil)
		if r.JSON["status"] != "failed" || r.JSON["ended_at"] == nil {
			t.Fatalf("unhandled error: %s", r.Body)
		}
		// ignore: the node passes as if it succeeded.
		e.publish("ignore", []any{start(M{"kind": "manual"}), M{"id": "review", "type": "approval", "approvers": M{"context": "reviewer"}, "error_handler": M{"operation": "ignore"}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "review"), edge("review", "end")})
		if r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "ignore"}, nil); r.JSON["status"] != "completed" {
			t.Fatalf("ignore: %s", r.Body)
		}
		// is_ignore passes a node through without running it.
		e.publish("skip-node", []any{start(M{"kind": "manual"}), M{"id": "review", "type": "approval", "approvers": M{"users": []string{"bob"}}, "is_ignore": true}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "review"), edge("review", "end")})
		if r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "skip-node"}, nil); r.JSON["status"] != "completed" || len(r.JSON["tasks"].([]any)) != 0 {
			t.Fatalf("is_ignore: %s", r.Body)
		}

		// A terminate node ends the instance at once and cancels the parallel branch's task and timer.
		e.publish("term", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "timeout": "1h", "on_timeout": "remind"},
			M{"id": "stop", "type": "terminate"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("start", "stop"), edge("lead", "end")})
		r = e.do("POST", "/api/v1/instances", e.admin, M{"template": "term"}, nil)
		if r.JSON["status"] != "terminated" || nodeState(r, "lead") != "cancelled" || r.JSON["tasks"].([]any)[0].(M)["status"] != "cancelled" {
			t.Fatalf("terminate node: %s", r.Body)
		}
		e.advance(2 * time.Hour)
		if n := e.fireDue(); n != 0 {
			t.Fatalf("timer of a terminated instance still pending: %d", n)
		}
	})
}

func TestApprovalTimeouts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		mk := func(key string, onTimeout any) {
			nodes := []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "timeout": "1h", "on_timeout": onTimeout},
				M{"id": "end", "type": "end"}}
			edges := []any{edge("start", "lead"), edge("lead", "end")}
			if _, branch := onTimeout.(M); branch {
				nodes = append(nodes, M{"id": "esc", "type": "approval", "approvers": M{"users": []string{"admin"}}}, M{"id": "end2", "type": "end"})
				edges = append(edges, edge("esc", "end2"))
			}
			e.publish(key, nodes, edges)
		}
		mk("t-approve", "approve")
		mk("t-reject", "reject")
		mk("t-remind", "remind")
		mk("t-branch", M{"branch": "esc"})
		ids := map[string]string{}
		for _, k := range []string{"t-approve", "t-reject", "t-remind", "t-branch"} {
			ids[k] = e.do("POST", "/api/v1/instances", bob, M{"template": k}, nil).JSON["id"].(string)
		}
		e.advance(61 * time.Minute)
		if n := e.fireDue(); n != 4 {
			t.Fatalf("fired %d, want 4", n)
		}
		if st := e.instance(ids["t-approve"]).JSON["status"]; st != "completed" {
			t.Fatalf("on_timeout approve: %v", st)
		}
		if st := e.instance(ids["t-reject"]).JSON["status"]; st != "rejected" {
			t.Fatalf("on_timeout reject: %v", st)
		}
		r := e.instance(ids["t-branch"])
		if nodeState(r, "lead") != "cancelled" || nodeState(r, "esc") != "active" {
			t.Fatalf("on_timeout branch: %s", r.Body)
		}
		r = e.instance(ids["t-remind"])
		if r.JSON["status"] != "running" || nodeState(r, "lead") != "active" || countOf(e.history(ids["t-remind"]), "task.reminder:lead") != 1 {
			t.Fatalf("remind: %s", r.Body)
		}
		// Reminders repeat; deciding the task cancels the next one.
		e.advance(61 * time.Minute)
		if n := e.fireDue(); n != 1 || countOf(e.history(ids["t-remind"]), "task.reminder:lead") != 2 {
			t.Fatalf("second reminder: %d", n)
		}
		task := e.do("GET", "/api/v1/tasks", bob, nil, nil).JSON["items"].([]any)[0].(M)["id"].(string)
		if r = e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{}, nil); r.Status != 200 {
			t.Fatalf("approve: %s", r.Body)
		}
		e.advance(2 * time.Hour)
		if n := e.fireDue(); n != 0 {
			t.Fatalf("reminder after the decision: %d", n)
		}
	})
}

func TestCrontab(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		e.clock.set(time.Date(2026, 3, 2, 9, 1, 0, 0, time.UTC))
		end := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
		e.publish("nightly", []any{start(M{"kind": "crontab", "expr": "*/5 * * * *", "allow_repeated": false, "end_at": end.Format(time.RFC3339)}),
			M{"id": "check", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "check"), edge("check", "end")})
		list := func() []any {
			return e.do("GET", "/api/v1/instances?template=nightly", e.admin, nil, nil).JSON["items"].([]any)
		}
		e.advance(3 * time.Minute) // 09:04: nothing due yet
		if n := e.fireDue(); n != 0 {
			t.Fatalf("fired before 09:05: %d", n)
		}
		e.advance(time.Minute) // 09:05
		e.fireDue()
		items := list()
		if len(items) != 1 || items[0].(M)["initiator"] != model.InitiatorCron || items[0].(M)["context"].(M)["scheduled_at"] != "2026-03-02T09:05:00Z" {
			t.Fatalf("first fire: %v", items)
		}
		e.advance(5 * time.Minute) // 09:10: the 09:05 instance still runs → skipped
		e.fireDue()
		if len(list()) != 1 {
			t.Fatal("allow_repeated=false started a second instance")
		}
		r := e.do("GET", "/api/v1/templates/nightly/trigger-log", e.admin, nil, nil)
		if !strings.Contains(string(r.Body), `"action":"skipped"`) {
			t.Fatalf("skip not recorded: %s", r.Body)
		}
		// Finish it, then "downtime": an hour passes; the missed fires collapse into one.
		first := items[0].(M)["id"].(string)
		e.do("POST", "/api/v1/instances/"+first+"/terminate", e.admin, M{"reason": "done"}, nil)
		e.advance(time.Hour) // 10:10
		e.fireDue()
		if n := len(list()); n != 2 {
			t.Fatalf("after downtime %d instances, want 2", n)
		}
		if n := e.fireDue(); n != 0 {
			t.Fatalf("missed fires fired again: %d", n)
		}
		// Past end_at the schedule closes.
		for _, x := range list() {
			e.do("POST", "/api/v1/instances/"+x.(M)["id"].(string)+"/terminate", e.admin, M{}, nil)
		}
		e.advance(3 * time.Hour)
		e.fireDue()
		e.advance(time.Hour)
		if n := e.fireDue(); n != 0 {
			t.Fatalf("fires after end_at: %d", n)
		}
		pending, _ := s.PendingTimers(ctx0, "", 100)
		for _, p := range pending {
			if p.Kind == model.TimerCrontab {
				t.Fatalf("crontab still armed after end_at: %+v", p)
			}
		}
		// A newer version without crontab disarms it.
		e.clock.set(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
		e.do("PUT", "/api/v1/templates/nightly/draft", e.admin, M{"definition": M{"nodes": []any{start(M{"kind": "crontab", "expr": "0 * * * *"}), M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "end")}}}, nil)
		e.do("POST", "/api/v1/templates/nightly/publish", e.admin, nil, nil)
		e.do("PUT", "/api/v1/templates/nightly/draft", e.admin, M{"definition": M{"nodes": []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "end")}}}, nil)
		e.do("POST", "/api/v1/templates/nightly/publish", e.admin, nil, nil)
		pending, _ = s.PendingTimers(ctx0, "", 100)
		if len(pending) != 0 {
			t.Fatalf("a replaced crontab is still armed: %v", fmt.Sprint(pending))
		}
	})
}

// TestConcurrentTimerArming: many instances arming timers at once all start (arming once deadlocked on InnoDB gap
// locks and failed some starts).
func TestConcurrentTimerArming(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.publish("waiting", []any{start(M{"kind": "manual"}), M{"id": "wait", "type": "delay", "interval": 3600}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "wait"), edge("wait", "end")})
		const n = 40
		codes := make(chan int, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes <- e.do("POST", "/api/v1/instances", e.admin, M{"template": "waiting"}, nil).Status
			}()
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			if c != 201 {
				t.Fatalf("a start failed with %d", c)
			}
		}
		pending, _ := s.PendingTimers(ctx0, "", 1000)
		if len(pending) != n {
			t.Fatalf("%d timers armed, want %d", len(pending), n)
		}
	})
}
