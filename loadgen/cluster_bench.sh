#!/usr/bin/env bash
# loadgen/cluster_bench.sh — replication figures on this machine (the replication issue's
# performance part, DESIGN §11).
#
# Builds the release binaries, measures the disk's fdatasync p99 with fio (the limit a replicated
# acks=all write pays on every replica), then:
#   1. one broker (`spool serve --cores 1`, durability fsync): produce max at acks=1, then acks=1
#      at half that rate -> single_acks1_p99_ms;
#   2. three brokers on 127.0.0.1/2/3 (one core each, one shared disk): a topic at RF 3, produce
#      max at acks=all, then acks=all at half that rate -> replicated p50/p99/p999 and the ratio
#      replicated_p99_over_single_acks1_p99 (target ≤ 3);
#   3. three fresh brokers, one partition at RF 3, acks=all at a fixed rate; after a few seconds
#      the partition's leader is killed with SIGKILL -> failover_gap_ms, the longest time the
#      producer went without an acknowledgement (target ≤ 2000), and whether the victim was the
#      controller too (then the gap includes a controller election).
# CPUs, split as loadgen/bench.sh splits them: the brokers get the first half of the CPUs this
# process may use and the load generator the rest, so every latency is the brokers', not a queue
# behind their own client (with one CPU they share it). The single broker takes the first CPU;
# the three brokers one CPU each, spread over the brokers' half and wrapping (on two CPUs all
# three share CPU 0 and the load generator has CPU 1).
# The three brokers share this machine's one disk and its two cores: replicated throughput here
# is a floor, not what three machines would do; compare ratios from the same run only.
#
# Everything targets loopback, every run is bounded in time (timeout), and the script kills only
# the processes it started (by PID) and removes its directory on exit. Installs fio if missing.
#
# Usage: loadgen/cluster_bench.sh [--seconds S] [--rate MSGS_PER_S] [--gap-runs N] [--keep]
#   --gap-runs N repeats step 3 N times (fresh brokers each time) and reports each gap, the
#   median and the largest.
set -euo pipefail

SECONDS_PER_RUN=8
GAP_RATE=2000
GAP_RUNS=1
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER_RUN="$2"; shift 2 ;;
    --rate) GAP_RATE="$2"; shift 2 ;;
    --gap-runs) GAP_RUNS="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "cluster_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mkdir -p "$ROOT/target"
WORK="$(mktemp -d -p "$ROOT/target" cluster-bench.XXXXXX)"
LOG="$WORK/log"
mkdir -p "$LOG"
declare -a PIDS=()
SECONDS=0
# Ports away from the defaults; each node gets its own address, so the same ports serve all.
NATIVE=19293 KAFKA=19292 ADMIN=19844 INTERNAL=19294

log() { echo "[cluster-bench $(printf '%4d' "$SECONDS")s] $*" >&2; }

# The CPUs this process may use, ascending (taskset and cgroups respected).
read -r -a CPUS <<<"$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')"
BROKER_CPU_COUNT=$(( ${#CPUS[@]} > 1 ? ${#CPUS[@]} / 2 : 1 ))
node_cpu() { echo "${CPUS[$(( ($1 - 1) % BROKER_CPU_COUNT ))]}"; }
LOADGEN_PIN=()
if [[ ${#CPUS[@]} -ge 2 ]]; then
  LOADGEN_PIN=(--cpuset "$(IFS=,; echo "${CPUS[*]:$BROKER_CPU_COUNT}")")
fi

stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
}

cleanup() {
  local rc=$?
  stop_all
  if [[ $KEEP -eq 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! command -v fio >/dev/null 2>&1; then
  log "fio missing, installing it with apt-get"
  (apt-get install -y -qq fio || { apt-get update -qq && apt-get install -y -qq fio; }) >/dev/null 2>&1 \
    || { echo "cluster_bench.sh: cannot install fio" >&2; exit 1; }
fi

log "building release binaries (spool, spool-loadgen)"
cargo build --release -q -p spool-broker --bin spool -p spool-loadgen --bin spool-loadgen
SPOOL="$ROOT/target/release/spool"
LOADGEN="$ROOT/target/release/spool-loadgen"

# Picks `key=value` out of loadgen's final LOADGEN line (nan when the run failed).
field() {
  local v
  v=$(grep -h '^LOADGEN ' "$1" 2>/dev/null | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}' || true)
  echo "${v:-nan}"
}
calc() { python3 -c "from math import nan; print($1)"; }

fsync_p99_ms() {
  fio --name=fsync --filename="$WORK/fio.dat" --output-format=json --time_based --rw=write \
    --bs=4k --fdatasync=1 --ioengine=sync --size=256M --runtime=3 >"$WORK/fio.json" 2>/dev/null
  rm -f "$WORK/fio.dat"
  python3 -c "import json; d=json.load(open('$WORK/fio.json')); print(d['jobs'][0]['sync']['lat_ns']['percentile']['99.000000']/1e6)"
}

wait_serving() { # log file, pid
  local i
  for i in $(seq 1 300); do
    grep -q "spool serving on" "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "cluster_bench.sh: a broker exited:" >&2; tail -20 "$1" >&2; exit 1; }
    sleep 0.1
  done
  echo "cluster_bench.sh: a broker is not serving after 30 s" >&2; exit 1
}

start_single() {
  mkdir -p "$WORK/single"
  "$SPOOL" serve --data-dir "$WORK/single" --host 127.0.0.1 --native-port "$NATIVE" \
    --kafka-port "$KAFKA" --admin-port "$ADMIN" --cores 1 --cpuset "${CPUS[0]}" \
    >"$LOG/single.log" 2>&1 &
  PIDS+=($!)
  wait_serving "$LOG/single.log" "$!"
}

VOTERS="1@127.0.0.1:$INTERNAL,2@127.0.0.2:$INTERNAL,3@127.0.0.3:$INTERNAL"
declare -A NODE_PID=()
start_cluster() { # name
  local i
  NODE_PID=()
  for i in 1 2 3; do
    mkdir -p "$WORK/$1-$i"
    "$SPOOL" serve --node-id "$i" --controller-voters "$VOTERS" --host "127.0.0.$i" \
      --native-port "$NATIVE" --kafka-port "$KAFKA" --admin-port "$ADMIN" \
      --internal-port "$INTERNAL" --data-dir "$WORK/$1-$i" --cores 1 --cpuset "$(node_cpu "$i")" \
      >"$LOG/$1-$i.log" 2>&1 &
    PIDS+=($!)
    NODE_PID[$i]=$!
  done
  for i in 1 2 3; do wait_serving "$LOG/$1-$i.log" "${NODE_PID[$i]}"; done
  # Every broker registered and unfenced before the load starts.
  for i in $(seq 1 300); do
    if "$SPOOL" cluster info --brokers 127.0.0.1:$NATIVE 2>/dev/null | grep -c ' active ' | grep -q '^3$'; then
      return 0
    fi
    sleep 0.1
  done
  echo "cluster_bench.sh: the cluster did not become healthy" >&2; exit 1
}

loadgen() { # name, brokers, args...
  local name="$1" brokers="$2"; shift 2
  if ! timeout 180 "$LOADGEN" produce "$@" --brokers "$brokers" --quiet --json "$LOG/$name.json" \
      >"$LOG/$name.txt" 2>"$LOG/$name.err"; then
    log "loadgen $name failed; continuing"
    tail -5 "$LOG/$name.txt" "$LOG/$name.err" >&2 || true
  fi
}

COMMON=(--message-bytes 1024 --producers 2 --batch-bytes 524288 --duration "$SECONDS_PER_RUN" --warmup 1)

log "limit: fdatasync p99"
FSYNC=$(fsync_p99_ms)

log "single broker: acks=1 max, then half"
start_single
log "  broker on CPU ${CPUS[0]}, loadgen ${LOADGEN_PIN[*]:-on the same CPU}"
loadgen single-max 127.0.0.1:$NATIVE --topic s --partitions 8 --acks 1 --linger-ms 10 "${COMMON[@]}" "${LOADGEN_PIN[@]}"
SINGLE_MAX=$(field "$LOG/single-max.txt" produce_msgs_per_s)
HALF1=$(calc "int($SINGLE_MAX / 2) if $SINGLE_MAX == $SINGLE_MAX else 1000")
loadgen single-half 127.0.0.1:$NATIVE --topic s --partitions 8 --acks 1 --linger-ms 1 --rate "$HALF1" "${COMMON[@]}" "${LOADGEN_PIN[@]}"
SINGLE_P99=$(field "$LOG/single-half.txt" produce_p99_ms)
stop_all

log "three brokers (CPUs $(node_cpu 1), $(node_cpu 2), $(node_cpu 3); loadgen ${LOADGEN_PIN[*]:-on the same CPUs}): acks=all at RF 3, max then half"
start_cluster repl
loadgen repl-max 127.0.0.1:$NATIVE --topic r --partitions 8 --replication-factor 3 --acks all --linger-ms 10 "${COMMON[@]}" "${LOADGEN_PIN[@]}"
REPL_MAX=$(field "$LOG/repl-max.txt" produce_msgs_per_s)
HALF3=$(calc "int($REPL_MAX / 2) if $REPL_MAX == $REPL_MAX else 1000")
loadgen repl-half 127.0.0.1:$NATIVE --topic r --partitions 8 --replication-factor 3 --acks all --linger-ms 1 --rate "$HALF3" "${COMMON[@]}" "${LOADGEN_PIN[@]}"
REPL_P50=$(field "$LOG/repl-half.txt" produce_p50_ms)
REPL_P99=$(field "$LOG/repl-half.txt" produce_p99_ms)
REPL_P999=$(field "$LOG/repl-half.txt" produce_p999_ms)
stop_all

GAPS=() GAP_NOTES=()
for run in $(seq 1 "$GAP_RUNS"); do
  log "failover gap $run/$GAP_RUNS: one partition at RF 3, acks=all at $GAP_RATE msg/s, its leader killed"
  start_cluster "gap$run"
  "$SPOOL" topic create g --partitions 1 --replication-factor 3 --brokers 127.0.0.1:$NATIVE >/dev/null
  GAP_SECONDS=$((SECONDS_PER_RUN + 6))
  timeout 180 "$LOADGEN" produce --topic g --partitions 1 --replication-factor 3 --acks all \
    --linger-ms 1 --rate "$GAP_RATE" --message-bytes 1024 --producers 1 --duration "$GAP_SECONDS" \
    --brokers "127.0.0.1:$NATIVE,127.0.0.2:$NATIVE,127.0.0.3:$NATIVE" --quiet "${LOADGEN_PIN[@]}" \
    >"$LOG/gap$run.txt" 2>"$LOG/gap$run.err" &
  GAP_LOADGEN=$!
  PIDS+=("$GAP_LOADGEN")
  sleep 4
  LEADER=$("$SPOOL" topic describe g --brokers 127.0.0.1:$NATIVE | awk '$1=="0" {print $2}')
  CONTROLLER=$("$SPOOL" cluster info --brokers 127.0.0.1:$NATIVE | awk '$1=="controller" {print $2}')
  log "killing broker $LEADER (leader of g-0; controller is $CONTROLLER)"
  kill -KILL "${NODE_PID[$LEADER]}"
  wait "$GAP_LOADGEN" 2>/dev/null || true
  GAPS+=("$(field "$LOG/gap$run.txt" ack_gap_max_ms)")
  GAP_NOTES+=("$(field "$LOG/gap$run.txt" ack_gap_max_ms) ms (errors $(field "$LOG/gap$run.txt" errors), victim was the controller: $([[ "$LEADER" == "$CONTROLLER" ]] && echo yes || echo no))")
  stop_all
done
GAP=$(python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:] if x!='nan']; print(round(statistics.median(v), 1) if v else 'nan')" "${GAPS[@]}")
GAP_MAX=$(python3 -c "import sys; v=[float(x) for x in sys.argv[1:] if x!='nan']; print(max(v) if v else 'nan')" "${GAPS[@]}")

RATIO=$(calc "round($REPL_P99 / $SINGLE_P99, 2) if $SINGLE_P99 > 0 else nan")
cat <<EOF
== cluster_bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, three brokers sharing one disk)
fdatasync p99 (fio)                      ${FSYNC} ms
single broker acks=1 max                 ${SINGLE_MAX} msg/s
single broker acks=1 p99 at half         ${SINGLE_P99} ms
RF 3 acks=all max                        ${REPL_MAX} msg/s
RF 3 acks=all at half: p50/p99/p999      ${REPL_P50} / ${REPL_P99} / ${REPL_P999} ms
replicated p99 / single acks=1 p99       ${RATIO}   (target <= 3)
failover gap (kill -9 of the leader)     median ${GAP} ms, largest ${GAP_MAX} ms over ${GAP_RUNS} run(s) at ${GAP_RATE} msg/s (target <= 2000)
EOF
for note in "${GAP_NOTES[@]}"; do echo "  gap run: $note"; done
echo "RESULT fsync_p99_ms=$FSYNC"
echo "RESULT single_acks1_max_msgs_per_s=$SINGLE_MAX"
echo "RESULT single_acks1_p99_ms=$SINGLE_P99"
echo "RESULT replicated_acks_all_max_msgs_per_s=$REPL_MAX"
echo "RESULT replicated_acks_all_p50_ms=$REPL_P50"
echo "RESULT replicated_acks_all_p99_ms=$REPL_P99"
echo "RESULT replicated_acks_all_p999_ms=$REPL_P999"
echo "RESULT replicated_p99_over_single_acks1_p99=$RATIO"
echo "RESULT failover_gap_ms=$GAP"
echo "RESULT failover_gap_max_ms=$GAP_MAX"
