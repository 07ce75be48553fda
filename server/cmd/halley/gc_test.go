package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneGC: serve runs at GOGC=400 unless GOGC is set, and takes 90 % of a container's memory limit as Go's
// soft limit unless GOMEMLIMIT is set; the log says which. The settings are the process's: the cases run one
// after the other and put back what was there.
func TestTuneGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	const gib = 1 << 30
	unlimited := debug.SetMemoryLimit(-1) // Go's default: math.MaxInt64, unless the test runs under GOMEMLIMIT

	cases := []struct {
		name      string
		env       map[string]string
		limit     func() (uint64, error)
		percent   int   // in force afterwards
		memLimit  int64 // in force afterwards
		logs      []string
		askLimits bool
	}{
		{"defaults, no container limit", nil, func() (uint64, error) { return 0, memlimit.ErrNoLimit },
			defaultGCPercent, unlimited, []string{"400 (Halley's default", "none (no container limit"}, true},
		{"a container of 10 GiB", nil, func() (uint64, error) { return 10 * gib, nil },
			defaultGCPercent, 9 * gib, []string{"9216 MiB (90 % of the container's"}, true},
		{"the limit cannot be read", nil, func() (uint64, error) { return 0, errors.New("no mountinfo") },
			defaultGCPercent, unlimited, []string{"could not be read: no mountinfo"}, true},
		{"GOGC and GOMEMLIMIT set", map[string]string{"GOGC": "150", "GOMEMLIMIT": "2GiB"},
			func() (uint64, error) { return gib, nil }, 100, unlimited, []string{"150 (GOGC)", "2GiB (GOMEMLIMIT)"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(unlimited)
			asked := false
			attrs := tuneGC(env(c.env), func() (uint64, error) { asked = true; return c.limit() })
			if got := debug.SetGCPercent(100); got != c.percent {
				t.Errorf("GC percent %d, want %d", got, c.percent)
			}
			if got := debug.SetMemoryLimit(-1); got != c.memLimit {
				t.Errorf("memory limit %d, want %d", got, c.memLimit)
			}
			if asked != c.askLimits {
				t.Errorf("container limit read: %v, want %v", asked, c.askLimits)
			}
			logged := fmt.Sprint(attrs...)
			for _, want := range c.logs {
				if !strings.Contains(logged, want) {
					t.Errorf("log %q lacks %q", logged, want)
				}
			}
		})
	}
}
