//! [`Violation`]: a broken invariant, named.
//!
//! Owns: the invariant names the checkers report (so tests and the CLI can match on them).
//! Promises: `invariant` is one of the constants below; `detail` says which nodes, indexes,
//! terms or partitions disagree.
//! Never does: check anything.

pub const ELECTION_SAFETY: &str = "election-safety";
pub const LOG_MATCHING: &str = "log-matching";
pub const COMMITTED_NEVER_LOST: &str = "committed-never-lost";
pub const LEADER_COMPLETENESS: &str = "leader-completeness";
pub const ACKNOWLEDGED_IS_DURABLE: &str = "acknowledged-is-durable";
pub const IMAGE_AGREES: &str = "applied-image-agrees";
pub const EPOCHS_MONOTONIC: &str = "epochs-monotonic";
pub const ONE_LEADER_PER_EPOCH: &str = "one-leader-per-leader-epoch";
pub const ISR_SUBSET: &str = "isr-subset-of-replicas-and-holds-leader";
pub const FENCED_LEADS_NOTHING: &str = "no-fenced-leader";
pub const REPL_ONE_LEADER_PER_EPOCH: &str = "replica-one-leader-per-leader-epoch";
pub const REPL_EPOCHS_MONOTONIC: &str = "replica-epochs-monotonic";
pub const REPL_ISR_SUBSET: &str = "replica-isr-subset-of-replicas-and-holds-leader";
pub const HW_MONOTONIC: &str = "high-watermark-monotonic";
pub const HW_WITHIN_LOG: &str = "follower-high-watermark-within-log";
pub const BELOW_HW_AGREES: &str = "replicas-agree-below-high-watermark";
pub const ACKED_IN_LATER_LEADERS: &str = "acked-all-in-every-later-leader";
pub const ACKED_ON_ISR_DISKS: &str = "acked-all-on-every-isr-disk";
pub const ISR_HOLDS_HW: &str = "isr-members-hold-the-high-watermark";
pub const LEADER_COUNTS_WHAT_FOLLOWERS_HOLD: &str = "leader-counts-only-what-followers-hold";
pub const COMMITTED_NEVER_TRUNCATED: &str = "committed-never-truncated";
pub const NO_DUPLICATE_SEQUENCE: &str = "no-producer-sequence-appended-twice";
pub const EPOCH_CACHE_GROWS: &str = "epoch-cache-only-grows";
pub const READS_COMMITTED: &str = "reads-never-truncated";
/// The transaction world's invariants (`check_txn`).
pub const TXN_COMMIT_MARKER_IN_EVERY_PARTITION: &str = "txn-commit-marker-in-every-partition";
pub const TXN_READ_COMMITTED_SEES_NO_ABORTED: &str = "txn-read-committed-sees-no-aborted";
pub const TXN_LSO_NEVER_DECREASES: &str = "txn-lso-never-decreases";
pub const TXN_FENCED_EPOCH_NEVER_WRITES: &str = "txn-fenced-epoch-never-writes";
pub const DRIVER_ERROR: &str = "driver-error";
/// The code under test panicked (raft-rs asserts some of its invariants itself).
pub const PANIC: &str = "panic";
pub const LIVENESS: &str = "liveness";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

impl Violation {
    pub fn new(invariant: &'static str, detail: impl Into<String>) -> Self {
        Violation {
            invariant,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}
