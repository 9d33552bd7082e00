#!/usr/bin/env bash
# The cold tier against redis-server at the same RAM budget: a dataset several times maxmemory,
# loaded once, then read with a Zipf 0.99 mix. See bench/README.md ("Tier") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/tier.sh [--no-build] [-h]

Both servers get the same maxmemory and allkeys-lru; strata-node also gets --max-disk and a data
dir (the cold tier), redis-server has none. Each, REPEAT times alternately:
  1. load KEYS keys of VALUE bytes (sequential, pipelined; untimed): DATA = KEYS x VALUE, several
     times maxmemory;
  2. read with a 1:10 SET:GET mix, Zipf 0.99 over the same keys, for SECONDS_EACH seconds.
Prints per server the median hit ratio (GET hits / GETs), ops/s, p50/p99 and ops per server
CPU-second, the ratios strata / redis, how many keys each still holds, and for strata the RAM a
key whose value is on disk only costs:
  (used_memory - used_memory empty - warm keys x RAM per warm key) / disk keys,
with RAM per warm key measured on a strata run of the same keys without a limit.

Env vars:
  MAXMEMORY=64mb  KEYS=200000  VALUE=1000  SECONDS_EACH=20  REPEAT=3  THREADS=nproc
  MAX_DISK=4gb    DATA_DIR (default: a temp dir; put it on the disk to measure)
  RESULTS_DIR     default bench/results/tier-<timestamp>
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

MAXMEMORY=${MAXMEMORY:-64mb}
KEYS=${KEYS:-200000}
VALUE=${VALUE:-1000}
SECONDS_EACH=${SECONDS_EACH:-20}
REPEAT=${REPEAT:-3}
MAX_DISK=${MAX_DISK:-4gb}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/tier-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
need_binaries

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
PID=""
trap 'stop; rm -rf "$TMP"' EXIT

field() { redis-cli -p "$PORT" INFO everything | tr -d '\r' | sed -n "s/^$1://p"; }

# start SERVER [LIMIT]: a fresh server on a free port ($PORT), pid in $PID; LIMIT 0 = no maxmemory.
start() {
  local server=$1 limit=${2:-$MAXMEMORY}
  PORT=$(free_port)
  local log=$RESULTS_DIR/logs/$server-$PORT.log
  if [[ $server == strata ]]; then
    local dir=${DATA_DIR:-$TMP}/strata-$PORT
    "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port 0 --maxmemory "$limit" \
      --maxmemory-policy allkeys-lru --max-disk "$MAX_DISK" --dir "$dir" >"$log" 2>&1 &
  else
    redis-server --port "$PORT" --save '' --appendonly no --daemonize no --dir "$TMP" \
      --maxmemory "$limit" --maxmemory-policy allkeys-lru >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$server did not start; see $log" >&2
  exit 1
}

load() {
  "$LOADGEN" -p "$PORT" -t 1 -c 1 --pipeline 64 -d "$VALUE" --ratio 1:0 --key-pattern sequential \
    --key-maximum $((KEYS - 1)) -n "$KEYS" >/dev/null
}

# RAM per key with every value in RAM (strata, no limit).
start strata 0
empty=$(field used_memory)
load
warm_per_key=$(( ($(field used_memory) - empty) / $(redis-cli -p "$PORT" DBSIZE) ))
stop
echo "strata, no limit: $warm_per_key bytes of RAM per key ($KEYS keys of $VALUE bytes)" | tee "$RESULTS_DIR/summary.txt"

# measure SERVER: prints "hit_ratio ops_per_sec p50_ms p99_ms ops_per_cpu_sec keys cold_bytes_per_key"
measure() {
  local server=$1
  start "$server"
  local empty0 json=$TMP/run.json c0 c1
  empty0=$(field used_memory)
  load
  c0=$(cpu_ticks "$PID")
  "$LOADGEN" -p "$PORT" -t 2 -c 25 -d "$VALUE" --ratio 1:10 --key-pattern zipf --zipf-exp 0.99 \
    --key-maximum $((KEYS - 1)) --test-time "$SECONDS_EACH" --json-out-file "$json" >>"$RESULTS_DIR/logs/$server-run.txt"
  c1=$(cpu_ticks "$PID")
  local keys used disk=0
  keys=$(redis-cli -p "$PORT" DBSIZE)
  used=$(field used_memory)
  [[ $server == strata ]] && disk=$(field tier_disk_keys)
  stop
  python3 - "$json" "$c0" "$c1" "$(getconf CLK_TCK)" "$keys" "$used" "$empty0" "$disk" "$warm_per_key" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); cpu = (int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4])
keys, used, empty, disk, warm = (int(x) for x in sys.argv[5:10])
t = r["totals"]; ops = t["ops_per_sec"] * r["seconds"]
gets = r["hits"] + r["misses"]
cold = (used - empty - (keys - disk) * warm) / disk if disk else 0
print(f'{r["hits"] / gets if gets else 0:.4f} {t["ops_per_sec"]:.0f} {t["p50_ms"]:.3f} {t["p99_ms"]:.3f} '
      f'{ops / cpu if cpu else 0:.0f} {keys} {cold:.0f}')
PY
}


: >"$TMP/strata"; : >"$TMP/redis"
for r in $(seq "$REPEAT"); do
  if ((r % 2)); then order="strata redis"; else order="redis strata"; fi
  for s in $order; do
    line=$(measure "$s")
    echo "round $r $s: $line" | tee -a "$RESULTS_DIR/runs.txt" >&2
    echo "$line" >>"$TMP/$s"
  done
done

col() { awk -v c="$2" '{ print $c }' "$TMP/$1" | median; }
{
  echo "maxmemory $MAXMEMORY, $KEYS keys x $VALUE B, 1:10 Zipf 0.99 for ${SECONDS_EACH}s, medians of $REPEAT"
  printf '%-8s %9s %9s %8s %8s %12s %8s %s\n' server hit_ratio ops/s p50_ms p99_ms ops/cpu_s keys ram/disk_key
  for s in strata redis; do
    printf '%-8s %9s %9s %8s %8s %12s %8s %s\n' "$s" "$(col "$s" 1)" "$(col "$s" 2)" "$(col "$s" 3)" \
      "$(col "$s" 4)" "$(col "$s" 5)" "$(col "$s" 6)" "$([[ $s == strata ]] && col "$s" 7 || echo -)"
  done
  python3 - "$(col strata 1)" "$(col redis 1)" "$(col strata 2)" "$(col redis 2)" "$(col strata 5)" "$(col redis 5)" <<'PY'
import sys
hs, hr, os_, or_, cs, cr = (float(x) for x in sys.argv[1:])
r = lambda a, b: f"{a / b:.2f}" if b else "-"
print(f"strata/redis: hit ratio {r(hs, hr)}, ops/s {r(os_, or_)}, ops per CPU-second {r(cs, cr)}")
PY
} | tee -a "$RESULTS_DIR/summary.txt"
