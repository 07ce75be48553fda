package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// The semantics of issue 19 through HTTP: joins, errors with codes, node timeouts and closed runs, approvers
// that do not exist, message ids and message starts, return to start.

func TestJoinsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFlowEnv(t, s)
		f.users("ann", "mia", "dan", "bob", "dora")
		f.publish("leave", testkit.LeaveDef)

		t.Run("the leave template of the issue completes, short and long", func(t *testing.T) {
			f := f.sub(t)
			short := f.start("ann", map[string]any{"template": "leave", "context": map[string]any{"days": 1}})
			f.wantOK(f.act("mia", f.task(short, "manager", "mia").Get("id").String(), "approve", nil), 200)
			f.wantInstance(short, "completed", map[string]string{"director": "skipped", "end": "completed"})

			long := f.start("ann", map[string]any{"template": "leave", "context": map[string]any{"days": 5}})
			f.wantOK(f.act("mia", f.task(long, "manager", "mia").Get("id").String(), "approve", nil), 200)
			f.wantInstance(long, "running", map[string]string{"director": "active", "end": ""})
			f.wantOK(f.act("dan", f.task(long, "director", "dan").Get("id").String(), "approve", nil), 200)
			f.wantInstance(long, "completed", map[string]string{"director": "completed", "end": "completed"})

			rejected := f.start("ann", map[string]any{"template": "leave", "context": map[string]any{"days": 5}})
			f.wantOK(f.act("mia", f.task(rejected, "manager", "mia").Get("id").String(), "approve", nil), 200)
			f.wantOK(f.act("dan", f.task(rejected, "director", "dan").Get("id").String(), "reject", nil), 200)
			in := f.wantInstance(rejected, "rejected", map[string]string{"director": "rejected", "end": "skipped"})
			if in.Get("error").Type != gjson.Null {
				t.Fatalf("a rejection is not an error: %s", in.Get("error").Raw)
			}
			// The diagram draws the pruned default edge and the killed edge after the rejection differently.
			d := f.do("GET", "/api/v1/instances/"+rejected+"/diagram", f.admin, nil, nil)
			for _, line := range []string{`default · pruned`, `"killed"`, "linkStyle 3 stroke:#dc2626", "linkStyle 2 stroke:#9ca3af"} {
				if !strings.Contains(string(d.Body), line) {
					t.Fatalf("diagram lacks %q:\n%s", line, d.Body)
				}
			}
		})

		t.Run("the Definition example of the contract completes for level 1", func(t *testing.T) {
			f := f.sub(t)
			f.publish("contract", `{"nodes":[
				{"id":"start","type":"start","name":"Apply","trigger":{"kind":"manual"}},
				{"id":"lead","type":"approval","name":"Team lead","approvers":{"users":["bob"]},"sign":"or"},
				{"id":"dba","type":"approval","name":"DBA","approvers":{"users":["dora"]},"sign":"all"},
				{"id":"grant","type":"auto","name":"Grant","join":"and"},
				{"id":"end","type":"end"}],
			 "edges":[{"from":"start","to":"lead"},{"from":"start","to":"dba","condition":{"level":{"$gte":3}}},
				{"from":"lead","to":"grant"},{"from":"dba","to":"grant"},{"from":"grant","to":"end"}]}`)
			id := f.start("ann", map[string]any{"template": "contract", "context": map[string]any{"level": 1}})
			f.wantOK(f.act("bob", f.task(id, "lead", "bob").Get("id").String(), "approve", nil), 200)
			f.wantInstance(id, "completed", map[string]string{"dba": "skipped", "grant": "completed"})
		})

		t.Run("join {min:N} validates, with cancel_rest too", func(t *testing.T) {
			f := f.sub(t)
			def := `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"a","type":"auto"},{"id":"b","type":"auto"},
				{"id":"m","type":"auto","join":%s},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"a"},{"from":"start","to":"b"},{"from":"a","to":"m"},{"from":"b","to":"m"},{"from":"m","to":"end"}]}`
			r := f.wantOK(f.do("POST", "/api/v1/templates/validate", f.admin, map[string]any{"definition": json.RawMessage(strings.Replace(def, "%s", `{"min":1}`, 1))}, nil), 200)
			if !r.Get("valid").Bool() {
				t.Fatalf("min 1: %s", r.Raw)
			}
			r = f.wantOK(f.do("POST", "/api/v1/templates/validate", f.admin, map[string]any{"definition": json.RawMessage(strings.Replace(def, "%s", `{"min":1,"cancel_rest":true}`, 1))}, nil), 200)
			if !r.Get("valid").Bool() {
				t.Fatalf("cancel_rest: %s", r.Raw)
			}
			f.publish("discriminator", strings.Replace(def, "%s", `{"min":1,"cancel_rest":true}`, 1))
			disc := f.start("ann", map[string]any{"template": "discriminator"})
			f.wantInstance(disc, "completed", map[string]string{"m": "completed"})
			f.publish("min1", strings.Replace(def, "%s", `{"min":1}`, 1))
			id := f.start("ann", map[string]any{"template": "min1"})
			in := f.wantInstance(id, "completed", map[string]string{"m": "completed"})
			if n := strings.Count(in.Get("nodes").Raw, `"node_id":"m"`); n != 1 {
				t.Fatalf("m shows %d times", n)
			}
		})
	})
}

func TestNodeErrorsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e, svc, _ := subsEnv(t, s)
		bob := e.mkUser("bob")
		hook := newHookReceiver(t, 200)
		if r := e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "instance.failed", "webhook_url": hook.URL}, nil); r.Status != 201 {
			t.Fatalf("subscribe: %s", r.Body)
		}
		// Approvers who do not exist: dropped, nobody left → no_approver. Validation only warns about them.
		def := `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"review","type":"approval","approvers":{"users":["ghost","phantom"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"review"},{"from":"review","to":"end"}]}`
		v := e.do("POST", "/api/v1/templates/validate", e.admin, M{"definition": json.RawMessage(def)}, nil)
		vr := gjson.ParseBytes(v.Body)
		if !vr.Get("valid").Bool() || vr.Get("warnings.#").Int() != 2 || vr.Get("warnings.0.code").String() != "unknown_user" ||
			vr.Get("warnings.0.nodes.0").String() != "review" {
			t.Fatalf("validate: %s", v.Body)
		}
		e.do("POST", "/api/v1/templates", e.admin, M{"key": "ghosts", "definition": json.RawMessage(def)}, nil)
		if r := e.do("POST", "/api/v1/templates/ghosts/publish", e.admin, nil, nil); r.Status != 201 {
			t.Fatalf("publishing with unknown users is allowed: %s", r.Body)
		}
		r := e.do("POST", "/api/v1/instances", bob, M{"template": "ghosts"}, nil)
		id := r.JSON["id"].(string)
		in := gjson.ParseBytes(e.instance(id).Body)
		if in.Get("status").String() != "failed" || in.Get("error.code").String() != "no_approver" || in.Get("error.node_id").String() != "review" ||
			in.Get("error.message").String() == "" || in.Get(`nodes.#(node_id=="review").error_code`).String() != "no_approver" {
			t.Fatalf("failed instance: %s", in.Raw)
		}
		// The diagram highlights the failing node.
		if d := e.do("GET", "/api/v1/instances/"+id+"/diagram", bob, nil, nil); !strings.Contains(string(d.Body), "style n1 stroke:#a40e26,stroke-width:4px") {
			t.Fatalf("diagram does not highlight the failing node:\n%s", d.Body)
		}
		hr := gjson.ParseBytes(e.do("GET", "/api/v1/instances/"+id+"/history", bob, nil, nil).Body)
		if hr.Get(`items.#(action=="node.failed").data.code`).String() != "no_approver" ||
			hr.Get(`items.#(action=="instance.failed").data.error.code`).String() != "no_approver" ||
			hr.Get(`items.#(action=="approver.dropped")#.data.user`).Raw != `["ghost","phantom"]` {
			t.Fatalf("history: %s", hr.Raw)
		}
		// The instance.failed webhook carries the code.
		ignore := func(context.Context, []model.OutboxItem) error { return nil }
		d := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.OutboxHandler(), model.OutboxTimerArm: ignore, model.OutboxTimerCancel: ignore},
			outbox.Options{Logger: testkit.Quiet()})
		dispatch(t, d)
		if _, err := svc.DeliverOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		bodies, _ := hook.got()
		if len(bodies) != 1 || gjson.GetBytes(bodies[0], "instance.error.code").String() != "no_approver" || gjson.GetBytes(bodies[0], "node_id").String() != "review" {
			t.Fatalf("webhook: %q", bodies)
		}
	})
}

func TestNodeTimeoutAndClosedRunsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		e := newEnv(t, s, withPlugins(t, rec))
		e.upload("later", "python", "5s", []byte(`print('{"async": true}')`), e.admin)
		e.publish("bounded", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "timeout": "30s", "plugins": M{"after": []string{"later"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "work"), edge("work", "end")})
		resultPath := func(runID string) string {
			stored, err := s.GetRun(ctx0, "default", runID)
			if err != nil {
				t.Fatal(err)
			}
			var in struct {
				CallbackURL string `json:"callback_url"`
			}
			if err := json.Unmarshal(stored.Input, &in); err != nil {
				t.Fatal(err)
			}
			return strings.TrimPrefix(in.CallbackURL, "http://halley.test")
		}
		runOf := func(id string) M {
			return e.do("GET", "/api/v1/plugins/later/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)[0].(M)
		}

		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "bounded"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		run := runOf(id)
		if run["status"] != "waiting" {
			t.Fatalf("run %v", run)
		}
		e.advance(30*time.Second + time.Millisecond) // the due time is rounded up to a whole millisecond
		e.fireDue()
		in := gjson.ParseBytes(e.instance(id).Body)
		if in.Get("status").String() != "failed" || in.Get("error.code").String() != "plugin_timeout" || in.Get("error.node_id").String() != "work" {
			t.Fatalf("after the timeout: %s", in.Raw)
		}
		if run = runOf(id); run["status"] != "timed_out" {
			t.Fatalf("run %v", run)
		}
		assertError(t, e.do("POST", resultPath(run["id"].(string)), "", M{"status": "succeeded", "data": M{"late": true}}, nil), 409, "run_closed")
		if in2 := gjson.ParseBytes(e.instance(id).Body); in2.Get("context.late").Exists() || in2.Get("status").String() != "failed" {
			t.Fatalf("a refused result changed the instance: %s", in2.Raw)
		}

		// Terminated while the run waits: the run is cancelled, its result refused.
		id = e.do("POST", "/api/v1/instances", e.admin, M{"template": "bounded"}, nil).JSON["id"].(string)
		rec.wait(t, 1)
		if r := e.do("POST", "/api/v1/instances/"+id+"/terminate", e.admin, M{"reason": "no"}, nil); r.Status != 200 {
			t.Fatalf("terminate: %s", r.Body)
		}
		run = runOf(id)
		if run["status"] != "cancelled" {
			t.Fatalf("run after terminate %v", run)
		}
		assertError(t, e.do("POST", resultPath(run["id"].(string)), "", M{"status": "succeeded"}, nil), 409, "run_closed")
	})
}

func TestMessageIDsAndMessageStartHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		fin := e.mkUser("fin")
		r := e.do("POST", "/api/v1/tokens", e.admin, M{"name": "erp"}, nil)
		erp := r.JSON["token"].(string)
		e.publish("onpaid", []any{start(M{"kind": "message", "message": "order.paid"}), M{"id": "book", "type": "approval", "approvers": M{"users": []string{"fin"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "book"), edge("book", "end")})

		msg := M{"name": "order.paid", "correlation_id": "o-7", "data": M{"amount": 12}, "message_id": "erp-msg-1"}
		first := e.do("POST", "/api/v1/messages", erp, msg, nil)
		if first.Status != 202 || first.JSON["duplicate"] != false || len(first.JSON["started"].([]any)) != 1 || first.JSON["queued"] != false {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		id := first.JSON["started"].([]any)[0].(string)
		in := gjson.ParseBytes(e.instance(id).Body)
		if in.Get("initiator").String() != "token:erp" || in.Get("correlation_id").String() != "o-7" || in.Get("context.amount").Int() != 12 {
			t.Fatalf("started: %s", in.Raw)
		}
		// The retry: 200, the first answer, duplicate, nothing started.
		again := e.do("POST", "/api/v1/messages", erp, msg, nil)
		if again.Status != 200 || again.JSON["duplicate"] != true || gjson.GetBytes(again.Body, "started.0").String() != id {
			t.Fatalf("retry: %d %s", again.Status, again.Body)
		}
		// Without the id the same message conflicts with the running instance.
		delete(msg, "message_id")
		c := e.do("POST", "/api/v1/messages", erp, msg, nil)
		if c.Status != 202 || gjson.GetBytes(c.Body, "conflicts").Raw != `["onpaid"]` || gjson.GetBytes(c.Body, "started").Raw != `[]` {
			t.Fatalf("conflict: %s", c.Body)
		}
		var n int64
		s.DB().Table("instances").Where("tkey = ?", "onpaid").Count(&n)
		if n != 1 {
			t.Fatalf("%d instances", n)
		}
		assertError(t, e.do("POST", "/api/v1/messages", erp, M{"name": "x", "correlation_id": "y", "message_id": strings.Repeat("m", 129)}, nil), 400, "invalid_message_id")

		// 20 concurrent posts of one new message id: one start.
		var wg sync.WaitGroup
		statuses := make([]int, 20)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = e.do("POST", "/api/v1/messages", erp, M{"name": "order.paid", "correlation_id": "o-8", "message_id": "erp-msg-2"}, nil).Status
			}()
		}
		wg.Wait()
		count := map[int]int{}
		for _, st := range statuses {
			count[st]++
		}
		s.DB().Table("instances").Where("tkey = ? AND correlation_id = ?", "onpaid", "o-8").Count(&n)
		if count[202] != 1 || count[200] != 19 || n != 1 {
			t.Fatalf("statuses %v, %d instances", count, n)
		}

		// Return to start: the instance was started by a token, so nobody could resubmit.
		task := e.do("GET", "/api/v1/tasks", fin, nil, nil).JSON["items"].([]any)[0].(M)["id"].(string)
		targets := e.do("GET", "/api/v1/tasks/"+task+"/return-targets", fin, nil, nil)
		if strings.Contains(string(targets.Body), `"start"`) || targets.JSON["no_initiator"] != true {
			t.Fatalf("start offered: %s", targets.Body)
		}
		assertError(t, e.do("POST", "/api/v1/tasks/"+task+"/return", fin, M{"to": "start"}, nil), 422, "no_initiator")
	})
}
