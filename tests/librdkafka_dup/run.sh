#!/usr/bin/env bash
# tests/librdkafka_dup/run.sh — the fault harness's item 14 on purpose (README, "What we test and
# what it found"): librdkafka, idempotent at acks=all, appends a batch twice when its own producer
# epoch bump lands between a NOT_LEADER_OR_FOLLOWER answer for that batch and its retry.
# producer.py says how; the race is narrow, so it tries up to --attempts times (a fresh
# `spool cluster local --nodes 3` each, on 127.0.0.1/2/3 and the default ports: nothing else may
# run there) and stops at the first duplicate, printing librdkafka's trace of that batch.
# Not part of CI: it shows a client's behaviour, not spool's. Installs confluent-kafka (which
# bundles librdkafka) with pip if missing; signals only the brokers it started, by PID; bounded.
#
# Usage: tests/librdkafka_dup/run.sh [--attempts N] [--term-after S] [--cont-after S]
set -euo pipefail
ATTEMPTS=10 TERM_AFTER=2.9 CONT_AFTER=3.4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --attempts) ATTEMPTS="$2"; shift 2 ;;
    --term-after) TERM_AFTER="$2"; shift 2 ;;
    --cont-after) CONT_AFTER="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SPOOL="$ROOT/target/release/spool"
[[ -x "$SPOOL" ]] || (cd "$ROOT" && cargo build --release -p spool-broker --bin spool)
python3 -c 'import confluent_kafka' 2>/dev/null || python3 -m pip install -q confluent-kafka
WORK="$(mktemp -d -p "$ROOT/target" librdkafka-dup.XXXXXX)"
CL=""
cleanup() {
  if [[ -n "$CL" ]] && kill -0 "$CL" 2>/dev/null; then kill -INT "$CL"; wait "$CL" || true; fi
}
trap cleanup EXIT
for attempt in $(seq 1 "$ATTEMPTS"); do
  D="$WORK/attempt-$attempt"
  mkdir -p "$D"
  setsid "$SPOOL" cluster local --nodes 3 --data-dir "$D/data" >"$D/cluster.log" 2>&1 &
  CL=$!
  for _ in $(seq 1 100); do grep -q "3 nodes running" "$D/cluster.log" && break; sleep 0.1; done
  pid() { grep -o "node $1 (pid [0-9]*)" "$D/cluster.log" | grep -o '[0-9]*)$' | tr -d ')'; }
  for _ in $(seq 1 100); do
    "$SPOOL" topic create q --partitions 1 --replication-factor 3 \
      --config min.insync.replicas=2 --config replica.lag.time.max.ms=60000 >/dev/null 2>&1 && break
    sleep 0.2
  done
  "$SPOOL" topic create u --partitions 3 --replication-factor 1 >/dev/null
  A=$("$SPOOL" topic describe q | awk '$1=="0" {print $2}')
  # A partition of u led by a broker other than A, and that broker.
  read -r UP DN < <("$SPOOL" topic describe u | awk -v a="$A" '$1 ~ /^[0-9]+$/ && $2 != a {print $1, $2; exit}')
  timeout 120 python3 "$HERE/producer.py" "$(pid "$A")" "$(pid "$DN")" "$UP" "$TERM_AFTER" "$CONT_AFTER" \
    >"$D/result.txt" 2>"$D/rdkafka.log" || true
  kill -CONT "$(pid "$DN")" 2>/dev/null || true
  kill -INT "$CL"; wait "$CL" || true; CL=""
  RESULT=$(tail -1 "$D/result.txt")
  echo "attempt $attempt (q-0 led by $A, u-$UP by $DN): $RESULT"
  DUPS=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("duplicated", 0))' "$RESULT" 2>/dev/null || echo 0)
  if [[ "$DUPS" -gt 0 ]]; then
    FIRST=$(python3 -c 'import json,sys; print(min(int(v[2:]) for v in json.loads(sys.argv[1])["dups"]))' "$RESULT")
    echo "librdkafka's trace of the batch holding q-$FIRST (MsgId $((FIRST + 1))) and the epoch bumps:"
    grep -E "MsgId $((FIRST + 1))[,)]|bumped epoch|timed out .* on u" "$D/rdkafka.log" | head -20
    echo "RESULT librdkafka_dup_attempts=$attempt"
    echo "RESULT librdkafka_dup_duplicated=$DUPS"
    echo "(logs kept in $D)"
    trap - EXIT
    exit 0
  fi
done
echo "RESULT librdkafka_dup_attempts=$ATTEMPTS"
echo "RESULT librdkafka_dup_duplicated=0"
rm -rf "$WORK"
