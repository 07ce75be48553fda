# Halley's warm Python runtime: a fork server (the pattern of CPython's multiprocessing "forkserver").
#
# Halley starts this once per interpreter as `python3 -s -c <this file>` with a SOCK_SEQPACKET socket on fd 3, and
# keeps it until Halley exits (its end of the socket closes: the server kills what it started and exits). The
# server imports what plugins commonly need, then waits. For each run Halley sends one message with four file
# descriptors: the run's connection (a socket), the run's stdin (a pipe: a length-prefixed spec, then the plugin's
# input), and its stdout and stderr (pipes). The server forks; the child sets the run up exactly as the init stage
# (plugin/internal/runinit) and prlimit(1) do for a spawned run, then runs the plugin file as __main__. The server
# never reads the spec or the input: nothing of a run enters its memory, so nothing of one run is in the next
# run's fork.
#
# On the run's connection the server writes "P <pid>\n" once the child exists (in its own process group), then
# "X E <code>\n" or "X S <signal>\n" when it has exited, but leaves it a zombie: its pid, which is also its process
# group id, cannot be reused until Halley writes "D" (done), so Halley may kill the group until then. After "D",
# or when Halley's end of the connection closes first, the server kills the group and reaps the child, then closes
# the connection.
#
# The child, in this order (any failure: one line "halley-sandbox-init: <reason>" on stderr, exit 125, before the
# plugin runs): its own process group; the pipes on 0, 1 and 2 and every other descriptor closed; reads the spec;
# joins the run's cgroup leaf; new mount and IPC namespaces (and a network namespace for network=off runs) with
# private /tmp, /var/tmp, /dev/shm, /dev/mqueue (and empty /run, /var/run for network=off runs), the run directory
# bound back when hidden; switches to the run's uid and gid with no supplementary groups and no capability left;
# enters the run directory; sets no_new_privs; installs the seccomp filter of network=off runs and checks it; sets
# the rlimits; takes the run's environment and nothing else; only then compiles and runs the plugin file.

import builtins
import ctypes
import ctypes.util
import gc
import io
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import traceback
import types

# What plugins commonly import, loaded once here so that a run does not pay for it (the SDK's own imports among
# them). Modules are shared state only in the sense that each run starts from the same freshly imported copy.
import base64  # noqa: F401
import datetime  # noqa: F401
import hashlib  # noqa: F401
import json  # noqa: F401
import re  # noqa: F401
import threading
import time  # noqa: F401
import urllib.error  # noqa: F401
import urllib.parse  # noqa: F401
import urllib.request  # noqa: F401
import uuid  # noqa: F401

# The server's own sys.path, without the entry for the current directory that -c adds.
BASE_PATH = [p for p in sys.path if p not in ("", ".")]

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_READ = 23
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
INIT_FAILED = 125
ARG0 = "halley-sandbox-init"


class SetupError(Exception):
    pass


def check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise SetupError("%s: %s" % (what, os.strerror(e)))


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def clear_caps(uid):
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    hdr = CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (CapData * 2)()
    check(libc.capset(ctypes.byref(hdr), data), "clearing capabilities")
    check(libc.capget(ctypes.byref(hdr), data), "capget")
    for d in data:
        if d.effective or d.permitted or d.inheritable:
            raise SetupError("capabilities left after the switch to uid %d" % uid)


def mount_private(spec):
    check(libc.mount(b"", b"/", None, MS_REC | MS_PRIVATE, None), "making the mounts private")
    d = spec["dir"]
    dir_fd = os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    before = os.fstat(dir_fd)
    dirs = list(spec["tmp_dirs"])
    if spec["net_off"]:
        dirs += spec["hidden_dirs"]
    mounted = set()
    for p in dirs:
        real = os.path.realpath(p)
        if not os.path.isdir(real) or real in mounted:
            continue
        mode = "0755" if p in spec["hidden_dirs"] else "1777"
        opts = "mode=%s,size=%d,nr_inodes=65536" % (mode, spec["tmp_size"])
        check(libc.mount(b"tmpfs", real.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode()),
              "mounting a private " + real)
        mounted.add(real)
    if os.path.isdir("/dev/mqueue"):
        check(libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
              "mounting a private /dev/mqueue")
    try:
        now = os.stat(d)
        same = (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino)
    except OSError:
        same = False
    if not same:
        # A fresh tmpfs hides the run directory (the work root is under /tmp by default): bind it back.
        os.makedirs(d, 0o755, exist_ok=True)
        check(libc.mount(("/proc/self/fd/%d" % dir_fd).encode(), d.encode(), None, MS_BIND, None),
              "binding the run directory")
    os.close(dir_fd)


def install_filter(hexprog):
    prog = bytes.fromhex(hexprog)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(len(prog) // 8, ctypes.addressof(buf))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "installing the seccomp filter")
    # Fail closed: the filter must be seen to work before the plugin runs.
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except PermissionError:
        return
    except OSError as e:
        raise SetupError("socket(AF_UNIX) under the seccomp filter: %s, want EACCES" % e)
    s.close()
    raise SetupError("the seccomp filter let a unix socket be created")


def read_spec(fd):
    def read_n(n):
        b = b""
        while len(b) < n:
            chunk = os.read(fd, n - len(b))
            if not chunk:
                raise SetupError("the run's spec is incomplete")
            b += chunk
        return b
    (n,) = struct.unpack(">I", read_n(4))
    return json.loads(read_n(n))


def set_up(fds):
    """Everything between the fork and the plugin's first line; returns the spec."""
    os.setpgid(0, 0)
    # The pipes on 0, 1, 2 (the descriptors received are all above 2); nothing else of the server's stays open.
    for i, fd in enumerate(fds[1:]):
        os.dup2(fd, i)
    os.closerange(3, 1 << 20)
    spec = read_spec(0)
    if spec.get("cgroup"):
        with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    if spec["ns"]:
        flags = CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if spec["net_off"] else 0)
        check(libc.unshare(flags), "unshare")
        mount_private(spec)
    elif spec["net_off"]:
        raise SetupError("network=off runs need the init stage's namespaces")
    uid, gid = spec["uid"], spec["gid"]
    if uid >= 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        clear_caps(uid)
    # A change of uid made the process non-dumpable; a spawned plugin is dumpable after its exec (its /proc files
    # are its own), and so is this one. Its memory is the server's, which holds nothing of any run.
    check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    try:
        os.chdir(spec["dir"])
    except OSError as e:
        raise SetupError("entering the run directory: %s" % e.strerror)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if spec["net_off"]:
        install_filter(spec["filter"])
    for res, soft, hard in spec["limits"]:
        resource.setrlimit(res, (soft, hard))
    return spec


def report_failure(fd, msg):
    try:
        os.write(fd, ("%s: %s\n" % (ARG0, msg)).encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(INIT_FAILED)


def plugin_traceback(exc, plugin_file):
    """The traceback as `python3 plugin.py` prints it: from the plugin's first frame on."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != plugin_file:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb if tb is not None else exc.__traceback__))


def child(fds):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        spec = set_up(fds)
    except (SetupError, OSError, ValueError, KeyError, TypeError) as e:
        report_failure(2, str(e))
    except BaseException as e:  # noqa: BLE001 - anything before the plugin runs is the setup's failure
        report_failure(2, repr(e))
    os.environ.clear()
    os.environ.update(spec["env"])
    enc, errs = sys.__stdout__.encoding if sys.__stdout__ else "utf-8", "surrogateescape"
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)),
                                                 encoding=enc, errors=errs)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), encoding=enc, errors=errs,
                                                   write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), encoding=enc,
                                                   errors="backslashreplace", write_through=True)
    plugin_file = spec["file"]
    sys.argv = [plugin_file]
    sys.path[:] = [spec["dir"], spec["dir"]] + BASE_PATH
    sys.dont_write_bytecode = True
    code = 0
    try:
        # As python3 runs a file: a fresh __main__ module with the file's code, compiled here.
        main_mod = types.ModuleType("__main__")
        main_mod.__file__, main_mod.__cached__, main_mod.__builtins__ = plugin_file, None, builtins
        sys.modules["__main__"] = main_mod
        with open(plugin_file, "rb") as f:
            source = f.read()
        exec(compile(source, plugin_file, "exec", dont_inherit=True), main_mod.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # noqa: BLE001 - an uncaught exception ends the plugin as it ends python3
        sys.stderr.write(plugin_traceback(e, plugin_file))
        code = 1
    try:
        threading._shutdown()
    except Exception:  # noqa: BLE001
        pass
    import atexit
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001
            code = 120
    os._exit(code)


class Run:
    def __init__(self, conn, pid):
        self.conn, self.pid, self.exited, self.closing = conn, pid, False, False


def killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def main():
    ctl = socket.socket(fileno=3)
    ctl.set_inheritable(False)
    ctl.setblocking(True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(ctl, selectors.EVENT_READ, None)
    sel.register(r, selectors.EVENT_READ, None)
    runs = {}  # conn fd -> Run

    def finish(run):
        """Kills the run's group, reaps its exited child and closes its connection."""
        killpg(run.pid)
        try:
            os.waitpid(run.pid, 0)
        except ChildProcessError:
            pass
        fd = run.conn.fileno()
        if not run.closing:
            sel.unregister(run.conn)
        run.conn.close()
        runs.pop(fd, None)

    def poll_exits():
        for run in list(runs.values()):
            if run.exited:
                continue
            try:
                info = os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None or info.si_pid == 0:
                continue
            run.exited = True
            if run.closing:
                finish(run)
                continue
            kind = "E" if info.si_code == os.CLD_EXITED else "S"
            try:
                run.conn.sendall(("X %s %d\n" % (kind, info.si_status)).encode())
            except OSError:
                pass

    def start(fds):
        pid = os.fork()
        if pid == 0:
            try:
                sel.close()
                ctl.close()
                for run in runs.values():
                    run.conn.close()
                os.close(r)
                os.close(w)
            finally:
                child(fds)
                os._exit(INIT_FAILED)  # not reached
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        for fd in fds[1:]:
            os.close(fd)
        conn = socket.socket(fileno=fds[0])
        conn.setblocking(True)
        run = Run(conn, pid)
        runs[conn.fileno()] = run
        sel.register(conn, selectors.EVENT_READ, run)
        try:
            conn.sendall(b"P %d\n" % pid)
        except OSError:
            killpg(pid)

    # Everything the server made so far is left alone by the collector, in the server and in every child: a
    # collection in a child would otherwise write to (and so copy) every page of the server's heap.
    gc.collect()
    gc.freeze()
    ctl.send(b"ready")
    while True:
        for key, _ in sel.select():
            if key.fileobj is ctl:
                try:
                    msg, fds, _, _ = socket.recv_fds(ctl, 16, 8)
                except InterruptedError:
                    continue
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    # Halley is gone: what it started goes with it.
                    for run in runs.values():
                        killpg(run.pid)
                    os._exit(0)
                if len(fds) != 4:
                    for fd in fds:
                        os.close(fd)
                    continue
                start(fds)
                poll_exits()
            elif key.fileobj == r:
                try:
                    while os.read(r, 512):
                        pass
                except BlockingIOError:
                    pass
                poll_exits()
            else:
                run = key.data
                try:
                    data = run.conn.recv(64)
                except InterruptedError:
                    continue
                except OSError:
                    data = b""
                # "D" (done), or Halley gave up on the run (its end closed): the group dies, the child is reaped
                # once it has exited, and the connection closes then.
                killpg(run.pid)
                if run.exited:
                    finish(run)
                elif data.startswith(b"D") or not data:
                    sel.unregister(run.conn)
                    run.closing = True


main()
