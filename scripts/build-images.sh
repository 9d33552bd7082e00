#!/usr/bin/env bash
# Builds the strata-node and strata-operator container images (and strata-e2e-client, the e2e
# suite's in-cluster client) without Docker or a registry:
# static binaries (glibc, +crt-static) packed FROM scratch by scripts/pack-image.py into
# docker-archive tarballs, tagged with the workspace version (never `latest`).
#
#   scripts/build-images.sh [OUT_DIR]     default: $STRATA_CACHE/images (~/.cache/strata/images)
#
# Load them with `docker load -i`, `ctr -n k8s.io images import`, or `kind load image-archive`.
# With Docker, `docker build --target strata-node .` (see Dockerfile) gives the same images.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
OUT=${1:-$CACHE/images}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
TRIPLE=$(uname -m)-unknown-linux-gnu
case $(uname -m) in x86_64) ARCH=amd64 ;; aarch64) ARCH=arm64 ;; *) ARCH=$(uname -m) ;; esac
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n $VERSION ]] || { echo "build-images: no version in Cargo.toml" >&2; exit 1; }

say() { echo "[build-images $(date +%T)] $*" >&2; }
say "static release build for $TRIPLE (version $VERSION)"
# A separate target triple keeps the static build from invalidating the normal one.
# No debug info in images (the release profile keeps it for local profiling).
CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo \
  RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$TRIPLE" \
  -p strata-node --bin strata-node -p strata-operator --bin strata-operator -p strata-e2e --bin e2e-client
BIN=$CARGO_TARGET_DIR/$TRIPLE/release
for b in strata-node strata-operator e2e-client; do
  if ldd "$BIN/$b" 2>&1 | grep -q '=>'; then
    say "$b is dynamically linked; a FROM scratch image needs a static binary"; exit 1
  fi
done

REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
common=(--user 65532:65532 --arch "$ARCH"
  --label "org.opencontainers.image.version=$VERSION"
  --label "org.opencontainers.image.revision=$REV"
  --label "org.opencontainers.image.source=strata"
  --label "org.opencontainers.image.licenses=Apache-2.0")
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
./scripts/pack-image.py --tag "strata-node:$VERSION" --file "$BIN/strata-node:/strata-node" \
  --entrypoint /strata-node --cmd=--bind --cmd=0.0.0.0 --expose 6379 --expose 9121 "${common[@]}" \
  -o "$OUT/strata-node-$VERSION.tar"
./scripts/pack-image.py --tag "strata-operator:$VERSION" --file "$BIN/strata-operator:/strata-operator" \
  --entrypoint /strata-operator --expose 8080 "${common[@]}" -o "$OUT/strata-operator-$VERSION.tar"
./scripts/pack-image.py --tag "strata-e2e-client:$VERSION" --file "$BIN/e2e-client:/e2e-client" \
  --entrypoint /e2e-client "${common[@]}" -o "$OUT/strata-e2e-client-$VERSION.tar"
say "images in $OUT"
