package store

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// TestStateCodecMatchesEncodingJSON: the state is written with goccy/go-json; rows written earlier with
// encoding/json must read back the same, and the bytes written must be what encoding/json writes.
func TestStateCodecMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 23, 2, 3, 4, 567890123, time.UTC)
	end := at.Add(time.Hour)
	st := model.InstanceState{Seq: 42, Edges: []byte{0, 1, 2, 1, 0, 2}, Nodes: map[string]*model.NodeVisit{
		"lead": {NodeID: "lead", Name: `审批 "lead" <&>`, Type: "approval", State: "active", NodeInstanceID: "i.n3", Visit: 2, StartedAt: &at,
			Attempt: 1, Error: "e\u2028\n", WaitingFor: "plugin", Seq: 3, Groups: []model.SignTally{{Total: 3, Approved: 1, Outcome: ""}},
			Timers: []string{"i.n3-timeout"}, Chain: &model.PluginChain{Phase: "pre", Names: []string{"a", "b"}, Index: 1, RunID: "i.r1", Then: "run"},
			PreDone: true},
		"start": {NodeID: "start", Type: "start", State: "completed", StartedAt: &at, EndedAt: &end, AfterDone: true},
	}}
	inst := &model.Instance{ID: "i", State: st, Context: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at}
	row, err := toInstanceRow(inst)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != string(want) {
		t.Fatalf("state written\n%s\nencoding/json writes\n%s", row.State, want)
	}
	row.State = string(want) // as an earlier version stored it
	got, err := row.toModel(true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.State, st) {
		t.Fatalf("state read back %+v, want %+v", got.State, st)
	}
	row.State = `{"nodes":{"x":` // truncated
	if _, err := row.toModel(true); err == nil {
		t.Fatal("a corrupt state was read without error")
	}
}
