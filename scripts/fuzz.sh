#!/usr/bin/env bash
# Runs every fuzz target of protocol/fuzz for a bounded time, one after another, each as one
# libFuzzer process, and keeps what they learn.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
#
# Targets: frame_decoder (native frames, request/response/metadata-record decoders),
# internal_codec (the broker-to-broker codec), record_batch (RecordBatch v2 validation and record
# decoding in spool-storage), kafka_request (the Kafka front's request decoding).
#
# - Builds with cargo-fuzz (installed with `cargo install cargo-fuzz --locked` if missing) on the
#   stable toolchain; RUSTC_BOOTSTRAP=1 lets it pass the sanitizer flags. Address sanitizer, debug
#   assertions and overflow checks are on (cargo-fuzz's defaults).
# - Corpus: protocol/fuzz/corpus/<target>/, kept in git and minimised (libFuzzer -merge=1, through
#   `cargo fuzz cmin`) after each run; frame_decoder also reads protocol/fuzz/seeds/. An empty
#   corpus is seeded by the crate's `write_seeds` binary (valid inputs of every kind).
# - A crash, leak, timeout or out-of-memory input is kept under protocol/fuzz/artifacts/<target>/
#   (gitignored), and the script exits non-zero after running the remaining targets.
# - Prints per target `RESULT fuzz_<target>_execs=N`, `RESULT fuzz_<target>_crashes=N` and
#   `RESULT fuzz_<target>_seconds=N`.
#
# Not part of scripts/test.sh: it takes minutes by design. Everything runs under
# `nice -n 19 ionice -c3` so it can share a machine.
set -euo pipefail

SECONDS_PER_TARGET="${1:-60}"
[[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2; }
TARGETS=(frame_decoder internal_codec record_batch kafka_request)
# libFuzzer's per-input limit: an input that takes longer is a hang, kept as an artifact.
INPUT_TIMEOUT_S=10

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/protocol/fuzz"
cd "$FUZZ"
export RUSTC_BOOTSTRAP=1
LOW=(nice -n 19)
command -v ionice >/dev/null && LOW+=(ionice -c3)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    "${LOW[@]}" cargo install cargo-fuzz --locked
fi

# All the crate's binaries: the four targets and write_seeds.
"${LOW[@]}" cargo fuzz build

for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
done
if [ -z "$(ls -A corpus/internal_codec)" ] || [ -z "$(ls -A corpus/record_batch)" ] ||
    [ -z "$(ls -A corpus/kafka_request)" ]; then
    "target/$(rustc -vV | sed -n 's/^host: //p')/release/write_seeds" corpus
fi

LOGS="$(mktemp -d)"
failed=0
for t in "${TARGETS[@]}"; do
    extra=()
    [ "$t" = frame_decoder ] && extra=(seeds)
    before=$(find "artifacts/$t" -type f | wc -l)
    start=$(date +%s)
    # One process (no -jobs/-workers: -jobs=1 would fork a child that logs to a file), bounded.
    set +e
    "${LOW[@]}" cargo fuzz run "$t" "corpus/$t" "${extra[@]}" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout="$INPUT_TIMEOUT_S" -print_final_stats=1 \
        >"$LOGS/$t.log" 2>&1
    rc=$?
    set -e
    seconds=$(( $(date +%s) - start ))
    after=$(find "artifacts/$t" -type f | wc -l)
    crashes=$(( after - before ))
    # A non-zero exit with no artifact (a build or setup failure) still counts as a failure.
    if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$LOGS/$t.log" | grep -oE '[0-9]+$' | tail -1 || true)
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$LOGS/$t.log" | tr -d '#' | tail -1 || true)
    fi
    echo "RESULT fuzz_${t}_execs=${execs:-0}"
    echo "RESULT fuzz_${t}_crashes=${crashes}"
    echo "RESULT fuzz_${t}_seconds=${seconds}"
    if [ "$crashes" -ne 0 ]; then
        failed=1
        echo "fuzz.sh: $t failed (exit $rc); its log's end, inputs under protocol/fuzz/artifacts/$t/:" >&2
        tail -40 "$LOGS/$t.log" >&2
    fi
    # Keep the corpus small: only inputs that add coverage.
    "${LOW[@]}" cargo fuzz cmin "$t" "corpus/$t" >"$LOGS/$t.cmin.log" 2>&1 ||
        echo "fuzz.sh: minimising corpus/$t failed (see $LOGS/$t.cmin.log)" >&2
    echo "fuzz.sh: corpus/$t: $(find "corpus/$t" -type f | wc -l) files, $(du -sh "corpus/$t" | cut -f1)" >&2
done
rm -rf "$LOGS"
exit "$failed"
