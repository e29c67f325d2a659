//! `spool-faults`: the fault harness's runner (issue 15), as `tests/faults.sh` runs it.
//!
//! ```text
//! spool-faults --runs N --seconds S [--seed X] [--from-run I] [--workload queue|acks1|txn|ctp]
//!              [--nemesis KIND[,KIND]] [--skip KIND[,KIND...]] [--negative-control] [--out DIR]
//! ```
//!
//! Run `i` of a campaign (`--from-run` first, default 0) gets its nemeses from
//! `faults::nemesis::plan(seed, i)` (nine consecutive runs cover every kind) and alternates the
//! workloads (even runs `queue`, odd `acks1`) unless `--workload`/`--nemesis` fix them;
//! `txn` (transactional producers, checked with read_committed) and `ctp` (a
//! consume-transform-produce processor, checked for exactly once) run only when named. Each run
//! prints one `RUN` line, writes `DIR/run-<i>/run.json` and, when it fails, keeps its brokers'
//! logs there with the line to replay it. The campaign ends with `RESULT` lines and exits 1 when
//! any run lost, duplicated, reordered, contradicted or vanished anything, or could not finish.
//!
//! `--negative-control` runs brokers that acknowledge from memory (`--durability replicated`,
//! no interval flush) under the kill-all nemesis: they must lose acknowledged writes, and the
//! checker must say so (`fault_lost` > 0, exit 1).
//!
//! SIGINT/SIGTERM stop the campaign at the run's next step, and everything is cleaned up.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use spool_tests::faults::nemesis::{plan, Kind};
use spool_tests::faults::run::{interrupted, run, RunConfig, RunResult, Workload};

struct Args {
    runs: u64,
    seconds: u64,
    seed: u64,
    from_run: u64,
    workload: Option<Workload>,
    nemesis: Option<Vec<Kind>>,
    /// Kinds left out of the rotation (`--skip`).
    skip: Vec<Kind>,
    /// Group consumers that read nothing do not fail a run (`--tolerate consumer-stall`).
    tolerate_consumer_stall: bool,
    negative_control: bool,
    out: PathBuf,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "spool-faults: {problem}\nusage: spool-faults --runs N --seconds S [--seed X] [--from-run I] \
         [--workload queue|acks1|txn|ctp] [--nemesis KIND[,KIND]] [--skip KIND,...] [--tolerate consumer-stall] \
         [--negative-control] [--out DIR]\n\
         nemeses: {}",
        Kind::ALL.iter().chain(&[Kind::KillAll]).map(|k| k.name()).collect::<Vec<_>>().join(", ")
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 1,
        seconds: 20,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        from_run: 0,
        workload: None,
        nemesis: None,
        skip: Vec::new(),
        tolerate_consumer_stall: false,
        negative_control: false,
        out: PathBuf::from("target/faults"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {v}")))
        };
        match flag.as_str() {
            "--runs" => args.runs = number(value()),
            "--seconds" => args.seconds = number(value()),
            "--seed" => args.seed = number(value()),
            "--from-run" => args.from_run = number(value()),
            "--out" => args.out = PathBuf::from(value()),
            "--negative-control" => args.negative_control = true,
            "--workload" => {
                args.workload = Some(match value().as_str() {
                    "queue" => Workload::Queue,
                    "acks1" => Workload::Acks1,
                    "txn" => Workload::Txn,
                    "ctp" => Workload::Ctp,
                    other => usage(&format!("unknown workload {other}")),
                })
            }
            "--nemesis" => {
                let kinds: Vec<Kind> = value()
                    .split(',')
                    .map(|n| {
                        Kind::parse(n).unwrap_or_else(|| usage(&format!("unknown nemesis {n}")))
                    })
                    .collect();
                if kinds.is_empty() || kinds.len() > 2 {
                    usage("--nemesis takes one or two kinds");
                }
                args.nemesis = Some(kinds);
            }
            "--tolerate" => match value().as_str() {
                "consumer-stall" => args.tolerate_consumer_stall = true,
                other => usage(&format!("--tolerate takes consumer-stall, not {other}")),
            },
            "--skip" => {
                args.skip = value()
                    .split(',')
                    .filter(|n| !n.is_empty())
                    .map(|n| {
                        Kind::parse(n).unwrap_or_else(|| usage(&format!("unknown nemesis {n}")))
                    })
                    .collect();
            }
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if args.runs == 0 || args.seconds < 5 {
        usage("--runs must be at least 1 and --seconds at least 5");
    }
    args
}

extern "C" fn on_signal(_: libc::c_int) {
    // An atomic store is async-signal-safe; the runs look at the flag between steps.
    interrupted().store(true, Ordering::SeqCst);
}

/// Which kinds cannot run here, and why (iptables and loop mounts need root).
fn unavailable_kinds() -> Vec<Kind> {
    let mut out = Vec::new();
    if let Err(e) = spool_tests::netfilter::Cut::available() {
        eprintln!("spool-faults: no iptables here ({e}): skipping isolate and one-way");
        out.extend([Kind::Isolate, Kind::OneWay]);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("spool-faults: not root: skipping disk-full (it needs a loop mount)");
        out.push(Kind::DiskFull);
    }
    out
}

/// The harness's brokers are the `spool` built beside this binary unless `SPOOL_BIN` names
/// one (`tests/faults.sh` builds both).
fn find_spool() {
    if std::env::var_os("SPOOL_BIN").is_some() {
        return;
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("spool")));
    match beside {
        Some(p) if p.is_file() => std::env::set_var("SPOOL_BIN", p),
        _ => usage(
            "no `spool` binary beside this one: build it (tests/faults.sh does) or set SPOOL_BIN",
        ),
    }
}

/// The clients' own log (spool's producer and consumer run in this process): warnings by
/// default, and librdkafka's idempotent producer's `eos` debug lines (it is asked for no other
/// debug context), more with `SPOOL_FAULTS_LOG` (an env-filter, e.g.
/// `spool_protocol::client::group=debug`), to `clients.log` in the campaign's directory, so a
/// stalled client says what it was doing and a duplicate which producer id and epoch sent it.
fn log_clients(out: &std::path::Path) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPOOL_FAULTS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,librdkafka=debug"));
    let opened =
        std::fs::create_dir_all(out).and_then(|()| std::fs::File::create(out.join("clients.log")));
    match opened {
        Ok(file) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .init(),
        Err(e) => eprintln!("spool-faults: no clients.log in {}: {e}", out.display()),
    }
}

fn main() {
    let args = parse_args();
    find_spool();
    log_clients(&args.out);
    // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe, and it has the
    // signature `signal` expects.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut unavailable = unavailable_kinds();
    if !args.skip.is_empty() {
        let names: Vec<&str> = args.skip.iter().map(|k| k.name()).collect();
        println!(
            "spool-faults: leaving out of the rotation: {}",
            names.join(", ")
        );
        unavailable.extend(args.skip.iter().copied());
    }
    println!(
        "spool-faults: campaign seed {} runs {}..{} of {} s{}",
        args.seed,
        args.from_run,
        args.from_run + args.runs,
        args.seconds,
        if args.negative_control {
            " (negative control)"
        } else {
            ""
        }
    );
    let mut results: Vec<RunResult> = Vec::new();
    for i in args.from_run..args.from_run + args.runs {
        if interrupted().load(Ordering::SeqCst) {
            break;
        }
        let kinds = if args.negative_control {
            vec![Kind::KillAll]
        } else {
            args.nemesis
                .clone()
                .unwrap_or_else(|| plan(args.seed, i, &unavailable))
        };
        let workload = args.workload.unwrap_or(if i % 2 == 0 {
            Workload::Queue
        } else {
            Workload::Acks1
        });
        let cfg = RunConfig {
            seed: args.seed.wrapping_mul(1_000_003).wrapping_add(i),
            seconds: args.seconds,
            workload,
            kinds: kinds.clone(),
            negative_control: args.negative_control,
            dir: args.out.join(format!("run-{i}")),
            tolerate_consumer_stall: args.tolerate_consumer_stall,
        };
        let r = run(&cfg);
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        println!(
            "RUN {i} workload={} nemeses={} result={} {} elapsed_ms={}",
            workload.name(),
            names.join("+"),
            if r.failed() { "FAIL" } else { "ok" },
            r.report.summary(),
            r.elapsed_ms
        );
        if let Some(e) = &r.error {
            println!("  error: {}", e.lines().next().unwrap_or(""));
            std::fs::write(cfg.dir.join("error.txt"), e).ok();
        }
        for v in r
            .report
            .lost
            .iter()
            .chain(&r.report.duplicated)
            .chain(&r.report.reordered)
            .chain(&r.report.inconsistent)
            .chain(&r.report.vanished_reads)
            .chain(&r.report.commits_backwards)
            .chain(&r.report.stalled)
            .chain(&r.report.consumers_stalled)
            .take(10)
        {
            println!("  violation: {v}");
        }
        if r.failed() {
            println!(
                // The workload and nemeses are named, not re-derived: the plan depends on what
                // was left out, which a replay need not repeat.
                "  kept {} — replay: tests/faults.sh --seed {} --from-run {i} --runs 1 --seconds {} --workload {}{}",
                cfg.dir.display(),
                args.seed,
                args.seconds,
                workload.name(),
                if args.negative_control {
                    " --negative-control".to_string()
                } else {
                    format!(" --nemesis {}", names.join(","))
                }
            );
        }
        results.push(r);
    }
    report(&results);
    let failed = results.iter().any(RunResult::failed) || interrupted().load(Ordering::SeqCst);
    std::process::exit(if failed { 1 } else { 0 });
}

fn report(results: &[RunResult]) {
    let sum = |f: &dyn Fn(&RunResult) -> usize| results.iter().map(f).sum::<usize>();
    let mut by_nemesis: BTreeMap<String, u64> = BTreeMap::new();
    for r in results {
        for (k, ms) in &r.report.unavailable_ms_by_nemesis {
            let e = by_nemesis.entry(k.clone()).or_default();
            *e = (*e).max(*ms);
        }
    }
    println!("RESULT fault_runs={}", results.len());
    println!(
        "RESULT fault_failed_runs={}",
        results.iter().filter(|r| r.failed()).count()
    );
    println!(
        "RESULT fault_harness_errors={}",
        results.iter().filter(|r| r.error.is_some()).count()
    );
    println!("RESULT fault_acked_all={}", sum(&|r| r.report.acked_all));
    println!(
        "RESULT fault_acked_acks1={}",
        sum(&|r| r.report.acked_leader)
    );
    println!("RESULT fault_lost={}", sum(&|r| r.report.lost.len()));
    println!(
        "RESULT fault_lost_acks1_allowed={}",
        sum(&|r| r.report.lost_acks1)
    );
    println!(
        "RESULT fault_duplicated={}",
        sum(&|r| r.report.duplicated.len())
    );
    println!(
        "RESULT fault_duplicated_acks1_allowed={}",
        sum(&|r| r.report.duplicated_acks1)
    );
    println!(
        "RESULT fault_reordered={}",
        sum(&|r| r.report.reordered.len())
    );
    // A client's epoch bump, told apart by the copies' batch headers (not spool's to prevent).
    println!(
        "RESULT fault_duplicated_across_epochs_allowed={}",
        sum(&|r| r.report.duplicated_across_epochs.len())
    );
    println!(
        "RESULT fault_reordered_across_epochs_allowed={}",
        sum(&|r| r.report.reordered_across_epochs.len())
    );
    println!(
        "RESULT fault_inconsistent={}",
        sum(&|r| r.report.inconsistent.len())
    );
    println!(
        "RESULT fault_vanished_reads={}",
        sum(&|r| r.report.vanished_reads.len())
    );
    println!(
        "RESULT fault_commits_backwards={}",
        sum(&|r| r.report.commits_backwards.len())
    );
    println!("RESULT fault_stalled={}", sum(&|r| r.report.stalled.len()));
    println!(
        "RESULT fault_consumers_stalled={}{}",
        sum(&|r| usize::from(r.report.consumers_stalled.is_some())),
        if results.iter().any(|r| r.tolerate_consumer_stall) {
            " (tolerated)"
        } else {
            ""
        }
    );
    println!(
        "RESULT fault_max_unavailable_ms={}",
        results
            .iter()
            .map(|r| r.report.max_unavailable_ms)
            .max()
            .unwrap_or(0)
    );
    for (k, ms) in by_nemesis {
        println!(
            "RESULT fault_max_unavailable_ms_{}={ms}",
            k.replace('-', "_")
        );
    }
}
