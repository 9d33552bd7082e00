#!/usr/bin/env bash
# memtier_benchmark-shaped workloads (Swytch's published set), strata-node vs redis-server, same run.
# See bench/README.md ("Workloads") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/workloads.sh [--no-build] [-h]

Runs each workload against a fresh strata-node and a fresh redis-server (TCP on 127.0.0.1, no
persistence), alternating which goes first, REPEAT times, with bench/loadgen (strata-loadgen, a
memtier_benchmark-style client of this repository). Prints per workload the median ops/s, p50 and
p99 latency and ops per server CPU-second (utime+stime from /proc) of each server, and the ratios
strata / redis. Read workloads are prefilled first (not timed).

Workloads (name: loadgen options):
  set-256     -t 4 -c 50 -d 256 --ratio 1:0 over 1M uniform keys          (100 % writes)
  get-256     -t 4 -c 50 -d 256 --ratio 0:1 over 100k prefilled keys      (100 % reads)
  mixed-256   -t 4 -c 50 -d 256 --ratio 1:1 over 100k prefilled keys      (50:50)
  4k-1:10     -t 4 -c 20 -d 4096 --ratio 1:10, 200 req/s per client, 100k prefilled keys
  zipf-1:10   -t 4 -c 50 -d 256 --ratio 1:10, Zipf 0.99 over 100k prefilled keys
  seq-p50     -t 4 -c 10 --pipeline 50 -d 256, SEQ_KEYS sequential writes

Env vars:
  SECONDS_EACH=10   seconds per timed run      REPEAT=3   runs per server and workload
  WORKLOADS         default: all of the above  SEQ_KEYS=2000000
  THREADS=nproc     strata-node worker threads
  STRATA_ARGS       more strata-node options (e.g. "--durability sync --dir /mnt/nvme/strata")
  REDIS_ARGS        more redis-server options (e.g. "--appendonly yes --appendfsync always")
  RESULTS_DIR       default bench/results/workloads-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
WORKLOADS=${WORKLOADS:-"set-256 get-256 mixed-256 4k-1:10 zipf-1:10 seq-p50"}
SEQ_KEYS=${SEQ_KEYS:-2000000}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/workloads-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

need_binaries

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
PID=""
trap 'stop; rm -rf "$TMP"' EXIT


# start SERVER: a fresh server on a free port ($PORT), pid in $PID.
start() {
  local server=$1
  PORT=$(free_port)
  local log=$RESULTS_DIR/logs/$server-$PORT.log
  if [[ $server == strata ]]; then
    # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
    "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port 0 ${STRATA_ARGS:-} >"$log" 2>&1 &
  else
    # shellcheck disable=SC2086
    redis-server --port "$PORT" --save '' --appendonly no --daemonize no --dir "$TMP" ${REDIS_ARGS:-} >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$server did not start; see $log" >&2
  exit 1
}


# options WORKLOAD: the timed run's loadgen options; prefill WORKLOAD: the untimed one's (or none).
options() {
  case $1 in
    set-256) echo "-t 4 -c 50 -d 256 --ratio 1:0 --key-maximum 999999 --test-time $SECONDS_EACH" ;;
    get-256) echo "-t 4 -c 50 -d 256 --ratio 0:1 --key-maximum 99999 --test-time $SECONDS_EACH" ;;
    mixed-256) echo "-t 4 -c 50 -d 256 --ratio 1:1 --key-maximum 99999 --test-time $SECONDS_EACH" ;;
    4k-1:10) echo "-t 4 -c 20 -d 4096 --ratio 1:10 --rate-limit 200 --key-maximum 99999 --test-time $SECONDS_EACH" ;;
    zipf-1:10) echo "-t 4 -c 50 -d 256 --ratio 1:10 --key-pattern zipf --zipf-exp 0.99 --key-maximum 99999 --test-time $SECONDS_EACH" ;;
    seq-p50) echo "-t 4 -c 10 --pipeline 50 -d 256 --ratio 1:0 --key-pattern sequential --key-maximum $((SEQ_KEYS - 1)) -n $((SEQ_KEYS / 40))" ;;
    *) echo "unknown workload $1" >&2; exit 2 ;;
  esac
}
prefill() {
  case $1 in
    get-256 | mixed-256 | zipf-1:10) echo "-t 2 -c 10 --pipeline 64 -d 256 --ratio 1:0 --key-pattern sequential --key-maximum 99999 -n 5000" ;;
    4k-1:10) echo "-t 2 -c 10 --pipeline 16 -d 4096 --ratio 1:0 --key-pattern sequential --key-maximum 99999 -n 5000" ;;
    *) echo "" ;;
  esac
}

# measure SERVER WORKLOAD: prints "ops_per_sec p50_ms p99_ms ops_per_cpu_sec".
measure() {
  local server=$1 w=$2 pre
  start "$server"
  pre=$(prefill "$w")
  # shellcheck disable=SC2086
  [[ -z $pre ]] || "$LOADGEN" -p "$PORT" $pre >/dev/null
  local json=$TMP/run.json c0 c1 t0 t1
  c0=$(cpu_ticks "$PID"); t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$LOADGEN" -p "$PORT" $(options "$w") --json-out-file "$json" >>"$RESULTS_DIR/logs/$server-$w.txt"
  t1=$(date +%s.%N); c1=$(cpu_ticks "$PID")
  stop
  python3 - "$json" "$c0" "$c1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); cpu = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
t = r["totals"]; ops = t["ops_per_sec"] * r["seconds"]
print(f'{t["ops_per_sec"]:.0f} {t["p50_ms"]:.3f} {t["p99_ms"]:.3f} {ops / cpu if cpu else 0:.0f}')
PY
}


{
  echo "bench/workloads.sh  SECONDS_EACH=$SECONDS_EACH REPEAT=$REPEAT THREADS=$THREADS STRATA_ARGS='${STRATA_ARGS:-}' REDIS_ARGS='${REDIS_ARGS:-}' $(date -u +%FT%TZ)"
  echo "medians of $REPEAT; ops/cpu-s = requests per second of the server's own CPU time (utime+stime)"
  printf '%-10s | %9s %7s %7s %9s | %9s %7s %7s %9s | %6s %6s %6s\n' workload strata p50ms p99ms ops/cpu-s redis p50ms p99ms ops/cpu-s ops p99 cpu
} | tee "$RESULTS_DIR/summary.txt"
for w in $WORKLOADS; do
  : >"$TMP/strata"; : >"$TMP/redis"
  for r in $(seq "$REPEAT"); do
    # Alternate which server goes first, so drift in the machine's load hits both alike.
    if ((r % 2)); then order="strata redis"; else order="redis strata"; fi
    for s in $order; do measure "$s" "$w" >>"$TMP/$s"; done
  done
  col() { awk -v c="$2" '{ print $c }' "$TMP/$1" | median; }
  so=$(col strata 1); s50=$(col strata 2); s99=$(col strata 3); sc=$(col strata 4)
  ro=$(col redis 1); r50=$(col redis 2); r99=$(col redis 3); rc=$(col redis 4)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
  printf '%-10s | %9.0f %7.3f %7.3f %9.0f | %9.0f %7.3f %7.3f %9.0f | %6s %6s %6s\n' \
    "$w" "$so" "$s50" "$s99" "$sc" "$ro" "$r50" "$r99" "$rc" "$(ratio "$so" "$ro")" "$(ratio "$s99" "$r99")" "$(ratio "$sc" "$rc")" |
    tee -a "$RESULTS_DIR/summary.txt"
done
echo "results: $RESULTS_DIR"
