//! [`Workaround`]: sim-side stand-ins for fixes to real bugs the simulator found in production
//! code, so runs can look past a known bug for the next one.
//!
//! Owns: the names `--workaround` accepts. Each one models the fix proposed for its bug (see
//! the report in the crate's history); none changes a production crate.
//! Promises: off by default — a default run drives the production code exactly as it is, so a
//! known bug keeps showing until it is fixed for real.
//! Never does: hide a violation of another kind; a workaround changes what the simulated
//! controller or transport does, never what the checkers accept.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workaround {
    /// Bug: a broker that re-registers (a restart within its session) is fenced by the new
    /// `RegisterBroker` record but keeps leading its partitions (`validate_register_broker` /
    /// `MetadataImage::apply_register_broker` move no leadership). Stand-in fix: the simulated
    /// controller first proposes `fence_brokers_records` for the old incarnation, then the
    /// registration.
    FenceBeforeReregister,
    /// Bug: `MetadataRaft` never tells raft-rs that a snapshot send failed (`report_snapshot`
    /// is not reachable through it), so a follower whose `MsgSnapshot` is lost stays behind
    /// until the leader changes — and so does one whose acknowledgement of an installed
    /// snapshot is lost (the leader's progress stays in Snapshot state; heartbeat responses do
    /// not unpause it). Stand-in fix (what `report_snapshot` after a confirmed send would give):
    /// the simulated transport resends a `MsgSnapshot` every 300 ms while its sender still leads
    /// that term and has not received an append response from the follower at or past the
    /// snapshot's index.
    ReliableSnapshots,
    /// Bug: a new raft leader validates and proposes against `latest_image()` (committed + its
    /// own pending proposals) while its log still holds uncommitted entries of earlier terms, so
    /// its failover decisions miss them — e.g. a topic created (leader b2) in term 9, committed
    /// in term 10 after the new leader fenced b2 without seeing it: a fenced broker leads.
    /// Stand-in fix: the simulated controller answers NOT_CONTROLLER and fences nobody until it
    /// has applied an entry of its own term (so every earlier entry is in its image).
    LeaderWaitsForOwnTerm,
}

impl Workaround {
    pub const ALL: [Workaround; 3] = [
        Workaround::FenceBeforeReregister,
        Workaround::ReliableSnapshots,
        Workaround::LeaderWaitsForOwnTerm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workaround::FenceBeforeReregister => "fence-before-reregister",
            Workaround::ReliableSnapshots => "reliable-snapshots",
            Workaround::LeaderWaitsForOwnTerm => "leader-waits-for-own-term",
        }
    }
}

impl fmt::Display for Workaround {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workaround {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Workaround::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Workaround::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workaround {s:?}; known: {}", names.join(", "))
            })
    }
}
