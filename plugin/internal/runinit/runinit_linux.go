//go:build linux

// Package runinit is a plugin run's init stage. It is a package of its own, importing only the standard library
// and golang.org/x/sys/unix, so that Go initialises it before the heavy packages of the binary (the database
// drivers, the HTTP stack): a run's init stage reaches its exec within a few milliseconds of its start.
//
// A run's init stage: what a run needs done inside its own mount namespace, between the clone and the plugin's
// exec, which os/exec cannot do (a Go process cannot run code in a child before its exec, nor unshare a mount
// namespace in one of its threads). The sandbox starts Halley's own binary (/proc/self/exe, so the very file
// that is running, even if it was replaced on disk) with argv[0] Arg0 in new mount and IPC namespaces (and a
// new network namespace for network=off plugins); this package's init function recognises it before the binary's heavier
// packages are initialised, and run
//
//   - makes every mount private to the namespace, so nothing it mounts is seen by the host or other runs;
//   - mounts fresh tmpfs file systems on /tmp, /var/tmp and /dev/shm (and, for network=off runs, on /run and
//     /var/run, where the host keeps its sockets), and a fresh mqueue on /dev/mqueue, then binds the run's
//     working directory back where it was when one of them hid it;
//   - switches the thread to the run's uid and gid with no supplementary groups, clears every capability, sets
//     no_new_privs and, for network=off runs, installs a seccomp filter that refuses AF_UNIX sockets (the
//     sockets of the host's file system are beyond a network namespace) and io_uring (which would create
//     sockets past the filter);
//   - execs the rest of its command line: prlimit(1) and the plugin.
//
// It runs on one locked thread and execs from it: credentials, capabilities and the seccomp filter are per
// thread, and exec keeps those of the thread that calls it. Any failure exits Failed with one line on
// stderr, before the plugin starts.
package runinit

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arg0 is argv[0] of a run's init stage.
const Arg0 = "halley-sandbox-init"

// Failed is the exit code of an init stage that could not set the run up.
const Failed = 125

// SelfExe starts the binary that is running, whatever happened to its path since.
const SelfExe = "/proc/self/exe"

func init() {
	if len(os.Args) > 1 && os.Args[0] == Arg0 {
		if err := run(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", Arg0, err)
		}
		os.Exit(Failed) // run returns only when it failed
	}
}

// Spec is what the sandbox tells a run's init stage (as flags before "--").
type Spec struct {
	UID, GID int // the run's; -1: keep Halley's
	Dir      string
	TmpSize  int64 // bytes of each private tmpfs
	NetOff   bool  // hide /run and /var/run, refuse AF_UNIX sockets
	Argv     []string
}

// Args is the command line of the init stage for s (argv[0] is Arg0; the binary is SelfExe).
func (s Spec) Args() []string {
	a := []string{Arg0, "-uid", strconv.Itoa(s.UID), "-gid", strconv.Itoa(s.GID), "-dir", s.Dir,
		"-tmp-size", strconv.FormatInt(s.TmpSize, 10)}
	if s.NetOff {
		a = append(a, "-net-off")
	}
	return append(append(a, "--"), s.Argv...)
}

func parseSpec(args []string) (Spec, error) {
	var s Spec
	fs := flag.NewFlagSet(Arg0, flag.ContinueOnError)
	fs.IntVar(&s.UID, "uid", -1, "")
	fs.IntVar(&s.GID, "gid", -1, "")
	fs.StringVar(&s.Dir, "dir", "", "")
	fs.Int64Var(&s.TmpSize, "tmp-size", 0, "")
	fs.BoolVar(&s.NetOff, "net-off", false, "")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	s.Argv = fs.Args()
	if len(s.Argv) == 0 || !filepath.IsAbs(s.Argv[0]) || !filepath.IsAbs(s.Dir) || s.TmpSize <= 0 {
		return s, errors.New("usage: -uid N -gid N -dir /abs -tmp-size N [-net-off] -- /abs/prog args")
	}
	return s, nil
}

// TmpDirs get a fresh tmpfs in every run; HiddenDirs too in network=off runs (the host's sockets live there).
var (
	TmpDirs    = []string{"/tmp", "/var/tmp", "/dev/shm"}
	HiddenDirs = []string{"/run", "/var/run"}
)

func run(args []string) error {
	spec, err := parseSpec(args)
	if err != nil {
		return err
	}
	runtime.LockOSThread() // never unlocked: this thread execs the plugin
	if err := raisePermitted(); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	// The run's directory, held open so that it can be bound back if a tmpfs hides it.
	dirFD, err := unix.Open(spec.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the run directory: %w", err)
	}
	var before unix.Stat_t
	if err := unix.Fstat(dirFD, &before); err != nil {
		return err
	}
	dirs := TmpDirs
	if spec.NetOff {
		dirs = append(append([]string{}, TmpDirs...), HiddenDirs...)
	}
	mounted := map[string]bool{}
	for _, d := range dirs {
		real, err := filepath.EvalSymlinks(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() || mounted[real] {
			continue
		}
		mode := "1777"
		if slicesContain(HiddenDirs, d) {
			mode = "0755"
		}
		opts := fmt.Sprintf("mode=%s,size=%d,nr_inodes=65536", mode, spec.TmpSize)
		if err := unix.Mount("tmpfs", real, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting a private %s: %w", real, err)
		}
		mounted[real] = true
	}
	if fi, err := os.Stat("/dev/mqueue"); err == nil && fi.IsDir() {
		if err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting a private /dev/mqueue: %w", err)
		}
	}
	var now unix.Stat_t
	if err := unix.Stat(spec.Dir, &now); err != nil || now.Dev != before.Dev || now.Ino != before.Ino {
		// A fresh tmpfs hides the run directory (the work root is under /tmp by default): bind it back.
		if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
			return fmt.Errorf("recreating the run directory's path: %w", err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(dirFD), spec.Dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the run directory: %w", err)
		}
	}
	_ = unix.Close(dirFD)

	if spec.UID >= 0 {
		if err := dropTo(spec.UID, spec.GID); err != nil {
			return err
		}
	}
	// As the run's uid: the directory is its own (0700), and a Halley that is not root cannot enter it.
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("entering the run directory: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if spec.NetOff {
		if err := refuseUnixSockets(); err != nil {
			return err
		}
		// Fail closed: the filter must be seen to work before the plugin runs.
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			_ = unix.Close(fd)
			return errors.New("the seccomp filter let a unix socket be created")
		}
		if !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("socket(AF_UNIX) under the seccomp filter: %w, want EACCES", err)
		}
	}
	// Nothing but the standard streams reaches the plugin, not even a descriptor Halley itself inherited without
	// close-on-exec (Go opens its own with it).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	err = syscall.Exec(spec.Argv[0], spec.Argv, os.Environ())
	return fmt.Errorf("exec %s: %w", spec.Argv[0], err)
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// raisePermitted makes this thread's permitted capabilities effective: a Halley that is not root starts its init
// stage with the capabilities it needs permitted (file capabilities or ambient ones) but not effective.
func raisePermitted() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capget(&hdr, &d[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if d[0].Effective == d[0].Permitted && d[1].Effective == d[1].Permitted {
		return nil
	}
	d[0].Effective, d[1].Effective = d[0].Permitted, d[1].Permitted
	if err := unix.Capset(&hdr, &d[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// dropTo switches this thread (only: it is the one that execs) to uid and gid with no supplementary groups, then
// clears every capability it still has — a Halley that is not root keeps its permitted set across a change
// between two uids that are not 0 — and checks that none is left.
func dropTo(uid, gid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capset(&hdr, &d[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %w", err)
	}
	if err := unix.Capget(&hdr, &d[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if d != [2]unix.CapUserData{} {
		return fmt.Errorf("capabilities left after the switch to uid %d: %+v", uid, d)
	}
	return nil
}

// auditArch is the AUDIT_ARCH_* value seccomp reports for this build's system calls; 0 where no filter is
// written for the architecture.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// x32SyscallBit marks the x32 ABI's system calls on x86-64: another way in to the same calls, refused.
const x32SyscallBit = 0x40000000

// unixSocketFilter is the seccomp program of network=off runs: socket(AF_UNIX, ...) fails with EACCES and
// io_uring_setup with ENOSYS; a system call of another architecture (a 32-bit one on x86-64, x32) kills the
// process; everything else is allowed. socketpair(AF_UNIX) stays allowed: a connected pair reaches nothing but
// itself (asyncio and multiprocessing use it).
func unixSocketFilter() ([]unix.SockFilter, error) {
	arch := auditArch()
	if arch == 0 {
		return nil, fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
		// offsets in struct seccomp_data
		offNr   = 0
		offArch = 4
		offArg0 = 16 // the low 32 bits of args[0] (both architectures are little-endian)
	)
	kill := uint32(unix.SECCOMP_RET_KILL_PROCESS)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	const (
		denyEACCES = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		denyENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	return []unix.SockFilter{
		/* 0 */ {Code: ld, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: kill},
		/* 3 */ {Code: ld, K: offNr},
		/* 4 */ {Code: jge, K: x32SyscallBit, Jt: 0, Jf: 1},
		/* 5 */ {Code: ret, K: kill},
		/* 6 */ {Code: jeq, K: uint32(unix.SYS_SOCKET), Jt: 0, Jf: 4},
		/* 7 */ {Code: ld, K: offArg0},
		/* 8 */ {Code: jeq, K: unix.AF_UNIX, Jt: 0, Jf: 1},
		/* 9 */ {Code: ret, K: denyEACCES},
		/* 10 */ {Code: ret, K: allow},
		/* 11 */ {Code: jeq, K: uint32(unix.SYS_IO_URING_SETUP), Jt: 0, Jf: 1},
		/* 12 */ {Code: ret, K: denyENOSYS},
		/* 13 */ {Code: ret, K: allow},
	}, nil
}

// UnixSocketFilter is the seccomp program of network=off runs as the bytes of its struct sock_filter array, for
// the warm Python runtime, whose runs install it themselves.
func UnixSocketFilter() ([]byte, error) {
	f, err := unixSocketFilter()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8*len(f))
	for _, ins := range f {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b, nil
}

// refuseUnixSockets installs unixSocketFilter on this thread (no_new_privs is set already).
func refuseUnixSockets() error {
	f, err := unixSocketFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]} //nolint:gosec // G115: a program of 14 instructions
	// The kernel copies the program during the call; prog and f stay alive until it returns.
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 { //nolint:gosec // G103: seccomp(2) takes its program by pointer; x/sys/unix has no wrapper for it
		return fmt.Errorf("installing the seccomp filter: %w", e)
	}
	return nil
}
