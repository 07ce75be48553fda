//go:build !linux

package plugin

import (
	"context"
	"errors"
	"time"
)

// Run is only implemented on Linux, where the runner can watch a plugin's exit without reaping it and kill its
// whole process group safely. Elsewhere every run fails, so Halley still builds for development.
func (r *ProcessRunner) Run(ctx context.Context, spec Spec, in Input) Result {
	now := time.Now()
	return Result{ExitCode: -1, StartedAt: now, EndedAt: now,
		Err: errors.New("plugin: the process runner needs Linux")}
}
