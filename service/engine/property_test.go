package engine_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// structGen builds random structured templates: sequences of approvals and auto nodes, and splits (parallel,
// exclusive with a default branch, multi-choice on flags) whose branches are again such blocks, merged by a node
// with a random join (and, or, {"min":N}).
type structGen struct {
	rnd   *rand.Rand
	nodes []string
	edges []string
	n     int
	// risky: routing may leave chosen branches nowhere (multi-choice without a default, min joins) — the instance
	// may then fail with no_route even when everybody approves.
	risky bool
}

var propUsers = []string{"p0", "p1", "p2", "p3"}

func (g *structGen) id(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%d", prefix, g.n)
}

func (g *structGen) edge(from, to, extra string) {
	e := fmt.Sprintf(`{"from":%q,"to":%q%s}`, from, to, extra)
	g.edges = append(g.edges, e)
}

// block adds 1-3 elements after from (the first one entered through an edge with extra) and returns the last node.
func (g *structGen) block(from, extra string, depth int) string {
	k := 1 + g.rnd.IntN(3)
	for i := 0; i < k; i++ {
		from = g.element(from, extra, depth)
		extra = ""
	}
	return from
}

func (g *structGen) element(from, extra string, depth int) string {
	if depth > 0 && g.rnd.IntN(3) == 0 {
		return g.split(from, extra, depth)
	}
	var id string
	if g.rnd.IntN(3) == 0 {
		id = g.id("auto")
		g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"auto"}`, id))
	} else {
		id = g.id("appr")
		if g.rnd.IntN(4) == 0 {
			a, b := propUsers[g.rnd.IntN(len(propUsers))], propUsers[g.rnd.IntN(len(propUsers))]
			g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"approval","sign":"all","approvers":{"users":[%q,%q]}}`, id, a, b))
		} else {
			g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"approval","approvers":{"users":[%q]}}`, id, propUsers[g.rnd.IntN(len(propUsers))]))
		}
	}
	g.edge(from, id, extra)
	return id
}

func (g *structGen) split(from, extra string, depth int) string {
	fork := g.id("fork")
	g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"auto"}`, fork))
	g.edge(from, fork, extra)
	k := 2 + g.rnd.IntN(2)
	kind := g.rnd.IntN(3) // 0 parallel, 1 exclusive, 2 multi-choice
	var exits []string
	hasDefault := false
	for b := 0; b < k; b++ {
		var cond string
		switch kind {
		case 1:
			if b == k-1 {
				cond = `,"default":true`
			} else {
				cond = fmt.Sprintf(`,"condition":{"sel":%d}`, b)
			}
		case 2:
			if b == k-1 && g.rnd.IntN(2) == 0 {
				cond, hasDefault = `,"default":true`, true
			} else {
				cond = fmt.Sprintf(`,"condition":{"f%d":true}`, g.rnd.IntN(4))
			}
		}
		exits = append(exits, g.block(fork, cond, depth-1))
	}
	if kind == 2 && !hasDefault {
		g.risky = true // a multi-choice whose flags are all false has no route
	}
	merge := g.id("merge")
	var join string
	switch g.rnd.IntN(6) {
	case 0:
		join = `,"join":"or"`
	case 1:
		join = fmt.Sprintf(`,"join":{"min":%d}`, 1+g.rnd.IntN(k))
		g.risky = true
	}
	if g.rnd.IntN(3) == 0 {
		g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"approval","approvers":{"users":[%q]}%s}`, merge, propUsers[g.rnd.IntN(len(propUsers))], join))
	} else {
		g.nodes = append(g.nodes, fmt.Sprintf(`{"id":%q,"type":"auto"%s}`, merge, join))
	}
	for _, x := range exits {
		g.edge(x, merge, "")
	}
	return merge
}

func (g *structGen) definition() string {
	g.nodes = append(g.nodes, `{"id":"start","type":"start","trigger":{"kind":"manual"}}`)
	last := g.block("start", "", 3)
	g.nodes = append(g.nodes, `{"id":"end","type":"end"}`)
	g.edge(last, "end", "")
	return `{"nodes":[` + strings.Join(g.nodes, ",") + `],"edges":[` + strings.Join(g.edges, ",") + `]}`
}

// TestJoinProperties runs random structured templates with random contexts and random decisions (SQLite) and
// checks that an instance never stays running with nothing active, never deadlocks (running with no task to
// decide: these templates have no timers, plugins or callbacks), ends with nothing open, and completes when
// everybody approves and routing cannot strand a branch. HALLEY_PROPERTY_SEED and HALLEY_PROPERTY_RUNS vary it.
func TestJoinProperties(t *testing.T) {
	seed, runs := uint64(19), 160
	if v, err := strconv.ParseUint(os.Getenv("HALLEY_PROPERTY_SEED"), 10, 64); err == nil {
		seed = v
	}
	if v, err := strconv.Atoi(os.Getenv("HALLEY_PROPERTY_RUNS")); err == nil {
		runs = v
	}
	s := storetest.Open(t, store.SQLite)
	h := newHarness(t, s)
	h.users(append([]string{"starter"}, propUsers...)...)
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	outcomes := map[model.InstanceStatus]int{}
	for i := 0; i < runs; i++ {
		g := &structGen{rnd: rnd}
		def := g.definition()
		key := fmt.Sprintf("prop-%d", i)
		h.publish(key, def)
		for run := 0; run < 2; run++ {
			ctx := fmt.Sprintf(`{"sel":%d,"f0":%t,"f1":%t,"f2":%t,"f3":%t}`, rnd.IntN(3), rnd.IntN(2) == 0, rnd.IntN(2) == 0, rnd.IntN(2) == 0, rnd.IntN(2) == 0)
			rejectRate := []int{0, 10, 40}[rnd.IntN(3)]
			id := h.start("starter", key, ctx)
			rejected := false
			for stepN := 0; ; stepN++ {
				inst, tasks := h.get(id)
				active := 0
				for _, ns := range inst.State.Nodes {
					if ns.Active() {
						active++
					}
				}
				if inst.Ended() {
					if active > 0 {
						t.Fatalf("seed %d template %d: instance %s ended %s with %d active nodes: %s\n%s", seed, i, id, inst.Status, active, nodeStates(inst), def)
					}
					for _, tk := range tasks {
						if tk.Open() {
							t.Fatalf("seed %d template %d: task %s open after the end\n%s", seed, i, tk.ID, def)
						}
					}
					if inst.Status == model.StatusFailed && (inst.State.Error == nil || inst.State.Error.Code != model.NodeErrNoRoute || !g.risky) {
						t.Fatalf("seed %d template %d: failed with %+v (risky %v)\n%s", seed, i, inst.State.Error, g.risky, def)
					}
					if !rejected && !g.risky && inst.Status != model.StatusCompleted {
						t.Fatalf("seed %d template %d ctx %s: everybody approved but the instance is %s (%+v): %s\nhistory %v\n%s",
							seed, i, ctx, inst.Status, inst.State.Error, nodeStates(inst), h.actions(id), def)
					}
					outcomes[inst.Status]++
					break
				}
				if active == 0 {
					t.Fatalf("seed %d template %d: instance %s is running with no active node: %s\nhistory %v\n%s", seed, i, id, nodeStates(inst), h.actions(id), def)
				}
				var pending []*model.Task
				for _, tk := range tasks {
					if tk.Status == model.TaskPending {
						pending = append(pending, tk)
					}
				}
				if len(pending) == 0 {
					t.Fatalf("seed %d template %d: deadlock — running, active %s, but no task to decide\nhistory %v\n%s", seed, i, nodeStates(inst), h.actions(id), def)
				}
				if stepN > 200 {
					t.Fatalf("seed %d template %d: still running after 200 decisions\n%s", seed, i, def)
				}
				tk := pending[rnd.IntN(len(pending))]
				var err error
				if rnd.IntN(100) < rejectRate {
					rejected = true
					err = h.reject(tk.Assignee, tk.ID)
				} else {
					err = h.approve(tk.Assignee, tk.ID)
				}
				if err != nil {
					t.Fatalf("seed %d template %d: deciding %s: %v\n%s", seed, i, tk.ID, err, def)
				}
			}
		}
	}
	t.Logf("seed %d: %d templates, outcomes %v", seed, runs, outcomes)
	if outcomes[model.StatusCompleted] == 0 || outcomes[model.StatusRejected] == 0 {
		t.Fatalf("the generator explores too little: outcomes %v", outcomes)
	}
}
