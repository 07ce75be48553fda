package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestFaultKillDuringSweep fills a MySQL database with finished instances, then runs a real halley with a
// retention of one second and kills it with SIGKILL while a retention batch is under way (its write-ahead marker
// is in the database), several times, restarting it each time. In the end every instance must be in the archive
// exactly once, with all its rows (compared with a snapshot taken before the sweep), and gone from the database.
func TestFaultKillDuringSweep(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	archiveDir := t.TempDir()
	env := faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_ARCHIVE_DIR="+archiveDir)
	h := startHalley(t, "halley", bin, env...)
	cl := newAPI()
	cl.login(t, h.URL())
	cl.publish(t, h.URL(), "quick", quickDefinition())
	cl.publish(t, h.URL(), "approvals", approvalsDefinition(2))

	// Instances to archive: two thirds start → end, one third through two approvals.
	const n = 1200
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if i%3 != 0 {
					cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "quick"})
					continue
				}
				r := cl.mustCall(t, h.URL(), "POST", "/api/v1/instances", map[string]any{"template": "approvals", "context": map[string]any{"approver": "admin"}})
				tasks := r["tasks"].([]any)
				for len(tasks) > 0 {
					task := tasks[0].(map[string]any)["id"].(string)
					tasks, _ = cl.mustCall(t, h.URL(), "POST", "/api/v1/tasks/"+task+"/approve", map[string]any{})["next_tasks"].([]any)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	db := openSQL(t, dbURL)
	type snap struct {
		status         string
		history, tasks int
		context, state string
	}
	before := map[string]snap{}
	eventsOf := map[string]int{} // history events (a step's events share a row)
	for _, e := range historyEvents(t, db, "") {
		eventsOf[e.InstanceID]++
	}
	rows, err := db.Query(`SELECT i.id, i.status, i.context, i.state, (SELECT COUNT(*) FROM tasks k WHERE k.instance_id = i.id) FROM instances i`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var s snap
		if err := rows.Scan(&id, &s.status, &s.context, &s.state, &s.tasks); err != nil {
			t.Fatal(err)
		}
		s.history = eventsOf[id]
		before[id] = s
	}
	rows.Close()
	if len(before) != n || queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status <> 'completed'") != 0 {
		t.Fatalf("setup: %d instances, %d not completed", len(before), queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status <> 'completed'"))
	}

	// Now with a retention: kill -9 whenever a batch is under way, and start again.
	h.kill()
	h.env = append(h.env, "HALLEY_INSTANCE_RETENTION=1s", "HALLEY_INSTANCE_RETENTION_SWEEP=1s", "HALLEY_INSTANCE_RETENTION_BATCH=40")
	pending := func() string {
		ids := queryStrings(t, db, "SELECT id FROM archive_batches")
		if len(ids) == 0 {
			return ""
		}
		return ids[0]
	}
	midBatch, kills := 0, 0
	for kills < 12 && midBatch < 4 && queryInt(t, db, "SELECT COUNT(*) FROM instances") > 0 {
		left := pending() // the batch the last kill interrupted: the new process finishes it first (once the lease expired)
		h.start()
		caught := testkit.Eventually(60*time.Second, 2*time.Millisecond, func() bool {
			p := pending()
			return p != "" && p != left || queryInt(t, db, "SELECT COUNT(*) FROM instances") == 0
		})
		h.kill()
		kills++
		if p := pending(); caught && p != "" && p != left {
			midBatch++
		}
	}
	if midBatch == 0 {
		t.Fatalf("no kill landed mid-batch in %d tries", kills)
	}
	h.start()
	if !testkit.Eventually(120*time.Second, 50*time.Millisecond, func() bool {
		return queryInt(t, db, "SELECT COUNT(*) FROM instances") == 0 && queryInt(t, db, "SELECT COUNT(*) FROM archive_batches") == 0
	}) {
		t.Fatalf("the sweep did not finish: %d instances left, %d batches pending", queryInt(t, db, "SELECT COUNT(*) FROM instances"),
			queryInt(t, db, "SELECT COUNT(*) FROM archive_batches"))
	}

	// Every batch a kill interrupted was finished by the next process.
	if rec := strings.Count(h.logs.String(), "finishing an archive batch a previous sweep left"); rec != midBatch {
		t.Errorf("%d interrupted batches recovered, want %d", rec, midBatch)
	}
	// Every instance exactly once in the archive, with what it had; a tombstone for each; nothing else.
	seen := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(archiveDir, "*.jsonl.gz"))
	for _, f := range files {
		err := archive.ReadFile(f, func(line []byte) error {
			var r struct {
				ID     string                      `json:"id"`
				Status string                      `json:"status"`
				Rows   map[string][]map[string]any `json:"rows"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			seen[r.ID]++
			want, ok := before[r.ID]
			if !ok {
				return fmt.Errorf("the archive holds %s, which never existed", r.ID)
			}
			inst := r.Rows["instances"][0]
			same := mustCompact(inst["context"]) == mustCompactString(want.context) && mustCompact(inst["state"]) == mustCompactString(want.state)
			if r.Status != want.status || len(r.Rows["history"]) != want.history || len(r.Rows["tasks"]) != want.tasks || !same {
				t.Errorf("%s: archived status %s, %d history, %d tasks; before the sweep %s, %d, %d (context and state equal: %v)", r.ID, r.Status,
					len(r.Rows["history"]), len(r.Rows["tasks"]), want.status, want.history, want.tasks, same)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Errorf("%s is in the archive %d times", id, seen[id])
		}
	}
	if tomb := queryInt(t, db, "SELECT COUNT(*) FROM archived_instances"); tomb != n || len(seen) != n {
		t.Errorf("%d tombstones and %d archived instances, want %d", tomb, len(seen), n)
	}
	for _, table := range []string{"tasks", "history", "cc", "bookmarks", "timers", "plugin_runs"} {
		if c := queryInt(t, db, "SELECT COUNT(*) FROM "+table); c != 0 {
			t.Errorf("%d %s rows left", c, table)
		}
	}
	t.Logf("retention sweep killed %d times (%d mid-batch) and restarted: %d instances archived once each in %d file(s)", kills, midBatch, len(seen), len(files))
}

func mustCompact(v any) string {
	b, _ := json.Marshal(v)
	return mustCompactString(string(b))
}

// mustCompactString normalizes a JSON text (key order, spacing) so that stored and archived forms compare.
func mustCompactString(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
