package server_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestNeedsAttention: GET /instances?needs_attention=true lists for admins the instance that failed at once for
// want of an approver (reason failed, error_code no_approver) and the one whose approver was disabled and, after
// being enabled again, no longer; a non-admin gets 403, a bad value 400.
func TestNeedsAttention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann := e.mkUser("ann")
		e.mkUser("bob")
		e.publish("leave", []any{start(M{"kind": "manual"}),
			M{"id": "lead", "type": "approval", "name": "Team lead", "approvers": M{"relation": "initiator.manager"}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		e.publish("fixed", []any{start(M{"kind": "manual"}),
			M{"id": "review", "type": "approval", "name": "Review", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "review"), edge("review", "end")})

		failed := e.do("POST", "/api/v1/instances", ann, M{"template": "leave"}, nil) // ann has no manager
		if failed.Status != 201 || failed.JSON["status"] != "failed" {
			t.Fatalf("start without a manager: %d %s", failed.Status, failed.Body)
		}
		stuck := e.do("POST", "/api/v1/instances", ann, M{"template": "fixed"}, nil)
		if stuck.Status != 201 || stuck.JSON["status"] != "running" {
			t.Fatalf("start fixed: %d %s", stuck.Status, stuck.Body)
		}
		healthy := e.do("POST", "/api/v1/instances", ann, M{"template": "fixed"}, nil)
		list := func() []any {
			t.Helper()
			r := e.do("GET", "/api/v1/instances?needs_attention=true", e.admin, nil, nil)
			if r.Status != 200 {
				t.Fatalf("needs attention: %d %s", r.Status, r.Body)
			}
			return r.JSON["items"].([]any)
		}
		items := list()
		if len(items) != 1 || items[0].(M)["id"] != failed.JSON["id"] || items[0].(M)["reason"] != "failed" || items[0].(M)["error_code"] != "no_approver" ||
			items[0].(M)["error"].(M)["node_id"] != "lead" || items[0].(M)["template"] != "leave" {
			t.Fatalf("only the failed instance needs attention: %v", items)
		}

		// bob is disabled: both running instances wait for him; enabled again, they no longer need attention.
		if r := e.do("PATCH", "/api/v1/users/bob", e.admin, M{"disabled": true}, nil); r.Status != 200 {
			t.Fatalf("disable bob: %d %s", r.Status, r.Body)
		}
		items = list()
		if len(items) != 3 || items[0].(M)["id"] != healthy.JSON["id"] || items[1].(M)["id"] != stuck.JSON["id"] {
			t.Fatalf("after disabling bob: %v", items)
		}
		it := items[1].(M)
		tasks := it["attention_tasks"].([]any)
		if it["reason"] != "assignee_disabled" || it["error_code"] != "assignee_disabled" || len(tasks) != 1 ||
			tasks[0].(M)["assignee"] != "bob" || tasks[0].(M)["node_name"] != "Review" || tasks[0].(M)["reason"] != "assignee_disabled" {
			t.Fatalf("stuck item: %v", it)
		}
		if r := e.do("PATCH", "/api/v1/users/bob", e.admin, M{"disabled": false}, nil); r.Status != 200 {
			t.Fatalf("enable bob: %d %s", r.Status, r.Body)
		}
		if items = list(); len(items) != 1 {
			t.Fatalf("after enabling bob again: %v", items)
		}

		assertError(t, e.do("GET", "/api/v1/instances?needs_attention=true", ann, nil, nil), 403, "admin_required")
		assertError(t, e.do("GET", "/api/v1/instances?needs_attention=yes", e.admin, nil, nil), 400, "invalid_needs_attention")
		// Without the flag the list is the ordinary one.
		if r := e.do("GET", "/api/v1/instances?needs_attention=false", e.admin, nil, nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 3 {
			t.Fatalf("needs_attention=false: %d %s", r.Status, r.Body)
		}
	})
}

// TestCreatedUserMustChangePassword: a user an admin creates with a password must choose their own at the first
// sign-in (password_change_required on login, GET /me and to admins), unless created with
// "password_change_required": false (a service account); a non-boolean is 400.
func TestCreatedUserMustChangePassword(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		r := e.do("POST", "/api/v1/users", e.admin, M{"username": "dan", "password": "dans-first-pw"}, nil)
		if r.Status != 201 || r.JSON["password_change_required"] != true {
			t.Fatalf("create dan: %d %s", r.Status, r.Body)
		}
		r = e.login("dan", "dans-first-pw")
		if r.Status != 200 || r.JSON["password_change_required"] != true || r.JSON["user"].(M)["password_change_required"] != true {
			t.Fatalf("dan's first login: %d %s", r.Status, r.Body)
		}
		dan := r.JSON["token"].(string)
		if me := e.do("GET", "/api/v1/me", dan, nil, nil); me.Status != 200 || me.JSON["password_change_required"] != true {
			t.Fatalf("GET /me: %s", me.Body)
		}
		if r := e.do("POST", "/api/v1/me/password", dan, M{"old_password": "dans-first-pw", "new_password": "dans-own-pw"}, nil); r.Status != 204 {
			t.Fatalf("change: %d %s", r.Status, r.Body)
		}
		if r := e.login("dan", "dans-own-pw"); r.JSON["password_change_required"] != false {
			t.Fatalf("after the change: %s", r.Body)
		}

		r = e.do("POST", "/api/v1/users", e.admin, M{"username": "robot", "password": "robot-password", "password_change_required": false}, nil)
		if r.Status != 201 || r.JSON["password_change_required"] == true {
			t.Fatalf("create robot: %d %s", r.Status, r.Body)
		}
		if r := e.login("robot", "robot-password"); r.JSON["password_change_required"] != false {
			t.Fatalf("a service account is not asked: %s", r.Body)
		}
		if r := e.do("POST", "/api/v1/users", e.admin, M{"username": "eve", "password": "eves-password", "password_change_required": "no"}, nil); r.Status != 400 {
			t.Fatalf("a non-boolean flag: %d %s", r.Status, r.Body)
		}
		if r := e.do("GET", "/api/v1/users/eve", e.admin, nil, nil); r.Status != 404 {
			t.Fatalf("a refused create stores nothing: %d %s", r.Status, r.Body)
		}
	})
}

// TestListETag: the lists the UI polls carry a weak ETag; asking again with If-None-Match answers 304 without a
// body until the list changes (a new task arrives), then 200 with a new ETag; errors carry none.
func TestListETag(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		ann := e.mkUser("ann")
		e.publish("fixed", []any{start(M{"kind": "manual"}),
			M{"id": "review", "type": "approval", "name": "Review", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "review"), edge("review", "end")})
		first := e.do("GET", "/api/v1/tasks", bob, nil, nil)
		tag := first.Header.Get("ETag")
		if first.Status != 200 || !strings.HasPrefix(tag, `W/"`) || first.Header.Get("Cache-Control") != "private, no-cache" {
			t.Fatalf("first GET /tasks: %d %q %v", first.Status, tag, first.Header)
		}
		same := e.do("GET", "/api/v1/tasks", bob, nil, map[string]string{"If-None-Match": tag})
		if same.Status != 304 || len(same.Body) != 0 || same.Header.Get("ETag") != tag {
			t.Fatalf("unchanged: %d %q %s", same.Status, same.Header.Get("ETag"), same.Body)
		}
		if r := e.do("POST", "/api/v1/instances", ann, M{"template": "fixed"}, nil); r.Status != 201 {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		changed := e.do("GET", "/api/v1/tasks", bob, nil, map[string]string{"If-None-Match": tag})
		if changed.Status != 200 || changed.Header.Get("ETag") == tag || len(changed.JSON["items"].([]any)) != 1 {
			t.Fatalf("after a new task: %d %q %s", changed.Status, changed.Header.Get("ETag"), changed.Body)
		}
		// Another user's list is another body: never the same ETag as bob's non-empty one.
		if r := e.do("GET", "/api/v1/tasks", ann, nil, map[string]string{"If-None-Match": changed.Header.Get("ETag")}); r.Status != 200 {
			t.Fatalf("ann with bob's ETag: %d", r.Status)
		}
		for _, p := range []string{"/api/v1/cc", "/api/v1/instances"} { // (/notifications has it too, when notifications are on)
			r := e.do("GET", p, bob, nil, nil)
			if r.Status != 200 || r.Header.Get("ETag") == "" {
				t.Fatalf("%s: %d %q", p, r.Status, r.Header.Get("ETag"))
			}
			if again := e.do("GET", p, bob, nil, map[string]string{"If-None-Match": r.Header.Get("ETag")}); again.Status != 304 {
				t.Fatalf("%s again: %d", p, again.Status)
			}
		}
		bad := e.do("GET", "/api/v1/tasks?limit=0", bob, nil, nil)
		if bad.Status != 400 || bad.Header.Get("ETag") != "" || bad.code() != "invalid_limit" {
			t.Fatalf("an error: %d %q %s", bad.Status, bad.Header.Get("ETag"), bad.Body)
		}
	})
}
