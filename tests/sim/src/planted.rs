//! [`PlantedBug`]: bugs compiled in on purpose, to prove the checkers fail when the code they
//! watch is wrong.
//!
//! Owns: the names `--planted-bug` accepts and what each one breaks.
//! Promises: with no planted bug selected (the default) the driver follows
//! `spool_raft::Controller`'s order of operations exactly and spool-core runs unplanted. The two
//! raft-driver bugs change only the driver in [`crate::node`]; the six replication bugs and the
//! two transaction bugs live in spool-core itself, where the real bug would be, behind its
//! `planted-bugs` feature (which only this crate enables) and selected at run time through
//! [`PlantedBug::core`]. The first eight are caught by the cluster world ([`crate::world`]);
//! `marker-on-some-partitions` and `stale-marker-appended` by the transaction world
//! ([`crate::txn_world`], `--world txn`), which is where transactions run (in the cluster world
//! they change nothing).
//! Never does: plant anything in spool-raft or a production build.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The driver advances raft — sending the votes and append acknowledgements that raft only
    /// allows once the state is durable — before its fsync completes. A crash in that window
    /// loses a vote or an entry the node already acknowledged.
    AckBeforePersist,
    /// The driver never fsyncs the raft log or hard state (only the incarnation, on open), so a
    /// power loss may drop everything the node ever acknowledged.
    SkipFsync,
    /// spool-core's follower truncates to its own HW on a diverging epoch (pre-KIP-101).
    TruncateToHw,
    /// spool-core's election picks the first live replica, in the ISR or not.
    ElectOutsideIsr,
    /// spool-core's leader advances its HW to its own log end, before the ISR has the batch.
    HwBeforeIsr,
    /// spool-core's follower reports its log end instead of its synced offset under fsync.
    AckBeforeFollowerFsync,
    /// spool-core keeps members leaving the ISR as eligible leaders even at min ISR.
    EligibleAtMinIsr,
    /// spool-core's leader keeps a restarted follower's previous log end (KIP-903's bug).
    KeepOldIncarnation,
    /// spool-core's transaction coordinator writes markers to only the first of a transaction's
    /// partitions, and completes it anyway.
    MarkerOnSomePartitions,
    /// spool-core's partitions append every marker past the epoch fences, so a late copy of an
    /// older transaction's marker ends the producer's next transaction.
    StaleMarkerAppended,
}

impl PlantedBug {
    pub const ALL: [PlantedBug; 10] = [
        PlantedBug::AckBeforePersist,
        PlantedBug::SkipFsync,
        PlantedBug::TruncateToHw,
        PlantedBug::ElectOutsideIsr,
        PlantedBug::HwBeforeIsr,
        PlantedBug::AckBeforeFollowerFsync,
        PlantedBug::EligibleAtMinIsr,
        PlantedBug::KeepOldIncarnation,
        PlantedBug::MarkerOnSomePartitions,
        PlantedBug::StaleMarkerAppended,
    ];

    /// The spool-core bug this selects (behind spool-core's `planted-bugs` feature), if it is
    /// one of the replication bugs planted in the real code.
    pub fn core(self) -> Option<spool_core::planted::PlantedBug> {
        use spool_core::planted::PlantedBug as Core;
        match self {
            PlantedBug::AckBeforePersist | PlantedBug::SkipFsync => None,
            PlantedBug::TruncateToHw => Some(Core::TruncateToHw),
            PlantedBug::ElectOutsideIsr => Some(Core::ElectOutsideIsr),
            PlantedBug::HwBeforeIsr => Some(Core::HwBeforeIsr),
            PlantedBug::AckBeforeFollowerFsync => Some(Core::AckBeforeFollowerFsync),
            PlantedBug::EligibleAtMinIsr => Some(Core::EligibleAtMinIsr),
            PlantedBug::KeepOldIncarnation => Some(Core::KeepOldIncarnation),
            PlantedBug::MarkerOnSomePartitions => Some(Core::MarkerOnSomePartitions),
            PlantedBug::StaleMarkerAppended => Some(Core::StaleMarkerAppended),
        }
    }

    /// Whether the cluster world ([`crate::world`]) can catch this bug; the others belong to
    /// the transaction world ([`crate::txn_world`]).
    pub fn in_cluster_world(self) -> bool {
        !matches!(
            self,
            PlantedBug::MarkerOnSomePartitions | PlantedBug::StaleMarkerAppended
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            PlantedBug::AckBeforePersist => "ack-before-persist",
            PlantedBug::SkipFsync => "skip-fsync",
            PlantedBug::TruncateToHw => "truncate-to-hw",
            PlantedBug::ElectOutsideIsr => "elect-outside-isr",
            PlantedBug::HwBeforeIsr => "hw-before-isr",
            PlantedBug::AckBeforeFollowerFsync => "ack-before-follower-fsync",
            PlantedBug::EligibleAtMinIsr => "eligible-at-min-isr",
            PlantedBug::KeepOldIncarnation => "keep-old-incarnation",
            PlantedBug::MarkerOnSomePartitions => "marker-on-some-partitions",
            PlantedBug::StaleMarkerAppended => "stale-marker-appended",
        }
    }
}

impl fmt::Display for PlantedBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlantedBug {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlantedBug::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = PlantedBug::ALL.iter().map(|b| b.name()).collect();
                format!("unknown planted bug {s:?}; known: {}", names.join(", "))
            })
    }
}
