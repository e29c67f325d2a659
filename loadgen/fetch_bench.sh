#!/usr/bin/env bash
# loadgen/fetch_bench.sh — fetches of hot and cold segment ranges (DESIGN §5 "Reads";
# broker/src/net_io.rs): which way of sending file ranges wins with many fetches in flight.
#
# Fills one topic once (16 partitions by default, 1 KiB messages, 128 MiB segments), then for
# each way of sending file ranges restarts `spool serve --cores 1` on the same data and runs a
# catch-up `consume` with one consumer per partition (16 fetches in flight on the broker's one
# core), bounded to --seconds:
#   hot:  every segment page read into the page cache first;
#   cold: `sync; echo 3 > /proc/sys/vm/drop_caches` just before.
# During each consume:
#   - the broker's file-send probe (broker/src/net_io.rs, logged at debug level once a second)
#     times every file → pipe splice the reactor makes: their total per GB consumed and the
#     longest one are the time the core ran nothing else (a splice waiting for the disk shows
#     here; the read path's io_uring reads do not), and how long cold pieces took to come off
#     the disk (off the reactor: io_uring reads, or splices on the blocking thread);
#   - a light probe producer (1 partition, 1,000 msg/s, acks=1, open loop) on the broker's CPU:
#     its produce p99 is what the core's other work waited (noisy: it shares a CPU).
#   ways:   direct   (default) cachestat per piece; cold pieces read with O_DIRECT through
#                    io_uring, up to 4 pieces of a response at once (net_io/direct_read.rs)
#           read     cachestat per piece; cold pieces read through io_uring and the page cache
#           blocking cachestat per piece; cold pieces spliced on glommio's blocking thread
#           splice   no check; every piece spliced on the reactor (the behaviour before)
#           copy     serve --fetch-copy: every fetch read and CRC-checked into memory
#   limits, measured in the same run: fio sequential O_DIRECT 1 MiB reads at iodepth 1 and 16
#   (disk_read_mbps_qd1/_qd16: what the disk gives one reader and many), iperf3 over loopback.
#   broker CPU: utime + stime of the whole process (its io_uring workers and blocking thread
#   included) over the consume, per GB consumed (the probe's small load included, alike for all).
#
# Broker on CPU 0 (its one executor is pinned there; taskset pins the rest of the process), the
# consuming load generator on CPU 1, the probe producer on CPU 0 (taskset). Needs root
# (drop_caches), fio, iperf3, python3. Ports 19393/19844/19392 (not bench.sh's). Kills only what
# it started; removes its directory on exit. ~4 min with the defaults.
#
# Usage: loadgen/fetch_bench.sh [--rounds N] [--seconds S] [--messages N] [--partitions N] [--keep]
#   (--partitions 128 --messages 1000000: many cold starts at once, one consumer per partition)
set -euo pipefail

ROUNDS=3
SECONDS_PER_RUN=3
MESSAGES=2400000
PARTITIONS=16
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --seconds) SECONDS_PER_RUN="$2"; shift 2 ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --partitions) PARTITIONS="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "fetch_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "fetch_bench.sh: needs root (drop_caches)" >&2; exit 1; }
[[ $(nproc) -ge 2 ]] || { echo "fetch_bench.sh: needs 2 CPUs (broker and client apart)" >&2; exit 1; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
HOST=127.0.0.1
NATIVE_PORT=19393
ADMIN_PORT=19844
KAFKA_PORT=19392
IPERF_PORT=15301
BROKERS="$HOST:$NATIVE_PORT"
CLK_TCK=$(getconf CLK_TCK)

mkdir -p "$TARGET"
WORK="$(mktemp -d -p "$TARGET" fetch-bench.XXXXXX)"
LOG="$WORK/log"
DATA="$WORK/data"
mkdir -p "$LOG" "$DATA"
BROKER_PID=""
IPERF_PID=""
PROBE_PID=""
SECONDS=0

log() { echo "[fetch-bench $(printf '%4d' "$SECONDS")s] $*" >&2; }

stop_pid() { # pid: TERM, wait up to 20 s, then KILL
  local pid="$1" i
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  stop_pid "$PROBE_PID"; stop_pid "$BROKER_PID"; stop_pid "$IPERF_PID"
  if [[ $KEEP -eq 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for bin in fio iperf3 python3 taskset; do
  command -v "$bin" >/dev/null 2>&1 || { echo "fetch_bench.sh: $bin missing" >&2; exit 1; }
done

log "building release binaries (spool, spool-loadgen)"
cargo build --release -q --locked -p spool-broker --bin spool -p spool-loadgen --bin spool-loadgen
SPOOL="$TARGET/release/spool"
LOADGEN="$TARGET/release/spool-loadgen"

json() { python3 -c "import json,sys
try:
    d=json.load(open(sys.argv[1])); print($2)
except Exception:
    print('nan')" "$1"; }
median() { python3 -c "import statistics,sys
v=[float(x) for x in sys.argv[1:] if x not in ('', 'nan')]
print(f'{statistics.median(v):.2f}' if v else 'nan')" "$@"; }
field() { # file key: from loadgen's LOADGEN line
  local v
  v=$(grep -h '^LOADGEN ' "$1" 2>/dev/null | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}' || true)
  echo "${v:-nan}"
}
consumed_msgs() { grep -h '^consume: ' "$1" 2>/dev/null | awk '{print $2}' || echo nan; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

limit_disk_read_mbps() { # iodepth
  local out="$WORK/fio.json"
  fio --name=read --filename="$WORK/fio.dat" --output-format=json --rw=read --bs=1M --direct=1 \
    --ioengine=io_uring --size=1G --time_based --runtime=3 --iodepth="$1" >"$out" 2>/dev/null
  json "$out" "d['jobs'][0]['read']['bw_bytes']/1e6"
}

limit_loopback_mbps() {
  iperf3 -s -1 -p "$IPERF_PORT" -B "$HOST" >"$LOG/iperf-server.log" 2>&1 &
  IPERF_PID=$!
  sleep 0.5
  timeout 20 taskset -c 1 iperf3 -c "$HOST" -p "$IPERF_PORT" -t 3 -J >"$WORK/iperf.json" 2>/dev/null || true
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=""
  json "$WORK/iperf.json" "d['end']['sum_received']['bits_per_second']/8/1e6"
}

start_broker() { # name, extra serve flags... (environment passes through)
  local name="$1"; shift
  RUST_LOG="info,spool_broker::net_io=debug" taskset -c 0 "$SPOOL" serve --cores 1 --data-dir "$DATA" --host "$HOST" \
    --native-port "$NATIVE_PORT" --admin-port "$ADMIN_PORT" --kafka-port "$KAFKA_PORT" \
    --durability replicated --segment-bytes 134217728 "$@" >"$LOG/broker-$name.log" 2>&1 &
  BROKER_PID=$!
  local i
  for i in $(seq 1 300); do
    grep -q "spool serving on" "$LOG/broker-$name.log" && return 0
    kill -0 "$BROKER_PID" 2>/dev/null || { tail -20 "$LOG/broker-$name.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "fetch_bench.sh: broker $name not serving after 30 s" >&2; exit 1
}

lg() { # name, args...: one loadgen run on CPU 1, bounded in time
  local name="$1"; shift
  timeout 120 taskset -c 1 "$LOADGEN" "$@" --brokers "$BROKERS" --quiet \
    >"$LOG/$name.txt" 2>"$LOG/$name.err" || log "loadgen $name failed: $(tail -2 "$LOG/$name.err" | tr '\n' ' ')"
}

# The page-cache state of the topic's segment files: cached pages / pages (Linux >= 6.5).
cached_fraction() {
  python3 - "$DATA" <<'EOF'
import ctypes, glob, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class R(ctypes.Structure): _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class S(ctypes.Structure): _fields_ = [(n, ctypes.c_uint64) for n in "abcde"]
cached = pages = 0
for p in glob.glob(os.path.join(sys.argv[1], "fetch-*", "*.log")):
    fd = os.open(p, os.O_RDONLY); r = R(0, 0); s = S()
    if libc.syscall(451, fd, ctypes.byref(r), ctypes.byref(s), 0) == 0:
        cached += s.a; pages += (os.fstat(fd).st_size + 4095) // 4096
    os.close(fd)
print(f"{cached / pages:.3f}" if pages else "nan")
EOF
}

# Sums the broker's "file sends" probe lines after line $2 of its log: reactor splice ms in
# total and the longest one, and the cold pieces.
splice_stats() { # broker log, lines to skip
  python3 - "$1" "$2" <<'EOF'
import re, sys
lines = [l for l in open(sys.argv[1], errors="replace") if "file sends" in l][int(sys.argv[2]):]
f = lambda l, k: int(re.search(r"\b" + k + r"=(\d+)", re.sub(r"\x1b\[[0-9;]*m", "", l)).group(1))
tot = sum(f(l, "reactor_splice_us") for l in lines) / 1e3
mx = max([f(l, "reactor_splice_max_us") for l in lines] or [0]) / 1e3
cold = sum(f(l, "cold_pieces") for l in lines)
cached = sum(f(l, "cached_pieces") for l in lines)
wait = sum(f(l, "cold_wait_us") for l in lines) / 1e3
wmax = max([f(l, "cold_wait_max_us") for l in lines] or [0]) / 1e3
print(f"{tot:.1f} {mx:.2f} {cold} {cached} {wait / cold if cold else 0:.1f} {wmax:.1f}")
EOF
}
probe_lines() { grep -c "file sends" "$1" || true; }

log "filling topic fetch: $MESSAGES × 1 KiB over $PARTITIONS partitions"
start_broker fill
lg fill produce --topic fetch --partitions "$PARTITIONS" --message-bytes 1024 --acks 1 \
  --producers 2 --cores 1 --batch-bytes 524288 --linger-ms 10 --messages "$MESSAGES"
log "  $(grep -h '^produce: ' "$LOG/fill.txt" || echo 'fill failed')"
stop_pid "$BROKER_PID"; BROKER_PID=""

WAYS=(direct read blocking splice copy)
declare -A MBPS CPUGB P99 WARM SPLGB SPLMAX COLDP COLDW
for round in $(seq 1 "$ROUNDS"); do
  log "round $round/$ROUNDS: limits"
  Q1=$(limit_disk_read_mbps 1); Q16=$(limit_disk_read_mbps 16); rm -f "$WORK/fio.dat"
  LOOP=$(limit_loopback_mbps)
  DQ1+=("$Q1"); DQ16+=("$Q16"); LOOPS+=("$LOOP")
  log "  disk read qd1 $Q1 MB/s, qd16 $Q16 MB/s; loopback $LOOP MB/s"
  # Rotate the order each round, so drift in the machine's load does not favour one way.
  ORDER=("${WAYS[@]:$(((round - 1) % ${#WAYS[@]}))}" "${WAYS[@]:0:$(((round - 1) % ${#WAYS[@]}))}")
  for way in "${ORDER[@]}"; do
    if [[ $way == copy ]]; then
      start_broker "$way-$round" --fetch-copy
    else
      SPOOL_FETCH_COLD=$way start_broker "$way-$round"
    fi
    for state in hot cold; do
      if [[ $state == hot ]]; then
        cat "$DATA"/fetch-*/*.log >/dev/null
      else
        sync; echo 3 >/proc/sys/vm/drop_caches
      fi
      warm=$(cached_fraction)
      name="$way-$state-$round"
      timeout 60 taskset -c 0 "$LOADGEN" produce --topic probe --partitions 1 --message-bytes 1024 \
        --acks 1 --linger-ms 0 --rate 1000 --warmup 1 --duration "$((SECONDS_PER_RUN + 3))" \
        --brokers "$BROKERS" --quiet >"$LOG/probe-$name.txt" 2>"$LOG/probe-$name.err" &
      PROBE_PID=$!
      sleep 1.5
      blog="$LOG/broker-$way-$round.log"
      n0=$(probe_lines "$blog")
      t0=$(cpu_ticks "$BROKER_PID")
      lg "consume-$name" consume --topic fetch --partitions "$PARTITIONS" --consumers "$PARTITIONS" \
        --cores 1 --message-bytes 1024 --duration "$SECONDS_PER_RUN"
      t1=$(cpu_ticks "$BROKER_PID")
      # The probe producer outlives the consume by ~2 s, so the broker logs the last interval.
      wait "$PROBE_PID" 2>/dev/null || true; PROBE_PID=""
      read -r spl_ms spl_max_ms cold_pieces cached_pieces cold_avg_ms cold_max_ms < <(splice_stats "$blog" "$n0")
      mbps=$(field "$LOG/consume-$name.txt" consume_mbps)
      msgs=$(consumed_msgs "$LOG/consume-$name.txt")
      cpugb=$(python3 -c "m=float('$msgs'); print(f'{(($t1-$t0)/$CLK_TCK)/(m*1024/1e9):.2f}' if m == m and m > 0 else 'nan')")
      p99=$(field "$LOG/probe-$name.txt" produce_p99_ms)
      splgb=$(python3 -c "m=float('$msgs'); print(f'{$spl_ms/(m*1024/1e9):.1f}' if m == m and m > 0 else 'nan')")
      MBPS[$way-$state]+="$mbps "; CPUGB[$way-$state]+="$cpugb "; P99[$way-$state]+="$p99 "
      WARM[$way-$state]+="$warm "; SPLGB[$way-$state]+="$splgb "; SPLMAX[$way-$state]+="$spl_max_ms "
      COLDP[$way-$state]+="$cold_pieces/$((cold_pieces + cached_pieces)) "
      COLDW[$way-$state]+="$cold_avg_ms/$cold_max_ms "
      log "  $way $state (cached $warm): consume $mbps MB/s, broker $cpugb CPU-s/GB, reactor splices $splgb ms/GB (max $spl_max_ms ms); pieces cold $cold_pieces (avg $cold_avg_ms ms, max $cold_max_ms ms off the reactor) cached $cached_pieces; probe p99 $p99 ms"
    done
    stop_pid "$BROKER_PID"; BROKER_PID=""
  done
done

r1=$(median "${DQ1[@]}"); r16=$(median "${DQ16[@]}"); loop=$(median "${LOOPS[@]}")
echo
echo "spool fetch bench — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $ROUNDS round(s), medians (MB = 10^6 B)"
echo "limits: disk_read_mbps_qd1=$r1 disk_read_mbps_qd16=$r16 loopback_mbps=$loop"
printf '| %-8s | %-5s | %6s | %8s | %6s | %8s | %14s | %14s | %12s |\n' way pages cached "MB/s" ratio "CPU-s/GB" "splice ms/GB" "splice max ms" "probe p99 ms"
for way in "${WAYS[@]}"; do
  for state in hot cold; do
    k="$way-$state"
    # shellcheck disable=SC2086
    m=$(median ${MBPS[$k]}); c=$(median ${CPUGB[$k]}); p=$(median ${P99[$k]}); w=$(median ${WARM[$k]})
    sg=$(median ${SPLGB[$k]}); sm=$(median ${SPLMAX[$k]})
    lim=$([[ $state == hot ]] && echo "$loop" || echo "$r16")
    ratio=$(python3 -c "a=float('$m'); b=float('$lim'); print(f'{a/b:.3f}' if b > 0 and a == a else 'nan')")
    printf '| %-8s | %-5s | %6s | %8s | %6s | %8s | %14s | %14s | %12s |\n' "$way" "$state" "$w" "$m" "$ratio" "$c" "$sg" "$sm" "$p"
    echo "RESULT fetch_${way}_${state}_mbps=$m ratio=$ratio cpu_s_per_gb=$c splice_ms_per_gb=$sg splice_max_ms=$sm probe_p99_ms=$p | samples mbps [${MBPS[$k]% }] splice max [${SPLMAX[$k]% }] p99 [${P99[$k]% }] cold pieces [${COLDP[$k]% }] cold avg/max ms [${COLDW[$k]% }]" >>"$WORK/results"
  done
done
echo "(ratio: hot / loopback_mbps, cold / disk_read_mbps_qd16)"
cat "$WORK/results"
log "done in ${SECONDS}s"
