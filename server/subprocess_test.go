package server_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestSubprocessViews: GET /instances/{id} lists a parent's children ({"id","template","status","node_id"}) and
// a child names its parent; the child's initiator may not withdraw it while the parent runs (409 parent_running).
func TestSubprocessViews(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		ann := e.mkUser("ann")
		e.mkUser("cashier")
		e.publish("payment", []any{start(M{"kind": "manual"}), M{"id": "pay", "type": "approval", "approvers": M{"users": []string{"cashier"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "pay"), edge("pay", "end")})
		e.publish("claim", []any{start(M{"kind": "manual"}), M{"id": "call", "type": "subprocess", "template": "payment", "for_each": "lines"},
			M{"id": "end", "type": "end"}}, []any{edge("start", "call"), edge("call", "end")})
		r := e.do("POST", "/api/v1/instances", ann, M{"template": "claim", "context": M{"lines": []int{1, 2}}}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %s", r.Body)
		}
		id := r.JSON["id"].(string)
		p := e.do("GET", "/api/v1/instances/"+id, ann, nil, nil)
		kids, _ := p.JSON["children"].([]any)
		if p.Status != 200 || len(kids) != 2 || nodeState(p, "call") != "waiting" {
			t.Fatalf("parent: %s", p.Body)
		}
		k := kids[1].(M)
		if k["template"] != "payment" || k["status"] != "running" || k["node_id"] != "call" || k["id"] == "" {
			t.Fatalf("child entry: %v", k)
		}
		if _, ok := p.JSON["parent_instance_id"]; ok {
			t.Fatalf("a top-level instance names a parent: %s", p.Body)
		}
		kid := k["id"].(string)
		c := e.do("GET", "/api/v1/instances/"+kid, ann, nil, nil)
		if c.Status != 200 || c.JSON["parent_instance_id"] != id || c.JSON["parent_node_id"] != "call" || c.JSON["initiator"] != "ann" {
			t.Fatalf("child: %s", c.Body)
		}
		assertError(t, e.do("POST", "/api/v1/instances/"+kid+"/withdraw", ann, nil, nil), 409, "parent_running")
		if r := e.do("POST", "/api/v1/instances/"+id+"/withdraw", ann, nil, nil); r.Status != 200 {
			t.Fatalf("withdraw the parent: %s", r.Body)
		}
	})
}

// TestSubprocessDiagram: the instance diagram draws a subprocess node as a subroutine naming the template it calls,
// with its children's states.
func TestSubprocessDiagram(t *testing.T) {
	e := newEnv(t, storetest.Open(t, store.SQLite), nil)
	ann := e.mkUser("ann")
	e.mkUser("cashier")
	e.publish("payment", []any{start(M{"kind": "manual"}), M{"id": "pay", "type": "approval", "approvers": M{"users": []string{"cashier"}}},
		M{"id": "end", "type": "end"}}, []any{edge("start", "pay"), edge("pay", "end")})
	e.publish("claim", []any{start(M{"kind": "manual"}), M{"id": "call", "type": "subprocess", "name": "Pay", "template": "payment", "for_each": "lines"},
		M{"id": "end", "type": "end"}}, []any{edge("start", "call"), edge("call", "end")})
	id := e.do("POST", "/api/v1/instances", ann, M{"template": "claim", "context": M{"lines": []int{1, 2}}}, nil).JSON["id"].(string)
	d := e.do("GET", "/api/v1/instances/"+id+"/diagram", ann, nil, nil)
	if d.Status != 200 || !strings.Contains(string(d.Body), `n1[["Pay ↳ payment ×lines · 2 running"]]`) {
		t.Fatalf("diagram:\n%s", d.Body)
	}
	// In Chinese the children's states are said in Chinese.
	if d := e.do("GET", "/api/v1/instances/"+id+"/diagram?lang=zh-CN", ann, nil, nil); d.Status != 200 || !strings.Contains(string(d.Body), `n1[["Pay ↳ payment ×lines · 2 进行中"]]`) {
		t.Fatalf("zh-CN diagram:\n%s", d.Body)
	}
}
