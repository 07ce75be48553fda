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

known() { redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p'; }

# formed: every node is up, knows all three and says the cluster is ok.
formed() {
  for p in "${ports[@]}"; do
    [ "$(state "$p")" = ok ] && [ "$(known "$p")" = 3 ] || return 1
  done
}

start() {
  if formed; then
    url
    return
  fi
  for p in "${ports[@]}"; do
    if ! redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
      # A node that is not running starts from an empty directory: a nodes.conf or append-only file left by an
      # earlier run (another cluster's node ids, keys) would make `--cluster create` refuse the node.
      rm -rf "${dir:?}/$p"
      mkdir -p "$dir/$p"
      # appendonly: a master restarted by a test keeps its keys (the fault test asserts nothing is lost).
      redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 2000 --dir "$dir/$p" --appendonly yes --appendfsync everysec --save "" \
        --daemonize yes --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
    fi
  done
  for p in "${ports[@]}"; do
    up=0
    for _ in $(seq 1 40); do
      if redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
        up=1
        break
      fi
      sleep 0.25
    done
    if [ $up = 0 ]; then
      echo "redis-cluster: the node on port $p does not answer after 10 s" >&2
      tail -n 20 "$dir/$p/redis.log" >&2 || true
      exit 1
    fi
  done
  local complete=1
  for p in "${ports[@]}"; do [ "$(known "$p")" = 3 ] || complete=0; done
  if [ $complete = 0 ]; then
    # Nodes left running by an earlier run may hold keys or know other nodes: empty them so that create accepts them.
    for p in "${ports[@]}"; do
      redis-cli -h 127.0.0.1 -p "$p" flushall >/dev/null 2>&1 || true
      redis-cli -h 127.0.0.1 -p "$p" cluster reset hard >/dev/null 2>&1 || true
    done
    local addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    local out
    if ! out=$(redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes 2>&1); then
      echo "redis-cluster: redis-cli --cluster create failed:" >&2
      echo "$out" >&2
      exit 1
    fi
  fi
  for _ in $(seq 1 80); do
    if formed; then
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
