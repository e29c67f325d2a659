//! [`SimConfig`]: everything one run needs besides its seed's draws.
//!
//! Owns: the cluster shape (controller nodes, brokers), the controller's timing as the broker
//! configures it (50 ms ticks, raft's 10-tick election timeout and 3-tick heartbeat, 250 ms
//! broker heartbeats, 1500 ms sessions), the run's length and quiet window, and the planted bug.
//! Promises: [`SimConfig::new`] gives the defaults the CLI and tests use; the snapshot interval
//! is smaller than production's (64 entries, not 1024) so runs exercise snapshots, their
//! transfer and restores from them.
//! Never does: draw anything (the seed is only carried here).

use spool_core::liveness::{
    BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT, BROKER_SESSION_TIMEOUT_MS_DEFAULT,
};

use crate::planted::PlantedBug;

#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    pub nodes: u64,
    pub brokers: i32,
    /// Total simulated time.
    pub sim_ms: u64,
    /// Faults stop this long before the end; liveness is judged at the end.
    pub quiet_ms: u64,
    pub tick_interval_ms: u64,
    pub election_ticks: usize,
    pub heartbeat_ticks: usize,
    pub snapshot_every_entries: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
    pub fsync_ms_min: u64,
    pub fsync_ms_max: u64,
    pub planted: Option<PlantedBug>,
    /// Only broker and network faults (the controller nodes are never crashed, paused or cut).
    pub broker_faults: bool,
    /// Some crashes of controller node 1 also lose its disk ([`crate::faults::Fault::Wipe`]).
    /// Off by default (not in the CI budget): a wiped voter owes a catch-up before it votes
    /// (`spool_raft::lost_log`), and a run where a second voter also owes one — it started
    /// fresh and never caught up — has no quorum that may elect anyone, which is raft's
    /// majority loss, reported by the liveness check (1 of 1,000 seeds).
    pub voter_wipes: bool,
    /// Print every trace line as it happens.
    pub verbose: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            nodes: 3,
            brokers: 4,
            sim_ms: 60_000,
            quiet_ms: 15_000,
            tick_interval_ms: 50,
            election_ticks: 10,
            heartbeat_ticks: 3,
            snapshot_every_entries: 64,
            broker_heartbeat_interval_ms: BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT,
            session_timeout_ms: BROKER_SESSION_TIMEOUT_MS_DEFAULT,
            fsync_ms_min: 1,
            fsync_ms_max: 12,
            planted: None,
            broker_faults: false,
            voter_wipes: false,
            verbose: false,
        }
    }

    /// When scheduled faults stop.
    pub fn faults_end_ms(&self) -> u64 {
        self.sim_ms.saturating_sub(self.quiet_ms)
    }
}
