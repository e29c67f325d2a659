#!/usr/bin/env bash
# Runs the deterministic simulator (tests/sim, issue #14) for a budget of seeds:
#   scripts/sim.sh [SEEDS [SPOOL_SIM_ARGS...]]      (SEEDS: default 2000)
# Builds spool-sim in release, runs `spool-sim --seeds SEEDS` (the cluster world), then
# `spool-sim --world txn --seeds TXN_SEEDS` (the transaction world, issue 18; TXN_SEEDS from the
# environment, default 1000: about 7 s at ~140 seeds/s; 0 skips it), prints their RESULT lines
# and, for each violating seed, the violation and the command that replays it (with its whole
# trace). Exits non-zero when any seed of either world violates. Further arguments go to the
# cluster run as they are (e.g. `--planted-bug skip-fsync`, to see a failure); TXN_SIM_ARGS go to
# the txn run (e.g. `TXN_SIM_ARGS='--planted-bug marker-on-some-partitions'`). Extra cargo flags
# (e.g. --offline) go in SIM_CARGO_FLAGS; the full output is kept in a log whose path is printed
# on failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seeds="${1:-2000}"
shift || true
if ! [[ "$seeds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/sim.sh [SEEDS]   (SEEDS: a positive number of seeds, default 2000)" >&2
  exit 2
fi
txn_seeds="${TXN_SEEDS:-1000}"
if ! [[ "$txn_seeds" =~ ^[0-9]+$ ]]; then
  echo "sim.sh: TXN_SEEDS must be a number of seeds (0 skips the txn world)" >&2
  exit 2
fi
# shellcheck disable=SC2206 # word splitting of the arguments is the point
txn_args=(${TXN_SIM_ARGS:-})
# shellcheck disable=SC2206 # word splitting of the flags is the point
cargo_flags=(${SIM_CARGO_FLAGS:-})

echo "== simulator: building spool-sim (release)"
cargo build --release --locked "${cargo_flags[@]}" -p spool-sim

target_dir="${CARGO_TARGET_DIR:-target}"
log="$(mktemp -t spool-sim.XXXXXX.log)"
echo "== simulator: $seeds seeds (output in $log)"
status=0
"$target_dir/release/spool-sim" --seeds "$seeds" "$@" >"$log" 2>&1 || status=$?
if [[ "$txn_seeds" -gt 0 ]]; then
  echo "== simulator: $txn_seeds txn-world seeds"
  txn_status=0
  "$target_dir/release/spool-sim" --world txn --seeds "$txn_seeds" "${txn_args[@]}" >>"$log" 2>&1 ||
    txn_status=$?
  if [[ $status -eq 0 ]]; then
    status=$txn_status
  fi
fi

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
