//go:build linux

package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/halley-bpm/halley/plugin/sdk"
)

// Run starts the plugin, waits for it (at most its timeout) and returns what happened. It kills the plugin's
// whole process group when the timeout passes or ctx is cancelled, and once more when the plugin exits, so
// neither a child left running nor a grandchild holding the pipes keeps Run waiting.
func (r *ProcessRunner) Run(ctx context.Context, spec Spec, in Input) (res Result) {
	res.StartedAt = time.Now()
	res.ExitCode = -1
	defer func() { res.EndedAt = time.Now() }()

	c := r.config(spec)
	argv, err := c.argv(spec)
	if err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		return res
	}
	stdin, err := marshalInput(in)
	if err != nil {
		res.Err = err
		return res
	}
	if r.WorkRoot == "" || !filepath.IsAbs(r.WorkRoot) {
		res.Err = fmt.Errorf("plugin runner: WorkRoot %q must be an absolute directory", r.WorkRoot)
		return res
	}
	if err := os.MkdirAll(r.WorkRoot, 0o755); err != nil {
		res.Err = fmt.Errorf("plugin runner: unable to create work root: %w", err)
		return res
	}
	workdir, err := os.MkdirTemp(r.WorkRoot, "run-")
	if err != nil {
		res.Err = fmt.Errorf("plugin runner: unable to create working directory: %w", err)
		return res
	}
	defer removeAll(workdir)
	if spec.Runtime == RuntimePython {
		if err := os.WriteFile(filepath.Join(workdir, sdk.FileName), sdk.Python(), 0o644); err != nil {
			res.Err = fmt.Errorf("plugin runner: unable to write the SDK: %w", err)
			return res
		}
	}
	if err := ctx.Err(); err != nil {
		res.Err = fmt.Errorf("plugin run canceled before it started: %w", err)
		return res
	}

	stdout := newCapWriter(c.outputCap, stderrTailForMessages)
	stderr := newCapWriter(c.outputCap, stderrTailForMessages)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = workdir
	cmd.Env = c.environ(workdir, in)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// After the plugin exits, Wait gives a process that escaped the group this long to close the pipes, then
	// closes them itself.
	cmd.WaitDelay = c.pipeGrace

	if err := cmd.Start(); err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: unable to start: %w", spec.Name, spec.Version, err)
		return res
	}
	pid := cmd.Process.Pid

	// Watch for the exit without reaping: until Wait reaps it, the leader's pid (= the group id) cannot be
	// reused, so killing -pid can only ever hit this plugin's processes.
	exited := make(chan error, 1)
	go func() { exited <- waitExitedNoReap(pid) }()

	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	var canceled, watchErr error
	select {
	case watchErr = <-exited:
	case <-timer.C:
		res.TimedOut = true
		killGroup(pid)
		watchErr = <-exited
	case <-ctx.Done():
		canceled = ctx.Err()
		killGroup(pid)
		watchErr = <-exited
	}
	// Whatever the plugin left behind in its group dies with the run.
	killGroup(pid)
	waitErr := cmd.Wait()

	res.Stdout, res.StdoutTruncated = stdout.buf, stdout.truncated
	res.Stderr, res.StderrTruncated = stderr.buf, stderr.truncated
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}

	switch {
	case res.TimedOut:
		res.Err = fmt.Errorf("plugin %s v%d timed out after %s", spec.Name, spec.Version, c.timeout)
	case canceled != nil:
		res.Err = fmt.Errorf("plugin %s v%d: run canceled: %w", spec.Name, spec.Version, canceled)
	case watchErr != nil:
		res.Err = fmt.Errorf("plugin %s v%d: unable to wait for the process: %w", spec.Name, spec.Version, watchErr)
	case res.ExitCode != 0:
		res.Err = exitError(describeExit(spec, cmd.ProcessState), stderr.tail)
	case waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay):
		// ErrWaitDelay alone means an escaped process held the pipes after a clean exit: the plugin's own
		// output is complete, so that is not the plugin's failure.
		res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, waitErr)
	case res.StdoutTruncated:
		res.Err = fmt.Errorf("plugin %s v%d printed more than %d bytes on stdout; the result must be one JSON object",
			spec.Name, spec.Version, c.outputCap)
	default:
		out, err := parseOutput(res.Stdout)
		if err != nil {
			res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		} else {
			res.Output = out
		}
	}
	return res
}

func describeExit(spec Spec, ps *os.ProcessState) string {
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("plugin %s v%d killed by signal %s", spec.Name, spec.Version, ws.Signal())
		}
	}
	code := -1
	if ps != nil {
		code = ps.ExitCode()
	}
	return fmt.Sprintf("plugin %s v%d exited with code %d", spec.Name, spec.Version, code)
}

// waitExitedNoReap blocks until the child pid has exited, leaving it a zombie for cmd.Wait to reap.
func waitExitedNoReap(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// killGroup sends SIGKILL to every process in the group led by pid. ESRCH (nobody left) is fine.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// removeAll removes a run's working directory even when the plugin left read-only folders in it.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
