#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this; the README names it).
# Installs what the tests need on a fresh machine, then: generated-code freshness, formatting,
# lints (warnings are errors), and every crate's tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# glommio registers io_uring buffers; root has CAP_IPC_LOCK, others need a raised memlock limit.
ulimit -l unlimited 2>/dev/null || true

echo "== generated flatbuffers code matches schemas/ (installs flatc 25.12.19 if missing)"
schemas/check-generated.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --locked
