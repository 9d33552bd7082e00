#!/usr/bin/env bash
# Builds the Kubernetes tools the operator's tests and the e2e need, once,
# from the Go module proxy (Kubernetes ships no Debian packages, and these
# machines reach no container or binary registry), into a cache outside the
# repository: $STRATA_CACHE/k8s/bin (default ~/.cache/strata/k8s/bin).
#
#   scripts/k8s-tools.sh [control-plane|node|helm|coredns|all|path]
#     control-plane  kube-apiserver, etcd, kubectl   (controller tests)
#     node           kube-controller-manager, kube-scheduler, kubelet, kube-proxy (e2e cluster)
#     helm           helm
#     coredns        coredns with the plugins a cluster DNS needs (e2e cluster)
#     all            everything above but coredns (default)
#     path           print the bin directory
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod points the k8s.io/*
# staging modules at ./staging), so a small wrapper module requires it and
# redirects each staging module to its published v0.<minor>.<patch> release.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.33.13}
ETCD_VERSION=${ETCD_VERSION:-3.5.21}
HELM_VERSION=${HELM_VERSION:-3.18.6}
COREDNS_VERSION=${COREDNS_VERSION:-1.12.1}
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}/k8s
BIN=$CACHE/bin
MINOR=$(cut -d. -f2 <<<"$K8S_VERSION")
PATCH=$(cut -d. -f3 <<<"$K8S_VERSION")

say() { echo "[k8s-tools $(date +%T)] $*" >&2; }

need_go() {
  command -v go >/dev/null || { say "Go toolchain (>= 1.24) required: apt-get install golang or https://go.dev/dl"; exit 1; }
}

have() { for b in "$@"; do [[ -x $BIN/$b ]] || return 1; done; [[ -e $BIN/.k8s-$K8S_VERSION ]]; }

wrapper_module() {
  local dir=$CACHE/src/k8s-$K8S_VERSION
  mkdir -p "$dir"
  if [[ ! -s $dir/go.mod ]]; then
    local upstream
    upstream=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" \
      | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
    [[ -s $upstream ]] || { say "cannot fetch go.mod of k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
    {
      printf 'module strata.local/k8s-tools\n\ngo 1.24.0\n\nrequire (\n'
      printf '\tk8s.io/kubernetes v%s\n\tgo.etcd.io/etcd/server/v3 v%s\n)\n\nreplace (\n' "$K8S_VERSION" "$ETCD_VERSION"
      awk -v v="v0.$MINOR.$PATCH" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }' "$upstream"
      printf ')\n'
    } >"$dir/go.mod"
    cat >"$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the commands this module builds.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    say "resolving modules for Kubernetes v$K8S_VERSION and etcd v$ETCD_VERSION"
    (cd "$dir" && go mod tidy)
  fi
  echo "$dir"
}

# Version stamps matter: without them the apiserver reports v0.0.0 and
# helm's kubeVersion checks fail.
ldflags() {
  local f="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
    f+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$f"
}

build_k8s() {
  local dir pkgs=() b
  have "$@" && return 0
  need_go
  dir=$(wrapper_module)
  mkdir -p "$BIN"
  for b in "$@"; do [[ $b == etcd ]] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  if ((${#pkgs[@]})); then
    say "building ${pkgs[*]##*/} (cold: 10-30 min on 2 cores; cached afterwards)"
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$(ldflags)" -o "$BIN/" "${pkgs[@]}")
  fi
  if [[ " $* " == *" etcd "* ]]; then
    say "building etcd v$ETCD_VERSION"
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
  fi
  touch "$BIN/.k8s-$K8S_VERSION"
}

build_helm() {
  [[ -x $BIN/helm && -e $BIN/.helm-$HELM_VERSION ]] && return 0
  need_go
  mkdir -p "$BIN"
  say "building helm v$HELM_VERSION"
  GOBIN=$BIN CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  touch "$BIN/.helm-$HELM_VERSION"
}

# Only the plugins a cluster DNS uses: the default CoreDNS build links about 50,
# several with cloud SDKs, all of which cost build time and image size.
build_coredns() {
  [[ -x $BIN/coredns && -e $BIN/.coredns-$COREDNS_VERSION ]] && return 0
  need_go
  local dir=$CACHE/src/coredns-$COREDNS_VERSION plugin
  mkdir -p "$dir" "$BIN"
  printf 'module strata.local/coredns\n\ngo 1.24.0\n\nrequire github.com/coredns/coredns v%s\n' "$COREDNS_VERSION" >"$dir/go.mod"
  {
    printf '// Command coredns is CoreDNS with a trimmed plugin set; the server\n'
    printf '// orders plugins itself (core/dnsserver), so import order is irrelevant.\n'
    printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n\n'
    for plugin in cache errors forward health kubernetes loadbalance log loop ready reload; do
      printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$plugin"
    done
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } >"$dir/main.go"
  say "building coredns v$COREDNS_VERSION (cold: ~4 min; cached afterwards)"
  (cd "$dir" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .)
  touch "$BIN/.coredns-$COREDNS_VERSION"
}

case ${1:-all} in
  control-plane) build_k8s kube-apiserver kubectl etcd ;;
  node) build_k8s kube-controller-manager kube-scheduler kubelet kube-proxy ;;
  helm) build_helm ;;
  coredns) build_coredns ;;
  all) build_k8s kube-apiserver kubectl etcd kube-controller-manager kube-scheduler kubelet kube-proxy; build_helm ;;
  path) echo "$BIN" ;;
  -h | --help) sed -n '2,17p' "$0" ;;
  *) say "unknown target '$1' (control-plane|node|helm|coredns|all|path)"; exit 2 ;;
esac
