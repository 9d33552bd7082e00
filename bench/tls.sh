#!/usr/bin/env bash
# TLS: ops per server CPU-second, strata-node --tls-port vs redis-server --tls-port, same run.
# See bench/README.md ("TLS") or run with --help.
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: bench/tls.sh [--no-build] [-h]

Makes a CA, a server and a client certificate (openssl), starts strata-node and two
redis-servers (redis, redis2: the redis-vs-redis noise band), each with only a TLS port and
mutual TLS (tls-auth-clients yes), and runs Debian's redis-benchmark --tls against them in
turn (strata, redis, redis2, ...) for ROUNDS rounds, plain (one request at a time) and
pipelined. Prints per test the median ops/s, and per mode the median ops per server
CPU-second (utime+stime from /proc/PID/stat around each invocation) with the ratios
strata/redis and redis2/redis. Goal (issue 25): strata/redis >= 1.0 in ops per CPU-second.

Every connection makes a full handshake at the start of an invocation (50 clients), so the
figures are for steady traffic over open connections, as a cache's clients keep them.

Env vars:
  N=300000          requests per test and invocation (pipelined runs do 10x)
  ROUNDS=3          invocations per server, test and mode
  TESTS=get,set     redis-benchmark -t list
  MODES="plain pipelined"   pipelined = -P 16
  CLIENTS=50  DATASIZE=16   redis-benchmark -c / -d
  THREADS=nproc     strata-node worker threads
  STRATA_BIN        default: the release build (built unless --no-build)
  RESULTS_DIR       default bench/results/tls-<timestamp>
EOF2
}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
parse_options "$@"

N=${N:-300000}
ROUNDS=${ROUNDS:-3}
TESTS=${TESTS:-get,set}
MODES=${MODES:-"plain pipelined"}
CLIENTS=${CLIENTS:-50}
DATASIZE=${DATASIZE:-16}
THREADS=${THREADS:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/tls-$(date +%Y%m%d-%H%M%S)}

for tool in redis-server redis-benchmark openssl python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done
redis-benchmark --help 2>&1 | grep -q -- '--tls' || { echo "this redis-benchmark has no --tls (Debian's has)" >&2; exit 1; }
if [[ $NO_BUILD != 1 ]]; then (cd "$ROOT" && cargo build --release -p strata-node >&2); fi
STRATA_BIN=${STRATA_BIN:-$TARGET/release/strata-node}
[[ -x $STRATA_BIN ]] || { echo "missing $STRATA_BIN (build without --no-build)" >&2; exit 1; }

mkdir -p "$RESULTS_DIR/logs"
PKI=$(mktemp -d)
declare -A PID PORT
trap 'stop_servers; rm -rf "$PKI"' EXIT

# The certificates: one CA, the servers' certificate (localhost) and a client's.
(
  cd "$PKI"
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout ca.key -out ca.crt -days 2 -subj "/CN=bench CA" 2>/dev/null
  for n in server client; do
    openssl req -new -nodes -newkey rsa:2048 -keyout $n.key -out $n.csr -subj "/CN=$n" 2>/dev/null
    echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >$n.ext
    openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt -days 2 -extfile $n.ext 2>/dev/null
  done
)
TLS_FILES=(--tls-cert-file "$PKI/server.crt" --tls-key-file "$PKI/server.key" --tls-ca-cert-file "$PKI/ca.crt")

start() { # name
  local name=$1 port
  port=$(free_port)
  PORT[$name]=$port
  if [[ $name == strata ]]; then
    "$STRATA_BIN" --port 0 --tls-port "$port" "${TLS_FILES[@]}" --threads "$THREADS" --metrics-port 0 \
      --maxmemory 0 >"$RESULTS_DIR/logs/$name.log" 2>&1 &
  else
    redis-server --port 0 --tls-port "$port" "${TLS_FILES[@]}" --save '' --appendonly no \
      >"$RESULTS_DIR/logs/$name.log" 2>&1 &
  fi
  PID[$name]=$!
  for _ in $(seq 100); do
    cli "$name" PING 2>/dev/null | grep -q PONG && return
    sleep 0.1
  done
  echo "$name did not start: $(tail -5 "$RESULTS_DIR/logs/$name.log")" >&2
  exit 1
}
cli() { # name args...
  local name=$1; shift
  redis-cli -p "${PORT[$name]}" --tls --cacert "$PKI/ca.crt" --cert "$PKI/client.crt" --key "$PKI/client.key" "$@"
}

SERVERS=(strata redis redis2)
for s in "${SERVERS[@]}"; do start "$s"; done
echo "strata-node $("$STRATA_BIN" --version 2>/dev/null | head -1), $(redis-server --version | cut -d' ' -f1-3); $(nproc) cores"
printf 'mode\tround\tserver\ttest\tops\tcpu_ticks\n' >"$RESULTS_DIR/runs.tsv"
HZ=$(getconf CLK_TCK)

for mode in $MODES; do
  case $mode in
    plain) P=1; n=$N ;;
    pipelined) P=16; n=$((N * 10)) ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  for round in $(seq "$ROUNDS"); do
    for s in "${SERVERS[@]}"; do
      cli "$s" FLUSHALL >/dev/null
      before=$(cpu_ticks "${PID[$s]}")
      out=$(redis-benchmark -p "${PORT[$s]}" --tls --cacert "$PKI/ca.crt" --cert "$PKI/client.crt" \
        --key "$PKI/client.key" -n "$n" -c "$CLIENTS" -d "$DATASIZE" -P "$P" -t "$TESTS" --csv 2>/dev/null)
      ticks=$(( $(cpu_ticks "${PID[$s]}") - before ))
      tail -n +2 <<<"$out" | tr -d '"' | while IFS=, read -r test rps _; do
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$round" "$s" "$test" "$rps" "$ticks"
      done >>"$RESULTS_DIR/runs.tsv"
      ops_total=$(( n * $(tr ',' '\n' <<<"$TESTS" | wc -l) ))
      printf '  %-9s r%s %-7s %6.2fs server cpu  %s\n' "$mode" "$round" "$s" "$(echo "$ticks / $HZ" | bc -l)" \
        "$(tail -n +2 <<<"$out" | tr -d '"' | awk -F, '{printf "%s %.0f/s  ", $1, $2}')"
      printf '%s\t%s\t%s\t%s\n' "$mode" "$round" "$s" "$(echo "$ops_total * $HZ / ($ticks + 0.0001)" | bc -l)" \
        >>"$RESULTS_DIR/percpu.tsv"
    done
  done
done

python3 - "$RESULTS_DIR" <<'PY' | tee "$RESULTS_DIR/summary.txt"
import csv, statistics, sys, collections
d = sys.argv[1]
runs = list(csv.DictReader(open(f"{d}/runs.tsv"), delimiter="\t"))
ops = collections.defaultdict(list)
for r in runs:
    ops[(r["mode"], r["test"], r["server"])].append(float(r["ops"]))
percpu = collections.defaultdict(list)
for line in open(f"{d}/percpu.tsv"):
    mode, _, server, v = line.split("\t")
    percpu[(mode, server)].append(float(v))
for mode in dict.fromkeys(r["mode"] for r in runs):
    print(f"=== {mode} (TLS, mutual): median ops/s ===")
    print(f"{'test':10}{'strata':>12}{'redis':>12}{'redis2':>12}{'st/redis':>10}{'r2/redis':>10}")
    for test in dict.fromkeys(r["test"] for r in runs if r["mode"] == mode):
        m = {s: statistics.median(ops[(mode, test, s)]) for s in ("strata", "redis", "redis2")}
        print(f"{test:10}{m['strata']:>12,.0f}{m['redis']:>12,.0f}{m['redis2']:>12,.0f}"
              f"{m['strata'] / m['redis']:>10.2f}{m['redis2'] / m['redis']:>10.2f}")
    c = {s: statistics.median(percpu[(mode, s)]) for s in ("strata", "redis", "redis2")}
    print(f"ops per server CPU-second (median): strata {c['strata']:,.0f}  redis {c['redis']:,.0f}  "
          f"redis2 {c['redis2']:,.0f}")
    print(f"  strata/redis {c['strata'] / c['redis']:.2f}   redis2/redis {c['redis2'] / c['redis']:.2f}")
print(f"results: {d}")
PY
