package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// The database work of one step and of one timer fire, counted by MariaDB itself: the store gets a pool of one
// connection, so that connection's session counters (SHOW SESSION STATUS) hold exactly the statements, bytes
// and row writes of the steps in between. Unlike a throughput figure, nothing else running on the machine moves
// these numbers; docs/benchmarks.md records them before and after a change to the hot path, and the bounds
// below fail the test when a change makes a step or a fire do more. Run it alone, verbosely, for the figures:
//
//	CI=true HALLEY_TEST_MYSQL=mysql://root@127.0.0.1:3306/test go test -count=1 -run TestStepCost -v ./service/engine/

// sessionCounters are the counters of the store's one connection that a step moves.
var sessionCounters = []string{"Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_begin", "Com_commit",
	"Bytes_received", "Bytes_sent", "Handler_write", "Handler_update", "Handler_delete", "Handler_read_key", "Handler_read_next"}

type session struct {
	t  *testing.T
	db *sql.DB
	id int64
}

func (s *session) counters() map[string]float64 {
	s.t.Helper()
	var id int64
	if err := s.db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		s.t.Fatal(err)
	}
	if s.id != 0 && id != s.id {
		s.t.Fatalf("the store's connection changed (%d, then %d): the counters are not one session's", s.id, id)
	}
	s.id = id
	rows, err := s.db.Query("SHOW SESSION STATUS WHERE Variable_name IN ('" + strings.Join(sessionCounters, "','") + "')")
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var k string
		var v float64
		if err := rows.Scan(&k, &v); err != nil {
			s.t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// per is what happened between two readings of the counters, per unit of work (n units), less the two
// statements of the reading itself (SELECT CONNECTION_ID(), SHOW STATUS).
func per(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		d := v - before[k]
		switch k {
		case "Questions":
			d -= 2
		case "Com_select":
			d-- // CONNECTION_ID()
		}
		out[k] = d / float64(n)
	}
	return out
}

func costLine(m map[string]float64) string {
	var b strings.Builder
	for _, k := range sessionCounters {
		fmt.Fprintf(&b, " %s=%.2f", k, m[k])
	}
	return b.String()
}

// openOneConn opens a fresh, migrated MySQL store whose pool is one connection.
func openOneConn(t *testing.T) (*store.Store, *sql.DB) {
	t.Helper()
	s, err := store.Open(context.Background(), store.Config{URL: storetest.URL(t, store.MySQL), DataDir: t.TempDir(), Logger: testkit.Quiet(),
		MaxOpenConns: 1, MaxIdleConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := s.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func TestStepCost(t *testing.T) {
	s, db := openOneConn(t)
	h := newHarnessWith(t, s, s, engine.Options{})
	h.users("ann", "bob")
	h.publish("chain", chainDef)
	h.publish("delay", delayDef)
	sess := &session{t: t, db: db}

	t.Run("approval flow", func(t *testing.T) {
		const flows = 20
		before := sess.counters()
		last := ""
		for range flows {
			v, err := h.eng.Start(h.ctx, as("ann"), engine.StartParams{Template: "chain"})
			if err != nil || len(v.Tasks) != 1 {
				t.Fatalf("start: %v, %v", v, err)
			}
			last = v.ID
			next := v.Tasks[0].ID
			for range 4 {
				d, err := h.eng.Approve(h.ctx, as("bob"), next, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(d.NextTasks) > 0 {
					next = d.NextTasks[0].ID
				}
			}
		}
		m := per(before, sess.counters(), flows*5)
		h.wantStatus(last, model.StatusCompleted)
		var stateLen, ctxLen, hist int
		if err := db.QueryRow("SELECT LENGTH(state), LENGTH(context), (SELECT COUNT(*) FROM history WHERE instance_id = ?) FROM instances WHERE id = ?", last, last).
			Scan(&stateLen, &ctxLen, &hist); err != nil {
			t.Fatal(err)
		}
		t.Logf("per step:%s; a finished instance: state %d bytes, context %d bytes, %d history rows", costLine(m), stateLen, ctxLen, hist)
		// Bounds: what a step costs today (docs/benchmarks.md, "Per-step cost"), with a little room.
		if m["Questions"] > 7 || m["Com_commit"] > 1.01 || m["Bytes_received"] > 3700 {
			t.Errorf("a step costs more than it did: %s", costLine(m))
		}
		// One history row a step (the start and four approvals), holding every event of the step.
		if evs := h.events("task.approved", "instance_id = ?", last); hist != 5 || evs != 4 {
			t.Errorf("%d history rows and %d task.approved events for five steps; want one row a step and 4 approvals", hist, evs)
		}
	})

	t.Run("timer fires", func(t *testing.T) {
		const n = 50
		due := h.clk.Now().Add(time.Hour)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = h.start("ann", "delay", fmt.Sprintf(`{"due":%q}`, due.Format(time.RFC3339)))
		}
		h.clk.Advance(time.Hour)
		batch := h.dueTimers()
		if len(batch) != n {
			t.Fatalf("%d timers due, want %d", len(batch), n)
		}
		var histBefore int
		if err := db.QueryRow("SELECT COUNT(*) FROM history").Scan(&histBefore); err != nil {
			t.Fatal(err)
		}
		before := sess.counters()
		for i, err := range h.fire(h.ctx, batch) {
			if err != nil {
				t.Fatalf("timer %s: %v", batch[i].ID, err)
			}
		}
		m := per(before, sess.counters(), n)
		var histAfter int
		if err := db.QueryRow("SELECT COUNT(*) FROM history").Scan(&histAfter); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			h.wantStatus(id, model.StatusCompleted)
		}
		hist := float64(histAfter-histBefore) / n
		t.Logf("per fire (a batch of %d):%s; history rows %.2f", n, costLine(m), hist)
		if m["Questions"] > 0.25 || hist > 1 || m["Bytes_received"] > 1700 {
			t.Errorf("a fire costs more than it did: %s, %.2f history rows", costLine(m), hist)
		}
	})
}
