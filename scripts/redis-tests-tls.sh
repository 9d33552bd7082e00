#!/usr/bin/env bash
# Redis 7.0.15's own TCL test suite in TLS mode (test_helper.tcl --tls), external-server mode, one
# fresh server per unit, through a patched temporary copy of ../shared/redis-tests/run.sh:
#
#   redis-tests-tls.sh [--units "unit/expire ..."] [--cap SECONDS] [--verbose] -- CMD...
#       "{port}" in CMD is the TLS port, "{tlsdir}" the certificate directory (ca.crt server.crt
#       server.key client.crt client.key redis.crt redis.key redis.dh), e.g.
#       -- strata-node --port 0 --tls-port {port} --tls-cert-file {tlsdir}/server.crt \
#          --tls-key-file {tlsdir}/server.key --tls-ca-cert-file {tlsdir}/ca.crt --metrics-port 0
#   redis-tests-tls.sh --baseline     the same against redis-server with TLS; writes the TLS baseline
#
# The copy gets fresh openssl certificates in tests/tls/ (a CA, a server certificate for
# 127.0.0.1/localhost, a client one, one for both uses), and its run.sh is patched so that redis-cli and the
# TCL client speak TLS; run.sh's own unit list gains unit/tls. Counting is run.sh's: a test that
# passes against redis-server over TLS (the TLS baseline: $REDIS_TESTS_TLS_BASELINE, default
# /tmp/redis-tests-tls-baseline.txt; without it, the plain baseline.txt) and did not pass here
# counts as failed. The last line is "redis-tests: N passed, N failed".
# Needs tclsh, redis-cli, openssl and Tcl's TLS package (apt-get install -y tcl-tls).
set -euo pipefail
SUITE=${REDIS_TESTS:-$(dirname "$0")/../../shared/redis-tests}
TLS_BASELINE=${REDIS_TESTS_TLS_BASELINE:-/tmp/redis-tests-tls-baseline.txt}
[[ -x $SUITE/run.sh ]] || { echo "redis-tests-tls: $SUITE/run.sh not found (set REDIS_TESTS)" >&2; exit 2; }
# (tclsh reading stdin exits 0 after an error: the script says how it went.)
echo 'if {[catch {package require tls 1.6}]} {exit 1}' | tclsh >/dev/null 2>&1 ||
  { echo "redis-tests-tls: Tcl TLS package missing: apt-get install -y tcl-tls" >&2; exit 2; }
command -v openssl >/dev/null || { echo "redis-tests-tls: openssl missing (apt-get install -y openssl)" >&2; exit 2; }

ARGS=() BASELINE=0
while [[ $# -gt 0 && $1 != -- ]]; do
  case "$1" in
    --baseline) BASELINE=1; ARGS+=("$1"); shift ;;
    --units|--cap) ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[[ ${1:-} == -- ]] && shift

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redis-tests-tls.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp -r "$SUITE/." "$WORK/"
T=$WORK/tests/tls
mkdir -p "$T"

# Certificates, as Redis's utils/gen-test-certs.sh makes them.
ssl() { openssl "$@" 2>/dev/null; }
ssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 30 -subj "/O=Strata/CN=Test CA" \
  -keyout "$T/ca.key" -out "$T/ca.crt"
gen() { # name extendedKeyUsage [key to reuse]
  [[ -n ${3:-} ]] && cp "$T/$3.key" "$T/$1.key" || ssl genpkey -algorithm RSA -out "$T/$1.key"
  ssl req -new -key "$T/$1.key" -subj "/O=Strata/CN=$1" -out "$T/$1.csr"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\nkeyUsage=digitalSignature,keyEncipherment\n' "$2" >"$T/$1.ext"
  ssl x509 -req -sha256 -days 30 -in "$T/$1.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" -CAcreateserial \
    -extfile "$T/$1.ext" -out "$T/$1.crt"
}
gen server serverAuth
gen client clientAuth
# For unit/tls ("tls-cert-file is also used as a client cert"); server.key's key, since in external
# mode the runner sets tls-cert-file before tls-key-file and a new key would not match meanwhile.
gen redis serverAuth,clientAuth server
ssl genpkey -genparam -algorithm DH -pkeyopt group:ffdhe2048 -out "$T/redis.dh"  # RFC 7919 group: instant

# run.sh speaking TLS: redis-cli and test_helper.tcl get TLS flags, --baseline keeps a command
# given after --, and its unit list gains unit/tls.
CLI="redis-cli --tls --cacert $T/ca.crt --cert $T/client.crt --key $T/client.key"
sed -i -e "s|redis-cli -p|$CLI -p|g" -e 's|tests/test_helper.tcl --host|tests/test_helper.tcl --tls --host|' \
  -e 's|^if \[ "$BASELINE" = 1 \]; then$|if [ "$BASELINE" = 1 ] \&\& [ $# -eq 0 ]; then|' \
  -e 's|^ALL="|ALL="unit/tls |' "$WORK/run.sh"
if [[ $(grep -c -- "--tls --cacert" "$WORK/run.sh") != 2 ]] || ! grep -q -- '--tls --host' "$WORK/run.sh" ||
   ! grep -q '\[ \$# -eq 0 \]' "$WORK/run.sh" || ! grep -q '^ALL="unit/tls' "$WORK/run.sh"; then
  echo "redis-tests-tls: $SUITE/run.sh changed shape; the TLS patch no longer applies" >&2; exit 2
fi

if [[ $BASELINE == 1 ]]; then
  set -- redis-server --port 0 --tls-port '{port}' --tls-cert-file '{tlsdir}/server.crt' \
    --tls-key-file '{tlsdir}/server.key' --tls-ca-cert-file '{tlsdir}/ca.crt' \
    --tls-dh-params-file '{tlsdir}/redis.dh' --bind 127.0.0.1 --save '' --appendonly no --dir /tmp
elif [[ -f $TLS_BASELINE ]]; then
  cp "$TLS_BASELINE" "$WORK/baseline.txt"
else
  echo "redis-tests-tls: no TLS baseline at $TLS_BASELINE (run --baseline first); counting against the plain baseline.txt" >&2
fi
[[ $# -gt 0 ]] || { echo "redis-tests-tls: give the server command after -- (see --help)" >&2; exit 2; }

"$WORK/run.sh" "${ARGS[@]}" -- "${@//\{tlsdir\}/$T}"
if [[ $BASELINE == 1 ]]; then cp "$WORK/baseline.txt" "$TLS_BASELINE" && echo "TLS baseline copied to $TLS_BASELINE"; fi
