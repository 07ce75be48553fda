#!/usr/bin/env bash
# A real Redis Cluster of 3 masters on loopback ports, for the cluster tests (docs/scheduler.md, "Redis Cluster").
#
#   scripts/redis-cluster.sh start   # starts it (or leaves a running one alone) and prints the URL to export
#   scripts/redis-cluster.sh stop    # stops the nodes and removes their data
#   scripts/redis-cluster.sh url     # prints HALLEY_TEST_REDIS_CLUSTER's value
#
# REDIS_CLUSTER_PORT (7000) is the first port; the nodes use it and the next two. REDIS_CLUSTER_DIR
# (/tmp/halley-redis-cluster-<port>) holds each node's nodes.conf, append-only file and log.
set -euo pipefail

port=${REDIS_CLUSTER_PORT:-7000}
dir=${REDIS_CLUSTER_DIR:-/tmp/halley-redis-cluster-$port}
ports=("$port" "$((port + 1))" "$((port + 2))")

url() {
  local IFS=,
  local addrs=()
  for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
  echo "redis+cluster://${addrs[*]}"
}

state() { redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p'; }

start() {
  if [ "$(state "$port")" = ok ]; then
    url
    return
  fi
  for p in "${ports[@]}"; do
    mkdir -p "$dir/$p"
    if ! redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
      # appendonly: a master restarted by a test keeps its keys (the fault test asserts nothing is lost).
      redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 2000 --dir "$dir/$p" --appendonly yes --appendfsync everysec --save "" \
        --daemonize yes --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
    fi
  done
  for p in "${ports[@]}"; do
    for _ in $(seq 1 40); do redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 && break; sleep 0.25; done
  done
  if [ "$(redis-cli -h 127.0.0.1 -p "$port" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" != 3 ]; then
    local addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  fi
  for _ in $(seq 1 80); do
    ok=1
    for p in "${ports[@]}"; do [ "$(state "$p")" = ok ] || ok=0; done
    if [ $ok = 1 ]; then
      url
      return
    fi
    sleep 0.25
  done
  echo "redis-cluster: cluster_state is not ok after 20 s" >&2
  for p in "${ports[@]}"; do tail -n 20 "$dir/$p/redis.log" >&2 || true; done
  exit 1
}

stop() {
  for p in "${ports[@]}"; do
    redis-cli -h 127.0.0.1 -p "$p" shutdown nosave >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
url) url ;;
*)
  echo "usage: $0 start|stop|url" >&2
  exit 2
  ;;
esac
