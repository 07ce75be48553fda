//go:build linux

package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
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
	if err := c.check(spec); err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		return res
	}
	stdin, err := marshalInput(in)
	if err != nil {
		res.Err = err
		return res
	}
	root := r.WorkRoot
	if r.Sandbox != nil {
		root = r.Sandbox.WorkRoot()
	}
	if root == "" || !filepath.IsAbs(root) {
		res.Err = fmt.Errorf("plugin runner: WorkRoot %q must be an absolute directory", root)
		return res
	}
	// The sandbox's share of this run: a uid of its own, a cgroup leaf (or a refusal).
	box, err := r.Sandbox.begin(ctx, spec)
	if err != nil {
		res.Err = err
		return res
	}
	var workdir string
	defer func() { box.finish(workdir) }()
	argv, err := c.argv(spec, box.python())
	if err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		return res
	}
	if err := os.MkdirAll(root, 0o711); err != nil {
		res.Err = fmt.Errorf("plugin runner: unable to create work root: %w", err)
		return res
	}
	// The pid in the name lets a later start of Halley remove it if this process dies first.
	workdir, err = os.MkdirTemp(root, fmt.Sprintf("%s%d-", rundirPrefix, os.Getpid()))
	if err != nil {
		workdir = ""
		res.Err = fmt.Errorf("plugin runner: unable to create working directory: %w", err)
		return res
	}
	// The plugin runs from a copy in its own directory: where the file is stored (the plugin dir, a cache of
	// the database's copy) stays closed to it.
	runFile, err := copyPluginFile(spec, workdir)
	if err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		return res
	}
	argv[len(argv)-1] = runFile
	if err := box.checkFormat(spec, runFile); err != nil {
		res.Err = fmt.Errorf("plugin %s v%d: unable to start: %w", spec.Name, spec.Version, err)
		return res
	}
	if spec.Runtime == RuntimePython {
		if err := os.WriteFile(filepath.Join(workdir, sdk.FileName), sdk.Python(), 0o644); err != nil {
			res.Err = fmt.Errorf("plugin runner: unable to write the SDK: %w", err)
			return res
		}
	}
	if err := box.own(workdir); err != nil {
		res.Err = fmt.Errorf("plugin runner: unable to hand the working directory to the plugin uid: %w", err)
		return res
	}
	if ctx.Err() != nil {
		res.Err = fmt.Errorf("plugin run canceled before it started: %w", context.Cause(ctx))
		return res
	}

	stdout := newCapWriter(c.outputCap, stderrTailForMessages)
	stderr := newCapWriter(c.outputCap, stderrTailForMessages)
	env := c.environ(workdir, in)
	var proc started
	if srv := r.warmServer(spec, box); srv != nil {
		ws, err := box.warmSpec(workdir, runFile, env)
		if err != nil {
			res.Err = fmt.Errorf("plugin %s v%d: unable to start: %w", spec.Name, spec.Version, err)
			return res
		}
		wp, err := srv.startWarm(ws, stdin, stdout, stderr, c.pipeGrace)
		switch {
		case err == nil:
			box.warm = true
			proc = wp
		case !errors.Is(err, errWarmUnavailable):
			// The request reached the server but no child answered: whatever it may have started dies now.
			box.killRest()
			res.Err = fmt.Errorf("plugin %s v%d: unable to start: %w", spec.Name, spec.Version, err)
			return res
		}
		// errWarmUnavailable: nothing was started; the run is spawned as if the runtime were cold.
	}
	prog := argv[0] // what the sandbox's prlimit(1) executes
	if proc == nil {
		cmd := box.command(argv, workdir)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		cmd.Stdout = stdout
		cmd.Stderr = stderr
		cmd.SysProcAttr = box.sysProcAttr()
		// After the plugin exits, Wait gives a process that escaped the group this long to close the pipes, then
		// closes them itself.
		cmd.WaitDelay = c.pipeGrace

		if err := box.start(cmd); err != nil {
			res.Err = fmt.Errorf("plugin %s v%d: unable to start: %w", spec.Name, spec.Version, err)
			return res
		}
		proc = newSpawned(cmd)
	}
	pid := proc.pid()

	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	var canceled, watchErr error
	select {
	case watchErr = <-proc.exited():
	case <-timer.C:
		res.TimedOut = true
		box.killGroup(pid)
		watchErr = <-proc.exited()
	case <-ctx.Done():
		canceled = context.Cause(ctx) // why: shutdown, or the run was closed (Executor.StopRuns)
		box.killGroup(pid)
		watchErr = <-proc.exited()
	}
	// Whatever the plugin left behind dies with the run: its group, and its cgroup or every process of its uid
	// (setsid daemons included), before the reaping so that no escaped process holds the pipes. A forked run
	// whose server died is no longer anyone's child: its pid may be reused, so only its cgroup or uid is killed.
	if box.warm && watchErr != nil {
		box.killRest()
	} else {
		box.killGroup(pid)
		box.killRest()
	}
	waitErr := proc.finish()

	res.Stdout, res.StdoutTruncated = stdout.buf, stdout.truncated
	res.Stderr, res.StderrTruncated = stderr.buf, stderr.truncated
	code, sig := proc.status()
	res.ExitCode = code

	// In a sandboxed run prlimit(1) executes the plugin: its failure to do so is a run that never started.
	if why, ok := box.execFailure(res.ExitCode, res.Stderr, prog); ok && !res.TimedOut && canceled == nil {
		res.ExitCode = -1
		res.Err = fmt.Errorf("plugin %s v%d: unable to start: %s", spec.Name, spec.Version, why)
		return res
	}

	switch {
	case res.TimedOut:
		res.Err = fmt.Errorf("plugin %s v%d timed out after %s", spec.Name, spec.Version, c.timeout)
	case canceled != nil:
		res.Err = fmt.Errorf("plugin %s v%d: run canceled: %w", spec.Name, spec.Version, canceled)
	case watchErr != nil:
		res.Err = fmt.Errorf("plugin %s v%d: unable to wait for the process: %w", spec.Name, spec.Version, watchErr)
	case res.ExitCode != 0:
		res.Err = exitError(describeExit(spec, code, sig), stderr.tail)
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

// started is a plugin process as Run follows it: spawned by Halley, or forked by the warm Python runtime.
type started interface {
	pid() int
	// exited receives once: nil when the process has exited — not yet reaped, so its pid, which is its process
	// group's id, cannot be reused while Run kills the group — or why that cannot be known.
	exited() <-chan error
	// finish reaps the process and waits for its output (a bounded while for escaped processes holding it).
	finish() error
	// status is the exit code (-1 when killed by a signal or never reaped) and the signal, after finish.
	status() (int, syscall.Signal)
}

// spawned is a process Halley started itself.
type spawned struct {
	cmd *exec.Cmd
	ch  chan error
}

func newSpawned(cmd *exec.Cmd) *spawned {
	p := &spawned{cmd: cmd, ch: make(chan error, 1)}
	// Watch for the exit without reaping: until Wait reaps it, the leader's pid (= the group id) cannot be
	// reused, so killing -pid can only ever hit this plugin's processes.
	go func() { p.ch <- waitExitedNoReap(cmd.Process.Pid) }()
	return p
}

func (p *spawned) pid() int             { return p.cmd.Process.Pid }
func (p *spawned) exited() <-chan error { return p.ch }
func (p *spawned) finish() error        { return p.cmd.Wait() }
func (p *spawned) status() (int, syscall.Signal) {
	ps := p.cmd.ProcessState
	if ps == nil {
		return -1, 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ps.ExitCode(), ws.Signal()
	}
	return ps.ExitCode(), 0
}

// warmServer is the fork server a python run of spec uses, or nil when it is spawned: binaries, plugins that
// opted out (Spec.Cold), runners that spawn every run (Spawn), or no server could be started.
func (r *ProcessRunner) warmServer(spec Spec, b *box) *forkServer {
	if spec.Runtime != RuntimePython || spec.Cold || r.Spawn {
		return nil
	}
	py := b.python()
	if py == "" {
		var err error
		if py, err = lookPath(r.config(spec).python, r.config(spec).path); err != nil {
			return nil
		}
	}
	lg := slog.Default()
	if b.s != nil {
		lg = b.s.log
	}
	return r.warm.server(py, b.s, lg)
}

func describeExit(spec Spec, code int, sig syscall.Signal) string {
	if sig != 0 {
		return fmt.Sprintf("plugin %s v%d killed by signal %s", spec.Name, spec.Version, sig)
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

// copyPluginFile copies the plugin file into the run's directory, read-only, executable when the original is.
func copyPluginFile(spec Spec, workdir string) (string, error) {
	src, err := os.Open(spec.Path)
	if err != nil {
		return "", fmt.Errorf("plugin file: %w", err)
	}
	defer src.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	fi, err := src.Stat()
	if err != nil {
		return "", fmt.Errorf("plugin file: %w", err)
	}
	mode := os.FileMode(0o444)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o555
	}
	name := "plugin"
	if spec.Runtime == RuntimePython {
		name = "plugin.py"
	}
	dst := filepath.Join(workdir, name)
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", fmt.Errorf("unable to copy the plugin file: %w", err)
	}
	if _, err := io.Copy(f, src); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("unable to copy the plugin file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("unable to copy the plugin file: %w", err)
	}
	return dst, nil
}

// removeAll removes a run's working directory even when the plugin left read-only folders in it.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	// Within an os.Root, so that a folder the plugin swapped for a symlink cannot send the chmod outside its directory.
	if root, err := os.OpenRoot(dir); err == nil {
		_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = root.Chmod(p, 0o700)
			}
			return nil
		})
		_ = root.Close()
	}
	_ = os.RemoveAll(dir)
}
