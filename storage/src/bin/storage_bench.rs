//! `storage-bench`: the partition log's append throughput against this machine's own disk.
//!
//! Measures, alternating with fio so the disk's noise hits both alike, `--rounds` times (median
//! reported): fio sequential O_DIRECT 1 MiB writes (best of iodepth 1, 4, 16) and fio 4 KiB
//! writes with fdatasync (sync latency); then the log appending 1 KiB records in 64 KiB batches to
//! 1 partition, to 1,000 partitions, and to 1 partition with an fdatasync-acknowledged append
//! (group commit, `--fsync-producers` concurrent appenders, as a broker sees from many producers);
//! fio with an fdatasync every 8 MiB is the disk's own bound for that last figure. Finally the time to reopen a
//! `--reopen-gib` log after a crash (no clean shutdown). Prints one `RESULT key=value` per figure.
//!
//! Each append run first warms up (every partition fills its staging buffer twice, untimed), so
//! the figures are a running broker's steady state.
//!
//! Runs on one pinned glommio executor, in `--dir` (default `./target/storage-bench`, on the
//! disk being measured), which it removes at the end. Installs fio with apt-get if missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use glommio::{LocalExecutorBuilder, Placement};
use spool_storage::records::BatchBuilder;
use spool_storage::{LogConfig, PartitionLog};

struct Args {
    dir: PathBuf,
    seconds: u64,
    rounds: usize,
    partitions: usize,
    fsync_producers: usize,
    reopen_gib: u64,
    skip_fio: bool,
}

/// `--core-writes N`: the core's bound on writes in flight for every run (default: the
/// broker's, `core_writes::CORE_WRITES_IN_FLIGHT_MAX`); set once in `main`, read by each
/// executor thread.
static CORE_WRITES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(spool_storage::core_writes::CORE_WRITES_IN_FLIGHT_MAX);

/// `--prewrite-bytes N`: the zeros' lead (`LogConfig::prewrite_bytes`) of the fsync run
/// (default: the broker's under `--durability fsync`, 8 MiB; 0 turns it off). The runs without
/// fdatasync use none, as the broker under `--durability replicated`.
static PREWRITE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(8 << 20);

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("target/storage-bench"),
        seconds: 5,
        rounds: 3,
        partitions: 1000,
        fsync_producers: 64,
        reopen_gib: 2,
        skip_fio: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let val = || argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--dir" => a.dir = PathBuf::from(val()),
            "--seconds" => a.seconds = val().parse().unwrap_or(a.seconds),
            "--rounds" => a.rounds = val().parse().unwrap_or(a.rounds),
            "--partitions" => a.partitions = val().parse().unwrap_or(a.partitions),
            "--fsync-producers" => a.fsync_producers = val().parse().unwrap_or(a.fsync_producers),
            "--reopen-gib" => a.reopen_gib = val().parse().unwrap_or(a.reopen_gib),
            "--core-writes" => {
                if let Ok(n @ 1..) = val().parse::<usize>() {
                    CORE_WRITES.store(n, std::sync::atomic::Ordering::Relaxed);
                }
            }
            "--prewrite-bytes" => {
                if let Ok(n) = val().parse::<u64>() {
                    PREWRITE.store(n / 4096 * 4096, std::sync::atomic::Ordering::Relaxed);
                }
            }
            "--skip-fio" => {
                a.skip_fio = true;
                i += 1;
                continue;
            }
            "-h" | "--help" => {
                println!("storage-bench [--dir D] [--seconds S] [--rounds R] [--partitions N] [--fsync-producers N] [--reopen-gib G] [--core-writes N] [--prewrite-bytes N] [--skip-fio]");
                std::process::exit(0);
            }
            other => {
                eprintln!("storage-bench: unknown argument {other}");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

// ---- fio: the disk's own limits ----

fn ensure_fio() {
    if Command::new("fio").arg("--version").output().is_ok() {
        return;
    }
    eprintln!("storage-bench: fio missing, installing it with apt-get");
    let _ = Command::new("apt-get").args(["update", "-qq"]).status();
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-qq", "fio"])
        .status()
        .map(|s| s.success());
    if !matches!(ok, Ok(true)) {
        eprintln!("storage-bench: could not install fio; rerun with --skip-fio");
        std::process::exit(1);
    }
}

/// The number after `"key" :` following `section` in fio's JSON output.
fn json_number_after(json: &str, section: &str, key: &str) -> Option<f64> {
    let from = json.find(section)?;
    let rest = &json[from..];
    let at = rest.find(key)? + key.len();
    let tail = rest[at..].trim_start_matches(|c: char| c == '"' || c == ':' || c.is_whitespace());
    let end =
        tail.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-' || c == '+'))?;
    tail[..end].parse().ok()
}

fn fio(dir: &Path, args: &[&str]) -> String {
    let file = dir.join("fio.dat");
    let out = Command::new("fio")
        .arg("--name=bench")
        .arg(format!("--filename={}", file.display()))
        .args(["--output-format=json", "--time_based"])
        .args(args)
        .output()
        .expect("fio runs");
    let _ = std::fs::remove_file(&file);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Best sequential O_DIRECT 1 MiB write bandwidth over iodepth 1, 4, 16, in MB/s.
fn fio_write_mbps(dir: &Path) -> f64 {
    [1, 4, 16]
        .iter()
        .map(|qd| {
            let j = fio(
                dir,
                &[
                    "--rw=write",
                    "--bs=1M",
                    "--direct=1",
                    "--ioengine=io_uring",
                    "--size=4G",
                    "--runtime=4",
                    &format!("--iodepth={qd}"),
                ],
            );
            json_number_after(&j, "\"write\" : {", "\"bw_bytes\"").unwrap_or(0.0) / 1e6
        })
        .fold(0.0, f64::max)
}

/// The same 1 MiB writes (iodepth 4) with an fdatasync every 8 MiB: the disk's own bound on
/// fsync-acknowledged throughput, in MB/s.
fn fio_write_fsync_mbps(dir: &Path) -> f64 {
    let j = fio(
        dir,
        &[
            "--rw=write",
            "--bs=1M",
            "--direct=1",
            "--ioengine=io_uring",
            "--size=4G",
            "--runtime=4",
            "--iodepth=4",
            "--fdatasync=8",
        ],
    );
    json_number_after(&j, "\"write\" : {", "\"bw_bytes\"").unwrap_or(0.0) / 1e6
}

/// p99 of fdatasync after a 4 KiB write, in ms.
fn fio_fsync_p99_ms(dir: &Path) -> f64 {
    let j = fio(
        dir,
        &[
            "--rw=write",
            "--bs=4k",
            "--fdatasync=1",
            "--ioengine=sync",
            "--size=256M",
            "--runtime=4",
        ],
    );
    let sync = j.find("\"sync\" : {").map(|i| &j[i..]).unwrap_or("");
    json_number_after(sync, "\"percentile\"", "\"99.000000\"").unwrap_or(f64::NAN) / 1e6
}

// ---- the log ----

/// A 64 KiB batch of 1 KiB records.
fn template_batch() -> BytesMut {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    while b.estimated_bytes() + 1024 + 16 <= 64 * 1024 {
        b.push(1_700_000_000_000, None, Some(Bytes::from(vec![0x5a; 1024])));
    }
    b.build().expect("batch builds")
}

/// Runs `f` on an executor pinned to CPU 0, after settling glommio's choice of ring for `dir`'s
/// disk as the broker does (`spool_storage::poll_probe`), so the figures are the broker's.
fn run_on_core<T: Send + 'static>(dir: PathBuf, f: impl AsyncFnOnce() -> T + Send + 'static) -> T {
    LocalExecutorBuilder::new(Placement::Fixed(0))
        .name("storage-bench")
        .spawn(move || async move {
            // The probe writes a file in `dir`, which the bench has not made yet.
            std::fs::create_dir_all(&dir).expect("bench dir");
            spool_storage::core_writes::set_limit(
                CORE_WRITES.load(std::sync::atomic::Ordering::Relaxed),
            );
            spool_storage::poll_probe::settle(&dir)
                .await
                .expect("probing the bench disk");
            f().await
        })
        .expect("executor starts")
        .join()
        .expect("bench runs")
}

fn bench_config(partitions: usize) -> LogConfig {
    if partitions == 1 {
        LogConfig::default()
    } else {
        // Per-partition memory and preallocation scaled for a thousand logs on one core.
        LogConfig {
            write_buffer_bytes: 256 << 10,
            tail_cache_bytes: 256 << 10,
            preallocate_bytes: 4 << 20,
            ..LogConfig::default()
        }
    }
}

/// Appends for `seconds` round-robin over `partitions` logs; returns MB/s (bytes made durable by
/// a final flush + fdatasync are counted, the final sync inside the time).
fn append_mbps(dir: PathBuf, partitions: usize, seconds: u64) -> f64 {
    run_on_core(dir.clone(), async move || {
        let mut logs = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let (log, _) = PartitionLog::open(dir.join(format!("t-{p}")), bench_config(partitions))
                .await
                .expect("open");
            logs.push(log);
        }
        let batch = template_batch();
        let mut i = 0usize;
        // Warm-up, untimed: every partition fills its staging buffer twice, so the figure is the
        // steady state a running broker sees, not the first touch of `partitions` fresh buffers
        // (1,000 × 256 KiB faulted in took most of a 4 s run on 2026-12-06).
        let warm_bytes = 2 * partitions as u64 * bench_config(partitions).write_buffer_bytes as u64;
        let mut warmed = 0u64;
        while warmed < warm_bytes {
            logs[i % partitions]
                .append(batch.clone(), 0, 0)
                .await
                .expect("append");
            warmed += batch.len() as u64;
            i += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let start = Instant::now();
        let mut bytes = 0u64;
        while Instant::now() < deadline {
            for _ in 0..64 {
                logs[i % partitions]
                    .append(batch.clone(), 0, 0)
                    .await
                    .expect("append");
                bytes += batch.len() as u64;
                i += 1;
            }
        }
        // Everything appended reaches the disk inside the measured time (written, not synced:
        // this is the no-fsync figure), all partitions at once.
        let flushes: Vec<_> = logs
            .iter()
            .map(|log| {
                let log = Rc::clone(log);
                glommio::spawn_local(async move { log.flush().await })
            })
            .collect();
        for f in flushes {
            f.await.expect("flush");
        }
        let mbps = bytes as f64 / start.elapsed().as_secs_f64() / 1e6;
        for log in &logs {
            log.close().await.expect("close");
        }
        mbps
    })
}

/// `producers` concurrent appenders on one log, each acknowledged only after fdatasync.
fn append_fsync_mbps(dir: PathBuf, producers: usize, seconds: u64) -> (f64, f64) {
    run_on_core(dir.clone(), async move || {
        let config = LogConfig {
            prewrite_bytes: PREWRITE.load(std::sync::atomic::Ordering::Relaxed),
            ..LogConfig::default()
        };
        let (log, _) = PartitionLog::open(dir.join("t-fsync"), config)
            .await
            .expect("open");
        let batch = template_batch();
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let log = Rc::clone(&log);
            let batch = batch.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut acked = 0u64;
                while Instant::now() < deadline {
                    let info = log.append(batch.clone(), 0, 0).await.expect("append");
                    log.sync_to(info.log_end_offset).await.expect("sync");
                    acked += batch.len() as u64;
                }
                acked
            }));
        }
        let mut bytes = 0;
        for t in tasks {
            bytes += t.await;
        }
        let secs = start.elapsed().as_secs_f64();
        let batches = bytes as f64 / batch.len() as f64;
        eprintln!(
            "fsync bench: {batches} batches acknowledged, {} fdatasyncs",
            log.fdatasync_count()
        );
        log.close().await.expect("close");
        (bytes as f64 / secs / 1e6, batches)
    })
}

/// Writes `gib` GiB plus 900 MiB (so the active 1 GiB segment is nearly full: the worst case
/// for the scan) without a clean shutdown, drops the page cache (a cold restart), then times the
/// reopen. Returns (ms, log bytes, active segment bytes scanned, segments scanned).
fn reopen_after_crash_ms(dir: PathBuf, gib: u64) -> (f64, u64, u64, usize) {
    run_on_core(dir.clone(), async move || {
        let path = dir.join("t-reopen");
        {
            let (log, _) = PartitionLog::open(&path, LogConfig::default())
                .await
                .expect("open");
            let batch = template_batch();
            let mut written = 0u64;
            while written < (gib << 30) + (900 << 20) {
                log.append(batch.clone(), 0, 0).await.expect("append");
                written += batch.len() as u64;
            }
            log.sync_to(log.log_end_offset()).await.expect("sync");
            // Dropped without close: what kill -9 leaves.
        }
        // Let the executor close the dropped files before reopening.
        glommio::yield_if_needed().await;
        // SAFETY: sync(2) takes no arguments and touches no memory of ours.
        unsafe { libc::sync() };
        if std::fs::write("/proc/sys/vm/drop_caches", "1").is_err() {
            eprintln!(
                "storage-bench: cannot drop the page cache (not root?): reopen is measured warm"
            );
        }
        let start = Instant::now();
        let (log, stats) = PartitionLog::open(&path, LogConfig::default())
            .await
            .expect("reopen");
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert!(!stats.clean);
        let size = log.size_bytes();
        (ms, size, stats.scanned_bytes, stats.segments_scanned)
    })
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct passed by pointer, which lives here.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn main() {
    let args = parse_args();
    raise_fd_limit();
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    if !args.skip_fio {
        ensure_fio();
    }
    let (mut disk, mut disk_fsync, mut fsync_p99) = (vec![], vec![], vec![]);
    let (mut p1, mut p1000, mut p1f) = (vec![], vec![], vec![]);
    for round in 0..args.rounds {
        if !args.skip_fio {
            disk.push(fio_write_mbps(&args.dir));
            disk_fsync.push(fio_write_fsync_mbps(&args.dir));
            fsync_p99.push(fio_fsync_p99_ms(&args.dir));
        }
        let dir = args.dir.join(format!("round-{round}"));
        p1.push(append_mbps(dir.join("p1"), 1, args.seconds));
        p1000.push(append_mbps(
            dir.join("p1000"),
            args.partitions,
            args.seconds,
        ));
        let (mbps, _) = append_fsync_mbps(dir.join("fsync"), args.fsync_producers, args.seconds);
        p1f.push(mbps);
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!(
            "round {round}: disk {:.0} MB/s ({:.0} with fdatasync/8 MiB), fsync p99 {:.2} ms | p1 {:.0} MB/s, p{} {:.0} MB/s, p1 fsync {:.0} MB/s",
            disk.last().copied().unwrap_or(f64::NAN),
            disk_fsync.last().copied().unwrap_or(f64::NAN),
            fsync_p99.last().copied().unwrap_or(f64::NAN),
            p1.last().unwrap(),
            args.partitions,
            p1000.last().unwrap(),
            p1f.last().unwrap()
        );
    }
    let (disk, p1, p1000, p1f) = (median(disk), median(p1), median(p1000), median(p1f));
    let disk_fsync = median(disk_fsync);
    println!("RESULT disk_write_mbps={disk:.1}");
    println!("RESULT disk_write_fsync8_mbps={disk_fsync:.1}");
    println!("RESULT fsync_p99_ms={:.2}", median(fsync_p99));
    println!("RESULT storage_append_mbps_p1={p1:.1}");
    println!("RESULT storage_append_mbps_p1000={p1000:.1}");
    println!("RESULT storage_append_mbps_p1_fsync={p1f:.1}");
    println!("RESULT storage_ratio_p1={:.3}", p1 / disk);
    println!("RESULT storage_ratio_p1000={:.3}", p1000 / disk);
    println!("RESULT storage_p1000_over_p1={:.3}", p1000 / p1);
    println!("RESULT storage_ratio_p1_fsync={:.3}", p1f / disk);
    println!("RESULT storage_fsync_over_nofsync_p1={:.3}", p1f / p1);
    println!(
        "RESULT storage_ratio_p1_fsync_vs_fio_fsync8={:.3}",
        p1f / disk_fsync
    );
    if args.reopen_gib > 0 {
        let (ms, size, scanned_bytes, scanned) =
            reopen_after_crash_ms(args.dir.join("reopen"), args.reopen_gib);
        println!("RESULT reopen_after_crash_ms={ms:.0}");
        println!("RESULT reopen_log_bytes={size}");
        println!("RESULT reopen_scanned_bytes={scanned_bytes}");
        println!("RESULT reopen_segments_scanned={scanned}");
    }
    let _ = std::fs::remove_dir_all(&args.dir);
}
