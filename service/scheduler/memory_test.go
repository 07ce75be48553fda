package scheduler_test

import (
	"testing"

	"github.com/halley-bpm/halley/service/scheduler"
)

func newMemoryBackend(t *testing.T, opts scheduler.Options) backend {
	t.Helper()
	mem := func() *scheduler.Memory {
		m := scheduler.NewMemory(opts)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	m := mem()
	return backend{
		open: func() scheduler.Scheduler { return m },
		// The in-process heap loses everything when the process restarts: a new Memory is that restart.
		lose: func(scheduler.Scheduler) scheduler.Scheduler { m = mem(); return m },
	}
}

func TestMemoryContract(t *testing.T) { testContract(t, newMemoryBackend) }
