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
For strata's logged modes it also prints, from /metrics scraped before and after each timed run,
the log's flushes (write + fdatasync) per second, their p50/p99 (strata_log_fsync_duration_seconds)
and the group commit's records per flush (mean: strata_log_fsync_records_total over
strata_log_fsyncs_total; the largest: strata_group_commit_max_records); then, per logged mode, the
distributions behind those figures over all its timed runs: flush time in us
(strata_log_fsync_duration_seconds) and records per flush (strata_group_commit_records), each as
n, p10/p50/p90/p99 (interpolated inside the buckets; records rounded up and at most the largest
batch), the highest bucket used (records: the largest batch) and each used bucket's share of the
flushes (each run's bucket increases are kept in
RESULTS_DIR/{fsync,batch}-hist-MODE, for bench/prom.py dist); then the targets:
periodic / none >= 0.90, sync / none >= 0.60 (strata's ops/s), and sync vs redis always,
periodic vs redis everysec.

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
  STRATA_ARGS       more strata-node options, every mode (e.g. "--io-engine threads")
  FSYNC_INTERVAL    strata's --fsync-interval in periodic (default: the node's, 10ms; 1s is everysec)
  REDIS_ARGS        more redis-server options
  STRATA_BIN, LOADGEN   binaries (default: the release builds, built unless --no-build)
  RESULTS_DIR       default bench/results/durability-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
MODES=${MODES:-"none write-back periodic sync"}
LOAD=${LOAD:-"-t 4 -c 50 -d 256 --ratio 1:0 --key-maximum 999999"}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/durability-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROM="python3 $ROOT/bench/prom.py"

for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
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

# start SERVER MODE: a fresh server (empty data dir) on a free port ($PORT; strata's /metrics on
# $MPORT), pid in $PID.
start() {
  local server=$1 mode=$2 dir=$DATA/$1
  PORT=$(free_port)
  rm -rf "$dir"; mkdir -p "$dir"
  local log=$RESULTS_DIR/logs/$server-$mode-$PORT.log
  if [[ $server == strata ]]; then
    MPORT=$(free_port)
    local interval=()
    [[ $mode == periodic && -n ${FSYNC_INTERVAL:-} ]] && interval=(--fsync-interval "$FSYNC_INTERVAL")
    # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
    "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port "$MPORT" --metrics-bind 127.0.0.1 \
      --durability "$mode" --dir "$dir" "${interval[@]}" ${STRATA_ARGS:-} >"$log" 2>&1 &
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

# measure SERVER MODE: prints "ops_per_sec p50_ms p99_ms fsyncs_per_sec fsync_p50_us fsync_p99_us
# records_per_fsync max_records" (the log's figures "-" for redis and for strata's none).
measure() {
  local server=$1 mode=$2 json=$TMP/run.json log="- - - - -"
  start "$server" "$mode"
  rm -f "$TMP/before" "$TMP/after"
  [[ $server == strata ]] && $PROM scrape "$MPORT" >"$TMP/before"
  # shellcheck disable=SC2086
  "$LOADGEN" -p "$PORT" $LOAD --test-time "$SECONDS_EACH" --json-out-file "$json" \
    >>"$RESULTS_DIR/logs/$server-$mode.txt"
  if [[ $server == strata && $mode != none ]]; then
    $PROM scrape "$MPORT" >"$TMP/after"
    local fsync flushes records max
    fsync=$($PROM hist "$TMP/before" "$TMP/after" strata_log_fsync_duration_seconds)
    flushes=$($PROM counter "$TMP/before" "$TMP/after" strata_log_fsyncs_total)
    records=$($PROM counter "$TMP/before" "$TMP/after" strata_log_fsync_records_total)
    max=$($PROM counter /dev/null "$TMP/after" strata_group_commit_max_records)
    # The runs' bucket increases, summed per mode at the end.
    $PROM buckets "$TMP/before" "$TMP/after" strata_log_fsync_duration_seconds >>"$RESULTS_DIR/fsync-hist-$mode"
    echo "$($PROM buckets "$TMP/before" "$TMP/after" strata_group_commit_records) max=$max" \
      >>"$RESULTS_DIR/batch-hist-$mode"
    # flushes/s, p50, p99 (the histogram's "count mean p50 p99"), records per flush, the most.
    log=$(awk -v f="$flushes" -v r="$records" -v s="$SECONDS_EACH" -v m="$max" -v h="$fsync" 'BEGIN {
      split(h, x, " "); printf "%.0f %s %s %s %s", f / s, x[3], x[4], (f > 0 ? sprintf("%.1f", r / f) : "-"), m }')
  fi
  stop
  python3 - "$json" "$log" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print(f'{t["ops_per_sec"]:.0f} {t["p50_ms"]:.3f} {t["p99_ms"]:.3f} {sys.argv[2]}')
PY
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b != "-" && b > 0) printf "%.2f", a / b; else print "-" }'; }
# col FILE N: the median of column N, or "-" when it does not apply.
col() {
  local v
  v=$(awk -v c="$2" '$c != "-" { print $c }' "$1")
  if [[ -z $v ]]; then echo -; else median <<<"$v"; fi
}

{
  echo "bench/durability.sh  SECONDS_EACH=$SECONDS_EACH REPEAT=$REPEAT THREADS=$THREADS LOAD='$LOAD'"
  echo "  STRATA_ARGS='${STRATA_ARGS:-}' FSYNC_INTERVAL='${FSYNC_INTERVAL:-}' REDIS_ARGS='${REDIS_ARGS:-}' data on $(df -P "$DATA" | awk 'NR == 2 { print $1 }') $(date -u +%FT%TZ)"
  echo "medians of $REPEAT; ratios strata / redis"
  printf '%-10s %-22s | %9s %7s %7s | %9s %7s %7s | %6s %6s %6s\n' \
    strata redis-server ops/s p50ms p99ms ops/s p50ms p99ms ops p50 p99
} | tee "$RESULTS_DIR/summary.txt"
for m in $MODES; do
  for r in $(seq "$REPEAT"); do
    # Alternate which server goes first, so drift in the machine's load hits both alike.
    if ((r % 2)); then order="strata redis"; else order="redis strata"; fi
    for s in $order; do
      line=$(measure "$s" "$m")
      echo "$m round $r $s: $line" >>"$RESULTS_DIR/runs.txt"
      echo "$line" >>"$TMP/$s-$m"
    done
  done
  so=$(col "$TMP/strata-$m" 1); s50=$(col "$TMP/strata-$m" 2); s99=$(col "$TMP/strata-$m" 3)
  ro=$(col "$TMP/redis-$m" 1); r50=$(col "$TMP/redis-$m" 2); r99=$(col "$TMP/redis-$m" 3)
  redis=$(redis_args "$m" | sed 's/--appendonly no/aof off/; s/--appendonly yes --appendfsync /aof /')
  printf '%-10s %-22s | %9.0f %7.3f %7.3f | %9.0f %7.3f %7.3f | %6s %6s %6s\n' \
    "$m" "$redis" "$so" "$s50" "$s99" "$ro" "$r50" "$r99" "$(ratio "$so" "$ro")" "$(ratio "$s50" "$r50")" \
    "$(ratio "$s99" "$r99")" | tee -a "$RESULTS_DIR/summary.txt"
done

# ops/s median of SERVER in MODE, "-" if that mode did not run.
ops() { if [[ -s $TMP/$1-$2 ]]; then col "$TMP/$1-$2" 1; else echo -; fi; }
{
  echo
  echo "strata's log over each timed run (medians): flushes (write + fdatasync) per second, their"
  echo "p50/p99 in us (strata_log_fsync_duration_seconds), records per flush (mean; the most, since start)"
  printf '%-10s | %9s %9s %9s %9s %9s\n' strata flushes/s p50us p99us recs/flush max_recs
  for m in $MODES; do
    [[ $m == none ]] && continue
    f=$TMP/strata-$m
    printf '%-10s | %9s %9s %9s %9s %9s\n' "$m" "$(col "$f" 4)" "$(col "$f" 5)" "$(col "$f" 6)" "$(col "$f" 7)" \
      "$(col "$f" 8)"
  done
  echo
  echo "distributions over the timed runs (all rounds summed): n flushes, percentiles interpolated inside"
  echo "the buckets (records rounded up, at most the largest batch), the highest bucket used (records: the"
  echo "largest batch), each used bucket's share of the flushes"
  for m in $MODES; do
    [[ $m == none ]] && continue
    printf '%-10s fsync us   %s\n' "$m" "$($PROM dist --us "$RESULTS_DIR/fsync-hist-$m")"
    printf '%-10s recs/flush %s\n' "$m" "$($PROM dist --whole "$RESULTS_DIR/batch-hist-$m")"
  done
  echo
  echo "periodic / none = $(ratio "$(ops strata periodic)" "$(ops strata none)") (target >= 0.90)"
  echo "sync / none = $(ratio "$(ops strata sync)" "$(ops strata none)") (target >= 0.60)"
  echo "sync vs redis always = $(ratio "$(ops strata sync)" "$(ops redis sync)") (target > 1)"
  echo "periodic vs redis everysec = $(ratio "$(ops strata periodic)" "$(ops redis periodic)") (target > 1)"
  echo "per run: $RESULTS_DIR/runs.txt, histograms $RESULTS_DIR/{fsync,batch}-hist-MODE"
} | tee -a "$RESULTS_DIR/summary.txt"
echo "results: $RESULTS_DIR"
