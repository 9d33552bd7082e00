#!/usr/bin/env bash
# Instructions per request (callgrind Ir) for strata-node vs redis-server.
# Repeatable where wall-clock benchmarks are not: see bench/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/callgrind.sh [--no-build] [-h]

For every test and mode, starts a fresh server under `valgrind --tool=callgrind`,
drives it with one redis-benchmark client (-c 1) over a Unix socket, stops it,
and reads the total instruction count. Each case runs twice, with N and 2N
requests: Ir/req = (Ir(2N) - Ir(N)) / N, so startup, shutdown and
redis-benchmark's own setup commands cancel out. Only user-space instructions
count; syscalls do not (use strace -c for those).

Env vars:
  N=2000                      requests in the short run (the long one does 2N)
  TESTS="ping_inline ..."     cases (default below; lrange_100 is a custom
                              LRANGE mylist 0 99 on a prefilled 600-element list)
  MODES="plain pipelined"     pipelined = -P $PIPELINE (default 16)
  REPEAT=1                    runs per (case, N); the lowest Ir counts. Plain
                              mode varies by a few hundred Ir/req from run to
                              run (how often the server wakes twice per
                              request depends on timing); REPEAT=3 steadies it
  SERVERS="strata redis"      which columns to measure
  STRATA_BIN                  default $CARGO_TARGET_DIR/release/strata-node
  NO_BUILD=1                  skip cargo build --release -p strata-node
  KEEP=1                      keep the temp dir (callgrind.out files, logs)
EOF
}

N=${N:-2000}
TESTS=${TESTS:-"ping_inline ping_mbulk get set incr lpush spop lrange_100"}
MODES=${MODES:-"plain pipelined"}
SERVERS=${SERVERS:-"strata redis"}
PIPELINE=${PIPELINE:-16}
NO_BUILD=${NO_BUILD:-0}
REPEAT=${REPEAT:-1}
KEEP=${KEEP:-0}
for a in "$@"; do
  case $a in
    --no-build) NO_BUILD=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown option $a" >&2; usage >&2; exit 2 ;;
  esac
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
STRATA_BIN=${STRATA_BIN:-$TARGET/release/strata-node}
for tool in valgrind redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
if [[ $NO_BUILD != 1 && $SERVERS == *strata* ]]; then
  (cd "$REPO" && cargo build --release -p strata-node)
fi

TMP=$(mktemp -d /tmp/strata-callgrind.XXXXXX)
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  if [[ $KEEP == 1 ]]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

# min_ir SERVER TEST MODE REQUESTS: lowest total Ir over REPEAT runs
min_ir() {
  local best='' r v
  for r in $(seq "$REPEAT"); do
    v=$(ir "$@" "$r")
    [[ -z $best || $v -lt $best ]] && best=$v
  done
  echo "$best"
}

# ir SERVER TEST MODE REQUESTS RUN: total Ir of one server lifetime serving one case
ir() {
  local server=$1 test=$2 mode=$3 n=$4 tag=$1-$2-$3-$4-$5
  local sock=$TMP/$tag.sock out=$TMP/$tag.cg
  local cmd
  if [[ $server == strata ]]; then
    cmd=("$STRATA_BIN" --threads 1 --unixsocket "$sock" --port 0 --metrics-port 0)
  else
    cmd=(redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no)
  fi
  valgrind --tool=callgrind --callgrind-out-file="$out" "${cmd[@]}" >"$TMP/$tag.log" 2>&1 </dev/null &
  SERVER_PID=$!
  local up=0
  for _ in $(seq 300); do
    [[ $(redis-cli -s "$sock" ping 2>/dev/null) == PONG ]] && { up=1; break; }
    sleep 0.05
  done
  ((up)) || { echo "$server did not start; log:" >&2; cat "$TMP/$tag.log" >&2; exit 1; }

  local extra=(-s "$sock" -n "$n" -c 1 -d 16 -q)
  [[ $mode == pipelined ]] && extra+=(-P "$PIPELINE")
  case $test in
    lrange_100)
      # Same prefill in the N and 2N runs, so it cancels out of the difference.
      local fill=()
      for _ in $(seq 600); do fill+=(xxxxxxxxxxxxxxxx); done
      redis-cli -s "$sock" rpush mylist "${fill[@]}" >/dev/null
      redis-benchmark "${extra[@]}" lrange mylist 0 99 >/dev/null ;;
    *) redis-benchmark "${extra[@]}" -t "$test" >/dev/null ;;
  esac

  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || true
  SERVER_PID=
  awk '/^totals:/ {print $2}' "$out"
}

printf '%-12s %-10s %12s %12s %7s\n' command mode strata_Ir/req redis_Ir/req ratio
for mode in $MODES; do
  for test in $TESTS; do
    declare -A per=()
    for server in $SERVERS; do
      a=$(min_ir "$server" "$test" "$mode" "$N")
      b=$(min_ir "$server" "$test" "$mode" $((2 * N)))
      per[$server]=$(((b - a) / N))
    done
    s=${per[strata]:-} r=${per[redis]:-}
    ratio=-
    [[ -n $s && -n $r && $r -gt 0 ]] && ratio=$(awk -v s="$s" -v r="$r" 'BEGIN{printf "%.2f", s / r}')
    printf '%-12s %-10s %12s %12s %7s\n' "$test" "$mode" "${s:--}" "${r:--}" "$ratio"
    unset per
  done
done
