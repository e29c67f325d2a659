#!/usr/bin/env python3
"""The disk alone, in the I/O pattern of spool's half-load produce: what an acknowledgement
under `--durability fsync` must wait for, with no broker, network or client in the way.

Each of `--files` threads appends `--write-bytes` with O_DIRECT to its own file, space
preallocated as the broker's segments are (fallocate), and fdatasyncs after every write, on a
fixed schedule (`--mbps-per-file`). A chain's latency runs from the time it was due (not when
it started, so a chain held up by the one before it counts the wait) to the fdatasync's
return. Prints one line: `DISK_CHAIN chain_p50_ms=… chain_p99_ms=… chain_p999_ms=…
fdatasync_p99_ms=… write_p99_ms=… mbps=…`.

Why: issue 19's half-load target compares the producer's p99 with fio's fsync p99 of a lone
4 KiB write; at half load the disk also carries hundreds of MB/s of writes from 8 segment
files, and this measures what those writes and fdatasyncs cost by themselves, in the same run,
so BENCHMARKS.md can say how much of the producer's p99 is the disk's.

Threads: Python's GIL is released inside pwrite and fdatasync, so the chains overlap as the
broker's do. Bounded: runs `--seconds`, writes at most rate x seconds per file, removes its
files.
"""

import argparse
import mmap
import os
import threading
import time


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i]


def chain(path, write_bytes, interval_s, seconds, out):
    file_bytes = int((seconds / interval_s + 2) * write_bytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    try:
        os.posix_fallocate(fd, 0, file_bytes)
        buf = mmap.mmap(-1, write_bytes)  # page aligned, as O_DIRECT needs
        buf.write(os.urandom(4096) * (write_bytes // 4096))
        chains, syncs, writes = [], [], []
        start = time.monotonic()
        i = 0
        while True:
            due = start + i * interval_s
            now = time.monotonic()
            if due - start >= seconds:
                break
            if now < due:
                time.sleep(due - now)
            offset = i * write_bytes
            if offset + write_bytes > file_bytes:
                break
            t0 = time.monotonic()
            os.pwrite(fd, buf, offset)
            t1 = time.monotonic()
            os.fdatasync(fd)
            t2 = time.monotonic()
            writes.append(t1 - t0)
            syncs.append(t2 - t1)
            chains.append(t2 - max(due, start))
            i += 1
        out.append((chains, syncs, writes, i * write_bytes, start, time.monotonic()))
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--write-bytes", type=int, default=256 << 10)
    p.add_argument("--mbps-per-file", type=float, required=True)
    p.add_argument("--seconds", type=float, default=6.0)
    a = p.parse_args()
    if a.write_bytes % 4096 or a.write_bytes <= 0:
        p.error("--write-bytes must be a positive multiple of 4096 (O_DIRECT)")
    if a.mbps_per_file <= 0 or a.files <= 0:
        p.error("--mbps-per-file and --files must be positive")
    interval_s = a.write_bytes / (a.mbps_per_file * 1e6)
    out = []
    threads = [
        threading.Thread(
            target=chain,
            args=(os.path.join(a.dir, f"chain-{n}.dat"), a.write_bytes, interval_s, a.seconds, out),
        )
        for n in range(a.files)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(out) != a.files:
        raise SystemExit("a chain failed (see above)")
    chains = sorted(x for c in out for x in c[0])
    syncs = sorted(x for c in out for x in c[1])
    writes = sorted(x for c in out for x in c[2])
    # From the first chain's start to the last one's end: fallocate is not part of the rate.
    elapsed = max(c[5] for c in out) - min(c[4] for c in out)
    mbps = sum(c[3] for c in out) / elapsed / 1e6
    ms = lambda v: f"{v * 1000:.3f}"  # noqa: E731
    print(
        "DISK_CHAIN"
        f" chain_p50_ms={ms(percentile(chains, 0.5))}"
        f" chain_p99_ms={ms(percentile(chains, 0.99))}"
        f" chain_p999_ms={ms(percentile(chains, 0.999))}"
        f" fdatasync_p99_ms={ms(percentile(syncs, 0.99))}"
        f" write_p99_ms={ms(percentile(writes, 0.99))}"
        f" chains={len(chains)} mbps={mbps:.1f}"
    )


if __name__ == "__main__":
    main()
