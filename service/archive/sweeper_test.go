package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

var (
	ctx   = context.Background()
	t0    = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	admin = &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}
)

// harness is an engine on a real store with a fake clock, and a sweeper on the same store and clock.
type harness struct {
	t   *testing.T
	s   *store.Store
	clk *clock.Fake
	tpl *template.Service
	eng *engine.Engine
	dir string
}

func newHarness(t *testing.T, s *store.Store) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	s.SetNow(clk.Now)
	tpl := template.New(s, template.Options{Clock: clk})
	eng := enginetest.New(t, s, tpl, s, engine.Options{Clock: clk, CallbackKey: []byte("callback-key-for-tests")})
	h := &harness{t: t, s: s, clk: clk, tpl: tpl, dir: t.TempDir(), eng: eng}
	ids := identity.New(s, identity.Options{Secret: []byte("test-secret-test-secret-test-secret"), BcryptCost: bcrypt.MinCost})
	for _, u := range []string{"admin", "bob"} {
		if _, err := ids.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: u, Password: "pw-" + u + "-1234"}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) sweeper(opts archive.Options) *archive.Sweeper {
	opts.Dir, opts.Clock = h.dir, h.clk
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	sw, err := archive.New(h.s, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	return sw
}

func (h *harness) publish(key, def string) {
	h.t.Helper()
	if _, err := h.tpl.Create(ctx, admin, template.CreateRequest{Key: key, Definition: json.RawMessage(def)}); err != nil {
		h.t.Fatalf("create %s: %v", key, err)
	}
	if _, err := h.tpl.Publish(ctx, admin, key); err != nil {
		h.t.Fatalf("publish %s: %v", key, err)
	}
}

func (h *harness) start(key string) string {
	h.t.Helper()
	v, err := h.eng.Start(ctx, admin, engine.StartParams{Template: key, Context: json.RawMessage(`{"amount":12,"note":"<b>&</b>"}`)})
	if err != nil {
		h.t.Fatalf("start %s: %v", key, err)
	}
	return v.ID
}

func (h *harness) approveAll(id string) {
	h.t.Helper()
	_, tasks, err := h.s.GetInstance(ctx, model.DefaultTenant, id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.Status == model.TaskPending {
			if _, err := h.eng.Approve(ctx, admin, tk.ID, "ok", nil); err != nil {
				h.t.Fatalf("approve %s: %v", tk.ID, err)
			}
		}
	}
}

func (h *harness) rows(table, where string, args ...any) int {
	h.t.Helper()
	var n int64
	if err := h.s.DB().Table(table).Where(where, args...).Count(&n).Error; err != nil {
		h.t.Fatal(err)
	}
	return int(n)
}

// lines reads every archive file of the harness: instance id → how many lines, and the records.
func (h *harness) lines() (map[string]int, map[string]map[string]any) {
	h.t.Helper()
	seen, recs := map[string]int{}, map[string]map[string]any{}
	files, _ := filepath.Glob(filepath.Join(h.dir, "*.jsonl.gz"))
	for _, f := range files {
		err := archive.ReadFile(f, func(line []byte) error {
			var r map[string]any
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			id := r["id"].(string)
			seen[id]++
			recs[id] = r
			return nil
		})
		if err != nil {
			h.t.Fatalf("read %s: %v", f, err)
		}
	}
	return seen, recs
}

var quiet = slogDiscard()

const (
	quickDef   = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"end"}]}`
	approveDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"a","type":"approval","approvers":{"users":["admin"]},"cc":{"users":["bob"]}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"a"},{"from":"a","to":"end"}]}`
)

func withRetention(def, retention string) string {
	return def[:len(def)-1] + `,"options":{"retention":` + retention + `}}`
}

// TestSweepArchivesAndDeletes: instances that ended longer ago than their retention (the deployment's, or their
// version's options.retention) are written to the archive with everything that refers to them and deleted;
// running, recent and keep-forever ones stay; GET of an archived id answers 410 archived.
func TestSweepArchivesAndDeletes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.publish("quick", quickDef)
		h.publish("approve", approveDef)
		h.publish("keep", withRetention(quickDef, `"0"`))
		h.publish("short", withRetention(quickDef, `"1h"`))
		quick := []string{h.start("quick"), h.start("quick"), h.start("quick")}
		done, running := h.start("approve"), h.start("approve")
		h.approveAll(done)
		keep, short := h.start("keep"), h.start("short")
		lin, err := h.eng.StartLinear(ctx, admin, engine.LinearParams{Title: "one-off", Context: json.RawMessage(`{"note":"<b>&</b>"}`), Steps: []template.LinearStep{{Name: "ok", Approvers: model.Approvers{Users: []string{"admin"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		h.approveAll(lin.ID)
		historyOf := map[string][]string{} // the actions of each instance's history, one per event
		for _, id := range append(quick, done, lin.ID, short) {
			evs, err := h.eng.History(ctx, admin, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				historyOf[id] = append(historyOf[id], e.Action)
			}
		}

		var results []archive.Result
		sw := h.sweeper(archive.Options{Retention: 24 * time.Hour, BatchSize: 2, OnSweep: func(r archive.Result, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			results = append(results, r)
		}})
		h.clk.Advance(2 * time.Hour)
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if seen, _ := h.lines(); len(seen) != 1 || seen[short] != 1 {
			t.Fatalf("after 2h only the 1h-retention instance is archived; the archive has %v", seen)
		}
		h.clk.Advance(24 * time.Hour)
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if r := results[1]; !r.Leader || r.Archived != 5 || r.Batches != 3 {
			t.Fatalf("second sweep: %+v; want 5 archived in 3 batches of at most 2", r)
		}
		archived := append(slices.Clone(quick), done, lin.ID, short)
		seen, recs := h.lines()
		if len(seen) != len(archived) {
			t.Fatalf("archive holds %v, want %v", seen, archived)
		}
		for _, id := range archived {
			if seen[id] != 1 {
				t.Errorf("%s is in the archive %d times", id, seen[id])
			}
			rows := recs[id]["rows"].(map[string]any)
			inst := rows["instances"].([]any)[0].(map[string]any)
			if inst["id"] != id || inst["context"].(map[string]any)["note"] != "<b>&</b>" || inst["state"] == nil {
				t.Errorf("%s: the archived instance row: %v", id, inst)
			}
			// One archived entry per event, in order, without the row's more_events (a step's events share a row).
			var actions []string
			for _, e := range rows["history"].([]any) {
				m := e.(map[string]any)
				if _, ok := m["more_events"]; ok {
					t.Errorf("%s: archived history entry with more_events: %v", id, m)
				}
				actions = append(actions, m["action"].(string))
			}
			if len(actions) == 0 || !slices.Equal(actions, historyOf[id]) {
				t.Errorf("%s: history archived %v, in the database before %v", id, actions, historyOf[id])
			}
			a, err := s.GetArchived(ctx, model.DefaultTenant, id)
			if err != nil || a.File != archive.FileName(h.clk.Now()) && id != short {
				t.Errorf("%s: tombstone %+v, %v", id, a, err)
			}
			for _, table := range []string{"instances", "tasks", "history", "cc", "bookmarks", "timers"} {
				col := "instance_id"
				if table == "instances" {
					col = "id"
				}
				if n := h.rows(table, col+" = ?", id); n != 0 {
					t.Errorf("%s: %d %s rows left after archiving", id, n, table)
				}
			}
			if _, err := h.eng.Get(ctx, admin, id); !model.IsKind(err, model.EGONE) {
				t.Errorf("GET of archived %s: %v; want 410 archived", id, err)
			} else if de := new(model.Error); errors.As(err, &de) && de.Code != "archived" {
				t.Errorf("code %q, want archived", de.Code)
			}
			if _, err := h.eng.History(ctx, admin, id); !model.IsKind(err, model.EGONE) {
				t.Errorf("history of archived %s: %v", id, err)
			}
		}
		approved := recs[done]["rows"].(map[string]any)
		if len(approved["tasks"].([]any)) != 1 || len(approved["cc"].([]any)) != 1 {
			t.Errorf("the approved instance's tasks and cc were not archived: %v", approved)
		}
		task := approved["tasks"].([]any)[0].(map[string]any)["id"].(string)
		if _, err := h.eng.GetTask(ctx, admin, task); !model.IsKind(err, model.EGONE) {
			t.Errorf("task of an archived instance: %v; want 410", err)
		}
		// A linear instance's hidden template goes with it.
		linRows := recs[lin.ID]["rows"].(map[string]any)
		if len(linRows["templates"].([]any)) != 1 || len(linRows["template_versions"].([]any)) != 1 {
			t.Errorf("the linear instance's template was not archived: %v", linRows)
		}
		if n := h.rows("templates", "tkey = ?", recs[lin.ID]["template"]); n != 0 {
			t.Errorf("the linear instance's hidden template is still there")
		}
		// Running, kept-forever and other templates' versions stay.
		for _, id := range []string{running, keep} {
			if _, err := h.eng.Get(ctx, admin, id); err != nil {
				t.Errorf("%s was archived: %v", id, err)
			}
		}
		if n := h.rows("templates", "hidden = 0"); n != 4 {
			t.Errorf("%d published templates left, want 4", n)
		}
		// Years later the running one is still there, the kept one too; a further sweep writes nothing.
		h.clk.Advance(3 * 365 * 24 * time.Hour)
		if r, err := sw.Sweep(ctx); err != nil || r.Archived != 0 {
			t.Fatalf("third sweep: %+v, %v", r, err)
		}
		if n := h.rows("archived_instances", "1 = 1"); n != len(archived) {
			t.Fatalf("%d tombstones", n)
		}
	})
}

var errCrash = errors.New("simulated crash")

// TestSweepCrashRecovery stops a sweep at each step of a batch, as a crash would (and, after the marker, with half
// a gzip member written, as a crash mid-write leaves the file), then sweeps again from another process after its
// lease expired: every instance ends up in the archive exactly once, the files read cleanly, nothing is lost.
func TestSweepCrashRecovery(t *testing.T) {
	for _, step := range []string{"begun", "torn", "written", "finished"} {
		t.Run(step, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, s *store.Store) {
				h := newHarness(t, s)
				h.publish("quick", quickDef)
				h.publish("approve", approveDef)
				var ids []string
				for i := range 25 {
					if i%3 == 0 {
						id := h.start("approve")
						h.approveAll(id)
						ids = append(ids, id)
					} else {
						ids = append(ids, h.start("quick"))
					}
				}
				h.clk.Advance(48 * time.Hour)
				hookStep, batches := step, 0
				if step == "torn" {
					hookStep = "begun"
				}
				crashing := h.sweeper(archive.Options{Retention: time.Hour, BatchSize: 10, Owner: "crashing", AfterStep: func(name string, b *model.ArchiveBatch) error {
					if name != hookStep {
						return nil
					}
					if batches++; batches < 2 {
						return nil
					}
					if step == "torn" {
						// Half a member of garbage past the recorded offset: what a crash inside write(2) leaves.
						f, err := os.OpenFile(filepath.Join(h.dir, b.File), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := f.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3}); err != nil {
							t.Fatal(err)
						}
						f.Close()
					}
					return errCrash
				}})
				if _, err := crashing.Sweep(ctx); !errors.Is(err, errCrash) {
					t.Fatalf("the crashing sweep returned %v", err)
				}
				pending, _ := s.PendingArchiveBatch(ctx)
				if (step == "finished") != (pending == nil) {
					t.Fatalf("after a crash at %s the marker is %+v", step, pending)
				}
				// Another replica cannot sweep while the crashed one's lease runs.
				other := h.sweeper(archive.Options{Retention: time.Hour, BatchSize: 10, Owner: "other"})
				if r, err := other.Sweep(ctx); err != nil || r.Leader {
					t.Fatalf("a sweep during the dead holder's lease: %+v, %v", r, err)
				}
				h.clk.Advance(3 * time.Minute)
				r, err := other.Sweep(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if step != "finished" && r.Recovered == 0 {
					t.Errorf("the pending batch was not recovered: %+v", r)
				}
				seen, _ := h.lines()
				for _, id := range ids {
					if seen[id] != 1 {
						t.Errorf("%s is in the archive %d times", id, seen[id])
					}
				}
				if len(seen) != len(ids) {
					t.Errorf("the archive holds %d instances, want %d", len(seen), len(ids))
				}
				if n := h.rows("instances", "1 = 1"); n != 0 {
					t.Errorf("%d instances left", n)
				}
				if n := h.rows("archived_instances", "1 = 1"); n != len(ids) {
					t.Errorf("%d tombstones, want %d", n, len(ids))
				}
				if b, _ := s.PendingArchiveBatch(ctx); b != nil {
					t.Errorf("a batch is still pending: %+v", b)
				}
			})
		})
	}
}

// TestSweepLeavesChangedInstances: an instance revived (jumped back to running) after the sweep read it is not
// deleted, and the archive gets no line for it; once it ends again and is due, a later sweep archives it.
func TestSweepLeavesChangedInstances(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.publish("quick", quickDef)
		h.publish("ghost", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"n","type":"approval","approvers":{"roles":["ghost"]}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`)
		failed := h.start("ghost")
		others := []string{h.start("quick"), h.start("quick")}
		if inst, _, _ := s.GetInstance(ctx, model.DefaultTenant, failed); inst.Status != model.StatusFailed {
			t.Fatalf("setup: %s is %s", failed, inst.Status)
		}
		h.clk.Advance(48 * time.Hour)
		revived := false
		sw := h.sweeper(archive.Options{Retention: time.Hour, AfterStep: func(name string, b *model.ArchiveBatch) error {
			if name == "written" && !revived {
				revived = true
				if _, err := h.eng.Jump(ctx, admin, failed, "end", "fixed by hand"); err != nil {
					t.Fatalf("jump: %v", err)
				}
			}
			return nil
		}})
		r, err := sw.Sweep(ctx)
		if err != nil || r.Archived != 2 {
			t.Fatalf("sweep: %+v, %v", r, err)
		}
		seen, _ := h.lines()
		if seen[failed] != 0 || seen[others[0]] != 1 || seen[others[1]] != 1 {
			t.Fatalf("archive after the revival: %v", seen)
		}
		if inst, _, err := s.GetInstance(ctx, model.DefaultTenant, failed); err != nil || inst.Status != model.StatusCompleted {
			t.Fatalf("the revived instance: %+v, %v", inst, err)
		}
		h.clk.Advance(2 * time.Hour)
		if r, err := sw.Sweep(ctx); err != nil || r.Archived != 1 {
			t.Fatalf("later sweep: %+v, %v", r, err)
		}
		seen, recs := h.lines()
		if seen[failed] != 1 || recs[failed]["status"] != string(model.StatusCompleted) {
			t.Fatalf("the revived instance's line: %d, %v", seen[failed], recs[failed]["status"])
		}
	})
}

// TestSweepersRace: replicas sweeping at once archive every instance exactly once (one holds the lease).
func TestSweepersRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.publish("quick", quickDef)
		var ids []string
		for range 60 {
			ids = append(ids, h.start("quick"))
		}
		h.clk.Advance(48 * time.Hour)
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sw := h.sweeper(archive.Options{Retention: time.Hour, BatchSize: 7, Owner: "replica-" + string(rune('a'+i))})
				for range 3 {
					r, err := sw.Sweep(ctx)
					if err != nil {
						t.Errorf("sweep: %v", err)
					}
					mu.Lock()
					total += r.Archived
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		seen, _ := h.lines()
		var dup []string
		for id, n := range seen {
			if n != 1 {
				dup = append(dup, id)
			}
		}
		sort.Strings(dup)
		if total != len(ids) || len(seen) != len(ids) || len(dup) > 0 {
			t.Fatalf("archived %d, %d in the archive, duplicated %v; want %d once each", total, len(seen), dup, len(ids))
		}
	})
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
