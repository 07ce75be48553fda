package plugin_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// loggingQueue is a fakeQueue that can take a run's log record with its result (plugin.LoggingQueue), and says
// whether it kept it as logged(job) decides.
type loggingQueue struct {
	*fakeQueue
	logged func(job plugin.Job) (bool, error)
	mu     sync.Mutex
	recs   []*model.PluginRunLog
}

func (q *loggingQueue) CompleteLogged(ctx context.Context, worker string, job plugin.Job, res plugin.Result, rec *model.PluginRunLog) (bool, error) {
	ok, err := q.logged(job)
	if err != nil {
		return false, err
	}
	if err := q.Complete(ctx, worker, job, res); err != nil {
		return false, err
	}
	if ok {
		q.mu.Lock()
		q.recs = append(q.recs, rec)
		q.mu.Unlock()
	}
	return ok, nil
}

// runLogStore counts the records the executor wrote on its own (DBLog.Write).
type runLogStore struct {
	mu   sync.Mutex
	recs []*model.PluginRunLog
}

func (s *runLogStore) AppendRunLog(_ context.Context, l *model.PluginRunLog) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, l)
	return nil
}

func (s *runLogStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// TestExecutorWritesTheLogWithTheResult: with a database run log and a queue that can write the record in the
// result's transaction, the record goes there and not a second time on its own; when the queue did not write it
// (the run was finished already, no instance to step) or could not complete at all, the executor writes it itself,
// once. Every attempt's record is kept either way.
func TestExecutorWritesTheLogWithTheResult(t *testing.T) {
	cases := []struct {
		name              string
		logged            func(plugin.Job) (bool, error)
		inQueue, onItsOwn int
	}{
		{"written with the result", func(plugin.Job) (bool, error) { return true, nil }, 1, 0},
		{"the queue did not write it", func(plugin.Job) (bool, error) { return false, nil }, 0, 1},
		{"the result could not be recorded", func(plugin.Job) (bool, error) { return false, errors.New("database gone") }, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &loggingQueue{fakeQueue: newFakeQueue(1), logged: c.logged}
			st := &runLogStore{}
			dl, err := plugin.NewDBLog(st)
			if err != nil {
				t.Fatal(err)
			}
			r := runnerFunc(func(_ context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
				res := ok(in)
				res.Stdout = []byte(`{"context":{}}`)
				return res
			})
			done, _, stop := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 1, Logs: dl})
			waitCompletion(t, done)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			q.mu.Lock()
			inQueue := len(q.recs)
			var rec *model.PluginRunLog
			if inQueue > 0 {
				rec = q.recs[0]
			}
			q.mu.Unlock()
			if inQueue != c.inQueue || st.count() != c.onItsOwn {
				t.Fatalf("records written with the result %d (want %d), on their own %d (want %d)", inQueue, c.inQueue, st.count(), c.onItsOwn)
			}
			if rec == nil && len(st.recs) > 0 {
				rec = st.recs[0]
			}
			if rec == nil || rec.RunID != "run-000" || rec.Attempt != 1 || rec.Plugin != "p" || rec.InstanceID != "inst" ||
				rec.TenantID != model.DefaultTenant || rec.Record == "" {
				t.Fatalf("record = %+v", rec)
			}
		})
	}
}
