package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// replicas opens n stores on one fresh MySQL database, as n Halley replicas would (the first one migrates);
// cache is each store's Config.StepCache.
func replicas(t *testing.T, cache int, n int) []*store.Store {
	t.Helper()
	url := storetest.URL(t, store.MySQL)
	out := make([]*store.Store, n)
	for i := range out {
		s, err := store.Open(context.Background(), store.Config{URL: url, DataDir: t.TempDir(), Logger: testkit.Quiet(), StepCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if plainBatches {
			s.SetBlocks(false)
		}
		if i == 0 {
			if _, err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		out[i] = s
	}
	return out
}

// plainBatches has replicas send their batches as plain multi-statements, as on MySQL, even on MariaDB
// (TestStepCachePlainBatches).
var plainBatches bool

// TestStepCachePlainBatches runs the step cache's tests of stale rows with batches sent as plain multi-statements,
// MySQL's way; on MariaDB the others run them as compound statements (sqlbatch.go, blockBegin), which the store
// chooses for MariaDB.
func TestStepCachePlainBatches(t *testing.T) {
	rs := replicas(t, 0, 1)
	var version string
	if err := rs[0].DB().Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
		t.Fatal(err)
	}
	if want := strings.Contains(version, "MariaDB"); rs[0].Blocks() != want {
		t.Fatalf("server %s: blocks %v, want %v", version, rs[0].Blocks(), want)
	}
	plainBatches = true
	defer func() { plainBatches = false }()
	for name, test := range map[string]func(*testing.T){
		"AcrossReplicas":         TestStepCacheAcrossReplicas,
		"RacingReplicas":         TestStepCacheRacingReplicas,
		"ChecksEveryRowOfAGroup": TestStepCacheChecksEveryRowOfAGroup,
		"StaleGroupWithStarts":   TestStepCacheStaleGroupWithStarts,
		"DeletedMeanwhile":       TestStepCacheDeletedMeanwhile,
	} {
		t.Run(name, test)
	}
}

// counted is a step that raises the context's counter n by one (and the rev, as every engine step does), after
// checking it saw want (when want >= 0).
func counted(want int) func(w *model.Work) error {
	return func(w *model.Work) error {
		var c struct{ N int }
		if err := json.Unmarshal(w.Instance.Context, &c); err != nil {
			return err
		}
		if want >= 0 && c.N != want {
			return fmt.Errorf("the step sees n = %d, want %d", c.N, want)
		}
		w.Instance.Context = json.RawMessage(fmt.Sprintf(`{"n":%d}`, c.N+1))
		w.Instance.Rev++
		return nil
	}
}

// createCached creates instances with these ids (n = 0) on s and steps them once together (n = 1, rev 1), which
// leaves their rows in s's step cache.
func createCached(t *testing.T, s *store.Store, at time.Time, ids ...string) {
	t.Helper()
	for _, id := range ids {
		w := newWork(id, model.DefaultTenant, at)
		w.Instance.Context = json.RawMessage(`{"n":0}`)
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateInstances(ctx, model.DefaultTenant, ids, counted(0)); err != nil {
		t.Fatal(err)
	}
}

// TestStepCacheGivesWhatTheLockReadGives: a step on cached rows gets the work a locked read gives — the instance
// with its state and every open task, times as stored — and a step whose fn fails on cached rows runs again on
// a locked read, which is how this test sees both.
func TestStepCacheGivesWhatTheLockReadGives(t *testing.T) {
	s := replicas(t, 0, 1)[0]
	at := time.Date(2026, 11, 29, 20, 1, 2, 123456789, time.UTC) // nanoseconds: the database keeps microseconds
	w := newWork("sc-1", model.DefaultTenant, at)
	w.Instance.State.Nodes = map[string]*model.NodeVisit{"a": {NodeID: "a", Name: "A", Type: "approval", State: "active", Visit: 1, Seq: 1, StartedAt: &at}}
	task := func(id string, st model.TaskStatus) *model.Task {
		return &model.Task{ID: "sc-1." + id, TenantID: model.DefaultTenant, InstanceID: "sc-1", NodeID: "a", NodeName: "A", Assignee: "bob-" + id, Status: st,
			Kind: "approval", Template: "t", Initiator: "alice", Data: json.RawMessage(`{"x":1}`), AfterSigners: []string{"c", "d"}, CreatedAt: at}
	}
	w.NewTasks = []*model.Task{task("t1", model.TaskPending), task("t2", model.TaskWaiting), task("t3", model.TaskPending)}
	w.Tasks = w.NewTasks
	if err := s.CreateInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	// A step that decides t1, creates t4 and ends a visit: the cache keeps t2, t3, t4 open.
	later := at.Add(1500 * time.Millisecond)
	if err := s.UpdateInstance(ctx, model.DefaultTenant, "sc-1", func(w *model.Work) error {
		w.Instance.Rev++
		w.Instance.UpdatedAt = later
		w.Instance.State.Nodes["a"].EndedAt = &later
		for _, tk := range w.Tasks {
			if tk.ID == "sc-1.t1" {
				tk.Status, tk.DecidedAt, tk.DecidedBy = model.TaskApproved, &later, "bob-t1"
				w.ChangedTasks[tk.ID] = tk
			}
		}
		t4 := task("t4", model.TaskPending)
		t4.CreatedAt = later
		w.NewTasks = append(w.NewTasks, t4)
		w.Tasks = append(w.Tasks, t4)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := s.StepCacheStats()
	var seen []*model.Work
	again := errors.New("again")
	err := s.UpdateInstance(ctx, model.DefaultTenant, "sc-1", func(w *model.Work) error {
		seen = append(seen, w)
		return again
	})
	if !errors.Is(err, again) {
		t.Fatalf("step = %v, want its own error", err)
	}
	after := s.StepCacheStats()
	if after.Hits != before.Hits+1 || after.Stale != before.Stale+1 || len(seen) != 2 {
		t.Fatalf("stats %+v → %+v, fn ran %d times: want one run on cached rows, then one on a locked read", before, after, len(seen))
	}
	cached, locked := seen[0], seen[1]
	if !reflect.DeepEqual(cached.Instance, locked.Instance) {
		t.Errorf("instance from the cache\n%+v\nfrom the lock read\n%+v", cached.Instance, locked.Instance)
	}
	if len(locked.Tasks) != 3 {
		t.Fatalf("the lock read gives %d open tasks, want 3", len(locked.Tasks))
	}
	if !reflect.DeepEqual(cached.Tasks, locked.Tasks) {
		for i := range locked.Tasks {
			t.Logf("cached %+v\nlocked %+v", cached.Tasks[i], locked.Tasks[i])
		}
		t.Errorf("open tasks from the cache differ from the lock read's")
	}
}

// TestStepCacheAcrossReplicas: two replicas on one database step the same instance in turn. Each replica's cached
// row is stale after the other's step; every step still sees the count the one before left.
func TestStepCacheAcrossReplicas(t *testing.T) {
	rs := replicas(t, 0, 2)
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	w := newWork("sc-2", model.DefaultTenant, at)
	w.Instance.Context = json.RawMessage(`{"n":0}`)
	if err := rs[0].CreateInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := rs[i%2].UpdateInstance(ctx, model.DefaultTenant, "sc-2", counted(i)); err != nil {
			t.Fatalf("step %d on replica %d: %v", i, i%2, err)
		}
	}
	// Each replica runs again on its own cached row: no stale read there.
	for i := 20; i < 24; i++ {
		if err := rs[1].UpdateInstance(ctx, model.DefaultTenant, "sc-2", counted(i)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	st0, st1 := rs[0].StepCacheStats(), rs[1].StepCacheStats()
	if st0.Stale == 0 || st1.Hits < 3 {
		t.Fatalf("replica stats %+v and %+v: want stale rows found on replica 0 and hits on replica 1", st0, st1)
	}
	inst, _, err := rs[0].GetInstance(ctx, model.DefaultTenant, "sc-2")
	var c struct{ N int }
	if err != nil || json.Unmarshal(inst.Context, &c) != nil || c.N != 24 {
		t.Fatalf("context %s, %v: want n = 24", inst.Context, err)
	}
}

// TestStepCacheRacingReplicas: eight goroutines on two replicas raise one instance's counter 25 times each; not
// one raise is lost, whichever replica's cache was stale when.
func TestStepCacheRacingReplicas(t *testing.T) {
	rs := replicas(t, 0, 2)
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	w := newWork("sc-3", model.DefaultTenant, at)
	w.Instance.Context = json.RawMessage(`{"n":0}`)
	if err := rs[0].CreateInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*25)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if err := rs[g%2].UpdateInstance(ctx, model.DefaultTenant, "sc-3", counted(-1)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	inst, _, err := rs[0].GetInstance(ctx, model.DefaultTenant, "sc-3")
	var c struct{ N int }
	if err != nil || json.Unmarshal(inst.Context, &c) != nil || c.N != 200 {
		t.Fatalf("context %s, %v: want n = 200", inst.Context, err)
	}
	if inst.Rev != 200 {
		t.Fatalf("rev %d, want 200", inst.Rev)
	}
	if st := rs[0].StepCacheStats(); st.Hits == 0 {
		t.Fatalf("replica 0 stats %+v: want steps on cached rows", st)
	}
}

// TestStepCacheOff: a negative size keeps no rows; every step takes the lock read.
func TestStepCacheOff(t *testing.T) {
	s := replicas(t, -1, 1)[0]
	w := newWork("sc-4", model.DefaultTenant, time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC))
	w.Instance.Context = json.RawMessage(`{"n":0}`)
	if err := s.CreateInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.UpdateInstance(ctx, model.DefaultTenant, "sc-4", counted(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.StepCacheStats(); st != (store.StepCacheStats{}) {
		t.Fatalf("stats %+v with the cache off", st)
	}
}

// TestStepCacheLeavesOutHugeInstances: an instance whose open tasks take more than the entry bound is read under
// the lock at every step.
func TestStepCacheLeavesOutHugeInstances(t *testing.T) {
	s := replicas(t, 0, 1)[0]
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	data := json.RawMessage(`{"note":"` + strings.Repeat("x", 400) + `"}`)
	for _, c := range []struct {
		id    string
		tasks int
		hit   bool
	}{{"sc-small", 3, true}, {"sc-huge", 200, false}} {
		w := newWork(c.id, model.DefaultTenant, at)
		w.Instance.Context = json.RawMessage(`{"n":0}`)
		for i := range c.tasks {
			tk := &model.Task{ID: fmt.Sprintf("%s.t%d", c.id, i), TenantID: model.DefaultTenant, InstanceID: c.id, NodeID: "n", Assignee: fmt.Sprintf("u%d", i),
				Status: model.TaskPending, Kind: "approval", Data: data, CreatedAt: at}
			w.NewTasks = append(w.NewTasks, tk)
			w.Tasks = append(w.Tasks, tk)
		}
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		before := s.StepCacheStats()
		if err := s.UpdateInstance(ctx, model.DefaultTenant, c.id, counted(0)); err != nil {
			t.Fatal(err)
		}
		if hit := s.StepCacheStats().Hits > before.Hits; hit != c.hit {
			t.Errorf("%s with %d open tasks: ran on cached rows %v, want %v", c.id, c.tasks, hit, c.hit)
		}
	}
}

// TestStepCacheDeletedMeanwhile: an instance deleted by another replica (archived) after this replica cached its
// row is not found by the next step here, and the step's checked write does not bring it back.
func TestStepCacheDeletedMeanwhile(t *testing.T) {
	rs := replicas(t, 0, 2)
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	for _, id := range []string{"sc-del", "sc-keep"} {
		w := newWork(id, model.DefaultTenant, at)
		w.Instance.Context = json.RawMessage(`{"n":0}`)
		if err := rs[0].CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"sc-del", "sc-keep"} {
		if err := rs[0].UpdateInstance(ctx, model.DefaultTenant, id, counted(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs[1].DB().Exec("DELETE FROM instances WHERE id = ?", "sc-del").Error; err != nil {
		t.Fatal(err)
	}
	before := rs[0].StepCacheStats()
	out, err := rs[0].UpdateInstances(ctx, model.DefaultTenant, []string{"sc-del", "sc-keep"}, counted(1))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out["sc-del"], model.ErrNoInstance) || out["sc-keep"] != nil {
		t.Fatalf("outcomes %v: want sc-del not found and sc-keep stepped", out)
	}
	if st := rs[0].StepCacheStats(); st.Hits != before.Hits+1 || st.Stale != before.Stale+1 {
		t.Fatalf("stats %+v → %+v: want one run on cached rows found stale", before, st)
	}
	var n int64
	if err := rs[1].DB().Raw("SELECT COUNT(*) FROM instances WHERE id = ?", "sc-del").Scan(&n).Error; err != nil || n != 0 {
		t.Fatalf("%d rows of the deleted instance (%v): the checked write must not insert it again", n, err)
	}
	inst, _, err := rs[1].GetInstance(ctx, model.DefaultTenant, "sc-keep")
	if err != nil || string(inst.Context) != `{"n":2}` || inst.Rev != 2 {
		t.Fatalf("sc-keep: %+v, %v: want n = 2, rev 2", inst, err)
	}
}

// TestStepCacheChecksEveryRowOfAGroup: one transaction steps 40 instances on cached rows (two checked writes: a
// write checks at most 32 rows). When another replica stepped one of them meanwhile — one the second write
// checks — nothing of the transaction's cached run is kept: every instance is stepped once, on what the other
// replica left. A step that raises the rev by more than one is checked as well.
func TestStepCacheChecksEveryRowOfAGroup(t *testing.T) {
	rs := replicas(t, 0, 2)
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("sc-g%02d", i))
	}
	createCached(t, rs[0], at, ids...)
	// The other replica's step leaves a row this replica's step would not write (n = 10, 20).
	const other = "sc-g35"
	otherStep := func(n int) {
		t.Helper()
		if err := rs[1].UpdateInstance(ctx, model.DefaultTenant, other, func(w *model.Work) error {
			w.Instance.Context = json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))
			w.Instance.Rev++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// groupStep steps every instance in one transaction, which runs on cached rows and is found stale or not.
	groupStep := func(fn func(w *model.Work) error, stale bool) {
		t.Helper()
		before := rs[0].StepCacheStats()
		out, err := rs[0].UpdateInstances(ctx, model.DefaultTenant, ids, fn)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if out[id] != nil {
				t.Fatalf("%s: %v", id, out[id])
			}
		}
		want := before.Stale
		if stale {
			want++
		}
		if st := rs[0].StepCacheStats(); st.Hits != before.Hits+1 || st.Stale != want {
			t.Fatalf("stats %+v → %+v: want a run on cached rows, found stale: %v", before, st, stale)
		}
	}
	check := func(step string, n, rev func(id string) int) {
		t.Helper()
		for _, id := range ids {
			inst, _, err := rs[1].GetInstance(ctx, model.DefaultTenant, id)
			var c struct{ N int }
			if err != nil || json.Unmarshal(inst.Context, &c) != nil || c.N != n(id) || inst.Rev != int64(rev(id)) {
				t.Fatalf("after %s, %s: context %s rev %d (%v): want n = %d, rev %d", step, id, inst.Context, inst.Rev, err, n(id), rev(id))
			}
		}
	}
	pick := func(theOther, rest int) func(string) int {
		return func(id string) int {
			if id == other {
				return theOther
			}
			return rest
		}
	}
	byTwo := func(w *model.Work) error {
		w.Instance.Rev++
		return counted(-1)(w)
	}
	otherStep(10)
	groupStep(counted(-1), true)
	check("the group step", pick(11, 2), pick(3, 2))
	// Now all are cached as written; a step raising each rev by two writes through the other statement.
	groupStep(byTwo, false)
	check("the step raising the rev by two", pick(12, 3), pick(5, 4))
	// That statement finds a stale row in its second part as well.
	otherStep(20)
	groupStep(byTwo, true)
	check("a step raising the rev by two on a stale row", pick(21, 4), pick(8, 6))
}

// TestStepCacheStaleGroupWithStarts: the checked write travels in the round trip of the group's other writes and
// its commit, the guard after it failing that round trip when a row was not as cached. A group that steps a stale
// instance and starts new ones in that round trip commits nothing of it: it runs again on a locked read, the starts
// are inserted once (a start left committed by the failed round trip would make the second one a duplicate), and
// the history rows of the steps are written once.
func TestStepCacheStaleGroupWithStarts(t *testing.T) {
	rs := replicas(t, 0, 2)
	at := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	ids := []string{"sc-s1", "sc-s2", "sc-s3"}
	createCached(t, rs[0], at, ids...)
	// Another replica steps sc-s2: this replica's cached row of it is stale.
	if err := rs[1].UpdateInstance(ctx, model.DefaultTenant, "sc-s2", counted(1)); err != nil {
		t.Fatal(err)
	}
	step := func(w *model.Work) error {
		var c struct{ N int }
		if err := json.Unmarshal(w.Instance.Context, &c); err != nil {
			return err
		}
		w.History = append(w.History, model.HistoryEvent{At: at, Actor: "bob", Action: "task.approved", Comment: fmt.Sprintf("from %d", c.N)})
		return counted(-1)(w)
	}
	starts := []*model.Work{newWork("sc-new1", model.DefaultTenant, at), newWork("sc-new2", model.DefaultTenant, at)}
	before := rs[0].StepCacheStats()
	out, err := rs[0].UpdateInstances(ctx, model.DefaultTenant, ids, step, starts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if out[id] != nil {
			t.Fatalf("%s: %v", id, out[id])
		}
	}
	if st := rs[0].StepCacheStats(); st.Hits != before.Hits+1 || st.Stale != before.Stale+1 {
		t.Fatalf("stats %+v → %+v: want one run on cached rows found stale", before, st)
	}
	for id, n := range map[string]int{"sc-s1": 2, "sc-s2": 3, "sc-s3": 2, "sc-new1": 1, "sc-new2": 1} {
		inst, _, err := rs[1].GetInstance(ctx, model.DefaultTenant, id)
		var c struct{ N int }
		if err != nil || json.Unmarshal(inst.Context, &c) != nil || c.N != n {
			t.Fatalf("%s: %+v (%v): want n = %d", id, inst, err, n)
		}
	}
	var hist []string
	if err := rs[1].DB().Raw("SELECT h.comment FROM history h WHERE h.action = 'task.approved' ORDER BY h.comment").Scan(&hist).Error; err != nil {
		t.Fatal(err)
	}
	if want := []string{"from 1", "from 1", "from 2"}; !reflect.DeepEqual(hist, want) {
		t.Fatalf("history of the group: %q, want %q (once each, decided on the locked rows)", hist, want)
	}
}
