//go:build linux

package plugin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/halley-bpm/halley/plugin/internal/runinit"
)

// Sandbox confines plugin runs on Linux. NewSandbox detects once what the host allows (by trying it: a switch of
// uid, prlimit(1), a cgroup leaf, a network namespace) and every run then uses what is in force. It is shared by
// every ProcessRunner of a process and safe for concurrent use.
//
// How a sandboxed run is set up (runner_linux.go):
//   - its working directory is created under WorkRoot, gets a copy of the plugin file (so the plugin dir and the
//     data dir stay closed to it) and is then handed to the run's own uid;
//   - the child is started from a thread whose inheritable capabilities are cleared (no ambient capability
//     reaches the plugin), with the run's uid, GID and no supplementary groups, in its own process group, in its
//     cgroup leaf from its first instruction (clone3 CLONE_INTO_CGROUP) and, for network=off plugins, in a new
//     network namespace with nothing but a down loopback;
//   - where the host allows mount namespaces, the child is first Halley's own binary in its init stage
//     (plugin/internal/runinit), in new mount and IPC namespaces: it gives the run private /tmp, /var/tmp and
//     /dev/shm, hides /run and refuses unix sockets for network=off plugins, then switches to the run's uid and
//     execs prlimit(1); elsewhere the child is started as the run's uid directly;
//   - it execs prlimit(1), which lowers its soft and hard limits and execs the plugin: the limits are in place
//     before any plugin code runs, and an unprivileged uid cannot raise them again;
//   - when the plugin exits or times out its process group is killed, then its cgroup (cgroup.kill), or where no
//     cgroup is available every process of its uid (kill -KILL -1 run as that uid), so a setsid daemon dies too;
//     then the working directory is taken back and removed and the uid returns to the pool.
type Sandbox struct {
	cfg    SandboxConfig
	report SandboxReport
	log    *slog.Logger

	refused   error      // runs are refused (they would run as root)
	workErr   error      // the work root is unusable
	dropUID   bool       // runs get their own uid
	prlimit   []string   // argv prefix setting the limits; nil = none
	limits    [][3]int64 // the same limits as {resource, soft, hard}, for runs of the warm Python runtime
	cgroupDir string     // parent of the per-run leaves; "" = no cgroup
	cgMemory  bool       // memory.max is set per leaf
	cgPids    bool       // pids.max is set per leaf
	netns     bool       // network=off plugins can run
	netnsWhy  string
	// nsInit: runs start through the init stage (plugin/internal/runinit) in mount and IPC namespaces of their own,
	// with private /tmp, /var/tmp and /dev/shm; initCaps are the capabilities it needs, given to it as ambient
	// ones when Halley is not root.
	nsInit   bool
	initCaps []uintptr
	// unixOff: the init stage of network=off runs refuses AF_UNIX sockets (seccomp) and hides /run.
	unixOff   bool
	unixWhy   string
	python    string // resolved interpreter
	pythonErr error
	sh        string // for kill -1 as a run's uid
	// setpriv is setpriv(1) (util-linux), which sets no_new_privs for runs spawned without the init stage (the
	// init stage sets it itself, and so does a forked run); "" = not found.
	setpriv string

	slots chan int // free uid offsets

	// Work kept off a run's path: cgroup leaves made ahead (leaves, refilled by one goroutine at a time), and
	// the giving back of a finished run's directory, leaf and uid (end), both tracked by pending; Close waits.
	leaves    chan *leaf
	refilling atomic.Bool
	pending   sync.WaitGroup
	mu        sync.Mutex
	closed    bool
}

// leafReserve is how many cgroup leaves the sandbox keeps made ahead of the runs that take them.
const leafReserve = 4

// Capabilities the sandbox raises, only on the thread that needs them, when Halley is not root (see withCaps).
var (
	capsStart = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SYS_ADMIN}
	capsKill  = []uintptr{unix.CAP_KILL}
	capsChown = []uintptr{unix.CAP_CHOWN}
)

// NewSandbox checks what the host allows and prepares the sandbox: it makes Halley's process non-dumpable,
// closes the private paths to others, creates WorkRoot, and resolves the python interpreter. It fails only on a
// configuration no host could run (SandboxConfig.validate): what this host cannot give is reported (Report,
// LogReport) and runs that would need it are refused or fail clearly.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	s := &Sandbox{cfg: cfg, log: cfg.Logger}
	euid := os.Geteuid()
	s.report.HalleyUID = euid
	s.report.GID = cfg.GID
	s.report.WorkDir = cfg.WorkRoot
	perm := permittedCaps()
	add := func(name string, ok bool, format string, args ...any) {
		s.report.Protections = append(s.report.Protections, Protection{Name: name, InForce: ok, Detail: fmt.Sprintf(format, args...)})
	}

	// Who the plugins run as.
	userWhy := ""
	switch {
	case cfg.UID == 0 || cfg.UID <= euid && euid < cfg.UID+cfg.UIDs:
		userWhy = fmt.Sprintf("the plugin uid range %s includes Halley's own uid %d", cfg.uidRange(), euid)
		if cfg.UID == 0 {
			userWhy = "HALLEY_PLUGIN_UID is 0 (root)"
		}
	case euid != 0 && !(perm.has(unix.CAP_SETUID) && perm.has(unix.CAP_SETGID) && perm.has(unix.CAP_CHOWN) && perm.has(unix.CAP_KILL)):
		// All four: start the child as the run's uid, hand it its directory and take it back, kill its group.
		userWhy = fmt.Sprintf("Halley runs as uid %d without all of CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_KILL (docs/security.md says how to grant them)", euid)
	default:
		if err := s.probe(probeOpts{uid: cfg.UID, gid: cfg.GID, drop: true}); err != nil {
			userWhy = "switching to uid " + strconv.Itoa(cfg.UID) + " failed: " + err.Error()
		} else {
			s.dropUID = true
		}
	}
	if s.dropUID {
		s.slots = make(chan int, cfg.UIDs)
		for i := range cfg.UIDs {
			s.slots <- i
		}
		s.report.UIDs = cfg.uidRange()
		add(ProtectUser, true, "each run in flight has its own uid (%s), gid %d and no supplementary groups", cfg.uidRange(), cfg.GID)
	} else {
		s.report.UIDs = strconv.Itoa(euid)
		s.report.GID = os.Getegid()
		runAs := fmt.Sprintf("plugins run as Halley's own uid %d", euid)
		if euid == 0 || cfg.UID == 0 {
			runAs = "plugins would run as root"
			if cfg.AllowRoot {
				runAs = "plugins run as root (HALLEY_PLUGIN_ALLOW_ROOT=1)"
			} else {
				s.refused = fmt.Errorf("plugins would run as root: %s; give Halley a plugin uid range it can switch to, or set HALLEY_PLUGIN_ALLOW_ROOT=1", userWhy)
			}
		}
		add(ProtectUser, false, "%s: %s", runAs, userWhy)
	}
	s.report.PluginsRun = s.refused == nil
	if s.refused != nil {
		s.report.Refused = s.refused.Error()
	}

	// Halley's files and its process.
	privateWhy := s.protectPrivate()
	switch {
	case !s.dropUID:
		add(ProtectPrivate, false, "plugins run as Halley's uid and can read whatever Halley reads")
	case privateWhy != "":
		add(ProtectPrivate, false, "%s", privateWhy)
	default:
		add(ProtectPrivate, true, "closed to the plugin uids: %s", strings.Join(cfg.PrivatePaths, ", "))
	}
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	switch {
	case dumpErr != nil:
		add(ProtectProcess, s.dropUID, "PR_SET_DUMPABLE failed (%v); plugins run as another uid: %v", dumpErr, s.dropUID)
	case s.dropUID:
		add(ProtectProcess, true, "plugins run as another uid and Halley is not dumpable: /proc/<halley>/environ, mem and fd are closed to them")
	case euid == 0:
		add(ProtectProcess, false, "plugins run as root")
	default:
		add(ProtectProcess, true, "Halley is not dumpable (PR_SET_DUMPABLE 0): its /proc files belong to root although plugins share its uid")
	}
	add(ProtectEnvironment, true, "plugins get only PATH, HOME, TMPDIR, LANG, PYTHON* and HALLEY_RUN_ID/HALLEY_CALLBACK_URL; no file descriptor of Halley's")

	// Where runs happen.
	if err := s.prepareWorkRoot(); err != nil {
		s.workErr = err
		if s.refused == nil {
			s.report.PluginsRun = false
			s.report.Refused = "the work dir cannot be used (HALLEY_PLUGIN_WORK_DIR): " + err.Error()
		}
	}

	// Limits, applied by prlimit(1) before the plugin starts.
	s.setupLimits(add)

	// A cgroup leaf per run; without one, what a run leaves behind is killed by its uid.
	s.setupCgroup(add)
	if sh, err := lookPath("sh", cfg.Path); err == nil {
		s.sh = sh
	}
	if sp, err := lookPath("setpriv", cfg.Path); err == nil {
		s.setpriv = sp
	}
	switch {
	case s.cgroupDir != "":
		add(ProtectLeftovers, true, "each run's cgroup is killed whole when the run ends")
	case s.dropUID && s.sh != "":
		add(ProtectLeftovers, true, "no cgroup: every process of the run's uid is killed when the run ends")
	default:
		add(ProtectLeftovers, false, "only the run's process group is killed: a process that calls setsid outlives the run (needs a cgroup or a plugin uid)")
	}

	if s.workErr == nil {
		s.sweepStale()
	}

	// Network off per plugin.
	if err := s.probe(probeOpts{uid: cfg.UID, gid: cfg.GID, drop: s.dropUID, netns: true}); err != nil {
		s.netnsWhy = "creating a network namespace failed (" + err.Error() + "): it needs root or CAP_SYS_ADMIN; runs of network=off plugins fail"
		add(ProtectNetwork, false, "%s", s.netnsWhy)
	} else {
		s.netns = true
		add(ProtectNetwork, true, "plugins uploaded with network=off run in a network namespace of their own, with no interface up")
	}
	s.setupInit(add)

	s.setupPython()
	return s, nil
}

// WorkRoot is the parent of the runs' working directories.
func (s *Sandbox) WorkRoot() string { return s.cfg.WorkRoot }

// setupInit tries the init stage the way runs use it: with private temporary directories (every run), then
// with a network namespace and the unix-socket filter (network=off runs).
func (s *Sandbox) setupInit(add func(string, bool, string, ...any)) {
	unixNo := func(why string) {
		s.unixWhy = why + "; runs of network=off plugins fail"
		add(ProtectUnixSockets, false, "%s", s.unixWhy)
	}
	if os.Geteuid() != 0 {
		perm := permittedCaps()
		for _, c := range []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID} {
			if perm.has(c) {
				s.initCaps = append(s.initCaps, c)
			}
		}
	}
	err := s.workErr
	var dir string
	if err == nil {
		dir, err = os.MkdirTemp(s.cfg.WorkRoot, fmt.Sprintf("%s%d-", rundirPrefix, os.Getpid()))
	}
	if err == nil {
		defer removeAll(dir)
		if err = os.Chmod(dir, 0o711); err == nil {
			err = s.probe(probeOpts{uid: s.cfg.UID, gid: s.cfg.GID, drop: s.dropUID, dir: dir,
				init: &runinit.Spec{UID: s.uidOrKeep(s.cfg.UID), GID: s.uidOrKeep(s.cfg.GID), Dir: dir, TmpSize: privateTmpSize}})
		}
	}
	if err != nil {
		why := "a mount namespace per run could not be set up (" + err.Error() + "): it needs root or CAP_SYS_ADMIN"
		if s.dropUID {
			add(ProtectPrivateTmp, false, "%s; what a run's uid leaves at the top of /tmp, /var/tmp and /dev/shm is deleted when the run ends, "+
				"but runs in flight at the same time can read it, and SysV and POSIX IPC objects are shared", why)
		} else {
			add(ProtectPrivateTmp, false, "%s; plugins share /tmp, /var/tmp and /dev/shm with Halley and each other", why)
		}
		unixNo("no init stage: " + why)
		return
	}
	s.nsInit = true
	add(ProtectPrivateTmp, true, "each run has a mount namespace of its own with fresh /tmp, /var/tmp and /dev/shm (tmpfs, at most %d MiB each) "+
		"and an IPC namespace of its own: nothing a run leaves there is seen by another run, and it all goes with the run", privateTmpSize>>20)
	if !s.netns {
		unixNo("there is no network namespace")
		return
	}
	err = s.probe(probeOpts{uid: s.cfg.UID, gid: s.cfg.GID, drop: s.dropUID, dir: dir, netns: true,
		init: &runinit.Spec{UID: s.uidOrKeep(s.cfg.UID), GID: s.uidOrKeep(s.cfg.GID), Dir: dir, TmpSize: privateTmpSize, NetOff: true}})
	if err != nil {
		unixNo("the seccomp filter refusing unix sockets could not be installed (" + err.Error() + ")")
		return
	}
	s.unixOff = true
	add(ProtectUnixSockets, true, "runs of network=off plugins cannot create unix sockets (seccomp: socket(AF_UNIX) fails with EACCES, io_uring is refused) "+
		"and see empty /run and /var/run: no socket in the host's file system (a database's, Docker's) reaches them")
}

// uidOrKeep is id when runs get their own uid, else -1 (the init stage keeps Halley's).
func (s *Sandbox) uidOrKeep(id int) int {
	if s.dropUID {
		return id
	}
	return -1
}

// sweepShared deletes what uid owns at the top of the shared temporary directories, for hosts where runs have
// no private ones: the run's processes are dead by then, so nothing of the uid changes while this walks. Each
// entry is the uid's own, so taking it over (CAP_CHOWN, when Halley is not root) changes no one else's file, and
// lets Halley delete it from a sticky /tmp.
func (s *Sandbox) sweepShared(uid int) {
	for _, d := range runinit.TmpDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(d, e.Name())
			fi, err := os.Lstat(p)
			if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
				continue
			}
			if fi.IsDir() {
				_ = withCaps(capsChown, func() error { return reclaim(p, uid, os.Geteuid(), os.Getegid()) })
				removeAll(p)
				continue
			}
			_ = withCaps(capsChown, func() error { return os.Lchown(p, os.Geteuid(), os.Getegid()) })
			if err := os.Remove(p); err != nil {
				s.log.Warn("plugin sandbox: unable to delete what a run left in a shared folder", "path", p, "err", err)
			}
		}
	}
}

// caps is a capability set (two 32-bit words).
type caps [2]uint32

func (c caps) has(cp uintptr) bool { return c[cp/32]&(1<<(cp%32)) != 0 }

func permittedCaps() caps {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if unix.Capget(&hdr, &d[0]) != nil {
		return caps{}
	}
	return caps{d[0].Permitted, d[1].Permitted}
}

// withCaps runs fn on a locked OS thread whose effective set has the wanted capabilities that are permitted
// (capabilities are per thread on Linux: Halley's other threads never hold them effective when it runs with
// file capabilities) and whose inheritable set — hence ambient set — is empty, so nothing exec'd from the
// thread inherits a capability. For root this is a no-op: its sets are already full and its children lose them
// when they switch to a plugin uid.
func withCaps(want []uintptr, fn func() error) error {
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var orig [2]unix.CapUserData
	if err := unix.Capget(&hdr, &orig[0]); err != nil {
		runtime.UnlockOSThread()
		return fn()
	}
	raised := orig
	for _, c := range want {
		if raised[c/32].Permitted&(1<<(c%32)) != 0 {
			raised[c/32].Effective |= 1 << (c % 32)
		}
	}
	raised[0].Inheritable, raised[1].Inheritable = 0, 0
	if raised != orig {
		if err := unix.Capset(&hdr, &raised[0]); err != nil {
			runtime.UnlockOSThread()
			return fmt.Errorf("capset: %w", err)
		}
	}
	err := fn()
	back := orig
	back[0].Inheritable, back[1].Inheritable = 0, 0
	if back != raised {
		if unix.Capset(&hdr, &back[0]) != nil {
			// The thread keeps capabilities it should not: leave it locked, so it ends with this goroutine.
			return err
		}
	}
	runtime.UnlockOSThread()
	return err
}

type probeOpts struct {
	uid, gid int
	drop     bool          // switch to uid/gid
	netns    bool          // in a new network namespace
	init     *runinit.Spec // through the init stage (its argv is argv), in new mount and IPC namespaces
	cgroup   *os.File      // clone into this cgroup
	argv     []string      // default: true
	dir      string
}

// probe starts a trivial process the way a run would and reports whether that worked.
func (s *Sandbox) probe(p probeOpts) error {
	argv := p.argv
	if argv == nil {
		t, err := lookPath("true", s.cfg.Path)
		if err != nil {
			return errors.New("no true(1) on the plugins' PATH to test with")
		}
		argv = []string{t}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if p.init != nil {
		spec := *p.init
		spec.Argv = argv
		cmd = &exec.Cmd{Path: runinit.SelfExe, Args: spec.Args()}
	}
	cmd.Env = []string{"PATH=" + s.cfg.Path, "LANG=C.UTF-8"}
	cmd.Dir = "/"
	if p.dir != "" && p.init == nil { // the init stage enters its directory itself, as a run's does
		cmd.Dir = p.dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.drop && p.init == nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid), Groups: []uint32{}} //nolint:gosec // G115: uids and gids are configured within 0..2^31-1
	}
	if p.init != nil {
		cmd.SysProcAttr.Cloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWIPC
		cmd.SysProcAttr.AmbientCaps = s.initCaps
	}
	if p.netns {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNET
	}
	if p.cgroup != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(p.cgroup.Fd())
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := withCaps(capsStart, cmd.Start); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			if msg := strings.TrimSpace(out.String()); msg != "" {
				return fmt.Errorf("%v: %s", err, excerpt([]byte(msg), 300))
			}
		}
		return err
	case <-time.After(30 * time.Second):
		_ = withCaps(capsKill, func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		<-done //nolint:errcheck // reaped; its error says only that it was killed
		return errors.New("the test process did not finish within 30s")
	}
}

// protectPrivate closes the private paths to others (and to the plugin group) and reports what is still open.
func (s *Sandbox) protectPrivate() string {
	var problems []string
	for _, p := range s.cfg.PrivatePaths {
		if p == "" {
			continue
		}
		// Stat follows symlinks: these are the operator's own paths (a data dir linked to a volume is common).
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		want := mode &^ 0o007
		if fi.Mode().IsRegular() {
			want = mode &^ 0o077 // a file of Halley's is its own: 0600 (or 0400)
		} else if int(st.Gid) == s.cfg.GID {
			want &^= 0o070
		}
		if want != mode {
			if err := os.Chmod(p, want); err != nil {
				problems = append(problems, fmt.Sprintf("%s is mode %o and cannot be changed: %v", p, mode, err))
				continue
			}
			s.log.Info("plugin sandbox: closed a private path to other users", "path", p, "mode_was", fmt.Sprintf("%o", mode), "mode", fmt.Sprintf("%o", want))
		}
		if s.dropUID && int(st.Uid) >= s.cfg.UID && int(st.Uid) < s.cfg.UID+s.cfg.UIDs {
			problems = append(problems, fmt.Sprintf("%s belongs to plugin uid %d", p, st.Uid))
		}
	}
	return strings.Join(problems, "; ")
}

// prepareWorkRoot creates the work root (mode 0711: plugin uids may enter their own run directory but not list
// the others), refuses one that belongs to someone else, and checks that the plugin uids can reach it.
func (s *Sandbox) prepareWorkRoot() error {
	root := s.cfg.WorkRoot
	if !filepath.IsAbs(root) {
		return fmt.Errorf("work dir %q must be an absolute path", root)
	}
	if err := os.MkdirAll(root, 0o711); err != nil {
		return fmt.Errorf("unable to create the work dir: %w", err)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("work dir %s is not a directory", root)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		return fmt.Errorf("work dir %s belongs to uid %d, not to Halley (uid %d)", root, uid, os.Geteuid())
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return err
	}
	if s.dropUID {
		if err := searchableByOthers(root); err != nil {
			return err
		}
	}
	return nil
}

// searchableByOthers checks that every folder from / down to dir lets others (the plugin uids) pass.
func searchableByOthers(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (mode %o) cannot be entered by the plugin uids; %s must be reachable by them", d, fi.Mode().Perm(), dir)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// rlimit is one limit prlimit(1) sets.
type rlimit struct {
	flag, name string
	res        int
	value      int64
}

func (s *Sandbox) setupLimits(add func(string, bool, string, ...any)) {
	limits := []rlimit{
		{"--as", "address space", unix.RLIMIT_AS, s.cfg.AddressSpace},
		{"--nproc", "processes", unix.RLIMIT_NPROC, s.cfg.Processes},
		{"--fsize", "file size", unix.RLIMIT_FSIZE, s.cfg.FileSize},
		{"--nofile", "open files", unix.RLIMIT_NOFILE, s.cfg.OpenFiles},
		{"--cpu", "CPU seconds", unix.RLIMIT_CPU, s.cfg.CPUSeconds},
		{"--core", "core dumps", unix.RLIMIT_CORE, 0},
	}
	pr, err := lookPath("prlimit", s.cfg.Path)
	if err != nil {
		add(ProtectLimits, false, "prlimit(1) (util-linux) is not on the plugins' PATH %s: no limits are set", s.cfg.Path)
		return
	}
	args := []string{pr}
	var parts, skipped []string
	var set [][3]int64
	for _, l := range limits {
		if l.value == 0 && l.res != unix.RLIMIT_CORE {
			continue
		}
		if l.res == unix.RLIMIT_NPROC && !s.dropUID {
			// RLIMIT_NPROC counts every task of the real uid: Halley's own threads would count against it.
			skipped = append(skipped, "processes (plugins share Halley's uid)")
			continue
		}
		v := l.value
		var cur unix.Rlimit
		// Above Halley's own hard limit prlimit would fail; Halley's limit bounds it anyway.
		if unix.Getrlimit(l.res, &cur) == nil && cur.Max != unix.RLIM_INFINITY && uint64(v) > cur.Max { //nolint:gosec // G115: limits are configured non-negative
			v = int64(cur.Max) //nolint:gosec // G115: cur.Max is below v, an int64
		}
		if l.res == unix.RLIMIT_CPU {
			// SIGXCPU ("CPU time limit exceeded") at the limit, SIGKILL a little later for a plugin catching it.
			args = append(args, fmt.Sprintf("%s=%d:%d", l.flag, v, v+2))
			set = append(set, [3]int64{int64(l.res), v, v + 2})
		} else {
			args = append(args, fmt.Sprintf("%s=%d", l.flag, v))
			set = append(set, [3]int64{int64(l.res), v, v})
		}
		if l.res != unix.RLIMIT_CORE {
			parts = append(parts, fmt.Sprintf("%s %s", l.name, human(l.res, v)))
		}
	}
	args = append(args, "--")
	if err := s.probe(probeOpts{uid: s.cfg.UID, gid: s.cfg.GID, drop: s.dropUID, argv: append(append([]string{}, args...), mustTrue(s.cfg.Path))}); err != nil {
		add(ProtectLimits, false, "prlimit(1) failed: %v", err)
		return
	}
	s.prlimit = args
	s.limits = set
	detail := strings.Join(parts, ", ") + "; no core dumps"
	if len(skipped) > 0 {
		detail += "; not set: " + strings.Join(skipped, ", ")
	}
	add(ProtectLimits, true, "%s (per process; processes per run)", detail)
}

func mustTrue(path string) string {
	t, err := lookPath("true", path)
	if err != nil {
		return "/bin/true"
	}
	return t
}

func human(res int, v int64) string {
	switch res {
	case unix.RLIMIT_AS, unix.RLIMIT_FSIZE:
		if v%(1<<20) == 0 {
			return fmt.Sprintf("%d MiB", v>>20)
		}
		return fmt.Sprintf("%d bytes", v)
	case unix.RLIMIT_CPU:
		return fmt.Sprintf("%d s", v)
	}
	return strconv.FormatInt(v, 10)
}

// setupCgroup finds the cgroup v2 folder for the runs' leaves, enables the memory and pids controllers there
// when it can, and tries a leaf the way a run uses it.
func (s *Sandbox) setupCgroup(add func(string, bool, string, ...any)) {
	if s.cfg.Cgroup == "off" {
		add(ProtectCgroup, false, "turned off (HALLEY_PLUGIN_CGROUP=off)")
		return
	}
	dir := s.cfg.Cgroup
	if dir == "" {
		var err error
		if dir, err = ownCgroup(); err != nil {
			add(ProtectCgroup, false, "%v", err)
			return
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		add(ProtectCgroup, false, "%s is not a cgroup v2 folder: %v", dir, err)
		return
	}
	// Controllers for the leaves: enabled in dir's subtree_control. That works only while dir holds no
	// process (the root excepted), e.g. a delegated folder Halley does not run in.
	want := map[string]bool{"memory": s.cfg.AddressSpace > 0, "pids": s.cfg.Processes > 0}
	avail := fields(filepath.Join(dir, "cgroup.controllers"))
	enabled := fields(filepath.Join(dir, "cgroup.subtree_control"))
	for c, w := range want {
		if w && avail[c] && !enabled[c] {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
	}
	enabled = fields(filepath.Join(dir, "cgroup.subtree_control"))
	s.cgMemory, s.cgPids = want["memory"] && enabled["memory"], want["pids"] && enabled["pids"]

	s.cgroupDir = dir
	s.leaves = make(chan *leaf, leafReserve)
	leaf, err := s.newLeaf()
	if err == nil {
		err = s.probe(probeOpts{uid: s.cfg.UID, gid: s.cfg.GID, drop: s.dropUID, cgroup: leaf.fd})
		leaf.remove(s.log)
	}
	if err != nil {
		s.cgroupDir = ""
		add(ProtectCgroup, false, "a run leaf under %s does not work: %v", dir, err)
		return
	}
	var ctl []string
	if s.cgMemory {
		ctl = append(ctl, "memory.max "+human(unix.RLIMIT_AS, s.cfg.AddressSpace))
	}
	if s.cgPids {
		ctl = append(ctl, fmt.Sprintf("pids.max %d", s.cfg.Processes))
	}
	limits := "no memory or pids controller in its subtree_control, so it bounds nothing but is killed whole"
	if len(ctl) > 0 {
		limits = strings.Join(ctl, ", ")
	}
	add(ProtectCgroup, true, "a leaf per run under %s: %s", dir, limits)
}

// ownCgroup returns the folder of Halley's own cgroup v2.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("no /proc/self/cgroup: %v", err)
	}
	rel := ""
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return "", errors.New("Halley is not in a cgroup v2 hierarchy") //nolint:staticcheck // ST1005: starts with the name Halley, shown to operators as is
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, rel), nil
}

// cgroup2Mount finds where the cgroup v2 file system is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on
// hybrid hosts).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		l := sc.Text()
		i := strings.Index(l, " - ")
		if i < 0 {
			continue
		}
		after := strings.Fields(l[i+3:])
		before := strings.Fields(l[:i])
		if len(after) > 0 && after[0] == "cgroup2" && len(before) >= 5 {
			if strings.Contains(","+before[5]+",", ",ro,") {
				return "", fmt.Errorf("the cgroup v2 file system at %s is mounted read-only", before[4])
			}
			return before[4], nil
		}
	}
	return "", errors.New("no cgroup v2 file system is mounted")
}

func fields(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	m := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		m[f] = true
	}
	return m
}

// leaf is one run's cgroup.
type leaf struct {
	dir string
	fd  *os.File
}

func (s *Sandbox) newLeaf() (*leaf, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// The pid in the name lets a later start of Halley find the leaves of a Halley that died (sweepStale).
	dir := filepath.Join(s.cgroupDir, fmt.Sprintf("%s%d-%s", leafPrefix, os.Getpid(), hex.EncodeToString(b[:])))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unable to create a cgroup: %w", err)
	}
	l := &leaf{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		l.remove(s.log)
		return nil, errors.New("the kernel has no cgroup.kill (Linux 5.14 or later is needed)")
	}
	if s.cgMemory {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(s.cfg.AddressSpace, 10)), 0); err != nil {
			l.remove(s.log)
			return nil, fmt.Errorf("memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
	}
	if s.cgPids {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(s.cfg.Processes, 10)), 0); err != nil {
			l.remove(s.log)
			return nil, fmt.Errorf("pids.max: %w", err)
		}
	}
	fd, err := os.Open(dir)
	if err != nil {
		l.remove(s.log)
		return nil, err
	}
	l.fd = fd
	return l, nil
}

// Names of what runs leave on the host: cgroup leaves and working directories, each with the pid of its Halley.
const (
	leafPrefix   = "halley-run-"
	rundirPrefix = "run-"
)

// stalePid returns the pid in name (prefix + pid + "-" + random) when that process is gone.
func stalePid(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	return pid, true
}

// sweepStale kills and removes what Halley processes that died (kill -9, a crash) left: their runs' cgroup
// leaves, with any plugin process still in them, and their runs' working directories.
func (s *Sandbox) sweepStale() {
	if s.cgroupDir != "" {
		entries, _ := os.ReadDir(s.cgroupDir)
		for _, e := range entries {
			if _, ok := stalePid(e.Name(), leafPrefix); ok && e.IsDir() {
				s.log.Warn("plugin sandbox: removing the cgroup of a run whose Halley died", "cgroup", e.Name())
				(&leaf{dir: filepath.Join(s.cgroupDir, e.Name())}).remove(s.log)
			}
		}
	}
	entries, _ := os.ReadDir(s.cfg.WorkRoot)
	for _, e := range entries {
		if _, ok := stalePid(e.Name(), rundirPrefix); ok && e.IsDir() {
			dir := filepath.Join(s.cfg.WorkRoot, e.Name())
			if st, err := os.Lstat(dir); err == nil {
				_ = withCaps(capsChown, func() error { return reclaim(dir, int(st.Sys().(*syscall.Stat_t).Uid), os.Geteuid(), os.Getegid()) })
			}
			removeAll(dir)
		}
	}
}

// takeLeaf returns a fresh cgroup leaf for a run: one made ahead when there is one, else one made now. Either
// way the reserve is topped up in the background, so that the next run does not wait for a mkdir in the cgroup
// file system, which queues behind other runs' cgroup migrations under the kernel's cgroup lock. A leaf serves
// one run only: on this kernel a process cloned into a cgroup that was ever killed (cgroup.kill) is killed at
// birth, and a fresh leaf also starts with fresh counters (pids, memory events).
func (s *Sandbox) takeLeaf() (*leaf, error) {
	select {
	case l := <-s.leaves:
		s.refillLeaves()
		return l, nil
	default:
	}
	l, err := s.newLeaf()
	if err == nil {
		s.refillLeaves()
	}
	return l, err
}

// refillLeaves starts the goroutine that tops up the reserve of leaves, unless one is running or the sandbox
// is closed.
func (s *Sandbox) refillLeaves() {
	if !s.refilling.CompareAndSwap(false, true) {
		return
	}
	if !s.track() {
		s.refilling.Store(false)
		return
	}
	go func() {
		defer s.pending.Done()
		defer s.refilling.Store(false)
		for len(s.leaves) < cap(s.leaves) {
			l, err := s.newLeaf()
			if err != nil {
				s.log.Warn("plugin sandbox: unable to make a cgroup leaf ahead of a run", "err", err)
				return
			}
			select {
			case s.leaves <- l:
			default:
				l.remove(s.log)
				return
			}
		}
	}()
}

// track counts one piece of background work for Close, or reports false once the sandbox is closed (the work
// is then done in the caller's goroutine, or not at all).
func (s *Sandbox) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pending.Add(1)
	return true
}

// Settle waits until every run that has finished has given back its directory, cgroup leaf and uid.
func (s *Sandbox) Settle() {
	if s != nil {
		s.pending.Wait()
	}
}

// Close waits until every finished run has given back its directory, cgroup leaf and uid, and removes the
// leaves made ahead. Runs after Close still work; they do all of that on their own path.
func (s *Sandbox) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.pending.Wait()
	for {
		select {
		case l := <-s.leaves:
			l.remove(s.log)
		default:
			return
		}
	}
}

// kill kills every process in the leaf.
func (l *leaf) kill() {
	_ = os.WriteFile(filepath.Join(l.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove kills what is left in the leaf, waits for it to empty (SIGKILL is asynchronous) and removes it.
func (l *leaf) remove(lg *slog.Logger) {
	if l.fd != nil {
		_ = l.fd.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	wait := 50 * time.Microsecond
	for {
		err := os.Remove(l.dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			lg.Warn("plugin sandbox: unable to remove a run's cgroup", "cgroup", l.dir, "err", err)
			return
		}
		l.kill()
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
}

func (s *Sandbox) setupPython() {
	py, err := lookPath(s.cfg.Python, s.cfg.Path)
	s.report.Python = s.cfg.Python
	if err != nil {
		s.pythonErr = err
		s.report.PythonError = err.Error()
		return
	}
	s.python = py
	s.report.Python = py
	if s.dropUID {
		real, err := filepath.EvalSymlinks(py)
		if err == nil {
			err = executableByOthers(py, real)
		}
		if err == nil {
			// The whole way a python run starts, limits included.
			argv := append(append([]string{}, s.prlimit...), py, "-c", "pass")
			err = s.probe(probeOpts{uid: s.cfg.UID, gid: s.cfg.GID, drop: true, argv: argv})
		}
		if err != nil {
			s.pythonErr = fmt.Errorf("the plugin uids cannot run %s: %v", py, err)
			s.report.PythonError = s.pythonErr.Error()
		}
	}
}

// executableByOthers checks that others may execute the interpreter and reach it (its link and its target).
func executableByOthers(link, real string) error {
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("%s (mode %o) is not executable by others", real, fi.Mode().Perm())
	}
	for _, p := range []string{link, real} {
		if err := searchableByOthers(filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// --- per run ---

// box is one run's share of the sandbox; a nil *Sandbox gives a box that confines nothing.
type box struct {
	s      *Sandbox
	slot   int
	uid    int
	leaf   *leaf
	netOff bool
	warm   bool // forked by the warm Python runtime, which sets the run up as the init stage does
}

// begin takes what a run needs from the sandbox: a refusal when runs are refused, a uid from the pool (waiting
// while all are in use), a cgroup leaf.
func (s *Sandbox) begin(ctx context.Context, spec Spec) (*box, error) {
	b := &box{s: s, slot: -1, netOff: spec.NetworkOff}
	if s == nil {
		if spec.NetworkOff {
			return nil, fmt.Errorf("plugin %s v%d is set to network off, but plugins run without a sandbox here", spec.Name, spec.Version)
		}
		return b, nil
	}
	if s.refused != nil {
		return nil, fmt.Errorf("plugin %s v%d not run: %w", spec.Name, spec.Version, s.refused)
	}
	if s.workErr != nil {
		return nil, fmt.Errorf("plugin %s v%d not run: %w", spec.Name, spec.Version, s.workErr)
	}
	if spec.NetworkOff && !s.netns {
		return nil, fmt.Errorf("plugin %s v%d is set to network off, but %s", spec.Name, spec.Version, s.netnsWhy)
	}
	if spec.NetworkOff && !s.unixOff {
		return nil, fmt.Errorf("plugin %s v%d is set to network off, but %s", spec.Name, spec.Version, s.unixWhy)
	}
	if spec.Runtime == RuntimePython && s.pythonErr != nil {
		return nil, fmt.Errorf("plugin %s v%d: python plugins cannot run here: %w", spec.Name, spec.Version, s.pythonErr)
	}
	if s.dropUID {
		select {
		case b.slot = <-s.slots:
			b.uid = s.cfg.UID + b.slot
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin run canceled while waiting for a plugin uid: %w", ctx.Err())
		}
	}
	if s.cgroupDir != "" {
		l, err := s.takeLeaf()
		if err != nil {
			b.end()
			return nil, fmt.Errorf("plugin %s v%d: %w", spec.Name, spec.Version, err)
		}
		b.leaf = l
	}
	return b, nil
}

// python is the interpreter a python run uses, resolved at start.
func (b *box) python() string {
	if b.s == nil {
		return ""
	}
	return b.s.python
}

// own hands the run's working directory to the run's uid.
func (b *box) own(dir string) error {
	if b.s == nil || !b.s.dropUID {
		return nil
	}
	return withCaps(capsChown, func() error { return os.Lchown(dir, b.uid, b.s.cfg.GID) })
}

// command returns the command that runs the plugin's command line argv in dir: behind prlimit(1), and behind
// the init stage where runs have namespaces of their own.
func (b *box) command(argv []string, dir string) *exec.Cmd {
	if b.s != nil && b.s.prlimit != nil {
		argv = append(append(make([]string, 0, len(b.s.prlimit)+len(argv)), b.s.prlimit...), argv...)
	}
	if b.s != nil && !b.s.nsInit && b.s.setpriv != "" {
		// Without the init stage, setpriv(1) sets no_new_privs: a setuid program gains nothing.
		argv = append([]string{b.s.setpriv, "--no-new-privs"}, argv...)
	}
	var cmd *exec.Cmd
	if b.s != nil && b.s.nsInit {
		spec := runinit.Spec{UID: -1, GID: -1, Dir: dir, TmpSize: privateTmpSize, NetOff: b.netOff, Argv: argv}
		if b.s.dropUID {
			spec.UID, spec.GID = b.uid, b.s.cfg.GID
		}
		// Started from "/": a Halley that is not root cannot enter the run's directory; the init stage does,
		// once it is the run's uid.
		cmd = &exec.Cmd{Path: runinit.SelfExe, Args: spec.Args(), Dir: "/"}
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
	}
	return cmd
}

// privateTmpSize bounds each private tmpfs of a run (a cgroup's memory.max bounds them together).
const privateTmpSize = 256 << 20

func (b *box) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if b.s == nil {
		return a
	}
	switch {
	case b.s.nsInit:
		// The init stage switches to the run's uid itself, after mounting its private directories.
		a.Cloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWIPC
		a.AmbientCaps = b.s.initCaps
	case b.s.dropUID:
		a.Credential = &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.s.cfg.GID), Groups: []uint32{}} //nolint:gosec // G115: uids and gids are configured within 0..2^31-1
	}
	if b.netOff {
		a.Cloneflags |= unix.CLONE_NEWNET
	}
	if b.leaf != nil {
		a.UseCgroupFD = true
		a.CgroupFD = int(b.leaf.fd.Fd())
	}
	return a
}

// checkFormat refuses, before the start, a binary plugin the kernel would not execute (ENOEXEC: neither ELF nor
// #!). prlimit(1) executes the plugin with execvp(3), which would run such a file with /bin/sh instead; without
// prlimit the start itself fails with ENOEXEC, and so must it here.
func (b *box) checkFormat(spec Spec, file string) error {
	if b.s == nil || b.s.prlimit == nil && (b.s.nsInit || b.s.setpriv == "") || spec.Runtime != RuntimeBinary {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if head = head[:n]; bytes.HasPrefix(head, []byte("\x7fELF")) || bytes.HasPrefix(head, []byte("#!")) {
		return nil
	}
	return fmt.Errorf("%s: %w (neither an ELF binary nor a script starting with #!)", file, syscall.ENOEXEC)
}

// execFailure tells whether the init stage could not set the run up, or prlimit(1) could not execute prog — the
// plugin never started — and why. The init stage then exits runinit.Failed with the one line
// "halley-sandbox-init: <reason>" on stderr; prlimit exits 126 or 127 with the one line
// "prlimit: failed to execute <prog>: <reason>" (and so does setpriv, where it is the last step before the plugin).
func (b *box) execFailure(exitCode int, stderr []byte, prog string) (string, bool) {
	if (b.warm || b.s != nil && b.s.nsInit) && exitCode == runinit.Failed {
		reason, ok := strings.CutPrefix(string(stderr), runinit.Arg0+": ")
		reason = strings.TrimSuffix(reason, "\n")
		if ok && reason != "" && !strings.Contains(reason, "\n") {
			return "the run could not be set up: " + reason, true
		}
	}
	if b.warm || b.s == nil || exitCode != 126 && exitCode != 127 {
		return "", false
	}
	helper := "prlimit"
	switch {
	case b.s.prlimit != nil:
	case !b.s.nsInit && b.s.setpriv != "":
		helper = "setpriv"
	default:
		return "", false
	}
	reason, ok := strings.CutPrefix(string(stderr), helper+": failed to execute "+prog+": ")
	reason = strings.TrimSuffix(reason, "\n")
	if !ok || reason == "" || strings.Contains(reason, "\n") {
		return "", false
	}
	return prog + ": " + reason, true
}

// start starts cmd; a freshly copied binary may briefly be "text file busy" while a concurrent fork still holds
// the copy's write descriptor, so that is retried.
func (b *box) start(cmd *exec.Cmd) error {
	var err error
	for i := range 6 {
		err = withCaps(capsStart, cmd.Start)
		if !errors.Is(err, syscall.ETXTBSY) {
			return err
		}
		time.Sleep(time.Millisecond << i)
		// A failed Start leaves cmd unusable: rebuild it.
		c := &exec.Cmd{Path: cmd.Path, Args: cmd.Args}
		c.Dir, c.Env, c.Stdin, c.Stdout, c.Stderr, c.SysProcAttr, c.WaitDelay = cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.SysProcAttr, cmd.WaitDelay
		*cmd = *c
	}
	return err
}

// killGroup kills the run's process group, and its cgroup when it has one.
func (b *box) killGroup(pid int) {
	_ = withCaps(capsKill, func() error { return syscall.Kill(-pid, syscall.SIGKILL) })
	if b.leaf != nil {
		b.leaf.kill()
	}
}

// killRest kills what the run left behind outside its process group: its cgroup, or else every process of its
// uid (kill(-1) as that uid signals all of them at once, under the kernel's task list lock, so even a fork loop
// cannot slip through).
func (b *box) killRest() {
	if b.s == nil {
		return
	}
	if b.leaf != nil {
		b.leaf.kill()
		return
	}
	if !b.s.dropUID || b.s.sh == "" {
		return
	}
	cmd := exec.Command(b.s.sh, "-c", "kill -KILL -1")
	cmd.Env = []string{"PATH=" + b.s.cfg.Path}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true,
		Credential: &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.s.cfg.GID), Groups: []uint32{}}} //nolint:gosec // G115: uids and gids are configured within 0..2^31-1
	if err := withCaps(capsStart, cmd.Start); err != nil {
		b.s.log.Error("plugin sandbox: unable to kill what a run left behind", "uid", b.uid, "err", err)
		return
	}
	_ = cmd.Wait() // kill(-1) fails when nothing was left: that is the good case
}

// removeDir takes the run's working directory back from the run's uid and removes it with everything in it.
func (b *box) removeDir(dir string) {
	if b.s != nil && b.s.dropUID {
		_ = withCaps(capsChown, func() error { return reclaim(dir, b.uid, os.Geteuid(), os.Getegid()) })
	}
	removeAll(dir)
}

// reclaim gives the folders the run's uid owns under dir (dir included) back to uid:gid, with owner rights
// (CAP_CHOWN), so that Halley can delete what the plugin left there whatever modes it set. Files need no chown
// to be deleted, and are not touched: a file the plugin does not own (a hard link to someone else's file, where
// the kernel allows that) must never change owner.
func reclaim(dir string, runUID, uid, gid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || int(fi.Sys().(*syscall.Stat_t).Uid) != runUID {
		return nil
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			_ = reclaim(filepath.Join(dir, e.Name()), runUID, uid, gid)
		}
	}
	return nil
}

// finish gives back what the run took once it has ended (every process of the run is dead by then): its
// working directory (dir, when it was made), then its cgroup leaf and its uid. With a sandbox that is done in the
// background, after the run's result has gone on: the uid serves no other run before its directory is gone
// and its leaf is empty and removed, so nothing of one run is ever visible to the next.
func (b *box) finish(dir string) {
	done := func() {
		if dir != "" {
			b.removeDir(dir)
		}
		b.end()
	}
	if b.s == nil || !b.s.track() {
		done()
		return
	}
	go func() {
		defer b.s.pending.Done()
		done()
	}()
}

// end returns the uid to the pool and removes the cgroup leaf; every process of the run is dead by then.
func (b *box) end() {
	if b.s == nil {
		return
	}
	if b.leaf != nil {
		b.leaf.remove(b.s.log)
		b.leaf = nil
	}
	if b.slot >= 0 && !b.s.nsInit {
		// No private directories: what the uid left in the shared ones goes before the uid serves another run.
		b.s.sweepShared(b.uid)
	}
	if b.slot >= 0 {
		b.s.slots <- b.slot
		b.slot = -1
	}
}
