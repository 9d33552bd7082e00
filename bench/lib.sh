# Shared by the benchmarks (workloads.sh, durability.sh, tier.sh, recovery.sh, cluster.sh): sourced,
# not run. need_binaries expects ROOT, TARGET and NO_BUILD set; sets STRATA_BIN and LOADGEN.

# The options every script takes: --no-build (sets NO_BUILD=1) and -h/--help (the script's
# `usage`); anything else is refused with the usage.
parse_options() {
  NO_BUILD=${NO_BUILD:-0}
  for a in "$@"; do
    case "$a" in
      --no-build) NO_BUILD=1 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "unknown option $a" >&2; usage >&2; exit 2 ;;
    esac
  done
}

# Builds (unless NO_BUILD=1) and checks the release strata-node and strata-loadgen.
need_binaries() {
  command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
  if [[ $NO_BUILD != 1 ]]; then
    (cd "$ROOT" && cargo build --release -p strata-node -p strata-loadgen >&2)
  fi
  STRATA_BIN=${STRATA_BIN:-$TARGET/release/strata-node}
  LOADGEN=${LOADGEN:-$TARGET/release/strata-loadgen}
  for b in "$STRATA_BIN" "$LOADGEN"; do [[ -x $b ]] || { echo "missing $b (build without --no-build)" >&2; exit 1; }; done
}

# Stops every server of the associative array PID (name -> pid): SIGTERM to all, then SIGKILL
# to any still there after 5 s.
stop_servers() {
  local name pid
  for name in "${!PID[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null || true; done
  for name in "${!PID[@]}"; do
    pid=${PID[$name]}
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# Stops the server whose pid is in $PID, if any.
stop() {
  if [[ -n $PID ]]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# utime + stime of process $1 (all its threads), in clock ticks: fields 14 and 15, counted
# after the ")" that ends the command name (which may hold spaces).
cpu_ticks() {
  local stat rest f
  stat=$(<"/proc/$1/stat"); rest=${stat##*) }
  read -ra f <<<"$rest"            # f[0] is field 3, so fields 14/15 are f[11]/f[12]
  echo $(( f[11] + f[12] ))
}

# The median of the numbers on stdin, one per line.
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
