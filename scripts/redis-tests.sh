#!/usr/bin/env bash
# Redis 7.0.15's own test suite (external-server mode) against the release strata-node, through
# ../shared/redis-tests/run.sh when that directory is there (it is not part of this repository:
# on a machine without it this step says so and passes). Prints run.sh's per-unit table and fails
# when fewer tests pass than FLOOR, the count the code on main reached: a ratchet, raised as
# commands land (issue 13's goal is 95 % of what redis-server passes, baseline.txt beside run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
FLOOR=${REDIS_TESTS_FLOOR:-1600}
SUITE=${REDIS_TESTS_DIR:-../shared/redis-tests}
if [[ ! -x $SUITE/run.sh ]]; then
  echo "redis-tests: SKIPPED — $SUITE/run.sh not found (Redis's suite is not part of this repository)"
  exit 0
fi
cargo build --release -q -p strata-node
BIN=${CARGO_TARGET_DIR:-target}/release/strata-node
# The release binary carries no test hook (they live behind the test-hooks feature).
if hooks=$(strings "$BIN" | grep -c STRATA_TEST_); then
  echo "redis-tests: the release strata-node names STRATA_TEST_ $hooks times: a test hook leaked into it" >&2
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$SUITE/run.sh" -- "$BIN" --port '{port}' --metrics-port 0 | tee "$out"
passed=$(sed -n 's/^redis-tests: \([0-9]*\) passed.*/\1/p' "$out" | tail -1)
if [[ -z $passed ]]; then
  echo "redis-tests: run.sh printed no result line" >&2
  exit 1
fi
if ((passed < FLOOR)); then
  echo "redis-tests: $passed passed, fewer than the floor of $FLOOR: a change broke tests that passed" >&2
  exit 1
fi
echo "redis-tests: $passed passed (floor $FLOOR)"
