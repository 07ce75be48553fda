//go:build linux

package plugin

import (
	"bufio"
	_ "embed" // the fork server's source
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/halley-bpm/halley/plugin/internal/runinit"
	"github.com/halley-bpm/halley/plugin/sdk"
)

// The warm Python runtime: one fork server per interpreter (forkserver.py, the pattern of CPython's
// multiprocessing "forkserver"), started on the first python run and again whenever it died. Each run is a fresh
// child forked from it, which sets itself up as a spawned run's init stage and prlimit(1) do — its cgroup leaf,
// namespaces and private folders, the run's uid without capabilities, no_new_privs, the seccomp filter, the
// rlimits, the run's environment and directory, nothing of the server's descriptors — before it runs the plugin.
// What it saves is the interpreter's start and the imports the server made once.

//go:embed forkserver.py
var forkServerSource string

// Bounds of the conversation with a fork server.
const (
	warmReadyTimeout = 30 * time.Second // a server's start, its imports included
	warmForkTimeout  = 30 * time.Second // from the request to the child's pid
	warmRetryAfter   = 10 * time.Second // after a server could not be started, runs spawn for this long
)

// errWarmUnavailable: no request reached a fork server, so the run can still be spawned.
var errWarmUnavailable = errors.New("the warm python runtime is unavailable")

// warmServers are a runner's fork servers, by interpreter.
type warmServers struct {
	mu      sync.Mutex
	servers map[string]*forkServer
	failed  map[string]time.Time // when a start last failed
	closed  bool
}

// forkServer is one running server.
type forkServer struct {
	python string
	cmd    *exec.Cmd
	ctl    int // Halley's end of the SOCK_SEQPACKET control socket
	mu     sync.Mutex
	done   chan struct{} // closed when the server process has exited
}

func (f *forkServer) alive() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// server returns the running fork server for python, starting one if there is none (or it died). nil: runs
// spawn instead, because a start failed a moment ago (logged) or the runner is closed.
func (w *warmServers) server(python string, s *Sandbox, lg *slog.Logger) *forkServer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if f := w.servers[python]; f != nil {
		if f.alive() {
			return f
		}
		f.close()
		delete(w.servers, python)
		lg.Warn("plugin runner: the warm python runtime exited; starting it again", "python", python)
	}
	if t, ok := w.failed[python]; ok && time.Since(t) < warmRetryAfter {
		return nil
	}
	f, err := startForkServer(python, s, lg)
	if err != nil {
		if w.failed == nil {
			w.failed = map[string]time.Time{}
		}
		w.failed[python] = time.Now()
		lg.Error("plugin runner: the warm python runtime could not start; python runs spawn an interpreter each", "python", python, "err", err)
		return nil
	}
	delete(w.failed, python)
	if w.servers == nil {
		w.servers = map[string]*forkServer{}
	}
	w.servers[python] = f
	return f
}

// closeAll stops every server; later runs spawn.
func (w *warmServers) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for k, f := range w.servers {
		f.close()
		delete(w.servers, k)
	}
}

// startForkServer starts python on the fork server and waits until it is ready. It runs as Halley's own user
// with the capabilities the init stage gets (its children need them to set a run up), with nothing of Halley's
// environment, from "/", with the control socket as its only descriptor besides its standard ones.
func startForkServer(python string, s *Sandbox, lg *slog.Logger) (*forkServer, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "forkserver-ctl")
	defer theirs.Close() //nolint:errcheck // the child has its copy
	stderr, err := newLogPipe(lg, python)
	if err != nil {
		_ = unix.Close(fds[0])
		return nil, err
	}
	probe, err := json.Marshal(probeSpec(s))
	if err != nil {
		_ = unix.Close(fds[0])
		stderr.close()
		return nil, err
	}
	// The SDK's source is the server's first argument: it compiles it once (forkserver.py, "compiled code"); the
	// second is the set-up its probe run goes through (forkserver.py, "prefaulting").
	cmd := &exec.Cmd{Path: python, Args: []string{python, "-s", "-c", forkServerSource, string(sdk.Python()), string(probe)}, Dir: "/",
		Env:        []string{"PATH=" + DefaultPath, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"},
		ExtraFiles: []*os.File{theirs}, Stderr: stderr.w, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if s != nil {
		cmd.SysProcAttr.AmbientCaps = s.initCaps
		cmd.Env[0] = "PATH=" + s.cfg.Path
	}
	if err := withCaps(capsStart, cmd.Start); err != nil {
		_ = unix.Close(fds[0])
		stderr.close()
		return nil, err
	}
	stderr.started()
	f := &forkServer{python: python, cmd: cmd, ctl: fds[0], done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(f.done)
	}()
	buf := make([]byte, 16)
	n, err := readTimeout(f.ctl, buf, warmReadyTimeout)
	if err == nil && string(buf[:n]) != "ready" {
		err = fmt.Errorf("unexpected greeting %q", buf[:n])
	}
	if err != nil {
		f.close()
		return nil, fmt.Errorf("the fork server did not become ready: %w", err)
	}
	return f, nil
}

// readTimeout reads one message from fd within d.
func readTimeout(fd int, buf []byte, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, errors.New("timed out")
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} //nolint:gosec // G115: a descriptor number
		n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) || err == nil && n == 0 {
			continue
		}
		if err != nil {
			return 0, err
		}
		n, err = unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err == nil && n == 0 {
			return 0, io.EOF
		}
		return n, err
	}
}

// close ends the server: its end of the control socket closes, so it kills the runs it still has and exits; if it
// does not within a second, it is killed.
func (f *forkServer) close() {
	f.mu.Lock()
	if f.ctl >= 0 {
		_ = unix.Close(f.ctl)
		f.ctl = -1
	}
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-time.After(time.Second):
		_ = withCaps(capsKill, func() error { return syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL) })
		<-f.done
	}
}

// send hands the server one run's descriptors: its connection, stdin, stdout, stderr.
func (f *forkServer) send(fds []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctl < 0 || !f.alive() {
		return errors.New("the fork server is closed")
	}
	for {
		err := unix.Sendmsg(f.ctl, []byte("run"), unix.UnixRights(fds...), nil, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// warmSpec is what a forked child reads from its stdin before the plugin's input (forkserver.py, set_up).
type warmSpec struct {
	UID        int               `json:"uid"` // -1: keep the server's
	GID        int               `json:"gid"`
	Dir        string            `json:"dir"`
	NS         bool              `json:"ns"` // mount and IPC namespaces with private folders
	NetOff     bool              `json:"net_off"`
	TmpSize    int64             `json:"tmp_size"`
	TmpDirs    []string          `json:"tmp_dirs"`
	HiddenDirs []string          `json:"hidden_dirs"`
	Cgroup     string            `json:"cgroup,omitempty"`
	Limits     [][3]int64        `json:"limits"`
	Filter     string            `json:"filter,omitempty"`
	File       string            `json:"file"`
	Env        map[string]string `json:"env"`
}

// warmSpec is the run's setup for a forked child: the same as the init stage and prlimit(1) give a spawned one.
func (b *box) warmSpec(dir, file string, env []string) (warmSpec, error) {
	ws := warmSpec{UID: -1, GID: -1, Dir: dir, TmpSize: privateTmpSize, TmpDirs: runinit.TmpDirs, HiddenDirs: runinit.HiddenDirs,
		File: file, Env: map[string]string{}, Limits: [][3]int64{}, NetOff: b.netOff}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		ws.Env[k] = v
	}
	if b.s == nil {
		return ws, nil
	}
	ws.NS = b.s.nsInit
	if b.s.dropUID {
		ws.UID, ws.GID = b.uid, b.s.cfg.GID
	}
	if b.leaf != nil {
		ws.Cgroup = b.leaf.dir
	}
	if b.s.limits != nil {
		ws.Limits = b.s.limits
	}
	if b.netOff {
		f, err := runinit.UnixSocketFilter()
		if err != nil {
			return ws, err
		}
		ws.Filter = hex.EncodeToString(f)
	}
	return ws, nil
}

// probeSpec is the set-up of the fork server's probe run (forkserver.py, "prefaulting"): a run's, with the same
// namespaces, private folders and limits, but the server's own uid (the switch is made, to the uid it has) and
// no cgroup leaf, in "/". It runs a plugin of the server's own, never a run's.
func probeSpec(s *Sandbox) warmSpec {
	ws := warmSpec{UID: -1, GID: -1, Dir: "/", TmpSize: privateTmpSize, TmpDirs: runinit.TmpDirs, HiddenDirs: runinit.HiddenDirs,
		File: "<probe>", Env: map[string]string{}, Limits: [][3]int64{}}
	if s == nil {
		return ws
	}
	ws.NS = s.nsInit
	if s.dropUID {
		ws.UID, ws.GID = os.Getuid(), os.Getgid()
	}
	if s.limits != nil {
		ws.Limits = s.limits
	}
	return ws
}

// warmProc is a run forked by a fork server.
type warmProc struct {
	conn           *os.File
	pidV           int
	exitedCh       chan error // one value: nil once the child exited (status set), or why that is unknown
	code           int
	sig            syscall.Signal
	stdin          *os.File
	stdout, stderr *os.File
	copied         chan struct{} // closed when both output streams are at EOF
	grace          time.Duration
}

func (p *warmProc) pid() int                      { return p.pidV }
func (p *warmProc) exited() <-chan error          { return p.exitedCh }
func (p *warmProc) status() (int, syscall.Signal) { return p.code, p.sig }

// startWarm asks f for a child running spec with stdin as its input, its output going to stdout and stderr.
// errWarmUnavailable means nothing was started: the run may be spawned instead.
func (f *forkServer) startWarm(ws warmSpec, input []byte, stdout, stderr io.Writer, grace time.Duration) (*warmProc, error) {
	specJSON, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	conn := os.NewFile(uintptr(pair[0]), "forkserver-run")
	theirConn := os.NewFile(uintptr(pair[1]), "forkserver-run-child")
	inR, inW, err := os.Pipe()
	if err != nil {
		_, _ = conn.Close(), theirConn.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_, _, _, _ = conn.Close(), theirConn.Close(), inR.Close(), inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_, _, _, _, _, _ = conn.Close(), theirConn.Close(), inR.Close(), inW.Close(), outR.Close(), outW.Close()
		return nil, err
	}
	// Fd puts these ends in blocking mode, which is what the child wants; Halley's ends stay in the poller.
	sendErr := f.send([]int{int(theirConn.Fd()), int(inR.Fd()), int(outW.Fd()), int(errW.Fd())})
	_, _, _, _ = theirConn.Close(), inR.Close(), outW.Close(), errW.Close()
	if sendErr != nil {
		_, _, _, _ = conn.Close(), inW.Close(), outR.Close(), errR.Close()
		return nil, fmt.Errorf("%w: %v", errWarmUnavailable, sendErr)
	}
	p := &warmProc{conn: conn, exitedCh: make(chan error, 1), stdin: inW, stdout: outR, stderr: errR,
		copied: make(chan struct{}), grace: grace}
	go func() {
		// The spec, then the input; the child reads the spec itself, the server never sees either.
		msg := binary.BigEndian.AppendUint32(nil, uint32(len(specJSON))) //nolint:gosec // G115: a spec of a few KB
		msg = append(append(msg, specJSON...), input...)
		_, _ = inW.Write(msg)
		_ = inW.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(stderr, errR) }()
	go func() { wg.Wait(); close(p.copied) }()

	pidCh := make(chan int, 1)
	go p.read(pidCh)
	select {
	case pid, ok := <-pidCh:
		if ok {
			p.pidV = pid
			return p, nil
		}
	case <-time.After(warmForkTimeout):
	}
	p.abandon()
	return nil, errors.New("the warm python runtime did not start the run")
}

// read follows the server's lines about the run: its pid, then its exit.
func (p *warmProc) read(pidCh chan<- int) {
	br := bufio.NewReader(p.conn)
	gotPid := false
	fail := func(err error) {
		if !gotPid {
			close(pidCh)
		}
		p.exitedCh <- err
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			fail(errors.New("the warm python runtime exited during the run"))
			return
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "P" && !gotPid:
			pid, err := strconv.Atoi(f[1])
			if err != nil || pid <= 0 {
				fail(fmt.Errorf("bad line from the fork server: %q", line))
				return
			}
			gotPid = true
			pidCh <- pid
		case len(f) == 3 && f[0] == "X" && gotPid:
			n, err := strconv.Atoi(f[2])
			if err != nil {
				fail(fmt.Errorf("bad line from the fork server: %q", line))
				return
			}
			if f[1] == "S" {
				p.code, p.sig = -1, syscall.Signal(n)
			} else {
				p.code = n
			}
			p.exitedCh <- nil
			return
		default:
			fail(fmt.Errorf("bad line from the fork server: %q", line))
			return
		}
	}
}

// finish is called once the child has exited and its group and leftovers are killed: it waits for the output
// (at most the grace once the plugin has exited, as cmd.WaitDelay does), then lets the server reap the child.
// It returns exec.ErrWaitDelay when an escaped process held the output open.
func (p *warmProc) finish() error {
	var err error
	select {
	case <-p.copied:
	case <-time.After(p.grace):
		_ = p.stdout.SetReadDeadline(time.Now())
		_ = p.stderr.SetReadDeadline(time.Now())
		<-p.copied
		err = exec.ErrWaitDelay
	}
	p.abandon()
	return err
}

// abandon tells the server the run is done (it kills the group and reaps the child) and closes Halley's ends.
func (p *warmProc) abandon() {
	_, _ = p.conn.Write([]byte("D"))
	// The server closes the connection once the child is reaped: the run's uid then has no process left.
	_ = p.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.Copy(io.Discard, p.conn)
	_ = p.conn.Close()
	_ = p.stdin.Close()
	_ = p.stdout.Close()
	_ = p.stderr.Close()
}

// logPipe copies a fork server's stderr (tracebacks of the server itself) into Halley's log, line by line.
type logPipe struct {
	r, w *os.File
}

func newLogPipe(lg *slog.Logger, python string) (*logPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lg.Warn("plugin runner: warm python runtime", "python", python, "stderr", sc.Text())
		}
		_ = r.Close()
	}()
	return &logPipe{r: r, w: w}, nil
}

// started closes Halley's copy of the write end once the server has its own.
func (l *logPipe) started() { _ = l.w.Close() }

func (l *logPipe) close() { _, _ = l.w.Close(), l.r.Close() }
