#!/usr/bin/env bash
# Installs the system packages tests and benchmarks need, when missing.
# Debian/Ubuntu: redis-server and redis-tools (the reference server for the
# differential tests, redis-cli and redis-benchmark, built with TLS); openssl (the TLS tests'
# certificates, node/tests/tls.rs; the operator
# tests' API server signs service-account tokens with a fresh key); git (Go
# module fetches); prometheus (Debian's 2.42, with promtool: scripts/check-dashboards.sh runs it as
# a process on a free port, so the daemon the package may start on :9090 is not used), curl, and
# Debian's python3 with python3-yaml and python3-matplotlib (the dashboards check and its PNGs) and
# python3-seccomp (node/tests/io_engine_fallback.rs runs the node with io_uring refused);
# tcl (Redis's own test suite, scripts/redis-tests.sh); fuse3 when not root (node/tests/power_loss.rs
# mounts a FUSE file system: root mounts it with /dev/fuse directly, anyone else through fusermount3).
# The Kubernetes binaries and Helm come from
# scripts/k8s-tools.sh, which needs Go >= 1.24 (https://go.dev/dl).
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
command -v openssl >/dev/null || missing+=(openssl)
command -v git >/dev/null || missing+=(git)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v promtool >/dev/null || missing+=(prometheus)
command -v curl >/dev/null || missing+=(curl)
command -v tclsh >/dev/null || missing+=(tcl)
[[ $(id -u) -eq 0 ]] || command -v fusermount3 >/dev/null || missing+=(fuse3)
/usr/bin/python3 -c 'import yaml' 2>/dev/null || missing+=(python3 python3-yaml)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || missing+=(python3 python3-matplotlib)
/usr/bin/python3 -c 'import seccomp' 2>/dev/null || missing+=(python3 python3-seccomp)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u)
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true
