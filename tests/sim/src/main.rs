//! `spool-sim`: runs seeds of the deterministic simulator and reports them.
//!
//! `--seeds N` runs seeds `--first-seed ..+N`; `--seed S` replays one with its full trace. Ends
//! with `RESULT sim_seeds=…`, `RESULT sim_violations=…`, `RESULT sim_speedup=…` (simulated
//! seconds per wall second) and exits 1 on any violation, printing the command that replays it.
//! Wall time is read here, for the speed figure only; the simulated world never sees it.
//!
//! `--world cluster` (the default) runs the controller-and-replication world
//! (`spool_sim::world`); `--world txn` runs the transaction world (`spool_sim::txn_world`:
//! the transaction coordinator, partitions' transaction state, transactional producers and a
//! read_committed reader), whose RESULT lines are prefixed `txn_` (`RESULT txn_seeds=…`,
//! `RESULT txn_violations=…`, `RESULT txn_seeds_per_second=…`). Only the transaction world
//! catches `--planted-bug marker-on-some-partitions`.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use spool_sim::runner::{replay_command, txn_replay_command};
use spool_sim::{PlantedBug, SimConfig, TxnConfig};

/// Which simulated world a run builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WorldKind {
    /// Controller quorum, brokers, replication, producers and readers (`spool_sim::world`).
    Cluster,
    /// Transaction coordinator, partitions' transaction state, transactional producers and a
    /// read_committed reader (`spool_sim::txn_world`).
    Txn,
}

#[derive(Parser, Debug)]
#[command(about = "spool's deterministic simulator: the real controller core in a seeded world")]
struct Args {
    /// The world to run: `cluster` (controller and replication) or `txn` (transactions).
    #[arg(long, value_enum, default_value_t = WorldKind::Cluster)]
    world: WorldKind,
    /// Run this many seeds (starting at --first-seed).
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Replay one seed, printing its whole trace.
    #[arg(long)]
    seed: Option<u64>,
    /// Simulated seconds per run (default: 60 for the cluster world, 20 for the txn world).
    #[arg(long)]
    sim_seconds: Option<u64>,
    /// Faults stop this many simulated seconds before the end (at most half the run); liveness
    /// is judged at the end.
    #[arg(long, default_value_t = 15)]
    quiet_seconds: u64,
    /// Stop at the first violation instead of running every seed.
    #[arg(long)]
    stop_at_first: bool,
    /// Plant a bug: in the simulator's raft driver (ack-before-persist, skip-fsync) or in
    /// spool-core's replication (truncate-to-hw, elect-outside-isr, hw-before-isr,
    /// ack-before-follower-fsync, eligible-at-min-isr, keep-old-incarnation) — all for the
    /// cluster world — or in spool-core's transaction coordinator (marker-on-some-partitions,
    /// for `--world txn`).
    #[arg(long)]
    planted_bug: Option<PlantedBug>,
    /// Only broker and network faults: the controller quorum stays up, so runs spend their
    /// faults on replication (the replication planted-bug tests use it).
    #[arg(long)]
    broker_faults: bool,
    /// Some crashes of controller node 1 also wipe its disk (a voter back without its raft
    /// log, `spool_raft::lost_log`). A run with two voters owing a catch-up ends leaderless
    /// (raft's majority loss): the liveness check reports it.
    #[arg(long)]
    voter_wipes: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A panic in the code under test is caught and reported as a `panic` violation with its
    // message; the default hook would only add noise (and a backtrace per seed).
    std::panic::set_hook(Box::new(|_| {}));
    if let Some(bug) = args.planted_bug {
        if bug.in_cluster_world() != (args.world == WorldKind::Cluster) {
            eprintln!("--planted-bug {bug} belongs to the other world (see --help)");
            return ExitCode::from(2);
        }
    }
    if args.world == WorldKind::Txn {
        return run_txn_world(&args);
    }
    let base = SimConfig {
        sim_ms: args.sim_seconds.unwrap_or(60) * 1000,
        planted: args.planted_bug,
        broker_faults: args.broker_faults,
        voter_wipes: args.voter_wipes,
        ..SimConfig::new(0)
    };
    let base = SimConfig {
        quiet_ms: (args.quiet_seconds * 1000).min(base.sim_ms / 2),
        ..base
    };
    let (seeds, verbose) = seeds_of(&args);
    let started = Instant::now();
    let (mut violations, mut sim_ms, mut events) = (0u64, 0u64, 0u64);
    let mut repl = spool_sim::check_repl::ReplStats::default();
    for &seed in &seeds {
        let config = SimConfig {
            seed,
            verbose,
            ..base.clone()
        };
        let report = spool_sim::run(config.clone());
        sim_ms += report.sim_ms;
        events += report.events;
        repl.add(&report.repl);
        if verbose {
            println!(
                "seed {seed}: trace hash {:016x}, {} events, max applied index {}, {} faults",
                report.trace_hash, report.events, report.commits_max, report.faults
            );
        }
        if let Some((at_ms, v)) = &report.violation {
            violations += 1;
            let replay = replay_command(&config);
            print_violation(seed, verbose, &report.tail, "", *at_ms, v, &replay);
            if args.stop_at_first {
                break;
            }
        }
    }
    let wall_s = started.elapsed().as_secs_f64().max(1e-9);
    let sim_s = sim_ms as f64 / 1000.0;
    println!("RESULT sim_seeds={}", seeds.len());
    println!("RESULT sim_violations={violations}");
    println!("RESULT sim_seconds={sim_s:.0}");
    println!("RESULT sim_events={events}");
    println!(
        "RESULT sim_repl leaderships={} truncations={} committed_batches={} acked={} acked_all={} read={}",
        repl.leaderships, repl.truncations, repl.committed_batches, repl.acked, repl.acked_all, repl.read
    );
    println!("RESULT sim_wall_seconds={wall_s:.2}");
    println!("RESULT sim_speedup={:.0}", sim_s / wall_s);
    println!(
        "RESULT sim_seeds_per_minute={:.0}",
        seeds.len() as f64 * 60.0 / wall_s
    );
    if violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The seeds to run, and whether to print whole traces (`--seed` replays one).
fn seeds_of(args: &Args) -> (Vec<u64>, bool) {
    match args.seed {
        Some(s) => (vec![s], true),
        None => (
            (args.first_seed..args.first_seed + args.seeds).collect(),
            false,
        ),
    }
}

/// One violating seed: its last trace lines (unless the whole trace was printed), the
/// violation, and the command that replays it.
fn print_violation(
    seed: u64,
    verbose: bool,
    tail: &[String],
    world: &str,
    at_ms: u64,
    v: &spool_sim::Violation,
    replay: &str,
) {
    if !verbose {
        println!("--- {world}seed {seed}: last trace lines ---");
        for line in tail {
            println!("{line}");
        }
    }
    println!("VIOLATION {world}seed={seed} at={at_ms}ms {v}");
    println!("replay: {replay}");
}

/// `--world txn`: runs (or replays) transaction-world seeds.
fn run_txn_world(args: &Args) -> ExitCode {
    let base = TxnConfig {
        sim_ms: args.sim_seconds.unwrap_or(20) * 1000,
        planted: args.planted_bug,
        ..TxnConfig::new(0)
    };
    let (seeds, verbose) = seeds_of(args);
    let started = Instant::now();
    let (mut violations, mut sim_ms, mut events) = (0u64, 0u64, 0u64);
    let mut stats = spool_sim::check_txn::TxnStats::default();
    for &seed in &seeds {
        let config = TxnConfig {
            seed,
            verbose,
            ..base.clone()
        };
        let report = spool_sim::run_txn(config.clone());
        sim_ms += report.sim_ms;
        events += report.events;
        stats.add(&report.stats);
        if verbose {
            println!(
                "seed {seed}: trace hash {:016x}, {} events, {} faults, {:?}",
                report.trace_hash, report.events, report.faults, report.stats
            );
        }
        if let Some((at_ms, v)) = &report.violation {
            violations += 1;
            let replay = txn_replay_command(&config);
            print_violation(
                seed,
                verbose,
                &report.tail,
                "world=txn ",
                *at_ms,
                v,
                &replay,
            );
            if args.stop_at_first {
                break;
            }
        }
    }
    let wall_s = started.elapsed().as_secs_f64().max(1e-9);
    println!("RESULT txn_seeds={}", seeds.len());
    println!("RESULT txn_violations={violations}");
    println!("RESULT txn_sim_seconds={:.0}", sim_ms as f64 / 1000.0);
    println!("RESULT txn_events={events}");
    println!(
        "RESULT txn_stats committed={} aborted={} data_batches={} markers={} records_read={} late_markers_refused={}",
        stats.committed,
        stats.aborted,
        stats.data_batches,
        stats.markers,
        stats.records_read,
        stats.late_markers_refused
    );
    println!("RESULT txn_wall_seconds={wall_s:.2}");
    println!(
        "RESULT txn_seeds_per_second={:.1}",
        seeds.len() as f64 / wall_s
    );
    if violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
