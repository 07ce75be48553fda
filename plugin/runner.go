package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Runtime says how a plugin file is started.
type Runtime string

// The runtimes a plugin file can have.
const (
	RuntimePython Runtime = "python" // python3 <file>
	RuntimeBinary Runtime = "binary" // executed directly (an ELF binary, or a script with a #! line)
)

// Validate returns an EINVALID error unless r is a known runtime.
func (r Runtime) Validate() error {
	switch r {
	case RuntimePython, RuntimeBinary:
		return nil
	}
	return model.CodedError(model.EINVALID, "bad_plugin_runtime", "plugin runtime %q must be python or binary", string(r))
}

// Decisions a plugin may return for an auto node.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// Run statuses as API.md names them; Result.Status maps a result onto the three terminal ones.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	// StatusStopped is the status of an attempt's log record when the executor stopped it (Result.Stopped): the
	// run itself has the status the engine gave it (timed_out, cancelled).
	StatusStopped = "stopped"
)

// Spec is what to run: one stored version of a plugin.
type Spec struct {
	Name    string
	Version int
	Runtime Runtime
	Path    string        // absolute path of a file Halley can read (FileStore.Path); the runner runs a copy of it
	Timeout time.Duration // 0: the runner's default
	// NetworkOff runs the plugin in a network namespace of its own, with no interface up (the plugin's upload
	// option network=off). A runner that cannot do that fails the run rather than run it with the network.
	NetworkOff bool
	// Cold spawns a fresh interpreter for every run of a python plugin instead of forking it from the warm
	// runtime (the plugin's opt-out). Binaries are always spawned.
	Cold bool
}

// Input is the JSON object written to the plugin's stdin (API.md, "Plugins").
type Input struct {
	RunID       string          `json:"run_id"`
	InstanceID  string          `json:"instance_id"`
	NodeID      string          `json:"node_id"`
	Phase       string          `json:"phase"` // "pre", "after" or "auto"
	Context     json.RawMessage `json:"context"`
	Node        json.RawMessage `json:"node"`
	CallbackURL string          `json:"callback_url"`
}

// Output is the JSON object a plugin prints on stdout. Numbers in Context are json.Number, so large integers
// (ids) pass through the instance context without losing precision.
type Output struct {
	Context  map[string]any `json:"context"`
	Decision string         `json:"decision"`
	Async    bool           `json:"async"`
}

// Result is what one run did. Err is nil exactly when the run succeeded; then Output is set.
type Result struct {
	ExitCode        int // -1 when the process did not exit by itself (killed, never started)
	Stdout, Stderr  []byte
	StdoutTruncated bool // the plugin printed more than the output cap; the rest was read and discarded
	StderrTruncated bool
	StartedAt       time.Time
	EndedAt         time.Time
	TimedOut        bool
	// Stopped says why the executor stopped the run before it ended (Executor.StopRuns: the engine closed it).
	// Such a result goes to the run's log only; it is never reported to the queue.
	Stopped string
	Output  *Output
	Err     error
}

// Status is "succeeded", "failed" or "timed_out" (or "stopped", for the log of a run the executor stopped). (An
// async success is "succeeded" here: the process part is done; the run as a whole waits for its result
// callback, which is the engine's business.)
func (r Result) Status() string {
	switch {
	case r.Stopped != "":
		return StatusStopped
	case r.TimedOut:
		return StatusTimedOut
	case r.Err != nil:
		return StatusFailed
	}
	return StatusSucceeded
}

// Duration is how long the run took.
func (r Result) Duration() time.Duration { return r.EndedAt.Sub(r.StartedAt) }

// Runner runs one plugin process to the end. It never panics and never returns without a Result.
type Runner interface {
	Run(ctx context.Context, spec Spec, in Input) Result
}

// Defaults of ProcessRunner.
const (
	DefaultPython    = "python3"
	DefaultOutputCap = 1 << 20 // per stream
	// DefaultPath is the PATH every plugin sees, whatever Halley's own PATH is.
	DefaultPath           = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	DefaultPluginTimeout  = 10 * time.Minute
	DefaultPipeGrace      = time.Second
	stderrTailForMessages = 512
)

// ProcessRunner runs plugins as child processes (Linux). Each run gets:
//   - a fresh working directory under WorkRoot, removed afterwards, which is also HOME and TMPDIR;
//   - an environment with nothing from Halley's: PATH (Path), HOME, TMPDIR, LANG=C.UTF-8, PYTHONPATH=<workdir>,
//     PYTHONDONTWRITEBYTECODE=1, PYTHONUNBUFFERED=1, HALLEY_RUN_ID and HALLEY_CALLBACK_URL;
//   - for Python, halley_plugin.py (package sdk) in that directory;
//   - its own process group, killed as a whole on timeout and again when the plugin exits, so nothing it
//     started outlives the run;
//   - the input as JSON on stdin, stdout and stderr each kept up to OutputCap bytes (the rest is drained).
//
// The zero value is not usable: WorkRoot is required. The other fields have defaults.
type ProcessRunner struct {
	WorkRoot       string        // parent of the per-run working directories (created if missing)
	Python         string        // interpreter; a bare name is looked up on Path, not on Halley's PATH. Default python3
	OutputCap      int           // bytes kept per stream; default DefaultOutputCap
	Path           string        // PATH given to plugins; default DefaultPath
	DefaultTimeout time.Duration // used when Spec.Timeout is 0; default DefaultPluginTimeout
	// PipeGrace bounds how long Run waits, once the plugin has exited, for its stdout/stderr to close; only a
	// process that escaped the process group (setsid) can hold them longer. Default DefaultPipeGrace.
	PipeGrace time.Duration
	// Sandbox confines the runs (a uid per run, limits, a cgroup leaf, network off); its WorkRoot replaces
	// WorkRoot, its python interpreter (resolved at start) replaces Python. nil runs plugins as Halley's own
	// user without limits: for development and tests, never in production (the composition root always sets one).
	Sandbox *Sandbox
	// Spawn starts a fresh interpreter for every python run; by default python runs are forked from a warm
	// runtime per interpreter (a fork server, docs/plugins.md "How a run starts"), sandboxed the same way.
	Spawn bool

	warm warmServers
}

var _ Runner = (*ProcessRunner)(nil)

// Close stops the runner's warm Python runtimes (their runs in flight are killed) and waits until its sandbox has
// given back what finished runs took (Sandbox.Close). Runs after Close spawn.
func (r *ProcessRunner) Close() {
	r.warm.closeAll()
	r.Sandbox.Close()
}

type runnerConfig struct {
	python    string
	outputCap int
	path      string
	timeout   time.Duration
	pipeGrace time.Duration
}

func (r *ProcessRunner) config(spec Spec) runnerConfig {
	c := runnerConfig{python: r.Python, outputCap: r.OutputCap, path: r.Path, timeout: spec.Timeout, pipeGrace: r.PipeGrace}
	if c.python == "" {
		c.python = DefaultPython
	}
	if c.outputCap <= 0 {
		c.outputCap = DefaultOutputCap
	}
	if c.path == "" {
		c.path = DefaultPath
	}
	if c.timeout <= 0 {
		c.timeout = r.DefaultTimeout
	}
	if c.timeout <= 0 {
		c.timeout = DefaultPluginTimeout
	}
	if c.pipeGrace <= 0 {
		c.pipeGrace = DefaultPipeGrace
	}
	return c
}

// check verifies the spec: a known runtime and an absolute path to a regular file.
func (c runnerConfig) check(spec Spec) error {
	if err := spec.Runtime.Validate(); err != nil {
		return err
	}
	if !filepath.IsAbs(spec.Path) {
		return fmt.Errorf("plugin file path %q is not absolute", spec.Path)
	}
	fi, err := os.Stat(spec.Path)
	if err != nil {
		return fmt.Errorf("plugin file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("plugin file %s is not a regular file", spec.Path)
	}
	return nil
}

// argv returns the command line for spec; its last element is the plugin file. python is the interpreter the
// sandbox resolved at start ("" = look c.python up on the plugins' PATH now).
func (c runnerConfig) argv(spec Spec, python string) ([]string, error) {
	if spec.Runtime == RuntimeBinary {
		return []string{spec.Path}, nil
	}
	if python != "" {
		return []string{python, spec.Path}, nil
	}
	py, err := lookPath(c.python, c.path)
	if err != nil {
		return nil, err
	}
	return []string{py, spec.Path}, nil
}

// lookPath finds an executable on the plugins' PATH (exec.LookPath would search Halley's own PATH, which may
// hold shims that do not work in the scrubbed environment).
func lookPath(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if isExecutable(name) {
			return name, nil
		}
		return "", fmt.Errorf("interpreter %s is not an executable file", name)
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("interpreter %q not found on PATH %s", name, pathList)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// environ is the whole environment of a run: fixed values and the run's own, nothing inherited.
func (c runnerConfig) environ(workdir string, in Input) []string {
	return []string{
		"PATH=" + c.path,
		"HOME=" + workdir,
		"TMPDIR=" + workdir,
		"LANG=C.UTF-8",
		"PYTHONPATH=" + workdir,
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1",
		"HALLEY_RUN_ID=" + in.RunID,
		"HALLEY_CALLBACK_URL=" + in.CallbackURL,
	}
}

// marshalInput encodes the stdin object; a missing context or node is sent as {} so plugins can index it.
func marshalInput(in Input) ([]byte, error) {
	if len(bytes.TrimSpace(in.Context)) == 0 {
		in.Context = json.RawMessage(`{}`)
	}
	if len(bytes.TrimSpace(in.Node)) == 0 {
		in.Node = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("plugin input is not valid JSON: %w", err)
	}
	return b, nil
}

// parseOutput accepts exactly one JSON object, with whitespace around it, and a known decision.
func parseOutput(stdout []byte) (*Output, error) {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return nil, errors.New(`plugin printed nothing; it must print one JSON object such as {"context":{}}`)
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("plugin output is not a JSON object: %s", excerpt(trimmed, 120))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var out Output
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("plugin output is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("plugin output has more than one JSON value; print exactly one object")
	}
	switch out.Decision {
	case "", DecisionApprove, DecisionReject:
	default:
		return nil, fmt.Errorf(`plugin decision %q must be "approve", "reject" or empty`, out.Decision)
	}
	return &out, nil
}

func excerpt(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// capWriter keeps the first limit bytes written to it and the last tailSize, and swallows the rest, so a
// chatty plugin neither grows Halley's memory nor blocks on a full pipe. It always reports a full write.
type capWriter struct {
	limit     int
	buf       []byte
	truncated bool
	tail      []byte // the last bytes written, for error messages even when buf was truncated
	tailSize  int
}

func newCapWriter(limit, tailSize int) *capWriter {
	return &capWriter{limit: limit, tailSize: tailSize}
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.limit - len(w.buf); room > 0 {
		keep := min(room, len(p))
		w.buf = append(w.buf, p[:keep]...)
		if keep < len(p) {
			w.truncated = true
		}
	} else if len(p) > 0 {
		w.truncated = true
	}
	if len(p) >= w.tailSize {
		w.tail = append(w.tail[:0], p[len(p)-w.tailSize:]...)
	} else {
		w.tail = append(w.tail, p...)
		if over := len(w.tail) - w.tailSize; over > 0 {
			w.tail = append(w.tail[:0], w.tail[over:]...)
		}
	}
	return len(p), nil
}

// exitError describes a non-zero exit with the end of stderr, where tracebacks and messages are.
func exitError(desc string, stderrTail []byte) error {
	tail := strings.TrimSpace(string(bytes.ToValidUTF8(stderrTail, []byte("?"))))
	if tail == "" {
		return errors.New(desc)
	}
	return fmt.Errorf("%s: %s", desc, tail)
}
