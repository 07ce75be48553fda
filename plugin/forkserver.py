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
#
# Compiled code. The SDK is the same file in every run and compiling it is a good part of a small run's work in the
# child, so the server compiles it once (its source is the server's one argument) and a child importing
# halley_plugin from its directory uses that code when the file's bytes are the bytes compiled (its filename then
# set to the child's copy, as a spawned run's would be). Nothing else is compiled here: the plugins' own files are
# not, because whatever the server holds is in every child's memory, and one plugin's source (a key its author
# inlined) must not be readable by another plugin's run.

import bisect
import builtins
import ctypes
import _imp
import gc
import importlib._bootstrap_external as bootstrap_external
import io
import os
import resource
import select
import signal
import socket
import struct
import sys
import traceback
import types

# What plugins commonly import, loaded once here so that a run does not pay for it (the SDK's own imports among
# them). Modules are shared state only in the sense that each run starts from the same freshly imported copy.
# Not threading (nor ctypes.util, which imports it): once imported, its after-fork hook runs in every child, a
# tenth of a small run's work; a plugin that uses threads imports it itself, as python3 would.
import base64  # noqa: F401
import datetime  # noqa: F401
import hashlib  # noqa: F401
import json  # noqa: F401
import re  # noqa: F401
import time  # noqa: F401
import urllib.error  # noqa: F401
import urllib.parse  # noqa: F401
import urllib.request  # noqa: F401
import uuid  # noqa: F401

# The server's own sys.path, without the entry for the current directory that -c adds.
BASE_PATH = [p for p in sys.path if p not in ("", ".")]

# Compiled code (see above): source bytes -> code object (None: it did not compile).
CODE = {}


def precompile(source, filename):
    """Compiles source as a child would; a file that does not compile is left to the child to report."""
    if source in CODE:
        return
    try:
        CODE[source] = compile(source, filename, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (a NUL byte), ...: the child's compile says it again
        CODE[source] = None


def compiled(source, filename):
    """In a child: the code of source as compile() would give it for filename, the server's when it has it."""
    code = CODE.pop(source, None) if type(source) is bytes else None  # once: another file of these bytes compiles its own
    fix = getattr(_imp, "_fix_co_filename", None)  # importlib's own since python 3.4
    if code is None or fix is None:
        return compile(source, filename, "exec", dont_inherit=True)
    fix(code, filename)  # this code object and every one nested in it
    return code


SOURCE_TO_CODE = bootstrap_external.SourceLoader.source_to_code


def source_to_code(self, data, path, *, _optimize=-1):
    """importlib's own, but with the server's code for a module it compiled (the SDK)."""
    if _optimize == -1 and type(data) is bytes and data in CODE:
        return compiled(data, path)
    return SOURCE_TO_CODE(self, data, path, _optimize=_optimize)


def load_libc():
    """The C library: the interpreter's own symbols (it links libc), else glibc by name, else ctypes.util's search."""
    for name in (None, "libc.so.6"):
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            if hasattr(lib, "unshare") and hasattr(lib, "mount"):
                return lib
        except OSError:
            pass
    from ctypes.util import find_library  # noqa: PLC0415 - imports subprocess and threading: only when needed
    return ctypes.CDLL(find_library("c"), use_errno=True)


libc = load_libc()
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


# Made once here rather than in every child (each object a child creates is memory it writes, and so copies).
CAP_HDR = CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
CAP_DATA = (CapData * 2)()


def has_caps():
    CAP_HDR.version, CAP_HDR.pid = 0x20080522, 0
    check(libc.capget(ctypes.byref(CAP_HDR), CAP_DATA), "capget")
    return any(d.effective or d.permitted or d.inheritable for d in CAP_DATA)


def clear_caps(uid):
    # Leaving uid 0 for another clears the permitted, effective and ambient sets (capabilities(7)); a Halley that
    # is not root but holds CAP_SETUID keeps them through the switch, and they are cleared here.
    if not has_caps():
        return
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    ctypes.memset(CAP_DATA, 0, ctypes.sizeof(CAP_DATA))
    CAP_HDR.version, CAP_HDR.pid = 0x20080522, 0
    check(libc.capset(ctypes.byref(CAP_HDR), CAP_DATA), "clearing capabilities")
    if has_caps():
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


def set_up(fds, keep=-1):
    """Everything between the fork and the plugin's first line; returns the spec. keep: a probe's report pipe."""
    os.setpgid(0, 0)
    # The pipes on 0, 1, 2 (the descriptors received are all above 2); nothing else of the server's stays open.
    for i, fd in enumerate(fds[1:]):
        os.dup2(fd, i)
    if keep > 2:
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 20)
    else:
        os.closerange(3, 1 << 20)
    spec = read_spec(0)
    if spec.get("cgroup"):
        fd = os.open(os.path.join(spec["cgroup"], "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, b"%d" % os.getpid())
        finally:
            os.close(fd)
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


def child(fds, probe=None):
    """A run, from the fork to its exit. probe: (report fd, source) for the server's own probe (see learn)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        spec = set_up(fds, probe[0] if probe else -1)
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
    bootstrap_external.SourceLoader.source_to_code = source_to_code
    code = 0
    try:
        # As python3 runs a file: a fresh __main__ module with the file's code, compiled here.
        main_mod = types.ModuleType("__main__")
        main_mod.__file__, main_mod.__cached__, main_mod.__builtins__ = plugin_file, None, builtins
        sys.modules["__main__"] = main_mod
        if probe:
            source = probe[1]
        else:
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
    threading = sys.modules.get("threading")  # as python3 exits: waits for the plugin's threads if it has any
    if threading is not None:
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
    if probe:
        report_written(probe[0])
    os._exit(code)


# Prefaulting. A forked child writes to a few hundred of the server's pages before and while its plugin runs
# (reference counts, the allocator's pools, frames, the standard streams): each write is a copy-on-write fault. On
# a virtual machine a fault is a trip through the hypervisor — 15–25 µs on the 2-core reference VM, and more when
# several children fault at once — while madvise(MADV_POPULATE_WRITE) copies a range of pages in one system call
# at ~2–10 µs a page. So the server learns once which of its pages a run writes, and every child populates those
# first, in a few hundred calls at most: at concurrency 4 this took a fork's cost from 51 to 33 ms of CPU a run.
#
# The learning involves no run: at start the server forks a probe that goes through a child's whole path — the
# set-up Halley gave as the server's second argument (a run's namespaces, private folders and limits, a switch to
# the server's own uid; no cgroup leaf; without them if that fails), the standard streams, a plugin of the
# server's own (PROBE_PLUGIN: read JSON, write JSON, as most plugins do) and the exit — and that reports, from
# /proc/self/pagemap, which of the server's writable pages it no longer shares with the server. The
# list is the server's own addresses, found by the server's own code: nothing a plugin does changes it, and a
# child populating them copies what it already shared. Where the kernel lacks MADV_POPULATE_WRITE (before 5.14)
# or pagemap cannot be read, the list stays empty and children fault as before.
MADV_POPULATE_WRITE = 23
PAGE = os.sysconf("SC_PAGE_SIZE")
PROBE_PLUGIN = (b"import json, sys\n"
                b"d = json.load(sys.stdin)\n"
                b'print(json.dumps({"context": {"n": d.get("context", {}).get("n")}}))\n')
PREFAULT = []  # (address, length) ranges a child populates first
WRITABLE = []  # (address, length) of the server's writable private mappings when the probe was forked
PROBED = {}  # the set-up the probe went through
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def writable_mappings():
    out = []
    with open("/proc/self/maps", "rb") as f:
        for line in f:
            fields = line.split()
            if fields[1] == b"rw-p":
                lo, hi = (int(x, 16) for x in fields[0].split(b"-"))
                out.append((lo, hi - lo))
    return out


def report_written(fd):
    """In the probe: the addresses of the server's writable pages it wrote, as 8-byte integers on fd."""
    pm = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for lo, n in WRITABLE:
            entries = os.pread(pm, n // PAGE * 8, lo // PAGE * 8)
            # Bit 63: present; bit 56: mapped by this process alone (its own copy now, or a fresh page).
            written = [lo + i * PAGE for i, (v,) in enumerate(struct.iter_unpack("<Q", entries)) if v >> 63 and v >> 56 & 1]
            if written:
                os.write(fd, struct.pack("<%dQ" % len(written), *written))
    finally:
        os.close(pm)


def learn(spec):
    """Sets PREFAULT from the pages the probe wrote: runs of pages, holes of one page filled. spec: the probe's
    set-up (JSON), or without namespaces and uid switch when that set-up fails."""
    global WRITABLE
    WRITABLE = writable_mappings()
    if not WRITABLE or libc.madvise(WRITABLE[0][0], PAGE, MADV_POPULATE_WRITE) != 0:
        return
    plain = {"uid": -1, "gid": -1, "dir": "/", "ns": False, "net_off": False, "limits": [], "file": "<probe>", "env": {}}
    for s in (spec, json.dumps(plain).encode()):
        if s and run_probe(s):
            PROBED.update(json.loads(s))
            return


def run_probe(spec):
    """Forks the probe through spec; False when it failed."""
    global PREFAULT
    stdin_r, stdin_w = os.pipe()
    os.write(stdin_w, struct.pack(">I", len(spec)) + spec + b'{"context": {"n": 1}}')
    os.close(stdin_w)
    report_r, report_w = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)  # a probe that hangs dies, and the server starts without the list rather than not at all
        try:
            child([null, stdin_r, null, null], (report_w, PROBE_PLUGIN))
        finally:
            os._exit(INIT_FAILED)
    for fd in (stdin_r, report_w, null):
        os.close(fd)
    chunks = []
    while True:
        b = os.read(report_r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(report_r)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    if status != 0 or len(data) % 8:
        return False
    ranges, starts = [], [lo for lo, _ in WRITABLE]
    for (p,) in struct.iter_unpack("<Q", data):
        lo, n = WRITABLE[bisect.bisect_right(starts, p) - 1]
        if not lo <= p < lo + n:
            return False
        # A hole of one page is filled, but a range never leaves its mapping: the next one may not be writable,
        # and madvise stops at the first page it cannot populate.
        if ranges and ranges[-1][2] == lo and p - (ranges[-1][0] + ranges[-1][1]) <= PAGE:
            ranges[-1][1] = p + PAGE - ranges[-1][0]
        else:
            ranges.append([p, PAGE, lo])
    PREFAULT = [(p, n) for p, n, _ in ranges]
    return True


def prefault():
    madvise = libc.madvise
    for lo, n in PREFAULT:
        madvise(lo, n, MADV_POPULATE_WRITE)  # a range unmapped since (ENOMEM) is only not populated


class Run:
    __slots__ = ("fd", "pid", "exited", "closing")

    def __init__(self, fd, pid):
        self.fd, self.pid, self.exited, self.closing = fd, pid, False, False


def killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def say(fd, line):
    try:
        os.write(fd, line)
    except OSError:
        pass


def main():
    # The loop is kept small on purpose: every page of the server's memory it writes to while a child is alive is
    # copied (a page fault, in the server) once per fork, so it works on descriptors and epoll directly rather than
    # socket objects and selectors.
    ctl = socket.socket(fileno=3)
    ctl.set_inheritable(False)
    ctl.setblocking(True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    ep = select.epoll()
    ep.register(3, select.EPOLLIN)
    ep.register(r, select.EPOLLIN)
    runs = {}  # connection fd -> Run

    def finish(run):
        """Kills the run's group, reaps its exited child and closes its connection."""
        killpg(run.pid)
        try:
            os.waitpid(run.pid, 0)
        except ChildProcessError:
            pass
        if not run.closing:
            ep.unregister(run.fd)
        os.close(run.fd)
        runs.pop(run.fd, None)

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
            say(run.fd, b"X %s %d\n" % (b"E" if info.si_code == os.CLD_EXITED else b"S", info.si_status))

    def start(fds):
        pid = os.fork()
        if pid == 0:
            prefault()
            try:
                ep.close()
                ctl.close()
                for fd in runs:
                    os.close(fd)
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
        fd = fds[0]
        os.set_blocking(fd, True)
        runs[fd] = Run(fd, pid)
        ep.register(fd, select.EPOLLIN)
        try:
            os.write(fd, b"P %d\n" % pid)
        except OSError:
            killpg(pid)

    # Everything the server made so far is left alone by the collector, in the server and in every child: a
    # collection in a child would otherwise write to (and so copy) every page of the server's heap.
    if len(sys.argv) > 1:
        precompile(os.fsencode(sys.argv[1]), "halley_plugin.py")
    gc.collect()
    gc.freeze()
    try:
        learn(os.fsencode(sys.argv[2]) if len(sys.argv) > 2 else None)
    except Exception:  # noqa: BLE001 - an optimisation: without its list the server serves, children fault as before
        PREFAULT.clear()
    gc.collect()
    gc.freeze()
    ctl.send(b"ready")
    while True:
        try:
            events = ep.poll()
        except InterruptedError:
            continue
        for fd, _ in events:
            if fd == 3:
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
                    for f in fds:
                        os.close(f)
                    continue
                start(fds)
                poll_exits()
            elif fd == r:
                try:
                    while os.read(r, 512):
                        pass
                except BlockingIOError:
                    pass
                poll_exits()
            else:
                run = runs.get(fd)
                if run is None or run.closing:
                    continue
                try:
                    data = os.read(fd, 64)
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
                    ep.unregister(fd)
                    run.closing = True


main()
