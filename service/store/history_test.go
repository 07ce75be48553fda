package store_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestHistoryOneRowPerStep writes steps of one, several and hostile events and checks that each step is one row
// and that History and ScanHistory give back every event as written, in order (the archive's reading:
// service/archive's TestSweep).
func TestHistoryOneRowPerStep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		tn := model.DefaultTenant
		at := time.Date(2026, 11, 29, 3, 4, 5, 123456000, time.UTC)
		hostile := `O'Brien"; DROP TABLE history; -- ? \' \\ 李 "}]`
		ev := func(action, actor, node string, when time.Time, data string) model.HistoryEvent {
			h := model.HistoryEvent{At: when, Actor: actor, Action: action, NodeID: node}
			if data != "" {
				h.Data = json.RawMessage(data)
			}
			return h
		}
		w := newWork("h-1", tn, at)
		start := []model.HistoryEvent{ev("instance.started", "alice", "", at, ""), ev("node.activated", "alice", "a", at, "")}
		w.History = start
		if err := s.CreateInstance(ctx, w); err != nil {
			t.Fatal(err)
		}
		// A step whose events differ from the first in time (by less than a millisecond too), actor (also to ""),
		// task, comment and data; then a step of one event; then one with nothing to record.
		later := at.Add(1500 * time.Microsecond)
		approve := ev("task.approved", "bob", "a", at, `{"reason":"ok"}`)
		approve.TaskID, approve.Comment = "h-1.t1", hostile
		fired := ev("timer.fired", "", "a", later, `{"timer_id":"x","note":"`+"\u2028"+`"}`)
		steps := [][]model.HistoryEvent{
			{approve, ev("node.completed", "bob", "a", at, ""), fired, ev("node.activated", "system", "end", later, `{}`),
				ev("instance.completed", "", "", later.Add(time.Nanosecond), "")},
			{ev("instance.urged", "alice", "", later, `{"n":1}`)},
			nil,
		}
		for _, step := range steps {
			if err := s.UpdateInstance(ctx, tn, "h-1", func(w *model.Work) error { w.History = step; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		var want []model.HistoryEvent
		for _, step := range append([][]model.HistoryEvent{start}, steps...) {
			for _, h := range step {
				h.InstanceID = "h-1"
				h.At = h.At.Truncate(time.Microsecond) // what DATETIME(6) keeps
				if len(h.Data) == 0 {
					h.Data = json.RawMessage("{}")
				}
				want = append(want, h)
			}
		}
		clean := func(evs []model.HistoryEvent) []model.HistoryEvent {
			out := make([]model.HistoryEvent, len(evs))
			for i, e := range evs {
				e.Seq = 0
				e.At = e.At.UTC()
				out[i] = e
			}
			return out
		}
		got, err := s.History(ctx, tn, "h-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(clean(got), want) {
			t.Fatalf("history\n got %+v\nwant %+v", clean(got), want)
		}
		var rows int64
		if err := s.DB().Table("history").Where("instance_id = ?", "h-1").Count(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if rows != 3 {
			t.Fatalf("%d history rows for three steps that recorded events, want 3", rows)
		}
		// A step's events share the row's seq; seqs grow from step to step.
		if got[0].Seq != got[1].Seq || got[2].Seq != got[6].Seq || got[2].Seq <= got[1].Seq || got[7].Seq <= got[6].Seq {
			t.Fatalf("seqs %d %d %d %d %d", got[0].Seq, got[1].Seq, got[2].Seq, got[6].Seq, got[7].Seq)
		}
		db, err := s.DB().DB()
		if err != nil {
			t.Fatal(err)
		}
		scanned, err := store.ScanHistory(ctx, db, "instance_id = ?", "h-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(clean(scanned), want) {
			t.Fatalf("ScanHistory\n got %+v\nwant %+v", clean(scanned), want)
		}

		// A row written before migration 0020 (no more_events) reads as it did.
		if err := s.DB().Exec("INSERT INTO history (tenant_id, instance_id, at, actor, action, node_id, task_id, comment, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			tn, "h-1", later, "carol", "task.cc", "a", "", "", `{"to":"dan"}`).Error; err != nil {
			t.Fatal(err)
		}
		got, err = s.History(ctx, tn, "h-1")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got); n != len(want)+1 || got[n-1].Action != "task.cc" || got[n-1].Actor != "carol" || string(got[n-1].Data) != `{"to":"dan"}` {
			t.Fatalf("an old row: %+v", got[len(got)-1])
		}

	})
}

// TestExpandHistoryRefusesBadRows: a more_events that is not the JSON array the store writes is an error, not a
// history that silently lacks events.
func TestExpandHistoryRefusesBadRows(t *testing.T) {
	first := model.HistoryEvent{Seq: 7, InstanceID: "i", Action: "a"}
	for _, bad := range []string{"{", `{"action":"x"}`, `[1]`} {
		if _, err := store.ExpandHistory(first, bad); err == nil {
			t.Errorf("more_events %s: no error", bad)
		}
	}
	evs, err := store.ExpandHistory(first, `[{"action":"b"}]`)
	if err != nil || len(evs) != 2 || evs[1].Seq != 7 || evs[1].InstanceID != "i" || string(evs[1].Data) != "{}" || string(evs[0].Data) != "{}" {
		t.Fatalf("%+v %v", evs, err)
	}
}
