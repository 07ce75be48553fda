#!/usr/bin/env python3
"""stallwatch — catch a stall of Halley, MariaDB or Redis in the act (BENCH_WATCH=1 make bench starts it).

Five probes run side by side, each as often as every 200 ms: Halley's /healthz (the process answers) and /readyz
(it reaches its database and Redis), `SELECT 1` on a kept MySQL connection, a one-row autocommit UPDATE on another
(a commit: it waits where Halley's writes wait — the redo log, its fsync, free pages — which SELECT 1 never does;
in a table of its own, in a schema `halley_stallwatch_<pid>` dropped at the end), and PING on a kept Redis
connection. And the oldest statement MySQL is running for anyone else (information_schema.PROCESSLIST's TIME_MS,
every 200 ms): a stall of some writes only — a latch on one index, say — leaves all five probes quick while
Halley's statements wait; one running longer than --trigger counts as a waiting probe, `mysql_statement`.
Every second it writes a sample of the machine (disk, pressure, memory, CPU) and of InnoDB's counters (LSN,
pending fsyncs, checkpoint age, free pages, threads running) to samples.log. When a probe has been waiting for
longer than --trigger seconds, it captures — while the stall lasts, up to four times a second apart — Halley's
goroutines (its pprof address), MySQL's processlist and InnoDB status, Redis INFO, the busiest threads, and where
the threads of Halley, MariaDB and Redis wait in the kernel (kernel.txt: states, wait channels, the kernel stacks
of threads not sleeping interruptibly; the stacks need root), into stall-<time>-<n>/. probes.log lists every probe slower than 200 ms and every capture.

It only reads (but for its own probe table); it stops when Halley's process is gone or on SIGTERM. Standard library and the mysql client only.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

STATUS = ("Innodb_lsn_current", "Innodb_lsn_flushed", "Innodb_os_log_pending_fsyncs", "Innodb_os_log_pending_writes",
          "Innodb_data_pending_fsyncs", "Innodb_data_pending_writes", "Innodb_os_log_fsyncs", "Innodb_data_fsyncs",
          "Innodb_buffer_pool_wait_free", "Innodb_checkpoint_age", "Threads_running", "Threads_connected",
          "Innodb_row_lock_current_waits", "Innodb_buffer_pool_pages_free", "Innodb_buffer_pool_pages_dirty",
          "Innodb_history_list_length", "Innodb_buffer_pool_pages_flushed", "Com_commit", "Questions")
VMSTAT = ("nr_dirty", "nr_writeback", "pgmajfault", "compact_stall", "allocstall_normal", "pgscan_direct",
          "pgsteal_kswapd", "thp_fault_alloc")


def stamp(t):
    return time.strftime("%H:%M:%S", time.gmtime(t)) + ".%03d" % int((t % 1) * 1000)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class MySQL:
    """A kept `mysql` client: one statement at a time, its rows read up to a marker row."""

    def __init__(self, args):
        self.p = subprocess.Popen(args.mysql_cmd + ["-N", "-B", "-n"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def query(self, sql):
        self.p.stdin.write(sql + ";\nSELECT '__stallwatch__';\n")
        self.p.stdin.flush()
        rows = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("mysql client exited")
            if line.strip() == "__stallwatch__":
                return rows
            rows.append(line.rstrip("\n"))


class Redis:
    """A kept Redis connection that sends PING (inline command) and reads +PONG."""

    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=60)
        self.f = self.s.makefile("rb")

    def ping(self):
        self.s.sendall(b"PING\r\n")
        if not self.f.readline().startswith(b"+PONG"):
            raise RuntimeError("no PONG")


class Watch:
    def __init__(self, args):
        self.a = args
        os.makedirs(args.out, exist_ok=True)
        self.samples = open(os.path.join(args.out, "samples.log"), "a", buffering=1)
        self.probes = open(os.path.join(args.out, "probes.log"), "a", buffering=1)
        self.lock = threading.Lock()
        self.inflight = {}  # probe name -> when it was sent
        self.done = threading.Event()
        self.schema = "halley_stallwatch_%d" % os.getpid()

    def log_probe(self, line):
        with self.lock:
            self.probes.write(line + "\n")

    def probe(self, name, make, fn):
        conn = None
        while not self.done.is_set():
            t0 = time.time()
            with self.lock:
                self.inflight[name] = t0
            try:
                if conn is None:
                    conn = make()
                fn(conn)
                outcome = "ok"
            except Exception as e:  # noqa: BLE001 — a probe that fails is reported, then made anew
                outcome, conn = "error: " + str(e)[:100], None
            took = time.time() - t0
            with self.lock:
                self.inflight.pop(name, None)
            if took > 0.2 or outcome != "ok":
                self.log_probe("%s %s %.3f s %s" % (stamp(t0), name, took, outcome))
            self.done.wait(max(0.0, 0.2 - took))

    def statements(self):
        """The age of the oldest statement running in MySQL (not the watch's own) counts as a probe waiting."""
        sql = ("SELECT COALESCE(MAX(TIME_MS), 0) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' "
               "AND ID <> CONNECTION_ID() AND INFO NOT LIKE '%halley_stallwatch%' AND INFO NOT LIKE 'SHOW %'")
        conn, logged = None, 0.0
        while not self.done.wait(0.2):
            try:
                conn = conn or MySQL(self.a)
                rows = conn.query(sql)
                age = float(rows[0]) / 1000 if rows else 0.0
            except Exception as e:  # noqa: BLE001 — reported, then made anew
                self.log_probe("%s mysql_statement error: %s" % (stamp(time.time()), str(e)[:100]))
                conn, age = None, 0.0
            now = time.time()
            with self.lock:
                if age > self.a.trigger:
                    self.inflight["mysql_statement"] = now - age
                else:
                    self.inflight.pop("mysql_statement", None)
            if age > 0.2 and (age > logged + 0.5 or age < logged):
                self.log_probe("%s mysql_statement running %.3f s" % (stamp(now), age))
                logged = age
            elif age <= 0.2:
                logged = 0.0

    def commit_conn(self):
        """A kept client whose probe is a commit, on a one-row table of the watch's own."""
        c = MySQL(self.a)
        c.query("CREATE DATABASE IF NOT EXISTS %s" % self.schema)
        c.query("CREATE TABLE IF NOT EXISTS %s.probe (id INT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB"
                % self.schema)
        c.query("INSERT IGNORE INTO %s.probe VALUES (1, 0)" % self.schema)
        return c

    def drop_schema(self):
        try:
            MySQL(self.a).query("DROP DATABASE IF EXISTS %s" % self.schema)
        except Exception:  # noqa: BLE001 — best effort at exit
            pass

    def http(self, path):
        url = "http://127.0.0.1:%d%s" % (self.a.halley_port, path)
        return lambda _: urllib.request.urlopen(url, timeout=60).read()

    def sample(self):
        while not self.done.is_set():
            t0 = time.time()
            disk = [ln.split() for ln in read("/proc/diskstats").splitlines() if ln.split()[2:3] == [self.a.disk]]
            d = disk[0] if disk else []
            vm = dict(ln.split() for ln in read("/proc/vmstat").splitlines() if ln.count(" ") == 1)
            rss = [ln.split()[1] for ln in read("/proc/%d/status" % self.a.pid).splitlines() if ln.startswith("VmRSS")]
            with self.lock:
                waiting = {k: round(t0 - v, 3) for k, v in self.inflight.items() if t0 - v > 0.2}
            self.samples.write(
                "%s waiting=%s disk(reads,read_ms,writes,write_sectors,write_ms,in_flight,io_ms,weighted_ms)=%s %s "
                "halley_rss_kb=%s cpu=[%s] io_pressure=[%s] cpu_pressure=[%s] load=[%s]\n" % (
                    stamp(t0), waiting, ",".join(d[3:4] + d[6:8] + d[9:14]),
                    " ".join("%s=%s" % (k, vm.get(k, "?")) for k in VMSTAT), rss[0] if rss else "gone",
                    read("/proc/stat").split("\n", 1)[0], read("/proc/pressure/io").replace("\n", " | ").strip(" |"),
                    read("/proc/pressure/cpu").split("\n", 1)[0], read("/proc/loadavg").strip()))
            if not os.path.exists("/proc/%d" % self.a.pid):
                self.log_probe("%s Halley (pid %d) is gone: stopping" % (stamp(t0), self.a.pid))
                self.done.set()
            self.done.wait(max(0.0, 1 - (time.time() - t0)))

    def innodb(self):
        names = ",".join("'%s'" % s for s in STATUS)
        conn = None
        while not self.done.is_set():
            t0 = time.time()
            with self.lock:
                self.inflight["innodb_status"] = t0
            try:
                conn = conn or MySQL(self.a)
                rows = conn.query("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % names)
            except Exception as e:  # noqa: BLE001
                rows, conn = ["error " + str(e)[:100]], None
            took = time.time() - t0
            with self.lock:
                self.inflight.pop("innodb_status", None)
            self.samples.write("%s innodb(%.3f s) %s\n" % (stamp(t0), took, " ".join(r.replace("\t", "=") for r in rows)))
            self.done.wait(max(0.0, 1 - took))

    def run_to(self, path, cmd):
        t0 = time.time()
        try:
            data = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20).stdout
        except subprocess.TimeoutExpired as e:
            data = (e.stdout or b"") + b"\n<no answer in 20 s>\n"
        with open(path, "wb") as f:
            f.write(("# %s, answered in %.3f s: %s\n" % (stamp(t0), time.time() - t0, " ".join(cmd))).encode())
            f.write(data)

    def kernel(self, path):
        """Where the threads of Halley, MariaDB and Redis are in the kernel: per process the count of threads in each
        state and each wait channel, and the kernel stack of every thread not sleeping interruptibly (D: a page
        fault, a disk wait) — what a stall in which every process waits on the kernel looks like."""
        t0 = time.time()
        pids = [(self.a.pid, "halley")]
        for d in os.listdir("/proc"):
            if d.isdigit() and read("/proc/%s/comm" % d).strip() in ("mariadbd", "mysqld", "redis-server"):
                pids.append((int(d), read("/proc/%s/comm" % d).strip()))
        out = []
        for pid, name in pids:
            tasks = sorted(os.listdir("/proc/%d/task" % pid)) if os.path.isdir("/proc/%d/task" % pid) else []
            states, chans, stacks = {}, {}, []
            for tid in tasks:
                stat = read("/proc/%d/task/%s/stat" % (pid, tid))
                state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
                chan = read("/proc/%d/task/%s/wchan" % (pid, tid)).strip("\0") or "-"
                states[state] = states.get(state, 0) + 1
                chans[chan] = chans.get(chan, 0) + 1
                if state not in ("S", "I"):
                    stacks.append("  thread %s (%s) state %s wchan %s\n%s" % (
                        tid, read("/proc/%d/task/%s/comm" % (pid, tid)).strip(), state, chan,
                        read("/proc/%d/task/%s/stack" % (pid, tid))))
            out.append("%s (pid %d): %d threads, states %s\n  wait channels %s\n%s" % (
                name, pid, len(tasks), states, sorted(chans.items(), key=lambda kv: -kv[1]), "".join(stacks)))
        with open(path, "w") as f:
            f.write("# %s, read in %.3f s\n%s" % (stamp(t0), time.time() - t0, "\n".join(out)))

    def capture(self, folder):
        os.makedirs(folder, exist_ok=True)
        pprof = "http://127.0.0.1:%d/debug/pprof/goroutine" % self.a.pprof_port if self.a.pprof_port else ""
        jobs = [
            ("mysql.txt", self.a.mysql_cmd + ["-e", "SHOW FULL PROCESSLIST; SHOW ENGINE INNODB STATUS\\G"]),
            ("redis.txt", ["redis-cli", "-h", self.a.redis_host, "-p", str(self.a.redis_port), "INFO", "all"]),
            ("threads.txt", ["sh", "-c", "top -b -n 1 -H -w 200 | head -40"]),
        ]
        if pprof:
            jobs += [("goroutines.txt", ["curl", "-sS", "--max-time", "20", pprof + "?debug=1"]),
                     ("goroutines-full.txt", ["curl", "-sS", "--max-time", "20", pprof + "?debug=2"])]
        # What each InnoDB thread waits on, when MariaDB runs with the performance schema (a diagnostic run: see
        # docs/benchmarks.md): the latch, mutex or file of every thread's current wait.
        jobs.append(("mysql-waits.txt", self.a.mysql_cmd + ["-e",
            "SELECT IF(@@performance_schema, 'performance_schema on', 'performance_schema off: start MariaDB with "
            "--performance-schema=ON to see the waits') AS note; "
            "SELECT t.PROCESSLIST_ID AS id, t.NAME AS thread, w.EVENT_NAME, w.SOURCE, ROUND(w.TIMER_WAIT / 1e9, 3) AS "
            "wait_ms, IF(w.END_EVENT_ID IS NULL, 'waiting', 'done') AS state, w.OBJECT_NAME, w.OPERATION "
            "FROM performance_schema.events_waits_current w JOIN performance_schema.threads t USING (THREAD_ID) "
            "WHERE @@performance_schema ORDER BY state DESC, w.TIMER_WAIT DESC; "
            # Who read pages in the last 5 s, and of which table — with the events_waits_history_long consumer on.
            "SELECT t.NAME AS thread, t.PROCESSLIST_ID AS id, h.OBJECT_NAME AS file, h.OPERATION, COUNT(*) AS n, "
            "ROUND(SUM(h.TIMER_WAIT) / 1e9, 1) AS ms FROM performance_schema.events_waits_history_long h "
            "JOIN performance_schema.threads t USING (THREAD_ID) WHERE @@performance_schema "
            "AND h.EVENT_NAME LIKE 'wait/io/file/innodb/%' AND h.TIMER_START > "
            "(SELECT MAX(TIMER_START) FROM performance_schema.events_waits_history_long) - 5e12 "
            "GROUP BY 1, 2, 3, 4 ORDER BY n DESC LIMIT 40"]))
        # The user-space stacks of MariaDB's threads (eu-stack, from elfutils, when installed): which of them sleep
        # on the same lock. It stops MariaDB for a fraction of a second; only the first capture of a stall takes it.
        if folder.endswith("-0") and shutil.which("eu-stack"):
            for d in os.listdir("/proc"):
                if d.isdigit() and read("/proc/%s/comm" % d).strip() in ("mariadbd", "mysqld"):
                    jobs.append(("mariadb-stacks.txt", ["eu-stack", "-p", d]))
                    break
        threads = [threading.Thread(target=self.run_to, args=(os.path.join(folder, n), c)) for n, c in jobs]
        threads.append(threading.Thread(target=self.kernel, args=(os.path.join(folder, "kernel.txt"),)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def stuck(self):
        now = time.time()
        with self.lock:
            return {k: round(now - v, 3) for k, v in self.inflight.items() if now - v > self.a.trigger}

    def trigger(self):
        events = 0
        while not self.done.wait(0.1) and events < self.a.max_events:
            waiting = self.stuck()
            if not waiting:
                continue
            events += 1
            base = os.path.join(self.a.out, "stall-" + stamp(time.time()).replace(":", ""))
            self.log_probe("%s CAPTURE waiting=%s into %s-*" % (stamp(time.time()), waiting, base))
            for n in range(4):
                if n > 0 and not self.stuck():
                    break
                t0 = time.time()
                self.capture("%s-%d" % (base, n))
                self.done.wait(max(0.0, 1 - (time.time() - t0)))
            self.done.wait(self.a.quiet)

    def run(self):
        probes = [
            ("halley_healthz", lambda: None, self.http("/healthz")),
            ("halley_readyz", lambda: None, self.http("/readyz")),
            ("mysql_select1", lambda: MySQL(self.a), lambda c: c.query("SELECT 1")),
            ("mysql_commit", self.commit_conn,
             lambda c: c.query("UPDATE %s.probe SET n = n + 1 WHERE id = 1" % self.schema)),
            ("redis_ping", lambda: Redis(self.a.redis_host, self.a.redis_port), lambda c: c.ping()),
        ]
        for name, make, fn in probes:
            threading.Thread(target=self.probe, args=(name, make, fn), daemon=True).start()
        threading.Thread(target=self.sample, daemon=True).start()
        threading.Thread(target=self.innodb, daemon=True).start()
        threading.Thread(target=self.statements, daemon=True).start()
        self.trigger()
        self.done.wait()
        self.drop_schema()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--halley-port", type=int, required=True)
    p.add_argument("--pprof-port", type=int, default=0, help="Halley's pprof port (bench.sh's HALLEY_BENCH_PPROF)")
    p.add_argument("--pid", type=int, required=True, help="Halley's process id: the watch stops when it is gone")
    p.add_argument("--out", required=True, help="folder for samples.log, probes.log and the captures")
    p.add_argument("--mysql-host", default="127.0.0.1")
    p.add_argument("--mysql-port", type=int, default=3306)
    p.add_argument("--mysql-user", default="root")
    p.add_argument("--redis-host", default="127.0.0.1")
    p.add_argument("--redis-port", type=int, default=6379)
    p.add_argument("--disk", default="", help="block device of samples.log's disk columns (default: the root's)")
    p.add_argument("--trigger", type=float, default=0.7, help="seconds a probe waits before a capture (0.7)")
    p.add_argument("--quiet", type=float, default=20, help="seconds after a capture before the next can start")
    p.add_argument("--max-events", type=int, default=8, help="captures at most (8)")
    a = p.parse_args()
    a.mysql_cmd = ["mysql", "-h", a.mysql_host, "-P", str(a.mysql_port), "-u", a.mysql_user, "--connect-timeout=10"]
    if not a.disk:
        dev = os.stat("/").st_dev
        majmin = "%d %d" % (os.major(dev), os.minor(dev))
        a.disk = next((ln.split()[2] for ln in read("/proc/diskstats").splitlines()
                       if " ".join(ln.split()[:2]) == majmin), "")
    w = Watch(a)
    signal.signal(signal.SIGTERM, lambda *_: w.done.set())
    w.run()


if __name__ == "__main__":
    main()
