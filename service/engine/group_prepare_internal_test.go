package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// prepStore is a StepPreparer whose commits the test holds: it records each commit's instances and the steps run
// on held rows, and sends the ids whose rows it does not hold ("u-...") to the locked path, which it records too.
type prepStore struct {
	Store // only the methods below are called
	hold  chan struct{}
	// entered receives each held commit's instances as it starts.
	entered chan []string

	mu       sync.Mutex
	prepared []string   // instances a step ran on held rows, in order
	commits  [][]string // instances of each commit of prepared steps, creates as "new:<id>"
	locked   [][]string // instances of each transaction on a locked read
	stale    int        // commits to fail with model.ErrStalePrepared
}

func newPrepStore() *prepStore {
	return &prepStore{hold: make(chan struct{}), entered: make(chan []string, 64)}
}

func (p *prepStore) PrepareStep(tenant, id string, fn func(w *model.Work) error) (*model.PreparedStep, bool) {
	if strings.HasPrefix(id, "u-") {
		return nil, false
	}
	w := &model.Work{Instance: &model.Instance{ID: id, TenantID: tenant}}
	if err := fn(w); err != nil {
		return nil, false
	}
	p.mu.Lock()
	p.prepared = append(p.prepared, id)
	p.mu.Unlock()
	return &model.PreparedStep{Work: w, Rev: 1}, true
}

func (p *prepStore) CommitPrepared(_ context.Context, _ string, steps []*model.PreparedStep, creates ...*model.Work) error {
	var ids []string
	for _, s := range steps {
		ids = append(ids, s.Work.Instance.ID)
	}
	for _, w := range creates {
		ids = append(ids, "new:"+w.Instance.ID)
	}
	slices.Sort(ids)
	p.entered <- ids
	<-p.hold
	p.mu.Lock()
	defer p.mu.Unlock()
	p.commits = append(p.commits, ids)
	if p.stale > 0 {
		p.stale--
		return fmt.Errorf("fake: %w", model.ErrStalePrepared)
	}
	return nil
}

func (p *prepStore) UpdateInstance(_ context.Context, tenant, id string, fn func(w *model.Work) error) error {
	_, err := p.UpdateInstances(context.Background(), tenant, []string{id}, fn)
	return err
}

func (p *prepStore) UpdateInstances(_ context.Context, tenant string, ids []string, fn func(w *model.Work) error, _ ...*model.Work) (map[string]error, error) {
	p.mu.Lock()
	p.locked = append(p.locked, slices.Sorted(slices.Values(ids)))
	p.mu.Unlock()
	out := make(map[string]error, len(ids))
	for _, id := range ids {
		out[id] = fn(&model.Work{Instance: &model.Instance{ID: id, TenantID: tenant}})
	}
	return out, nil
}

func (p *prepStore) state() (prepared []string, commits, locked [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.prepared), slices.Clone(p.commits), slices.Clone(p.locked)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestStepsRunAsTheyArrive: with a StepPreparer, the steps submitted while a group is at the database have run
// (each on its submitter's goroutine) before that group returns, and the next group only writes them, all in one
// commit. A second step of an instance already in the grouper is not run ahead on rows its first step is about
// to change: it waits for its own group, and runs there once it is its instance's only one.
func TestStepsRunAsTheyArrive(t *testing.T) {
	ps := newPrepStore()
	g := newGrouper(ps, 1)
	if g.prep == nil {
		t.Fatal("the grouper does not use the store's StepPreparer")
	}
	var wg sync.WaitGroup
	ran := atomic.Int32{}
	step := func(id string) {
		wg.Go(func() {
			if err := g.update(context.Background(), "t", id, func(*model.Work) error { ran.Add(1); return nil }); err != nil {
				t.Errorf("step of %s: %v", id, err)
			}
		})
	}
	step("a")
	if got := <-ps.entered; !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first commit %v, want [a]", got)
	}
	// While a's commit is held: three instances, and two steps of "e".
	for _, id := range []string{"b", "c", "d", "e", "e"} {
		step(id)
	}
	waitFor(t, "the five steps to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 5
	})
	if prepared, _, _ := ps.state(); !slices.Equal(slices.Sorted(slices.Values(prepared)), []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("run ahead while the first group was at the database: %v, want a b c d e (one step of e)", prepared)
	}
	ps.hold <- struct{}{} // a
	if got := <-ps.entered; !slices.Equal(got, []string{"b", "c", "d", "e"}) {
		t.Fatalf("second commit %v, want [b c d e] in one", got)
	}
	ps.hold <- struct{}{}
	if got := <-ps.entered; !slices.Equal(got, []string{"e"}) {
		t.Fatalf("third commit %v, want e's second step", got)
	}
	ps.hold <- struct{}{}
	wg.Wait()
	prepared, _, locked := ps.state()
	if len(locked) != 0 {
		t.Fatalf("steps ran on a locked read: %v", locked)
	}
	if len(prepared) != 6 || prepared[5] != "e" || ran.Load() != 6 {
		t.Fatalf("prepared %v, %d steps ran: want e's second step run last, by the leader, once its first was written", prepared, ran.Load())
	}
	g.mu.Lock()
	st := g.stats
	g.mu.Unlock()
	if st.Prepared != 6 || st.Groups != 1 || st.Steps != 4 || st.Fallbacks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPreparedGroupsFallBack: a group whose prepared steps went stale runs again on a locked read, every step of
// it (not a failure of the group); steps whose rows are not held, or that fail on them, run on a locked read,
// each with its own outcome.
func TestPreparedGroupsFallBack(t *testing.T) {
	ps := newPrepStore()
	ps.stale = 1
	g := newGrouper(ps, 1)
	refused := errors.New("refused")
	var wg sync.WaitGroup
	results := sync.Map{}
	step := func(id string) {
		wg.Go(func() {
			err := g.update(context.Background(), "t", id, func(w *model.Work) error {
				if strings.HasPrefix(w.Instance.ID, "x-") {
					return refused
				}
				return nil
			})
			results.Store(id, err)
		})
	}
	step("a")
	<-ps.entered // a's commit, held: the next steps queue
	for _, id := range []string{"b", "c", "u-1", "x-1"} {
		step(id)
	}
	waitFor(t, "the steps to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 4
	})
	ps.hold <- struct{}{} // a: stale, run again on a locked read
	if got := <-ps.entered; !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("second commit %v, want [b c]", got)
	}
	ps.hold <- struct{}{}
	wg.Wait()
	for _, id := range []string{"a", "b", "c", "u-1"} {
		if err, _ := results.Load(id); err != nil {
			t.Errorf("step of %s: %v", id, err)
		}
	}
	if err, _ := results.Load("x-1"); !errors.Is(err.(error), refused) {
		t.Errorf("step of x-1: %v, want its own refusal", err)
	}
	_, commits, locked := ps.state()
	if !slices.EqualFunc(locked, [][]string{{"a"}, {"u-1", "x-1"}}, slices.Equal) {
		t.Fatalf("locked reads %v, want a (stale) alone, then u-1 and x-1 together", locked)
	}
	if len(commits) != 2 {
		t.Fatalf("commits %v", commits)
	}
	g.mu.Lock()
	st := g.stats
	g.mu.Unlock()
	if st.Stale != 1 || st.Fallbacks != 0 || st.Prepared != 2 {
		t.Fatalf("stats %+v: want one stale commit, no fallback, b and c written prepared", st)
	}
}
