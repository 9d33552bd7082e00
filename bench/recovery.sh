#!/usr/bin/env bash
# Restart time after kill -9 with N keys: strata-node's log replay vs redis-server's AOF and RDB.
# See bench/README.md ("Recovery") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/recovery.sh [--no-build] [-h]

Per variant, loads KEYS keys of VALUE bytes (bench/loadgen, strata-loadgen, SET only, sequential
keys over 20 connections) into each of three servers, each with an empty data dir on DIR's file
system, lets it settle (2 s), then kill -9s it. Then REPEAT times, alternating the order, restarts
each server on its data and measures the time from exec until it serves: strata-node until /readyz
on its metrics port answers 200, redis-server until PING answers PONG (not -LOADING); checks that
DBSIZE is KEYS, notes the RSS then, and kill -9s it again. Prints the median seconds, the RSS of the
last restart, the data on disk, and the ratio strata / redis for each redis mode (lower is better
for strata).

Servers:
  strata      --durability periodic (the log: compaction's rewrite plus the tail since)
  redis-aof   --appendonly yes --appendfsync everysec (Redis 7's multi-part AOF, rewrites at its
              defaults)
  redis-rdb   --appendonly no, then SAVE before the kill (a snapshot, the fastest Redis restart)

Variants:
  once         every key written once
  overwritten  every key written twice (the log and the AOF hold twice the data, as just before a
               compaction / rewrite)

Env vars:
  KEYS=10000000     keys (a multiple of 20)        VALUE=32    value bytes
  REPEAT=3          restarts per server and variant
  VARIANTS          default: once overwritten
  SERVERS           default: strata redis-aof redis-rdb
  THREADS=nproc     strata-node worker threads
  DIR               where the data dirs go (default: a temp dir; pick the disk to measure)
  STRATA_ARGS       more strata-node options (e.g. "--io-engine threads")
  REDIS_ARGS        more redis-server options
  TIMEOUT=600       seconds a load or a restart may take
  STRATA_BIN, LOADGEN   binaries (default: the release builds, built unless --no-build)
  RESULTS_DIR       default bench/results/recovery-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

KEYS=${KEYS:-10000000}
VALUE=${VALUE:-32}
REPEAT=${REPEAT:-3}
VARIANTS=${VARIANTS:-"once overwritten"}
SERVERS=${SERVERS:-"strata redis-aof redis-rdb"}
THREADS=${THREADS:-$(nproc)}
TIMEOUT=${TIMEOUT:-600}
CLIENTS=20 # loadgen: -t 2 -c 10
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/recovery-$(date +%Y%m%d-%H%M%S)}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

((KEYS > 0 && KEYS % CLIENTS == 0)) || { echo "KEYS must be a positive multiple of $CLIENTS" >&2; exit 2; }
for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
need_binaries
for v in $VARIANTS; do
  case $v in once | overwritten) ;; *) echo "unknown variant $v" >&2; exit 2 ;; esac
done
for s in $SERVERS; do
  case $s in strata | redis-aof | redis-rdb) ;; *) echo "unknown server $s" >&2; exit 2 ;; esac
done

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
DATA=$(mktemp -d "${DIR:-${TMPDIR:-/tmp}}/strata-recovery-bench.XXXXXX")
PID=""
# kill -9 is the point here; stop() (SIGTERM) is only for an interrupted run.
trap 'stop; rm -rf "$TMP" "$DATA"' EXIT

kill9() {
  if [[ -n $PID ]]; then
    kill -9 "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
}

# launch SERVER TAG: starts SERVER on its data dir ($DATA/SERVER), free ports in $PORT (and
# $MPORT for strata), pid in $PID, the start time in $START (s since the epoch, float).
launch() {
  local server=$1 tag=$2 dir=$DATA/$1
  PORT=$(free_port)
  MPORT=$(free_port)
  mkdir -p "$dir"
  local log=$RESULTS_DIR/logs/$server-$tag-$PORT.log
  START=$(date +%s.%N)
  case $server in
    strata)
      # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
      "$STRATA_BIN" --port "$PORT" --threads "$THREADS" --metrics-port "$MPORT" --durability periodic \
        --dir "$dir" ${STRATA_ARGS:-} >"$log" 2>&1 &
      ;;
    redis-aof)
      # shellcheck disable=SC2086
      redis-server --port "$PORT" --save '' --daemonize no --dir "$dir" --appendonly yes \
        --appendfsync everysec ${REDIS_ARGS:-} >"$log" 2>&1 &
      ;;
    redis-rdb)
      # shellcheck disable=SC2086
      redis-server --port "$PORT" --save '' --daemonize no --dir "$dir" --appendonly no \
        ${REDIS_ARGS:-} >"$log" 2>&1 &
      ;;
  esac
  PID=$!
}

# wait_ready SERVER START: waits until the server launched at START serves; prints the seconds.
wait_ready() {
  python3 - "$1" "$2" "$PORT" "$MPORT" "$TIMEOUT" "$PID" <<'PY'
import socket, sys, time, os
server, start, port, mport, timeout, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])

def ask(p, req):
    try:
        with socket.create_connection(("127.0.0.1", p), timeout=1) as s:
            s.sendall(req)
            return s.recv(64)
    except OSError:
        return b""

while time.time() - start < timeout:
    if not os.path.exists(f"/proc/{pid}"):
        sys.exit(f"{server} exited")
    if server == "strata":
        ready = ask(mport, b"GET /readyz HTTP/1.0\r\n\r\n").split(b"\r\n")[0].split(b" ")[1:2] == [b"200"]
    else:
        ready = ask(port, b"PING\r\n").startswith(b"+PONG")
    if ready:
        print(f"{time.time() - start:.3f}")
        sys.exit(0)
    time.sleep(0.005)
sys.exit(f"{server} not ready after {timeout}s")
PY
}

rss_mb() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

# load SERVER VARIANT: a fresh data dir, KEYS keys written once or twice, settled, killed -9.
load() {
  local server=$1 variant=$2 laps=1
  if [[ $variant == overwritten ]]; then laps=2; fi
  rm -rf "${DATA:?}/$server"
  launch "$server" "load-$variant"
  wait_ready "$server" "$START" >/dev/null
  # Each connection walks its own KEYS/20 keys (and, with laps=2, the next connection's too).
  "$LOADGEN" -p "$PORT" -t 2 -c 10 --pipeline 50 --ratio 1:0 --key-pattern sequential \
    --key-maximum $((KEYS - 1)) -d "$VALUE" -n $((KEYS / CLIENTS * laps)) \
    >>"$RESULTS_DIR/logs/load-$server-$variant.txt"
  local n
  n=$(redis-cli -p "$PORT" DBSIZE)
  [[ $n == "$KEYS" ]] || { echo "$server: DBSIZE $n after the load, expected $KEYS" >&2; exit 1; }
  if [[ $server == redis-rdb ]]; then redis-cli -p "$PORT" SAVE >/dev/null; fi
  # The last second's writes reach the disk (periodic: 10ms; everysec: 1s), and a rewrite or
  # compaction the load started ends, as before a planned restart.
  sleep 2
  for _ in $(seq "$TIMEOUT"); do
    if [[ $server == redis-aof ]]; then
      redis-cli -p "$PORT" INFO persistence | grep -q '^aof_rewrite_in_progress:0' && break
    else
      break
    fi
    sleep 1
  done
  kill9
}

# restart SERVER VARIANT: prints "seconds rss_mb" of one restart after kill -9.
restart() {
  local server=$1 variant=$2 secs n rss
  launch "$server" "restart-$variant"
  secs=$(wait_ready "$server" "$START")
  n=$(redis-cli -p "$PORT" DBSIZE)
  rss=$(rss_mb "$PID")
  if [[ $server == strata ]]; then
    redis-cli -p "$PORT" INFO persistence | tr -d '\r' | grep -E '^strata_recovery_(duration_ms|records)' \
      | tr '\n' ' ' >>"$RESULTS_DIR/logs/restart-$server-$variant.txt"
  fi
  echo "$secs s, DBSIZE $n, RSS $rss MB" >>"$RESULTS_DIR/logs/restart-$server-$variant.txt"
  kill9
  [[ $n == "$KEYS" ]] || { echo "$server: DBSIZE $n after a restart, expected $KEYS" >&2; exit 1; }
  echo "$secs $rss"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
disk_mb() { du -sm "$DATA/$1" | awk '{ print $1 }'; }

{
  echo "bench/recovery.sh  KEYS=$KEYS VALUE=$VALUE REPEAT=$REPEAT THREADS=$THREADS nproc=$(nproc)"
  echo "  STRATA_ARGS='${STRATA_ARGS:-}' REDIS_ARGS='${REDIS_ARGS:-}' data on $(df -P "$DATA" | awk 'NR == 2 { print $1 }') $(date -u +%FT%TZ)"
  echo "  load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "median seconds from exec to serving, of $REPEAT restarts after kill -9; ratio strata / redis"
  printf '%-12s %-10s | %8s %7s %8s\n' variant server seconds rss_mb disk_mb
} | tee "$RESULTS_DIR/summary.txt"
for v in $VARIANTS; do
  for s in $SERVERS; do load "$s" "$v"; : >"$TMP/$s"; done
  for r in $(seq "$REPEAT"); do
    # Alternate the order, so drift in the machine's load hits every server alike.
    if ((r % 2)); then order=$SERVERS; else order=$(echo "$SERVERS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for s in $order; do restart "$s" "$v" >>"$TMP/$s"; done
  done
  declare -A secs=()
  for s in $SERVERS; do
    secs[$s]=$(awk '{ print $1 }' "$TMP/$s" | median)
    printf '%-12s %-10s | %8.3f %7s %8s\n' "$v" "$s" "${secs[$s]}" "$(tail -1 "$TMP/$s" | awk '{ print $2 }')" \
      "$(disk_mb "$s")" | tee -a "$RESULTS_DIR/summary.txt"
  done
  if [[ -n ${secs[strata]:-} ]]; then
    for s in redis-aof redis-rdb; do
      if [[ -n ${secs[$s]:-} ]]; then
        echo "$v: strata / $s = $(ratio "${secs[strata]}" "${secs[$s]}")" | tee -a "$RESULTS_DIR/summary.txt"
      fi
    done
  fi
  unset secs
  rm -rf "${DATA:?}"/*
done
echo "results: $RESULTS_DIR"
