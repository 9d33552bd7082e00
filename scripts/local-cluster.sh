#!/usr/bin/env bash
# A Strata cluster of N nodes on 127.0.0.1, for development, tests and benchmarks.
#
#   scripts/local-cluster.sh up N BASEPORT   start N nodes in cluster mode and push a topology
#   scripts/local-cluster.sh status [BASEPORT]   one line per node
#   scripts/local-cluster.sh down [BASEPORT]     stop them (data and logs stay)
#   scripts/local-cluster.sh scale N BASEPORT    grow or shrink to N nodes, moving slots live
#
# Node i (0-based) listens on 127.0.0.1 with
#   plain port  BASEPORT+i      (any client; commands for other nodes' slots are forwarded)
#   direct port BASEPORT+100+i  (cluster-aware clients: MOVED and CLUSTER SLOTS point here)
#   admin port  BASEPORT+200+i  (topology pushes only)
#   metrics     BASEPORT+300+i  (/metrics, /healthz, /readyz)
# with its data dir, log and pid file under $STRATA_LOCAL_CLUSTER_DIR (default
# /tmp/strata-local-cluster-BASEPORT). The topology is pushed by `strata-cluster push` (the
# operator's own topology code): slots spread as redis-cli --cluster create does, node i's id
# sha1("local/BASEPORT/i"), epoch one more than any node has (so re-running `up` never goes
# backwards). `scale` starts the new nodes, then `strata-cluster rebalance` (the operator's own
# planner) migrates slots with their keys (STRATA.MIGRATE) until the first N nodes own even
# shares, printing each move; shrinking drains the highest nodes first and stops them only once
# they own nothing and the topology without them is applied everywhere.
# BASEPORT defaults to 7000 for status and down. Binaries are built with
# `cargo build --release` unless STRATA_NODE_BIN and STRATA_CLUSTER_BIN name them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAX_NODES=100

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

say() { echo "local-cluster: $*" >&2; }

state_dir() { echo "${STRATA_LOCAL_CLUSTER_DIR:-/tmp/strata-local-cluster-$1}"; }

build() {
  if [[ -n ${STRATA_NODE_BIN:-} && -n ${STRATA_CLUSTER_BIN:-} ]]; then
    NODE_BIN=$STRATA_NODE_BIN CLUSTER_BIN=$STRATA_CLUSTER_BIN
    return
  fi
  say "building strata-node and strata-cluster (cargo build --release)"
  (cd "$ROOT" && cargo build --release -q -p strata-node --bin strata-node -p strata-operator --bin strata-cluster)
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  NODE_BIN=${STRATA_NODE_BIN:-$target/release/strata-node}
  CLUSTER_BIN=${STRATA_CLUSTER_BIN:-$target/release/strata-cluster}
}

# The nodes as strata-cluster names them: host:direct:plain:admin.
node_args() {
  local n=$1 base=$2 i
  for ((i = 0; i < n; i++)); do
    echo "127.0.0.1:$((base + 100 + i)):$((base + i)):$((base + 200 + i))"
  done
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# PING over bash's /dev/tcp: no redis-cli needed.
pings() {
  local reply
  # The braces keep 2>/dev/null to this one redirection (on exec alone it would silence the script).
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  IFS= read -r -t 2 reply <&3 || reply=
  exec 3<&- 3>&-
  [[ $reply == "+PONG"* ]]
}

check_size() {
  local n=$1 base=$2
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le $MAX_NODES ]] || { say "N must be 1..$MAX_NODES"; exit 2; }
  [[ $base =~ ^[0-9]+$ && $base -ge 1024 && $((base + 300 + n)) -le 65535 ]] ||
    { say "BASEPORT must leave room for BASEPORT+300+N below 65536"; exit 2; }
}

up() {
  local n=$1 base=$2
  check_size "$n" "$base"
  local dir
  dir=$(state_dir "$base")
  if [[ -f $dir/nodes && $(cat "$dir/nodes") != "$n" ]] && any_alive "$base"; then
    say "a cluster of $(cat "$dir/nodes") nodes is running on $base: run 'down $base' first"
    exit 1
  fi
  build
  mkdir -p "$dir"
  echo "$n" >"$dir/nodes"
  start_nodes 0 "$n" "$base"
  say "pushing the topology"
  # shellcheck disable=SC2046
  "$CLUSTER_BIN" push --id-prefix "local/$base" $(node_args "$n" "$base") >&2
  status_of "$base"
}

# Starts nodes FROM..TO-1 (those not running) and waits until each answers PING.
start_nodes() {
  local from=$1 n=$2 base=$3 dir
  dir=$(state_dir "$base")
  local i started=0
  for ((i = from; i < n; i++)); do
    local node=$dir/node-$i
    mkdir -p "$node/data"
    if alive "$node/pid"; then continue; fi
    setsid "$NODE_BIN" --bind 127.0.0.1 --port $((base + i)) --dir "$node/data" \
      --metrics-port $((base + 300 + i)) --cluster-enabled yes \
      --cluster-direct-port $((base + 100 + i)) --cluster-port $((base + 200 + i)) \
      </dev/null >>"$node/log" 2>&1 &
    echo $! >"$node/pid"
    started=$((started + 1))
  done
  say "started $started of $((n - from)) nodes (state in $dir); waiting for PING"
  local deadline=$((SECONDS + 60))
  for ((i = from; i < n; i++)); do
    until pings $((base + i)); do
      if ! alive "$dir/node-$i/pid"; then
        say "node $i exited; the end of its log ($dir/node-$i/log):"
        tail -n 20 "$dir/node-$i/log" >&2
        exit 1
      fi
      ((SECONDS < deadline)) || { say "node $i does not answer PING on port $((base + i)) after 60 s"; exit 1; }
      sleep 0.2
    done
  done
}

scale() {
  local n=$1 base=$2 dir old
  check_size "$n" "$base"
  dir=$(state_dir "$base")
  [[ -f $dir/nodes ]] || { say "no local cluster on $base: run 'up N $base' first"; exit 1; }
  old=$(cat "$dir/nodes")
  build
  local size=$((n > old ? n : old))
  if ((n > old)); then
    start_nodes "$old" "$n" "$base"
  fi
  say "rebalancing $old -> $n nodes"
  # Every node, current and new, is given; the first N keep (or get) slots.
  # shellcheck disable=SC2046
  "$CLUSTER_BIN" rebalance --id-prefix "local/$base" --shards "$n" $(node_args "$size" "$base")
  echo "$n" >"$dir/nodes"
  if ((n < old)); then
    local i
    for ((i = n; i < old; i++)); do stop_pid "$dir/node-$i/pid"; done
    say "stopped nodes $n..$((old - 1)) (drained; their data dirs stay in $dir)"
  fi
  status_of "$base"
}

# SIGTERM, then SIGKILL after 15 s.
stop_pid() {
  local f=$1
  alive "$f" || { rm -f "$f"; return 0; }
  kill -TERM "$(cat "$f")"
  reap "$f" $((SECONDS + 15))
}

# Waits for the node of pid file $1 to exit (SIGKILL at $2, in SECONDS), then removes the file.
reap() {
  local f=$1 deadline=$2
  while alive "$f"; do
    if ((SECONDS >= deadline)); then
      say "$(dirname "$f") did not stop on SIGTERM within 15 s: SIGKILL"
      kill -KILL "$(cat "$f")" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$f"
}

any_alive() {
  local dir f
  dir=$(state_dir "$1")
  for f in "$dir"/node-*/pid; do alive "$f" && return 0; done
  return 1
}

status_of() {
  local base=$1 dir
  dir=$(state_dir "$base")
  [[ -f $dir/nodes ]] || { say "no local cluster on $base ($dir/nodes missing)"; exit 1; }
  [[ -n ${CLUSTER_BIN:-} ]] || build
  # shellcheck disable=SC2046
  "$CLUSTER_BIN" status $(node_args "$(cat "$dir/nodes")" "$base")
}

down() {
  local base=$1 dir f stopped=0
  dir=$(state_dir "$base")
  for f in "$dir"/node-*/pid; do
    [[ -f $f ]] || continue
    if alive "$f"; then
      kill -TERM "$(cat "$f")"
      stopped=$((stopped + 1))
    fi
  done
  local deadline=$((SECONDS + 15))
  for f in "$dir"/node-*/pid; do
    [[ -f $f ]] && reap "$f" "$deadline"
  done
  say "stopped $stopped nodes; data and logs stay in $dir (rm -rf it to start empty)"
}

case ${1:-} in
up) [[ $# == 3 ]] || usage; up "$2" "$3" ;;
status) [[ $# -le 2 ]] || usage; status_of "${2:-7000}" ;;
down) [[ $# -le 2 ]] || usage; down "${2:-7000}" ;;
scale) [[ $# == 3 ]] || usage; scale "$2" "$3" ;;
*) usage ;;
esac
