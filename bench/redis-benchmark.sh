#!/usr/bin/env bash
# Compare strata-node against redis-server using redis-benchmark over Unix sockets.
# See bench/README.md or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/redis-benchmark.sh [options]

Builds strata-node (release), starts strata-node plus two redis-servers
(redis, redis2: the redis-vs-redis noise band) on Unix sockets in a temp dir,
runs redis-benchmark against them interleaved (strata, redis, redis2, ...)
for ROUNDS rounds and prints median ops/s, ratios, ops per server
core-second (server utime+stime from /proc/PID/stat around each invocation)
and how busy the client was (redis-benchmark's CPU over wall time: near 1.0
means the single-threaded client, not the server, set the pace).

Options (each also settable as an env var, flags win):
  -n, --requests N     requests per test                 (N, default 100000)
  -r, --rounds R       rounds per mode                   (ROUNDS, default 3)
  -t, --threads T      strata worker threads             (THREADS, default nproc)
  -m, --modes "M..."   any of: plain pipelined           (MODES, default "plain pipelined")
      --scaling        also run GET,SET (plain and pipelined) against strata
                       --threads 1 and --threads 2 --adaptive-threads no, and
                       print the scaling ratio (SCALING=1)
      --no-build       skip cargo build                  (NO_BUILD=1)
  -h, --help           this text

Other env vars:
  TESTS           redis-benchmark -t list (default: the seed set below)
  CLIENTS=50  DATASIZE=16  PIPELINE=16  CLIENT_THREADS=1   redis-benchmark -c/-d/-P/--threads
  BENCH_TIMEOUT   seconds before one redis-benchmark invocation is killed (default 900)
  ADAPTIVE=yes    strata --adaptive-threads for the main comparison
  STRATA_CMD      shell command that starts the "strata" server in the foreground;
                  $SOCK, $THREADS and $ADAPTIVE are set for it. Setting it skips the build.
                  Default: "$STRATA_BIN" --port 0 --unixsocket "$SOCK" --threads "$THREADS"
                           --adaptive-threads "$ADAPTIVE" --metrics-port 0 --maxmemory 0
                  e.g. to dry-run against a third redis:
                  STRATA_CMD='redis-server --port 0 --unixsocket "$SOCK" --save "" --appendonly no'
  REDIS_CMD       same for both redis servers (default: redis-server --port 0
                  --unixsocket "$SOCK" --save '' --appendonly no --daemonize no)
  RESULTS_DIR     where to write results (default bench/results/<timestamp>)

Output: raw CSVs (raw/), server logs (logs/), runs.tsv and summary.txt in RESULTS_DIR.
Each server is FLUSHALLed before every invocation.
EOF
}

# ---------------------------------------------------------------- options
N=${N:-100000}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
MODES=${MODES:-"plain pipelined"}
SCALING=${SCALING:-0}
NO_BUILD=${NO_BUILD:-0}
TESTS=${TESTS:-ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,lrange_100,lrange_300,lrange_500,lrange_600,mset}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-16}
PIPELINE=${PIPELINE:-16}
CLIENT_THREADS=${CLIENT_THREADS:-1}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
ADAPTIVE=${ADAPTIVE:-yes}

while [[ $# -gt 0 ]]; do
  case $1 in
    -n|--requests) N=$2; shift 2 ;;
    -r|--rounds)   ROUNDS=$2; shift 2 ;;
    -t|--threads)  THREADS=$2; shift 2 ;;
    -m|--modes)    MODES=$2; shift 2 ;;
    --scaling)     SCALING=1; shift ;;
    --no-build)    NO_BUILD=1; shift ;;
    -h|--help)     usage; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
for m in $MODES; do
  [[ $m == plain || $m == pipelined ]] || { echo "unknown mode: $m" >&2; exit 2; }
done

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
export STRATA_BIN=${STRATA_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/strata-node}
DEFAULT_STRATA_CMD='"$STRATA_BIN" --port 0 --unixsocket "$SOCK" --threads "$THREADS" --adaptive-threads "$ADAPTIVE" --metrics-port 0 --maxmemory 0'
REDIS_CMD=${REDIS_CMD:-'redis-server --port 0 --unixsocket "$SOCK" --save "" --appendonly no --daemonize no'}
OUT=${RESULTS_DIR:-$SCRIPT_DIR/results/$(date +%Y%m%d-%H%M%S)}
CLK_TCK=$(getconf CLK_TCK)

for tool in redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

# ---------------------------------------------------------------- cleanup
SOCKDIR=$(mktemp -d /tmp/strata-bench.XXXXXX)   # short path: sun_path is 108 bytes
declare -A PID=() SOCK=()
cleanup() {
  local name pid
  for name in "${!PID[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null || true; done
  for name in "${!PID[@]}"; do
    pid=${PID[$name]}
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$SOCKDIR"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# ---------------------------------------------------------------- helpers
# start NAME CMD THREADS [ADAPTIVE]: run CMD (exec'd, so $! is the server pid) on $SOCKDIR/NAME.sock
start() {
  local name=$1 cmd=$2 threads=$3 adaptive=${4:-$ADAPTIVE} sock=$SOCKDIR/$1.sock
  # setsid: keep Ctrl-C away from the servers; the EXIT trap owns their shutdown
  SOCK=$sock THREADS=$threads ADAPTIVE=$adaptive setsid bash -c "exec $cmd" >"$OUT/logs/$name.log" 2>&1 </dev/null &
  PID[$name]=$!
  SOCK[$name]=$sock
  for _ in $(seq 200); do
    [[ $(redis-cli -s "$sock" ping 2>/dev/null) == PONG ]] && { echo "  $name up (pid ${PID[$name]})"; return; }
    kill -0 "${PID[$name]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name did not answer PING (cmd: $cmd); log tail:" >&2; tail -n 20 "$OUT/logs/$name.log" >&2; exit 1
}

cpu_ticks() {  # utime+stime (all threads) of pid; parse after the ")" of comm
  local stat rest f
  stat=$(<"/proc/$1/stat"); rest=${stat##*) }
  read -ra f <<<"$rest"            # f[0] is field 3, so fields 14/15 are f[11]/f[12]
  echo $(( f[11] + f[12] ))
}

# bench MODE NAME ROUND TESTS EXTRA_ARGS...: one redis-benchmark invocation, logged to runs.tsv
bench() {
  local mode=$1 name=$2 round=$3 tests=$4; shift 4
  local sock=${SOCK[$name]} pid=${PID[$name]} csv="raw/$mode-$name-r$round.csv"
  redis-cli -s "$sock" flushall >/dev/null
  local t0 c0 c1 t1 rc=0 times_file=$OUT/${csv%.csv}.times client_cpu
  c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
  # In a subshell, so `times` reports the client's CPU alone (its children's).
  (
    rc=0
    timeout --foreground "$BENCH_TIMEOUT" redis-benchmark -s "$sock" -t "$tests" --csv -d "$DATASIZE" -c "$CLIENTS" \
      -n "$N" --threads "$CLIENT_THREADS" "$@" >"$OUT/$csv" 2>"$OUT/${csv%.csv}.err" || rc=$?
    times >"$times_file"
    exit "$rc"
  ) || rc=$?
  t1=$(date +%s.%N)
  client_cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] } printf "%.3f", s }' "$times_file")
  rm -f "$times_file"
  (( rc == 130 || rc == 143 )) && { echo "interrupted" >&2; exit 130; }   # Ctrl-C reached the client
  kill -0 "$pid" 2>/dev/null || { echo "$name (pid $pid) died; see $OUT/logs/$name.log" >&2; exit 1; }
  c1=$(cpu_ticks "$pid")
  [[ -s $OUT/${csv%.csv}.err ]] || rm -f "$OUT/${csv%.csv}.err"
  [[ $rc -eq 124 ]] && echo "  WARNING: redis-benchmark timed out after ${BENCH_TIMEOUT}s" >&2
  [[ $rc -eq 0 ]] || echo "  WARNING: redis-benchmark exit $rc on $name ($mode r$round); see $OUT/${csv%.csv}.err" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$name" "$round" "$csv" "$((c1 - c0))" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}')" "$rc" "$client_cpu" >>"$OUT/runs.tsv"
  printf '  %-9s %-9s r%s  %6.2fs server cpu  %6.2fs client cpu  rc=%s\n' "$mode" "$name" "$round" \
    "$(awk -v t=$((c1 - c0)) -v h="$CLK_TCK" 'BEGIN{print t/h}')" "$client_cpu" "$rc"
}

# ---------------------------------------------------------------- run
mkdir -p "$OUT/raw" "$OUT/logs"
printf 'mode\tserver\tround\tcsv\tcpu_ticks\twall_s\trc\tclient_cpu_s\n' >"$OUT/runs.tsv"
{
  echo "date: $(date -Is)  host: $(uname -n)  nproc: $(nproc)  $(redis-server --version | cut -d' ' -f1-3)"
  echo "N=$N ROUNDS=$ROUNDS THREADS=$THREADS ADAPTIVE=$ADAPTIVE MODES='$MODES' SCALING=$SCALING CLIENTS=$CLIENTS"
  echo "DATASIZE=$DATASIZE PIPELINE=$PIPELINE CLIENT_THREADS=$CLIENT_THREADS CLK_TCK=$CLK_TCK"
  echo "STRATA_CMD=${STRATA_CMD:-$DEFAULT_STRATA_CMD}"
  echo "git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo none)"
} >"$OUT/params.txt"

if [[ -z ${STRATA_CMD:-} && $NO_BUILD != 1 ]]; then
  echo "building strata-node (release)..."
  (cd "$REPO" && cargo build --release -p strata-node)
fi
if [[ -z ${STRATA_CMD:-} && ! -x $STRATA_BIN ]]; then
  echo "missing $STRATA_BIN" >&2; exit 1
fi
STRATA_CMD=${STRATA_CMD:-$DEFAULT_STRATA_CMD}

echo "starting servers in $SOCKDIR"
start strata "$STRATA_CMD" "$THREADS"
start redis "$REDIS_CMD" 1
start redis2 "$REDIS_CMD" 1

for mode in $MODES; do
  extra=(); [[ $mode == pipelined ]] && extra=(-P "$PIPELINE")
  for round in $(seq "$ROUNDS"); do
    for name in strata redis redis2; do
      bench "$mode" "$name" "$round" "$TESTS" "${extra[@]}"
    done
  done
done

if [[ $SCALING == 1 ]]; then
  # Both workers always active in t2: this measures spreading over 2 cores.
  start strata-t1 "$STRATA_CMD" 1 no
  start strata-t2 "$STRATA_CMD" 2 no
  for round in $(seq "$ROUNDS"); do
    for name in strata-t1 strata-t2; do
      bench scaling-plain "$name" "$round" get,set
      bench scaling "$name" "$round" get,set -P "$PIPELINE"
    done
  done
fi

# ---------------------------------------------------------------- summary
python3 - "$OUT" "$N" "$CLK_TCK" <<'PY' | tee "$OUT/summary.txt"
import csv, sys
from collections import defaultdict
from statistics import median

out, n, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rps = defaultdict(list)   # (mode, server, test) -> [ops/s per round]
eff = defaultdict(list)   # (mode, server) -> [requests / server cpu-second per invocation]
busy = defaultdict(list)  # (mode, server) -> [client cpu-seconds / wall-second per invocation]
tests = defaultdict(list) # mode -> test names in benchmark order
failed = []
coarse = False            # any invocation under 100 clock ticks of server CPU?

for run in csv.DictReader(open(f"{out}/runs.tsv"), delimiter="\t"):
    mode, srv = run["mode"], run["server"]
    rows = [r for r in csv.reader(open(f"{out}/{run['csv']}"))
            if len(r) >= 2 and r[0] != "test" and r[1].replace(".", "", 1).isdigit()]
    for test, ops, *_ in rows:
        rps[mode, srv, test].append(float(ops))
        if test not in tests[mode]:
            tests[mode].append(test)
    ticks = int(run["cpu_ticks"])
    if run["rc"] != "0":  # partial run: its CPU figure would be misleading, skip it
        failed.append(f"{srv} {mode} round {run['round']} (rc={run['rc']})")
    elif rows and ticks > 0:
        eff[mode, srv].append(n * len(rows) / (ticks / hz))
        if run.get("client_cpu_s") and float(run["wall_s"]) > 0:
            busy[mode, srv].append(float(run["client_cpu_s"]) / float(run["wall_s"]))
    if ticks < 100:
        coarse = True

def med(mode, srv, test):
    v = rps.get((mode, srv, test))
    return median(v) if v else None

def ratio(a, b):
    return f"{a / b:6.2f}" if a and b else "     -"

def num(x):
    return f"{x:12,.0f}" if x else "           -"

for mode in [m for m in ("plain", "pipelined") if m in tests]:
    print(f"\n=== {mode}: median ops/s over rounds ===")
    print(f"{'test':36} {'strata':>12} {'redis':>12} {'redis2':>12} {'st/redis':>8} {'r2/redis':>8}")
    for t in tests[mode]:
        s, r, r2 = (med(mode, x, t) for x in ("strata", "redis", "redis2"))
        print(f"{t[:36]:36} {num(s)} {num(r)} {num(r2)} {ratio(s, r):>8} {ratio(r2, r):>8}")
    e = {x: median(eff[mode, x]) if eff[mode, x] else None for x in ("strata", "redis", "redis2")}
    print(f"ops per server core-second (per invocation, median): strata {num(e['strata']).strip()}"
          f"  redis {num(e['redis']).strip()}  redis2 {num(e['redis2']).strip()}")
    print(f"  strata/redis {ratio(e['strata'], e['redis']).strip()}   redis2/redis {ratio(e['redis2'], e['redis']).strip()}")
    b = {x: median(busy[mode, x]) if busy[mode, x] else None for x in ("strata", "redis", "redis2")}
    if all(b.values()):
        print(f"client busy (redis-benchmark CPU / wall): strata {b['strata']:.2f}  redis {b['redis']:.2f}"
              f"  redis2 {b['redis2']:.2f}"
              + ("   <- near 1.0: the client sets the pace" if max(b.values()) > 0.9 else ""))
    for srv in ("strata", "redis"):
        p = med(mode, srv, "PING_MBULK")
        print(f"per-request floor ({srv}): GET/PING_MBULK {ratio(med(mode, srv, 'GET'), p).strip()}"
              f"   SET/PING_MBULK {ratio(med(mode, srv, 'SET'), p).strip()}")

for smode, label in (("scaling-plain", "unpipelined"), ("scaling", "pipelined")):
    if smode not in tests:
        continue
    print(f"\n=== scaling: strata --threads 1 vs --threads 2 --adaptive-threads no, {label} ===")
    print(f"{'test':10} {'threads=1':>12} {'threads=2':>12} {'t2/t1':>8}")
    for t in tests[smode]:
        a, b = med(smode, "strata-t1", t), med(smode, "strata-t2", t)
        print(f"{t:10} {num(a)} {num(b)} {ratio(b, a):>8}")
    e1, e2 = (median(eff[smode, x]) if eff[smode, x] else None for x in ("strata-t1", "strata-t2"))
    print(f"ops per server core-second: t1 {num(e1).strip()}  t2 {num(e2).strip()}  t2/t1 {ratio(e2, e1).strip()}")
    c1, c2 = (median(busy[smode, x]) if busy[smode, x] else 0 for x in ("strata-t1", "strata-t2"))
    print(f"client busy: t1 {c1:.2f}  t2 {c2:.2f}")

if coarse:
    print(f"\nNOTE: some invocations used < 100 ticks of server CPU (CLK_TCK={hz});"
          " core-second figures are coarse. Raise N.")
if failed:
    print("\nWARNING: incomplete invocations (missing tests show as '-'):", *failed, sep="\n  ")
PY
echo "results: $OUT"
