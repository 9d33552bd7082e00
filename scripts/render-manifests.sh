#!/usr/bin/env bash
# Renders manifests/install.yaml, the `kubectl apply` install bundle, from the Helm chart so the
# two can never drift apart: the CRD, the operator's RBAC and Deployment, in namespace strata-system.
#
#   scripts/render-manifests.sh           (re)write manifests/install.yaml
#   scripts/render-manifests.sh --check   exit 1 when the committed file differs from a fresh render
#
# Uses helm from scripts/k8s-tools.sh (built once into ~/.cache/strata/k8s/bin), or $HELM if set.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHART=charts/strata-operator
OUT=manifests/install.yaml
RELEASE=strata-operator
NAMESPACE=strata-system
# helm template knows no cluster and assumes Kubernetes v1.20, which the chart's kubeVersion
# (>=1.33) refuses; render for the oldest version the chart supports.
KUBE_VERSION=1.33.0

say() { echo "render-manifests: $*" >&2; }

find_helm() {
  if [[ -n ${HELM:-} ]]; then
    echo "$HELM"
    return
  fi
  local bin
  bin=$("$ROOT/scripts/k8s-tools.sh" path)/helm
  [[ -x $bin ]] || "$ROOT/scripts/k8s-tools.sh" helm >&2
  echo "$bin"
}

render() {
  local helm=$1
  cat <<EOF
# GENERATED FILE, do not edit: scripts/render-manifests.sh renders it from $CHART with
#   helm template $RELEASE $CHART --namespace $NAMESPACE --include-crds
# Change the chart (or the CRD via \`make crds\`), then regenerate with \`make manifests\`.
#
# Install:   kubectl apply -f $OUT
# Uninstall: see manifests/README.md (deleting the CRD deletes every CacheCluster).
---
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
  labels:
    app.kubernetes.io/part-of: strata
    # The operator pod meets the restricted Pod Security Standard; keep the namespace that strict.
    pod-security.kubernetes.io/enforce: restricted
EOF
  (cd "$ROOT" && "$helm" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --include-crds \
    --kube-version "$KUBE_VERSION")
}

main() {
  local check=false
  case ${1:-} in
    "") ;;
    --check) check=true ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) say "unknown argument '$1' (expected --check or nothing)"; exit 2 ;;
  esac

  local helm fresh
  helm=$(find_helm)
  fresh=$(mktemp)
  # The trap runs after main returns, when locals are gone: expand the path now.
  # shellcheck disable=SC2064
  trap "rm -f '$fresh'" EXIT
  render "$helm" >"$fresh"

  if ! $check; then
    mkdir -p "$ROOT/$(dirname "$OUT")"
    cp "$fresh" "$ROOT/$OUT"
    say "wrote $OUT"
    return
  fi
  if [[ ! -f $ROOT/$OUT ]]; then
    say "$OUT is missing. Generate it with: make manifests"
    exit 1
  fi
  if ! cmp -s "$fresh" "$ROOT/$OUT"; then
    say "$OUT is stale: it no longer matches what $CHART renders (first differences below)."
    diff -u --label "$OUT (committed)" --label "$OUT (rendered now)" "$ROOT/$OUT" "$fresh" | head -n 40 >&2 || true
    say "Regenerate it with: make manifests"
    exit 1
  fi
  say "$OUT is up to date"
}

main "$@"
