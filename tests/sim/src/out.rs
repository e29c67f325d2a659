//! [`Out`]: what one step of a simulated node hands back to the world.
//!
//! Owns: the messages to send, the trace notes, the fsync requests (the world draws each one's
//! latency and schedules its completion), the entries and snapshots written to disk (for the raft
//! checks) and driver errors.
//! Promises: filled in the order things happened, so the world sends and traces in that order.
//! Never does: act on anything itself.

use crate::message::Envelope;
use crate::repl_event::ReplEvent;

/// What a driver wrote to its disk, for the raft checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// One entry written (overwriting the log from `index` on).
    Appended {
        node: u64,
        index: u64,
        term: u64,
        /// FNV-1a over the entry's type, context and data.
        content_hash: u64,
    },
    /// A snapshot received from the leader replaced the log through `index`.
    SnapshotInstalled { node: u64, index: u64 },
}

/// A request for an fsync whose completion the world schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncRequest {
    pub node: u64,
    pub token: u64,
}

#[derive(Debug, Default)]
pub struct Out {
    pub sends: Vec<Envelope>,
    pub notes: Vec<String>,
    pub syncs: Vec<SyncRequest>,
    pub observed: Vec<Observed>,
    /// Nodes that (re)started in this step.
    pub started: Vec<u64>,
    /// Errors a real driver would log or die of (e.g. `advance` failing).
    pub errors: Vec<String>,
    /// Replication facts for the replication checkers.
    pub repl: Vec<ReplEvent>,
    /// Replicas a step may have changed, (broker, partition): the replication checks look at these.
    pub repl_touched: Vec<(i32, crate::metaview::PartKey)>,
    /// Partition-log fsyncs a broker started: (broker, incarnation, token).
    pub log_syncs: Vec<(i32, u64, u64)>,
}

impl Out {
    pub fn note(&mut self, text: String) {
        self.notes.push(text);
    }
}
