package model_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{`"2s"`, 2 * time.Second},
		{`"1h30m"`, 90 * time.Minute},
		{`"0"`, 0},
		{`""`, 0},
		{`"  "`, 0},
		{`null`, 0},
		{`30`, 30 * time.Second},
		{`1.5`, 1500 * time.Millisecond},
		{`"45"`, 45 * time.Second},
		{`0`, 0},
		{`"-5s"`, -5 * time.Second},
	}
	for _, tt := range tests {
		var d model.Duration
		if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if d.Std() != tt.want {
			t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, d.Std(), tt.want)
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"` + tt.want.String() + `"`; string(out) != want {
			t.Errorf("Marshal(%v) = %s, want %s", d, out, want)
		}
		var back model.Duration
		if err := json.Unmarshal(out, &back); err != nil || back != d {
			t.Errorf("round trip of %s: %v, %v", out, back, err)
		}
	}
	for _, bad := range []string{`"soon"`, `"5 parsecs"`, `true`, `{}`, `[]`, `1e300`} {
		var d model.Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", bad, d)
		}
	}
}

func TestOnTimeoutJSON(t *testing.T) {
	tests := []struct {
		in   string
		want model.OnTimeout
		out  string
	}{
		{`"approve"`, model.OnTimeout{Action: model.TimeoutApprove}, `"approve"`},
		{`"reject"`, model.OnTimeout{Action: model.TimeoutReject}, `"reject"`},
		{`"remind"`, model.OnTimeout{Action: model.TimeoutRemind}, `"remind"`},
		{`{"branch": "escalate"}`, model.OnTimeout{Branch: "escalate"}, `{"branch":"escalate"}`},
		{`null`, model.OnTimeout{}, `null`},
	}
	for _, tt := range tests {
		var o model.OnTimeout
		if err := json.Unmarshal([]byte(tt.in), &o); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if o != tt.want {
			t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, o, tt.want)
		}
		out, err := json.Marshal(o)
		if err != nil || string(out) != tt.out {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", o, out, err, tt.out)
		}
	}
	for _, bad := range []string{`{"branch": ""}`, `{"branch": "a", "after": "1h"}`, `{}`, `3`, `["approve"]`} {
		var o model.OnTimeout
		if err := json.Unmarshal([]byte(bad), &o); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, o)
		}
	}
	// An unknown action still loads (a draft may hold one); validation reports it.
	var o model.OnTimeout
	if err := json.Unmarshal([]byte(`"escalate"`), &o); err != nil || o.Action != "escalate" {
		t.Errorf(`Unmarshal("escalate") = %+v, %v`, o, err)
	}
}

func TestJoinJSON(t *testing.T) {
	tests := []struct {
		in   string
		want model.Join
		out  string
	}{
		{`"and"`, model.Join{Mode: model.JoinAnd}, `"and"`},
		{`"or"`, model.Join{Mode: model.JoinOr}, `"or"`},
		{`{"min": 2}`, model.Join{Mode: model.JoinMin, Min: 2}, `{"min":2}`},
		{`{"min": 1, "cancel_rest": true}`, model.Join{Mode: model.JoinMin, Min: 1, CancelRest: true}, `{"min":1,"cancel_rest":true}`},
		{`null`, model.Join{}, `null`},
	}
	for _, tt := range tests {
		var j model.Join
		if err := json.Unmarshal([]byte(tt.in), &j); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if j != tt.want {
			t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, j, tt.want)
		}
		out, err := json.Marshal(j)
		if err != nil || string(out) != tt.out {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", j, out, err, tt.out)
		}
	}
	for _, bad := range []string{`{}`, `{"min": "2"}`, `{"min": 2, "max": 3}`, `2`, `["and"]`, `true`} {
		var j model.Join
		if err := json.Unmarshal([]byte(bad), &j); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, j)
		}
	}
	// A node without a join writes none, and reads back with the default. (graph.Parse checks a definition from a
	// user against the schema first; stored definitions are read like this.)
	var d model.Definition
	if err := json.Unmarshal([]byte(`{"nodes":[{"id":"s","type":"start","trigger":{"kind":"message","message":"order.paid"}},
		{"id":"m","type":"auto","join":{"min":2}},{"id":"e","type":"end"}],"edges":[{"from":"s","to":"m"},{"from":"m","to":"e"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	if m := d.Node("m"); m.JoinMode() != model.JoinMin || m.Join.Min != 2 || d.Node("e").JoinMode() != model.JoinAnd {
		t.Errorf("joins %+v %+v", m.Join, d.Node("e").Join)
	}
	if tr := d.Node("s").Trigger; tr.Kind != model.TriggerMessage || tr.Message != "order.paid" || tr.IsZero() {
		t.Errorf("trigger %+v", tr)
	}
	out, _ := json.Marshal(&d)
	if !strings.Contains(string(out), `"join":{"min":2}`) || strings.Count(string(out), `"join"`) != 1 {
		t.Errorf("marshalled %s", out)
	}
}

func TestDefinitionMarshalsArrays(t *testing.T) {
	b, err := json.Marshal(model.Definition{})
	if err != nil || string(b) != `{"nodes":[],"edges":[]}` {
		t.Errorf("Marshal(Definition{}) = %s, %v", b, err)
	}
	b, _ = json.Marshal(&model.Definition{Nodes: []model.Node{{ID: "e", Type: model.NodeEnd}}})
	if string(b) != `{"nodes":[{"id":"e","type":"end"}],"edges":[]}` {
		t.Errorf("Marshal = %s", b)
	}
}

func TestValidationErrorNodesNeverNull(t *testing.T) {
	b, err := json.Marshal(model.ValidationError{Code: model.CodeNoStart, Message: "m"})
	if err != nil || string(b) != `{"code":"no_start","message":"m","nodes":[]}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	b, _ = json.Marshal([]model.ValidationError{model.NewValidationError(model.CodeCycle, []string{"x", "y"}, "cycle %d", 1)})
	if string(b) != `[{"code":"cycle","message":"cycle 1","nodes":["x","y"]}]` {
		t.Errorf("Marshal = %s", b)
	}
}

// decode reads a definition with its lenient decoder (graph.Parse, which checks it, has its tests in service/graph).
func decode(t *testing.T, raw string) *model.Definition {
	t.Helper()
	var d model.Definition
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestDefinitionLookups(t *testing.T) {
	d := decode(t, `{"nodes": [
	  {"id": "oops", "type": "error"},
	  {"id": "start", "type": "start", "trigger": {"kind": "manual"}},
	  {"id": "a", "type": "auto"}, {"id": "b", "type": "auto"}, {"id": "end", "type": "end"}
	], "edges": [
	  {"id": "1", "from": "start", "to": "a"}, {"id": "2", "from": "start", "to": "b"},
	  {"id": "3", "from": "a", "to": "end"}, {"id": "4", "from": "b", "to": "end"}, {"id": "5", "from": "oops", "to": "end"}
	]}`)
	check := func(t *testing.T, d *model.Definition) {
		t.Helper()
		if d.Start() == nil || d.Start().ID != "start" {
			t.Errorf("Start() = %v", d.Start())
		}
		if d.ErrorNode() == nil || d.ErrorNode().ID != "oops" {
			t.Errorf("ErrorNode() = %v", d.ErrorNode())
		}
		if n := d.Node("b"); n == nil || n.ID != "b" || n != &d.Nodes[3] {
			t.Errorf("Node(b) = %v", n)
		}
		if d.Node("nope") != nil {
			t.Error("Node(nope) != nil")
		}
		if got := edgeIDs(d.Outgoing("start")); !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("Outgoing(start) = %v", got)
		}
		if got := edgeIDs(d.Incoming("end")); !slices.Equal(got, []string{"3", "4", "5"}) {
			t.Errorf("Incoming(end) = %v", got)
		}
		if d.Outgoing("end") != nil || d.Incoming("start") != nil {
			t.Error("edges where there are none")
		}
	}
	check(t, d)

	// json.Unmarshal indexes too.
	var fromJSON model.Definition
	b, _ := json.Marshal(d)
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	check(t, &fromJSON)

	// Built in code without Index: the lookups scan, with the same answers.
	plain := &model.Definition{Nodes: slices.Clone(d.Nodes), Edges: slices.Clone(d.Edges)}
	check(t, plain)

	// A changed definition is not answered from a stale index.
	d.Nodes = append(d.Nodes, model.Node{ID: "c", Type: model.NodeAuto})
	d.Edges = append(d.Edges, model.Edge{ID: "6", From: "c", To: "end"})
	if d.Node("c") == nil || len(d.Incoming("end")) != 4 {
		t.Error("stale index answered after nodes and edges were added")
	}

	// The caller owns the slices it gets.
	out := d.Outgoing("start")
	out[0].To = "changed"
	if d.Outgoing("start")[0].To != "a" {
		t.Error("Outgoing returned the definition's own storage")
	}
}

func edgeIDs(es []model.Edge) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// TestDefinitionConcurrentReaders is meant for -race: a published definition is shared by goroutines.
func TestDefinitionConcurrentReaders(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"nodes": [{"id": "start", "type": "start", "trigger": {"kind": "manual"}}`)
	for i := range 100 {
		fmt.Fprintf(&sb, `, {"id": "n%d", "type": "auto"}`, i)
	}
	sb.WriteString(`], "edges": [`)
	for i := range 100 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"from": "start", "to": "n%d"}`, i)
	}
	sb.WriteString("]}")
	d := decode(t, sb.String())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("n%d", (i+g)%100)
				if n := d.Node(id); n == nil || n.ID != id {
					t.Errorf("Node(%s) = %v", id, n)
					return
				}
				if len(d.Incoming(id)) != 1 || d.Start() == nil {
					t.Errorf("lookups of %s failed", id)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(d.Outgoing("start")) != 100 {
		t.Errorf("Outgoing(start) has %d edges", len(d.Outgoing("start")))
	}
}

func TestTriggerHelpers(t *testing.T) {
	tr := model.Trigger{Kind: model.TriggerSyncAPI, AllowRemoteIPs: " 10.0.0.0/8, 1.2.3.4 ,::1,192.168.1.7/24"}
	ps, err := tr.RemoteIPPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("192.168.1.0/24"),
	}
	if !slices.Equal(ps, want) {
		t.Errorf("RemoteIPPrefixes = %v, want %v", ps, want)
	}
	if _, err := (model.Trigger{AllowRemoteIPs: "10.0.0.0/33"}).RemoteIPPrefixes(); err == nil {
		t.Error("a /33 was accepted")
	}
	if _, err := (model.Trigger{AllowRemoteIPs: "localhost"}).RemoteIPPrefixes(); err == nil {
		t.Error("a host name was accepted")
	}
	if ps, err := (model.Trigger{}).RemoteIPPrefixes(); err != nil || len(ps) != 0 {
		t.Errorf("empty allow list = %v, %v", ps, err)
	}
	if m := (model.Trigger{}).HTTPMethod(); m != "POST" {
		t.Errorf("default method = %s", m)
	}
	if m := (model.Trigger{Method: "get"}).HTTPMethod(); m != "GET" {
		t.Errorf("method = %s", m)
	}
	if l := (model.Trigger{}).Login(); l != model.LoginNone {
		t.Errorf("default login = %s", l)
	}
	start, end, err := (model.Trigger{StartAt: "2025-01-01T00:00:00Z"}).Window()
	if err != nil || !start.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || !end.IsZero() {
		t.Errorf("Window = %v %v %v", start, end, err)
	}
	if _, _, err := (model.Trigger{EndAt: "tomorrow"}).Window(); err == nil {
		t.Error("end_at tomorrow was accepted")
	}
}
