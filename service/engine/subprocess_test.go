package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subprocess"
	"github.com/halley-bpm/halley/templates"
)

// The sub-process tests (API.md "Sub-processes") drive the outbox by hand: drain dispatches every row (the
// children's ends resume their parents, the cancels end children) until none is left.

// drain dispatches the outbox until it is empty, through the sub-process handlers (other kinds are carried out by
// nobody here) and returns how many rows it dispatched.
func (h *harness) drain() int {
	h.t.Helper()
	d := h.dispatcher()
	total := 0
	for range 1000 {
		n, err := d.DispatchOnce(h.ctx)
		if err != nil {
			h.t.Fatalf("dispatch: %v", err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	h.t.Fatal("the outbox never drained")
	return total
}

// dispatcher is an outbox dispatcher with the sub-process handlers (other kinds are carried out by nobody here).
func (h *harness) dispatcher() *outbox.Dispatcher {
	none := func(context.Context, []model.OutboxItem) error { return nil }
	hs := subprocess.Handlers(h.eng)
	for _, k := range []string{model.OutboxEvent, model.OutboxTimerArm, model.OutboxTimerCancel, model.OutboxPluginRun} {
		hs[k] = none
	}
	d, err := outbox.New(h.s, hs, outbox.Options{})
	if err != nil {
		panic(err) // the handlers above are all there
	}
	return d
}

// children returns the child instances of an instance, in the order they started.
func (h *harness) children(id string) []*model.Instance {
	h.t.Helper()
	inst, _ := h.get(id)
	var out []*model.Instance
	for _, c := range inst.State.Children {
		ci, _ := h.get(c.ID)
		out = append(out, ci)
	}
	return out
}

const paymentDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"pay","type":"approval","approvers":{"users":["cashier"]}},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"pay"},{"from":"pay","to":"end"}]}`

// subDef is a parent with one subprocess node (its extra fields given) between start and end.
func subDef(extra string) string {
	return `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"call","type":"subprocess","template":"payment"` + extra + `},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"call"},{"from":"call","to":"end"}]}`
}

// TestSubprocessRunsChildAndResumesParent: the child starts in the parent's step (same tenant, the parent's
// initiator, parent_instance_id/node), gets the mapped input, and its completion resumes the parent through the
// outbox with the output mapped back; a second dispatch of the same end changes nothing.
func TestSubprocessRunsChildAndResumesParent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier")
		h.publish("payment", paymentDef)
		h.publish("claim", subDef(`,"input":{"amount":"total","who.name":"employee","copy":"$"},"output":{"paid":"pay","result":"$"}`))
		id := h.start("alice", "claim", `{"total":42,"employee":"alice"}`)
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting})
		kids := h.children(id)
		if len(kids) != 1 {
			t.Fatalf("children = %d, want 1", len(kids))
		}
		kid := kids[0]
		if kid.Initiator != "alice" || kid.Template != "payment" || kid.Version != 1 || kid.TenantID != model.DefaultTenant {
			t.Fatalf("child = %+v", kid)
		}
		if p := kid.State.Parent; p == nil || p.InstanceID != id || p.NodeID != "call" || p.Depth != 1 {
			t.Fatalf("child's parent = %+v", kid.State.Parent)
		}
		for path, want := range map[string]string{"amount": "42", "who.name": `"alice"`, "copy.total": "42"} {
			if got := h.contextValue(kid.ID, path).Raw; got != want {
				t.Errorf("child context %s = %s, want %s", path, got, want)
			}
		}
		h.drain() // nothing ended yet: the parent still waits
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting})

		h.decide(kid.ID, "pay", "cashier", true)
		h.wantStatus(kid.ID, model.StatusCompleted)
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting}) // not before the outbox is dispatched
		if n := h.drain(); n == 0 {
			t.Fatal("the child's end wrote no outbox row")
		}
		h.wantStatus(id, model.StatusCompleted)
		if got := h.contextValue(id, "paid").Raw; got != "null" && got != "" {
			// pay is an approval without form data: the child's context has no "pay"; null is mapped.
			t.Errorf("paid = %s", got)
		}
		if got := h.contextValue(id, "result.amount").Raw; got != "42" {
			t.Errorf("result.amount = %s, want 42 (the child's whole context)", got)
		}
		if n := h.count(id, "subprocess.child_ended", "call"); n != 1 {
			t.Errorf("subprocess.child_ended recorded %d times, want 1", n)
		}
		// The same end told again (a redelivered row) is ignored.
		inst, _ := h.get(id)
		if err := h.eng.ChildrenEnded(h.ctx, model.DefaultTenant, id, []model.ChildEnd{{Parent: *kid.State.Parent, ChildID: kid.ID,
			Status: model.StatusCompleted}}); err != nil {
			t.Fatal(err)
		}
		again, _ := h.get(id)
		if again.Status != inst.Status || h.count(id, "node.completed", "call") != 1 || h.count(id, "subprocess.child_ended", "call") != 1 {
			t.Fatalf("a second end moved the parent: %s, %v", again.Status, h.actions(id))
		}
	})
}

// TestSubprocessVersionPinnedAtParentStart: without version, the child runs the version that was latest when
// the parent started, even when a newer one is published meanwhile; with version it runs that one.
func TestSubprocessVersionPinnedAtParentStart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "bob", "cashier")
		h.publish("payment", paymentDef)
		h.publish("claim", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"first","type":"approval","approvers":{"users":["bob"]}},
	{"id":"call","type":"subprocess","template":"payment"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"first"},{"from":"first","to":"call"},{"from":"call","to":"end"}]}`)
		h.publish("pinned", subDef(`,"version":1`))
		id := h.start("alice", "claim", `{}`)
		// version 2 of payment is published after the parent started
		if _, err := h.tpl.SaveDraft(h.ctx, admin, "payment", json.RawMessage(strings.Replace(paymentDef, "cashier", "bob", 1))); err != nil {
			t.Fatal(err)
		}
		if _, err := h.tpl.Publish(h.ctx, admin, "payment"); err != nil {
			t.Fatal(err)
		}
		h.decide(id, "first", "bob", true)
		if kid := h.children(id)[0]; kid.Version != 1 {
			t.Fatalf("child version = %d, want 1 (latest at the parent's start)", kid.Version)
		}
		later := h.start("alice", "claim", `{}`)
		h.decide(later, "first", "bob", true)
		if kid := h.children(later)[0]; kid.Version != 2 {
			t.Fatalf("child of a later parent: version %d, want 2", kid.Version)
		}
		pinned := h.start("alice", "pinned", `{}`)
		if kid := h.children(pinned)[0]; kid.Version != 1 {
			t.Fatalf("pinned child: version %d, want 1", kid.Version)
		}
	})
}

// TestSubprocessFailure: a child rejected, failed, terminated or withdrawn is the node error subprocess_failed
// with the child's id and status in its data; a catch branch reads it, a retry starts a new child.
func TestSubprocessFailure(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier", "boss")
		h.publish("payment", paymentDef)
		h.publish("plain", subDef(``))
		h.publish("caught", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"call","type":"subprocess","template":"payment","error_handler":{"operation":"catch","catch":{"branch":"fix"}}},
	{"id":"fix","type":"approval","approvers":{"users":["boss"]}},
	{"id":"end","type":"end","join":"or"}],
 "edges":[{"from":"start","to":"call"},{"from":"call","to":"end"},{"from":"fix","to":"end"}]}`)
		h.publish("retried", subDef(`,"error_handler":{"operation":"retry","retry":{"count":1,"period":"1m"}}`))

		// rejected → the parent fails with the error carrying the child
		id := h.start("alice", "plain", `{}`)
		kid := h.children(id)[0]
		h.decide(kid.ID, "pay", "cashier", false)
		h.drain()
		h.wantStatus(id, model.StatusFailed)
		inst, _ := h.get(id)
		e := inst.State.Error
		if e == nil || e.Code != model.NodeErrSubprocessFailed || e.NodeID != "call" {
			t.Fatalf("error = %+v", e)
		}
		var data struct {
			ChildID string `json:"child_id"`
			Status  string `json:"status"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil || data.ChildID != kid.ID || data.Status != "rejected" {
			t.Fatalf("error data = %s (%v)", e.Data, err)
		}

		// terminated by an admin → caught: the branch runs with context.error
		id = h.start("alice", "caught", `{}`)
		kid = h.children(id)[0]
		if _, err := h.eng.Terminate(h.ctx, admin, kid.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		h.drain()
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeFailed, "fix": model.NodeActive})
		if got := h.contextValue(id, "error.data.status").Str; got != "terminated" {
			t.Fatalf("context.error.data.status = %q", got)
		}

		// rejected → retry: a new child once the back-off passed
		id = h.start("alice", "retried", `{}`)
		first := h.children(id)[0]
		h.decide(first.ID, "pay", "cashier", false)
		h.drain()
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting})
		h.clk.Advance(61 * time.Second)
		h.fireDue()
		kids := h.children(id)
		if len(kids) != 2 || kids[1].ID == first.ID || kids[1].Status != model.StatusRunning {
			t.Fatalf("after the retry: %d children", len(kids))
		}
		h.decide(kids[1].ID, "pay", "cashier", true)
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
	})
}

// TestSubprocessCascade: terminating or withdrawing a parent, or jumping away from its node, terminates the
// running children and their children, each in its own history; a child's initiator may not withdraw it (nor
// terminate it) while its parent runs.
func TestSubprocessCascade(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier", "bob")
		h.publish("payment", paymentDef)
		h.publish("middle", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"call","type":"subprocess","template":"payment"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"call"},{"from":"call","to":"end"}]}`)
		h.publish("top", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"call","type":"subprocess","template":"middle"},
	{"id":"after","type":"approval","approvers":{"users":["bob"]}},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"call"},{"from":"call","to":"after"},{"from":"after","to":"end"}]}`)

		for _, how := range []string{"terminate", "withdraw", "jump"} {
			t.Run(how, func(t *testing.T) {
				h := h.sub(t)
				id := h.start("alice", "top", `{}`)
				mid := h.children(id)[0]
				leaf := h.children(mid.ID)[0]
				_, err := h.eng.Withdraw(h.ctx, as("alice"), mid.ID, "")
				wantErr(t, err, model.ECONFLICT, "parent_running")
				_, err = h.eng.Terminate(h.ctx, as("alice"), leaf.ID, "")
				wantErr(t, err, model.ECONFLICT, "parent_running")
				switch how {
				case "terminate":
					_, err = h.eng.Terminate(h.ctx, admin, id, "enough")
				case "withdraw":
					_, err = h.eng.Withdraw(h.ctx, as("alice"), id, "")
				case "jump":
					_, err = h.eng.Jump(h.ctx, admin, id, "after", "skip the payment")
				}
				if err != nil {
					t.Fatal(err)
				}
				h.drain()
				for _, c := range []string{mid.ID, leaf.ID} {
					h.wantStatus(c, model.StatusTerminated)
					if h.count(c, "instance.terminated", "") != 1 {
						t.Errorf("%s: history %v", c, h.actions(c))
					}
				}
				if how == "jump" {
					h.wantNodes(id, map[string]model.NodeState{"call": model.NodeCancelled, "after": model.NodeActive})
					h.wantStatus(id, model.StatusRunning) // a cancelled child raises no subprocess_failed
				}
				inst, _ := h.get(id)
				if got := inst.State.Children[0].Status; got != model.StatusTerminated {
					t.Errorf("the parent records its child %s", got)
				}
			})
		}
	})
}

// TestSubprocessDepthLimit: a template calling itself through the store (publish checks are the checker's, not
// the test harness's) stops at depth 8 with subprocess_depth.
func TestSubprocessDepthLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice")
		h.publish("deep", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"call","type":"subprocess","template":"deep"},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"call"},{"from":"call","to":"end"}]}`)
		id := h.start("alice", "deep", `{}`)
		chain := []string{id}
		for {
			inst, _ := h.get(chain[len(chain)-1])
			if len(inst.State.Children) == 0 {
				break
			}
			chain = append(chain, inst.State.Children[0].ID)
		}
		if len(chain) != model.MaxSubprocessDepth+1 {
			t.Fatalf("chain of %d instances, want %d", len(chain), model.MaxSubprocessDepth+1)
		}
		last, _ := h.get(chain[len(chain)-1])
		if last.Status != model.StatusFailed || last.State.Error.Code != model.NodeErrSubprocessDepth || last.State.Parent.Depth != model.MaxSubprocessDepth {
			t.Fatalf("deepest: %s %+v", last.Status, last.State.Error)
		}
		h.drain() // each failure climbs: every level fails with subprocess_failed
		for _, c := range chain[:len(chain)-1] {
			h.wantStatus(c, model.StatusFailed)
		}
	})
}

const itemDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"pay","type":"approval","approvers":{"users":["cashier"]}},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"pay"},{"from":"pay","to":"end"}]}`

// lines is a context with n line items {"n": i}.
func lines(n int) string {
	var b strings.Builder
	b.WriteString(`{"lines":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d}`, i)
	}
	b.WriteString(`],"who":"alice"}`)
	return b.String()
}

// decideChildren decides the pay task of the children with these indexes.
func (h *harness) decideChildren(id string, approve bool, idx ...int) {
	h.t.Helper()
	kids := h.children(id)
	for _, i := range idx {
		h.decide(kids[i].ID, "pay", "cashier", approve)
	}
}

// TestSubprocessForEach: one child per element with item and index (and the input mapping) in its context; the
// outputs come back under <node>.items in element order; completion {"min":N} continues after N and terminates
// the rest without subprocess_failed; a failure fails the node only once the completion cannot be met; more
// than 1000 elements is too_many_children; an empty array passes with no children.
func TestSubprocessForEach(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier")
		h.publish("payment", itemDef)
		h.publish("all", subDef(`,"for_each":"lines","input":{"who":"who"},"output":{"n":"item.n","i":"index"}`))
		h.publish("two", subDef(`,"for_each":"lines","completion":{"min":2},"output":{"n":"item.n"}`))

		id := h.start("alice", "all", lines(3))
		kids := h.children(id)
		if len(kids) != 3 {
			t.Fatalf("children = %d, want 3", len(kids))
		}
		for i, k := range kids {
			if got := h.contextValue(k.ID, "item.n").Int(); got != int64(i) {
				t.Errorf("child %d: item.n = %d", i, got)
			}
			if got := h.contextValue(k.ID, "index").Int(); got != int64(i) {
				t.Errorf("child %d: index = %d", i, got)
			}
			if got := h.contextValue(k.ID, "who").Str; got != "alice" {
				t.Errorf("child %d: who = %q", i, got)
			}
		}
		h.decideChildren(id, true, 2, 0) // out of order
		h.drain()
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting})
		h.decideChildren(id, true, 1)
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		if got := h.contextValue(id, "call.items").Raw; got != `[{"i":0,"n":0},{"i":1,"n":1},{"i":2,"n":2}]` {
			t.Fatalf("call.items = %s", got)
		}

		// min 2 of 3: the third is terminated, and its end raises nothing
		id = h.start("alice", "two", lines(3))
		h.decideChildren(id, true, 1)
		h.decideChildren(id, false, 0) // one failure: 2 may still complete
		h.drain()
		h.wantNodes(id, map[string]model.NodeState{"call": model.NodeWaiting})
		h.decideChildren(id, true, 2)
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		h.wantStatus(h.children(id)[0].ID, model.StatusRejected)
		if got := h.contextValue(id, "call.items").Raw; got != `[null,{"n":1},{"n":2}]` {
			t.Fatalf("call.items = %s", got)
		}
		id = h.start("alice", "two", lines(3))
		h.decideChildren(id, true, 0, 1)
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		third := h.children(id)[2]
		h.wantStatus(third.ID, model.StatusTerminated)
		if h.count(id, "node.error", "call") != 0 {
			t.Fatalf("a child terminated by the node raised an error: %v", h.actions(id))
		}

		// min 2 of 3, two rejected: the completion cannot be met → subprocess_failed, the last one terminated
		id = h.start("alice", "two", lines(3))
		h.decideChildren(id, false, 0, 2)
		h.drain()
		h.wantStatus(id, model.StatusFailed)
		h.wantStatus(h.children(id)[1].ID, model.StatusTerminated)
		if n := h.count(id, "node.error", "call"); n != 1 {
			t.Fatalf("node.error %d times, want 1", n)
		}

		// all: the first rejection fails the node and terminates the others
		id = h.start("alice", "all", lines(3))
		h.decideChildren(id, false, 1)
		h.drain()
		h.wantStatus(id, model.StatusFailed)
		h.wantStatus(h.children(id)[0].ID, model.StatusTerminated)
		h.wantStatus(h.children(id)[2].ID, model.StatusTerminated)

		id = h.start("alice", "all", lines(model.MaxChildren+1))
		inst, _ := h.get(id)
		if inst.Status != model.StatusFailed || inst.State.Error.Code != model.NodeErrTooManyChildren || len(inst.State.Children) != 0 {
			t.Fatalf("1001 elements: %s %+v, %d children", inst.Status, inst.State.Error, len(inst.State.Children))
		}
		id = h.start("alice", "all", `{"lines":[]}`)
		h.wantStatus(id, model.StatusCompleted)
		if got := h.contextValue(id, "call.items").Raw; got != `[]` {
			t.Fatalf("no elements: call.items = %s", got)
		}
	})
}

// TestSubprocessForEachConcurrent: 200 children completing at once, with two dispatchers draining meanwhile: the
// parent resumes once and the outputs are in element order.
func TestSubprocessForEachConcurrent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier")
		h.publish("payment", itemDef)
		h.publish("many", subDef(`,"for_each":"lines","output":{"n":"item.n"}`))
		const n = 200
		id := h.start("alice", "many", lines(n))
		kids := h.children(id)
		if len(kids) != n {
			t.Fatalf("children = %d", len(kids))
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, k := range kids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tk := h.tasksOf(k.ID, "pay")[0]
				errs <- h.approve("cashier", tk.ID)
			}()
		}
		stop := make(chan struct{})
		var drains sync.WaitGroup
		for range 2 {
			drains.Add(1)
			go func() {
				defer drains.Done()
				d := h.dispatcher()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := d.DispatchOnce(h.ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		drains.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		if c := h.count(id, "node.completed", "call"); c != 1 {
			t.Fatalf("the node completed %d times", c)
		}
		if c := h.count(id, "subprocess.child_ended", "call"); c != n {
			t.Fatalf("%d child ends recorded, want %d", c, n)
		}
		items := h.contextValue(id, "call.items").Array()
		if len(items) != n {
			t.Fatalf("%d items", len(items))
		}
		for i, it := range items {
			if it.Get("n").Int() != int64(i) {
				t.Fatalf("items[%d] = %s", i, it.Raw)
			}
		}
	})
}

// TestSubprocessChildEndsWhileParentTerminated: a child completing while its parent is terminated (dispatchers
// draining meanwhile) has exactly one outcome: the parent completed (and the terminate answers 409) or the
// parent terminated (and the child's end moved nothing).
func TestSubprocessChildEndsWhileParentTerminated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "cashier")
		h.publish("payment", itemDef)
		h.publish("claim", subDef(``))
		outcomes := map[model.InstanceStatus]int{}
		for range 8 {
			id := h.start("alice", "claim", `{}`)
			kid := h.children(id)[0]
			tk := h.tasksOf(kid.ID, "pay")[0]
			var wg sync.WaitGroup
			var termErr, approveErr error
			wg.Add(3)
			go func() { defer wg.Done(); approveErr = h.approve("cashier", tk.ID) }()
			go func() { defer wg.Done(); _, termErr = h.eng.Terminate(h.ctx, admin, id, "race") }()
			go func() {
				defer wg.Done()
				d := h.dispatcher()
				for range 50 {
					if _, err := d.DispatchOnce(h.ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			wg.Wait()
			h.drain()
			inst, _ := h.get(id)
			switch inst.Status {
			case model.StatusCompleted:
				wantErr(t, termErr, model.ECONFLICT, "instance_ended")
				h.wantStatus(kid.ID, model.StatusCompleted)
			case model.StatusTerminated:
				if termErr != nil {
					t.Fatal(termErr)
				}
				if h.count(id, "node.completed", "call") != 0 || h.count(id, "node.error", "call") != 0 {
					t.Fatalf("a terminated parent moved on: %v", h.actions(id))
				}
				kidNow, _ := h.get(kid.ID)
				if approveErr == nil && kidNow.Status != model.StatusCompleted {
					t.Fatalf("approved child is %s", kidNow.Status)
				}
				if approveErr != nil && kidNow.Status != model.StatusTerminated {
					t.Fatalf("child %s after a failed approval (%v)", kidNow.Status, approveErr)
				}
				if got := inst.State.Children[0].Status; got != kidNow.Status {
					t.Fatalf("parent records %s, child is %s", got, kidNow.Status)
				}
			default:
				t.Fatalf("parent %s", inst.Status)
			}
			outcomes[inst.Status]++
		}
		t.Logf("outcomes: %v", outcomes)
	})
}

// TestReadyMadeExpenseLines runs the ready-made expense-lines template (published after payment, in
// templates.Ordered's order): the manager approves, finance pays each line in its own payment child with a bank
// reference, and the references come back in line order; a refused payment goes to finance's review instead.
func TestReadyMadeExpenseLines(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("lea")
		h.user(identity.CreateUserRequest{Username: "emp", Manager: "lea"})
		h.user(identity.CreateUserRequest{Username: "fin", Roles: []string{"finance"}})
		list, err := templates.Ordered()
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, tpl := range list {
			order = append(order, tpl.Key)
			if tpl.Key == "payment" || tpl.Key == "expense-lines" {
				h.publish(tpl.Key, string(tpl.Definition))
			}
		}
		if slices.Index(order, "payment") > slices.Index(order, "expense-lines") {
			t.Fatalf("templates.Ordered puts the caller first: %v", order)
		}
		claim := `{"title":"Trip","lines":[{"description":"Taxi","payee":"Didi","amount":80},{"description":"Hotel","payee":"Hilton","amount":900}]}`
		pay := func(kid string, ref string) {
			t.Helper()
			tk := h.task(kid, "pay", "fin")
			if _, err := h.eng.Approve(h.ctx, as("fin"), tk.ID, "paid", json.RawMessage(`{"payment":{"reference":"`+ref+`"}}`)); err != nil {
				t.Fatal(err)
			}
		}
		id := h.start("emp", "expense-lines", claim)
		h.decide(id, "manager", "lea", true)
		kids := h.children(id)
		if len(kids) != 2 || h.contextValue(kids[1].ID, "item.payee").Str != "Hilton" || h.contextValue(kids[0].ID, "claim").Str != "Trip" {
			t.Fatalf("children: %d", len(kids))
		}
		// Each payment is titled by its template's pattern, from its own data, in both languages.
		if kids[1].Title != "Hilton · ¥900 · Trip" || kids[1].TitleI18n["zh-CN"] != "Hilton · 900 元 · Trip" {
			t.Fatalf("child title %q %v", kids[1].Title, kids[1].TitleI18n)
		}
		pay(kids[1].ID, "B-2")
		pay(kids[0].ID, "B-1")
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		if got := h.contextValue(id, "pay-lines.items").Raw; got != `[{"amount":80,"reference":"B-1"},{"amount":900,"reference":"B-2"}]` {
			t.Fatalf("pay-lines.items = %s", got)
		}

		id = h.start("emp", "expense-lines", claim)
		h.decide(id, "manager", "lea", true)
		h.decide(h.children(id)[0].ID, "pay", "fin", false)
		h.drain()
		h.wantNodes(id, map[string]model.NodeState{"pay-lines": model.NodeFailed, "review": model.NodeActive})
		h.wantStatus(h.children(id)[1].ID, model.StatusTerminated)
	})
}
