#!/usr/bin/env bash
# The README's Quick start, run as a new user runs it: `make run` starts the
# node, `redis-cli` PINGs it, SETs and GETs a key, then the node is stopped.
# CI runs it on the fresh clone (issue 20: `make run` had broken unnoticed).
# Ports are moved off 6379/9121 (a Debian redis-server may hold 6379) and the
# data dir goes to a temporary folder, so the clone stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-16379}
METRICS_PORT=${METRICS_PORT:-19121}
dir=$(mktemp -d)
log="$dir/make-run.log"
cleanup() {
  [[ -n ${pid:-} ]] && kill -- -"$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
# The README's other first command: the node's --help, through cargo run.
[[ -n ${STRATA_CACHE:-} ]] && export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$STRATA_CACHE/target}
cargo run -q --release -p strata-node -- --help >"$dir/help.txt"
grep -q -- '--maxmemory' "$dir/help.txt" || { echo "quickstart: strata-node --help lacks --maxmemory" >&2; exit 1; }
# Its own process group, so stopping it stops make, cargo and the node.
setsid make run ARGS="--port $PORT --metrics-port $METRICS_PORT --dir $dir/data" >"$log" 2>&1 &
pid=$!
cli() { redis-cli -p "$PORT" "$@"; }
# `make run` may compile first: wait for the first PONG (up to 15 minutes).
for _ in $(seq 1 900); do
  [[ $(cli ping 2>/dev/null) == PONG ]] && break
  kill -0 "$pid" 2>/dev/null || { echo "quickstart: make run exited:" >&2; tail -20 "$log" >&2; exit 1; }
  sleep 1
done
[[ $(cli ping) == PONG ]] || { echo "quickstart: no PONG from make run's node" >&2; tail -20 "$log" >&2; exit 1; }
[[ $(cli set quickstart:key hello) == OK ]] || { echo "quickstart: SET failed" >&2; exit 1; }
[[ $(cli get quickstart:key) == hello ]] || { echo "quickstart: GET did not return what SET stored" >&2; exit 1; }
kill -- -"$pid"
wait "$pid" 2>/dev/null || true
pid=
echo "quickstart: make run served PING, SET and GET on port $PORT, then stopped"
