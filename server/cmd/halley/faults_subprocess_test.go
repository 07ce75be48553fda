package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestFaultKillBetweenChildEndAndParentResume: a parent starts 1,000 children that end in their first step (the
// parent's own step commits their ends as subprocess.ended outbox rows); halley is killed with SIGKILL the moment
// such rows are in the database, before the dispatcher resumed the parent with all of them. After the restart the
// parent resumes exactly once: completed, its node completed once, each child's end recorded once, the outputs in
// element order.
func TestFaultKillBetweenChildEndAndParentResume(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	h := startHalley(t, "halley", bin, faultEnv("HALLEY_DATABASE_URL="+dbURL)...)
	db := openSQL(t, dbURL)
	cl := newAPI()
	cl.login(t, h.URL())
	cl.publish(t, h.URL(), "leaf", quickDefinition())
	cl.publish(t, h.URL(), "fan", map[string]any{"nodes": []any{
		map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
		map[string]any{"id": "call", "type": "subprocess", "template": "leaf", "for_each": "lines",
			"output": map[string]any{"n": "item"}},
		map[string]any{"id": "end", "type": "end"},
	}, "edges": []any{map[string]any{"from": "start", "to": "call"}, map[string]any{"from": "call", "to": "end"}}})
	const children = 1000
	lines := make([]int, children)
	for i := range lines {
		lines[i] = i
	}

	var parents []string
	hit := false
	for attempt := 0; attempt < 5 && !hit; attempt++ {
		corr := fmt.Sprintf("fan-%d", attempt)
		done := make(chan struct{})
		go func() {
			defer close(done)
			cl.call(context.Background(), h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "fan", "context": map[string]any{"lines": lines},
				"correlation_id": corr}, "") // its answer may be lost in the kill: the database tells
		}()
		pending := func() int {
			return queryInt(t, db, "SELECT COUNT(*) FROM outbox WHERE kind = 'subprocess.ended'")
		}
		if !testkit.Eventually(60*time.Second, time.Millisecond, func() bool { return pending() > 0 }) {
			t.Fatalf("attempt %d: no child end ever reached the outbox", attempt)
		}
		h.kill()
		<-done
		left := pending()
		hit = left > 0
		t.Logf("attempt %d: killed with %d child ends not yet dispatched", attempt, left)
		id := queryStrings(t, db, "SELECT id FROM instances WHERE correlation_id = ?", corr)
		if len(id) != 1 {
			t.Fatalf("attempt %d: %d parents", attempt, len(id))
		}
		parents = append(parents, id[0])
		h.start()
		cl.login(t, h.URL())
	}
	if !hit {
		t.Fatal("the kill never came between a child's end and its parent's resume")
	}
	for _, id := range parents {
		var inst map[string]any
		if !testkit.Eventually(60*time.Second, 50*time.Millisecond, func() bool {
			inst = cl.mustCall(t, h.URL(), "GET", "/api/v1/instances/"+id, nil)
			return inst["status"] != "running"
		}) {
			t.Fatalf("parent %s never resumed", id)
		}
		if inst["status"] != "completed" {
			t.Fatalf("parent %s is %v", id, inst["status"])
		}
		items := inst["context"].(map[string]any)["call"].(map[string]any)["items"].([]any)
		if len(items) != children {
			t.Fatalf("parent %s: %d items", id, len(items))
		}
		for i, it := range items {
			if it.(map[string]any)["n"] != float64(i) {
				t.Fatalf("parent %s: items[%d] = %v", id, i, it)
			}
		}
		completed, ends := 0, 0
		for _, e := range historyEvents(t, db, "instance_id = ?", id) {
			switch {
			case e.Action == "node.completed" && e.NodeID == "call":
				completed++
			case e.Action == "subprocess.child_ended":
				ends++
			}
		}
		if completed != 1 {
			t.Fatalf("parent %s: its node completed %d times", id, completed)
		}
		if ends != children {
			t.Fatalf("parent %s: %d child ends recorded, want %d", id, ends, children)
		}
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM outbox WHERE kind LIKE 'subprocess.%'"); n != 0 {
		t.Fatalf("%d sub-process rows left in the outbox", n)
	}
}
