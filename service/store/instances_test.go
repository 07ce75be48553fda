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
		w.NewTasks = []*model.Task{{ID: "inst-1-t1", TenantID: model.DefaultTenant, InstanceID: "inst-1", NodeID: "n", NodeName: hostile,
			Assignee: "bob", Status: model.TaskPending, Kind: "sign", Title: hostile, Template: "t", Initiator: "alice", CreatedAt: at}}
		w.History = []model.HistoryEvent{{At: at, Actor: "alice", Action: "instance.started", Comment: hostile, Data: json.RawMessage(`{"q":"?"}`)}}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		// A step with ~3 MB of history: sent as several round trips on MySQL.
		big := strings.Repeat("x", 100_000)
		err := s.UpdateInstance(ctx, model.DefaultTenant, "inst-1", func(w *model.Work) error {
			if len(w.Tasks) != 1 || w.Tasks[0].NodeName != hostile || !w.Tasks[0].CreatedAt.Equal(at) {
				t.Fatalf("open tasks = %+v", w.Tasks)
			}
			if w.Instance.Title != hostile || string(w.Instance.Context) != `{"n":1}` || !w.Instance.CreatedAt.Equal(at) || w.Instance.EndedAt != nil {
				t.Fatalf("instance = %+v", w.Instance)
			}
			task := w.Tasks[0]
			decided := at.Add(time.Minute)
			task.Status, task.Comment, task.DecidedAt, task.DecidedBy = model.TaskApproved, hostile, &decided, "bob"
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
		if inst.Status != model.StatusCompleted || inst.EndedAt == nil || inst.Title != hostile {
			t.Fatalf("instance after the step = %+v", inst)
		}
		if len(tasks) != 1 || tasks[0].Status != model.TaskApproved || tasks[0].Comment != hostile || tasks[0].DecidedAt == nil {
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
		db, err := s.DB().DB()
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		at := time.Now().UTC()
		w := newWork("inst-3", model.DefaultTenant, at)
		w.NewTasks = []*model.Task{{ID: "inst-3-t1", TenantID: model.DefaultTenant, InstanceID: "inst-3", NodeID: "n", Assignee: "bob",
			Status: model.TaskPending, CreatedAt: at}}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		err = s.UpdateInstance(ctx, model.DefaultTenant, "inst-3", func(w *model.Work) error {
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
