package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func newWork(id, tenant string, at time.Time) *model.Work {
	return &model.Work{Instance: &model.Instance{ID: id, TenantID: tenant, Template: "t", Version: 1, Title: "title", Status: model.StatusRunning,
		Initiator: "alice", Context: json.RawMessage(`{"n":1}`), CreatedAt: at, UpdatedAt: at}}
}

// TestStepWritesRoundTrip writes steps through the raw SQL path with values that would break naive SQL (quotes,
// semicolons, placeholders, backslashes, non-ASCII) and a step larger than one round trip's bound, and reads every
// row back.
func TestStepWritesRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 23, 1, 2, 3, 456789000, time.UTC)
		hostile := `O'Brien"; DROP TABLE tasks; -- ? \' \\ 李`
		w := newWork("inst-1", model.DefaultTenant, at)
		w.Instance.Title = hostile
		// Long values with the same characters: a context and a comment of several hundred bytes.
		longCtx, err := json.Marshal(map[string]string{"note": strings.Repeat(hostile, 10)})
		if err != nil {
			t.Fatal(err)
		}
		w.Instance.Context = longCtx
		w.NewTasks = []*model.Task{{ID: "inst-1-t1", TenantID: model.DefaultTenant, InstanceID: "inst-1", NodeID: "n", NodeName: hostile,
			Assignee: "bob", Status: model.TaskPending, Kind: "sign", Title: hostile, Template: "t", Initiator: "alice", CreatedAt: at}}
		w.History = []model.HistoryEvent{{At: at, Actor: "alice", Action: "instance.started", Comment: hostile, Data: json.RawMessage(`{"q":"?"}`)}}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		// A step with ~3 MB of history: sent as several round trips on MySQL.
		big := strings.Repeat("x", 100_000)
		err = s.UpdateInstance(ctx, model.DefaultTenant, "inst-1", func(w *model.Work) error {
			if len(w.Tasks) != 1 || w.Tasks[0].NodeName != hostile || !w.Tasks[0].CreatedAt.Equal(at) {
				t.Fatalf("open tasks = %+v", w.Tasks)
			}
			if w.Instance.Title != hostile || string(w.Instance.Context) != string(longCtx) || !w.Instance.CreatedAt.Equal(at) || w.Instance.EndedAt != nil {
				t.Fatalf("instance = %+v", w.Instance)
			}
			task := w.Tasks[0]
			decided := at.Add(time.Minute)
			task.Status, task.Comment, task.DecidedAt, task.DecidedBy = model.TaskApproved, strings.Repeat(hostile, 5), &decided, "bob"
			w.ChangedTasks[task.ID] = task
			for i := range 30 {
				w.History = append(w.History, model.HistoryEvent{At: decided, Actor: "bob", Action: "note", Comment: fmt.Sprint(i),
					Data: json.RawMessage(`{"pad":"` + big + `"}`)})
			}
			w.Instance.Status, w.Instance.EndedAt = model.StatusCompleted, &decided
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		inst, tasks, err := s.GetInstance(ctx, model.DefaultTenant, "inst-1")
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != model.StatusCompleted || inst.EndedAt == nil || inst.Title != hostile || string(inst.Context) != string(longCtx) {
			t.Fatalf("instance after the step = %+v", inst)
		}
		if len(tasks) != 1 || tasks[0].Status != model.TaskApproved || tasks[0].Comment != strings.Repeat(hostile, 5) || tasks[0].DecidedAt == nil {
			t.Fatalf("tasks after the step = %+v", tasks)
		}
		h, err := s.History(ctx, model.DefaultTenant, "inst-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 31 || h[0].Comment != hostile || string(h[0].Data) != `{"q":"?"}` || h[30].Comment != "29" || len(h[30].Data) != len(big)+10 {
			t.Fatalf("history: %d rows, first %q", len(h), h[0].Comment)
		}
	})
}

// TestUpdateInstanceOtherTenant: an instance of another tenant is not found, and nothing of it is touched.
func TestUpdateInstanceOtherTenant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Now().UTC()
		w := newWork("inst-2", "other", at)
		w.NewTasks = []*model.Task{{ID: "inst-2-t1", TenantID: "other", InstanceID: "inst-2", NodeID: "n", Assignee: "bob", Status: model.TaskPending, CreatedAt: at}}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		called := false
		err := s.UpdateInstance(ctx, model.DefaultTenant, "inst-2", func(*model.Work) error { called = true; return nil })
		if !model.IsKind(err, model.ENOTFOUND) || called {
			t.Fatalf("UpdateInstance across tenants = %v (fn called %v), want ENOTFOUND", err, called)
		}
		if err := s.UpdateInstance(ctx, "other", "inst-2", func(w *model.Work) error {
			if len(w.Tasks) != 1 {
				t.Fatalf("own tenant sees %d open tasks", len(w.Tasks))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFailedStepLeavesNothing: a step whose writes fail half-way (a duplicate task id after the instance row was
// already updated in the same round trip) and a step whose function fails are rolled back entirely, and the
// connection goes back to the pool with no transaction open: with a pool of one connection, the next step would
// otherwise commit the failed one's writes (START TRANSACTION commits an open transaction).
func TestFailedStepLeavesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		s.OneConnectionForTest()
		at := time.Now().UTC()
		w := newWork("inst-3", model.DefaultTenant, at)
		w.NewTasks = []*model.Task{{ID: "inst-3-t1", TenantID: model.DefaultTenant, InstanceID: "inst-3", NodeID: "n", Assignee: "bob",
			Status: model.TaskPending, CreatedAt: at}}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		err := s.UpdateInstance(ctx, model.DefaultTenant, "inst-3", func(w *model.Work) error {
			w.Instance.Title = "half-written"
			w.History = append(w.History, model.HistoryEvent{At: at, Actor: "x", Action: "half"})
			w.NewTasks = append(w.NewTasks, &model.Task{ID: "inst-3-t1", TenantID: model.DefaultTenant, InstanceID: "inst-3", NodeID: "n",
				Assignee: "eve", Status: model.TaskPending, CreatedAt: at})
			return nil
		})
		if err == nil {
			t.Fatal("a step inserting an existing task id succeeded")
		}
		err = s.UpdateInstance(ctx, model.DefaultTenant, "inst-3", func(w *model.Work) error {
			w.Instance.Title = "refused"
			return model.Errorf(model.ECONFLICT, "no")
		})
		if !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("step whose function fails: %v", err)
		}
		// The next steps run on the same (only) connection.
		if err := s.CreateInstance(ctx, newWork("inst-4", model.DefaultTenant, at)); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateInstance(ctx, model.DefaultTenant, "inst-3", func(w *model.Work) error {
			if w.Instance.Title != "title" || len(w.Tasks) != 1 || w.Tasks[0].Assignee != "bob" {
				t.Fatalf("the failed steps left traces: %+v, tasks %+v", w.Instance, w.Tasks)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		h, err := s.History(ctx, model.DefaultTenant, "inst-3")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 0 {
			t.Fatalf("history of the failed step was written: %+v", h)
		}
		if _, _, err := s.GetInstance(ctx, model.DefaultTenant, "inst-4"); err != nil {
			t.Fatalf("the step after the failures: %v", err)
		}
	})
}

// TestClosingKeepsWhatWasClosed: a step closes bookmarks and cancels or fires timers by node visit or id (the
// statements name nothing else, see writeWorks); a bookmark already closed keeps its closed_at, a timer already
// fired or cancelled keeps its status and fired_at, and only the named visits' rows change.
func TestClosingKeepsWhatWasClosed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
		tn := model.DefaultTenant
		now := at
		s.SetNow(func() time.Time { return now })
		w := newWork("cl-1", tn, at)
		bm := func(id, ni string) *model.Bookmark {
			return &model.Bookmark{ID: id, TenantID: tn, InstanceID: "cl-1", NodeID: "n", NodeInstanceID: ni, Kind: model.BookmarkDelay,
				Hash: "h-" + id, Payload: json.RawMessage(`{}`), CreatedAt: at}
		}
		tm := func(id, ni string) *model.Timer {
			return &model.Timer{ID: id, TenantID: tn, InstanceID: "cl-1", NodeID: "n", NodeInstanceID: ni, Kind: model.TimerDelay,
				DueAt: at.Add(time.Hour), Status: model.TimerPending, Payload: json.RawMessage(`{}`), CreatedAt: at}
		}
		w.NewBookmarks = []*model.Bookmark{bm("b-a", "ni-a"), bm("b-b", "ni-b"), bm("b-c", "ni-c")}
		w.NewTimers = []*model.Timer{tm("t-a", "ni-a"), tm("t-b", "ni-b"), tm("t-c", "ni-c"), tm("t-d", "ni-d")}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		step := func(fn func(w *model.Work)) {
			t.Helper()
			if err := s.UpdateInstance(ctx, tn, "cl-1", func(w *model.Work) error { fn(w); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		// First: close a's bookmark, fire t-a, cancel b's timers.
		step(func(w *model.Work) {
			w.CloseBookmarks = []string{"ni-a"}
			w.FiredTimers = []string{"t-a"}
			w.CancelTimers = []string{"ni-b"}
		})
		first, err := s.GetBookmark(ctx, tn, "b-a")
		if err != nil || first.ClosedAt == nil {
			t.Fatalf("b-a after closing: %+v %v", first, err)
		}
		timers := func() map[string]*model.Timer {
			t.Helper()
			ts, err := s.GetTimers(ctx, []string{"t-a", "t-b", "t-c", "t-d"})
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]*model.Timer{}
			for _, x := range ts {
				m[x.ID] = x
			}
			return m
		}
		before := timers()
		if before["t-a"].Status != model.TimerFired || before["t-a"].FiredAt == nil || before["t-b"].Status != model.TimerCancelled ||
			before["t-c"].Status != model.TimerPending || before["t-d"].Status != model.TimerPending {
			t.Fatalf("after the first step: a %s, b %s, c %s, d %s", before["t-a"].Status, before["t-b"].Status, before["t-c"].Status, before["t-d"].Status)
		}
		// Again, later, over the same rows and new ones: what was closed stays as it was.
		now = at.Add(time.Minute)
		step(func(w *model.Work) {
			w.CloseBookmarks = []string{"ni-a", "ni-c"}
			w.FiredTimers = []string{"t-a", "t-b", "t-c"}
			w.CancelTimers = []string{"ni-a", "ni-d"}
		})
		again, err := s.GetBookmark(ctx, tn, "b-a")
		if err != nil || again.ClosedAt == nil || !again.ClosedAt.Equal(*first.ClosedAt) {
			t.Fatalf("b-a closed again: closed_at %v, want %v kept (%v)", again.ClosedAt, first.ClosedAt, err)
		}
		if b, _ := s.GetBookmark(ctx, tn, "b-b"); b.ClosedAt != nil {
			t.Fatalf("b-b was not named but is closed at %v", b.ClosedAt)
		}
		if c, _ := s.GetBookmark(ctx, tn, "b-c"); c.ClosedAt == nil {
			t.Fatal("b-c was named but is open")
		}
		after := timers()
		if after["t-a"].Status != model.TimerFired || !after["t-a"].FiredAt.Equal(*before["t-a"].FiredAt) {
			t.Fatalf("t-a fired again: %s at %v, want fired at %v kept", after["t-a"].Status, after["t-a"].FiredAt, before["t-a"].FiredAt)
		}
		if after["t-b"].Status != model.TimerCancelled || after["t-b"].FiredAt != nil {
			t.Fatalf("t-b (cancelled) fired: %s at %v", after["t-b"].Status, after["t-b"].FiredAt)
		}
		if after["t-c"].Status != model.TimerFired || after["t-c"].FiredAt == nil || !after["t-c"].FiredAt.After(*before["t-a"].FiredAt) {
			t.Fatalf("t-c: %s at %v, want fired now", after["t-c"].Status, after["t-c"].FiredAt)
		}
		if after["t-d"].Status != model.TimerCancelled {
			t.Fatalf("t-d: %s, want cancelled", after["t-d"].Status)
		}
	})
}
