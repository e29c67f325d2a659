//! Running many seeds and reporting them: the part of the binary that is not argument parsing.
//!
//! Owns: [`replay_command`] and [`txn_replay_command`] (the exact command line that replays one
//! seed of the cluster world or the transaction world) and [`find_bug`] and [`find_txn_bug`]
//! (the first failing seed in a range, used by the planted-bug tests).
//! Promises: `replay_command` names every setting that changes a run (seed, length, planted
//! bug), so pasting it reproduces the run.
//! Never does: read time (the binary's `main` measures wall time for its speed figure).

use crate::config::SimConfig;
use crate::txn_world::{TxnConfig, TxnRunReport};
use crate::world::RunReport;

/// The command that replays `config`'s seed with a full trace.
pub fn replay_command(config: &SimConfig) -> String {
    let mut cmd = format!(
        "cargo run --release -p spool-sim -- --seed {} --sim-seconds {} --quiet-seconds {}",
        config.seed,
        config.sim_ms / 1000,
        config.quiet_ms / 1000
    );
    if let Some(bug) = config.planted {
        cmd.push_str(&format!(" --planted-bug {bug}"));
    }
    if config.broker_faults {
        cmd.push_str(" --broker-faults");
    }
    if config.voter_wipes {
        cmd.push_str(" --voter-wipes");
    }
    cmd
}

/// Runs seeds `first..first + count` with `base`'s settings; returns the first failing run.
pub fn find_bug(base: &SimConfig, first: u64, count: u64) -> Option<RunReport> {
    (first..first + count).find_map(|seed| {
        let report = crate::run(SimConfig {
            seed,
            verbose: false,
            ..base.clone()
        });
        report.violation.is_some().then_some(report)
    })
}

/// The command that replays `config`'s seed of the transaction world with a full trace.
pub fn txn_replay_command(config: &TxnConfig) -> String {
    let mut cmd = format!(
        "cargo run --release -p spool-sim -- --world txn --seed {} --sim-seconds {}",
        config.seed,
        config.sim_ms / 1000
    );
    if let Some(bug) = config.planted {
        cmd.push_str(&format!(" --planted-bug {bug}"));
    }
    cmd
}

/// Runs transaction-world seeds `first..first + count` with `base`'s settings; returns the
/// first failing run.
pub fn find_txn_bug(base: &TxnConfig, first: u64, count: u64) -> Option<TxnRunReport> {
    (first..first + count).find_map(|seed| {
        let report = crate::run_txn(TxnConfig {
            seed,
            verbose: false,
            ..base.clone()
        });
        report.violation.is_some().then_some(report)
    })
}
