#!/usr/bin/env bash
# A pipeline of cold reads on one connection: pipelined GETs against MGETs of the same kind of
# keys, every key on disk, for each I/O engine. See bench/README.md ("Pipelined cold reads") or
# run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/tier-pipeline.sh [--no-build] [-h]

strata-node with MAXMEMORY of RAM and a disk tier holds KEYS keys of VALUE bytes (most on disk
only). One client connection then reads COUNT random keys (none read twice in a run), REPEAT
times alternately:
  get:  pipelines of DEPTH GETs (one round trip per DEPTH keys);
  mget: MGETs of MGET_KEYS keys.
A disk read per key either way; with read-ahead the GETs behind one that waits for the disk
start their reads too, so the device serves the pipeline's reads together, as it does an MGET's.
Prints per engine the medians of keys/s for each, their ratio (goal >= 0.8), the most device
reads in flight at once (INFO tier_reads_in_flight_peak) and the median stage latencies of the
cold reads (queue: issued until the device started it; device; wake: completion until the
command ran again).

Env vars:
  MAXMEMORY=32mb  KEYS=262144  VALUE=1024  COUNT=20000  DEPTH=256  MGET_KEYS=100  REPEAT=3
  ENGINES="uring aio threads"   --io-engine values (one the kernel refuses is skipped, saying so)
  THREADS=nproc  DATA_DIR (default: a temp dir; put it on the disk to measure)
  STRATA_BIN, LOADGEN  binaries (default: the release builds, built unless --no-build)
  RESULTS_DIR     default bench/results/tier-pipeline-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

MAXMEMORY=${MAXMEMORY:-32mb}
KEYS=${KEYS:-262144}
VALUE=${VALUE:-1024}
COUNT=${COUNT:-20000}
DEPTH=${DEPTH:-256}
MGET_KEYS=${MGET_KEYS:-100}
REPEAT=${REPEAT:-3}
ENGINES=${ENGINES:-"uring aio threads"}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/tier-pipeline-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
READER="python3 $ROOT/bench/pipeline_reader.py"
need_binaries
for tool in redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
PID=""
trap 'stop; rm -rf "$TMP"' EXIT
field() { redis-cli -p "$PORT" INFO everything | tr -d '\r' | sed -n "s/^$1://p"; }

{
  echo "bench/tier-pipeline.sh  maxmemory $MAXMEMORY, $KEYS keys x $VALUE B, $COUNT keys read per run," \
    "GET pipeline $DEPTH vs MGET of $MGET_KEYS, x $REPEAT, THREADS=$THREADS, $(date -u +%FT%TZ), data on" \
    "$(df -P "${DATA_DIR:-$TMP}" | awk 'NR == 2 { print $1 }')"
  printf '%-8s %10s %10s %9s %9s %8s %8s %8s\n' engine get_keys/s mget_keys/s get/mget in_flight queue_us \
    device_us wake_us
} | tee "$RESULTS_DIR/summary.txt"

for engine in $ENGINES; do
  PORT=$(free_port)
  log=$RESULTS_DIR/logs/strata-$engine.log
  "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --maxmemory "$MAXMEMORY" --maxmemory-policy allkeys-lru \
    --max-disk $((KEYS * VALUE * 3)) --dir "${DATA_DIR:-$TMP}/strata-$engine" --io-engine "$engine" \
    --metrics-port 0 >"$log" 2>&1 &
  PID=$!
  up=0
  for _ in $(seq 100); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && { up=1; break; }; sleep 0.1; done
  if ((!up)); then
    echo "$engine: strata-node did not start (engine refused here?): $(tail -1 "$log")" | tee -a "$RESULTS_DIR/summary.txt"
    stop
    continue
  fi
  "$LOADGEN" -p "$PORT" -t 1 -c 1 --pipeline 64 -d "$VALUE" --ratio 1:0 --key-pattern sequential \
    --key-maximum $((KEYS - 1)) -n "$KEYS" >/dev/null
  gets=() mgets=()
  for round in $(seq "$REPEAT"); do
    # Different keys each run: a key read once is in RAM after it.
    gets+=("$($READER "$PORT" "$KEYS" get "$DEPTH" "$VALUE" "$COUNT" "$((2 * round))" | cut -d' ' -f1)")
    mgets+=("$($READER "$PORT" "$KEYS" mget "$MGET_KEYS" "$VALUE" "$COUNT" "$((2 * round + 1))" | cut -d' ' -f1)")
    echo "  $engine round $round: get ${gets[-1]} keys/s, mget ${mgets[-1]} keys/s" >&2
  done
  get=$(printf '%s\n' "${gets[@]}" | median)
  mget=$(printf '%s\n' "${mgets[@]}" | median)
  printf '%-8s %10.0f %10.0f %9.2f %9s %8s %8s %8s\n' "$engine" "$get" "$mget" \
    "$(python3 -c "print($get / $mget)")" "$(field tier_reads_in_flight_peak)" "$(field tier_queue_p50_usec)" \
    "$(field tier_device_p50_usec)" "$(field tier_wake_p50_usec)" | tee -a "$RESULTS_DIR/summary.txt"
  stop
done
echo "results: $RESULTS_DIR"
