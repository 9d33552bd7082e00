#!/usr/bin/env bash
# e2e/cluster.sh — the Kubernetes cluster the end-to-end tests run against.
#
#   e2e/cluster.sh up               start (or finish starting) a cluster; idempotent
#   e2e/cluster.sh load IMAGE.tar…  make docker-archive images available to the cluster
#   e2e/cluster.sh env              print eval-able `export KUBECONFIG=… PATH=…` lines
#   e2e/cluster.sh status           what runs, and the nodes
#   e2e/cluster.sh down             stop and wipe the cluster (built binaries stay cached)
#   e2e/cluster.sh deps             apt-get install what the local cluster needs (run by up)
#
# Which cluster (E2E_CLUSTER=existing|kind|local, else the first that fits):
#   existing  KUBECONFIG is set and reaches a cluster: used as is, never modified by down.
#             Images must be pullable by that cluster (set E2E_IMAGES_PRELOADED=1).
#   kind      docker has a running daemon and kind is on PATH: cluster "strata-e2e".
#   local     a single-node Kubernetes v1.33 run as host processes (etcd, apiserver,
#             controller-manager, scheduler, kubelet, kube-proxy) with Debian's containerd,
#             CoreDNS as a pod, and a host-path StorageClass `standard`. Needs no container
#             registry: every image is built locally. Runs as ROOT, one per machine
#             (fixed ports 6443, 2379-2381, 10248-10259, NodePorts).
#
# Paths: state ${STRATA_E2E_STATE:-/var/lib/strata-e2e} (mode, kubeconfig, local cluster data);
#        cache ${STRATA_CACHE:-~/.cache/strata}/k8s (binaries from scripts/k8s-tools.sh, images).
# Progress goes to stderr with timestamps.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${STRATA_E2E_STATE:-/var/lib/strata-e2e}
export STRATA_CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
K8S_CACHE=$STRATA_CACHE/k8s
BIN=$K8S_CACHE/bin
IMAGE_CACHE=$K8S_CACHE/images
KIND_NAME=strata-e2e
KUBECONFIG_OUT=$STATE/kubeconfig

# Local cluster layout and network (single node).
LOCAL=$STATE/local
PKI=$LOCAL/pki
LOGS=$LOCAL/logs
PIDS=$LOCAL/pids
PV_DIR=$LOCAL/hostpath_pv
CONTAINERD_SOCK=$LOCAL/run/containerd.sock
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
PAUSE_IMAGE=registry.k8s.io/pause:3.10
COREDNS_VERSION=${COREDNS_VERSION:-1.12.1}
COREDNS_IMAGE=strata-e2e.local/coredns:$COREDNS_VERSION
# kube-controller-manager's host-path provisioner always creates PVs here.
HOSTPATH_PV_ROOT=/tmp/hostpath_pv
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy pv-permissions)

START=$SECONDS
log() { printf '[cluster.sh %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------- mode selection

have_docker_daemon() { command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; }

kubectl_bin() {
  if [[ -x $BIN/kubectl ]]; then echo "$BIN/kubectl"; elif command -v kubectl >/dev/null; then command -v kubectl; fi
}

# A KUBECONFIG that points at our own state is not a user's existing cluster.
user_cluster_reachable() {
  local kubectl
  [[ -n ${KUBECONFIG:-} && $KUBECONFIG != "$KUBECONFIG_OUT" ]] || return 1
  kubectl=$(kubectl_bin)
  [[ -n $kubectl ]] && timeout 20 "$kubectl" version --request-timeout=5s >/dev/null 2>&1
}

recorded_mode() { [[ -s $STATE/mode ]] && cat "$STATE/mode"; }

choose_mode() {
  local mode=${E2E_CLUSTER:-$(recorded_mode || true)}
  if [[ -z $mode ]]; then
    if user_cluster_reachable; then
      mode=existing
    elif have_docker_daemon && command -v kind >/dev/null; then
      mode=kind
    else
      mode=local
    fi
  fi
  case $mode in existing | kind | local) echo "$mode" ;; *) die "E2E_CLUSTER must be existing, kind or local (got '$mode')" ;; esac
}

# ---------------------------------------------------------------- shared helpers

kc() { "$(kubectl_bin)" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

# wait_until SECONDS WHAT COMMAND...: retries COMMAND every second.
wait_until() {
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what: not ready after ${limit}s${LOCAL_HINT:-}"
    sleep 1
  done
}

nodes_ready() {
  local ready
  ready=$(kc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ -n $ready && $ready != *False* && $ready != *Unknown* ]]
}

dns_endpoint_ready() {
  [[ -n $(kc -n kube-system get endpointslices -l kubernetes.io/service-name=kube-dns \
    -o jsonpath='{.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}') ]]
}

default_storage_class() {
  kc get storageclass -o jsonpath='{range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.metadata.name}{"\n"}{end}'
}

# The checks every mode ends with: node Ready, DNS serving, a default StorageClass.
wait_cluster_ready() {
  log "waiting for the node(s) to be Ready"
  wait_until 180 "node Ready" nodes_ready
  log "waiting for cluster DNS (kube-dns endpoints)"
  wait_until 180 "cluster DNS" dns_endpoint_ready
  local classes
  classes=$(default_storage_class)
  if ! grep -qx standard <<<"$classes"; then
    [[ $1 == existing ]] || die "no default StorageClass 'standard'"
    [[ -n $classes ]] || die "the existing cluster has no default StorageClass (PVCs would stay Pending)"
    log "warning: the default StorageClass is '$classes', not 'standard'"
  fi
}

ensure_client_tools() {
  # Local mode builds kubectl with the rest; elsewhere a kubectl/helm on PATH will do.
  if [[ -z $(kubectl_bin) ]]; then "$ROOT/scripts/k8s-tools.sh" control-plane; fi
  if [[ ! -x $BIN/helm ]] && ! command -v helm >/dev/null; then "$ROOT/scripts/k8s-tools.sh" helm; fi
}

# ---------------------------------------------------------------- deps (local)

DEB_PACKAGES=(containerd runc containernetworking-plugins iptables conntrack iproute2 kmod util-linux
  mount openssl python3 gcc libc6-dev inotify-tools)

cmd_deps() {
  local missing=() pkg
  for pkg in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "as root: apt-get install ${missing[*]}"
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  command -v go >/dev/null || [[ -x $BIN/coredns && -x $BIN/kubelet ]] ||
    die "the Go toolchain (>= 1.24) is needed once to build Kubernetes and CoreDNS"
}

# ---------------------------------------------------------------- images (local)

pack() { python3 "$ROOT/scripts/pack-image.py" "$@" >/dev/null; }

# Rebuilt only when an input is newer than the cached tarball.
build_images() {
  mkdir -p "$IMAGE_CACHE"
  local pause_src=$ROOT/e2e/images/pause.c pause_tar=$IMAGE_CACHE/pause-3.10.tar
  if [[ ! -s $pause_tar || $pause_src -nt $pause_tar ]]; then
    log "building the pause image ($PAUSE_IMAGE, static C)"
    gcc -static -Os -o "$IMAGE_CACHE/pause" "$pause_src"
    strip "$IMAGE_CACHE/pause"
    pack --tag "$PAUSE_IMAGE" --file "$IMAGE_CACHE/pause:/pause" --entrypoint /pause --user 65535:65535 -o "$pause_tar"
  fi
  local dns_tar=$IMAGE_CACHE/coredns-$COREDNS_VERSION.tar
  if [[ ! -s $dns_tar || $BIN/coredns -nt $dns_tar ]]; then
    log "packing the CoreDNS image ($COREDNS_IMAGE)"
    pack --tag "$COREDNS_IMAGE" --file "$BIN/coredns:/coredns" --entrypoint /coredns --user 0:0 \
      --expose 53 -o "$dns_tar"
  fi
}

# ---------------------------------------------------------------- PKI (local)

node_name() { hostname | tr '[:upper:]' '[:lower:]'; }

node_ip() {
  local ip
  ip=${HOST_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
  [[ -n $ip ]] || ip=$(ip -4 -o addr show scope global | awk '{sub("/.*", "", $4); print $4; exit}')
  [[ -n $ip ]] || die "no non-loopback IPv4 address (set HOST_IP)"
  echo "$ip"
}

# P-256 keys: a dozen RSA keys cost seconds of every cold `up`.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# issue NAME SUBJECT USAGE [SANS]: a key and a CA-signed certificate in $PKI.
issue() {
  local name=$1 subject=$2 usage=$3 sans=${4:-}
  new_key "$PKI/$name.key"
  {
    echo "basicConstraints = CA:FALSE"
    echo "keyUsage = critical, digitalSignature"
    echo "extendedKeyUsage = $usage"
    [[ -z $sans ]] || echo "subjectAltName = $sans"
  } >"$PKI/$name.ext"
  openssl req -new -key "$PKI/$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
      -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
}

# write_kubeconfig FILE CERT_NAME: a kubeconfig for one identity.
write_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: strata-e2e
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: strata-e2e
  context: {cluster: strata-e2e, user: $2}
current-context: strata-e2e
EOF
  chmod 600 "$1"
}

# Each component gets the identity kubeadm would give it, so RBAC and the Node
# authorizer see what they see in a real cluster.
make_pki() {
  [[ -s $PKI/admin.crt ]] && return 0
  log "creating the cluster CA and certificates"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  local node ip
  node=$(node_name)
  ip=$(node_ip)
  new_key "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj /CN=strata-e2e-ca -days 3650 \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$PKI/ca.crt" 2>/dev/null
  new_key "$PKI/service-account.key"
  openssl pkey -in "$PKI/service-account.key" -pubout -out "$PKI/service-account.pub" 2>/dev/null
  issue apiserver /CN=kube-apiserver serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$node,IP:127.0.0.1,IP:$API_SERVICE_IP,IP:$ip"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  issue controller-manager /CN=system:kube-controller-manager clientAuth
  issue scheduler /CN=system:kube-scheduler clientAuth
  issue kubelet "/O=system:nodes/CN=system:node:$node" clientAuth
  issue kube-proxy /CN=system:kube-proxy clientAuth
  issue admin "/O=system:masters/CN=strata-e2e-admin" clientAuth
  local who
  for who in controller-manager scheduler kubelet kube-proxy; do write_kubeconfig "$PKI/$who.kubeconfig" "$who"; done
  write_kubeconfig "$KUBECONFIG_OUT" admin
}

# ---------------------------------------------------------------- configs (local)

# install_file PATH: moves PATH.new over PATH only when the content differs, since
# kube-proxy exits when its config file changes under it.
install_file() { if cmp -s "$1.new" "$1"; then rm -f "$1.new"; else mv -f "$1.new" "$1"; fi; }

write_configs() {
  mkdir -p "$LOCAL/containerd" "$LOCAL/cni/net.d" "$LOCAL/cni/ipam" "$LOCAL/kubelet" "$LOCAL/run" "$PV_DIR"
  cat >"$LOCAL/containerd/config.toml.new" <<EOF
version = 2
root = "$LOCAL/containerd/root"
state = "$LOCAL/run/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root may lack CAP_SYS_RESOURCE (microVMs): then runc cannot lower the pause
  # container's oom_score_adj to -998 and every sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$LOCAL/cni/net.d"
EOF
  cat >"$LOCAL/cni/net.d/10-strata-e2e.conflist.new" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "strata-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$LOCAL/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$LOCAL/kubelet/config.yaml.new" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# No registry: an image garbage-collected or evicted here could never come back.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
serializeImagePulls: false
EOF
  cat >"$LOCAL/kube-proxy.yaml.new" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $(node_name)
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
  local f
  for f in "$LOCAL/containerd/config.toml" "$LOCAL/cni/net.d/10-strata-e2e.conflist" \
    "$LOCAL/kubelet/config.yaml" "$LOCAL/kube-proxy.yaml"; do
    install_file "$f"
  done
}

prepare_host() {
  modprobe br_netfilter 2>/dev/null || true
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 || log "warning: bridge-nf-call-iptables unavailable"
  # NodePorts on 127.0.0.1, as kind's port mappings allow.
  sysctl -qw net.ipv4.conf.all.route_localnet=1 || true
  if [[ ! -e $HOSTPATH_PV_ROOT ]]; then
    ln -s "$PV_DIR" "$HOSTPATH_PV_ROOT"
  elif [[ $(readlink "$HOSTPATH_PV_ROOT") != "$PV_DIR" ]]; then
    log "warning: $HOSTPATH_PV_ROOT exists and is not ours; PVs will be created in it"
  fi
}

# ---------------------------------------------------------------- processes (local)

# running NAME: the pid file names a live process that is still that program.
running() {
  local pid
  pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$2"
}

daemon_running() {
  case $1 in
    pv-permissions) running "$1" inotifywait ;;
    containerd) running "$1" /usr/bin/containerd ;;
    *) running "$1" "$BIN/$1" ;;
  esac
}

# start NAME COMMAND...: in its own session (so it outlives this script), logged.
start() {
  local name=$1
  shift
  if daemon_running "$name"; then return 0; fi
  log "starting $name"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
}

alive() { [[ -r /proc/$1/stat && $(cut -d' ' -f3 "/proc/$1/stat") != Z ]]; }

# stop NAME...: TERM to each daemon's whole session (pv-permissions is a pipeline),
# all at once, then KILL whatever still runs after 3 s: the state is wiped
# afterwards, and kube-apiserver's graceful shutdown alone takes over 15 s.
stop() {
  local name pid pids=()
  for name in "$@"; do
    pid=$(cat "$PIDS/$name.pid" 2>/dev/null) || continue
    if [[ -n $pid ]] && daemon_running "$name"; then
      log "stopping $name (pid $pid)"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$PIDS/$name.pid"
  done
  local deadline=$((SECONDS + 3)) waiting=1
  while ((waiting && SECONDS < deadline)); do
    sleep 0.2
    waiting=0
    for pid in "${pids[@]}"; do if alive "$pid"; then waiting=1; fi; done
  done
  for pid in "${pids[@]}"; do
    if alive "$pid"; then
      log "killing pid $pid"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

ctr_k8s() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

import_images() {
  local tar
  for tar in "$@"; do
    [[ -s $tar ]] || die "no such image tarball: $tar"
    ctr_k8s images import "$tar" >/dev/null
    log "loaded $(basename "$tar")"
  done
}

# ---------------------------------------------------------------- cluster add-ons (local)

apply_addons() {
  log "applying the StorageClass 'standard' and CoreDNS"
  kc apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: system:coredns}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: system:coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  # One directive per line: CoreDNS 1.12 rejects a one-line "health { lameduck 2s }".
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 2s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        forward . /etc/resolv.conf
        cache 30
        loop
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, initialDelaySeconds: 30}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: $DNS_SERVICE_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

# A real DNS query from the host to the kube-dns Service IP (through kube-proxy).
dns_answers() {
  python3 - "$DNS_SERVICE_IP" kubernetes.default.svc.cluster.local <<'PY'
import random, socket, struct, sys
server, name = sys.argv[1], sys.argv[2]
qid = random.randrange(65536)
question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.settimeout(2)
sock.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question, (server, 53))
reply = sock.recv(512)
rid, flags, _, answers = struct.unpack(">HHHH", reply[:8])
sys.exit(0 if rid == qid and flags & 0xF == 0 and answers > 0 else 1)
PY
}

# ---------------------------------------------------------------- up

up_local() {
  cmd_deps
  local target
  for target in control-plane node coredns helm; do "$ROOT/scripts/k8s-tools.sh" "$target"; done
  build_images
  mkdir -p "$LOCAL" "$LOGS" "$PIDS"
  LOCAL_HINT=" (logs: $LOGS)"
  make_pki
  write_configs
  prepare_host
  local ip node
  ip=$(node_ip)
  node=$(node_name)

  start containerd /usr/bin/containerd --config "$LOCAL/containerd/config.toml"
  wait_until 60 containerd ctr --address "$CONTAINERD_SOCK" version
  import_images "$IMAGE_CACHE/pause-3.10.tar" "$IMAGE_CACHE/coredns-$COREDNS_VERSION.tar"

  start etcd "$BIN/etcd" --name strata-e2e --data-dir "$LOCAL/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster strata-e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --unsafe-no-fsync=true
  wait_until 60 etcd python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:2381/health", timeout=2)'

  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$ip" \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/service-account.pub" \
    --service-account-signing-key-file="$PKI/service-account.key" --profiling=false
  wait_until 120 kube-apiserver kc get --raw /readyz

  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/service-account.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --enable-hostpath-provisioner=true --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$PKI/scheduler.kubeconfig" \
    --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false \
    --pod-max-in-unschedulable-pods-duration=10s
  # The host-path StorageClass binds claims at once: a pod the scheduler saw a moment before its
  # claim was Bound is parked as unschedulable, and the Bound event can be missed; retried after
  # 10 s (plus the 30 s flush period) instead of the default 5 minutes, which made a scale-out's
  # new shard wait 5.5 minutes in CI dry runs. (Deprecated flag, still in v1.33.)
  # The host-path provisioner makes PV directories root-owned 0750; the pods run as
  # non-root, so open each one up as it appears (kind's local-path PVs are 0777 too).
  chmod 0777 "$PV_DIR"/*/ 2>/dev/null || true
  # shellcheck disable=SC2016 # expanded by the inner bash
  start pv-permissions bash -c 'inotifywait -m -q -e create -e moved_to --format "%w%f" "$1" |
    while read -r dir; do [[ -d $dir ]] && chmod 0777 "$dir"; done' pv-permissions "$PV_DIR"
  start kubelet "$BIN/kubelet" --config="$LOCAL/kubelet/config.yaml" \
    --kubeconfig="$PKI/kubelet.kubeconfig" --root-dir="$LOCAL/kubelet/root" \
    --cert-dir="$LOCAL/kubelet/pki" --hostname-override="$node" --node-ip="$ip"
  start kube-proxy "$BIN/kube-proxy" --config="$LOCAL/kube-proxy.yaml"

  wait_until 120 "node $node registered" kc get node "$node"
  wait_until 60 "default ServiceAccount" kc -n default get serviceaccount default
  apply_addons
  wait_cluster_ready local
  log "checking that CoreDNS resolves kubernetes.default.svc.cluster.local"
  wait_until 60 "DNS query to $DNS_SERVICE_IP" dns_answers
}

up_kind() {
  if kind get clusters 2>/dev/null | grep -qx "$KIND_NAME"; then
    log "kind cluster $KIND_NAME exists"
  else
    log "creating kind cluster $KIND_NAME"
    kind create cluster --name "$KIND_NAME" --wait 2m --kubeconfig "$KUBECONFIG_OUT"
  fi
  kind export kubeconfig --name "$KIND_NAME" --kubeconfig "$KUBECONFIG_OUT"
  wait_cluster_ready kind
}

up_existing() {
  log "using the existing cluster of $KUBECONFIG (context $("$(kubectl_bin)" config current-context))"
  "$(kubectl_bin)" config view --raw --flatten >"$KUBECONFIG_OUT.new"
  chmod 600 "$KUBECONFIG_OUT.new"
  mv -f "$KUBECONFIG_OUT.new" "$KUBECONFIG_OUT"
  wait_cluster_ready existing
}

cmd_up() {
  local mode recorded
  mode=$(choose_mode)
  recorded=$(recorded_mode || true)
  [[ -z $recorded || $recorded == "$mode" ]] ||
    die "a '$recorded' cluster is recorded in $STATE: run '$0 down' first"
  log "cluster mode: $mode"
  # Checked before the mode is recorded, so a failed attempt does not pin it.
  case $mode in
    local) [[ $(id -u) == 0 ]] || die "the local cluster runs as root" ;;
    kind) { command -v kind >/dev/null && have_docker_daemon; } || die "kind needs 'kind' on PATH and a running docker daemon" ;;
    existing) ensure_client_tools; user_cluster_reachable || die "KUBECONFIG (${KUBECONFIG:-unset}) does not reach a cluster" ;;
  esac
  mkdir -p "$STATE"
  echo "$mode" >"$STATE/mode"
  [[ $mode == local ]] || ensure_client_tools
  "up_$mode"
  log "cluster ready in $((SECONDS - START))s; eval \"\$($0 env)\" to use it"
}

# ---------------------------------------------------------------- load

cmd_load() {
  (($#)) || die "usage: $0 load IMAGE.tar..."
  local mode tar
  mode=$(recorded_mode) || die "no cluster: run '$0 up' first"
  for tar in "$@"; do [[ -s $tar ]] || die "no such image tarball: $tar"; done
  case $mode in
    local)
      daemon_running containerd || die "the local cluster's containerd is not running: run '$0 up'"
      import_images "$@"
      ;;
    kind)
      for tar in "$@"; do kind load image-archive --name "$KIND_NAME" "$tar"; done
      ;;
    existing)
      log "an existing cluster pulls images from a registry: push $* there (or preload them on its nodes)"
      if [[ ${E2E_IMAGES_PRELOADED:-0} == 1 ]]; then
        log "E2E_IMAGES_PRELOADED=1: assuming the cluster can pull them"
      else
        die "set E2E_IMAGES_PRELOADED=1 once the cluster can pull these images"
      fi
      ;;
  esac
}

# ---------------------------------------------------------------- down

# Every KUBE-* and CNI-* chain, and the jumps into them, in the tables kube-proxy,
# the kubelet and the CNI plugins write (kube-proxy --cleanup leaves the kubelet's).
flush_iptables() {
  local tool table rule chain
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for table in filter nat mangle; do
      while read -r rule; do
        eval "$tool -t $table -D ${rule#-A }" 2>/dev/null || true
      done < <($tool -t "$table" -S 2>/dev/null | grep -E -- '-j (KUBE|CNI)-' | grep -vE '^-A (KUBE|CNI)-' || true)
      for chain in $($tool -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}'); do
        $tool -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $($tool -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}'); do
        $tool -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# Our shims: containerd-shim-runc-v2 processes started with our containerd's address.
our_shims() {
  local proc
  for proc in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$proc/cmdline" | grep -q -- "containerd-shim.*-address $CONTAINERD_SOCK" &&
      echo "${proc#/proc/}"
  done
  return 0
}

down_local() {
  local name pid id cgroup mounts
  # The control plane first, so nothing restarts the pods removed below.
  stop kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd pv-permissions
  if daemon_running containerd; then
    log "removing pod containers"
    for id in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_k8s containers ls -q 2>/dev/null); do
      ctr_k8s tasks delete -f "$id" >/dev/null 2>&1 || true
      ctr_k8s containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  for pid in $(our_shims); do kill -KILL "$pid" 2>/dev/null || true; done
  # Anything still in the kubelet's pod cgroups belongs to a pod of ours.
  for cgroup in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $cgroup ]] || continue
    while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done < <(find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done
  sleep 0.5
  for cgroup in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    if [[ -d $cgroup ]]; then find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  for name in /run/netns/cni-*; do
    [[ -e $name ]] || continue
    umount "$name" 2>/dev/null || true
    rm -f "$name"
  done
  mounts=$(findmnt -rn -o TARGET | grep "^$STATE/" | sort -r || true)
  for name in $mounts; do umount -l "$name" 2>/dev/null || true; done
  if [[ -x $BIN/kube-proxy ]]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  flush_iptables
  ip link delete cni0 2>/dev/null || true
  if [[ -L $HOSTPATH_PV_ROOT && $(readlink "$HOSTPATH_PV_ROOT") == "$PV_DIR" ]]; then rm -f "$HOSTPATH_PV_ROOT"; fi
}

cmd_down() {
  local mode
  mode=${E2E_CLUSTER:-$(recorded_mode || true)}
  [[ -n $mode || ! -d $LOCAL ]] || mode=local
  case $mode in
    local) down_local ;;
    kind) if command -v kind >/dev/null; then kind delete cluster --name "$KIND_NAME"; fi ;;
    existing) log "existing cluster: left as it is" ;;
    "") log "no cluster recorded in $STATE: nothing to stop" ;;
    *) die "unknown mode '$mode'" ;;
  esac
  # --one-file-system: never follow a mount that survived into someone else's data.
  if [[ -d $STATE ]]; then rm -rf --one-file-system "$STATE"; fi
  log "cluster down in $((SECONDS - START))s"
}

# ---------------------------------------------------------------- status / env

cmd_status() {
  local mode name
  mode=$(recorded_mode) || { echo "no cluster (state: $STATE)"; return 0; }
  echo "mode: $mode"
  echo "kubeconfig: $KUBECONFIG_OUT"
  if [[ $mode == local ]]; then
    for name in "${DAEMONS[@]}"; do
      if daemon_running "$name"; then echo "$name: running (pid $(cat "$PIDS/$name.pid"))"; else echo "$name: stopped"; fi
    done
  fi
  kc get nodes -o wide 2>/dev/null || echo "the API server does not answer"
}

cmd_env() {
  recorded_mode >/dev/null || die "no cluster: run '$0 up' first"
  printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_OUT"
  # shellcheck disable=SC2016 # $PATH is for the caller's shell to expand
  printf 'export PATH=%q:"$PATH"\n' "$BIN"
}

case ${1:-} in
  up) cmd_up ;;
  load) shift; cmd_load "$@" ;;
  env) cmd_env ;;
  down) cmd_down ;;
  status) cmd_status ;;
  deps) cmd_deps ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
