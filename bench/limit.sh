#!/usr/bin/env bash
# SET and GET throughput at the memory limit, strata-node vs redis-server, same run.
# See bench/README.md ("Writes at the memory limit") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/limit.sh [--no-build] [-h]

For each eviction policy, starts strata-node and redis-server (Unix sockets,
no TCP, no persistence) with --maxmemory $MAXMEMORY, measures the SET and
GET rates on the empty server, fills it to the limit, measures them again
and prints, for each server, the ratios at-limit / empty of the rate and of
the server's CPU time per request (empty / at-limit: the client's share of
the machine left out). Each figure is the median of REPEAT measurements.
By default no key has a TTL (TTL=yes: every SET has one), so under
noeviction and volatile-* the writes at the limit are OOM errors: the
figure is then the rate of refusals (a pipelined client that goes on
through errors), and a line after the table compares, under noeviction,
the OOM rate with that of another error reply (GET with SET's arguments).
GETs are of random keys (mostly missing), as redis-benchmark sends them.
sieve is strata only. Goal: every ratio >= 0.8.

Env vars:
  N=100000            requests per measurement (redis-benchmark -n)
  REPEAT=3            measurements per phase (empty: FLUSHALL before each)
  MAXMEMORY=64mb      the limit
  POLICIES            default: noeviction allkeys-lru allkeys-lfu allkeys-random volatile-lru
                      volatile-lfu volatile-random volatile-ttl sieve
  TTL=no              yes: every SET has EX 100000 (volatile-* then evict)
  CLIENTS=50  DATASIZE=32  KEYSPACE=10000000   redis-benchmark -c, value size, -r
  THREADS=nproc       strata worker threads
  STRATA_ARGS         more strata-node options (e.g. "--adaptive-threads no")
  STRATA_BIN          strata-node binary (default: the release build, built unless --no-build)
  RESULTS_DIR         default bench/results/limit-<timestamp>
EOF
}

NO_BUILD=${NO_BUILD:-0}
for a in "$@"; do
  case "$a" in
    --no-build) NO_BUILD=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option $a" >&2; usage >&2; exit 2 ;;
  esac
done

N=${N:-100000}
REPEAT=${REPEAT:-3}
MAXMEMORY=${MAXMEMORY:-64mb}
POLICIES=${POLICIES:-"noeviction allkeys-lru allkeys-lfu allkeys-random volatile-lru volatile-lfu volatile-random volatile-ttl sieve"}
TTL=${TTL:-no}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-32}
KEYSPACE=${KEYSPACE:-10000000}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/limit-$(date +%Y%m%d-%H%M%S)}

for tool in redis-server redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
if [[ -z ${STRATA_BIN:-} ]]; then
  if [[ $NO_BUILD != 1 ]]; then
    (cd "$ROOT" && cargo build --release -p strata-node >&2)
  fi
  STRATA_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/strata-node
fi
[[ -x $STRATA_BIN ]] || { echo "no strata-node at $STRATA_BIN" >&2; exit 1; }

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d)
PID=""
stop() {
  if [[ -n $PID ]]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
}
trap 'stop; rm -rf "$TMP"' EXIT

# start SERVER POLICY: starts one server on $TMP/<server>.sock in the background.
start() {
  local server=$1 policy=$2 sock=$TMP/$1.sock log=$RESULTS_DIR/logs/$1-$2.log
  rm -f "$sock"
  if [[ $server == strata ]]; then
    # shellcheck disable=SC2086 # STRATA_ARGS is split into words on purpose
    "$STRATA_BIN" --port 0 --unixsocket "$sock" --threads "$THREADS" --metrics-port 0 \
      --maxmemory "$MAXMEMORY" --maxmemory-policy "$policy" ${STRATA_ARGS:-} >"$log" 2>&1 &
  else
    redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --daemonize no \
      --maxmemory "$MAXMEMORY" --maxmemory-policy "$policy" >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do
    redis-cli -s "$sock" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$server did not start; see $log" >&2
  exit 1
}

field() { redis-cli -s "$1" INFO all | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'; }

VALUE=$(head -c "$DATASIZE" /dev/zero | tr '\0' x)

# set_cmd POLICY: the SET each request sends (TTL=yes: with a TTL, so volatile-* may evict).
set_cmd() {
  if [[ $TTL == yes ]]; then
    echo "SET key:__rand_int__ $VALUE EX 100000"
  else
    echo "SET key:__rand_int__ $VALUE"
  fi
}

# errs_rate SOCK POLICY N [arity]: SETs per second from a small pipelined
# client that, unlike redis-benchmark (which stops at the first error reply),
# keeps going through OOM errors. Every reply to SET is one line (+OK or
# -ERR...), so it counts lines. 2 processes, 32 requests per pipeline.
# `arity`: GET with the same arguments, an error reply that is not OOM
# (wrong number of arguments) to a request of the same size.
errs_rate() {
  python3 - "$1" "$3" "$DATASIZE" "$KEYSPACE" "$(set_cmd "$2" | grep -c ' EX ' || true)" "${4:-}" <<'PY'
import multiprocessing as mp, random, socket, sys, time
sock, n, size, keyspace, ttl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
arity = sys.argv[6] == "arity"
PROCS, PIPE = 2, 32
def cmd(key):
    args = [b"GET" if arity else b"SET", key, b"x" * size] + ([b"EX", b"100000"] if ttl else [])
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
def worker(count, ready, go, out):
    rnd = random.Random()
    batches = [b"".join(cmd(b"key:%012d" % rnd.randrange(keyspace)) for _ in range(PIPE)) for _ in range(count // PIPE)]
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
    ready.release(); go.wait()
    for b in batches:
        s.sendall(b)
        seen = 0
        while seen < PIPE:
            seen += s.recv(1 << 16).count(b"\r\n")
    out.put(time.monotonic())
if __name__ == "__main__":
    ready, go, out = mp.Semaphore(0), mp.Event(), mp.Queue()
    ps = [mp.Process(target=worker, args=(n // PROCS, ready, go, out)) for _ in range(PROCS)]
    for p in ps: p.start()
    for _ in ps: ready.acquire()
    t0 = time.monotonic(); go.set()
    end = max(out.get() for _ in ps)
    for p in ps: p.join()
    print(int((n // PROCS // PIPE * PIPE * PROCS) / (end - t0)))
PY
}

# rate SOCK POLICY N PIPELINE [get]: requests per second of N SETs (get: GETs).
rate() {
  local csv cmd
  cmd=$(set_cmd "$2")
  [[ ${5:-} == get ]] && cmd="GET key:__rand_int__"
  # shellcheck disable=SC2046,SC2086 # the command is split into words on purpose
  csv=$(redis-benchmark -s "$1" -n "$3" -c "$CLIENTS" -P "$4" -r "$KEYSPACE" --threads 1 --csv \
    $cmd 2>/dev/null | tail -1) || return 1
  echo "$csv" | awk -F, '{ gsub(/"/, "", $2); printf "%d", $2 }'
}

# cpu_ns: CPU time of the server process so far (all its threads), in ns
# (the scheduler's count: /proc/PID/stat's clock ticks are 10 ms).
cpu_ns() { cat "/proc/$PID"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# measure MEASURE SOCK POLICY N [flush] [arity]: REPEAT runs of MEASURE (rate,
# get or errs_rate), FLUSHALL before each with `flush`; prints the median rate
# and the median server CPU microseconds per request.
measure() {
  local fn=$1 sock=$2 policy=$3 n=$4 flush=${5:-} extra=${6:-} rates=() cpus=() t0 r
  for _ in $(seq "$REPEAT"); do
    [[ $flush == flush ]] && redis-cli -s "$sock" FLUSHALL >/dev/null
    t0=$(cpu_ns)
    case $fn in
      rate) r=$(rate "$sock" "$policy" "$n" 1) ;;
      get) r=$(rate "$sock" "$policy" "$n" 1 get) ;;
      *) r=$(errs_rate "$sock" "$policy" "$n" "$extra") ;;
    esac
    rates+=("$r")
    cpus+=("$(awk -v d=$(( $(cpu_ns) - t0 )) -v n="$n" 'BEGIN { printf "%.3f", d / 1000 / n }')")
  done
  echo "$(printf '%s\n' "${rates[@]}" | median) $(printf '%s\n' "${cpus[@]}" | median)"
}

# fill SOCK POLICY: writes until the server is at its limit: it evicts, or it
# refuses a write (redis-benchmark stops at the first error reply).
fill() {
  local pipeline=32
  for _ in $(seq 30); do
    rate "$1" "$2" 500000 "$pipeline" >/dev/null || return 0
    (( $(field "$1" evicted_keys) > 0 )) && return 0
    # Near the limit, pipelined query buffers alone would push it over.
    (( $(field "$1" used_memory) * 100 >= $(field "$1" maxmemory) * 90 )) && pipeline=1
  done
  echo "could not fill $1 to its limit (used_memory $(field "$1" used_memory))" >&2
  exit 1
}

summary=$RESULTS_DIR/summary.txt
{
  echo "bench/limit.sh  N=$N REPEAT=$REPEAT MAXMEMORY=$MAXMEMORY TTL=$TTL -d $DATASIZE -r $KEYSPACE -c $CLIENTS THREADS=$THREADS${STRATA_ARGS:+ STRATA_ARGS=\"$STRATA_ARGS\"} $(date -u +%FT%TZ)"
  echo "median of $REPEAT; rate = requests/s at limit / empty; cpu = server CPU per request, empty / at limit"
  echo "SET at the limit: 'ok' accepted (evicts), 'oom' refused; goal: every ratio >= 0.8"
  printf '%-15s | %-42s | %-42s\n' "" "strata" "redis"
  printf '%-15s | %3s %8s %8s %8s %8s | %3s %8s %8s %8s %8s\n' policy SET "SET rate" "SET cpu" "GET rate" "GET cpu" SET "SET rate" "SET cpu" "GET rate" "GET cpu"
} | tee "$summary"
errors=()
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
for policy in $POLICIES; do
  line=$(printf '%-15s' "$policy")
  for server in strata redis; do
    if [[ $server == redis && $policy == sieve ]]; then
      line+=$(printf ' | %3s %8s %8s %8s %8s' - - - - -)
      continue
    fi
    start "$server" "$policy"
    sock=$TMP/$server.sock
    # Writes refused at the limit (noeviction; volatile-* with no TTL) stop
    # redis-benchmark: those come from the pipelined client instead, empty
    # too. It is faster: more requests, so that each measurement takes long
    # enough to time (empty: twice, which stays below the limit).
    fn=rate n=$N n_full=$N outcome=ok
    if [[ $policy == noeviction || ($policy == volatile-* && $TTL != yes) ]]; then
      fn=errs_rate n=$((2 * N)) n_full=$((10 * N)) outcome=oom
    fi
    read -r empty empty_cpu < <(measure "$fn" "$sock" "$policy" "$n" flush)
    read -r get_empty get_empty_cpu < <(measure get "$sock" "$policy" "$N" flush)
    redis-cli -s "$sock" FLUSHALL >/dev/null
    fill "$sock" "$policy"
    read -r full full_cpu < <(measure "$fn" "$sock" "$policy" "$n_full")
    read -r get_full get_full_cpu < <(measure get "$sock" "$policy" "$N")
    if [[ $policy == noeviction ]]; then
      read -r other other_cpu < <(measure errs_rate "$sock" "$policy" "$n_full" "" arity)
      errors+=("$(awk -v s="$server" -v o="$full" -v e="$other" -v oc="$full_cpu" -v ec="$other_cpu" \
        'BEGIN { printf "%-6s OOM %d/s, other error %d/s: %.2f; server CPU per reply %.2f vs %.2f us", s, o, e, (e > 0 ? o / e : 0), oc, ec }')")
    fi
    used=$(field "$sock" used_memory)
    evicted=$(field "$sock" evicted_keys)
    searches=$(field "$sock" strata_eviction_searches)
    echo "$server $policy: SET empty $empty/s ($empty_cpu us CPU), at limit $full/s ($full_cpu us CPU, $outcome);" \
      "GET empty $get_empty/s ($get_empty_cpu us CPU), at limit $get_full/s ($get_full_cpu us CPU);" \
      "used_memory $used, evicted_keys $evicted${searches:+, strata_eviction_searches $searches}" >>"$RESULTS_DIR/details.txt"
    stop
    line+=$(printf ' | %3s %8s %8s %8s %8s' "$outcome" "$(ratio "$full" "$empty")" "$(ratio "$empty_cpu" "$full_cpu")" \
      "$(ratio "$get_full" "$get_empty")" "$(ratio "$get_empty_cpu" "$get_full_cpu")")
  done
  echo "$line" | tee -a "$summary"
done
if ((${#errors[@]})); then
  echo "noeviction at the limit: SET's OOM error against GET's arity error, same arguments and client:" | tee -a "$summary"
  printf '  %s\n' "${errors[@]}" | tee -a "$summary"
fi
echo "results: $RESULTS_DIR"
