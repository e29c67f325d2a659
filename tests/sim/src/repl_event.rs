//! [`ReplEvent`]: what a broker's replication step tells the replication checkers — the facts
//! they cannot see in the replicas' state afterwards.
//!
//! Owns: the event kinds.
//! Promises: pushed in the order they happened, in the step they happened.
//! Never does: check anything ([`crate::check_repl`] does).

use crate::metaview::PartKey;
use crate::plog::SimBatch;

#[derive(Debug, Clone)]
pub enum ReplEvent {
    /// `broker` started leading `key` at `leader_epoch`.
    LeaderTook {
        broker: i32,
        key: PartKey,
        leader_epoch: i32,
    },
    /// A follower cut its log from `offset` on, because of the leader's answer (not a crash).
    Truncated {
        broker: i32,
        key: PartKey,
        offset: u64,
        cut: Vec<SimBatch>,
    },
    /// A leader appended a producer's batch.
    Appended {
        broker: i32,
        key: PartKey,
        batch: SimBatch,
    },
    /// A leader acknowledged an acks=all batch, its ISR at that moment.
    AckedAll {
        broker: i32,
        key: PartKey,
        batch: SimBatch,
        isr: Vec<i32>,
    },
}
