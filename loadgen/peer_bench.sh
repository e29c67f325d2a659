#!/usr/bin/env bash
# spool beside a peer broker, alternated in one session (issue 19: "measured side by side"):
# Apache Iggy's server with its own iggy-bench, against spool with spool-loadgen, in the shape
# the issue measured — 1 KiB messages, 2 producers, 8 partitions of one topic, every write
# fdatasynced before it is acknowledged — and the same pinning as loadgen/bench.sh: the broker
# on the first half of the allowed CPUs, the client on the rest.
#
# Iggy is not in any registry this project's machines can reach (its server is not published
# on crates.io), so this script is not part of the test suite: build Iggy from its source
# (apache/iggy; `cargo build --release -p server -p iggy-bench`, which needs libhwloc-dev and
# libudev-dev) and point --iggy at the folder holding `iggy-server` and `iggy-bench` (and,
# optionally, the server's `config.toml`).
#
# Each round runs, for each broker (the order alternating between rounds), a fresh server on a
# fresh data directory and two runs: `1gb` (1 GB produced, as the issue's first row) and
# `sustained` (--sustained-gb, default 4 GB: several seconds, past the disk's write cache, the
# issue's second row). Reported per run: MB/s (10^6 bytes per second, each client's own
# figure) and the server's CPU seconds per GB (utime + stime of the server process, its io
# workers included, from /proc/PID/stat around the client run). RESULT lines give the medians
# and spool's ratios: `peer_sustained_ratio` (spool MB/s over Iggy's; issue 19's target ≥ 1.3)
# and `peer_sustained_cpu_ratio` (spool's CPU per GB over Iggy's; target ≤ 1).
#
# Everything targets loopback, every run is bounded in time, and the script kills only the
# processes it started (by PID) and removes its directory on exit.
#
# Usage: loadgen/peer_bench.sh --iggy DIR [--rounds N] [--sustained-gb G] [--keep]
set -euo pipefail

ROUNDS=3
SUSTAINED_GB=4
IGGY_DIR=""
KEEP=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iggy) IGGY_DIR="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --sustained-gb) SUSTAINED_GB="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "peer_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$IGGY_DIR/iggy-server" && -x "$IGGY_DIR/iggy-bench" ]] || {
  echo "peer_bench.sh: --iggy DIR must hold the iggy-server and iggy-bench binaries" >&2
  exit 2
}

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d /tmp/spool-peer-bench.XXXXXX)"
SERVER_PID=""
START=$(date +%s)
log() { echo "[peer $(( $(date +%s) - START ))s] $*" >&2; }

cleanup() {
  stop_server
  if [[ "$KEEP" == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# CPU seconds (utime + stime, all threads) of process $1.
proc_cpu_s() {
  python3 - "$1" <<'PY'
import os, sys
f = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()
print((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
PY
}

# Waits until something listens on 127.0.0.1:$1 (at most 20 s).
wait_port() {
  local i
  for i in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

read -r SERVER_CPUS CLIENT_CPUS < <(python3 -c "import os
c = sorted(os.sched_getaffinity(0))
h = max(1, (len(c) + 1) // 2)
s, l = c[:h], (c[h:] or c[:h])
print(','.join(map(str, s)), ','.join(map(str, l)))")
SERVER_CORES=$(tr ',' '\n' <<<"$SERVER_CPUS" | wc -l)

log "building spool's release binaries"
cargo build --release -q -p spool-broker --bin spool -p spool-loadgen --bin spool-loadgen \
  --manifest-path "$ROOT/Cargo.toml"
SPOOL="$ROOT/target/release/spool"
LOADGEN="$ROOT/target/release/spool-loadgen"

start_iggy() {
  local data="$WORK/iggy-data"
  rm -rf "$data"; mkdir -p "$data"
  # One shard per server CPU, pinned there; every other setting is the server's default
  # (its config.toml when DIR holds one, as the source tree's core/server/config.toml).
  local config=()
  [[ -f "$IGGY_DIR/config.toml" ]] && config=(IGGY_CONFIG_PATH="$IGGY_DIR/config.toml")
  env "${config[@]}" IGGY_SYSTEM_PATH="$data" IGGY_SYSTEM_SHARDING_CPU_ALLOCATION="$SERVER_CORES" \
    IGGY_TCP_ADDRESS=127.0.0.1:18090 IGGY_HTTP_ENABLED=false IGGY_QUIC_ENABLED=false \
    taskset -c "$SERVER_CPUS" "$IGGY_DIR/iggy-server" --with-default-root-credentials \
    >"$WORK/iggy-server.log" 2>&1 &
  SERVER_PID=$!
  wait_port 18090 || { log "iggy-server did not listen; see its log"; tail -20 "$WORK/iggy-server.log" >&2; exit 1; }
}

start_spool() {
  local data="$WORK/spool-data"
  rm -rf "$data"; mkdir -p "$data"
  "$SPOOL" serve --data-dir "$data" --kafka-port 18092 --native-port 18093 --internal-port 18094 \
    --admin-port 18644 --cpuset "$SERVER_CPUS" --durability fsync >"$WORK/spool-server.log" 2>&1 &
  SERVER_PID=$!
  wait_port 18093 || { log "spool did not listen; see its log"; tail -20 "$WORK/spool-server.log" >&2; exit 1; }
}

# One client run against the running server: prints "MBPS CPU_S_PER_GB".
iggy_run() {
  local name="$1" gb="$2" before after out
  before=$(proc_cpu_s "$SERVER_PID")
  out="$WORK/$name.txt"
  # 1,000 messages of 1 KiB per batch (iggy-bench's default batch), balanced producers: one
  # stream, one topic of 8 partitions, each producer spreading its batches over them.
  timeout 300 taskset -c "$CLIENT_CPUS" "$IGGY_DIR/iggy-bench" -m 1024 -T "${gb}GB" --enforce-fsync \
    balanced-producer --partitions 8 --producers 2 tcp --server-address 127.0.0.1:18090 \
    >"$out" 2>&1 || { log "iggy-bench failed: $(tail -3 "$out")"; echo "nan nan"; return; }
  after=$(proc_cpu_s "$SERVER_PID")
  python3 - "$out" "$before" "$after" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"\x1b\[[0-9;]*m", "", text)
# The report's summary: "Benchmark: ..., N messages, ..., S bytes per message, ..." and
# "Producers Results: Total throughput: X MB/s, ...".
m = re.search(r"Total throughput:\s*([0-9.]+)\s*MB/s", text)
b = re.search(r"\s([0-9]+) messages, .*?\s([0-9]+) bytes per message", text)
mbps = float(m.group(1)) if m else float("nan")
sent = float(b.group(1)) * float(b.group(2)) if b else float("nan")
cpu = float(sys.argv[3]) - float(sys.argv[2])
print(f"{mbps:.1f} {cpu / (sent / 1e9):.3f}")
PY
}

spool_run() {
  local name="$1" gb="$2" before after out
  before=$(proc_cpu_s "$SERVER_PID")
  out="$WORK/$name.txt"
  # The same shape through spool's client: acks=all (idempotent), 512 KiB batches of 1 KiB
  # records handed over 64 at a time (loadgen/bench.sh's produce-max flags).
  timeout 300 "$LOADGEN" produce --brokers 127.0.0.1:18093 --topic peer --partitions 8 \
    --producers 2 --cores 2 --cpuset "$CLIENT_CPUS" --message-bytes 1024 --acks all \
    --batch-bytes 524288 --linger-ms 10 --messages $(( gb * 1000000000 / 1024 )) --quiet \
    >"$out" 2>&1 || { log "spool-loadgen failed: $(tail -3 "$out")"; echo "nan nan"; return; }
  after=$(proc_cpu_s "$SERVER_PID")
  python3 - "$out" "$before" "$after" <<'PY'
import sys
kv = {}
for line in open(sys.argv[1]):
    if line.startswith("LOADGEN "):
        kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
mbps = float(kv.get("produce_mbps", "nan"))
sent = float(kv.get("produce_bytes", "nan"))
cpu = float(sys.argv[3]) - float(sys.argv[2])
print(f"{mbps:.1f} {cpu / (sent / 1e9):.3f}")
PY
}

declare -A R
for round in $(seq 1 "$ROUNDS"); do
  order=(iggy spool)
  (( round % 2 == 0 )) && order=(spool iggy)
  for who in "${order[@]}"; do
    "start_$who"
    for run in 1gb sustained; do
      gb=1; [[ "$run" == sustained ]] && gb="$SUSTAINED_GB"
      read -r mbps cpu <<<"$("${who}_run" "$who-$run-$round" "$gb")"
      R[$who,$run]+="$mbps/$cpu "
      log "round $round: $who $run (${gb} GB): $mbps MB/s, server $cpu CPU-s/GB"
    done
    # The topic's files go with the data directory; a fresh server for the next broker.
    stop_server
  done
done

median() { python3 -c "import statistics, sys; v=[float(x) for x in sys.argv[1:] if x != 'nan']; print(f'{statistics.median(v):.3f}' if v else 'nan')" "$@"; }
echo "CPUs: servers on $SERVER_CPUS, clients on $CLIENT_CPUS; runs (MB/s / server CPU-s per GB):"
for who in iggy spool; do
  for run in 1gb sustained; do
    echo "  $who $run: ${R[$who,$run]}"
    mb=(); cp=()
    for pair in ${R[$who,$run]}; do mb+=("${pair%/*}"); cp+=("${pair#*/}"); done
    echo "RESULT ${who}_${run}_mbps=$(median "${mb[@]}")"
    echo "RESULT ${who}_${run}_server_cpu_s_per_gb=$(median "${cp[@]}")"
    declare "M_${who}_${run}=$(median "${mb[@]}")" "C_${who}_${run}=$(median "${cp[@]}")"
  done
done
ratio() { python3 -c "a, b = float('$1'), float('$2'); print(f'{a / b:.3f}' if b == b and b else 'nan')"; }
echo "RESULT peer_1gb_ratio=$(ratio "$M_spool_1gb" "$M_iggy_1gb")"
echo "RESULT peer_sustained_ratio=$(ratio "$M_spool_sustained" "$M_iggy_sustained")"
echo "RESULT peer_sustained_cpu_ratio=$(ratio "$C_spool_sustained" "$C_iggy_sustained")"
log "done"
