package engine

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Group commit. Concurrent steps of different instances share one transaction: one locking read for all of them,
// one multi-row statement per kind of write and one commit, instead of all of those per step. Starts join too:
// their new instances are inserted in the group's transaction. A step joins a queue; while fewer groups are in
// flight than may be, its own goroutine starts a group leader, which takes the queued steps (one tenant, distinct
// instances, at most groupMax) and runs them together. When the database is idle a step runs
// alone at once, so grouping adds no wait: groups form only from steps that would otherwise have queued for a
// connection. How many groups may be in flight is the engine's GroupWorkers (DefaultGroupWorkers: one per two
// cores Halley may use, one to eight): few leaders make large groups, and on a machine whose cores the steps already
// fill, more transactions at once only split the same steps into more, smaller ones — each paying its own lock
// read, statements and commit (docs/engine.md "Group commit").
//
// Overlap (on unless Options.NoGroupOverlap): while the workers' groups are at the database, one more group may
// start once the queue holds as many steps as each of them does on average. The leader's core then builds the
// next group while the database runs the last one, and the groups keep the size the queue would have given them
// anyway; started at once instead, the extra group took the first step that came and groups of eight became groups
// of one or two. On two cores it ran 16 % more steps a second at 16 clients and 15 % more at 100, the machine 82–89 %
// busy instead of 70–77 % (docs/benchmarks.md, "A second group once the queue is full").
//
// The outcome of each step is its own: a step whose function fails is left out of the transaction and gets its
// error; a group whose transaction fails as a whole (a database error, or a step invalid in a way only the write
// shows) has each of its steps run again alone.
//
// Timers go first: while the engine fires timers (FireTimers), at most groupWorkersWhileFiring groups run — one.
// The steps queued meanwhile go into that group together — the same steps in fewer, larger transactions — and the
// database's CPU goes to the fires first, so that a step load does not make due timers late (docs/engine.md
// "Group commit"). Two groups beside the fires (the limit before) left the timers of a saturated 2-core machine
// on MariaDB 10.11 1.5–2.4 times as late at p99 (docs/benchmarks.md, "One group while timers fire").

const (
	// groupWorkers is the most groups in flight by default (DefaultGroupWorkers), and what a grouper without
	// workersMax allows.
	groupWorkers            = 8
	groupWorkersWhileFiring = 1
	groupMax                = 64
	// groupIdle is how long a leader waits for a step before its goroutine exits.
	groupIdle = 10 * time.Second
	// groupTimeout bounds a group's transaction: it runs for several requests, so no single request's
	// cancellation may abort it.
	groupTimeout = 30 * time.Second
)

// groupStep is a step waiting for its group: an update of instance id by fn, or the start of a new instance
// (create, already run; id is its new id).
type groupStep struct {
	ctx    context.Context
	tenant string
	id     string
	fn     func(w *model.Work) error
	create *model.Work
	done   chan error
}

// errGroupFailed sends a step of a failed group back to run alone.
var errGroupFailed = errors.New("engine: the group's transaction failed")

type grouper struct {
	store Store
	// workersMax is how many groups may be in flight (0: groupWorkers).
	workersMax int

	// firing counts the timer batches being fired (FireTimers); groups yield to them.
	firing atomic.Int32

	// overlap lets one more group than workers() start while the others are at the database, once the queue holds
	// as many steps as they do on average (mayLead).
	overlap bool

	mu       sync.Mutex
	queue    []*groupStep
	inflight int
	// flying and groupsFlying are the steps and the groups taken and not yet answered.
	flying, groupsFlying int
	// Leaders that found the queue empty wait a while for the next step (parked, woken through wake) before they
	// exit: a goroutine started for each group grew its stack afresh every time (5.8 % of Halley's CPU in
	// copystack at 16 clients). wake holds one token per parked leader a submitter has taken.
	parked int
	wake   chan struct{}
	idle   time.Duration // how long a leader stays parked; 0 = groupIdle
	stats  groupStats
}

// workers is how many groups may run now.
func (g *grouper) workers() int {
	n := g.maxWorkers()
	if g.firing.Load() > 0 {
		return min(n, groupWorkersWhileFiring)
	}
	return n
}

// maxWorkers is how many groups may be in flight when no timer fires.
func (g *grouper) maxWorkers() int {
	if g.workersMax > 0 {
		return g.workersMax
	}
	return groupWorkers
}

// groupWorkers is how many groups the engine lets run at once: GroupWorkers, or DefaultGroupWorkers when unset.
func (o Options) groupWorkers() int {
	if o.GroupWorkers > 0 {
		return o.GroupWorkers
	}
	return DefaultGroupWorkers()
}

// DefaultGroupWorkers is how many group transactions run at once by default: one per two cores this process may
// use (GOMAXPROCS), at least one and at most eight. While a leader's group waits for its commit, the steps that
// arrive queue and go into its next group together; a second leader on the same two cores takes them sooner but
// in groups half the size, each paying its own statements and commit. On two cores, one leader instead of two
// gave steps at 16 clients 0.38–0.57 of the raw commit rate against 0.30–0.46, with a quarter less CPU a step in
// both Halley and MariaDB, and at 100 clients 0.73–0.83 against 0.68–0.72 (docs/benchmarks.md, "One leader per
// two cores"); two instead of eight had taken a third off MariaDB's CPU a step before ("Fewer, larger groups").
func DefaultGroupWorkers() int {
	return max(1, min(groupWorkers, runtime.GOMAXPROCS(0)/2))
}

// groupStats counts group commits since the engine started (the engine's tests read them).
type groupStats struct {
	Submitted int64 // steps that went through the group queue
	Groups    int64 // transactions of two or more steps
	Steps     int64 // steps that ran in them
	Fallbacks int64 // groups whose transaction failed, their steps then run alone
	Leaders   int64 // leader goroutines started
}

// update runs fn on instance id in the next group it fits and returns its outcome; errGroupFailed when the
// group's transaction failed as a whole (the caller runs fn again alone).
func (g *grouper) update(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	st := &groupStep{ctx: ctx, tenant: tenant, id: id, fn: fn, done: make(chan error, 1)}
	g.submit(st)
	return <-st.done
}

// create stores a started instance in the next group it fits; errGroupFailed as for update.
func (g *grouper) create(ctx context.Context, w *model.Work) error {
	st := &groupStep{ctx: ctx, tenant: w.Instance.TenantID, id: w.Instance.ID, create: w, done: make(chan error, 1)}
	g.submit(st)
	return <-st.done
}

func (g *grouper) submit(st *groupStep) {
	g.mu.Lock()
	g.queue = append(g.queue, st)
	g.stats.Submitted++
	lead := g.mayLead(g.inflight)
	start := false
	if lead {
		g.inflight++
		if g.parked > 0 {
			g.parked--
			g.wakeChan() <- struct{}{} // never blocks: one slot per parked leader
		} else {
			start = true
			g.stats.Leaders++
		}
	}
	g.mu.Unlock()
	if start {
		go g.lead()
	}
}

// mayLead reports whether a leader may take the queue while other leaders are counted
// in flight (called with mu held).
func (g *grouper) mayLead(others int) bool {
	w := g.workers()
	if others < w {
		return true
	}
	if !g.overlap || others > w || g.firing.Load() > 0 || g.groupsFlying == 0 {
		return false
	}
	return len(g.queue)*g.groupsFlying >= g.flying
}

// wakeChan is wake, made on first use (called with mu held).
func (g *grouper) wakeChan() chan struct{} {
	if g.wake == nil {
		g.wake = make(chan struct{}, g.maxWorkers()+1)
	}
	return g.wake
}

// lead runs groups until the queue is empty, or until more leaders run than may now (timers began to fire: the
// others go on with the queue). With the queue empty it parks for up to groupIdle, and leads again when a
// submitter wakes it.
func (g *grouper) lead() {
	for {
		g.mu.Lock()
		if g.inflight > g.workers() && !g.overlap {
			g.inflight--
			g.mu.Unlock()
			return
		}
		if len(g.queue) == 0 || !g.mayLead(g.inflight-1) {
			g.inflight--
			g.parked++
			wake := g.wakeChan()
			g.mu.Unlock()
			if !g.park(wake) {
				return
			}
			continue // the submitter that woke this leader counted it in flight again
		}
		steps := g.take()
		g.flying += len(steps)
		g.groupsFlying++
		g.mu.Unlock()
		g.run(steps)
		g.mu.Lock()
		g.flying -= len(steps)
		g.groupsFlying--
		g.mu.Unlock()
	}
}

// park waits for a wake-up token: true when one came, false when the leader gave up after groupIdle (and is no
// longer counted as parked). A token sent before the give-up is taken: tokens are only ever sent for parked
// leaders, so when none is left uncounted one of them is this leader's.
func (g *grouper) park(wake chan struct{}) bool {
	d := g.idle
	if d <= 0 {
		d = groupIdle
	}
	idle := time.NewTimer(d)
	defer idle.Stop()
	select {
	case <-wake:
		return true
	case <-idle.C:
	}
	g.mu.Lock()
	if g.parked > 0 {
		g.parked--
		g.mu.Unlock()
		return false
	}
	g.mu.Unlock()
	<-wake
	return true
}

// take removes the next group from the queue: the oldest step and the queued steps of its tenant on other
// instances, oldest first. Steps of an instance already in the group wait for the next one. Called with mu held.
func (g *grouper) take() []*groupStep {
	tenant := g.queue[0].tenant
	seen := make(map[string]bool, min(len(g.queue), groupMax))
	var steps []*groupStep
	rest := g.queue[:0]
	for _, st := range g.queue {
		if len(steps) < groupMax && st.tenant == tenant && !seen[st.id] {
			seen[st.id] = true
			steps = append(steps, st)
			continue
		}
		rest = append(rest, st)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return steps
}

func (g *grouper) run(steps []*groupStep) {
	if len(steps) == 1 {
		// Alone: on the request's own context, exactly as without grouping.
		st := steps[0]
		if st.create != nil {
			st.done <- g.store.CreateInstance(st.ctx, st.create)
		} else {
			st.done <- g.store.UpdateInstance(st.ctx, st.tenant, st.id, st.fn)
		}
		return
	}
	byID := make(groupSteps, len(steps))
	var (
		ids     []string
		creates []*model.Work
	)
	for _, st := range steps {
		if st.create != nil {
			creates = append(creates, st.create)
			continue
		}
		byID[st.id] = st
		ids = append(ids, st.id)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(steps[0].ctx), groupTimeout)
	defer cancel()
	res, err := g.store.UpdateInstances(ctx, steps[0].tenant, ids, byID.apply, creates...)
	g.mu.Lock()
	g.stats.Groups++
	g.stats.Steps += int64(len(steps))
	if err != nil {
		g.stats.Fallbacks++
	}
	g.mu.Unlock()
	for _, st := range steps {
		switch {
		case err != nil:
			st.done <- errGroupFailed
		case st.create != nil:
			st.done <- nil
		default:
			st.done <- res[st.id]
		}
	}
}

// groupSteps are a group's updates by instance id.
type groupSteps map[string]*groupStep

// apply runs the step of the work's instance (the store's fn for the whole group). Each step's fn turns its own
// panic into its error (stepTx.apply), so that one step cannot take down a group leader.
func (gs groupSteps) apply(w *model.Work) error { return gs[w.Instance.ID].fn(w) }
