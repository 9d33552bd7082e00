#!/usr/bin/env bash
# SET throughput and latency per durability mode, strata-node vs redis-server's AOF, same run.
# See bench/README.md ("Durability") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/durability.sh [--no-build] [-h]

For each pair below, runs the same SET load (bench/loadgen, strata-loadgen) against a fresh
strata-node and a fresh redis-server, each with an empty data dir on DIR's file system, alternating
which goes first, REPEAT times. Prints per pair the median ops/s, p50 and p99 latency of each server
and the ratios strata / redis (ops: higher is better for strata; p50 and p99: lower is).

Pairs (strata --durability : redis-server):
  none        : appendonly no                        (a cache: nothing written)
  write-back  : appendonly yes, appendfsync no       (logged in the background, the OS flushes)
  periodic    : appendonly yes, appendfsync everysec (fsync every --fsync-interval, default 10ms)
  sync        : appendonly yes, appendfsync always   (a reply only after its fsync)

Env vars:
  SECONDS_EACH=10   seconds per timed run      REPEAT=3   runs per server and pair
  MODES             default: none write-back periodic sync
  LOAD              loadgen options, default: -t 4 -c 50 -d 256 --ratio 1:0 --key-maximum 999999
  THREADS=nproc     strata-node worker threads
  DIR               where the data dirs go (default: a temp dir; pick the disk to measure)
  STRATA_ARGS       more strata-node options (e.g. "--fsync-interval 1s --io-engine threads")
  REDIS_ARGS        more redis-server options
  STRATA_BIN, LOADGEN   binaries (default: the release builds, built unless --no-build)
  RESULTS_DIR       default bench/results/durability-<timestamp>
EOF2
}

NO_BUILD=${NO_BUILD:-0}
for a in "$@"; do
  case "$a" in
    --no-build) NO_BUILD=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option $a" >&2; usage >&2; exit 2 ;;
  esac
done

SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
MODES=${MODES:-"none write-back periodic sync"}
LOAD=${LOAD:-"-t 4 -c 50 -d 256 --ratio 1:0 --key-maximum 999999"}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/durability-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
need_binaries
for m in $MODES; do
  case $m in none | write-back | periodic | sync) ;; *) echo "unknown mode $m" >&2; exit 2 ;; esac
done

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
DATA=$(mktemp -d "${DIR:-${TMPDIR:-/tmp}}/strata-durability-bench.XXXXXX")
PID=""
trap 'stop; rm -rf "$TMP" "$DATA"' EXIT


# redis_args MODE: redis-server's persistence options matching strata's MODE.
redis_args() {
  case $1 in
    none) echo "--appendonly no" ;;
    write-back) echo "--appendonly yes --appendfsync no" ;;
    periodic) echo "--appendonly yes --appendfsync everysec" ;;
    sync) echo "--appendonly yes --appendfsync always" ;;
  esac
}

# start SERVER MODE: a fresh server (empty data dir) on a free port ($PORT), pid in $PID.
start() {
  local server=$1 mode=$2 dir=$DATA/$1
  PORT=$(free_port)
  rm -rf "$dir"; mkdir -p "$dir"
  local log=$RESULTS_DIR/logs/$server-$mode-$PORT.log
  if [[ $server == strata ]]; then
    # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
    "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port 0 --durability "$mode" --dir "$dir" \
      ${STRATA_ARGS:-} >"$log" 2>&1 &
  else
    # shellcheck disable=SC2046,SC2086
    redis-server --port "$PORT" --save '' --daemonize no --dir "$dir" $(redis_args "$mode") ${REDIS_ARGS:-} \
      >"$log" 2>&1 &
  fi
  PID=$!
  # Until the log is open: strata answers -LOADING, so wait for a real reply.
  for _ in $(seq 200); do
    [[ $(redis-cli -p "$PORT" EXISTS probe 2>/dev/null) == 0 ]] && return 0
    sleep 0.1
  done
  echo "$server ($mode) did not start; see $log" >&2
  exit 1
}

# measure SERVER MODE: prints "ops_per_sec p50_ms p99_ms".
measure() {
  local server=$1 mode=$2 json=$TMP/run.json
  start "$server" "$mode"
  # shellcheck disable=SC2086
  "$LOADGEN" -p "$PORT" $LOAD --test-time "$SECONDS_EACH" --json-out-file "$json" \
    >>"$RESULTS_DIR/logs/$server-$mode.txt"
  stop
  python3 - "$json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print(f'{t["ops_per_sec"]:.0f} {t["p50_ms"]:.3f} {t["p99_ms"]:.3f}')
PY
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

{
  echo "bench/durability.sh  SECONDS_EACH=$SECONDS_EACH REPEAT=$REPEAT THREADS=$THREADS LOAD='$LOAD'"
  echo "  STRATA_ARGS='${STRATA_ARGS:-}' REDIS_ARGS='${REDIS_ARGS:-}' data on $(df -P "$DATA" | awk 'NR == 2 { print $1 }') $(date -u +%FT%TZ)"
  echo "medians of $REPEAT; ratios strata / redis"
  printf '%-10s %-22s | %9s %7s %7s | %9s %7s %7s | %6s %6s %6s\n' \
    strata redis-server ops/s p50ms p99ms ops/s p50ms p99ms ops p50 p99
} | tee "$RESULTS_DIR/summary.txt"
for m in $MODES; do
  : >"$TMP/strata"; : >"$TMP/redis"
  for r in $(seq "$REPEAT"); do
    # Alternate which server goes first, so drift in the machine's load hits both alike.
    if ((r % 2)); then order="strata redis"; else order="redis strata"; fi
    for s in $order; do measure "$s" "$m" >>"$TMP/$s"; done
  done
  col() { awk -v c="$2" '{ print $c }' "$TMP/$1" | median; }
  so=$(col strata 1); s50=$(col strata 2); s99=$(col strata 3)
  ro=$(col redis 1); r50=$(col redis 2); r99=$(col redis 3)
  redis=$(redis_args "$m" | sed 's/--appendonly no/aof off/; s/--appendonly yes --appendfsync /aof /')
  printf '%-10s %-22s | %9.0f %7.3f %7.3f | %9.0f %7.3f %7.3f | %6s %6s %6s\n' \
    "$m" "$redis" "$so" "$s50" "$s99" "$ro" "$r50" "$r99" "$(ratio "$so" "$ro")" "$(ratio "$s50" "$r50")" \
    "$(ratio "$s99" "$r99")" | tee -a "$RESULTS_DIR/summary.txt"
done
echo "results: $RESULTS_DIR"
