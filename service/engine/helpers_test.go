package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/template"
)

// t0 is where every fake clock starts.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// harness is one engine on a real store (SQLite or MySQL) with a fake clock and the real identity service.
type harness struct {
	t   *testing.T
	ctx context.Context
	s   *store.Store
	tpl *template.Service
	eng *engine.Engine
	clk *clock.Fake
	ids *identity.Service
}

func newHarness(t *testing.T, s *store.Store) *harness {
	t.Helper()
	return newHarnessWith(t, s, s, engine.Options{})
}

// newHarnessWith is newHarness with another directory and engine options (the clock and callback key are set).
func newHarnessWith(t *testing.T, s *store.Store, dir engine.Directory, opts engine.Options) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	tpl := template.New(s, template.Options{Clock: clk})
	opts.Clock, opts.CallbackKey = clk, []byte("callback-key-for-tests")
	h := &harness{t: t, ctx: context.Background(), s: s, tpl: tpl, clk: clk,
		eng: newEngine(t, s, tpl, dir, opts),
		ids: identity.New(s, identity.Options{Secret: []byte("test-secret-test-secret-test-secret"), BcryptCost: bcrypt.MinCost})}
	return h
}

// newEngine is an engine over st (a real store, or a test's wrapper of one) as the composition root builds it,
// minus what these tests do not use (enginetest).
func newEngine(t *testing.T, st engine.Store, tpl *template.Service, dir engine.Directory, opts engine.Options) *engine.Engine {
	t.Helper()
	return enginetest.New(t, st, tpl, dir, opts)
}

// sub returns the harness for a subtest (same engine and store, the subtest's t).
func (h *harness) sub(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// as returns the principal of a user; roles are what the token would carry.
func as(name string, roles ...string) *model.Principal {
	return &model.Principal{TenantID: model.DefaultTenant, Username: name, Roles: roles}
}

var admin = as("admin", model.RoleAdmin)

// users creates plain users.
func (h *harness) users(names ...string) {
	h.t.Helper()
	for _, n := range names {
		h.user(identity.CreateUserRequest{Username: n})
	}
}

// user creates a user (the password is filled in).
func (h *harness) user(req identity.CreateUserRequest) {
	h.t.Helper()
	req.Password = "pw-" + req.Username + "-123"
	if _, err := h.ids.CreateUser(h.ctx, model.DefaultTenant, req); err != nil {
		h.t.Fatalf("create user %s: %v", req.Username, err)
	}
}

// publish creates a template with the definition and publishes version 1.
func (h *harness) publish(key, def string) {
	h.t.Helper()
	if _, err := h.tpl.Create(h.ctx, admin, template.CreateRequest{Key: key, Definition: json.RawMessage(def)}); err != nil {
		h.t.Fatalf("create template %s: %v", key, err)
	}
	if _, err := h.tpl.Publish(h.ctx, admin, key); err != nil {
		h.t.Fatalf("publish %s: %v", key, err)
	}
}

// start starts an instance of key as initiator and returns its id.
func (h *harness) start(initiator, key, ctxDoc string) string {
	h.t.Helper()
	return h.startReq(initiator, engine.StartParams{Template: key, Context: json.RawMessage(ctxDoc)})
}

func (h *harness) startReq(initiator string, req engine.StartParams) string {
	h.t.Helper()
	v, err := h.eng.Start(h.ctx, as(initiator), req)
	if err != nil {
		h.t.Fatalf("start %s: %v", req.Template, err)
	}
	return v.ID
}

// get reads the instance and all its tasks from the database.
func (h *harness) get(id string) (*model.Instance, []*model.Task) {
	h.t.Helper()
	inst, tasks, err := h.s.GetInstance(h.ctx, model.DefaultTenant, id)
	if err != nil {
		h.t.Fatalf("get instance %s: %v", id, err)
	}
	return inst, tasks
}

func (h *harness) wantStatus(id string, want model.InstanceStatus) {
	h.t.Helper()
	inst, _ := h.get(id)
	if inst.Status != want {
		h.t.Fatalf("instance status %q, want %q; nodes %s; history %v", inst.Status, want, nodeStates(inst), h.actions(id))
	}
	if ended := inst.EndedAt != nil; ended != (want != model.StatusRunning) {
		h.t.Fatalf("instance %s has ended_at %v", want, inst.EndedAt)
	}
}

func nodeStates(inst *model.Instance) string {
	var parts []string
	for id, ns := range inst.State.Nodes {
		parts = append(parts, id+"="+string(ns.State))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// wantNodes checks node states; "" means the node never ran (not activated, not skipped).
func (h *harness) wantNodes(id string, want map[string]model.NodeState) {
	h.t.Helper()
	inst, _ := h.get(id)
	for node, st := range want {
		got := model.NodeNone
		if ns := inst.State.Nodes[node]; ns != nil {
			got = ns.State
		}
		if got != st {
			h.t.Fatalf("node %s is %q, want %q (all: %s)", node, got, st, nodeStates(inst))
		}
	}
}

// tasksOf returns the tasks of a node, in creation order.
func (h *harness) tasksOf(id, node string) []*model.Task {
	h.t.Helper()
	_, tasks := h.get(id)
	var out []*model.Task
	for _, t := range tasks {
		if t.NodeID == node {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *model.Task) int { return seqOf(a.ID) - seqOf(b.ID) })
	return out
}

// seqOf is the number at the end of a task id (<instance>.t<n>): creation order within an instance.
func seqOf(id string) int {
	i := strings.LastIndexByte(id, 't')
	n, _ := strconv.Atoi(id[i+1:])
	return n
}

// task returns the latest task of assignee at node.
func (h *harness) task(id, node, assignee string) *model.Task {
	h.t.Helper()
	var found *model.Task
	for _, t := range h.tasksOf(id, node) {
		if t.Assignee == assignee {
			found = t
		}
	}
	if found == nil {
		h.t.Fatalf("no task for %s at node %s", assignee, node)
	}
	return found
}

// wantTasks checks the status of each assignee's latest task at a node, and that the node has no other assignee.
func (h *harness) wantTasks(id, node string, want map[string]model.TaskStatus) {
	h.t.Helper()
	got := map[string]model.TaskStatus{}
	for _, t := range h.tasksOf(id, node) {
		got[t.Assignee] = t.Status
	}
	if len(got) != len(want) {
		h.t.Fatalf("node %s tasks %v, want %v", node, got, want)
	}
	for a, st := range want {
		if got[a] != st {
			h.t.Fatalf("node %s task of %s is %q, want %q (all %v)", node, a, got[a], st, got)
		}
	}
}

func (h *harness) approve(user, taskID string) error {
	_, err := h.eng.Approve(h.ctx, as(user), taskID, "ok", nil)
	return err
}

func (h *harness) reject(user, taskID string) error {
	_, err := h.eng.Reject(h.ctx, as(user), taskID, "no", nil)
	return err
}

// decide approves (or rejects) the latest task of user at node, failing the test on error.
func (h *harness) decide(id, node, user string, approve bool) {
	h.t.Helper()
	tk := h.task(id, node, user)
	var err error
	if approve {
		err = h.approve(user, tk.ID)
	} else {
		err = h.reject(user, tk.ID)
	}
	if err != nil {
		h.t.Fatalf("%s deciding %s at %s (approve=%v): %v", user, tk.ID, node, approve, err)
	}
}

// history returns the instance's history.
func (h *harness) history(id string) []model.HistoryEvent {
	h.t.Helper()
	hs, err := h.s.History(h.ctx, model.DefaultTenant, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return hs
}

// actions lists the history as "action" or "action:node".
func (h *harness) actions(id string) []string {
	h.t.Helper()
	var out []string
	for _, e := range h.history(id) {
		a := e.Action
		if e.NodeID != "" {
			a += ":" + e.NodeID
		}
		out = append(out, a)
	}
	return out
}

// count counts history events of an action (at a node when node is not "").
func (h *harness) count(id, action, node string) int {
	h.t.Helper()
	n := 0
	for _, e := range h.history(id) {
		if e.Action == action && (node == "" || e.NodeID == node) {
			n++
		}
	}
	return n
}

// contextValue reads a gjson path of the instance context.
func (h *harness) contextValue(id, path string) gjson.Result {
	h.t.Helper()
	inst, _ := h.get(id)
	return gjson.GetBytes(inst.Context, path)
}

// rows counts the rows of a table matching an optional condition.
func (h *harness) rows(table, where string, args ...any) int64 {
	h.t.Helper()
	var n int64
	q := h.s.DB().Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		h.t.Fatal(err)
	}
	return n
}

// events counts the history events with the action among the history rows matching where ("" for all): a step's
// events share a row, so a condition on action in SQL would miss all but the first.
func (h *harness) events(action, where string, args ...any) int64 {
	h.t.Helper()
	sqlDB, err := h.s.DB().DB()
	if err != nil {
		h.t.Fatal(err)
	}
	evs, err := store.ScanHistory(context.Background(), sqlDB, where, args...)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	for _, e := range evs {
		if e.Action == action {
			n++
		}
	}
	return n
}

// wantErr checks an error's kind and, when code is not "", its client code.
func wantErr(t *testing.T, err error, kind, code string) {
	t.Helper()
	var de *model.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v, want %s/%s", err, kind, code)
	}
	if de.Kind != kind || (code != "" && de.Code != code) {
		t.Fatalf("error %s/%s (%s), want %s/%s", de.Kind, de.Code, de.Message, kind, code)
	}
}
