#!/usr/bin/env bash
# The whole e2e run, as `make e2e` (and so `make test` and CI) does it: build the tools, bring a
# cluster up (e2e/cluster.sh picks KUBECONFIG, kind or a local one), build and load the images,
# run the suite, and take the cluster down again even when something fails.
#   E2E_KEEP=1 e2e/run.sh      leaves the cluster running afterwards (for debugging)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
IMAGES=${IMAGES:-$CACHE/images}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
say() { echo "[e2e/run $(date +%T)] $*" >&2; }
start=$(date +%s)

./scripts/k8s-tools.sh all
teardown() {
  local rc=$?
  if [[ -n ${E2E_KEEP:-} ]]; then
    say "E2E_KEEP set: the cluster keeps running ($(./e2e/cluster.sh env | head -1))"
  else
    ./e2e/cluster.sh down || true
  fi
  say "finished in $(( $(date +%s) - start ))s with exit code $rc"
  exit $rc
}
trap teardown EXIT
./e2e/cluster.sh up
./scripts/build-images.sh "$IMAGES"
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
./e2e/cluster.sh load "$IMAGES/strata-node-$VERSION.tar" "$IMAGES/strata-operator-$VERSION.tar" \
  "$IMAGES/strata-e2e-client-$VERSION.tar"
eval "$(./e2e/cluster.sh env)"
say "running the suite against $KUBECONFIG"
STRATA_E2E_KUBECONFIG=$KUBECONFIG cargo test -p strata-e2e --features e2e -- --nocapture
