//! [`PlantedBug`]: replication bugs compiled into the real decision code on purpose, so the
//! deterministic simulator (tests/sim, issue #14) can prove its checkers fail when this code is
//! wrong. Only with the cargo feature `planted-bugs`, which only `spool-sim` enables; without it
//! this module does not exist and every planted branch is compiled out.
//!
//! Owns: the bug names and where each one is selected:
//! - [`PlantedBug::TruncateToHw`] in `follower_state::FollowerPartition::truncation_for` and
//!   [`PlantedBug::AckBeforeFollowerFsync`] in `FollowerPartition::next_fetch`, selected by the
//!   struct's `plant` method;
//! - [`PlantedBug::HwBeforeIsr`] in `replica::ReplicaState`'s watermark and
//!   [`PlantedBug::KeepOldIncarnation`] in its follower progress, selected by its `plant`;
//! - [`PlantedBug::ElectOutsideIsr`] in `election::reconcile` and
//!   [`PlantedBug::EligibleAtMinIsr`] in `election::eligible_leaders_after`, which spool-raft
//!   calls with signatures that must not change: selected for the current thread by [`scoped`]
//!   (the simulator runs one seed per thread and holds the guard for the run);
//! - [`PlantedBug::MarkerOnSomePartitions`] in `txn::coordinator`'s markers of a prepared
//!   transaction, selected the same way (by [`scoped`], read with [`thread_planted`]) so the
//!   coordinator's API does not change;
//! - [`PlantedBug::StaleMarkerAppended`] in `txn::marker_verdict`, selected the same way.
//!
//! Promises: with nothing planted (the default everywhere) every function behaves exactly as
//! without the feature.
//! Never does: enable itself; production builds never name the feature.

use std::cell::Cell;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// A follower answered with a diverging epoch truncates to its own HW (pre-KIP-101).
    TruncateToHw,
    /// An election picks the first live replica, in the ISR or not (Kafka 0.8's loss).
    ElectOutsideIsr,
    /// The leader's HW follows its own log end, not the ISR's smallest.
    HwBeforeIsr,
    /// Under `durability = fsync` a follower reports its log end instead of its synced offset.
    AckBeforeFollowerFsync,
    /// Members leaving the ISR stay eligible leaders (KIP-966) even when the ISR is at or above
    /// min ISR, so the watermark moved on without them.
    EligibleAtMinIsr,
    /// A follower that restarted (a new broker epoch, maybe an empty disk) keeps the log end
    /// its previous incarnation reported (KIP-903's bug).
    KeepOldIncarnation,
    /// The transaction coordinator's WriteMarkers names only the first of a prepared
    /// transaction's partitions, and the transaction still completes when those are written.
    MarkerOnSomePartitions,
    /// A partition appends every marker that passes the epoch fences, a late copy of an old
    /// transaction's marker included (the rule before decision offsets).
    StaleMarkerAppended,
}

thread_local! {
    static ELECTION: Cell<Option<PlantedBug>> = const { Cell::new(None) };
}

/// Selects `bug` for the elections and transaction coordinators this thread runs until the
/// guard drops.
pub fn scoped(bug: Option<PlantedBug>) -> Scoped {
    let before = ELECTION.with(|c| c.replace(bug));
    Scoped { before }
}

/// Whether `bug` is selected for this thread's elections.
pub fn election_planted(bug: PlantedBug) -> bool {
    thread_planted(bug)
}

/// Whether `bug` is selected for this thread (by [`scoped`]).
pub fn thread_planted(bug: PlantedBug) -> bool {
    ELECTION.with(|c| c.get()) == Some(bug)
}

/// Restores the previous selection when dropped.
#[must_use]
pub struct Scoped {
    before: Option<PlantedBug>,
}

impl Drop for Scoped {
    fn drop(&mut self) {
        ELECTION.with(|c| c.set(self.before));
    }
}
