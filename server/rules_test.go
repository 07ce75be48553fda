package server_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/templates"
)

// Approval rules, delegation and urge through HTTP (API.md "Approval rules", "Delegation", "Urge").

func TestApprovalRulesValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		for i, tc := range []struct {
			node  M
			field string
		}{
			{M{"id": "n", "type": "approval", "approvers": M{"relation": "initiator.managers", "levels": 0}}, "levels"},
			{M{"id": "n", "type": "approval", "approvers": M{"relation": "initiator.managers", "levels": -1}}, "levels"},
			{M{"id": "n", "type": "approval", "approvers": M{"relation": "initiator.managers", "levels": 21}}, "levels"},
			{M{"id": "n", "type": "approval", "approvers": M{"relation": "initiator.managers"}}, "levels"},
			{M{"id": "n", "type": "approval", "approvers": M{"users": []string{"a"}}, "on_no_approver": "ignore"}, "on_no_approver"},
			{M{"id": "n", "type": "approval", "approvers": M{"roles": []string{"dba"}, "scope": "planet"}}, "scope"},
			{M{"id": "n", "type": "approval", "approvers": M{"users": []string{"a"}, "scope": "initiator.department"}}, "scope"},
			{M{"id": "n", "type": "approval", "approvers": M{"users": []string{"a"}, "levels": 2}}, "levels"},
		} {
			key := "bad-" + strconv.Itoa(i)
			def := M{"nodes": []any{start(M{"kind": "manual"}), tc.node, M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "n"), edge("n", "end")}}
			if r := e.do("POST", "/api/v1/templates", e.admin, M{"key": key, "name": key, "definition": def}, nil); r.Status != 201 {
				t.Fatalf("create %s: %s", key, r.Body)
			}
			r := e.do("POST", "/api/v1/templates/"+key+"/publish", e.admin, nil, nil)
			if r.Status != 422 {
				t.Fatalf("%d: publish %v: %d %s", i, tc.node, r.Status, r.Body)
			}
			errs := r.JSON["error"].(M)["details"].(M)["errors"].([]any)
			found := false
			for _, x := range errs {
				ve := x.(M)
				nodes, _ := ve["nodes"].([]any)
				if ve["code"] == "bad_node" && len(nodes) == 1 && nodes[0] == "n" && contains(ve["message"].(string), tc.field) {
					found = true
				}
			}
			if !found {
				t.Fatalf("%d: %v: no bad_node naming n and %s: %s", i, tc.node, tc.field, r.Body)
			}
		}
		// Options: an unknown self_approval or dedupe.
		for _, opts := range []M{{"self_approval": "always"}, {"dedupe": "all"}} {
			def := M{"options": opts, "nodes": []any{start(M{"kind": "manual"}), M{"id": "n", "type": "approval", "approvers": M{"users": []string{"a"}}},
				M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "n"), edge("n", "end")}}
			r := e.do("POST", "/api/v1/templates/validate", e.admin, M{"definition": def}, nil)
			if r.Status != 200 || r.JSON["valid"] != false {
				t.Fatalf("options %v: %s", opts, r.Body)
			}
		}
	})
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDelegationsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann, bob, carol := e.mkUser("ann"), e.mkUser("bob"), e.mkUser("carol")
		_ = e.mkUser("dave")
		now := time.Now().UTC()
		win := func(from, to time.Duration) M {
			return M{"starts_at": now.Add(from).Format(time.RFC3339), "ends_at": now.Add(to).Format(time.RFC3339)}
		}
		with := func(m M, kv ...any) M {
			out := M{}
			for k, v := range m {
				out[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				out[kv[i].(string)] = kv[i+1]
			}
			return out
		}
		for _, tc := range []struct {
			body  M
			code  string
			field string
		}{
			{with(win(-time.Minute, time.Hour), "to", "bob"), "delegate_self", "to"},
			{with(win(-time.Minute, time.Hour), "to", "nobody"), "unknown_user", "to"},
			{with(win(-time.Minute, time.Hour)), "invalid_to", "to"},
			{with(win(time.Hour, time.Hour), "to", "carol"), "invalid_window", "ends_at"},
			{with(win(2*time.Hour, time.Hour), "to", "carol"), "invalid_window", "ends_at"},
			{with(win(-2*time.Hour, -time.Hour), "to", "carol"), "invalid_window", "ends_at"},
			{M{"to": "carol", "ends_at": now.Add(time.Hour).Format(time.RFC3339)}, "invalid_window", "starts_at"},
		} {
			r := e.do("POST", "/api/v1/delegations", bob, tc.body, nil)
			if r.Status != 422 || r.JSON["error"].(M)["code"] != tc.code || r.JSON["error"].(M)["details"].(M)["field"] != tc.field {
				t.Fatalf("%v: %d %s", tc.body, r.Status, r.Body)
			}
		}
		var n int64
		if err := s.DB().Table("delegations").Count(&n).Error; err != nil || n != 0 {
			t.Fatalf("%d delegations after refused requests (%v)", n, err)
		}
		r := e.do("POST", "/api/v1/delegations", bob, with(win(-time.Minute, time.Hour), "to", "carol", "reason", "holiday"), nil)
		if r.Status != 201 || r.JSON["from"] != "bob" || r.JSON["to"] != "carol" || r.JSON["id"] == "" {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		if r := e.do("POST", "/api/v1/delegations", bob, with(win(30*time.Minute, 2*time.Hour), "to", "dave"), nil); r.Status != 422 ||
			r.JSON["error"].(M)["code"] != "delegation_overlaps" {
			t.Fatalf("overlap: %d %s", r.Status, r.Body)
		}
		// Only admins set one for someone else.
		if r := e.do("POST", "/api/v1/delegations", ann, with(win(0, time.Hour), "to", "carol", "from", "dave"), nil); r.Status != 403 {
			t.Fatalf("ann for dave: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/api/v1/delegations", e.admin, with(win(0, time.Hour), "to", "carol", "from", "dave"), nil); r.Status != 201 || r.JSON["from"] != "dave" {
			t.Fatalf("admin for dave: %d %s", r.Status, r.Body)
		}
		// Mine, both directions: carol sees both she receives; ann sees none; ann may not list carol's.
		if r := e.do("GET", "/api/v1/delegations", carol, nil, nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 2 {
			t.Fatalf("carol's: %s", r.Body)
		}
		if r := e.do("GET", "/api/v1/delegations", ann, nil, nil); len(r.JSON["items"].([]any)) != 0 {
			t.Fatalf("ann's: %s", r.Body)
		}
		if r := e.do("GET", "/api/v1/delegations?user=carol", ann, nil, nil); r.Status != 403 {
			t.Fatalf("ann lists carol's: %d", r.Status)
		}
		if r := e.do("GET", "/api/v1/delegations?user=bob", e.admin, nil, nil); len(r.JSON["items"].([]any)) != 1 {
			t.Fatalf("admin lists bob's: %s", r.Body)
		}

		// A task for bob goes to carol, on bob's behalf; bob still sees the instance.
		e.publish("deleg", []any{start(M{"kind": "manual"}), M{"id": "n", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "n"), edge("n", "end")})
		r = e.do("POST", "/api/v1/instances", ann, M{"template": "deleg", "title": "Trip"}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %s", r.Body)
		}
		inst := r.JSON["id"].(string)
		r = e.do("GET", "/api/v1/tasks", carol, nil, nil)
		items := r.JSON["items"].([]any)
		if len(items) != 1 || items[0].(M)["delegated_from"] != "bob" || items[0].(M)["assignee"] != "carol" {
			t.Fatalf("carol's inbox: %s", r.Body)
		}
		if r := e.do("GET", "/api/v1/instances/"+inst, bob, nil, nil); r.Status != 200 {
			t.Fatalf("bob reads the instance: %d %s", r.Status, r.Body)
		}
		// The delegate may not remove it, the delegator may; audited.
		if r := e.do("DELETE", "/api/v1/delegations/"+id, carol, nil, nil); r.Status != 403 {
			t.Fatalf("carol deletes: %d", r.Status)
		}
		if r := e.do("DELETE", "/api/v1/delegations/"+id, ann, nil, nil); r.Status != 404 {
			t.Fatalf("ann deletes: %d", r.Status)
		}
		if r := e.do("DELETE", "/api/v1/delegations/"+id, bob, nil, nil); r.Status != 204 {
			t.Fatalf("bob deletes: %d %s", r.Status, r.Body)
		}
		r = e.do("POST", "/api/v1/instances", ann, M{"template": "deleg", "title": "Trip 2"}, nil)
		if tk := r.JSON["tasks"].([]any); len(tk) != 1 || tk[0].(M)["assignee"] != "bob" {
			t.Fatalf("after the delete: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/audit?action=delegation.*", e.admin, nil, nil)
		if r.Status != 200 || len(r.JSON["items"].([]any)) != 3 {
			t.Fatalf("audit: %s", r.Body)
		}
	})
}

func TestUrgeHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newNotifyEnv(t, s)
		ann, bob, carol := e.mkUser("ann"), e.mkUser("bob"), e.mkUser("carol")
		_ = carol
		e.publish("urge", []any{start(M{"kind": "manual"}), M{"id": "n", "type": "approval", "name": "Check", "sign": "all", "approvers": M{"users": []string{"bob", "carol"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "n"), edge("n", "end")})
		r := e.do("POST", "/api/v1/instances", ann, M{"template": "urge", "title": "Laptop"}, nil)
		inst := r.JSON["id"].(string)
		e.settle()
		if r := e.do("POST", "/api/v1/instances/"+inst+"/urge", bob, M{}, nil); r.Status != 403 {
			t.Fatalf("bob urges: %d %s", r.Status, r.Body)
		}
		// 50 racing urges: exactly one 200, the others 429 with Retry-After.
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		var tasks float64
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.do("POST", "/api/v1/instances/"+inst+"/urge", ann, M{"comment": "please"}, nil)
				mu.Lock()
				defer mu.Unlock()
				codes[r.Status]++
				switch r.Status {
				case 200:
					tasks = r.JSON["tasks"].(float64)
				case 429:
					if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 || ra > 600 {
						t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
					}
				}
			}()
		}
		wg.Wait()
		if codes[200] != 1 || codes[429] != 49 || tasks != 2 {
			t.Fatalf("codes %v, tasks %v", codes, tasks)
		}
		// The assignees are told: an in-app notification each, with who urged and the comment.
		e.settle()
		items, _ := e.inbox(bob)
		if len(items) != 2 || items[0]["event"] != "task.urged" {
			t.Fatalf("bob's notifications %v", items)
		}
		r = e.do("GET", "/api/v1/tasks", bob, nil, nil)
		if tk := r.JSON["items"].([]any)[0].(M); tk["urged_at"] == nil {
			t.Fatalf("urged mark: %s", r.Body)
		}
		hist := e.do("GET", "/api/v1/instances/"+inst+"/history", ann, nil, nil)
		n := 0
		for _, x := range hist.JSON["items"].([]any) {
			if x.(M)["action"] == "task.urged" && x.(M)["comment"] == "please" {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d task.urged items: %s", n, hist.Body)
		}
		// Ten minutes later it may be urged again; an admin may too.
		e.clock.set(e.clock.Now().Add(10 * time.Minute))
		if r := e.do("POST", "/api/v1/instances/"+inst+"/urge", e.admin, nil, nil); r.Status != 200 {
			t.Fatalf("urge after the window: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", "/api/v1/instances/nope/urge", ann, nil, nil); r.Status != 404 {
			t.Fatalf("unknown instance: %d", r.Status)
		}
		// An ended instance is 409.
		if r := e.do("POST", "/api/v1/instances/"+inst+"/withdraw", ann, M{"reason": "x"}, nil); r.Status != 200 {
			t.Fatalf("withdraw: %s", r.Body)
		}
		e.clock.set(e.clock.Now().Add(11 * time.Minute))
		if r := e.do("POST", "/api/v1/instances/"+inst+"/urge", ann, nil, nil); r.Status != 409 {
			t.Fatalf("urge an ended instance: %d %s", r.Status, r.Body)
		}
	})
}

// TestLinearStepsTakeEveryApprovalField: the steps of POST /instances/linear are approval nodes with every field
// (cc, timeout, on_timeout, form, plugins, on_no_approver, exclude_initiator), checked by the templates' validator:
// a bad step is 422 naming it.
func TestLinearStepsTakeEveryApprovalField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann := e.mkUser("ann")
		e.mkUser("bob")
		e.mkUser("carol")
		ok := M{"name": "Lead", "approvers": M{"users": []string{"bob"}}}
		for _, tc := range []struct {
			step M
			want string
		}{
			{M{"name": "Boss", "approvers": M{"users": []string{"bob"}}, "on_no_approver": "maybe"}, "on_no_approver"},
			{M{"name": "Boss", "approvers": M{"relation": "initiator.managers", "levels": 21}}, "levels"},
			{M{"name": "Boss", "approvers": M{"users": []string{"bob"}}, "on_timeout": "approve"}, "timeout"},
			{M{"name": "Boss", "approvers": M{"users": []string{"bob"}}, "cc": M{"groups": []any{[]string{"x"}}}}, "cc"},
		} {
			r := e.do("POST", "/api/v1/instances/linear", ann, M{"title": "t", "steps": []any{ok, tc.step}}, nil)
			if r.Status != 422 || r.JSON["error"].(M)["code"] != "invalid_steps" || r.JSON["error"].(M)["details"].(M)["step"] != float64(2) ||
				!contains(r.JSON["error"].(M)["message"].(string), "step 2") || !contains(string(r.Body), tc.want) {
				t.Fatalf("%v: %d %s", tc.step, r.Status, r.Body)
			}
		}
		// Every field at work: ann has no manager, so step 1 passes automatically; step 2 excludes ann, copies
		// carol, carries a form and a timeout that approves.
		r := e.do("POST", "/api/v1/instances/linear", ann, M{"title": "Purchase", "steps": []any{
			M{"name": "Manager", "approvers": M{"relation": "initiator.manager"}, "on_no_approver": "pass"},
			M{"name": "Finance", "approvers": M{"users": []string{"ann", "bob"}}, "exclude_initiator": true, "cc": M{"users": []string{"carol"}},
				"timeout": "1h", "on_timeout": "approve", "form": M{"fields": []any{M{"key": "budget", "type": "number", "label": "Budget"}}}},
		}}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		var tasks []string
		for _, x := range r.JSON["tasks"].([]any) {
			tk := x.(M)
			tasks = append(tasks, tk["node_id"].(string)+":"+tk["assignee"].(string)+":"+tk["status"].(string)+":"+strconv.FormatBool(tk["auto"] == true))
		}
		if len(tasks) != 2 || tasks[0] != "step1::approved:true" || tasks[1] != "step2:bob:pending:false" {
			t.Fatalf("tasks %v (%s)", tasks, r.Body)
		}
		hist := e.do("GET", "/api/v1/instances/"+id+"/history", ann, nil, nil)
		seen := map[string]bool{}
		for _, x := range hist.JSON["items"].([]any) {
			seen[x.(M)["action"].(string)] = true
		}
		if !seen["task.auto_approved"] || !seen["cc.sent"] || !seen["approver.excluded"] {
			t.Fatalf("history %s", hist.Body)
		}
		// The timeout approves bob's task an hour later.
		e.clock.set(e.clock.Now().Add(time.Hour + time.Second))
		e.fireDue()
		if r := e.do("GET", "/api/v1/instances/"+id, ann, nil, nil); r.JSON["status"] != "completed" {
			t.Fatalf("after the timeout: %s", r.Body)
		}
	})
}

// TestDirectorsOwnLeaveReachesAnEnd: the ready-made leave template asks the manager chain with on_no_approver
// pass, and the department leader but never the applicant: a director with no manager who leads their own
// department gets their leave through, recorded as automatic decisions; an employee's goes to the director.
func TestDirectorsOwnLeaveReachesAnEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// The production body limit: the ready-made templates are larger than the tests' 4 KiB.
		e := newEnv(t, s, func(d *server.Deps) { d.BodyLimit = 1 << 20 })
		all, err := templates.All()
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range all {
			if tp.Key != "leave" {
				continue
			}
			if r := e.do("POST", "/api/v1/templates", e.admin, tp, nil); r.Status != 201 {
				t.Fatalf("create: %s", r.Body)
			}
			if r := e.do("POST", "/api/v1/templates/leave/publish", e.admin, nil, nil); r.Status != 201 {
				t.Fatalf("publish: %s", r.Body)
			}
		}
		dora := e.mkUser("dora")
		if r := e.do("POST", "/api/v1/departments", e.admin, M{"name": "mgmt", "leader": "dora"}, nil); r.Status != 201 {
			t.Fatalf("department: %s", r.Body)
		}
		emp := e.mkUser("emp")
		for user, patch := range map[string]M{"dora": {"department": "mgmt"}, "emp": {"department": "mgmt", "manager": "dora"}} {
			if r := e.do("PATCH", "/api/v1/users/"+user, e.admin, patch, nil); r.Status != 200 {
				t.Fatalf("patch %s: %s", user, r.Body)
			}
		}
		leave := M{"days": 5, "from": "2026-07-01", "reason": "rest"}
		r := e.do("POST", "/api/v1/instances", dora, M{"template": "leave", "title": "Dora's leave", "context": leave}, nil)
		if r.Status != 201 || r.JSON["status"] != "completed" {
			t.Fatalf("the director's leave: %d %s", r.Status, r.Body)
		}
		id := r.JSON["id"].(string)
		hist := e.do("GET", "/api/v1/instances/"+id+"/history", dora, nil, nil)
		autos := 0
		for _, x := range hist.JSON["items"].([]any) {
			if it := x.(M); it["action"] == "task.auto_approved" && it["data"].(M)["reason"] == "no_approver" {
				autos++
			}
		}
		if autos != 2 {
			t.Fatalf("%d automatic approvals: %s", autos, hist.Body)
		}
		r = e.do("POST", "/api/v1/instances", emp, M{"template": "leave", "title": "Emp's leave", "context": leave}, nil)
		if tk := r.JSON["tasks"].([]any); r.Status != 201 || len(tk) != 1 || tk[0].(M)["assignee"] != "dora" {
			t.Fatalf("the employee's leave: %d %s", r.Status, r.Body)
		}
	})
}
