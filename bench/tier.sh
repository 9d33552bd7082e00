#!/usr/bin/env bash
# The cold tier against redis-server at the same RAM budget: data 10x maxmemory, loaded once,
# then read with a Zipf 0.99 1:10 mix. See bench/README.md ("Tier") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/tier.sh [--no-build] [-h]

Both servers get the same maxmemory and allkeys-lru; strata-node also gets --max-disk and a data
dir (the cold tier), redis-server has none. Each, REPEAT times alternately, on a fresh server:
  1. load KEYS keys of VALUE bytes, sequentially (pipelined; untimed), so every key is written:
     by default KEYS x VALUE = DATA_RATIO (10) x maxmemory;
  2. run RATIO (1:10) SET:GET, Zipf ZIPF (0.99) over the same keys, CLIENTS, for SECONDS_EACH s.
Prints per server the medians of: hit ratio (GET hits / GETs: redis evicted what did not fit,
strata demoted it to disk), ops/s, ops per server CPU-second (utime+stime), the client's
p50/p99/p99.9, the keys held after the run and those lost (KEYS - DBSIZE); for strata also the
server-side latency of read commands served from RAM and of those that waited for a disk read
(p50/p99 of strata_read_command_duration_seconds{tier="ram"|"disk"} over the timed run: the
difference of two /metrics scrapes) and the RAM a key whose value is on disk only costs:
  (used_memory - used_memory empty - warm keys x RAM per warm key) / disk keys,
with RAM per warm key measured first on WARM_KEYS keys without a limit.

Env vars:
  MAXMEMORY=64mb  VALUE=1024  DATA_RATIO=10  KEYS (default DATA_RATIO x maxmemory / VALUE)
  RATIO=1:10  ZIPF=0.99  CLIENTS="-t 4 -c 50"  SECONDS_EACH=20  REPEAT=3  WARM_KEYS=200000
  THREADS=nproc   strata-node worker threads
  MAX_DISK        default: the larger of 4 GiB and 3 x KEYS x VALUE
  DATA_DIR        default: a temp dir; put it on the disk to measure
  STRATA_ARGS / REDIS_ARGS   more server options
  STRATA_BIN, LOADGEN        binaries (default: the release builds, built unless --no-build)
  RESULTS_DIR     default bench/results/tier-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

# Redis's memory units: 1k = 1000, 1kb = 1024, and so on.
to_bytes() {
  local v=${1,,}
  case $v in
    *gb) echo $((${v%gb} << 30)) ;; *mb) echo $((${v%mb} << 20)) ;; *kb) echo $((${v%kb} << 10)) ;;
    *g) echo $((${v%g} * 1000000000)) ;; *m) echo $((${v%m} * 1000000)) ;; *k) echo $((${v%k} * 1000)) ;;
    *b) echo "${v%b}" ;; *) echo "$v" ;;
  esac
}

MAXMEMORY=${MAXMEMORY:-64mb}
VALUE=${VALUE:-1024}
DATA_RATIO=${DATA_RATIO:-10}
KEYS=${KEYS:-$(($(to_bytes "$MAXMEMORY") * DATA_RATIO / VALUE))}
RATIO=${RATIO:-1:10}
ZIPF=${ZIPF:-0.99}
CLIENTS=${CLIENTS:-"-t 4 -c 50"}
SECONDS_EACH=${SECONDS_EACH:-20}
REPEAT=${REPEAT:-3}
WARM_KEYS=${WARM_KEYS:-200000}
((WARM_KEYS <= KEYS)) || WARM_KEYS=$KEYS
data_bytes=$((KEYS * VALUE))
MAX_DISK=${MAX_DISK:-$((data_bytes * 3 > 4 << 30 ? data_bytes * 3 : 4 << 30))}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/tier-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROM="python3 $ROOT/bench/prom.py"

for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
need_binaries

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
PID=""
trap 'stop; rm -rf "$TMP"' EXIT

field() { redis-cli -p "$PORT" INFO everything | tr -d '\r' | sed -n "s/^$1://p"; }

# start SERVER [LIMIT]: a fresh server on a free port ($PORT; strata's /metrics on $MPORT), pid in
# $PID; LIMIT 0 = no maxmemory.
start() {
  local server=$1 limit=${2:-$MAXMEMORY}
  PORT=$(free_port)
  local log=$RESULTS_DIR/logs/$server-$PORT.log
  if [[ $server == strata ]]; then
    local dir=${DATA_DIR:-$TMP}/strata-$PORT
    MPORT=$(free_port)
    # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
    "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port "$MPORT" --metrics-bind 127.0.0.1 \
      --maxmemory "$limit" --maxmemory-policy allkeys-lru --max-disk "$MAX_DISK" --dir "$dir" \
      ${STRATA_ARGS:-} >"$log" 2>&1 &
  else
    # shellcheck disable=SC2086
    redis-server --port "$PORT" --save '' --appendonly no --daemonize no --dir "$TMP" \
      --maxmemory "$limit" --maxmemory-policy allkeys-lru ${REDIS_ARGS:-} >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$server did not start; see $log" >&2
  exit 1
}

# load N: keys 0..N-1 in order, one pipelined connection.
load() {
  "$LOADGEN" -p "$PORT" -t 1 -c 1 --pipeline 64 -d "$VALUE" --ratio 1:0 --key-pattern sequential \
    --key-maximum $(($1 - 1)) -n "$1" >/dev/null
}

# RAM per key with every value in RAM (strata, no limit), on a sample of the keys.
start strata 0
empty=$(field used_memory)
load "$WARM_KEYS"
warm_per_key=$((($(field used_memory) - empty) / $(redis-cli -p "$PORT" DBSIZE)))
stop
{
  echo "bench/tier.sh  maxmemory $MAXMEMORY, $KEYS keys x $VALUE B = $((data_bytes >> 20)) MiB" \
    "($(python3 -c "print(f'{$data_bytes / $(to_bytes "$MAXMEMORY"):.1f}')")x), SET:GET $RATIO, Zipf $ZIPF," \
    "$CLIENTS, ${SECONDS_EACH}s x $REPEAT, THREADS=$THREADS, max-disk $MAX_DISK, $(date -u +%FT%TZ)"
  echo "  STRATA_ARGS='${STRATA_ARGS:-}' REDIS_ARGS='${REDIS_ARGS:-}' data on" \
    "$(df -P "${DATA_DIR:-$TMP}" | awk 'NR == 2 { print $1 }')"
  echo "strata, no limit: $warm_per_key bytes of RAM per key ($WARM_KEYS keys of $VALUE B)"
} | tee "$RESULTS_DIR/summary.txt"

# measure SERVER: prints "hit_ratio ops/s ops/cpu_s p50 p99 p99.9 keys lost ram/disk_key
# ram_reads ram_p50_us ram_p99_us disk_reads disk_p50_us disk_p99_us device_p99_us" ("-" where it
# does not apply; device: the device's own time per cold read, issue to completion excluded).
measure() {
  local server=$1
  start "$server"
  local empty0 json=$TMP/run.json c0 c1 t0 t1
  empty0=$(field used_memory)
  t0=$(date +%s.%N)
  load "$KEYS"
  t1=$(date +%s.%N)
  echo "  $server: loaded $KEYS keys in $(python3 -c "print(f'{$t1 - $t0:.1f}')") s, DBSIZE" \
    "$(redis-cli -p "$PORT" DBSIZE)$([[ $server == strata ]] && echo ", $(field tier_disk_keys) on disk only")" >&2
  rm -f "$TMP/before" "$TMP/after"
  [[ $server == strata ]] && $PROM scrape "$MPORT" >"$TMP/before"
  c0=$(cpu_ticks "$PID")
  # shellcheck disable=SC2086
  "$LOADGEN" -p "$PORT" $CLIENTS -d "$VALUE" --ratio "$RATIO" --key-pattern zipf --zipf-exp "$ZIPF" \
    --key-maximum $((KEYS - 1)) --test-time "$SECONDS_EACH" --json-out-file "$json" >>"$RESULTS_DIR/logs/$server-run.txt"
  c1=$(cpu_ticks "$PID")
  local keys used disk=0 ram_h="- - - -" disk_h="- - - -" dev_h="- - - -"
  if [[ $server == strata ]]; then
    $PROM scrape "$MPORT" >"$TMP/after"
    disk=$(field tier_disk_keys)
    ram_h=$($PROM hist "$TMP/before" "$TMP/after" strata_read_command_duration_seconds tier=ram)
    disk_h=$($PROM hist "$TMP/before" "$TMP/after" strata_read_command_duration_seconds tier=disk)
    dev_h=$($PROM hist "$TMP/before" "$TMP/after" strata_tier_read_stage_duration_seconds stage=device)
  fi
  keys=$(redis-cli -p "$PORT" DBSIZE)
  used=$(field used_memory)
  stop
  # shellcheck disable=SC2086 # the histograms' four fields each
  python3 - "$json" "$c0" "$c1" "$(getconf CLK_TCK)" "$keys" "$used" "$empty0" "$disk" "$warm_per_key" \
    "$KEYS" "$server" $ram_h $disk_h $dev_h <<'PY'
import json, sys
a = sys.argv
r = json.load(open(a[1])); cpu = (int(a[3]) - int(a[2])) / int(a[4])
keys, used, empty, disk, warm, loaded = (int(x) for x in a[5:11])
strata = a[11] == 'strata'
ram, dsk, dev = a[12:16], a[16:20], a[20:24]  # count mean p50 p99 (µs), or "-"
t = r["totals"]; ops = t["ops_per_sec"] * r["seconds"]
gets = r["hits"] + r["misses"]
cold = f'{(used - empty - (keys - disk) * warm) / disk:.0f}' if strata and disk else '-'
print(f'{r["hits"] / gets if gets else 0:.4f} {t["ops_per_sec"]:.0f} {ops / cpu if cpu else 0:.0f} '
      f'{t["p50_ms"]:.3f} {t["p99_ms"]:.3f} {t["p999_ms"]:.3f} {keys} {loaded - keys} {cold} '
      f'{ram[0]} {ram[2]} {ram[3]} {dsk[0]} {dsk[2]} {dsk[3]} {dev[3]}')
PY
}

: >"$TMP/strata"; : >"$TMP/redis"
for r in $(seq "$REPEAT"); do
  # Alternate which server goes first, so drift in the machine's load hits both alike.
  if ((r % 2)); then order="strata redis"; else order="redis strata"; fi
  for s in $order; do
    line=$(measure "$s")
    echo "round $r $s: $line" | tee -a "$RESULTS_DIR/runs.txt" >&2
    echo "$line" >>"$TMP/$s"
  done
done

# col SERVER N: the median of column N, or "-" when it does not apply.
col() {
  local v
  v=$(awk -v c="$2" '$c != "-" { print $c }' "$TMP/$1")
  if [[ -z $v ]]; then echo -; else median <<<"$v"; fi
}
{
  echo "medians of $REPEAT; client latency in ms; server read latency in us (RAM: served at once; disk: waited for a cold read)"
  printf '%-7s %9s %9s %9s %7s %7s %8s %9s %8s %8s | %9s %7s %7s %9s %8s %8s %8s\n' server hit_ratio ops/s \
    ops/cpu_s p50 p99 p99.9 keys lost ram/disk_k ram_reads p50 p99 disk_reads p50 p99 dev_p99
  for s in strata redis; do
    printf '%-7s %9s %9s %9s %7s %7s %8s %9s %8s %8s | %9s %7s %7s %9s %8s %8s %8s\n' "$s" \
      "$(col "$s" 1)" "$(col "$s" 2)" "$(col "$s" 3)" "$(col "$s" 4)" "$(col "$s" 5)" "$(col "$s" 6)" \
      "$(col "$s" 7)" "$(col "$s" 8)" "$(col "$s" 9)" "$(col "$s" 10)" "$(col "$s" 11)" "$(col "$s" 12)" \
      "$(col "$s" 13)" "$(col "$s" 14)" "$(col "$s" 15)" "$(col "$s" 16)"
  done
  # The issue's bound: a read that waited for the disk, at p99, within 4x the device's p99.
  python3 - "$(col strata 15)" "$(col strata 16)" <<'PY'
import sys
try:
    disk, dev = (float(x) for x in sys.argv[1:])
    print(f"strata disk-hit p99 / device read p99: {disk / dev:.2f} ({disk:.0f} us / {dev:.0f} us)")
except ValueError:
    pass
PY
  python3 - "$(col strata 1)" "$(col redis 1)" "$(col strata 2)" "$(col redis 2)" "$(col strata 3)" "$(col redis 3)" <<'PY'
import sys
hs, hr, os_, or_, cs, cr = (float(x) for x in sys.argv[1:])
r = lambda a, b: f"{a / b:.2f}" if b else "-"
print(f"strata/redis: hit ratio {r(hs, hr)}, ops/s {r(os_, or_)}, ops per CPU-second {r(cs, cr)}")
PY
  echo "results: $RESULTS_DIR"
} | tee -a "$RESULTS_DIR/summary.txt"
