#!/usr/bin/env bash
# Is `maxmemory` a real RAM budget? RSS vs maxmemory for strata-node and
# redis-server in the same run, plus RSS per key. See bench/README.md.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bench/memory.sh [-h|--help]

Part 1, the budget. For every value size and policy, starts strata-node and then
redis-server (Unix socket, no persistence, --maxmemory $MAXMEMORY), writes far
beyond the limit with pipelined redis-benchmark SETs on unique random keys
(key:__rand_int__, -r 100000000), then records VmRSS (/proc/PID/status) and
INFO used_memory, and prints both divided by maxmemory, and strata/redis of
RSS/maxmemory.
  sizes:    small (-d 16), mixed (fills with -d 16, 64, 256, 512 in turn,
            since redis-benchmark cannot vary the size per request),
            large (-d 16384)
  policies: allkeys-lru, allkeys-lfu, noeviction (the fill stops at the
            first OOM error: redis-benchmark exits on an error reply)
  churn:    for the evicting policies, a python client then SCANs the keys
            and DELetes every other one (RSS read again: "del½"), and a
            second fill of 1x the limit follows (RSS read again: "refill").
Each fill writes about FILL x maxmemory of payload+key (each mixed step writes
FILL/2 x, so 2*FILL x in all).

Part 2, RSS per key. With no maxmemory, a python client writes exactly KEYS
keys key:0..key:KEYS-1 (16-byte values, pipelined over the Unix socket); the
script prints (RSS after - RSS before) / DBSIZE and the same for used_memory.

Env vars:
  STRATA_BIN      default /tmp/strata-node-final if present, else
                  target/release/strata-node (never builds)
  MAXMEMORY=64mb  the budget (give it in mb)
  FILL=4          write volume per fill, in multiples of maxmemory
  SIZES="small mixed large"
  POLICIES="allkeys-lru allkeys-lfu noeviction"
  SERVERS="strata redis"
  CHURN=1         0 skips the churn pass
  KEYS=1000000    part 2 key count (KEYS=10000000 for the 10 M variant);
                  KEYS=0 skips part 2
  PIPELINE=16 CLIENTS=20   redis-benchmark -P / -c
  THREADS         strata --threads (default: the node's default)
  RESULTS_DIR     default bench/results/memory-<timestamp>
Output: summary.txt (the tables), details.tsv (one line per measurement),
logs/ (server and redis-benchmark output).
EOF
}

for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    *) echo "unknown option $a" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAXMEMORY=${MAXMEMORY:-64mb}
FILL=${FILL:-4}
SIZES=${SIZES:-"small mixed large"}
POLICIES=${POLICIES:-"allkeys-lru allkeys-lfu noeviction"}
SERVERS=${SERVERS:-"strata redis"}
CHURN=${CHURN:-1}
KEYS=${KEYS:-1000000}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-20}
THREADS=${THREADS:-}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results/memory-$(date +%Y%m%d-%H%M%S)}
if [[ -z ${STRATA_BIN:-} ]]; then
  if [[ -x /tmp/strata-node-final ]]; then
    STRATA_BIN=/tmp/strata-node-final
  else
    STRATA_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/strata-node
  fi
fi
for tool in redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
if [[ $SERVERS == *strata* ]]; then
  [[ -x $STRATA_BIN ]] || { echo "no strata-node at $STRATA_BIN (set STRATA_BIN)" >&2; exit 1; }
fi
MAXBYTES=$(( ${MAXMEMORY%mb} * 1024 * 1024 ))

mkdir -p "$RESULTS_DIR/logs"
TMP=$(mktemp -d /tmp/strata-memory.XXXXXX)
PID=""
stop() {
  if [[ -n $PID ]]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
}
trap 'stop; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

SOCK=$TMP/server.sock
# start SERVER POLICY|none TAG: one server on $SOCK, in the background.
start() {
  local server=$1 policy=$2 log=$RESULTS_DIR/logs/$1-$3.log mm=()
  rm -f "$SOCK"
  if [[ $policy != none ]]; then
    mm=(--maxmemory "$MAXMEMORY" --maxmemory-policy "$policy")
  fi
  if [[ $server == strata ]]; then
    local th=()
    [[ -n $THREADS ]] && th=(--threads "$THREADS")
    "$STRATA_BIN" --port 0 --unixsocket "$SOCK" --metrics-port 0 "${th[@]}" "${mm[@]}" >"$log" 2>&1 &
  else
    redis-server --port 0 --unixsocket "$SOCK" --save '' --appendonly no --daemonize no \
      "${mm[@]}" >"$log" 2>&1 &
  fi
  PID=$!
  for _ in $(seq 200); do
    if [[ -S $SOCK ]] && redis-cli -s "$SOCK" PING 2>/dev/null | grep -q PONG; then
      return 0
    fi
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "$server did not start; see $log" >&2
  exit 1
}

alive() { kill -0 "$PID" 2>/dev/null || { echo "server died; see $RESULTS_DIR/logs" >&2; exit 1; }; }
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$PID/status"; }
info() { redis-cli -s "$SOCK" INFO all | tr -d '\r' | awk -F: -v f="$1" '$1 == f { print $2 }'; }
dbsize() { redis-cli -s "$SOCK" DBSIZE | tr -d '\r'; }
# settle: give background eviction / freeing a moment before reading RSS.
settle() { sleep 1; }

# fill SIZE_BYTES VOLUME_BYTES LOG: pipelined SETs of unique random keys.
fill() {
  local d=$1 vol=$2 log=$3 n
  n=$(( vol / (d + 30) ))          # key:<12 digits> is 16 bytes, + ~14 bytes of framing
  (( n < 1000 )) && n=1000
  redis-benchmark -s "$SOCK" -t set -n "$n" -r 100000000 -d "$d" -P "$PIPELINE" -c "$CLIENTS" -q \
    >>"$log" 2>&1 || echo "(redis-benchmark exit $?: stopped, e.g. at OOM)" >>"$log"
  alive
}

cat >"$TMP/client.py" <<'PY'
import socket, sys

def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s

class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""
    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l
    def exact(self, n):
        while len(self.buf) < n + 2:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        v, self.buf = self.buf[:n], self.buf[n + 2:]
        return v
    def reply(self):
        l = self.line()
        t = l[:1]
        if t == b"$":
            n = int(l[1:])
            return None if n < 0 else self.exact(n)
        if t == b"*":
            return [self.reply() for _ in range(int(l[1:]))]
        if t == b"-":
            return Exception(l.decode())
        return l[1:]

def cmd(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

def load(path, n, size):
    s = conn(path); r = Reader(s)
    val = b"x" * size
    batch, errs = 1000, 0
    for start in range(0, n, batch):
        end = min(n, start + batch)
        s.sendall(b"".join(cmd(b"SET", b"key:%d" % i, val) for i in range(start, end)))
        for _ in range(start, end):
            if isinstance(r.reply(), Exception):
                errs += 1
    print(errs)

def delhalf(path):
    s = conn(path); r = Reader(s)
    cursor, seen, deleted = b"0", 0, 0
    while True:
        s.sendall(cmd(b"SCAN", cursor, b"COUNT", 1000))
        cursor, keys = r.reply()
        victims = []
        for k in keys:
            seen += 1
            if seen % 2 == 0:
                victims.append(k)
        if victims:
            s.sendall(b"".join(cmd(b"DEL", k) for k in victims))
            for _ in victims:
                r.reply()
            deleted += len(victims)
        if cursor == b"0":
            break
    print(deleted)

if __name__ == "__main__":
    if sys.argv[1] == "load":
        load(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        delhalf(sys.argv[2])
PY

DETAILS=$RESULTS_DIR/details.tsv
printf 'size\tpolicy\tserver\tstage\trss\tused_memory\tdbsize\tevicted_keys\n' >"$DETAILS"
declare -A R U
record() {  # record SIZE POLICY SERVER STAGE
  local r u k e
  settle
  r=$(rss); u=$(info used_memory); k=$(dbsize); e=$(info evicted_keys)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$r" "$u" "$k" "${e:-0}" >>"$DETAILS"
  R[$1,$2,$3,$4]=$r; U[$1,$2,$3,$4]=$u
  echo "  $1 $2 $3 $4: rss=$((r / 1048576))MiB used_memory=$((u / 1048576))MiB keys=$k evicted=${e:-0}" >&2
}

sizes_of() {
  case $1 in
    small) echo 16 ;;
    mixed) echo 16 64 256 512 ;;
    large) echo 16384 ;;
  esac
}

echo "== part 1: RSS vs maxmemory $MAXMEMORY (fill ${FILL}x)" >&2
for size in $SIZES; do
  for policy in $POLICIES; do
    for server in $SERVERS; do
      start "$server" "$policy" "$size-$policy"
      log=$RESULTS_DIR/logs/bench-$server-$size-$policy.log
      ds=($(sizes_of "$size"))
      if (( ${#ds[@]} > 1 )); then vol=$(( MAXBYTES * FILL / 2 )); else vol=$(( MAXBYTES * FILL )); fi
      for d in "${ds[@]}"; do fill "$d" "$vol" "$log"; done
      record "$size" "$policy" "$server" fill
      if [[ $CHURN == 1 && $policy != noeviction ]]; then
        python3 "$TMP/client.py" delhalf "$SOCK" >>"$log"
        alive
        record "$size" "$policy" "$server" del
        for d in "${ds[@]}"; do fill "$d" $(( MAXBYTES / ${#ds[@]} )) "$log"; done
        record "$size" "$policy" "$server" refill
      fi
      stop
    done
  done
done

if (( KEYS > 0 )); then
  echo "== part 2: RSS per key, $KEYS keys of 16 B, no maxmemory" >&2
  for server in $SERVERS; do
    start "$server" none "perkey"
    settle
    before=$(rss); ubefore=$(info used_memory)
    errs=$(python3 "$TMP/client.py" load "$SOCK" "$KEYS" 16)
    alive
    settle
    after=$(rss); uafter=$(info used_memory); n=$(dbsize)
    printf 'perkey\tnone\t%s\tbefore\t%s\t%s\t0\t0\n' "$server" "$before" "$ubefore" >>"$DETAILS"
    printf 'perkey\tnone\t%s\tafter\t%s\t%s\t%s\t0\n' "$server" "$after" "$uafter" "$n" >>"$DETAILS"
    R[perkey,$server,before]=$before; R[perkey,$server,after]=$after
    U[perkey,$server]=$(( uafter - ubefore ))
    declare -g "DB_$server=$n" "ERR_$server=$errs"
    echo "  $server: dbsize=$n errors=$errs rss $((before / 1048576)) -> $((after / 1048576)) MiB" >&2
    stop
  done
fi

# ---- report
ratio() { python3 -c "import sys; a,b=float(sys.argv[1] or 0),float(sys.argv[2] or 0); print('%.2f' % (a/b) if b else '-')" "$1" "$2"; }
{
  echo "# Memory: is maxmemory a RAM budget?  maxmemory=$MAXMEMORY fill=${FILL}x $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# strata: $STRATA_BIN   redis: $(redis-server --version | awk '{print $3}')   $(nproc) cores"
  echo
  echo "RSS/maxmemory and used_memory/maxmemory after writing ${FILL}x the limit (fill); churn:"
  echo "del = after DEL of every other key, refill = after writing 1x the limit again."
  echo
  printf '%-6s %-12s %-7s | %-8s %-8s %-8s | %-8s %-8s %-8s | %s\n' \
    size policy stage "S rss/mm" "S used" "S keys" "R rss/mm" "R used" "R keys" "S/R rss"
  printf '%s\n' "------------------------------------------------------------------------------------------------"
  for size in $SIZES; do
    for policy in $POLICIES; do
      for stage in fill del refill; do
        [[ -n ${R[$size,$policy,${SERVERS%% *},$stage]:-} ]] || continue
        row=()
        for server in strata redis; do
          r=${R[$size,$policy,$server,$stage]:-}; u=${U[$size,$policy,$server,$stage]:-}
          k=$(awk -F'\t' -v a="$size" -v b="$policy" -v c="$server" -v d="$stage" \
            '$1==a && $2==b && $3==c && $4==d { print $7 }' "$DETAILS")
          if [[ -n $r ]]; then
            row+=("$(ratio "$r" "$MAXBYTES")" "$(ratio "$u" "$MAXBYTES")" "${k:--}")
          else
            row+=(- - -)
          fi
        done
        sr=$(ratio "${R[$size,$policy,strata,$stage]:-0}" "${R[$size,$policy,redis,$stage]:-0}")
        [[ -z ${R[$size,$policy,strata,$stage]:-} || -z ${R[$size,$policy,redis,$stage]:-} ]] && sr=-
        printf '%-6s %-12s %-7s | %-8s %-8s %-8s | %-8s %-8s %-8s | %s\n' \
          "$size" "$policy" "$stage" "${row[@]}" "$sr"
      done
    done
  done
  if (( KEYS > 0 )); then
    echo
    echo "RSS per key: $KEYS keys key:0..key:$((KEYS - 1)), 16-byte values, no maxmemory"
    printf '%-7s %10s %12s %12s %14s %8s\n' server dbsize "RSS MiB" "B/key (RSS)" "B/key (used)" errors
    for server in $SERVERS; do
      b=${R[perkey,$server,before]}; a=${R[perkey,$server,after]}
      dbv=DB_$server; erv=ERR_$server; n=${!dbv}
      printf '%-7s %10s %12s %12s %14s %8s\n' "$server" "$n" "$((a / 1048576))" \
        "$(python3 -c "print('%.1f' % (($a-$b)/$n))")" \
        "$(python3 -c "print('%.1f' % (${U[perkey,$server]}/$n))")" "${!erv}"
    done
  fi
} | tee "$RESULTS_DIR/summary.txt"
echo "results: $RESULTS_DIR" >&2
