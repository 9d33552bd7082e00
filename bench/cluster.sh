#!/usr/bin/env bash
# Cluster mode: three Strata nodes vs a three-node Redis Cluster, with redis-benchmark.
# See bench/README.md ("Cluster mode") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/cluster.sh [options]

Builds strata-node (release) and starts, on 127.0.0.1 (TCP: cluster clients need it):
  strata   three strata-node --cluster-enabled yes, given the 16384 slots (0-5460,
           5461-10922, 10923-16383) with STRATA.TOPOLOGY SET on their admin ports
  redis    three redis-server --cluster-enabled yes joined by redis-cli --cluster create
  redis2   a second, identical Redis Cluster: the redis-vs-redis noise band
  and, for the single-node reference (SINGLE=1): one strata-node and two redis-servers
  without cluster mode (strata-1, redis-1, redis2-1).
Then, alternating the servers in every round, for ROUNDS rounds (medians reported):
  cluster   redis-benchmark --cluster -t $TESTS against each cluster: ops/s, and ops per
            server CPU-second (utime+stime of the three servers from /proc/PID/stat, summed,
            before/after each invocation)
  single    redis-benchmark -t $TESTS against each single server (the ratio a cluster
            should keep: no cluster tax)
  forwarding (FORWARD=1, strata only): a plain client (redis-benchmark without --cluster)
            on node 0's plain port for keys node 1 owns (every request forwarded) vs the
            same commands sent to node 1 itself (direct); and -t $TESTS with random keys
            through node 0's plain port (two thirds forwarded) vs the cluster client.
            ops/s, p50 and p99 latency, ops per CPU-second of the three nodes.

Options (each also settable as an env var, flags win):
  -n, --requests N     requests per test                       (N, default 100000)
  -r, --rounds R       rounds                                  (ROUNDS, default 3)
  -t, --threads T      strata worker threads per node          (THREADS, default nproc)
      --no-single      skip the single-node reference          (SINGLE=0)
      --no-forward     skip the forwarding runs                (FORWARD=0)
      --no-build       skip cargo build                        (NO_BUILD=1)
  -h, --help           this text

Other env vars:
  TESTS=set,get  CLIENTS=50  DATASIZE=16  KEYSPACE=100000 (-r)  PIPELINE=1 (-P)  ADAPTIVE=yes
  BENCH_TIMEOUT   seconds before one redis-benchmark invocation is killed (default 600)
  STRATA_BIN      the node binary (default $CARGO_TARGET_DIR or target, release/strata-node)
  RESULTS_DIR     where to write results (default bench/results/cluster-<timestamp>)

Output: summary.txt, params.txt, runs.tsv, raw/*.csv (redis-benchmark --csv as is),
logs/*.log in RESULTS_DIR. Every server is FLUSHALLed before every invocation but the
forwarding GETs (they read what the SETs before them wrote).
EOF
}

# ---------------------------------------------------------------- options
N=${N:-100000}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
ADAPTIVE=${ADAPTIVE:-yes}
SINGLE=${SINGLE:-1}
FORWARD=${FORWARD:-1}
NO_BUILD=${NO_BUILD:-0}
TESTS=${TESTS:-set,get}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-16}
KEYSPACE=${KEYSPACE:-100000}
PIPELINE=${PIPELINE:-1}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}

while [[ $# -gt 0 ]]; do
  case $1 in
    -n|--requests) N=$2; shift 2 ;;
    -r|--rounds)   ROUNDS=$2; shift 2 ;;
    -t|--threads)  THREADS=$2; shift 2 ;;
    --no-single)   SINGLE=0; shift ;;
    --no-forward)  FORWARD=0; shift ;;
    --no-build)    NO_BUILD=1; shift ;;
    -h|--help)     usage; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# cpu_ticks (and the other helpers the benchmarks share).
source "$SCRIPT_DIR/lib.sh"
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
STRATA_BIN=${STRATA_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release/strata-node}
OUT=${RESULTS_DIR:-$SCRIPT_DIR/results/cluster-$(date +%Y%m%d-%H%M%S)}
CLK_TCK=$(getconf CLK_TCK)

for tool in redis-server redis-cli redis-benchmark python3 sha1sum; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

# ---------------------------------------------------------------- cleanup
WORK=$(mktemp -d /tmp/strata-cluster-bench.XXXXXX)
declare -A PID=() PORT=()      # per server name: pid, the port clients use
declare -A GROUP=()            # group name -> space-separated server names
cleanup() {
  stop_servers
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# ---------------------------------------------------------------- helpers
# N distinct free TCP ports on 127.0.0.1, one per line.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in socks))
PY
}

# start NAME PORT CMD: run CMD (exec'd, so $! is the server pid); wait for PING on PORT.
start() {
  local name=$1 port=$2 cmd=$3
  # setsid: keep Ctrl-C away from the servers; the EXIT trap owns their shutdown
  setsid bash -c "exec $cmd" >"$OUT/logs/$name.log" 2>&1 </dev/null &
  PID[$name]=$!
  PORT[$name]=$port
  for _ in $(seq 200); do
    [[ $(redis-cli -p "$port" ping 2>/dev/null) == PONG ]] && { echo "  $name up on $port (pid ${PID[$name]})"; return; }
    kill -0 "${PID[$name]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "$name did not answer PING (cmd: $cmd); log tail:" >&2; tail -n 20 "$OUT/logs/$name.log" >&2; exit 1
}

group_ticks() {  # sum of cpu_ticks over the servers of group $1
  local sum=0 name
  for name in ${GROUP[$1]}; do sum=$(( sum + $(cpu_ticks "${PID[$name]}") )); done
  echo "$sum"
}

SLOT_RANGES=(0-5460 5461-10922 10923-16383)

# A three-node Redis Cluster: redis_cluster GROUP
redis_cluster() {
  local group=$1 i name port bus addrs=() ports
  mapfile -t ports < <(free_ports 6)
  for i in 0 1 2; do
    name=$group-n$i port=${ports[$i]} bus=${ports[$((i + 3))]}
    start "$name" "$port" "redis-server --bind 127.0.0.1 --port $port --cluster-enabled yes --cluster-port $bus \
      --cluster-config-file $WORK/$name-nodes.conf --dir $WORK --save '' --appendonly no --daemonize no"
    addrs+=("127.0.0.1:$port")
    GROUP[$group]+="$name "
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$OUT/logs/$group-create.log" 2>&1 \
    || { echo "redis-cli --cluster create failed for $group; see $OUT/logs/$group-create.log" >&2; exit 1; }
  for _ in $(seq 300); do   # gossip settles: every node sees cluster_state:ok
    local ok=1
    for name in ${GROUP[$group]}; do
      redis-cli -p "${PORT[$name]}" cluster info | grep -q 'cluster_state:ok' || ok=0
    done
    ((ok)) && { echo "  $group: cluster_state:ok"; return; }
    sleep 0.1
  done
  echo "$group did not reach cluster_state:ok" >&2; exit 1
}

# Three Strata nodes in cluster mode with the topology pushed (epoch 1). Each has its own
# --dir in $WORK: the node keeps its topology there (the default, ./data, would be shared
# with other runs and refuse a new epoch 1).
# The node's plain port is STRATA_PLAIN[i]; PORT[strata-n$i] is its direct port.
declare -a STRATA_PLAIN=() STRATA_DIRECT=() STRATA_ADMIN=() STRATA_ID=()
strata_cluster() {
  local i name ports entries=()
  mapfile -t ports < <(free_ports 9)
  for i in 0 1 2; do
    STRATA_PLAIN[$i]=${ports[$i]} STRATA_DIRECT[$i]=${ports[$((i + 3))]} STRATA_ADMIN[$i]=${ports[$((i + 6))]}
    # The contract's ids for a local cluster: sha1("local/<baseport>/<index>").
    STRATA_ID[$i]=$(printf 'local/%s/%s' "${STRATA_PLAIN[0]}" "$i" | sha1sum | cut -c1-40)
    entries+=("${STRATA_ID[$i]} 127.0.0.1 - ${STRATA_DIRECT[$i]} ${STRATA_PLAIN[$i]} ${SLOT_RANGES[$i]} ${STRATA_ADMIN[$i]}")
  done
  for i in 0 1 2; do
    name=strata-n$i
    start "$name" "${STRATA_PLAIN[$i]}" "\"$STRATA_BIN\" --bind 127.0.0.1 --port ${STRATA_PLAIN[$i]} \
      --cluster-enabled yes --cluster-direct-port ${STRATA_DIRECT[$i]} --cluster-port ${STRATA_ADMIN[$i]} \
      --threads $THREADS --adaptive-threads $ADAPTIVE --metrics-port 0 --maxmemory 0 --dir $WORK/$name"
    PORT[$name]=${STRATA_DIRECT[$i]}
    GROUP[strata]+="$name "
  done
  for i in 0 1 2; do
    local reply
    reply=$(redis-cli -p "${STRATA_ADMIN[$i]}" STRATA.TOPOLOGY SET 1 "${STRATA_ID[$i]}" "${entries[@]}")
    [[ $reply == OK ]] || { echo "STRATA.TOPOLOGY SET on strata-n$i: $reply" >&2; exit 1; }
  done
  redis-cli -p "${STRATA_DIRECT[0]}" cluster info | grep -q 'cluster_state:ok' \
    || { echo "strata: cluster_state is not ok after the push" >&2; exit 1; }
  echo "  strata: topology epoch 1 pushed, cluster_state:ok"
}

# bench MODE GROUP ROUND LABEL ARGS...: one redis-benchmark invocation (ARGS after the
# common ones), logged to runs.tsv; CPU is summed over GROUP's servers.
bench() {
  local mode=$1 group=$2 round=$3; shift 3
  local csv="raw/$mode-$group-r$round.csv" name
  if [[ ${NOFLUSH:-0} != 1 ]]; then
    for name in ${GROUP[$group]}; do redis-cli -p "${PORT[$name]}" flushall >/dev/null; done
  fi
  local t0 c0 c1 t1 rc=0 times_file=$OUT/${csv%.csv}.times client_cpu
  c0=$(group_ticks "$group"); t0=$(date +%s.%N)
  # In a subshell, so `times` reports the client's CPU alone (its children's).
  (
    rc=0
    timeout --foreground "$BENCH_TIMEOUT" redis-benchmark -h 127.0.0.1 --csv -d "$DATASIZE" -c "$CLIENTS" -n "$N" \
      -r "$KEYSPACE" -P "$PIPELINE" "$@" >"$OUT/$csv" 2>"$OUT/${csv%.csv}.err" || rc=$?
    times >"$times_file"
    exit "$rc"
  ) || rc=$?
  t1=$(date +%s.%N)
  client_cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] } printf "%.3f", s }' "$times_file")
  rm -f "$times_file"
  (( rc == 130 || rc == 143 )) && { echo "interrupted" >&2; exit 130; }
  for name in ${GROUP[$group]}; do
    kill -0 "${PID[$name]}" 2>/dev/null || { echo "$name died; see $OUT/logs/$name.log" >&2; exit 1; }
  done
  c1=$(group_ticks "$group")
  # redis-benchmark reports server errors on stderr ("Error from server: ..."); a run with any is marked.
  local errors=0
  if [[ -s $OUT/${csv%.csv}.err ]]; then
    errors=$(grep -ci 'error' "$OUT/${csv%.csv}.err" || true)
  else
    rm -f "$OUT/${csv%.csv}.err"
  fi
  [[ $rc -eq 124 ]] && echo "  WARNING: redis-benchmark timed out after ${BENCH_TIMEOUT}s" >&2
  [[ $rc -eq 0 && $errors -eq 0 ]] || echo "  WARNING: redis-benchmark exit $rc, $errors error lines on $group ($mode r$round); see $OUT/${csv%.csv}.err" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$group" "$round" "$csv" "$((c1 - c0))" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b - a}')" "$rc" "$client_cpu" "$errors" >>"$OUT/runs.tsv"
  printf '  %-12s %-9s r%s  %6.2fs server cpu  %6.2fs client cpu  rc=%s\n' "$mode" "$group" "$round" \
    "$(awk -v t=$((c1 - c0)) -v h="$CLK_TCK" 'BEGIN{print t/h}')" "$client_cpu" "$rc"
}

# ---------------------------------------------------------------- run
mkdir -p "$OUT/raw" "$OUT/logs"
printf 'mode\tgroup\tround\tcsv\tcpu_ticks\twall_s\trc\tclient_cpu_s\terrors\n' >"$OUT/runs.tsv"

if [[ $NO_BUILD != 1 ]]; then
  echo "building strata-node (release)..."
  (cd "$REPO" && cargo build --release -p strata-node)
fi
[[ -x $STRATA_BIN ]] || { echo "missing $STRATA_BIN (build without --no-build)" >&2; exit 1; }

{
  echo "date: $(date -Is)  host: $(uname -n)  nproc: $(nproc)  $(redis-server --version | cut -d' ' -f1-3)"
  echo "N=$N ROUNDS=$ROUNDS THREADS=$THREADS ADAPTIVE=$ADAPTIVE TESTS=$TESTS CLIENTS=$CLIENTS DATASIZE=$DATASIZE"
  echo "KEYSPACE=$KEYSPACE PIPELINE=$PIPELINE SINGLE=$SINGLE FORWARD=$FORWARD CLK_TCK=$CLK_TCK"
  echo "STRATA_BIN=$STRATA_BIN"
  echo "git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo none)"
} >"$OUT/params.txt"

echo "starting servers"
strata_cluster
redis_cluster redis
redis_cluster redis2
if [[ $SINGLE == 1 ]]; then
  mapfile -t sp < <(free_ports 3)
  start strata-1 "${sp[0]}" "\"$STRATA_BIN\" --bind 127.0.0.1 --port ${sp[0]} --threads $THREADS \
    --adaptive-threads $ADAPTIVE --metrics-port 0 --maxmemory 0 --dir $WORK/strata-1"
  for pair in "redis-1 ${sp[1]}" "redis2-1 ${sp[2]}"; do
    read -r name port <<<"$pair"
    start "$name" "$port" "redis-server --bind 127.0.0.1 --port $port --dir $WORK --save '' --appendonly no --daemonize no"
  done
  GROUP[strata-1]=strata-1 GROUP[redis-1]=redis-1 GROUP[redis2-1]=redis2-1
fi

# Forwarding: a hash tag node 1 owns, so every key of the custom commands lives there.
if [[ $FORWARD == 1 ]]; then
  TAG=""
  for i in $(seq 0 1000); do
    slot=$(redis-cli -p "${STRATA_DIRECT[0]}" cluster keyslot "{t$i}")
    if (( slot >= 5461 && slot <= 10922 )); then TAG="t$i"; break; fi
  done
  [[ -n $TAG ]] || { echo "no hash tag on node 1" >&2; exit 1; }
  VALUE=$(head -c "$DATASIZE" /dev/zero | tr '\0' x)
  echo "forwarding runs: keys key:{$TAG}:<n> (slot $slot, node 1), through node 0's plain port vs node 1"
fi

for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS"
  for group in strata redis redis2; do
    bench cluster "$group" "$round" --cluster -p "${PORT[$group-n0]}" -t "$TESTS"
  done
  if [[ $SINGLE == 1 ]]; then
    for group in strata-1 redis-1 redis2-1; do
      bench single "$group" "$round" -p "${PORT[$group]}" -t "$TESTS"
    done
  fi
  if [[ $FORWARD == 1 ]]; then
    # Alternate: forwarded, direct; SET then GET, the GETs without a flush (they find the SETs' keys).
    for cmd in SET GET; do
      args=("$cmd" "key:{$TAG}:__rand_int__"); flush=0
      [[ $cmd == SET ]] && { args+=("$VALUE"); flush=1; }
      NOFLUSH=$((1 - flush)) bench "fwd-$cmd" strata "$round" -p "${STRATA_PLAIN[0]}" "${args[@]}"
      NOFLUSH=$((1 - flush)) bench "direct-$cmd" strata "$round" -p "${STRATA_DIRECT[1]}" "${args[@]}"
    done
    bench plain-mixed strata "$round" -p "${STRATA_PLAIN[0]}" -t "$TESTS"
  fi
done

# ---------------------------------------------------------------- summary
python3 - "$OUT" "$N" "$CLK_TCK" <<'PY' | tee "$OUT/summary.txt"
import csv, sys
from collections import defaultdict
from statistics import median

out, n, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rps = defaultdict(list)    # (mode, group, test) -> [ops/s per round]
p50 = defaultdict(list)
p99 = defaultdict(list)
eff = defaultdict(list)    # (mode, group) -> [requests / server cpu-second]
busy = defaultdict(list)
tests = defaultdict(list)  # mode -> test names in order
failed = []
coarse = False

for run in csv.DictReader(open(f"{out}/runs.tsv"), delimiter="\t"):
    mode, grp = run["mode"], run["group"]
    rows = [r for r in csv.reader(open(f"{out}/{run['csv']}"))
            if len(r) >= 7 and r[0] != "test" and r[1].replace(".", "", 1).isdigit()]
    for r in rows:
        test = r[0] if mode in ("cluster", "single", "plain-mixed") else mode.split("-", 1)[1]
        rps[mode, grp, test].append(float(r[1]))
        p50[mode, grp, test].append(float(r[4]))
        p99[mode, grp, test].append(float(r[6]))
        if test not in tests[mode]:
            tests[mode].append(test)
    ticks = int(run["cpu_ticks"])
    if run["rc"] != "0" or run["errors"] != "0":
        failed.append(f"{grp} {mode} round {run['round']} (rc={run['rc']}, error lines={run['errors']})")
    elif rows and ticks > 0:
        eff[mode, grp].append(n * len(rows) / (ticks / hz))
        if float(run["wall_s"]) > 0:
            busy[mode, grp].append(float(run["client_cpu_s"]) / float(run["wall_s"]))
    if ticks < 100:
        coarse = True

def med(d, *k):
    v = d.get(k)
    return median(v) if v else None

def ratio(a, b):
    return f"{a / b:6.2f}" if a and b else "     -"

def num(x):
    return f"{x:12,.0f}" if x else "           -"

def ms(x):
    return f"{x:7.3f}" if x is not None else "      -"

def table(mode, groups, title):
    if mode not in tests:
        return None
    a, b, c = groups
    print(f"\n=== {title}: median ops/s over rounds (p99 ms) ===")
    print(f"{'test':8} {a:>12} {b:>12} {c:>12} {a[:6] + '/' + b[:5]:>12} {c[:6] + '/' + b[:5]:>12}   p99 {a[:6]:>7} {b[:6]:>7} {c[:7]:>7}")
    for t in tests[mode]:
        x, y, z = (med(rps, mode, g, t) for g in groups)
        print(f"{t[:8]:8} {num(x)} {num(y)} {num(z)} {ratio(x, y):>12} {ratio(z, y):>12}   "
              f"    {ms(med(p99, mode, a, t))} {ms(med(p99, mode, b, t))} {ms(med(p99, mode, c, t))}")
    e = [med(eff, mode, g) for g in groups]
    print(f"ops per server CPU-second (all its servers, median): {a} {num(e[0]).strip()}  {b} {num(e[1]).strip()}"
          f"  {c} {num(e[2]).strip()}")
    print(f"  {a}/{b} {ratio(e[0], e[1]).strip()}   {c}/{b} {ratio(e[2], e[1]).strip()} (noise band)")
    bz = [med(busy, mode, g) for g in groups]
    if all(bz):
        print(f"client busy (redis-benchmark CPU / wall): {a} {bz[0]:.2f}  {b} {bz[1]:.2f}  {c} {bz[2]:.2f}"
              + ("   <- near 1.0: the client sets the pace" if max(bz) > 0.9 else ""))
    return e

ec = table("cluster", ("strata", "redis", "redis2"), "redis-benchmark --cluster, three nodes each")
es = table("single", ("strata-1", "redis-1", "redis2-1"), "single node, no cluster mode (reference)")
if ec and es and all(ec[:2]) and all(es[:2]):
    print(f"\ncluster tax: strata/redis ops per CPU-second, cluster {ec[0] / ec[1]:.2f} vs single node {es[0] / es[1]:.2f}"
          f" (goal: cluster >= single)")

if any(m.startswith("fwd-") for m in tests):
    print("\n=== forwarding (strata): plain client on node 0's plain port, keys of node 1, vs the same sent to node 1 ===")
    print(f"{'cmd':5} {'direct':>12} {'forwarded':>12} {'fwd/direct':>10}   p50 ms direct/fwd   p99 ms direct/fwd")
    for cmd in ("SET", "GET"):
        d, f = med(rps, f"direct-{cmd}", "strata", cmd), med(rps, f"fwd-{cmd}", "strata", cmd)
        print(f"{cmd:5} {num(d)} {num(f)} {ratio(f, d):>10}   "
              f"{ms(med(p50, f'direct-{cmd}', 'strata', cmd))} {ms(med(p50, f'fwd-{cmd}', 'strata', cmd))}   "
              f"{ms(med(p99, f'direct-{cmd}', 'strata', cmd))} {ms(med(p99, f'fwd-{cmd}', 'strata', cmd))}")
    for cmd in ("SET", "GET"):
        d, f = med(eff, f"direct-{cmd}", "strata"), med(eff, f"fwd-{cmd}", "strata")
        print(f"  {cmd} ops per CPU-second of the three nodes: direct {num(d).strip()}  forwarded {num(f).strip()}"
              f"  ({ratio(f, d).strip()})")
    if "plain-mixed" in tests:
        print("\n=== plain client, random keys through node 0's plain port (2/3 forwarded) vs cluster client ===")
        for t in tests["plain-mixed"]:
            p, c = med(rps, "plain-mixed", "strata", t), med(rps, "cluster", "strata", t)
            print(f"{t:5} plain {num(p)}  cluster {num(c)}  plain/cluster {ratio(p, c).strip()}"
                  f"   p99 ms plain {ms(med(p99, 'plain-mixed', 'strata', t)).strip()}"
                  f" cluster {ms(med(p99, 'cluster', 'strata', t)).strip()}")
        p, c = med(eff, "plain-mixed", "strata"), med(eff, "cluster", "strata")
        print(f"  ops per CPU-second: plain {num(p).strip()}  cluster {num(c).strip()}  ({ratio(p, c).strip()})")

if coarse:
    print(f"\nNOTE: some invocations used < 100 ticks of server CPU (CLK_TCK={hz});"
          " CPU-second figures are coarse. Raise N.")
if failed:
    print("\nWARNING: incomplete or erroring invocations:", *failed, sep="\n  ")
PY
echo "results: $OUT"
