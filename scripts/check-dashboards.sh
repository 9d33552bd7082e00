#!/usr/bin/env bash
# Proves the dashboards and alert rules against a real Prometheus (run by `make check`):
#
#   1. builds strata-node and strata-operator (the dev profile `cargo test` builds anyway);
#   2. starts etcd + kube-apiserver (the operator tests' control plane, from scripts/k8s-tools.sh),
#      the real operator with leader election, and a CacheCluster for it to reconcile;
#   3. starts a strata-node with a small maxmemory (so it evicts) under redis-benchmark load,
#      including keys with a 1 s TTL (so they expire), and a second one with a durability log
#      (periodic: fsync every 10 ms) under a lighter SET/GET load, for the durability row, and a
#      third with a disk tier (32 MB of RAM, 256 MB of disk) under a load larger than its RAM, and
#      two in cluster mode sharing the slots (a topology pushed on their admin ports) under load on
#      one's plain port (half of it forwarded to the other) and its direct port (MOVED replies),
#      while slots migrate back and forth between the two (STRATA.MIGRATE, issue 23);
#   4. starts Debian's prometheus (scrape and rule evaluation every second) scraping all six, with
#      the labels the operator's ServiceMonitor gives real pods (namespace, cachecluster, pod) and
#      dashboards/strata.rules.yaml loaded;
#   5. scripts/check-dashboards.py evaluates every dashboard query, variable and rule, and runs
#      `promtool check metrics` on real scrapes of each; `promtool check rules` checks the rules
#      file and the chart's PrometheusRule.
#
#   scripts/check-dashboards.sh                    the check (about 1.5 minutes)
#   scripts/check-dashboards.sh --render DIR       the check, then the overview's PNGs into DIR
#
# Environment: LOAD_SECONDS (default 40), STRATA_DASH_PROFILE=release for optimized binaries,
# KEEP=1 to leave the work directory (logs, TSDB) behind. Nothing is skipped: a missing tool fails.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOAD_SECONDS=${LOAD_SECONDS:-40}
PROFILE=${STRATA_DASH_PROFILE:-dev}
RENDER=""
case ${1:-} in
  "") ;;
  --render) RENDER=${2:?--render needs a directory} ;;
  -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
  *) echo "check-dashboards: unknown argument '$1'" >&2; exit 2 ;;
esac

say() { echo "[check-dashboards $(date +%T)] $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

# Debian's python3 (python3-yaml, python3-matplotlib), not whatever python3 comes first on PATH.
PY=/usr/bin/python3
K8S_BIN=${STRATA_K8S_BIN:-$("$ROOT/scripts/k8s-tools.sh" path)}
for tool in prometheus promtool redis-benchmark redis-cli openssl curl "$PY" "$K8S_BIN/etcd" "$K8S_BIN/kube-apiserver" "$K8S_BIN/kubectl"; do
  command -v "$tool" >/dev/null || die "$tool not found: run 'make deps' (Debian packages) and 'make k8s-tools'"
done
"$PY" -c 'import yaml' 2>/dev/null || die "python3-yaml missing: run 'make deps'"
[[ -z $RENDER ]] || "$PY" -c 'import matplotlib' 2>/dev/null || die "python3-matplotlib missing: run 'make deps'"

say "building strata-node and strata-operator ($PROFILE profile)"
# The dev build shares `cargo test`'s node (built with its test-hooks feature, inert
# unless a test sets them) instead of compiling a second one without them.
features=()
[[ $PROFILE == dev ]] && features=(--features strata-node/test-hooks)
(cd "$ROOT" && cargo build -q --profile "$PROFILE" "${features[@]}" -p strata-node --bin strata-node -p strata-operator --bin strata-operator)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $PROFILE == dev ]] && BIN=$TARGET/debug || BIN=$TARGET/$PROFILE

WORK=$(mktemp -d /tmp/strata-dashboards.XXXXXX)
PIDS=()
cleanup() {
  local pid i
  # Newest first (the operator before its API server); the API server's graceful termination
  # waits a minute for clients, which a throwaway one need not: KILL whatever is left after 3 s.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[i]}" 2>/dev/null || true; done
  for ((i = 0; i < 15; i++)); do
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && break; done
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then say "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
start() { # start NAME CMD...: runs CMD in the background, logging to $WORK/NAME.log
  local name=$1
  shift
  "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # wait_for WHAT SECONDS CMD...
  local what=$1 secs=$2 i
  shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what not ready after ${secs}s (logs in $WORK; KEEP=1 keeps them)"
}

# --- control plane and operator -----------------------------------------------------------
ETCD_PORT=$(free_port) PEER_PORT=$(free_port) API_PORT=$(free_port) OP_PORT=$(free_port)
start etcd "$K8S_BIN/etcd" --data-dir "$WORK/etcd" --log-level warn --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "default=http://127.0.0.1:$PEER_PORT"
openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null
TOKEN=strata-dashboards-admin
echo "$TOKEN,admin,admin,system:masters" >"$WORK/tokens.csv"
mkdir -p "$WORK/certs"
start kube-apiserver "$K8S_BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --cert-dir "$WORK/certs" \
  --token-auth-file "$WORK/tokens.csv" --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$WORK/sa.key" \
  --service-account-signing-key-file "$WORK/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --enable-priority-and-fairness=false --v 1
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:$API_PORT", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: $TOKEN}
contexts:
- name: test
  context: {cluster: test, user: admin}
EOF
export KUBECONFIG=$WORK/kubeconfig
kubectl() { "$K8S_BIN/kubectl" "$@"; }

# --- the node under load (meanwhile the API server starts) ----------------------------------
# start_node NAME PORT METRICS ARGS...: a strata-node in $WORK/NAME (its data dir under it),
# logging to $WORK/strata-node-NAME.log.
start_node() {
  local name=$1 port=$2 metrics=$3
  shift 3
  mkdir -p "$WORK/$name"
  (cd "$WORK/$name" && exec "$BIN/strata-node" --port "$port" --metrics-port "$metrics" --threads 2 "$@") \
    >"$WORK/strata-node-$name.log" 2>&1 &
  PIDS+=($!)
}
NODE_PORT=$(free_port) NODE_METRICS=$(free_port) PROM_PORT=$(free_port)
start_node node "$NODE_PORT" "$NODE_METRICS" --maxmemory 16mb --maxmemory-policy allkeys-lru
# The durable node: periodic fsyncs under a light SET/GET load (the durability row's series).
DURABLE_PORT=$(free_port) DURABLE_METRICS=$(free_port)
start_node durable "$DURABLE_PORT" "$DURABLE_METRICS" --dir "$WORK/durable/data" --durability periodic
# The tiered node: a small maxmemory and a disk budget, so the policy's victims move to its disk
# tier and reads bring them back (the tier panels' series).
TIER_PORT=$(free_port) TIER_METRICS=$(free_port)
start_node tier "$TIER_PORT" "$TIER_METRICS" \
  --dir "$WORK/tier/data" --maxmemory 32mb --maxmemory-policy allkeys-lru --max-disk 256mb
# Two nodes in cluster mode, one half of the slots each: the cluster row's series. Load on
# shard-a's plain port is forwarded to shard-b for shard-b's slots; GETs on its direct port get
# MOVED for them.
declare -A SHARD_PORT SHARD_DIRECT SHARD_ADMIN SHARD_METRICS SHARD_ID
for shard in a b; do
  SHARD_PORT[$shard]=$(free_port) SHARD_DIRECT[$shard]=$(free_port) SHARD_ADMIN[$shard]=$(free_port)
  SHARD_METRICS[$shard]=$(free_port)
  SHARD_ID[$shard]=$(printf '%040d' 0 | tr 0 "$shard") # aaa...a, bbb...b: 40 hex digits
  start_node "shard-$shard" "${SHARD_PORT[$shard]}" "${SHARD_METRICS[$shard]}" --cluster-enabled yes \
    --cluster-direct-port "${SHARD_DIRECT[$shard]}" --cluster-port "${SHARD_ADMIN[$shard]}"
done
wait_for "strata-node" 30 redis-cli -p "$NODE_PORT" ping
wait_for "tiered strata-node" 30 redis-cli -p "$TIER_PORT" ping
shard_member() { # shard_member SHARD RANGES: the node's string of STRATA.TOPOLOGY SET
  echo "${SHARD_ID[$1]} 127.0.0.1 - ${SHARD_DIRECT[$1]} ${SHARD_PORT[$1]} $2 ${SHARD_ADMIN[$1]}"
}
for shard in a b; do
  wait_for "cluster-mode strata-node shard-$shard" 30 redis-cli -p "${SHARD_ADMIN[$shard]}" ping
  reply=$(redis-cli -p "${SHARD_ADMIN[$shard]}" STRATA.TOPOLOGY SET 1 "${SHARD_ID[$shard]}" \
    "$(shard_member a 0-8191)" "$(shard_member b 8192-16383)")
  [[ $reply == OK ]] || die "topology push to shard-$shard: $reply"
done
# Ready once its log is replayed (before that, writes get -LOADING).
wait_for "durable strata-node" 30 curl -sf "http://127.0.0.1:$DURABLE_METRICS/readyz"

# The labels a ServiceMonitor-scraped pod has (namespace, pod; cachecluster relabelled from the
# pod's app.kubernetes.io/instance). honor_labels for the operator: its strata_cachecluster_*
# series name their own namespace, as kube-state-metrics' do.
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $ROOT/dashboards/strata.rules.yaml
scrape_configs:
  - job_name: strata-node
    static_configs:
      - targets: ["127.0.0.1:$NODE_METRICS"]
        labels: {namespace: strata-proof, cachecluster: proof, pod: proof-0}
      - targets: ["127.0.0.1:$DURABLE_METRICS"]
        labels: {namespace: strata-proof, cachecluster: proof, pod: proof-1}
      - targets: ["127.0.0.1:$TIER_METRICS"]
        labels: {namespace: strata-proof, cachecluster: proof, pod: proof-2}
      - targets: ["127.0.0.1:${SHARD_METRICS[a]}"]
        labels: {namespace: strata-proof, cachecluster: proof, pod: proof-3}
      - targets: ["127.0.0.1:${SHARD_METRICS[b]}"]
        labels: {namespace: strata-proof, cachecluster: proof, pod: proof-4}
  - job_name: strata-operator
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$OP_PORT"]
        labels: {namespace: strata-system, pod: strata-operator-0}
EOF
promtool check config "$WORK/prometheus.yml" >/dev/null
start prometheus prometheus --config.file "$WORK/prometheus.yml" --storage.tsdb.path "$WORK/tsdb" \
  --web.listen-address "127.0.0.1:$PROM_PORT" --web.enable-lifecycle
PROM=http://127.0.0.1:$PROM_PORT

say "load: redis-benchmark for ${LOAD_SECONDS}s (SET/GET/INCR/LPUSH/HSET over 200k keys, SET EX 1)"
load() {
  local end=$((SECONDS + LOAD_SECONDS))
  while ((SECONDS < end)); do
    redis-benchmark -p "$NODE_PORT" -c 8 -n 40000 -r 200000 -d 256 -q -t set,get,incr,lpush,hset >/dev/null 2>&1 || return 1
    redis-benchmark -p "$NODE_PORT" -c 4 -n 5000 -r 200000 -q SET "ttl:__rand_int__" v EX 1 >/dev/null 2>&1 || return 1
  done
}
load &
LOAD_PID=$!
PIDS+=($LOAD_PID)
durable_load() { # short SET/GET rounds: every 20 s window has writes (and so fsyncs)
  local end=$((SECONDS + LOAD_SECONDS))
  while ((SECONDS < end)); do
    redis-benchmark -p "$DURABLE_PORT" -c 4 -n 3000 -r 50000 -d 128 -q -t set,get >>"$WORK/durable-load.log" 2>&1 || return 1
  done
}
durable_load &
DURABLE_LOAD_PID=$!
PIDS+=($DURABLE_LOAD_PID)
tier_load() { # 150k keys of 256 B (more than 32 MB) written and read: demotions and cold reads
  local end=$((SECONDS + LOAD_SECONDS))
  while ((SECONDS < end)); do
    redis-benchmark -p "$TIER_PORT" -c 4 -n 20000 -r 150000 -d 256 -q -t set,get >>"$WORK/tier-load.log" 2>&1 || return 1
  done
}
tier_load &
TIER_LOAD_PID=$!
PIDS+=($TIER_LOAD_PID)
shard_load() { # SET/GET on shard-a's plain port (half forwarded), 50 GETs of shard-b's key "foo" on its direct port
  local end=$((SECONDS + LOAD_SECONDS)) moved
  moved=$(for ((i = 0; i < 50; i++)); do echo 'GET foo'; done)
  while ((SECONDS < end)); do
    redis-benchmark -p "${SHARD_PORT[a]}" -c 4 -n 5000 -r 50000 -d 64 -q -t set,get >>"$WORK/shard-load.log" 2>&1 || return 1
    redis-cli -p "${SHARD_DIRECT[a]}" <<<"$moved" >>"$WORK/shard-moved.log" 2>&1 || true
  done
}
shard_load &
SHARD_LOAD_PID=$!
PIDS+=($SHARD_LOAD_PID)
# Slots 0-1023 migrate from shard-a to shard-b and back under that load, for the migration row:
# STRATA.MIGRATE START on the source's admin port, STATUS polled until it ends, then (committed)
# the confirming epoch pushed to the target first, the source last (the contract of issue 23).
shard_push() { # shard_push EPOCH RANGES_A RANGES_B FIRST SECOND
  local shard reply
  for shard in "$4" "$5"; do
    reply=$(redis-cli -p "${SHARD_ADMIN[$shard]}" STRATA.TOPOLOGY SET "$1" "${SHARD_ID[$shard]}" \
      "$(shard_member a "$2")" "$(shard_member b "$3")")
    [[ $reply == OK ]] || { echo "epoch $1 push to shard-$shard: $reply"; return 1; }
  done
}
shard_migrate() { # shard_migrate ID FROM TO: moves 0-1023; prints the final STATUS
  local state="" i
  reply=$(redis-cli -p "${SHARD_ADMIN[$2]}" STRATA.MIGRATE START "$1" "${SHARD_ID[$3]}" "127.0.0.1:${SHARD_ADMIN[$3]}" 0-1023)
  [[ $reply == OK ]] || { echo "STRATA.MIGRATE START $1 on shard-$2: $reply"; return 1; }
  for ((i = 0; i < 600; i++)); do
    state=$(redis-cli -p "${SHARD_ADMIN[$2]}" STRATA.MIGRATE STATUS "$1" | paste - - | awk '$1 == "state" { print $2 }')
    [[ $state == committed || $state == failed || $state == aborted ]] && break
    sleep 0.1
  done
  redis-cli -p "${SHARD_ADMIN[$2]}" STRATA.MIGRATE STATUS "$1" | paste -sd' '
  [[ $state == committed ]]
}
shard_migrations() {
  local end=$((SECONDS + LOAD_SECONDS)) n=0 epoch=1
  sleep 3
  while ((SECONDS < end)); do
    n=$((n + 1))
    shard_migrate "dash-$n-ab" a b || return 1
    epoch=$((epoch + 1))
    shard_push "$epoch" 1024-8191 0-1023,8192-16383 b a || return 1
    sleep 2
    shard_migrate "dash-$n-ba" b a || return 1
    epoch=$((epoch + 1))
    shard_push "$epoch" 0-8191 8192-16383 a b || return 1
    sleep 2
  done
}
shard_migrations >"$WORK/shard-migrate.log" 2>&1 &
SHARD_MIGRATE_PID=$!
PIDS+=($SHARD_MIGRATE_PID)
LOAD_START=$(date +%s)

wait_for "kube-apiserver" 120 kubectl get --raw /readyz
wait_for "namespace default" 60 kubectl get namespace default
kubectl apply --server-side -f "$ROOT/crds/strata.dev_cacheclusters.yaml" >/dev/null
# kubectl wait fails at once while the new CRD has no conditions yet: try again.
wait_for "the CacheCluster CRD" 60 kubectl wait --for=condition=Established crd/cacheclusters.strata.dev --timeout=10s
kubectl create namespace strata-system >/dev/null
kubectl create namespace strata-proof >/dev/null
start strata-operator env POD_NAME=strata-operator-0 POD_NAMESPACE=strata-system "$BIN/strata-operator" \
  --metrics-bind-address "127.0.0.1:$OP_PORT" --log-format text --lease-duration-seconds 6
kubectl apply --server-side -f - >/dev/null <<EOF
apiVersion: strata.dev/v1alpha1
kind: CacheCluster
metadata: {name: proof, namespace: strata-proof}
spec:
  replicas: 1
  resources: {limits: {memory: 256Mi}}
EOF
wait_for "operator leadership" 60 bash -c "curl -sf http://127.0.0.1:$OP_PORT/metrics | grep -q '^strata_operator_leader 1'"
wait_for "operator reconciling proof" 60 \
  bash -c "curl -sf http://127.0.0.1:$OP_PORT/metrics | grep -q 'strata_cachecluster_replicas{.*cachecluster=\"proof\"'"

# Let the load run its course (and Prometheus collect it) before judging.
remaining=$((LOAD_START + LOAD_SECONDS - $(date +%s)))
((remaining > 0)) && sleep "$remaining"
wait_for "Prometheus scraping the six targets" 30 bash -c \
  "curl -sf '$PROM/api/v1/query?query=count(up==1)' | grep -q '\"value\":\[[0-9.]*,\"6\"\]'"

# The cluster row's counters moved for real (a panel of rates would show 0 as readily).
shard_a=$(curl -sf "http://127.0.0.1:${SHARD_METRICS[a]}/metrics")
for counter in strata_cluster_forwarded_total strata_cluster_moved_total; do
  grep -Eq "^$counter [1-9]" <<<"$shard_a" || die "shard-a's $counter did not move: $(grep "^$counter " <<<"$shard_a")"
done
# ... and the migration row's: shard-a committed migrations as a source (and as a target).
grep -Eq '^strata_cluster_migrations_total\{[^}]*outcome="committed"[^}]*\} [1-9]' <<<"$shard_a" \
  || die "shard-a committed no slot migration: $(grep '^strata_cluster_migration' <<<"$shard_a" | tr '\n' ' ')
$(tail -n 5 "$WORK/shard-migrate.log")"

say "promtool check rules"
promtool check rules "$ROOT/dashboards/strata.rules.yaml"
if [[ -n ${HELM:-} || -x $K8S_BIN/helm ]]; then
  # The chart's PrometheusRule must carry the same groups, valid for Prometheus too.
  "${HELM:-$K8S_BIN/helm}" template strata-operator "$ROOT/charts/strata-operator" --namespace strata-system \
    --kube-version 1.33.0 --api-versions monitoring.coreos.com/v1 --set prometheusRule.enabled=true \
    --show-only templates/prometheusrule.yaml >"$WORK/prometheusrule.yaml"
  "$PY" -c 'import sys, yaml; print(yaml.safe_dump(yaml.safe_load(open(sys.argv[1]))["spec"]))' \
    "$WORK/prometheusrule.yaml" >"$WORK/chart-rules.yaml"
  promtool check rules "$WORK/chart-rules.yaml"
else
  die "helm not found: run 'make k8s-tools'"
fi

say "evaluating every dashboard query and rule against Prometheus (load still running)"
# Grafana's $__rate_interval is at least 4 scrape intervals; 1 s scrapes, so 20 s leaves margin.
# pod=~".*": every node (the durability row has series from proof-1 only, the tier's from proof-2,
# the cluster row's from proof-3 and proof-4).
"$PY" "$ROOT/scripts/check-dashboards.py" --prometheus "$PROM" \
  --var namespace=strata-proof --var cluster=proof --var pod='.*' --var __rate_interval=20s \
  --scrape "strata-node=http://127.0.0.1:$NODE_METRICS/metrics" \
  --scrape "strata-node-durable=http://127.0.0.1:$DURABLE_METRICS/metrics" \
  --scrape "strata-node-tier=http://127.0.0.1:$TIER_METRICS/metrics" \
  --scrape "strata-node-cluster=http://127.0.0.1:${SHARD_METRICS[a]}/metrics" \
  --scrape "strata-operator=http://127.0.0.1:$OP_PORT/metrics"

kill "$LOAD_PID" "$DURABLE_LOAD_PID" "$TIER_LOAD_PID" "$SHARD_LOAD_PID" "$SHARD_MIGRATE_PID" 2>/dev/null || true
if [[ -n $RENDER ]]; then
  say "rendering the overview's panels into $RENDER"
  "$PY" "$ROOT/scripts/render-dashboards.py" --prometheus "$PROM" --start "$LOAD_START" --end "$(date +%s)" \
    --var namespace=strata-proof --var cluster=proof --var pod=proof-0 --var __rate_interval=10s --out "$RENDER"
fi
say "ok"
