package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// TestStateShortForm: the state is written in the store's short form (state.go) and reads back the same; rows
// written by earlier versions — the full form of encoding/json, and the full form without the derived fields —
// read back the same too.
func TestStateShortForm(t *testing.T) {
	at := time.Date(2026, 11, 23, 2, 3, 4, 567890123, time.UTC)
	end := at.Add(time.Hour)
	st := model.InstanceState{Seq: 42, Edges: []byte{0, 1, 2, 1, 0, 2}, Nodes: map[string]*model.NodeVisit{
		"lead": {NodeID: "lead", Name: `审批 "lead" <&>`, Type: "approval", State: "active", NodeInstanceID: "i.n3", Visit: 2, StartedAt: &at,
			Attempt: 1, Error: "e\u2028\n", WaitingFor: "plugin", Seq: 3, Groups: []model.SignTally{{Total: 3, Approved: 1, Outcome: ""}},
			Timers: []string{"i.n3-timeout"}, Chain: &model.PluginChain{Phase: "pre", Names: []string{"a", "b"}, Index: 1, RunID: "i.r1", Then: "run"},
			PreDone: true},
		"start": {NodeID: "start", Name: "start", Type: "start", State: "completed", NodeInstanceID: "i.n1", Seq: 1, Visit: 1, StartedAt: &at, EndedAt: &end,
			AfterDone: true},
		// A node instance id the engine's numbering does not give (none does today): written as it is.
		"odd": {NodeID: "odd", Name: "Odd", Type: "auto", State: "active", NodeInstanceID: "elsewhere.n7", Seq: 7, Visit: 1},
		// A visit number of 0 and a tally of 0 (none the engine writes today) keep their values.
		"zero": {NodeID: "zero", Name: "Zero", Type: "approval", State: "waiting", Seq: 9, NodeInstanceID: "i.n9", Visit: 0,
			Groups: []model.SignTally{{}}},
	}, Error: &model.NodeFailure{NodeID: "lead", Message: "boom"}, Pins: map[string]int{"sub": 3}, UrgedAt: &end, Awaited: true}
	full, err := json.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	inst := &model.Instance{ID: "i", State: st, Context: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at}
	row, err := toInstanceRow(inst)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(&st); string(got) != string(full) {
		t.Fatalf("encoding changed the instance's state: %s", got)
	}
	_, visits, _ := strings.Cut(row.State, `"n":[`)
	for _, unwanted := range []string{`"nodes"`, `"started_at"`, "2026-11-23T", `"i.n3"`, `"node_id"`, `"visit"`, `"k":"lead","id"`} {
		if strings.Contains(visits, unwanted) || strings.Contains(row.State, `"nodes"`) {
			t.Errorf("the short form holds %s: %s", unwanted, row.State)
		}
	}
	for _, wanted := range []string{`"n":[{"k":"start",`, `"i":"elsewhere.n7"`, `"a":` + strconv.FormatInt(at.UnixNano(), 10), `"v":1`, `"v":-1`,
		`"g":[{}]`, `"urged_at":"`, `"awaited":true`, `"pins":{"sub":3}`} {
		if !strings.Contains(row.State, wanted) {
			t.Errorf("the short form lacks %s: %s", wanted, row.State)
		}
	}
	// The form of the versions before the short one: the full form without the derived fields.
	compact := st
	compact.Nodes = map[string]*model.NodeVisit{}
	for k, ns := range st.Nodes {
		c := *ns
		c.NodeID = ""
		if c.Name == k {
			c.Name = ""
		}
		if c.NodeInstanceID == "i.n"+strconv.Itoa(c.Seq) {
			c.NodeInstanceID = ""
		}
		compact.Nodes[k] = &c
	}
	earlier, err := json.Marshal(&compact)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // the visits are a map: the same state must give the same bytes all the same
		if again, err := toInstanceRow(inst); err != nil || again.State != row.State {
			t.Fatalf("the same state written again: %s (%v), was %s", again.State, err, row.State)
		}
	}
	t.Logf("%d bytes in full, %d in the form before, %d in the short form", len(full), len(earlier), len(row.State))
	for _, form := range []string{row.State, string(full), string(earlier)} {
		row.State = form
		got, err := row.toModel(true)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.State, st) {
			t.Fatalf("state read back from %s\n%+v, want %+v", form, got.State, st)
		}
	}
	row.State = `{"n":[{"k":"x",` // truncated
	if _, err := row.toModel(true); err == nil {
		t.Fatal("a corrupt state was read without error")
	}
	// No nodes at all (a state the engine never stores) reads back as none.
	row, err = toInstanceRow(&model.Instance{ID: "e", Context: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := row.toModel(true); err != nil || got.State.Nodes != nil {
		t.Fatalf("a state without nodes read back as %+v (%v) from %s", got.State, err, row.State)
	}
}

// TestStateShortFormKeepsEveryField fills every field of a node visit, nested ones included, with a value of its
// own and reads it back: a field added to model.NodeVisit and not to the short form fails here.
func TestStateShortFormKeepsEveryField(t *testing.T) {
	var ns model.NodeVisit
	n := 0
	fill(reflect.ValueOf(&ns).Elem(), &n)
	inst := &model.Instance{ID: "i", Context: json.RawMessage(`{}`), State: model.InstanceState{Nodes: map[string]*model.NodeVisit{"k": &ns}}}
	row, err := toInstanceRow(inst)
	if err != nil {
		t.Fatal(err)
	}
	got, err := row.toModel(true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.State.Nodes["k"], &ns) {
		t.Fatalf("read back\n%+v\nwant\n%+v\nfrom %s", got.State.Nodes["k"], &ns, row.State)
	}
	// And what the engine derives is derived again: a visit with the derived values.
	ns.NodeID, ns.Name, ns.NodeInstanceID, ns.Visit = "k", "k", "i.n"+strconv.Itoa(ns.Seq), 1
	if row, err = toInstanceRow(inst); err != nil {
		t.Fatal(err)
	}
	if got, err = row.toModel(true); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.State.Nodes["k"], &ns) {
		t.Fatalf("read back\n%+v\nwant\n%+v\nfrom %s", got.State.Nodes["k"], &ns, row.State)
	}
}

// fill sets v, and every field, element and pointee under it, to a value of its own (*n counts the values).
func fill(v reflect.Value, n *int) {
	*n++
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n, time.UTC)))
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"v":%d}`, *n))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) + 1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8:
		v.SetUint(uint64(*n % 3))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	default:
		panic(fmt.Sprintf("fill: no value for %s", v.Type()))
	}
}
