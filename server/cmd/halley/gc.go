package main

import (
	"errors"
	"log/slog"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// defaultGCPercent is the garbage collector's target serve runs with when GOGC is not set: the heap may grow to
// five times what is live between two collections, where Go's default (100) lets it double. A step allocates
// briefly (its rows, its JSON, its SQL text) and keeps little, so collections were a sixth of Halley's CPU at
// 100; at 400 Halley spent 13 % less CPU a step at 16 clients and 20 % less a fire in the storm, for +3–6 %
// steps/s and +8 % fired/s, against twice the resident memory at the storm's peak (docs/benchmarks.md, "A larger
// heap between collections").
const defaultGCPercent = 400

// memLimitRatio is the share of a container's memory limit (cgroup) serve takes as Go's soft memory limit when
// GOMEMLIMIT is not set: with the heap allowed to grow, the collector runs earlier as it nears the limit instead
// of letting the process be killed. The rest is for what Go does not count (stacks of C code, the page cache of
// files it writes) and headroom.
const memLimitRatio = 0.9

// tuneGC sets serve's collector target and, inside a container with a memory limit, Go's soft memory limit,
// leaving each alone when its Go variable (GOGC, GOMEMLIMIT) is set: those are the operator's and Go has read
// them already. limit is the container's memory limit (memlimit.FromCgroup; an error when there is none). It
// returns what is in force, for the log.
func tuneGC(getenv func(string) string, limit func() (uint64, error)) []any {
	attrs := make([]any, 0, 4)
	if v := getenv("GOGC"); v != "" {
		attrs = append(attrs, slog.String("gogc", v+" (GOGC)"))
	} else {
		debug.SetGCPercent(defaultGCPercent)
		attrs = append(attrs, slog.String("gogc", strconv.Itoa(defaultGCPercent)+" (Halley's default; GOGC sets another)"))
	}
	switch v := getenv("GOMEMLIMIT"); {
	case v != "":
		attrs = append(attrs, slog.String("memory_limit", v+" (GOMEMLIMIT)"))
	default:
		n, err := limit()
		switch {
		case err == nil && n > 0:
			soft := int64(float64(n) * memLimitRatio)
			debug.SetMemoryLimit(soft)
			attrs = append(attrs, slog.String("memory_limit", strconv.FormatInt(soft>>20, 10)+" MiB (90 % of the container's; GOMEMLIMIT sets another)"))
		case err == nil || errors.Is(err, memlimit.ErrNoLimit):
			attrs = append(attrs, slog.String("memory_limit", "none (no container limit; GOMEMLIMIT sets one)"))
		default:
			attrs = append(attrs, slog.String("memory_limit", "none (the container's limit could not be read: "+err.Error()+"; GOMEMLIMIT sets one)"))
		}
	}
	return attrs
}
