package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// flowEnv is the HTTP server with the template service and the engine on a real store; the engine runs on a
// fake clock (message TTLs), and its callback key is known so a test can sign callback URLs.
type flowEnv struct {
	*env
	clk    *clock.Fake
	key    []byte
	tokens map[string]string // username → bearer token
}

func newFlowEnv(t *testing.T, s *store.Store) *flowEnv {
	t.Helper()
	f := &flowEnv{clk: clock.NewFake(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)), key: []byte("callback-key-for-tests"), tokens: map[string]string{}}
	f.env = newEnvWith(t, s, wiring{engine: &engine.Options{Clock: f.clk, CallbackKey: f.key}}, func(d *server.Deps) {
		d.BodyLimit = 64 << 10
	})
	f.tokens["admin"] = f.admin
	return f
}

// sub returns the environment for a subtest.
func (f *flowEnv) sub(t *testing.T) *flowEnv {
	c := *f
	e := *f.env
	e.t = t
	c.env = &e
	return &c
}

// users creates users (fields: department, manager, roles) and logs them in.
func (f *flowEnv) users(names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.tokens[n] = f.mkUser(n)
	}
}

// publish creates a template and publishes it.
func (f *flowEnv) publish(key, def string) {
	f.t.Helper()
	r := f.do("POST", "/api/v1/templates", f.admin, map[string]any{"key": key, "name": key, "definition": json.RawMessage(def)}, nil)
	if r.Status != 201 {
		f.t.Fatalf("create template %s: %d %s", key, r.Status, r.Body)
	}
	r = f.do("POST", "/api/v1/templates/"+key+"/publish", f.admin, nil, nil)
	if r.Status != 201 {
		f.t.Fatalf("publish %s: %d %s", key, r.Status, r.Body)
	}
}

// start starts an instance as user and returns its id.
func (f *flowEnv) start(user string, body map[string]any) string {
	f.t.Helper()
	r := f.do("POST", "/api/v1/instances", f.tokens[user], body, nil)
	if r.Status != 201 {
		f.t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	return r.JSON["id"].(string)
}

// inst reads an instance as admin.
func (f *flowEnv) inst(id string) gjson.Result {
	f.t.Helper()
	r := f.do("GET", "/api/v1/instances/"+id, f.admin, nil, nil)
	if r.Status != 200 {
		f.t.Fatalf("get instance: %d %s", r.Status, r.Body)
	}
	return gjson.ParseBytes(r.Body)
}

// wantInstance checks the status and node states ("" = the node never ran) of an instance.
func (f *flowEnv) wantInstance(id, status string, nodes map[string]string) gjson.Result {
	f.t.Helper()
	in := f.inst(id)
	if got := in.Get("status").String(); got != status {
		f.t.Fatalf("status %q, want %q: %s", got, status, in.Raw)
	}
	for n, want := range nodes {
		if got := in.Get(`nodes.#(node_id=="` + n + `").state`).String(); got != want {
			f.t.Fatalf("node %s is %q, want %q: %s", n, got, want, in.Get("nodes").Raw)
		}
	}
	return in
}

// task returns the latest task of assignee at node.
func (f *flowEnv) task(id, node, assignee string) gjson.Result {
	f.t.Helper()
	ts := f.inst(id).Get(`tasks.#(node_id=="` + node + `")#`).Array()
	var found gjson.Result
	for _, t := range ts {
		if t.Get("assignee").String() == assignee && (!found.Exists() || seq(t.Get("id").String()) > seq(found.Get("id").String())) {
			found = t
		}
	}
	if !found.Exists() {
		f.t.Fatalf("no task of %s at %s", assignee, node)
	}
	return found
}

func seq(taskID string) int {
	var n int
	_, _ = fmt.Sscanf(taskID[strings.LastIndexByte(taskID, 't')+1:], "%d", &n)
	return n
}

// wantTasks checks the latest task status of each assignee at node (and that nobody else has one).
func (f *flowEnv) wantTasks(id, node string, want map[string]string) {
	f.t.Helper()
	got := map[string]string{}
	for _, t := range f.inst(id).Get(`tasks.#(node_id=="` + node + `")#`).Array() {
		a := t.Get("assignee").String()
		if prev, ok := got[a]; !ok || seq(t.Get("id").String()) > seq(prev) {
			got[a] = t.Get("id").String()
		}
	}
	if len(got) != len(want) {
		f.t.Fatalf("tasks at %s: %v, want %v", node, got, want)
	}
	for a, st := range want {
		tid, ok := got[a]
		if !ok {
			f.t.Fatalf("no task of %s at %s", a, node)
		}
		if s := f.inst(id).Get(`tasks.#(id=="` + tid + `").status`).String(); s != st {
			f.t.Fatalf("task of %s at %s is %q, want %q", a, node, s, st)
		}
	}
}

// act posts a task action as user.
func (f *flowEnv) act(user, taskID, action string, body any) resp {
	f.t.Helper()
	return f.do("POST", "/api/v1/tasks/"+taskID+"/"+action, f.tokens[user], body, nil)
}

func (f *flowEnv) wantOK(r resp, status int) gjson.Result {
	f.t.Helper()
	if r.Status != status {
		f.t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return gjson.ParseBytes(r.Body)
}

// history returns the actions of an instance's history as "action" or "action:node".
func (f *flowEnv) history(id string) []string {
	f.t.Helper()
	r := f.do("GET", "/api/v1/instances/"+id+"/history", f.admin, nil, nil)
	if r.Status != 200 {
		f.t.Fatalf("history: %d %s", r.Status, r.Body)
	}
	var out []string
	for _, e := range gjson.GetBytes(r.Body, "items").Array() {
		a := e.Get("action").String()
		if n := e.Get("node_id").String(); n != "" {
			a += ":" + n
		}
		out = append(out, a)
	}
	return out
}

func (f *flowEnv) rows(table, where string, args ...any) int64 {
	f.t.Helper()
	var n int64
	q := f.store.DB().Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		f.t.Fatal(err)
	}
	return n
}

// single is start → n → end with the approval node n.
func single(node string) string {
	return `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},` + node + `,{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`
}

func TestTaskActionsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob", "carol", "dave", "eve")
		f.publish("or1", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		f.publish("all1", single(`{"id":"n","type":"approval","sign":"all","approvers":{"users":["bob"]}}`))
		f.publish("two", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"a","type":"approval","approvers":{"users":["bob"]}},
			{"id":"b","type":"approval","sign":"all","approvers":{"users":["bob","carol"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"a"},{"from":"a","to":"b"},{"from":"b","to":"end"}]}`)
		start := func(f *flowEnv, key string) string { return f.start("ann", map[string]any{"template": key}) }

		t.Run("transfer", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "or1")
			old := f.task(id, "n", "bob").Get("id").String()
			assertError(t, f.act("dave", old, "transfer", map[string]any{"to": "carol"}), 403, "not_assignee")
			assertError(t, f.act("bob", old, "transfer", map[string]any{"to": "ghost"}), 422, "unknown_user")
			nt := f.wantOK(f.act("bob", old, "transfer", map[string]any{"to": "carol", "comment": "on leave"}), 200)
			if nt.Get("assignee").String() != "carol" || nt.Get("status").String() != "pending" || nt.Get("id").String() == old {
				t.Fatalf("new task: %s", nt.Raw)
			}
			if st := f.inst(id).Get(`tasks.#(id=="` + old + `").status`).String(); st != "transferred" {
				t.Fatalf("old task is %q", st)
			}
			assertError(t, f.act("bob", old, "approve", nil), 409, "task_already_decided")
			// The new assignee's inbox has it.
			r := f.do("GET", "/api/v1/tasks", f.tokens["carol"], nil, nil)
			if items := gjson.GetBytes(r.Body, "items").Array(); len(items) != 1 || items[0].Get("id").String() != nt.Get("id").String() {
				t.Fatalf("carol's inbox: %s", r.Body)
			}
			f.wantOK(f.act("carol", nt.Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "completed", map[string]string{"n": "completed"})
			if h := f.history(id); !slices.Contains(h, "task.transferred:n") {
				t.Fatalf("history %v", h)
			}
		})

		t.Run("add-sign before", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "or1")
			tid := f.task(id, "n", "bob").Get("id").String()
			r := f.wantOK(f.act("bob", tid, "add-sign", map[string]any{"users": []string{"dave"}, "position": "before"}), 200)
			if r.Get("task.status").String() != "waiting" || r.Get("created.#").Int() != 1 || r.Get("created.0.assignee").String() != "dave" ||
				r.Get("created.0.status").String() != "pending" {
				t.Fatalf("add-sign before: %s", r.Raw)
			}
			f.wantTasks(id, "n", map[string]string{"bob": "waiting", "dave": "pending"})
			assertError(t, f.act("bob", tid, "approve", nil), 409, "task_not_pending")
			assertError(t, f.act("bob", tid, "transfer", map[string]any{"to": "carol"}), 409, "task_not_pending")
			assertError(t, f.act("dave", r.Get("created.0.id").String(), "add-sign", map[string]any{"users": []string{"bob"}, "position": "parallel"}), 422, "")
			f.wantOK(f.act("dave", r.Get("created.0.id").String(), "approve", nil), 200)
			f.wantTasks(id, "n", map[string]string{"bob": "pending", "dave": "approved"})
			f.wantInstance(id, "running", map[string]string{"n": "active"})
			f.wantOK(f.act("bob", tid, "approve", nil), 200)
			f.wantInstance(id, "completed", map[string]string{"n": "completed"})
		})

		t.Run("add-sign after", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "or1")
			tid := f.task(id, "n", "bob").Get("id").String()
			r := f.wantOK(f.act("bob", tid, "add-sign", map[string]any{"users": []string{"dave"}, "position": "after"}), 200)
			if r.Get("created.#").Int() != 0 || r.Get("task.status").String() != "pending" {
				t.Fatalf("add-sign after: %s", r.Raw)
			}
			f.wantTasks(id, "n", map[string]string{"bob": "pending"})
			f.wantOK(f.act("bob", tid, "approve", nil), 200)
			f.wantTasks(id, "n", map[string]string{"bob": "approved", "dave": "pending"})
			f.wantInstance(id, "running", map[string]string{"n": "active", "end": ""})
			f.wantOK(f.act("dave", f.task(id, "n", "dave").Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "completed", map[string]string{"n": "completed", "end": "completed"})
		})

		t.Run("add-sign after, the added signer rejects", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "or1")
			tid := f.task(id, "n", "bob").Get("id").String()
			f.wantOK(f.act("bob", tid, "add-sign", map[string]any{"users": []string{"dave"}, "position": "after"}), 200)
			f.wantOK(f.act("bob", tid, "approve", nil), 200)
			f.wantOK(f.act("dave", f.task(id, "n", "dave").Get("id").String(), "reject", nil), 200)
			f.wantInstance(id, "rejected", map[string]string{"n": "rejected"})
		})

		t.Run("add-sign parallel joins the node's set under sign all", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "all1")
			tid := f.task(id, "n", "bob").Get("id").String()
			r := f.wantOK(f.act("bob", tid, "add-sign", map[string]any{"users": []string{"dave", "eve"}, "position": "parallel"}), 200)
			if r.Get("created.#").Int() != 2 {
				t.Fatalf("add-sign parallel: %s", r.Raw)
			}
			f.wantTasks(id, "n", map[string]string{"bob": "pending", "dave": "pending", "eve": "pending"})
			f.wantOK(f.act("bob", tid, "approve", nil), 200)
			f.wantOK(f.act("dave", f.task(id, "n", "dave").Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "running", map[string]string{"n": "active"})
			f.wantOK(f.act("eve", f.task(id, "n", "eve").Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "completed", map[string]string{"n": "completed"})
		})

		t.Run("next_tasks: the tasks the decision opened for the same user", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "two")
			first := f.task(id, "a", "bob").Get("id").String()
			r := f.wantOK(f.act("bob", first, "approve", nil), 200)
			next := f.task(id, "b", "bob").Get("id").String()
			if r.Get("status").String() != "approved" || r.Get("next_tasks.#").Int() != 1 || r.Get("next_tasks.0.id").String() != next ||
				r.Get("next_tasks.0.status").String() != "pending" || r.Get("next_tasks.0.node_id").String() != "b" {
				t.Fatalf("approve of a: %s", r.Raw)
			}
			// carol's task opened by the same decision is not bob's to see here.
			if f.task(id, "b", "carol").Get("status").String() != "pending" {
				t.Fatalf("carol's task: %s", f.inst(id).Raw)
			}
			r = f.wantOK(f.act("bob", next, "approve", nil), 200)
			if !r.Get("next_tasks").IsArray() || r.Get("next_tasks.#").Int() != 0 {
				t.Fatalf("approve of b: next_tasks must be an empty list: %s", r.Raw)
			}
		})

		t.Run("403 for others, admin acts for anyone, 409 once decided", func(t *testing.T) {
			f := f.sub(t)
			id := start(f, "or1")
			tid := f.task(id, "n", "bob").Get("id").String()
			for _, a := range []string{"approve", "reject"} {
				assertError(t, f.act("carol", tid, a, nil), 403, "not_assignee")
			}
			assertError(t, f.act("carol", tid, "add-sign", map[string]any{"users": []string{"dave"}, "position": "before"}), 403, "not_assignee")
			// The initiator is not the assignee either.
			assertError(t, f.act("ann", tid, "approve", nil), 403, "not_assignee")
			f.wantTasks(id, "n", map[string]string{"bob": "pending"})

			r := f.wantOK(f.act("admin", tid, "approve", map[string]any{"comment": "for bob"}), 200)
			if r.Get("status").String() != "approved" || r.Get("decided_by").String() != "admin" || r.Get("assignee").String() != "bob" {
				t.Fatalf("admin approval: %s", r.Raw)
			}
			hr := f.do("GET", "/api/v1/instances/"+id+"/history", f.admin, nil, nil)
			ev := gjson.GetBytes(hr.Body, `items.#(action=="task.approved")`)
			if ev.Get("actor").String() != "admin" || ev.Get("data.on_behalf_of").String() != "bob" || ev.Get("task_id").String() != tid {
				t.Fatalf("history of an admin decision: %s", ev.Raw)
			}
			assertError(t, f.act("bob", tid, "approve", nil), 409, "task_already_decided")
			assertError(t, f.act("bob", tid, "reject", nil), 409, "task_already_decided")
			assertError(t, f.act("admin", tid, "approve", nil), 409, "task_already_decided")
			assertError(t, f.act("bob", id+".t999", "approve", nil), 404, "task_not_found")
			assertError(t, f.act("bob", "nope", "approve", nil), 404, "task_not_found")
			f.wantInstance(id, "completed", nil)
		})
	})
}

func TestRaceOnOneTaskHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob")
		f.publish("race", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		id := f.start("ann", map[string]any{"template": "race"})
		tid := f.task(id, "n", "bob").Get("id").String()

		const n = 50
		codes := make([]int, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				req, _ := http.NewRequest("POST", f.url+"/api/v1/tasks/"+tid+"/approve", bytes.NewReader([]byte(`{"comment":"race"}`)))
				req.Header.Set("Authorization", "Bearer "+f.tokens["bob"])
				<-gate
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					codes[i] = -1
					return
				}
				res.Body.Close()
				codes[i] = res.StatusCode
			}(i)
		}
		close(gate)
		wg.Wait()
		count := map[int]int{}
		for _, c := range codes {
			count[c]++
		}
		if count[200] != 1 || count[409] != n-1 {
			t.Fatalf("status counts %v, want one 200 and %d 409", count, n-1)
		}
		f.wantInstance(id, "completed", map[string]string{"n": "completed"})
		got := 0
		for _, a := range f.history(id) {
			if a == "task.approved" || strings.HasPrefix(a, "task.approved:") {
				got++
			}
		}
		if got != 1 {
			t.Fatalf("%d task.approved history events", got)
		}
	})
}

// parallelDef has an approval and a callback node open at once.
const parallelDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","sign":"all","approvers":{"users":["bob","carol"]}},
	{"id":"hook","type":"callback","timeout":"1h"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"lead"},{"from":"start","to":"hook"},{"from":"lead","to":"end"},{"from":"hook","to":"end"}]}`

func TestTerminateAndWithdraw(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob", "carol", "dave")
		f.publish("par", parallelDef)
		open := func(f *flowEnv, id string) {
			f.t.Helper()
			f.wantInstance(id, "running", map[string]string{"lead": "active", "hook": "waiting"})
			r := f.do("GET", "/api/v1/instances/"+id+"/bookmarks", f.admin, nil, nil)
			if n := gjson.GetBytes(r.Body, "items.#").Int(); n != 2 { // the callback's row and the approval's wait
				f.t.Fatalf("bookmarks before: %s", r.Body)
			}
			if n := f.rows("timers", "instance_id = ? AND status = ?", id, "pending"); n != 1 { // the callback's timeout
				f.t.Fatalf("%d pending timers", n)
			}
		}
		closed := func(f *flowEnv, id, status string) {
			f.t.Helper()
			f.wantInstance(id, status, map[string]string{"start": "completed", "lead": "cancelled", "hook": "cancelled", "end": ""})
			f.wantTasks(id, "lead", map[string]string{"bob": "cancelled", "carol": "cancelled"})
			r := f.do("GET", "/api/v1/instances/"+id+"/bookmarks", f.admin, nil, nil)
			if n := gjson.GetBytes(r.Body, "items.#").Int(); n != 0 {
				f.t.Fatalf("open bookmarks after %s: %s", status, r.Body)
			}
			if n := f.rows("bookmarks", "instance_id = ? AND closed_at IS NULL", id); n != 0 {
				f.t.Fatalf("%d open bookmark rows", n)
			}
			if n := f.rows("tasks", "instance_id = ? AND status IN ?", id, []string{"pending", "waiting"}); n != 0 {
				f.t.Fatalf("%d open task rows", n)
			}
			if n := f.rows("timers", "instance_id = ? AND status = ?", id, "pending"); n != 0 {
				f.t.Fatalf("%d pending timers after %s", n, status)
			}
			if in := f.inst(id); in.Get("ended_at").Type == gjson.Null {
				f.t.Fatalf("no ended_at: %s", in.Raw)
			}
			h := f.history(id)
			if h[len(h)-1] != "instance."+status {
				f.t.Fatalf("history ends with %s: %v", h[len(h)-1], h)
			}
		}

		t.Run("terminate", func(t *testing.T) {
			f := f.sub(t)
			id := f.start("ann", map[string]any{"template": "par"})
			open(f, id)
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.tokens["bob"], map[string]any{"reason": "x"}, nil), 403, "not_allowed")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.tokens["dave"], nil, nil), 403, "not_allowed")
			open(f, id)
			r := f.wantOK(f.do("POST", "/api/v1/instances/"+id+"/terminate", f.tokens["ann"], map[string]any{"reason": "changed my mind"}, nil), 200)
			if r.Get("status").String() != "terminated" {
				t.Fatalf("terminate answered %s", r.Raw)
			}
			closed(f, id, "terminated")
			hr := f.do("GET", "/api/v1/instances/"+id+"/history", f.admin, nil, nil)
			if ev := gjson.GetBytes(hr.Body, `items.#(action=="instance.terminated")`); ev.Get("comment").String() != "changed my mind" || ev.Get("actor").String() != "ann" {
				t.Fatalf("terminate history: %s", ev.Raw)
			}
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.tokens["ann"], nil, nil), 409, "instance_ended")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.tokens["ann"], nil, nil), 409, "instance_ended")
			assertError(t, f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", nil), 409, "")
		})

		t.Run("an admin may terminate", func(t *testing.T) {
			f := f.sub(t)
			id := f.start("ann", map[string]any{"template": "par"})
			f.wantOK(f.do("POST", "/api/v1/instances/"+id+"/terminate", f.admin, map[string]any{"reason": "ops"}, nil), 200)
			closed(f, id, "terminated")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.admin, nil, nil), 409, "instance_ended")
		})

		t.Run("withdraw", func(t *testing.T) {
			f := f.sub(t)
			id := f.start("ann", map[string]any{"template": "par"})
			f.wantOK(f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", nil), 200)
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.tokens["bob"], nil, nil), 403, "not_initiator")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.admin, nil, nil), 403, "not_initiator")
			r := f.wantOK(f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.tokens["ann"], map[string]any{"reason": "wrong dates"}, nil), 200)
			if r.Get("status").String() != "withdrawn" {
				t.Fatalf("withdraw answered %s", r.Raw)
			}
			f.wantInstance(id, "withdrawn", map[string]string{"lead": "cancelled", "hook": "cancelled"})
			f.wantTasks(id, "lead", map[string]string{"bob": "approved", "carol": "cancelled"})
			if n := f.rows("bookmarks", "instance_id = ? AND closed_at IS NULL", id); n != 0 {
				t.Fatalf("%d open bookmark rows", n)
			}
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.tokens["ann"], nil, nil), 409, "instance_ended")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.tokens["ann"], nil, nil), 409, "instance_ended")
		})

		t.Run("a completed instance cannot be withdrawn", func(t *testing.T) {
			f := f.sub(t)
			f.publish("one", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
			id := f.start("ann", map[string]any{"template": "one"})
			f.wantOK(f.act("bob", f.task(id, "n", "bob").Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "completed", nil)
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/withdraw", f.tokens["ann"], nil, nil), 409, "instance_ended")
			assertError(t, f.do("POST", "/api/v1/instances/"+id+"/terminate", f.admin, nil, nil), 409, "instance_ended")
		})
	})
}

func TestHistoryAndDiagramHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob", "dave")
		f.publish("route", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"lead","type":"approval","approvers":{"users":["bob"]}},
			{"id":"big","type":"approval","approvers":{"users":["bob"]}},
			{"id":"end","type":"end","join":"or"}],
		 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"big","condition":{"days":{"$gt":10}}},{"from":"lead","to":"end","default":true},
			{"from":"big","to":"end"}]}`)
		id := f.start("ann", map[string]any{"template": "route", "context": map[string]any{"days": 2}, "title": "2 days"})
		f.wantOK(f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", map[string]any{"comment": "fine", "data": map[string]any{"ok": true}}), 200)
		in := f.wantInstance(id, "completed", map[string]string{"start": "completed", "lead": "completed", "big": "skipped", "end": "completed"})
		// Without a node form the approver's data is theirs, under context.<node_id>.
		if in.Get("context.lead.ok").Bool() != true || in.Get("context.ok").Exists() || in.Get("context.days").Int() != 2 || in.Get("title").String() != "2 days" {
			t.Fatalf("context after approve with data: %s", in.Get("context").Raw)
		}
		want := []string{"instance.started", "node.activated:start", "node.completed:start", "node.activated:lead", "task.created:lead",
			"context.changed:lead", "task.approved:lead", "node.completed:lead", "node.skipped:big", "node.activated:end", "node.completed:end", "instance.completed"}
		if got := f.history(id); !slices.Equal(got, want) {
			t.Fatalf("history\n got %v\nwant %v", got, want)
		}
		r := f.do("GET", "/api/v1/instances/"+id+"/history", f.tokens["ann"], nil, nil)
		items := gjson.GetBytes(r.Body, "items").Array()
		for i := 1; i < len(items); i++ {
			if items[i].Get("at").Time().Before(items[i-1].Get("at").Time()) {
				t.Fatalf("history not oldest first: %s", r.Body)
			}
		}
		if ap := gjson.GetBytes(r.Body, `items.#(action=="task.approved")`); ap.Get("actor").String() != "bob" || ap.Get("comment").String() != "fine" {
			t.Fatalf("approval in history: %s", ap.Raw)
		}
		assertError(t, f.do("GET", "/api/v1/instances/"+id+"/history", f.tokens["dave"], nil, nil), 403, "")

		d := f.do("GET", "/api/v1/instances/"+id+"/diagram", f.tokens["ann"], nil, nil)
		if d.Status != 200 || !strings.HasPrefix(d.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("diagram: %d %s", d.Status, d.Body)
		}
		// Nodes are numbered in definition order: n0 start, n1 lead, n2 big, n3 end.
		for _, line := range []string{"flowchart TD", "class n0,n1,n3 completed", "class n2 skipped"} {
			if !strings.Contains(string(d.Body), line) {
				t.Fatalf("diagram lacks %q:\n%s", line, d.Body)
			}
		}
		// A running instance shows its active node.
		id2 := f.start("ann", map[string]any{"template": "route", "context": map[string]any{"days": 20}})
		f.wantOK(f.act("bob", f.task(id2, "lead", "bob").Get("id").String(), "approve", nil), 200)
		d = f.do("GET", "/api/v1/instances/"+id2+"/diagram", f.admin, nil, nil)
		for _, line := range []string{"class n0,n1 completed", "class n2 active"} {
			if !strings.Contains(string(d.Body), line) {
				t.Fatalf("diagram lacks %q:\n%s", line, d.Body)
			}
		}
		assertError(t, f.do("GET", "/api/v1/instances/"+id+"/diagram", f.tokens["dave"], nil, nil), 403, "")
	})
}

// payDef waits for message "paid" after the lead approved.
const payDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","approvers":{"users":["bob"]}},
	{"id":"pay","type":"callback","message":"paid"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"pay"},{"from":"pay","to":"end"}]}`

func TestMessagesHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob")
		f.publish("pay", payDef)
		r := f.do("POST", "/api/v1/tokens", f.admin, map[string]any{"name": "erp"}, nil)
		if r.Status != 201 {
			t.Fatalf("token: %d %s", r.Status, r.Body)
		}
		f.tokens["erp"] = r.JSON["token"].(string)
		send := func(f *flowEnv, who string, body map[string]any) resp {
			return f.do("POST", "/api/v1/messages", f.tokens[who], body, nil)
		}
		approveLead := func(f *flowEnv, id string) {
			f.wantOK(f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", nil), 200)
		}

		t.Run("a waiting node is resumed by name and correlation id", func(t *testing.T) {
			f := f.sub(t)
			id := f.start("ann", map[string]any{"template": "pay", "correlation_id": "order-1"})
			other := f.start("ann", map[string]any{"template": "pay", "correlation_id": "order-2"})
			approveLead(f, id)
			approveLead(f, other)
			f.wantInstance(id, "running", map[string]string{"pay": "waiting"})
			// Another name or another correlation id resumes nothing (and is queued).
			if g := f.wantOK(send(f, "erp", map[string]any{"name": "shipped", "correlation_id": "order-1"}), 202); g.Get("resumed").Int() != 0 || !g.Get("queued").Bool() {
				t.Fatalf("unrelated message: %s", g.Raw)
			}
			f.wantInstance(id, "running", map[string]string{"pay": "waiting"})

			g := f.wantOK(send(f, "erp", map[string]any{"name": "paid", "correlation_id": "order-1", "data": map[string]any{"amount": 42}}), 202)
			if g.Get("resumed").Int() != 1 || g.Get("queued").Bool() {
				t.Fatalf("message: %s", g.Raw)
			}
			in := f.wantInstance(id, "completed", map[string]string{"pay": "completed", "end": "completed"})
			if in.Get("context.pay.amount").Int() != 42 {
				t.Fatalf("context.pay: %s", in.Get("context").Raw)
			}
			f.wantInstance(other, "running", map[string]string{"pay": "waiting"})
			if h := f.history(id); !slices.Contains(h, "message.received:pay") {
				t.Fatalf("history %v", h)
			}
			// Admins may send too; a plain user may not.
			assertError(t, send(f, "bob", map[string]any{"name": "paid", "correlation_id": "order-2"}), 403, "not_allowed")
			f.wantInstance(other, "running", map[string]string{"pay": "waiting"})
			if g := f.wantOK(send(f, "admin", map[string]any{"name": "paid", "correlation_id": "order-2"}), 202); g.Get("resumed").Int() != 1 {
				t.Fatalf("admin message: %s", g.Raw)
			}
			f.wantInstance(other, "completed", nil)
		})

		t.Run("a message sent before the node activates is queued and matched", func(t *testing.T) {
			f := f.sub(t)
			g := f.wantOK(send(f, "erp", map[string]any{"name": "paid", "correlation_id": "order-3", "data": map[string]any{"amount": 7}, "ttl": "1h"}), 202)
			if g.Get("resumed").Int() != 0 || !g.Get("queued").Bool() {
				t.Fatalf("early message: %s", g.Raw)
			}
			if n := f.rows("messages", "correlation_id = ? AND consumed_at IS NULL", "order-3"); n != 1 {
				t.Fatalf("%d queued message rows", n)
			}
			id := f.start("ann", map[string]any{"template": "pay", "correlation_id": "order-3"})
			f.wantInstance(id, "running", map[string]string{"lead": "active", "pay": ""})
			f.clk.Advance(30 * time.Minute)
			approveLead(f, id)
			in := f.wantInstance(id, "completed", map[string]string{"pay": "completed"})
			if in.Get("context.pay.amount").Int() != 7 {
				t.Fatalf("context.pay: %s", in.Get("context").Raw)
			}
			if n := f.rows("messages", "correlation_id = ? AND consumed_at IS NULL", "order-3"); n != 0 {
				t.Fatalf("the queued message was not consumed")
			}
			// Consumed once: a second instance with the same correlation id waits.
			id2 := f.start("ann", map[string]any{"template": "pay", "correlation_id": "order-3"})
			approveLead(f, id2)
			f.wantInstance(id2, "running", map[string]string{"pay": "waiting"})
		})

		t.Run("an expired message is not matched", func(t *testing.T) {
			f := f.sub(t)
			f.wantOK(send(f, "erp", map[string]any{"name": "paid", "correlation_id": "order-4", "data": map[string]any{"amount": 1}, "ttl": "1s"}), 202)
			id := f.start("ann", map[string]any{"template": "pay", "correlation_id": "order-4"})
			f.clk.Advance(2 * time.Second)
			approveLead(f, id)
			in := f.wantInstance(id, "running", map[string]string{"pay": "waiting"})
			if in.Get("context.pay").Exists() {
				t.Fatalf("an expired message was matched: %s", in.Get("context").Raw)
			}
			// A fresh one still resumes it.
			if g := f.wantOK(send(f, "erp", map[string]any{"name": "paid", "correlation_id": "order-4", "data": map[string]any{"amount": 2}}), 202); g.Get("resumed").Int() != 1 {
				t.Fatalf("fresh message: %s", g.Raw)
			}
			if in := f.wantInstance(id, "completed", nil); in.Get("context.pay.amount").Int() != 2 {
				t.Fatalf("context.pay: %s", in.Get("context").Raw)
			}
		})

		t.Run("bad messages", func(t *testing.T) {
			f := f.sub(t)
			assertError(t, send(f, "erp", map[string]any{"name": "paid"}), 400, "invalid_message")
			assertError(t, send(f, "erp", map[string]any{"name": "paid", "correlation_id": "x", "ttl": "forever"}), 400, "invalid_ttl")
			assertError(t, send(f, "erp", map[string]any{"name": "paid", "correlation_id": "x", "data": []int{1}}), 400, "invalid_data")
		})
	})
}

func TestCallbackURLHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob")
		f.publish("hook", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"hook","type":"callback"},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"hook"},{"from":"hook","to":"end"}]}`)
		id := f.start("ann", map[string]any{"template": "hook"})
		in := f.wantInstance(id, "running", map[string]string{"hook": "waiting"})
		cb := in.Get(`nodes.#(node_id=="hook").callback_url`).String()
		nid := in.Get(`nodes.#(node_id=="hook").node_instance_id`).String()
		if !strings.HasPrefix(cb, "/api/v1/callback/"+id+"/"+nid+"?token=") {
			t.Fatalf("callback_url %q", cb)
		}
		// The signed URL is a credential for systems: the initiator does not see it (nor anyone but admins and
		// API tokens).
		annView := f.do("GET", "/api/v1/instances/"+id, f.tokens["ann"], nil, nil)
		if annView.Status != 200 || strings.Contains(string(annView.Body), "token=") {
			t.Fatalf("callback token shown to the initiator: %d %s", annView.Status, annView.Body)
		}

		base := "/api/v1/callback/" + id + "/" + nid
		assertError(t, f.do("POST", base+"?token=forged", "", map[string]any{"ok": true}, nil), 401, "invalid_callback_token")
		assertError(t, f.do("POST", base, "", map[string]any{"ok": true}, nil), 401, "invalid_callback_token")
		f.wantInstance(id, "running", map[string]string{"hook": "waiting"})

		r := f.do("POST", cb, "", map[string]any{"ok": true, "ref": "T-1"}, nil)
		if r.Status != 200 {
			t.Fatalf("callback: %d %s", r.Status, r.Body)
		}
		in = f.wantInstance(id, "completed", map[string]string{"hook": "completed", "end": "completed"})
		if in.Get("context.hook.ref").String() != "T-1" {
			t.Fatalf("context.hook: %s", in.Get("context").Raw)
		}
		assertError(t, f.do("POST", cb, "", map[string]any{"ok": true}, nil), 409, "already_resumed")
		if h := f.history(id); !slices.Contains(h, "callback.received:hook") {
			t.Fatalf("history %v", h)
		}

		// Unknown ids: with a signed token for them, and with an admin's bearer token.
		for _, p := range [][2]string{{"01a2-no-such-instance", "01a2-no-such-instance.n2"}, {id, id + ".n99"}} {
			url := "/api/v1/callback/" + p[0] + "/" + p[1]
			assertError(t, f.do("POST", url+"?token="+engine.CallbackToken(f.key, p[0], p[1]), "", map[string]any{}, nil), 404, "callback_not_found")
			assertError(t, f.do("POST", url, f.admin, map[string]any{}, nil), 404, "callback_not_found")
		}
		assertError(t, f.do("POST", "/api/v1/callback/"+id+"/other.n2", f.admin, map[string]any{}, nil), 404, "callback_not_found")

		// The same wait resumed through its bookmark.
		id2 := f.start("ann", map[string]any{"template": "hook"})
		r = f.do("GET", "/api/v1/instances/"+id2+"/bookmarks", f.tokens["ann"], nil, nil)
		bm := gjson.GetBytes(r.Body, "items.0")
		if gjson.GetBytes(r.Body, "items.#").Int() != 1 || bm.Get("kind").String() != "callback" || bm.Get("node_id").String() != "hook" {
			t.Fatalf("bookmarks: %s", r.Body)
		}
		if bm.Get("payload.callback_url").Exists() {
			t.Fatalf("the initiator sees the callback URL in the bookmark: %s", r.Body)
		}
		// A system wait is not the initiator's to resume (they would forge what the system reports).
		assertError(t, f.do("POST", "/api/v1/bookmarks/"+bm.Get("id").String()+"/resume", f.tokens["bob"], map[string]any{"data": map[string]any{"x": 1}}, nil), 403, "not_allowed")
		assertError(t, f.do("POST", "/api/v1/bookmarks/"+bm.Get("id").String()+"/resume", f.tokens["ann"], map[string]any{"data": map[string]any{"x": 1}}, nil), 403, "not_allowed")
		f.wantOK(f.do("POST", "/api/v1/bookmarks/"+bm.Get("id").String()+"/resume", f.admin, map[string]any{"data": map[string]any{"x": 1}}, nil), 200)
		if in := f.wantInstance(id2, "completed", map[string]string{"hook": "completed"}); in.Get("context.hook.x").Int() != 1 {
			t.Fatalf("context.hook: %s", in.Get("context").Raw)
		}
		assertError(t, f.do("POST", "/api/v1/bookmarks/"+bm.Get("id").String()+"/resume", f.admin, nil, nil), 409, "")
		assertError(t, f.do("POST", "/api/v1/bookmarks/nope/resume", f.admin, nil, nil), 404, "")
		assertError(t, f.do("POST", "/api/v1/bookmarks/nope/resume", f.tokens["ann"], nil, nil), 403, "not_allowed")
		// An approval's wait is listed, but resumed only by deciding its tasks.
		f.publish("one", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		id3 := f.start("ann", map[string]any{"template": "one"})
		r = f.do("GET", "/api/v1/instances/"+id3+"/bookmarks", f.tokens["ann"], nil, nil)
		if bm := gjson.GetBytes(r.Body, "items.0"); bm.Get("kind").String() != "approval" {
			t.Fatalf("approval bookmark: %s", r.Body)
		}
		assertError(t, f.do("POST", "/api/v1/bookmarks/"+gjson.GetBytes(r.Body, "items.0.id").String()+"/resume", f.admin, nil, nil), 409, "approval_bookmark")
	})
}

func TestCCHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob", "carol", "dave")
		f.publish("cc", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]},"cc":{"users":["carol"]}}`))
		id := f.start("ann", map[string]any{"template": "cc", "title": "Laptop"})

		r := f.do("GET", "/api/v1/cc", f.tokens["carol"], nil, nil)
		items := gjson.GetBytes(r.Body, "items").Array()
		if r.Status != 200 || len(items) != 1 || items[0].Get("instance_id").String() != id || items[0].Get("read").Bool() ||
			items[0].Get("node_id").String() != "n" || items[0].Get("title").String() != "Laptop" {
			t.Fatalf("carol's cc: %d %s", r.Status, r.Body)
		}
		if r := f.do("GET", "/api/v1/cc", f.tokens["dave"], nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 0 {
			t.Fatalf("dave's cc: %s", r.Body)
		}
		ccID := items[0].Get("id").String()
		assertError(t, f.do("POST", "/api/v1/cc/"+ccID+"/read", f.tokens["dave"], nil, nil), 404, "")
		f.wantOK(f.do("POST", "/api/v1/cc/"+ccID+"/read", f.tokens["carol"], nil, nil), 200)
		r = f.do("GET", "/api/v1/cc", f.tokens["carol"], nil, nil)
		if it := gjson.GetBytes(r.Body, "items.0"); !it.Get("read").Bool() || it.Get("read_at").Type == gjson.Null {
			t.Fatalf("after read: %s", r.Body)
		}

		if r := f.do("GET", "/api/v1/instances/"+id, f.tokens["carol"], nil, nil); r.Status != 200 || r.JSON["id"] != id {
			t.Fatalf("carol reading the instance: %d %s", r.Status, r.Body)
		}
		if r := f.do("GET", "/api/v1/instances/"+id+"/history", f.tokens["carol"], nil, nil); r.Status != 200 {
			t.Fatalf("carol reading the history: %d %s", r.Status, r.Body)
		}
		assertError(t, f.do("GET", "/api/v1/instances/"+id, f.tokens["dave"], nil, nil), 403, "not_allowed")
		// Being copied is no licence to decide.
		assertError(t, f.act("carol", f.task(id, "n", "bob").Get("id").String(), "approve", nil), 403, "not_assignee")
		// The cc user sees the instance in their list, dave does not.
		if r := f.do("GET", "/api/v1/instances", f.tokens["carol"], nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 1 {
			t.Fatalf("carol's instances: %s", r.Body)
		}
		if r := f.do("GET", "/api/v1/instances", f.tokens["dave"], nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 0 {
			t.Fatalf("dave's instances: %s", r.Body)
		}
		if h := f.history(id); !slices.Contains(h, "cc.sent:n") {
			t.Fatalf("history %v", h)
		}
	})
}

func TestLinearHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob", "carol", "dave")
		body := map[string]any{"title": "Buy a laptop", "correlation_id": "po-7", "context": map[string]any{"price": 1200},
			"steps": []map[string]any{
				{"name": "Lead", "approvers": map[string]any{"users": []string{"bob"}}},
				{"name": "Finance", "approvers": map[string]any{"users": []string{"carol", "dave"}}, "sign": "all"},
			}}
		r := f.do("POST", "/api/v1/instances/linear", f.tokens["ann"], body, nil)
		in := f.wantOK(r, 201)
		id := in.Get("id").String()
		if in.Get("title").String() != "Buy a laptop" || in.Get("status").String() != "running" || in.Get("initiator").String() != "ann" ||
			in.Get("correlation_id").String() != "po-7" || in.Get("context.price").Int() != 1200 {
			t.Fatalf("linear instance: %s", in.Raw)
		}
		var order []string
		for _, n := range in.Get("nodes").Array() {
			order = append(order, n.Get("node_id").String()+"="+n.Get("state").String())
		}
		if !slices.Equal(order, []string{"start=completed", "step1=active"}) {
			t.Fatalf("nodes %v", order)
		}
		if name := in.Get(`nodes.#(node_id=="step1").name`).String(); name != "Lead" {
			t.Fatalf("step1 name %q", name)
		}
		f.wantTasks(id, "step1", map[string]string{"bob": "pending"})
		f.wantOK(f.act("bob", f.task(id, "step1", "bob").Get("id").String(), "approve", nil), 200)
		f.wantInstance(id, "running", map[string]string{"step1": "completed", "step2": "active"})
		f.wantTasks(id, "step2", map[string]string{"carol": "pending", "dave": "pending"})
		f.wantOK(f.act("carol", f.task(id, "step2", "carol").Get("id").String(), "approve", nil), 200)
		f.wantInstance(id, "running", map[string]string{"step2": "active"})
		f.wantOK(f.act("dave", f.task(id, "step2", "dave").Get("id").String(), "approve", nil), 200)
		f.wantInstance(id, "completed", map[string]string{"start": "completed", "step1": "completed", "step2": "completed", "end": "completed"})
		want := []string{"instance.started", "node.activated:start", "node.completed:start", "node.activated:step1", "task.created:step1",
			"task.approved:step1", "node.completed:step1", "node.activated:step2", "task.created:step2", "task.created:step2",
			"task.approved:step2", "task.approved:step2", "node.completed:step2", "node.activated:end", "node.completed:end", "instance.completed"}
		if got := f.history(id); !slices.Equal(got, want) {
			t.Fatalf("history\n got %v\nwant %v", got, want)
		}
		d := f.do("GET", "/api/v1/instances/"+id+"/diagram", f.tokens["ann"], nil, nil)
		if d.Status != 200 || !strings.Contains(string(d.Body), "Finance") || !strings.Contains(string(d.Body), "class n0,n1,n2,n3 completed") {
			t.Fatalf("linear diagram: %d %s", d.Status, d.Body)
		}
		// The one-off version is hidden from the template list.
		if r := f.do("GET", "/api/v1/templates", f.admin, nil, nil); gjson.GetBytes(r.Body, "items.#").Int() != 0 {
			t.Fatalf("templates: %s", r.Body)
		}
		assertError(t, f.do("POST", "/api/v1/instances/linear", f.tokens["ann"], map[string]any{"title": "x", "steps": []any{}}, nil), 400, "invalid_steps")
	})
}

func TestBadInputLeavesNoTrace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "bob")
		f.publish("one", single(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		id := f.start("ann", map[string]any{"template": "one", "context": map[string]any{"a": 1}})
		tid := f.task(id, "n", "bob").Get("id").String()
		tables := []string{"instances", "tasks", "history", "bookmarks", "outbox", "templates", "template_versions"}
		counts := func() map[string]int64 {
			m := map[string]int64{}
			for _, tb := range tables {
				m[tb] = f.rows(tb, "")
			}
			return m
		}
		before := counts()

		cases := []struct {
			name   string
			path   string
			body   any
			status int
			code   string
		}{
			{"unknown template", "/api/v1/instances", map[string]any{"template": "nope"}, 404, "template_not_found"},
			{"unknown version", "/api/v1/instances", map[string]any{"template": "one", "version": 7}, 404, ""},
			{"no template", "/api/v1/instances", map[string]any{"context": map[string]any{}}, 400, "invalid_template"},
			{"context is an array", "/api/v1/instances", `{"template":"one","context":[1,2]}`, 400, "invalid_context"},
			{"context is a string", "/api/v1/instances", `{"template":"one","context":"x"}`, 400, "invalid_context"},
			{"context is a number", "/api/v1/instances", `{"template":"one","context":5}`, 400, "invalid_context"},
			{"unknown field", "/api/v1/instances", `{"template":"one","ctx":{}}`, 400, "unknown_field"},
			{"malformed JSON", "/api/v1/instances", `{"template":`, 400, "malformed_json"},
			{"linear without steps", "/api/v1/instances/linear", map[string]any{"title": "x"}, 400, "invalid_steps"},
			{"approve with array data", "/api/v1/tasks/" + tid + "/approve", `{"data":[1]}`, 400, "invalid_data"},
			{"approve with string data", "/api/v1/tasks/" + tid + "/approve", `{"data":"yes"}`, 400, "invalid_data"},
			{"approve with number data", "/api/v1/tasks/" + tid + "/approve", `{"data":3}`, 400, "invalid_data"},
			{"transfer to nobody", "/api/v1/tasks/" + tid + "/transfer", `{"to":""}`, 400, ""},
			{"add-sign with a bad position", "/api/v1/tasks/" + tid + "/add-sign", `{"users":["ann"],"position":"sideways"}`, 400, "invalid_position"},
			{"add-sign without users", "/api/v1/tasks/" + tid + "/add-sign", `{"users":[],"position":"before"}`, 400, "invalid_users"},
		}
		for _, c := range cases {
			token := f.tokens["ann"]
			if strings.HasPrefix(c.path, "/api/v1/tasks/") {
				token = f.tokens["bob"]
			}
			assertError(t, f.do("POST", c.path, token, c.body, nil), c.status, c.code)
			if after := counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("%s changed the database: %v → %v", c.name, before, after)
			}
		}
		in := f.wantInstance(id, "running", map[string]string{"n": "active"})
		if in.Get("context").Raw != `{"a":1}` {
			t.Fatalf("context changed: %s", in.Get("context").Raw)
		}
		f.wantTasks(id, "n", map[string]string{"bob": "pending"})
		if n := f.rows("instances", "status = ?", "running"); n != 1 {
			t.Fatalf("%d running instances", n)
		}
	})
}
