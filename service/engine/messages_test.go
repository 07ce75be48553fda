package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

// erp is a business system's API token.
var erp = &model.Principal{TenantID: model.DefaultTenant, Username: "token:erp", Token: true}

// waitPaidDef waits for the message "paid" at once.
const waitPaidDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"pay","type":"callback","message":"paid"},{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"pay"},{"from":"pay","to":"end"}]}`

func (h *harness) send(req engine.MessageParams) *engine.MessageResult {
	h.t.Helper()
	res, err := h.eng.SendMessage(h.ctx, erp, req)
	if err != nil {
		h.t.Fatalf("message %+v: %v", req, err)
	}
	return res
}

func TestMessageIDs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann")
		h.publish("wait", waitPaidDef)

		t.Run("a retried message does not resume the next instance with the same correlation id", func(t *testing.T) {
			h := h.sub(t)
			id := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-9"})
			res := h.send(engine.MessageParams{Name: "paid", CorrelationID: "order-9", MessageID: "pay-9", Data: json.RawMessage(`{"n":1}`)})
			if res.Resumed != 1 || res.Duplicate {
				t.Fatalf("first answer %+v", res)
			}
			h.wantStatus(id, model.StatusCompleted)
			next := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-9"})
			again := h.send(engine.MessageParams{Name: "paid", CorrelationID: "order-9", MessageID: "pay-9", Data: json.RawMessage(`{"n":1}`)})
			if !again.Duplicate || again.Resumed != 1 || again.Queued {
				t.Fatalf("retry answered %+v, want the first answer marked duplicate", again)
			}
			h.wantStatus(next, model.StatusRunning)
			h.wantNodes(next, map[string]model.NodeState{"pay": "waiting"})
			if n := h.rows("messages", "correlation_id = ?", "order-9"); n != 0 {
				t.Fatalf("the retry queued a message (%d rows)", n)
			}
			// Another id is another message.
			if res := h.send(engine.MessageParams{Name: "paid", CorrelationID: "order-9", MessageID: "pay-10"}); res.Duplicate || res.Resumed != 1 {
				t.Fatalf("new id %+v", res)
			}
			h.wantStatus(next, model.StatusCompleted)
		})

		t.Run("20 goroutines post one message_id: one effect, 19 duplicates", func(t *testing.T) {
			h := h.sub(t)
			var wg sync.WaitGroup
			results := make([]*engine.MessageResult, 20)
			errs := make([]error, 20)
			gate := make(chan struct{})
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					results[i], errs[i] = h.eng.SendMessage(h.ctx, erp, engine.MessageParams{Name: "paid", CorrelationID: "order-20", MessageID: "race-1",
						Data: json.RawMessage(`{"n":20}`)})
				}()
			}
			close(gate)
			wg.Wait()
			firsts := 0
			for i, r := range results {
				if errs[i] != nil {
					t.Fatalf("goroutine %d: %v", i, errs[i])
				}
				if !r.Duplicate {
					firsts++
				}
				if !r.Queued || r.Resumed != 0 {
					t.Fatalf("answer %d: %+v, want the first answer (queued)", i, r)
				}
			}
			if firsts != 1 {
				t.Fatalf("%d requests acted, want 1", firsts)
			}
			if n := h.rows("messages", "correlation_id = ?", "order-20"); n != 1 {
				t.Fatalf("%d queued messages, want 1", n)
			}
			// The one queued message resumes one instance; the next one waits.
			a := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-20"})
			b := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-20"})
			h.wantStatus(a, model.StatusCompleted)
			h.wantNodes(b, map[string]model.NodeState{"pay": "waiting"})
		})

		t.Run("queued messages are matched once each, in arrival order", func(t *testing.T) {
			h := h.sub(t)
			for n := 1; n <= 3; n++ {
				if res := h.send(engine.MessageParams{Name: "paid", CorrelationID: "order-q", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}); !res.Queued {
					t.Fatalf("message %d not queued: %+v", n, res)
				}
			}
			for n := 1; n <= 3; n++ {
				id := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-q"})
				h.wantStatus(id, model.StatusCompleted)
				if got := h.contextValue(id, "pay.n").Int(); got != int64(n) {
					t.Fatalf("instance %d got message %d", n, got)
				}
			}
			id := h.startReq("ann", engine.StartParams{Template: "wait", CorrelationID: "order-q"})
			h.wantNodes(id, map[string]model.NodeState{"pay": "waiting"})
		})

		t.Run("bad message ids", func(t *testing.T) {
			h := h.sub(t)
			long := make([]byte, 129)
			for i := range long {
				long[i] = 'x'
			}
			_, err := h.eng.SendMessage(h.ctx, erp, engine.MessageParams{Name: "paid", CorrelationID: "x", MessageID: string(long)})
			wantErr(t, err, model.EINVALID, "invalid_message_id")
			_, err = h.eng.SendMessage(h.ctx, erp, engine.MessageParams{Name: "paid", CorrelationID: "x", MessageID: "   "})
			wantErr(t, err, model.EINVALID, "invalid_message_id")
			if n := h.rows("message_receipts", ""); n == 0 {
				t.Fatal("no message ids recorded at all")
			}
			if n := h.rows("message_receipts", "message_id = ?", "   "); n != 0 {
				t.Fatal("an invalid id was recorded")
			}
		})
	})
}

// onPaidDef starts on the message "order.paid" and asks finance.
const onPaidDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"message","message":"order.paid"}},
	{"id":"book","type":"approval","approvers":{"users":["fin"]}},{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"book"},{"from":"book","to":"end"}]}`

func TestMessageStart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		// Message starts are indexed when a version is published (trigger.Publisher): the templates and the
		// engine are built with it, as the composition root builds them.
		sched := scheduler.NewMemory(scheduler.Options{Clock: h.clk})
		t.Cleanup(func() { sched.Close() })
		pub, err := trigger.NewPublisher(s, sched, trigger.Options{Clock: h.clk})
		if err != nil {
			t.Fatal(err)
		}
		h.tpl = template.New(s, template.Options{Clock: h.clk, Publishers: []template.Publisher{pub}})
		h.eng = newEngine(t, s, h.tpl, s, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})
		h.users("ann", "fin")
		h.publish("onpaid", onPaidDef)
		h.publish("wait", waitPaidDef)

		res := h.send(engine.MessageParams{Name: "order.paid", CorrelationID: "o-1", Data: json.RawMessage(`{"amount":99}`)})
		if len(res.Started) != 1 || len(res.Conflicts) != 0 || res.Queued || res.Resumed != 0 {
			t.Fatalf("answer %+v", res)
		}
		id := res.Started[0]
		inst, _ := h.get(id)
		if inst.Template != "onpaid" || inst.CorrelationID != "o-1" || inst.Initiator != "token:erp" || h.contextValue(id, "amount").Int() != 99 {
			t.Fatalf("started %+v context %s", inst, inst.Context)
		}
		h.wantNodes(id, map[string]model.NodeState{"book": "active"})
		if n := h.rows("messages", ""); n != 0 {
			t.Fatalf("a start message was queued (%d rows)", n)
		}

		// The same correlation id while that instance runs: reported, not started.
		res = h.send(engine.MessageParams{Name: "order.paid", CorrelationID: "o-1"})
		if len(res.Started) != 0 || !slices.Equal(res.Conflicts, []string{"onpaid"}) || res.Queued {
			t.Fatalf("conflict answer %+v", res)
		}
		if n := h.rows("instances", "tkey = ?", "onpaid"); n != 1 {
			t.Fatalf("%d instances", n)
		}
		// Once it ended, the id is free again.
		h.decide(id, "book", "fin", true)
		h.wantStatus(id, model.StatusCompleted)
		if res = h.send(engine.MessageParams{Name: "order.paid", CorrelationID: "o-1"}); len(res.Started) != 1 {
			t.Fatalf("after the end %+v", res)
		}

		// A template is started by the message its latest version names: a new version on another message stops it.
		if _, err := h.tpl.SaveDraft(h.ctx, admin, "onpaid", json.RawMessage(`{"nodes":[{"id":"start","type":"start","trigger":{"kind":"message","message":"order.refunded"}},
			{"id":"end","type":"end"}],"edges":[{"from":"start","to":"end"}]}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.tpl.Publish(h.ctx, admin, "onpaid"); err != nil {
			t.Fatal(err)
		}
		if res = h.send(engine.MessageParams{Name: "order.paid", CorrelationID: "o-2"}); len(res.Started) != 0 || !res.Queued {
			t.Fatalf("an old trigger still starts: %+v", res)
		}
		res = h.send(engine.MessageParams{Name: "order.refunded", CorrelationID: "o-2"})
		if len(res.Started) != 1 {
			t.Fatalf("the new trigger did not start: %+v", res)
		}
		h.wantStatus(res.Started[0], model.StatusCompleted)
	})
}
