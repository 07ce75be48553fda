#!/usr/bin/env bash
# bench.sh — what `make bench` runs: build halley and halley-bench, create a fresh MySQL database, start Halley
# on MySQL + Redis on a free loopback port, run the benchmark suites, stop Halley and clean up (always, even
# on failure or Ctrl-C). Every step is bounded in time. See docs/benchmarks.md.
#
# Knobs (environment):
#   BENCH_SUITES       suites to run, in order (default "steps timers storm plugins")
#   BENCH_CLIENTS      steps: clients (100)            BENCH_DURATION   steps: measured time (30s)
#   TIMERS_N           timers: timers to arm (1000000) TIMERS_WINDOW    timers: spread (15m)
#   BENCH_QUICK=1      timers: 20000 over 5m unless TIMERS_N/TIMERS_WINDOW say otherwise (≈ 10 min in all, not 45)
#   STORM_N            storm: timers due in one second (100000)
#   TIMERS_LOAD        timers/storm: background step clients (10)
#   STEPS_FLAGS, TIMERS_FLAGS, STORM_FLAGS   extra halley-bench flags for those suites (e.g. "--arm-clients 8",
#                      "--http std": the step load through net/http's client instead of its own connections)
#   TIMERS_LIMIT       time limit in seconds of the timers and storm suites each (3600)
#   PLUGIN_RUNS        plugins: runs per side (300)    PLUGIN_CONC      plugins: concurrency (4)
#   SWEEP_N            sweep: instances archived (20000) SWEEP_CLIENTS  sweep: step-load clients beside it (20)
#   SWEEP_FLAGS        extra halley-bench flags of the sweep suite (e.g. "--duty 1 --batch 200")
#   SQLSTEP_FLAGS      flags of the sqlstep suite (BENCH_CLIENTS clients; e.g. "--read cached --n 3000"): the steps
#                      suite's SQL alone, no Halley (docs/benchmarks.md, "A step without its lock read")
#   BENCH_HALLEY_GOGC  GOGC of the Halley under test only (unset: Halley's default, 400); the bench client keeps its own
#   BENCH_REDO_MB      redo log the bench sets for the timers suite at TIMERS_N >= 200000 (2048 MiB; MariaDB 10.9+)
#   BENCH_POOL_MB      buffer pool the bench sets for the large suites (unset: the timers suite's data, 12 KiB a
#                      timer, at least 8192 MiB; a storm 8192 MiB; never over three quarters of the memory)
#   BENCH_HALLEY_GOMAXPROCS  GOMAXPROCS of the Halley under test only (unset: Go's default, the cores it may use)
#   BENCH_PLUGIN_WORKERS     HALLEY_PLUGIN_WORKERS of the Halley under test (unset: PLUGIN_CONC, at least 8)
#   BENCH_OUT          folder for logs, outputs and CPU profiles (bin/bench/<UTC date>)
#   BENCH_TIMEOUT      hard limit for the whole run in seconds (5400)
#   BENCH_KEEP_DB=1    keep the database afterwards (it is dropped by default)
#   BENCH_SETTLE_S     wait at most this many seconds (120) for MySQL to finish the last run's work before measuring
#   BENCH_WATCH=1      run scripts/stallwatch.py beside Halley: probes every 200 ms, and goroutines, processlist and
#                      InnoDB status captured while a probe waits > BENCH_WATCH_TRIGGER s (0.7), into BENCH_OUT/watch
#   BENCH_MYSQL_TUNE   1 (default): size MySQL as docs/benchmarks.md "Reproduce" says, SET GLOBAL, and set it back
#                      at the end: max_connections (room for a baseline's clients beside Halley's pool),
#                      innodb_buffer_pool_size (BENCH_POOL_MB) for timers of 200,000 or more or a storm of
#                      50,000 or more; innodb_log_file_size 2 GiB (MariaDB 10.9+) for the timers;
#                      0: leave MySQL as it is (warnings only)
#   MYSQL_HOST/MYSQL_PORT/MYSQL_USER (127.0.0.1/3306/root, no password), REDIS_HOST/REDIS_PORT (127.0.0.1/6379)
set -Eeuo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
GO=${GO:-go}
SUITES=${BENCH_SUITES:-steps timers storm plugins}
CLIENTS=${BENCH_CLIENTS:-100}
DURATION=${BENCH_DURATION:-30s}
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	TIMERS_N=${TIMERS_N:-20000}
	TIMERS_WINDOW=${TIMERS_WINDOW:-5m}
fi
TIMERS_N=${TIMERS_N:-1000000}
TIMERS_WINDOW=${TIMERS_WINDOW:-15m}
STORM_N=${STORM_N:-100000}
TIMERS_LOAD=${TIMERS_LOAD:-10}
PLUGIN_RUNS=${PLUGIN_RUNS:-300}
PLUGIN_CONC=${PLUGIN_CONC:-4}
SWEEP_N=${SWEEP_N:-20000}
SWEEP_CLIENTS=${SWEEP_CLIENTS:-20}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${BENCH_OUT:-$ROOT/bin/bench/$STAMP}
HARD_LIMIT=${BENCH_TIMEOUT:-5400}
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${MYSQL_PORT:-3306}
MYSQL_USER=${MYSQL_USER:-root}
REDIS_HOST=${REDIS_HOST:-127.0.0.1}
REDIS_PORT=${REDIS_PORT:-6379}

log() { printf '%s bench: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

for tool in mysql redis-cli curl python3; do
	command -v "$tool" >/dev/null || die "$tool is required"
done
case "$MYSQL_HOST$REDIS_HOST" in
127.0.0.1127.0.0.1 | localhost127.0.0.1 | 127.0.0.1localhost | localhostlocalhost) ;;
*) die "MYSQL_HOST and REDIS_HOST must be loopback addresses" ;;
esac

mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/halley-bench.XXXXXX")
DB="halley_bench_${STAMP,,}_$$"
DB=${DB//[^a-z0-9_]/_}
REDIS_DB=""
CLAIM_KEY="halley-bench:claim"
CLAIM_TOKEN="$STAMP-$$-$RANDOM$RANDOM"
HALLEY_PID=""
SUITE_PID=""
WATCH_PID=""
WATCHDOG=""
RESTORE_MYSQL="" # SET GLOBAL statements that put back what tune_mysql changed
START=$(date +%s)

# release_claim N deletes the claim marker of database N if it is still this run's.
release_claim() {
	rc -n "$1" EVAL "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0" 1 "$CLAIM_KEY" "$CLAIM_TOKEN" >/dev/null
}
my() { mysql -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" --connect-timeout=10 "$@"; }
rc() { timeout 30 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" "$@"; }

cleanup() {
	local code=$?
	trap - EXIT INT TERM
	set +e
	[ -n "$WATCHDOG" ] && kill -TERM "$WATCHDOG" 2>/dev/null
	[ -n "$WATCH_PID" ] && kill -TERM "$WATCH_PID" 2>/dev/null
	if [ -n "$SUITE_PID" ]; then
		# timeout(1) passes the signal on to halley-bench, which stops its loops and exits.
		kill -TERM "$SUITE_PID" 2>/dev/null
		wait "$SUITE_PID" 2>/dev/null
	fi
	if [ -n "$HALLEY_PID" ] && kill -0 "$HALLEY_PID" 2>/dev/null; then
		log "stopping Halley (pid $HALLEY_PID)"
		kill -TERM "$HALLEY_PID" 2>/dev/null
		for _ in $(seq 1 40); do kill -0 "$HALLEY_PID" 2>/dev/null || break; sleep 0.5; done
		kill -0 "$HALLEY_PID" 2>/dev/null && { log "Halley did not stop in 20 s: SIGKILL"; kill -KILL "$HALLEY_PID" 2>/dev/null; }
		wait "$HALLEY_PID" 2>/dev/null
	fi
	if [ -n "$REDIS_DB" ]; then
		# Only Halley's keys ("halley:" prefix, none when we claimed the database), then our claim.
		rc -n "$REDIS_DB" --scan --pattern 'halley:*' | xargs -r -n 500 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" -n "$REDIS_DB" DEL >/dev/null
		release_claim "$REDIS_DB"
	fi
	if [ -n "$RESTORE_MYSQL" ]; then
		my -e "$RESTORE_MYSQL" && log "MySQL settings set back: $RESTORE_MYSQL"
	fi
	if [ "${BENCH_KEEP_DB:-0}" = 1 ]; then
		log "kept database $DB"
	else
		my -e "DROP DATABASE IF EXISTS \`$DB\`" 2>/dev/null && log "dropped database $DB"
	fi
	rm -rf "$WORK"
	log "outputs in $OUT ($(($(date +%s) - START)) s in all)"
	exit "$code"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# The whole run is bounded: a watchdog ends this script (and so, through the trap, everything) at the limit.
(
	trap 'kill "$sp" 2>/dev/null; exit 0' TERM
	sleep "$HARD_LIMIT" &
	sp=$!
	wait "$sp"
	echo "bench: hard time limit of ${HARD_LIMIT}s reached" >&2
	kill -TERM $$ 2>/dev/null
) &
WATCHDOG=$!

# want_pool_bytes is the buffer pool for this run (BENCH_POOL_MB, above). The timers suite's database holds all its
# data: a million timers with the step load beside them used 9.2 GiB of a 16 GiB pool. A pool smaller than that
# evicts pages all through the firing, and MariaDB 10.11 then stalls every write for 1-4 s now and then on its
# doublewrite path; with the pool holding the data it did not (docs/benchmarks.md, "A pool that holds the million").
want_pool_bytes() {
	local want mem_b
	mem_b=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) * 1024))
	want=$((8 << 30))
	case " $SUITES " in *" timers "*) [ $((TIMERS_N * 12 << 10)) -gt "$want" ] && want=$((TIMERS_N * 12 << 10)) ;; esac
	[ -n "${BENCH_POOL_MB:-}" ] && want=$((BENCH_POOL_MB << 20))
	[ "$want" -gt $((mem_b / 4 * 3)) ] && want=$((mem_b / 4 * 3))
	echo "$want"
}
# tune_mysql sizes InnoDB for the large timer suites (BENCH_MYSQL_TUNE, above): at MariaDB's default 128 MiB buffer
# pool every fire of a million timers reads pages from disk; with its default 96 MiB redo log InnoDB writes every
# changed page back within seconds once a million rows change (docs/benchmarks.md, "Timers go first"; halley doctor
# says the same to operators).
tune_mysql() { # redo: 1 to size the redo log too
	local pool redo want_pool want_redo restore=""
	pool=$(my -N -e 'SELECT @@innodb_buffer_pool_size')
	redo=$(my -N -e 'SELECT @@innodb_log_file_size')
	want_pool=$(want_pool_bytes)
	want_redo=$((${BENCH_REDO_MB:-2048} << 20))
	if [ "$pool" -lt "$want_pool" ]; then
		my -e "SET GLOBAL innodb_buffer_pool_size = $want_pool" || die "unable to set innodb_buffer_pool_size (BENCH_MYSQL_TUNE=0 runs without)"
		restore="SET GLOBAL innodb_buffer_pool_size = $pool;"
		log "innodb_buffer_pool_size $((pool >> 20)) MiB -> $((want_pool >> 20)) MiB for this run"
	fi
	if [ "$1" = 1 ] && [ "$redo" -lt "$want_redo" ]; then
		if my -e "SET GLOBAL innodb_log_file_size = $want_redo" 2>/dev/null; then
			restore="$restore SET GLOBAL innodb_log_file_size = $redo;"
			REDO_SET_AT=$(date +%s)
			log "innodb_log_file_size $((redo >> 20)) MiB -> $((want_redo >> 20)) MiB for this run"
		else
			log "WARNING: innodb_log_file_size ($((redo >> 20)) MiB) cannot be changed online here (MariaDB 10.9+ can); large suites are limited by page write-back"
		fi
	fi
	RESTORE_MYSQL=$restore
}
# The redo log only for the timers: a storm of 100,000 changes the same pages again and again and fired as fast
# with 96 MiB as with 2 GiB (docs/benchmarks.md, "The bench sizes MySQL itself, and a trap it avoids").
large=0 redo=0 REDO_SET_AT=0
case " $SUITES " in *" timers "*) [ "$TIMERS_N" -ge 200000 ] && large=1 redo=1 ;; esac
case " $SUITES " in *" storm "*) [ "$STORM_N" -ge 50000 ] && large=1 ;; esac
if [ "$large" = 1 ] && [ "${BENCH_MYSQL_TUNE:-1}" = 1 ]; then
	tune_mysql "$redo"
fi
# A raw-commit baseline opens BENCH_CLIENTS connections of its own while Halley keeps up to 64: at MariaDB's default
# max_connections of 151 the storm's first baseline was refused 2,135 times ("Too many connections", error 1040) and
# measured half the commit rate (docs/benchmarks.md, "A slow VM, and a watch for the stall"). Room for both.
if [ "${BENCH_MYSQL_TUNE:-1}" = 1 ]; then
	conns=$(my -N -e 'SELECT @@max_connections')
	want_conns=$((CLIENTS + 64 + 16 + 100))
	if [ "$conns" -lt "$want_conns" ]; then
		my -e "SET GLOBAL max_connections = $want_conns" || die "unable to set max_connections (BENCH_MYSQL_TUNE=0 runs without)"
		RESTORE_MYSQL="$RESTORE_MYSQL SET GLOBAL max_connections = $conns;"
		log "max_connections $conns -> $want_conns for this run"
	fi
fi

log "building bin/halley-bench and the server under test"
$GO build -o bin/halley-bench ./server/cmd/halley-bench
$GO build -o bin/halley ./server/cmd/halley
# The server under test is bin/halley's sources plus one file, overlaid at build time (the tree is not
# touched), that serves net/http/pprof on HALLEY_BENCH_PPROF when it is set: Halley has no pprof endpoint.
cat >"$WORK/bench_pprof.go" <<'EOF'
package main

import (
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux, which Halley's router does not use
	"os"
)

func init() {
	addr := os.Getenv("HALLEY_BENCH_PPROF")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return
	}
	go http.Serve(ln, nil) //nolint:errcheck // a benchmark aid: it lives as long as the process
}
EOF
printf '{"Replace":{"%s":"%s"}}\n' "$ROOT/server/cmd/halley/zz_bench_pprof.go" "$WORK/bench_pprof.go" >"$WORK/overlay.json"
$GO build -overlay "$WORK/overlay.json" -o "$OUT/halley-under-test" ./server/cmd/halley

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
PORT=$(free_port)
PPROF_PORT=$(free_port)

# Claim a Redis database number among 1..14 with a marker key (SET NX, expiring after the hard limit, so a run
# killed with -9 frees it): two runs at once never share one, and other people's keys in it are no obstacle.
# A database already holding keys of a Halley ("halley:*") is skipped: Halley under test uses that prefix.
for n in $(seq 1 14); do
	[ "$(rc -n "$n" SET "$CLAIM_KEY" "$CLAIM_TOKEN" NX EX "$((HARD_LIMIT + 120))")" = OK ] || continue
	if [ -z "$(rc -n "$n" --scan --pattern 'halley:*' | head -n 1)" ]; then REDIS_DB=$n; break; fi
	release_claim "$n"
done
[ -n "$REDIS_DB" ] || die "no Redis database among 1..14 could be claimed (each holds a claim of another run or Halley keys)"
my -e "CREATE DATABASE \`$DB\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
MYSQL_URL="mysql://$MYSQL_USER@$MYSQL_HOST:$MYSQL_PORT/$DB"
REDIS_URL="redis://$REDIS_HOST:$REDIS_PORT/$REDIS_DB"
PW="bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
WORKERS=${BENCH_PLUGIN_WORKERS:-$((PLUGIN_CONC > 8 ? PLUGIN_CONC : 8))}

# settle_mysql waits (at most BENCH_SETTLE_S seconds) until MySQL has finished what a run before this one left it:
# a buffer pool resize under way (the large suites grow the pool and shrink it back when they end), undo history
# not yet purged, and the server's own CPU (page flushing, dropped tables), and logs the state it found, so that a
# run's log shows whether it began on a quiet server. It does not remove every bias of runs back to back: on the
# VM of 2026-12-06 it found MariaDB idle before a second storm that still fired 4.6 % fewer timers a second; A/B
# pairs alternate which code runs first (docs/benchmarks.md, "Notifications purged by their key, and runs back to
# back").
settle_mysql() {
	local limit=${BENCH_SETTLE_S:-120} start pid="" hist resize resize_busy busy t0 t1
	start=$(date +%s)
	case "$MYSQL_HOST" in 127.0.0.1|localhost|::1) pid=$(pgrep -o -x mariadbd || pgrep -o -x mysqld || true) ;; esac
	while :; do
		hist=$(my -N -e "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'" | awk '{print $2}')
		resize=$(my -N -e "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'" | cut -f2-)
		busy=0
		if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
			# The server's CPU over one second, in hundredths of a core (only on this machine's own server).
			t0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); sleep 1; t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
			busy=$(( (t1 - t0) * 100 / $(getconf CLK_TCK) ))
		else
			sleep 1
		fi
		case "$resize" in *esiz*|*ithdraw*) [[ "$resize" == *ompleted* ]] || resize_busy=1 ;; *) resize_busy=0 ;; esac
		if [ "${hist:-0}" -lt 1000 ] && [ "${resize_busy:-0}" = 0 ] && [ "$busy" -lt 10 ]; then
			log "MySQL settled in $(($(date +%s) - start)) s (history list $hist, server CPU ${busy} % of a core)"
			return
		fi
		if [ $(($(date +%s) - start)) -ge "$limit" ]; then
			log "WARNING: MySQL still busy after ${limit} s (history list $hist, resize '${resize}', server CPU ${busy} % of a core): measuring anyway"
			return
		fi
	done
}
settle_mysql

# The plugins suite drives POST /trigger/sync from one address as fast as Halley answers: the per-IP trigger rate
# limit (20/s by default, an abuse guard) would measure itself, so it is off unless HALLEY_TRIGGER_RATE_LIMIT says.
log "starting Halley on 127.0.0.1:$PORT (MySQL database $DB, Redis db $REDIS_DB, pprof on 127.0.0.1:$PPROF_PORT)"
HALLEY_ADDR="127.0.0.1:$PORT" HALLEY_DATA_DIR="$WORK/data" HALLEY_DATABASE_URL="$MYSQL_URL" HALLEY_REDIS_URL="$REDIS_URL" \
	HALLEY_ADMIN_PASSWORD="$PW" HALLEY_PLUGIN_WORKERS="$WORKERS" HALLEY_LOG_LEVEL="${HALLEY_LOG_LEVEL:-info}" \
	HALLEY_BENCH_PPROF="127.0.0.1:$PPROF_PORT" HALLEY_TRIGGER_RATE_LIMIT="${HALLEY_TRIGGER_RATE_LIMIT:-0}" \
	env ${BENCH_HALLEY_GOGC:+GOGC="$BENCH_HALLEY_GOGC"} ${BENCH_HALLEY_GOMAXPROCS:+GOMAXPROCS="$BENCH_HALLEY_GOMAXPROCS"} "$OUT/halley-under-test" serve >"$OUT/halley.log" 2>&1 &
HALLEY_PID=$!
for i in $(seq 1 120); do
	curl -fsS --max-time 2 "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
	kill -0 "$HALLEY_PID" 2>/dev/null || { tail -20 "$OUT/halley.log" >&2; die "Halley exited at start"; }
	[ "$i" = 120 ] && die "Halley not ready after 60 s"
	sleep 0.5
done
log "Halley is ready (pid $HALLEY_PID)"
if [ "${BENCH_WATCH:-0}" = 1 ]; then
	python3 scripts/stallwatch.py --halley-port "$PORT" --pprof-port "$PPROF_PORT" --pid "$HALLEY_PID" --out "$OUT/watch" \
		--mysql-host "$MYSQL_HOST" --mysql-port "$MYSQL_PORT" --mysql-user "$MYSQL_USER" --redis-host "$REDIS_HOST" \
		--redis-port "$REDIS_PORT" --trigger "${BENCH_WATCH_TRIGGER:-0.7}" >"$OUT/watch.log" 2>&1 &
	WATCH_PID=$!
	log "stallwatch (pid $WATCH_PID) into $OUT/watch: probes.log lists slow probes and captures"
fi

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "nproc: $(nproc)"
	echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "kernel: $(uname -r)"
	echo "mysql: $(my -N -e 'SELECT VERSION()')"
	echo "mysql settings: $(my -N -e "SELECT CONCAT('innodb_flush_log_at_trx_commit=',@@innodb_flush_log_at_trx_commit,' log_bin=',@@log_bin,' innodb_buffer_pool_size=',@@innodb_buffer_pool_size,' innodb_log_file_size=',@@innodb_log_file_size,' max_connections=',@@max_connections)")"
	echo "redis: $(rc INFO server | tr -d '\r' | awk -F: '/^redis_version/ {print $2}')"
	echo "go: $($GO version)"
	echo "loadavg: $(cat /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2
# A million timers with the step load beside them make a database of ~8 GB: at MariaDB's default 128 MiB buffer
# pool every fire reads pages from disk and firing falls minutes behind (docs/benchmarks.md). Say so up front.
POOL_MB=$(($(my -N -e 'SELECT @@innodb_buffer_pool_size') / 1048576))
case " $SUITES " in *" timers "*)
	if [ "$TIMERS_N" -ge 200000 ] && [ "$POOL_MB" -lt 4096 ]; then
		log "WARNING: innodb_buffer_pool_size is ${POOL_MB} MiB; with TIMERS_N=$TIMERS_N the timers suite is disk-bound" \
			"(SET GLOBAL innodb_buffer_pool_size = 8589934592 sizes it as in docs/benchmarks.md)"
	fi
	# MariaDB's 96 MiB redo log makes InnoDB write every changed page back within seconds once a million rows
	# change: 1M timers fired at ~430/s at 96 MiB and at the arrival rate at 2 GiB (docs/benchmarks.md, "Timers go
	# first"; halley doctor warns too).
	REDO_MB=$(($(my -N -e 'SELECT @@innodb_log_file_size') / 1048576))
	if [ "$TIMERS_N" -ge 200000 ] && [ "$REDO_MB" -lt 1024 ]; then
		log "WARNING: innodb_log_file_size is ${REDO_MB} MiB; with TIMERS_N=$TIMERS_N page write-back for the redo log limits firing" \
			"(SET GLOBAL innodb_log_file_size = 2147483648 on MariaDB 10.9+, as in docs/benchmarks.md)"
	fi
	# MariaDB before 11.8 stops every write for 1-4 s now and then once its buffer pool is full, on the path of its
	# doublewrite buffer (docs/benchmarks.md, "The stall is the doublewrite path of MariaDB 10.11"): the timers'
	# maximum then measures MariaDB. A pool that holds the run's data never fills. halley doctor warns too.
	MARIA=$(my -N -e "SELECT CONCAT(VERSION(), ' ', @@innodb_doublewrite)" 2>/dev/null || true) # a server without the variable: no warning
	if [ $((POOL_MB << 20)) -lt $((TIMERS_N * 12 << 10)) ]; then
		case "$MARIA" in
		*MariaDB*" OFF" | *MariaDB*" 0") ;;
		10.*MariaDB* | 11.[0-7].*MariaDB*)
			log "WARNING: MariaDB ${MARIA%%-*} with innodb_doublewrite on stalls writes for 1-4 s once the buffer pool is full," \
				"and ${POOL_MB} MiB is less than TIMERS_N=$TIMERS_N need (12 KiB a timer); the timers' maximum measures that" \
				"(a pool that holds the data, MariaDB 11.8 or innodb_doublewrite=OFF did not: docs/benchmarks.md)" ;;
		esac
	fi ;;
esac
# The same for a storm of 100,000 (0.88 pages read from disk per fire at 128 MiB, none at 8 GiB: docs/benchmarks.md,
# "Index choice under a storm").
case " $SUITES " in *" storm "*)
	if [ "$STORM_N" -ge 50000 ] && [ "$POOL_MB" -lt 4096 ]; then
		log "WARNING: innodb_buffer_pool_size is ${POOL_MB} MiB; with STORM_N=$STORM_N the storm reads pages from disk" \
			"(SET GLOBAL innodb_buffer_pool_size = 8589934592 sizes it as in docs/benchmarks.md)"
	fi ;;
esac

# For ~30 s after the redo log is resized MariaDB commits ~30 % slower (it writes the new log file): nothing is
# measured before a minute has passed, or a raw-commit baseline measures that.
if [ "$REDO_SET_AT" != 0 ] && [ $(($(date +%s) - REDO_SET_AT)) -lt 60 ]; then
	log "waiting for InnoDB to settle after the redo log resize"
	sleep $((60 - ($(date +%s) - REDO_SET_AT)))
fi

BENCH=(bin/halley-bench)
COMMON=(--url "http://127.0.0.1:$PORT" --admin-password "$PW")
PPROF=(--pprof "http://127.0.0.1:$PPROF_PORT")
status=0
pprof_top() {
	[ -s "$1" ] || return 0
	$GO tool pprof -top -nodecount=35 "$OUT/halley-under-test" "$1" >"${1%.pprof}.top.txt" 2>/dev/null || true
	$GO tool pprof -top -cum -nodecount=35 "$OUT/halley-under-test" "$1" >"${1%.pprof}.cum.txt" 2>/dev/null || true
}
suite() { # name limit-seconds args...
	local name=$1 limit=$2 rc=0
	shift 2
	log "suite $name (at most ${limit}s): halley-bench $*"
	# In the background and waited for, so that a signal (Ctrl-C, the watchdog) is handled at once rather than
	# after the suite; its progress (stderr) is followed on the terminal, its summary printed when it ends.
	: >"$OUT/$name.stderr"
	timeout --signal=TERM --kill-after=30 "$limit" "${BENCH[@]}" "$@" >"$OUT/$name.out" 2>"$OUT/$name.stderr" &
	SUITE_PID=$!
	tail -n +1 -f --pid="$SUITE_PID" "$OUT/$name.stderr" >&2 &
	wait "$SUITE_PID" || rc=$?
	SUITE_PID=""
	cat "$OUT/$name.out"
	if [ "$rc" = 0 ]; then
		tail -n 1 "$OUT/$name.out" >"$OUT/$name.json"
	else
		log "suite $name FAILED with status $rc (see $OUT/$name.stderr)"
		status=1
		# A suite stopped at its time limit may still have reported what it measured (timers: "interrupted").
		if tail -n 1 "$OUT/$name.out" | grep -q '^{'; then
			tail -n 1 "$OUT/$name.out" >"$OUT/$name.json"
		fi
	fi
	pprof_top "$OUT/$name.cpu.pprof"
}

for s in $SUITES; do
	case "$s" in
	steps)
		suite steps 600 steps "${COMMON[@]}" --clients "$CLIENTS" --duration "$DURATION" --baseline --mysql "$MYSQL_URL" \
			--halley-pid "$HALLEY_PID" "${PPROF[@]}" --profile-out "$OUT/steps.cpu.pprof" ${STEPS_FLAGS:-} ;;
	timers)
		suite timers "${TIMERS_LIMIT:-3600}" timers "${COMMON[@]}" --n "$TIMERS_N" --window "$TIMERS_WINDOW" --load-clients "$TIMERS_LOAD" \
			--mysql "$MYSQL_URL" --redis "$REDIS_URL" --halley-pid "$HALLEY_PID" "${PPROF[@]}" --profile-out "$OUT/timers.cpu.pprof" ${TIMERS_FLAGS:-} ;;
	storm)
		suite storm "${TIMERS_LIMIT:-3600}" timers "${COMMON[@]}" --storm --n "$STORM_N" --load-clients "$TIMERS_LOAD" \
			--mysql "$MYSQL_URL" --redis "$REDIS_URL" --halley-pid "$HALLEY_PID" "${PPROF[@]}" --profile-out "$OUT/storm.cpu.pprof" --profile-seconds 15 ${STORM_FLAGS:-} ;;
	plugins)
		suite plugins 900 plugins "${COMMON[@]}" --runs "$PLUGIN_RUNS" --concurrency "$PLUGIN_CONC" --mysql "$MYSQL_URL" \
			--halley-pid "$HALLEY_PID" "${PPROF[@]}" --profile-out "$OUT/plugins.cpu.pprof" --profile-seconds 5 ;;
	sweep)
		suite sweep "${SWEEP_LIMIT:-3600}" sweep "${COMMON[@]}" --mysql "$MYSQL_URL" --instances "$SWEEP_N" --clients "$SWEEP_CLIENTS" \
			--duration "$DURATION" --archive-dir "$WORK/archive" ${SWEEP_FLAGS:-} ;;
	sqlstep)
		suite sqlstep 900 sqlstep --mysql "$MYSQL_URL" --clients "$CLIENTS" ${SQLSTEP_FLAGS:-} ;;
	*) die "unknown suite $s (steps, timers, storm, plugins, sweep, sqlstep)" ;;
	esac
	kill -0 "$HALLEY_PID" 2>/dev/null || { log "Halley died during $s"; tail -20 "$OUT/halley.log" >&2; exit 1; }
done
echo "loadavg at end: $(cat /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2
exit "$status"
