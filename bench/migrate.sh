#!/usr/bin/env bash
# Live slot migration: two Strata nodes (STRATA.MIGRATE) vs a two-node Redis Cluster
# (redis-cli --cluster reshard), the same data and slots. See bench/README.md ("Slot
# migration") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/migrate.sh [--no-build] [-h|--help]

Builds strata-node (release) and starts, on 127.0.0.1:
  strata   two strata-node --cluster-enabled yes (node A: slots 0-8191, node B: 8192-16383,
           pushed with STRATA.TOPOLOGY SET), each with --maxmemory SIZE_MB/2 and a --max-disk
           tier: the data does not fit in RAM, about half of it is on disk
  redis    two redis-server --cluster-enabled yes (the same slots, CLUSTER ADDSLOTSRANGE and
           MEET), everything in RAM
Loads SIZE_MB of VALUE_SIZE-byte values (keys only in node A's slots) into both, then, while
a light redis-benchmark load runs (LOAD_CLIENTS clients, SET/GET on random keys of all slots):
  strata   STRATA.MIGRATE START of MOVE_SLOTS (A's first half) to B on A's admin port, STATUS
           polled until committed, then the confirming epoch pushed (B, then A): seconds, and
           the paused-write time (paused_ms) and bytes STATUS reports
  redis    redis-cli --cluster reshard of the same slots from A to B: seconds
and prints both times and their ratio (redis/strata: above 1, Strata moved them faster).
Both sides are checked afterwards: B holds every key of the moved slots, A none.

Env vars:
  SIZE_MB=1024         data loaded into node A (smaller for a quick run: SIZE_MB=64)
  VALUE_SIZE=4096      bytes per value
  MOVE_SLOTS=0-4095    slots moved (must be within A's 0-8191)
  LOAD_CLIENTS=4       clients of the background load (0: none)
  THREADS=nproc        strata worker threads per node
  DURABILITY=periodic  strata --durability
  MIGRATE_TIMEOUT=1800 seconds before a migration counts as stuck
  STRATA_BIN           the node binary (default $CARGO_TARGET_DIR or target, release/strata-node)
  RESULTS_DIR          where to write results (default bench/results/migrate-<timestamp>)

Output: summary.txt, params.txt, status.txt (the source's last STATUS), logs/*.log in RESULTS_DIR.
EOF
}

SIZE_MB=${SIZE_MB:-1024}
VALUE_SIZE=${VALUE_SIZE:-4096}
MOVE_SLOTS=${MOVE_SLOTS:-0-4095}
LOAD_CLIENTS=${LOAD_CLIENTS:-4}
THREADS=${THREADS:-$(nproc)}
DURABILITY=${DURABILITY:-periodic}
MIGRATE_TIMEOUT=${MIGRATE_TIMEOUT:-1800}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$SCRIPT_DIR/lib.sh"
parse_options "$@"
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
STRATA_BIN=${STRATA_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/strata-node}
OUT=${RESULTS_DIR:-$SCRIPT_DIR/results/migrate-$(date +%Y%m%d-%H%M%S)}

for tool in redis-server redis-cli redis-benchmark python3 sha1sum; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
MOVE_FIRST=${MOVE_SLOTS%-*} MOVE_LAST=${MOVE_SLOTS#*-}
(( MOVE_FIRST >= 0 && MOVE_FIRST <= MOVE_LAST && MOVE_LAST <= 8191 )) \
  || { echo "MOVE_SLOTS=$MOVE_SLOTS must be a range a-b within 0-8191" >&2; exit 2; }
MOVE_COUNT=$(( MOVE_LAST - MOVE_FIRST + 1 ))

# ---------------------------------------------------------------- cleanup
WORK=$(mktemp -d /tmp/strata-migrate-bench.XXXXXX)
declare -A PID=()
LOAD_PID=""
cleanup() {
  [[ -n $LOAD_PID ]] && kill "$LOAD_PID" 2>/dev/null || true
  stop_servers
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# start NAME PORT CMD: run CMD (exec'd, so $! is the server pid); wait for PING on PORT.
start() {
  local name=$1 port=$2 cmd=$3
  setsid bash -c "exec $cmd" >"$OUT/logs/$name.log" 2>&1 </dev/null &
  PID[$name]=$!
  for _ in $(seq 600); do
    [[ $(redis-cli -p "$port" ping 2>/dev/null) == PONG ]] && { echo "  $name up on $port (pid ${PID[$name]})"; return; }
    kill -0 "${PID[$name]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name did not answer PING (cmd: $cmd); log tail:" >&2; tail -n 20 "$OUT/logs/$name.log" >&2; exit 1
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# The RESP of SIZE_MB of SETs on keys of slots 0-8191 (node A's), on stdout; the key
# count on fd 3 at the end. Keys key:<n>, values VALUE_SIZE bytes.
gen_load() {
  python3 - "$SIZE_MB" "$VALUE_SIZE" <<'PY'
import os, sys
size_mb, vsize = int(sys.argv[1]), int(sys.argv[2])
tab = []
for i in range(256):
    c = i << 8
    for _ in range(8):
        c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
    tab.append(c & 0xFFFF)
def slot(k):
    c = 0
    for b in k:
        c = ((c << 8) & 0xFFFF) ^ tab[((c >> 8) ^ b) & 0xFF]
    return c & 0x3FFF
n = size_mb * 1024 * 1024 // vsize
out = sys.stdout.buffer
value = b"x" * vsize
vhead = b"$%d\r\n" % vsize
buf, i, made = [], 0, 0
while made < n:
    k = b"key:%d" % i
    i += 1
    if slot(k) > 8191:
        continue
    made += 1
    buf.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n%s%s\r\n" % (len(k), k, vhead, value))
    if len(buf) == 1000:
        out.write(b"".join(buf)); buf = []
out.write(b"".join(buf)); out.flush()
os.write(3, b"%d\n" % made)
PY
}

# load NAME PORT: the generated SETs through redis-cli --pipe.
load() {
  local name=$1 port=$2 t0
  t0=$(now)
  gen_load 3>"$WORK/$name.count" | redis-cli -p "$port" --pipe >"$OUT/logs/$name-load.log" 2>&1 \
    || { echo "loading $name failed; see $OUT/logs/$name-load.log" >&2; exit 1; }
  grep -q 'errors: 0' "$OUT/logs/$name-load.log" || { echo "loading $name: errors, see $OUT/logs/$name-load.log" >&2; exit 1; }
  echo "  $name: $(cat "$WORK/$name.count") keys loaded in $(elapsed "$t0" "$(now)") s"
}

# keys_in PORT FIRST LAST: keys in slots FIRST..LAST on the node at PORT (CLUSTER COUNTKEYSINSLOT).
keys_in() {
  local port=$1 first=$2 last=$3
  for ((s = first; s <= last; s++)); do echo "CLUSTER COUNTKEYSINSLOT $s"; done \
    | redis-cli -p "$port" | awk '{ n += $1 } END { print n + 0 }'
}

# load_start PORT [--cluster]: the light background load; load_stop: its errors.
load_start() {
  (( LOAD_CLIENTS > 0 )) || return 0
  setsid redis-benchmark -h 127.0.0.1 -p "$1" ${2:-} -c "$LOAD_CLIENTS" -n 100000000 -r 100000 -d 64 \
    -t set,get -l -q >"$WORK/bg.out" 2>"$WORK/bg.err" </dev/null &
  LOAD_PID=$!
  sleep 1
}
load_stop() {
  [[ -n $LOAD_PID ]] || { echo 0; return; }
  kill "$LOAD_PID" 2>/dev/null || true
  wait "$LOAD_PID" 2>/dev/null || true
  LOAD_PID=""
  grep -ci 'error' "$WORK/bg.err" || true
}

# ---------------------------------------------------------------- run
mkdir -p "$OUT/logs"
if [[ $NO_BUILD != 1 ]]; then
  echo "building strata-node (release)..."
  (cd "$REPO" && cargo build --release -p strata-node)
fi
[[ -x $STRATA_BIN ]] || { echo "missing $STRATA_BIN (build without --no-build)" >&2; exit 1; }
{
  echo "date: $(date -Is)  host: $(uname -n)  nproc: $(nproc)  $(redis-server --version | cut -d' ' -f1-3)"
  echo "SIZE_MB=$SIZE_MB VALUE_SIZE=$VALUE_SIZE MOVE_SLOTS=$MOVE_SLOTS LOAD_CLIENTS=$LOAD_CLIENTS THREADS=$THREADS"
  echo "DURABILITY=$DURABILITY STRATA_BIN=$STRATA_BIN"
  echo "git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo none)"
} >"$OUT/params.txt"

# --- strata: two nodes, A with the data
echo "strata: two nodes"
MAXMEM=$(( SIZE_MB / 2 ))mb
MAXDISK=$(( SIZE_MB * 4 + 256 ))mb
declare -a SP=() SD=() SA=() SID=()
for i in 0 1; do
  SP[$i]=$(free_port) SD[$i]=$(free_port) SA[$i]=$(free_port)
done
for i in 0 1; do SID[$i]=$(printf 'bench-migrate/%s/%s' "${SP[0]}" "$i" | sha1sum | cut -c1-40); done
entries() {  # entries RANGES_A RANGES_B
  echo "${SID[0]} 127.0.0.1 - ${SD[0]} ${SP[0]} $1 ${SA[0]}"
  echo "${SID[1]} 127.0.0.1 - ${SD[1]} ${SP[1]} $2 ${SA[1]}"
}
push() {  # push EPOCH RANGES_A RANGES_B NODE...
  local epoch=$1 a=$2 b=$3 i reply; shift 3
  local -a e; mapfile -t e < <(entries "$a" "$b")
  for i in "$@"; do
    reply=$(redis-cli -p "${SA[$i]}" STRATA.TOPOLOGY SET "$epoch" "${SID[$i]}" "${e[@]}")
    [[ $reply == OK ]] || { echo "STRATA.TOPOLOGY SET $epoch on strata-$i: $reply" >&2; exit 1; }
  done
}
for i in 0 1; do
  start "strata-$i" "${SP[$i]}" "\"$STRATA_BIN\" --bind 127.0.0.1 --port ${SP[$i]} --cluster-enabled yes \
    --cluster-direct-port ${SD[$i]} --cluster-port ${SA[$i]} --threads $THREADS --metrics-port 0 \
    --maxmemory $MAXMEM --maxmemory-policy allkeys-lru --max-disk $MAXDISK --durability $DURABILITY \
    --dir $WORK/strata-$i"
done
push 1 0-8191 8192-16383 0 1
load strata-a "${SD[0]}"
tier=$(redis-cli -p "${SP[0]}" info tier | tr -d '\r' | awk -F: '/^tier_disk_keys:/ { print $2 }')
used=$(redis-cli -p "${SP[0]}" info memory | tr -d '\r' | awk -F: '/^used_memory:/ { print $2 }')
evicted=$(redis-cli -p "${SP[0]}" info stats | tr -d '\r' | awk -F: '/^evicted_keys:/ { print $2 }')
echo "  strata-a: ${tier:-?} keys on disk of $(cat "$WORK/strata-a.count"), used_memory $(( ${used:-0} >> 20 )) MiB" \
  "(maxmemory $MAXMEM), evicted_keys ${evicted:-?}"
S_MOVING=$(keys_in "${SD[0]}" "$MOVE_FIRST" "$MOVE_LAST")

load_start "${SP[0]}"
MID=bench-$(date +%s)
REST=$(( MOVE_LAST + 1 ))-8191
(( MOVE_FIRST > 0 )) && REST="0-$(( MOVE_FIRST - 1 )),$REST"
t0=$(now)
reply=$(redis-cli -p "${SA[0]}" STRATA.MIGRATE START "$MID" "${SID[1]}" "127.0.0.1:${SA[1]}" "$MOVE_SLOTS")
[[ $reply == OK ]] || { echo "STRATA.MIGRATE START: $reply" >&2; exit 1; }
state=""
while :; do
  redis-cli -p "${SA[0]}" STRATA.MIGRATE STATUS "$MID" | paste - - >"$OUT/status.txt"
  state=$(awk '$1 == "state" { print $2 }' "$OUT/status.txt")
  [[ $state == committed || $state == failed || $state == aborted ]] && break
  [[ $(elapsed "$t0" "$(now)" | cut -d. -f1) -lt $MIGRATE_TIMEOUT ]] \
    || { echo "migration stuck in ${state:-?} after ${MIGRATE_TIMEOUT}s" >&2; cat "$OUT/status.txt" >&2; exit 1; }
  sleep 0.05
done
t_commit=$(now)
[[ $state == committed ]] || { echo "the migration ended $state:" >&2; cat "$OUT/status.txt" >&2; exit 1; }
push 2 "$REST" "$MOVE_SLOTS,8192-16383" 1
t_pushed_b=$(now)
push 2 "$REST" "$MOVE_SLOTS,8192-16383" 0   # the source last: it releases its copy
t_done=$(now)
S_PUSH_B=$(elapsed "$t_commit" "$t_pushed_b")
S_PUSH_A=$(elapsed "$t_pushed_b" "$t_done")
S_ERRORS=$(load_stop)
S_SECONDS=$(elapsed "$t0" "$t_done")
S_COMMIT=$(elapsed "$t0" "$t_commit")
field() { awk -v f="$1" '$1 == f { print $2 }' "$OUT/status.txt"; }
S_PAUSED=$(field paused_ms) S_BYTES=$(field bytes) S_KEYS=$(field keys)
S_ON_B=$(keys_in "${SD[1]}" "$MOVE_FIRST" "$MOVE_LAST")
for _ in $(seq 100); do  # the release is the source applying epoch 2
  S_ON_A=$(keys_in "${SD[0]}" "$MOVE_FIRST" "$MOVE_LAST"); [[ $S_ON_A == 0 ]] && break; sleep 0.1
done
echo "  strata: $S_MOVING keys in $MOVE_SLOTS moved in $S_SECONDS s (committed at $S_COMMIT s), paused ${S_PAUSED:-?} ms"
for i in 0 1; do kill -TERM "${PID[strata-$i]}"; wait "${PID[strata-$i]}" 2>/dev/null || true; unset "PID[strata-$i]"; done

# --- redis: two cluster nodes, the same slots and data
echo "redis: two cluster nodes"
declare -a RP=() RB=() RID=()
for i in 0 1; do RP[$i]=$(free_port) RB[$i]=$(free_port); done
for i in 0 1; do
  start "redis-$i" "${RP[$i]}" "redis-server --bind 127.0.0.1 --port ${RP[$i]} --cluster-enabled yes \
    --cluster-port ${RB[$i]} --cluster-config-file $WORK/redis-$i-nodes.conf --dir $WORK --save '' \
    --appendonly no --daemonize no"
  RID[$i]=$(redis-cli -p "${RP[$i]}" cluster myid)
done
redis-cli -p "${RP[0]}" cluster addslotsrange 0 8191 >/dev/null
redis-cli -p "${RP[1]}" cluster addslotsrange 8192 16383 >/dev/null
redis-cli -p "${RP[0]}" cluster meet 127.0.0.1 "${RP[1]}" "${RB[1]}" >/dev/null
for _ in $(seq 300); do
  ok=1
  for i in 0 1; do redis-cli -p "${RP[$i]}" cluster info | grep -q 'cluster_state:ok' || ok=0; done
  (( ok )) && break
  sleep 0.1
done
(( ok )) || { echo "redis: no cluster_state:ok" >&2; exit 1; }
load redis-a "${RP[0]}"
R_MOVING=$(keys_in "${RP[0]}" "$MOVE_FIRST" "$MOVE_LAST")
load_start "${RP[0]}" --cluster
t0=$(now)
# reshard moves the source's lowest slots first: MOVE_COUNT of them from 0 are MOVE_SLOTS
# when it starts at 0 (the default); otherwise the slot count matches, not the slots.
redis-cli --cluster reshard "127.0.0.1:${RP[0]}" --cluster-from "${RID[0]}" --cluster-to "${RID[1]}" \
  --cluster-slots "$MOVE_COUNT" --cluster-yes >"$OUT/logs/redis-reshard.log" 2>&1 \
  || { echo "redis-cli --cluster reshard failed; see $OUT/logs/redis-reshard.log" >&2; exit 1; }
t_done=$(now)
R_ERRORS=$(load_stop)
R_SECONDS=$(elapsed "$t0" "$t_done")
R_ON_B=$(keys_in "${RP[1]}" "$MOVE_FIRST" "$MOVE_LAST")
echo "  redis: $R_MOVING keys moved in $R_SECONDS s"

# ---------------------------------------------------------------- summary
{
  echo "=== slot migration: $MOVE_SLOTS ($MOVE_COUNT slots) of $SIZE_MB MB in ${VALUE_SIZE}-byte values, node A to B ==="
  echo "strata: $S_SECONDS s to the confirming epoch ($S_COMMIT s to the commit), paused writes ${S_PAUSED:-?} ms," \
       "$S_KEYS keys / $(( ${S_BYTES:-0} >> 20 )) MiB sent; data half on disk (maxmemory $MAXMEM)"
  echo "        confirming epoch: push to the target $S_PUSH_B s, to the source (its release) $S_PUSH_A s"
  echo "        keys in the moved slots: $S_MOVING before, on B $S_ON_B, left on A $S_ON_A"
  echo "redis:  $R_SECONDS s for redis-cli --cluster reshard (all in RAM); keys: $R_MOVING before, on B $R_ON_B"
  awk -v s="$S_SECONDS" -v r="$R_SECONDS" 'BEGIN { if (s > 0) printf "redis/strata time: %.2f (above 1: Strata faster)\n", r / s }'
  echo "background load ($LOAD_CLIENTS clients): error lines strata $S_ERRORS, redis $R_ERRORS"
  (( S_ON_B >= S_MOVING && S_ON_A == 0 )) || echo "WARNING: strata's keys did not all move (see above)"
  (( R_ON_B >= R_MOVING )) || echo "WARNING: redis's keys did not all move (see above)"
} | tee "$OUT/summary.txt"
echo "results: $OUT"
