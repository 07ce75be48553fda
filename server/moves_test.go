package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// tasksOf returns the instance's tasks as (node, assignee, status) and the id of each open one by "node/assignee".
func (e *env) tasksOf(id string) ([]string, map[string]string) {
	e.t.Helper()
	var all []string
	open := map[string]string{}
	for _, x := range e.instance(id).JSON["tasks"].([]any) {
		t := x.(M)
		all = append(all, fmt.Sprintf("%s/%s:%s", t["node_id"], t["assignee"], t["status"]))
		if t["status"] == "pending" {
			open[t["node_id"].(string)+"/"+t["assignee"].(string)] = t["id"].(string)
		}
	}
	return all, open
}

func (e *env) act(token, id, key, action string, body M) resp {
	e.t.Helper()
	_, open := e.tasksOf(id)
	task, ok := open[key]
	if !ok {
		e.t.Fatalf("no pending task %s in %v", key, open)
	}
	return e.do("POST", "/api/v1/tasks/"+task+"/"+action, token, body, nil)
}

func countPrefix(xs []string, prefix string) int {
	n := 0
	for _, x := range xs {
		if strings.HasPrefix(x, prefix) {
			n++
		}
	}
	return n
}

func appr(id string, users ...string) M {
	return M{"id": id, "type": "approval", "approvers": M{"users": users}, "sign": "or"}
}

func TestReturnFromCountersign(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		tok := map[string]string{}
		for _, u := range []string{"erin", "bob", "carol", "dave"} {
			tok[u] = e.mkUser(u)
		}
		e.publish("cs", []any{start(M{"kind": "manual"}), appr("lead", "erin"),
			M{"id": "board", "type": "approval", "approvers": M{"users": []string{"bob", "carol", "dave"}}, "sign": "all"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "board"), edge("board", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "cs"}, nil).JSON["id"].(string)
		e.act(tok["erin"], id, "lead/erin", "approve", M{})
		e.act(tok["bob"], id, "board/bob", "approve", M{})
		// Return targets offered to carol: the start (initiator) and lead.
		_, open := e.tasksOf(id)
		r := e.do("GET", "/api/v1/tasks/"+open["board/carol"]+"/return-targets", tok["carol"], nil, nil)
		if fmt.Sprint(r.JSON["items"]) != "[map[name:start node_id:start type:start] map[name:lead node_id:lead type:approval]]" {
			t.Fatalf("return targets: %s", r.Body)
		}
		r = e.act(tok["carol"], id, "board/carol", "return", M{"to": "lead", "comment": "numbers are wrong"})
		if r.Status != 200 || nodeState(r, "lead") != "active" || nodeState(r, "board") != "" {
			t.Fatalf("return: %d %s", r.Status, r.Body)
		}
		all, open := e.tasksOf(id)
		if len(open) != 1 || open["lead/erin"] == "" || countPrefix(all, "board/dave:cancelled") != 1 || countPrefix(all, "board/carol:cancelled") != 1 {
			t.Fatalf("after the return: %v", all)
		}
		e.act(tok["erin"], id, "lead/erin", "approve", M{})
		_, open = e.tasksOf(id)
		if len(open) != 3 || open["board/bob"] == "" || open["board/carol"] == "" || open["board/dave"] == "" {
			t.Fatalf("the countersign must get fresh tasks for every signer: %v", open)
		}
		for _, u := range []string{"bob", "carol", "dave"} {
			e.act(tok[u], id, "board/"+u, "approve", M{})
		}
		if st := e.instance(id).JSON["status"]; st != "completed" {
			t.Fatalf("status %v", st)
		}
		h := e.history(id)
		if countOf(h, "task.returned:board") != 1 {
			t.Fatalf("history: %v", h)
		}
		hr := e.do("GET", "/api/v1/instances/"+id+"/history", e.admin, nil, nil)
		if !strings.Contains(string(hr.Body), `"actor":"carol","action":"task.returned","node_id":"board"`) || !strings.Contains(string(hr.Body), `"comment":"numbers are wrong","data":{"from":"board","to":"lead"}`) {
			t.Fatalf("the return is not recorded with who, from, to and why: %s", hr.Body)
		}
	})
}

func TestReturnPastAndSplit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		tok := map[string]string{}
		for _, u := range []string{"erin", "bob", "carol", "dave"} {
			tok[u] = e.mkUser(u)
		}
		e.publish("split", []any{start(M{"kind": "manual"}), appr("a1", "erin"), appr("b", "bob"), appr("c", "carol"),
			M{"id": "d", "type": "approval", "approvers": M{"users": []string{"dave"}}, "join": "and"}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "a1"), edge("a1", "b"), edge("a1", "c"), edge("b", "d"), edge("c", "d"), edge("d", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "split"}, nil).JSON["id"].(string)
		e.act(tok["erin"], id, "a1/erin", "approve", M{})
		e.act(tok["bob"], id, "b/bob", "approve", M{})
		e.act(tok["carol"], id, "c/carol", "approve", M{})
		if r := e.act(tok["dave"], id, "d/dave", "return", M{"to": "a1"}); r.Status != 200 {
			t.Fatalf("return: %s", r.Body)
		}
		// The diagram shows the current states: start done, a1 active again, the reset nodes without a state.
		dg := string(e.do("GET", "/api/v1/instances/"+id+"/diagram", e.admin, nil, nil).Body)
		if !strings.Contains(dg, "class n0 completed") || !strings.Contains(dg, "class n1 active") || strings.Contains(dg, "n2 completed") || strings.Contains(dg, ",n2") {
			t.Fatalf("diagram after the return:\n%s", dg)
		}
		e.act(tok["erin"], id, "a1/erin", "approve", M{})
		r := e.instance(id)
		if nodeState(r, "b") != "active" || nodeState(r, "c") != "active" || nodeState(r, "d") != "" {
			t.Fatalf("both branches must run again: %s", r.Body)
		}
		e.act(tok["bob"], id, "b/bob", "approve", M{})
		if nodeState(e.instance(id), "d") != "" {
			t.Fatal("the AND join must wait for both branches again")
		}
		e.act(tok["carol"], id, "c/carol", "approve", M{})
		e.act(tok["dave"], id, "d/dave", "approve", M{})
		if st := e.instance(id).JSON["status"]; st != "completed" {
			t.Fatalf("status %v", st)
		}
	})
}

func TestReturnToStartResubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		alice, bob, carol := e.mkUser("alice"), e.mkUser("bob"), e.mkUser("carol")
		e.publish("claim", []any{start(M{"kind": "manual"}), appr("lead", "bob"), appr("boss", "carol"), M{"id": "end", "type": "end", "join": "or"}},
			[]any{edge("start", "lead"), M{"from": "lead", "to": "boss", "condition": M{"amount": M{"$gt": 100}}}, M{"from": "lead", "to": "end", "default": true}, edge("boss", "end")})
		id := e.do("POST", "/api/v1/instances", alice, M{"template": "claim", "context": M{"amount": 500}}, nil).JSON["id"].(string)
		e.act(bob, id, "lead/bob", "approve", M{})
		if r := e.act(carol, id, "boss/carol", "return", M{"to": "start", "comment": "split the claim"}); r.Status != 200 {
			t.Fatalf("return to start: %s", r.Body)
		}
		_, open := e.tasksOf(id)
		if len(open) != 1 || open["start/alice"] == "" {
			t.Fatalf("the initiator must get a resubmit task: %v", open)
		}
		if r := e.act(alice, id, "start/alice", "approve", M{"data": M{"amount": 50}}); r.Status != 200 {
			t.Fatalf("resubmit: %s", r.Body)
		}
		e.act(bob, id, "lead/bob", "approve", M{})
		r := e.instance(id)
		if r.JSON["status"] != "completed" || nodeState(r, "boss") != "skipped" || r.JSON["context"].(M)["amount"] != float64(50) {
			t.Fatalf("the resubmitted claim must route by its new amount: %s", r.Body)
		}
		// Rejecting a resubmit task withdraws the instance.
		id = e.do("POST", "/api/v1/instances", alice, M{"template": "claim", "context": M{"amount": 500}}, nil).JSON["id"].(string)
		e.act(bob, id, "lead/bob", "return", M{"to": "start"})
		e.act(alice, id, "start/alice", "reject", M{"comment": "never mind"})
		if st := e.instance(id).JSON["status"]; st != "withdrawn" {
			t.Fatalf("status %v", st)
		}
	})
}

func TestReclaimJumpAndBadTargets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob, carol, dave := e.mkUser("bob"), e.mkUser("carol"), e.mkUser("dave")
		e.publish("chain", []any{start(M{"kind": "manual"}), appr("lead", "bob"), appr("mgr", "carol"), appr("ceo", "dave"),
			M{"id": "side", "type": "approval", "approvers": M{"users": []string{"dave"}}}, M{"id": "end", "type": "end"}, M{"id": "end2", "type": "end"}},
			[]any{edge("start", "lead"), M{"from": "start", "to": "side", "condition": M{"never": true}}, edge("lead", "mgr"), edge("mgr", "ceo"), edge("ceo", "end"), edge("side", "end2")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "chain"}, nil).JSON["id"].(string)
		// 422: a return target that is downstream, or that never ran.
		assertError(t, e.act(bob, id, "lead/bob", "return", M{"to": "mgr"}), 422, "invalid_return_target")
		assertError(t, e.act(bob, id, "lead/bob", "return", M{"to": "side"}), 422, "invalid_return_target")
		assertError(t, e.act(bob, id, "lead/bob", "return", M{"to": "nowhere"}), 422, "invalid_return_target")

		e.act(bob, id, "lead/bob", "approve", M{})
		_, all := e.tasksOf(id)
		_ = all
		var leadTask string
		for _, x := range e.instance(id).JSON["tasks"].([]any) {
			if x.(M)["node_id"] == "lead" {
				leadTask = x.(M)["id"].(string)
			}
		}
		assertError(t, e.do("POST", "/api/v1/tasks/"+leadTask+"/reclaim", carol, M{}, nil), 403, "not_decider")
		r := e.do("POST", "/api/v1/tasks/"+leadTask+"/reclaim", bob, M{"comment": "wrong button"}, nil)
		if r.Status != 200 || r.JSON["status"] != "pending" {
			t.Fatalf("reclaim: %d %s", r.Status, r.Body)
		}
		tasks, open := e.tasksOf(id)
		if len(open) != 1 || open["lead/bob"] == "" || countPrefix(tasks, "mgr/carol:cancelled") != 1 {
			t.Fatalf("after the reclaim: %v", tasks)
		}
		e.act(bob, id, "lead/bob", "approve", M{})
		e.act(carol, id, "mgr/carol", "approve", M{})
		assertError(t, e.do("POST", "/api/v1/tasks/"+leadTask+"/reclaim", bob, M{}, nil), 409, "downstream_decided")

		// Jump: admin only; cancels everything active and activates the target.
		assertError(t, e.do("POST", "/api/v1/instances/"+id+"/jump", carol, M{"to": "lead"}, nil), 403, "admin_required")
		assertError(t, e.do("POST", "/api/v1/instances/"+id+"/jump", e.admin, M{"to": "nope"}, nil), 422, "invalid_jump_target")
		r = e.do("POST", "/api/v1/instances/"+id+"/jump", e.admin, M{"to": "mgr", "reason": "carol approved by mistake"}, nil)
		if r.Status != 200 || nodeState(r, "ceo") != "" || nodeState(r, "mgr") != "active" {
			t.Fatalf("jump: %d %s", r.Status, r.Body)
		}
		_, open = e.tasksOf(id)
		if len(open) != 1 || open["mgr/carol"] == "" {
			t.Fatalf("after the jump: %v", open)
		}
		if h := e.history(id); countOf(h, "instance.jumped:mgr") != 1 {
			t.Fatalf("history: %v", h)
		}
		_ = dave
	})
}

func TestReturnedNodeTimers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob, carol := e.mkUser("bob"), e.mkUser("carol")
		e.publish("timed", []any{start(M{"kind": "manual"}),
			M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}, "timeout": "1h", "on_timeout": "approve"},
			appr("mgr", "carol"), M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "mgr"), edge("mgr", "end")})
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "timed"}, nil).JSON["id"].(string)
		e.advance(10 * time.Minute)
		e.act(bob, id, "lead/bob", "approve", M{})
		e.advance(10 * time.Minute)
		e.act(carol, id, "mgr/carol", "return", M{"to": "lead"})
		e.advance(45 * time.Minute) // past the first visit's due time, before the second's
		if n := e.fireDue(); n != 0 {
			t.Fatalf("the cancelled visit's timer fired: %d", n)
		}
		e.advance(30 * time.Minute)
		if n := e.fireDue(); n != 1 {
			t.Fatalf("the new visit's timer: %d", n)
		}
		r := e.instance(id)
		if nodeState(r, "lead") != "completed" || nodeState(r, "mgr") != "active" {
			t.Fatalf("after the timeout: %s", r.Body)
		}
		if n := countOf(e.history(id), "timer.fired:lead"); n != 1 {
			t.Fatalf("lead's timers fired %d times", n)
		}
	})
}
