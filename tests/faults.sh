#!/usr/bin/env bash
# The fault harness (issue 15): Jepsen-style runs of three real `spool serve` processes under a
# workload and a nemesis, checked afterwards.
#
#   tests/faults.sh --runs N --seconds S [--seed X] [--from-run I] [--workload queue|acks1|txn|ctp]
#                   [--nemesis KIND[,KIND]] [--negative-control] [--release]
#
# Builds `spool` and `spool-faults` (debug unless --release), then runs `spool-faults` with the
# other arguments (tests/src/bin/spool-faults.rs says what each does). Every run starts fresh
# brokers on 127.0.x.y addresses, is bounded in time, and kills only its own processes by PID.
# Needs root for the partition (iptables) and disk-full (loop mount) nemeses; without it those
# are skipped with a message. Results: one RUN line per run, RESULT lines at the end, each run's
# JSON (and, for a failed run, its brokers' logs) under $SPOOL_FAULTS_OUT (default
# target/faults/<seed>, or <seed>-negative for the negative control). Exit status 1 when any
# run found a violation or could not finish.
#
# Cleanup: the runner removes its iptables chains and loop mounts itself, also on SIGINT/SIGTERM;
# if it dies harder than that, this script's trap removes what it left (chains named after its
# PID, mounts under its temporary directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=debug
cargo_flags=()
args=()
seed=""
for a in "$@"; do
  case "$a" in
    --release) profile=release; cargo_flags+=(--release) ;;
    *) args+=("$a") ;;
  esac
done
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ "${args[$i]}" == "--seed" ]] && seed="${args[$((i + 1))]:-}"
done
if [[ -z "$seed" ]]; then
  seed="$(date +%s)"
  args+=(--seed "$seed")
fi

echo "== faults: building spool and spool-faults ($profile)"
cargo build --locked ${SPOOL_FAULTS_CARGO_FLAGS:-} "${cargo_flags[@]}" -p spool-broker --bin spool -p spool-tests --bin spool-faults

target_dir="${CARGO_TARGET_DIR:-target}"
suffix=""
for a in "${args[@]}"; do [[ "$a" == "--negative-control" ]] && suffix="-negative"; done
out="${SPOOL_FAULTS_OUT:-$target_dir/faults/$seed$suffix}"
mkdir -p "$out/tmp"
runner_pid=""
cleanup() {
  if [[ -n "$runner_pid" ]] && kill -0 "$runner_pid" 2>/dev/null; then
    kill -TERM "$runner_pid" 2>/dev/null || true
    wait "$runner_pid" 2>/dev/null || true
  fi
  if [[ -n "$runner_pid" ]] && command -v iptables >/dev/null 2>&1; then
    for chain in $(iptables -S 2>/dev/null | awk -v p="spool-test-$runner_pid-" '$1=="-N" && index($2, p)==1 {print $2}'); do
      iptables -D OUTPUT -j "$chain" 2>/dev/null || true
      iptables -F "$chain" 2>/dev/null || true
      iptables -X "$chain" 2>/dev/null || true
    done
  fi
  local abs_tmp
  abs_tmp="$(cd "$out/tmp" && pwd)"
  awk -v t="$abs_tmp/" 'index($2, t)==1 {print $2}' /proc/mounts | while read -r m; do
    umount "$m" 2>/dev/null || true
  done
  rm -rf "$out/tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== faults: spool-faults ${args[*]} (results in $out)"
status=0
TMPDIR="$(cd "$out/tmp" && pwd)" SPOOL_BIN="$(cd "$target_dir/$profile" && pwd)/spool" \
  "$target_dir/$profile/spool-faults" --out "$out" "${args[@]}" &
runner_pid=$!
wait "$runner_pid" || status=$?
exit "$status"
