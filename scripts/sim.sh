#!/usr/bin/env bash
# Runs the deterministic simulator (tests/sim, issue #14) for a budget of seeds:
#   scripts/sim.sh [SEEDS [SPOOL_SIM_ARGS...]]      (SEEDS: default 2000)
# Builds spool-sim in release, runs `spool-sim --seeds SEEDS`, prints its RESULT lines and, for
# each violating seed, the violation and the command that replays it (with its whole trace).
# Exits non-zero when any seed violates. Further arguments go to spool-sim as they are (e.g.
# `--planted-bug skip-fsync`, to see a failure). Extra cargo flags (e.g. --offline) go in
# SIM_CARGO_FLAGS; the full output is kept in a log whose path is printed on failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seeds="${1:-2000}"
shift || true
if ! [[ "$seeds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/sim.sh [SEEDS]   (SEEDS: a positive number of seeds, default 2000)" >&2
  exit 2
fi
# shellcheck disable=SC2206 # word splitting of the flags is the point
cargo_flags=(${SIM_CARGO_FLAGS:-})

echo "== simulator: building spool-sim (release)"
cargo build --release --locked "${cargo_flags[@]}" -p spool-sim

target_dir="${CARGO_TARGET_DIR:-target}"
log="$(mktemp -t spool-sim.XXXXXX.log)"
echo "== simulator: $seeds seeds (output in $log)"
status=0
"$target_dir/release/spool-sim" --seeds "$seeds" "$@" >"$log" 2>&1 || status=$?

grep -E '^(VIOLATION|replay:) ' "$log" || true
grep -E '^RESULT ' "$log" || true
if [[ $status -ne 0 ]]; then
  if ! grep -q '^VIOLATION ' "$log"; then
    # Not a violation: the simulator itself failed (bad arguments, a crash).
    tail -n 40 "$log" >&2
  fi
  echo "sim.sh: the simulator failed (exit $status); the trace tails are in $log;" \
    "replay a seed with the command printed after its VIOLATION line" >&2
  exit 1
fi
rm -f "$log"
