package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
)

// EngineStoreContract checks st against what the engine relies on of its store (engine.Store): instances created,
// read and changed one at a time and in groups, with each step's outcome its own and a failed step leaving
// nothing behind; plugin versions looked up; plugin runs claimed once under a lease, renewed and finished; message
// ids claimed once, answered or released, and taken over when stale; message start triggers listed. It runs
// on SQLite and MySQL (store_test) and on every test double of the engine's store (engine_test), so a fake cannot
// drift from the real thing. seed is the database under st, for fixtures the engine never writes itself
// (plugins, runs queued outside an instance, the message start index); st may be seed itself.
func EngineStoreContract(t *testing.T, st engine.Store, seed *store.Store) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tenant := model.DefaultTenant
	newWork := func(id string) *model.Work {
		return &model.Work{Instance: &model.Instance{ID: id, TenantID: tenant, Template: "t", Version: 1, Title: "before", Status: model.StatusRunning,
			Initiator: "ann", Context: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at},
			NewTasks: []*model.Task{{ID: id + ".t1", TenantID: tenant, InstanceID: id, NodeID: "n", Assignee: "bob", Status: model.TaskPending, CreatedAt: at}}}
	}
	title := func(id string) string {
		t.Helper()
		inst, _, err := st.GetInstance(ctx, tenant, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return inst.Title
	}

	t.Run("create and read an instance", func(t *testing.T) {
		if err := st.CreateInstance(ctx, newWork("c-1")); err != nil {
			t.Fatal(err)
		}
		inst, tasks, err := st.GetInstance(ctx, tenant, "c-1")
		if err != nil || inst.Title != "before" || len(tasks) != 1 || tasks[0].Assignee != "bob" {
			t.Fatalf("GetInstance = %+v %v %v", inst, tasks, err)
		}
		if _, _, err := st.GetInstance(ctx, tenant, "c-missing"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("GetInstance of a missing id = %v, want ENOTFOUND", err)
		}
	})

	t.Run("UpdateInstance writes what fn changed, and nothing when fn fails", func(t *testing.T) {
		if err := st.CreateInstance(ctx, newWork("u-1")); err != nil {
			t.Fatal(err)
		}
		refused := errors.New("refused")
		err := st.UpdateInstance(ctx, tenant, "u-1", func(w *model.Work) error {
			if len(w.Tasks) != 1 {
				return fmt.Errorf("fn sees %d open tasks, want 1", len(w.Tasks))
			}
			w.Instance.Title = "half"
			return refused
		})
		if !errors.Is(err, refused) || title("u-1") != "before" {
			t.Fatalf("failed step: %v, title %q", err, title("u-1"))
		}
		if err := st.UpdateInstance(ctx, tenant, "u-1", func(w *model.Work) error { w.Instance.Title = "after"; return nil }); err != nil {
			t.Fatal(err)
		}
		if title("u-1") != "after" {
			t.Fatalf("title %q after a step that set it", title("u-1"))
		}
		called := false
		err = st.UpdateInstance(ctx, tenant, "u-missing", func(*model.Work) error { called = true; return nil })
		if !model.IsKind(err, model.ENOTFOUND) || !errors.Is(err, model.ErrNoInstance) || called {
			t.Fatalf("UpdateInstance of a missing id = %v (fn called %v), want ENOTFOUND wrapping model.ErrNoInstance", err, called)
		}
	})

	t.Run("UpdateInstances gives each step its own outcome", func(t *testing.T) {
		for _, id := range []string{"g-1", "g-2"} {
			if err := st.CreateInstance(ctx, newWork(id)); err != nil {
				t.Fatal(err)
			}
		}
		refused := errors.New("refused")
		res, err := st.UpdateInstances(ctx, tenant, []string{"g-1", "g-2", "g-missing"}, func(w *model.Work) error {
			w.Instance.Title = "grouped"
			if w.Instance.ID == "g-2" {
				return refused
			}
			return nil
		}, newWork("g-new"))
		if err != nil {
			t.Fatal(err)
		}
		if res["g-1"] != nil || !errors.Is(res["g-2"], refused) || !model.IsKind(res["g-missing"], model.ENOTFOUND) ||
			!errors.Is(res["g-missing"], model.ErrNoInstance) {
			t.Fatalf("outcomes %v", res)
		}
		if title("g-1") != "grouped" || title("g-2") != "before" || title("g-new") != "before" {
			t.Fatalf("titles g-1 %q g-2 %q g-new %q: want the written step, the refused one untouched, the create stored",
				title("g-1"), title("g-2"), title("g-new"))
		}
	})

	t.Run("plugins and their runs", func(t *testing.T) {
		file := []byte("print('{}')\n")
		sum := sha256.Sum256(file)
		for v := 1; v <= 2; v++ {
			if err := seed.CreatePlugin(ctx, &model.Plugin{TenantID: tenant, Name: "p", Version: v, Runtime: "python", SHA256: hex.EncodeToString(sum[:]),
				Size: int64(len(file))}, bytes.NewReader(file)); err != nil {
				t.Fatal(err)
			}
		}
		if p, err := st.GetPlugin(ctx, tenant, "p", 0); err != nil || p.Version != 2 {
			t.Fatalf("latest plugin = %+v %v", p, err)
		}
		if p, err := st.GetPlugin(ctx, tenant, "p", 1); err != nil || p.Version != 1 {
			t.Fatalf("plugin version 1 = %+v %v", p, err)
		}
		if _, err := st.GetPlugin(ctx, tenant, "nope", 0); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("missing plugin = %v, want ENOTFOUND", err)
		}
		if err := seed.CreatePluginRun(ctx, &model.PluginRun{ID: "run-1", TenantID: tenant, Plugin: "p", Version: 2, Phase: "event", Input: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC() // after the run was created: a claim is taken as of its now
		runs, err := st.ClaimRuns(ctx, "w1", 5, now, now.Add(time.Minute))
		if err != nil || len(runs) != 1 || runs[0].ID != "run-1" || runs[0].Status != model.RunRunning || runs[0].LeaseOwner != "w1" {
			t.Fatalf("claim = %+v %v", runs, err)
		}
		if again, err := st.ClaimRuns(ctx, "w2", 5, now, now.Add(time.Minute)); err != nil || len(again) != 0 {
			t.Fatalf("a leased run was claimed again: %+v %v", again, err)
		}
		if lost, err := st.ExtendRuns(ctx, "w1", []string{"run-1"}, now.Add(time.Hour)); err != nil || len(lost) != 0 {
			t.Fatalf("extend the held run: lost %v, %v", lost, err)
		}
		// Renewed again to the same time (MySQL then counts no changed row): still held.
		if lost, err := st.ExtendRuns(ctx, "w1", []string{"run-1"}, now.Add(time.Hour)); err != nil || len(lost) != 0 {
			t.Fatalf("extend the held run to the same time: lost %v, %v", lost, err)
		}
		// Runs a worker does not hold come back with their status: another worker's lease, gone.
		if lost, err := st.ExtendRuns(ctx, "w2", []string{"run-1", "run-gone"}, now.Add(time.Hour)); err != nil || len(lost) != 2 ||
			lost["run-1"] != model.RunRunning || lost["run-gone"] != "" {
			t.Fatalf("extend runs w2 does not hold: lost %v, %v", lost, err)
		}
		if again, err := st.ClaimRuns(ctx, "w2", 5, now.Add(30*time.Minute), now.Add(time.Hour)); err != nil || len(again) != 0 {
			t.Fatalf("a renewed lease was claimed: %+v %v", again, err)
		}
		r, err := st.GetRun(ctx, tenant, "run-1")
		if err != nil || r.Status != model.RunRunning {
			t.Fatalf("run = %+v %v", r, err)
		}
		ended := now.Add(time.Second)
		r.Status, r.EndedAt, r.Error = model.RunFailed, &ended, "boom"
		if err := st.FinishRunOnly(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r, err := st.GetRun(ctx, tenant, "run-1"); err != nil || r.Status != model.RunFailed || r.Error != "boom" {
			t.Fatalf("finished run = %+v %v", r, err)
		}
		// A finished run is no longer held: its worker learns its status from the heartbeat.
		if lost, err := st.ExtendRuns(ctx, "w1", []string{"run-1"}, now.Add(2*time.Hour)); err != nil || len(lost) != 1 || lost["run-1"] != model.RunFailed {
			t.Fatalf("extend a finished run: lost %v, %v", lost, err)
		}
		if _, err := st.GetRun(ctx, tenant, "run-missing"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("missing run = %v, want ENOTFOUND", err)
		}
	})

	t.Run("message ids are claimed once, answered, released and taken over when stale", func(t *testing.T) {
		now := at
		stale := now.Add(-time.Minute)
		if ans, claimed, err := st.ClaimMessageID(ctx, tenant, "m-1", now, stale); err != nil || !claimed || ans != nil {
			t.Fatalf("first claim = %q %v %v, want claimed", ans, claimed, err)
		}
		if ans, claimed, err := st.ClaimMessageID(ctx, tenant, "m-1", now, stale); err != nil || claimed || ans != nil {
			t.Fatalf("claim while the first runs = %q %v %v, want neither claim nor answer", ans, claimed, err)
		}
		if err := st.FinishMessageID(ctx, tenant, "m-1", []byte(`{"resumed":1}`)); err != nil {
			t.Fatal(err)
		}
		if ans, claimed, err := st.ClaimMessageID(ctx, tenant, "m-1", now.Add(time.Hour), now.Add(30*time.Minute)); err != nil || claimed || string(ans) != `{"resumed":1}` {
			t.Fatalf("claim after the answer = %q %v %v, want the stored answer (even when the claim is old)", ans, claimed, err)
		}
		if _, claimed, err := st.ClaimMessageID(ctx, "other-tenant", "m-1", now, stale); err != nil || !claimed {
			t.Fatalf("the same id in another tenant = %v %v, want claimed", claimed, err)
		}

		if _, claimed, err := st.ClaimMessageID(ctx, tenant, "m-2", now, stale); err != nil || !claimed {
			t.Fatalf("claim m-2 = %v %v", claimed, err)
		}
		if err := st.AbandonMessageID(ctx, tenant, "m-2"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, err := st.ClaimMessageID(ctx, tenant, "m-2", now, stale); err != nil || !claimed {
			t.Fatalf("claim after a release = %v %v, want claimed", claimed, err)
		}

		// A claim without an answer older than staleBefore (its request died) is taken over, once.
		later := now.Add(2 * time.Minute)
		if _, claimed, err := st.ClaimMessageID(ctx, tenant, "m-2", later, later.Add(-time.Minute)); err != nil || !claimed {
			t.Fatalf("claim of a stale id = %v %v, want taken over", claimed, err)
		}
		if _, claimed, err := st.ClaimMessageID(ctx, tenant, "m-2", later, later.Add(-time.Minute)); err != nil || claimed {
			t.Fatalf("second take-over = %v %v, want refused (the first took it)", claimed, err)
		}
	})

	t.Run("message start triggers", func(t *testing.T) {
		for _, tr := range []struct {
			key, message string
			version      int
		}{{"on-b", "paid", 1}, {"on-a", "paid", 3}, {"other", "shipped", 1}, {"on-c", "paid", 1}} {
			if err := seed.SetMessageTrigger(ctx, tenant, tr.key, tr.version, tr.message); err != nil {
				t.Fatal(err)
			}
		}
		if err := seed.SetMessageTrigger(ctx, tenant, "on-c", 2, ""); err != nil { // a newer version starts otherwise
			t.Fatal(err)
		}
		got, err := st.MessageTriggers(ctx, tenant, "paid")
		if err != nil {
			t.Fatal(err)
		}
		want := []model.MessageTrigger{{Key: "on-a", Version: 3}, {Key: "on-b", Version: 1}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("MessageTriggers(paid) = %+v, want %+v (by key)", got, want)
		}
		if got, err := st.MessageTriggers(ctx, "other-tenant", "paid"); err != nil || len(got) != 0 {
			t.Fatalf("another tenant's triggers = %+v %v, want none", got, err)
		}
	})
}
