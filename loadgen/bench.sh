#!/usr/bin/env bash
# loadgen/bench.sh — spool's benchmark suite (issue 5, DESIGN §11).
#
# Builds the release binaries, then alternates the machine's own limits with broker runs
# (limit, broker, limit, broker, …) for --rounds rounds, because this disk is noisy, and reports
# the median of each figure: a table, then one `RESULT key=value` line per figure.
#
#   limits:  fio sequential O_DIRECT 1 MiB writes (best of iodepth 1/4/16) -> disk_write_mbps
#            fio 4 KiB writes + fdatasync, p99 of the sync                  -> fsync_p99_ms
#            iperf3 over loopback                                           -> loopback_mbps
#   broker:  `spool serve` in a temporary directory on the measured disk, 127.0.0.1, ports
#            19193/19744 (not the defaults), restarted fresh for each configuration:
#            durability fsync, every core: produce max (1 KiB, acks=1, 8 partitions),
#              e2e at half that rate, produce max to 1,000 partitions, catch-up consume of
#              the ≥ 2 GiB the produce run left behind;
#            durability replicated: e2e at the same half rate;
#            --cores 1: produce max again (cores_2_over_1).
#
# MB/s are 10^6 bytes per second throughout (as fio reports them). Everything targets loopback,
# every run is bounded in time, and the script kills only the processes it started (by PID) and
# removes its directory on exit. Installs fio and iperf3 with apt-get if missing.
#
# Usage: loadgen/bench.sh [--rounds N] [--seconds S] [--keep]
set -euo pipefail

ROUNDS=3
SECONDS_PER_RUN=8
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --seconds) SECONDS_PER_RUN="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
HOST=127.0.0.1
NATIVE_PORT=19193
ADMIN_PORT=19744
IPERF_PORT=15201
BROKERS="$HOST:$NATIVE_PORT"
# Messages of the catch-up topic: 2.2 M × 1 KiB ≈ 2.25 GB ≥ 2 GiB.
CATCHUP_MESSAGES=2200000

mkdir -p "$ROOT/target"
WORK="$(mktemp -d -p "$ROOT/target" bench.XXXXXX)"
LOG="$WORK/log"
mkdir -p "$LOG"
BROKER_PID=""
IPERF_PID=""
SECONDS=0

log() { echo "[bench $(printf '%4d' "$SECONDS")s] $*" >&2; }

cleanup() {
  local rc=$?
  stop_broker || true
  if [[ -n "$IPERF_PID" ]] && kill -0 "$IPERF_PID" 2>/dev/null; then kill "$IPERF_PID" 2>/dev/null || true; fi
  if [[ $KEEP -eq 1 ]]; then
    log "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need() {
  local bin="$1" pkg="$2"
  if ! command -v "$bin" >/dev/null 2>&1; then
    log "$bin missing, installing $pkg with apt-get"
    (apt-get install -y -qq "$pkg" || { apt-get update -qq && apt-get install -y -qq "$pkg"; }) >/dev/null 2>&1 \
      || { echo "bench.sh: cannot install $pkg" >&2; exit 1; }
  fi
}
need fio fio
need iperf3 iperf3
need python3 python3

# ---- build ----
log "building release binaries (spool, spool-loadgen)"
cargo build --release -q -p spool-broker --bin spool -p spool-loadgen --bin spool-loadgen
SPOOL="$ROOT/target/release/spool"
LOADGEN="$ROOT/target/release/spool-loadgen"

# ---- helpers ----
# json FILE EXPR: evaluates EXPR over the parsed file `d`; nan when the file or key is missing.
json() { python3 -c "import json,sys
try:
    d=json.load(open(sys.argv[1])); print($2)
except Exception:
    print('nan')" "$1"; }

# Median of the numeric arguments (failed runs, recorded as nan, are left out).
median() { python3 -c "import statistics,sys
v=[float(x) for x in sys.argv[1:] if x not in ('', 'nan')]
print(statistics.median(v) if v else 'nan')" "$@"; }

# Picks `key=value` out of loadgen's final LOADGEN line (nan when the run failed).
field() {
  local v
  v=$(grep -h '^LOADGEN ' "$1" 2>/dev/null | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}' || true)
  echo "${v:-nan}"
}

fio_run() { # args... -> JSON file path on stdout
  local out="$WORK/fio.json"
  fio --name=bench --filename="$WORK/fio.dat" --output-format=json --time_based "$@" >"$out" 2>/dev/null
  rm -f "$WORK/fio.dat"
  echo "$out"
}

limit_disk_write_mbps() {
  local best=0 qd j v
  for qd in 1 4 16; do
    j=$(fio_run --rw=write --bs=1M --direct=1 --ioengine=io_uring --size=4G --runtime=3 --iodepth=$qd)
    v=$(json "$j" "d['jobs'][0]['write']['bw_bytes']/1e6")
    best=$(python3 -c "from math import nan; print(max($best, $v if $v == $v else 0))")
  done
  echo "$best"
}

limit_fsync_p99_ms() {
  local j
  j=$(fio_run --rw=write --bs=4k --fdatasync=1 --ioengine=sync --size=256M --runtime=3)
  json "$j" "d['jobs'][0]['sync']['lat_ns']['percentile']['99.000000']/1e6"
}

limit_loopback_mbps() {
  iperf3 -s -1 -p "$IPERF_PORT" -B "$HOST" >"$LOG/iperf-server.log" 2>&1 &
  IPERF_PID=$!
  sleep 0.5
  timeout 20 iperf3 -c "$HOST" -p "$IPERF_PORT" -t 3 -J >"$WORK/iperf.json" 2>/dev/null || true
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=""
  json "$WORK/iperf.json" "d['end']['sum_received']['bits_per_second']/8/1e6"
}

start_broker() { # name, extra serve flags...
  local name="$1"; shift
  local dir="$WORK/data-$name"
  rm -rf "$WORK"/data-*
  mkdir -p "$dir"
  "$SPOOL" serve --data-dir "$dir" --host "$HOST" --native-port "$NATIVE_PORT" \
    --admin-port "$ADMIN_PORT" "$@" >"$LOG/broker-$name.log" 2>&1 &
  BROKER_PID=$!
  local i
  for i in $(seq 1 300); do
    if grep -q "spool serving on" "$LOG/broker-$name.log"; then return 0; fi
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
      echo "bench.sh: broker $name exited; its log:" >&2; tail -20 "$LOG/broker-$name.log" >&2; exit 1
    fi
    sleep 0.1
  done
  echo "bench.sh: broker $name not serving after 30 s" >&2; exit 1
}

stop_broker() {
  [[ -n "$BROKER_PID" ]] || return 0
  if kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 200); do
      kill -0 "$BROKER_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
      log "broker $BROKER_PID ignored SIGTERM for 20 s; SIGKILL"
      kill -KILL "$BROKER_PID" 2>/dev/null || true
    fi
  fi
  wait "$BROKER_PID" 2>/dev/null || true
  BROKER_PID=""
}

loadgen() { # name, args... ; output in $LOG/name.txt, bounded by timeout
  local name="$1"; shift
  if ! timeout 180 "$LOADGEN" "$@" --brokers "$BROKERS" --quiet --json "$LOG/$name.json" \
      >"$LOG/$name.txt" 2>"$LOG/$name.err"; then
    log "loadgen $name failed (see below); continuing"
    tail -5 "$LOG/$name.txt" "$LOG/$name.err" >&2 || true
  fi
}

# ---- rounds ----
declare -a DISK FSYNC LOOP PROD P99H E2EH P99N CONS P1000 C1 C2
# 1 KiB messages, acks=1, two producers on two client executors. The producer keeps one batch in
# flight per partition and, with durability fsync, a batch is acknowledged after its fdatasync:
# throughput is about partitions × batch size / sync latency, so throughput runs use 512 KiB
# batches (64 KiB gives about a third of it here) and latency runs linger only 1 ms.
COMMON=(--message-bytes 1024 --acks 1 --producers 2 --cores 2 --batch-bytes 524288)
MAX=(--linger-ms 10)
HALF=(--linger-ms 1)
for round in $(seq 1 "$ROUNDS"); do
  log "round $round/$ROUNDS: limits"
  DISK+=("$(limit_disk_write_mbps)")
  FSYNC+=("$(limit_fsync_p99_ms)")
  LOOP+=("$(limit_loopback_mbps)")
  log "  disk ${DISK[-1]} MB/s, fsync p99 ${FSYNC[-1]} ms, loopback ${LOOP[-1]} MB/s"

  log "round $round: broker (durability fsync, every core)"
  start_broker fsync --durability fsync
  # Produce max; it also fills the catch-up topic (≥ 2 GiB retained).
  loadgen "produce-$round" produce --topic p8 --partitions 8 "${COMMON[@]}" "${MAX[@]}" \
    --messages "$CATCHUP_MESSAGES"
  PROD+=("$(field "$LOG/produce-$round.txt" produce_mbps)")
  rate=$(field "$LOG/produce-$round.txt" produce_msgs_per_s)
  half=$(python3 -c "r=float('$rate'); print(max(1, int(r / 2)) if r == r else 1000)")
  log "  produce ${PROD[-1]} MB/s ($rate msg/s); half load $half msg/s"
  loadgen "consume-$round" consume --topic p8 --partitions 8 --consumers 2 --cores 2
  CONS+=("$(field "$LOG/consume-$round.txt" consume_mbps)")
  loadgen "e2e-half-$round" e2e --topic half --partitions 8 "${COMMON[@]}" "${HALF[@]}" --consumers 2 \
    --rate "$half" --warmup 2 --duration "$SECONDS_PER_RUN"
  P99H+=("$(field "$LOG/e2e-half-$round.txt" produce_p99_ms)")
  E2EH+=("$(field "$LOG/e2e-half-$round.txt" e2e_p99_ms)")
  loadgen "p1000-$round" produce --topic p1000 --partitions 1000 "${COMMON[@]}" "${MAX[@]}" \
    --warmup 2 --duration "$SECONDS_PER_RUN"
  P1000+=("$(field "$LOG/p1000-$round.txt" produce_mbps)")
  loadgen "cores2-$round" produce --topic c2 --partitions 8 "${COMMON[@]}" "${MAX[@]}" \
    --warmup 2 --duration "$SECONDS_PER_RUN"
  C2+=("$(field "$LOG/cores2-$round.txt" produce_mbps)")
  log "  consume ${CONS[-1]} MB/s; half-load p99 produce ${P99H[-1]} e2e ${E2EH[-1]} ms; 1000 partitions ${P1000[-1]} MB/s"
  stop_broker

  log "round $round: broker (durability replicated)"
  start_broker replicated --durability replicated
  loadgen "e2e-half-nofsync-$round" e2e --topic half --partitions 8 "${COMMON[@]}" "${HALF[@]}" --consumers 2 \
    --rate "$half" --warmup 2 --duration "$SECONDS_PER_RUN"
  P99N+=("$(field "$LOG/e2e-half-nofsync-$round.txt" produce_p99_ms)")
  stop_broker

  log "round $round: broker (--cores 1)"
  start_broker cores1 --durability fsync --cores 1
  loadgen "cores1-$round" produce --topic c1 --partitions 8 "${COMMON[@]}" "${MAX[@]}" \
    --warmup 2 --duration "$SECONDS_PER_RUN"
  C1+=("$(field "$LOG/cores1-$round.txt" produce_mbps)")
  stop_broker
  log "  nofsync p99 ${P99N[-1]} ms; cores 1 ${C1[-1]} vs cores 2 ${C2[-1]} MB/s"
done

# ---- medians and report ----
r() { python3 -c "from math import nan, isnan; v=float($1); print('nan' if isnan(v) else f'{v:.${2:-3}f}')"; }
disk=$(median "${DISK[@]}"); fsync=$(median "${FSYNC[@]}"); loop=$(median "${LOOP[@]}")
prod=$(median "${PROD[@]}"); p99h=$(median "${P99H[@]}"); e2eh=$(median "${E2EH[@]}")
p99n=$(median "${P99N[@]}"); cons=$(median "${CONS[@]}"); p1000=$(median "${P1000[@]}")
c1=$(median "${C1[@]}"); c2=$(median "${C2[@]}")
ratio() { python3 -c "a=float('$1'); b=float('$2'); print(f'{a/b:.3f}' if b > 0 and a == a else 'nan')"; }
produce_ratio=$(ratio "$prod" "$disk")
consume_ratio=$(ratio "$cons" "$loop")
cores_ratio=$(ratio "$c2" "$c1")
p1000_ratio=$(ratio "$p1000" "$prod")

echo
echo "spool bench — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $ROUNDS rounds, medians (MB = 10^6 B)"
echo "per-round samples: disk ${DISK[*]} | fsync_p99 ${FSYNC[*]} | loopback ${LOOP[*]} | produce ${PROD[*]} | p99_half ${P99H[*]} | e2e_p99_half ${E2EH[*]} | p99_half_nofsync ${P99N[*]} | consume ${CONS[*]} | p1000 ${P1000[*]} | cores1 ${C1[*]} | cores2 ${C2[*]}"
printf '| %-34s | %12s | %-40s |\n' figure value "compared with / target"
printf '|%s|%s|%s|\n' "------------------------------------" "--------------" "------------------------------------------"
row() { printf '| %-34s | %12s | %-40s |\n' "$1" "$2" "$3"; }
row disk_write_mbps "$(r "$disk" 1)" "fio 1 MiB O_DIRECT, best qd 1/4/16"
row fsync_p99_ms "$(r "$fsync" 2)" "fio 4 KiB + fdatasync"
row loopback_mbps "$(r "$loop" 1)" "iperf3 127.0.0.1"
row produce_mbps "$(r "$prod" 1)" "1 KiB, acks=1, 8 partitions, fsync"
row produce_ratio "$produce_ratio" "/ disk_write_mbps; target >= 0.9"
row produce_p99_ms_half_load "$(r "$p99h" 2)" "target <= fsync_p99_ms + 2 = $(r "$fsync + 2" 2)"
row e2e_p99_ms_half_load "$(r "$e2eh" 2)" "target <= produce p99 + 5 = $(r "$p99h + 5" 2)"
row produce_p99_ms_half_load_nofsync "$(r "$p99n" 2)" "durability replicated; target <= 2"
row consume_mbps "$(r "$cons" 1)" "catch-up read of >= 2 GiB"
row consume_ratio "$consume_ratio" "/ loopback_mbps; target >= 0.5"
row partitions_1000_mbps "$(r "$p1000" 1)" "ratio to produce_mbps $p1000_ratio; target >= 0.7"
row cores_2_over_1 "$cores_ratio" "$(r "$c2" 1) / $(r "$c1" 1) MB/s (serve --cores 2 / 1)"
echo
echo "RESULT disk_write_mbps=$(r "$disk" 1)"
echo "RESULT fsync_p99_ms=$(r "$fsync" 2)"
echo "RESULT loopback_mbps=$(r "$loop" 1)"
echo "RESULT produce_mbps=$(r "$prod" 1)"
echo "RESULT produce_ratio=$produce_ratio"
echo "RESULT produce_p99_ms_half_load=$(r "$p99h" 2)"
echo "RESULT e2e_p99_ms_half_load=$(r "$e2eh" 2)"
echo "RESULT produce_p99_ms_half_load_nofsync=$(r "$p99n" 2)"
echo "RESULT consume_mbps=$(r "$cons" 1)"
echo "RESULT consume_ratio=$consume_ratio"
echo "RESULT partitions_1000_mbps=$(r "$p1000" 1)"
echo "RESULT cores_2_over_1=$cores_ratio"
log "done in ${SECONDS}s"
