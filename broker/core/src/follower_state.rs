//! One partition on a follower: what it asks the leader for, and what it does with the answer
//! (REPLICATION.md "Follower fetch", Kafka's `ReplicaFetcherThread` / `AbstractFetcherThread`).
//!
//! Owns: the follower's view of its own log (start, end, fdatasynced offset), its high watermark,
//! its leader-epoch cache, and the leader it follows. Decides: the next fetch's fields
//! ([`FollowerPartition::next_fetch`]), whether fetched batches may be appended
//! ([`FollowerPartition::check_batches`]), where to truncate on a diverging epoch
//! ([`FollowerPartition::truncation_for`]) or an out-of-range answer
//! ([`FollowerPartition::out_of_range`]).
//!
//! Promises (asserted):
//! - appended batches start exactly at the log end and keep the leader's offsets and epochs;
//! - the follower's high watermark is min(leader's HW, own log end) and never passes the log end;
//! - the epoch cache records each appended batch's epoch, and is cut with the log;
//! - truncation goes to the divergence point the leader named, never to the follower's own HW.
//!
//! Never does: I/O. The caller appends, truncates and fdatasyncs the log, then reports back
//! ([`FollowerPartition::on_appended`], [`FollowerPartition::on_truncated`],
//! [`FollowerPartition::on_synced`]).

use crate::epoch_cache::{Assigned, EpochEndOffset, LeaderEpochCache};
use crate::follower_fetch::FollowerFetch;

/// The planted bugs this file can select (`crate::planted`); without the feature, values of a
/// type with none, so every planted branch is dead code the compiler drops.
#[cfg(feature = "planted-bugs")]
mod bug {
    use crate::planted::PlantedBug;
    pub const TRUNCATE_TO_HW: PlantedBug = PlantedBug::TruncateToHw;
    pub const ACK_BEFORE_FOLLOWER_FSYNC: PlantedBug = PlantedBug::AckBeforeFollowerFsync;
}
#[cfg(not(feature = "planted-bugs"))]
mod bug {
    pub const TRUNCATE_TO_HW: super::Never = super::Never;
    pub const ACK_BEFORE_FOLLOWER_FSYNC: super::Never = super::Never;
}
#[cfg(not(feature = "planted-bugs"))]
#[derive(Clone, Copy)]
struct Never;

/// What the follower reports as held: its log end, or (under `durability = fsync`) the offset
/// it has fdatasynced, so that acks=all means on disk on every ISR member (DESIGN §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporting {
    LogEnd,
    Synced,
}

/// One fetched batch as the follower's log sees it (from its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub base_offset: u64,
    pub last_offset: u64,
    /// `partitionLeaderEpoch` as the leader wrote it.
    pub leader_epoch: i32,
}

/// Why fetched batches were refused before appending: a leader or wire bug, never appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRefusal {
    /// The first batch does not start at our log end, or batches leave a gap or overlap.
    NotContiguous { expected: u64, base_offset: u64 },
    /// `last_offset < base_offset`.
    Inverted { base_offset: u64, last_offset: u64 },
    /// A batch without a leader epoch, one newer than the leader's, or epochs going down.
    BadEpoch { base_offset: u64, leader_epoch: i32 },
}

/// Where to truncate on a diverging epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    pub offset: u64,
    /// `false` when we do not know the epoch the leader named: after cutting to the end of our
    /// largest epoch below it, the next fetch (with our new last epoch) may diverge again.
    pub complete: bool,
}

/// What to do after the leader answered OFFSET_OUT_OF_RANGE (Kafka's `fetchOffsetAndTruncate`),
/// given the leader's log start and end the caller then looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRange {
    /// The leader's log is shorter than ours (only after an unclean election): cut to its end.
    TruncateTo(u64),
    /// The leader's log starts past our end: drop our log and start at its start.
    StartAt(u64),
    /// Fetch from here (our end, which the leader has again).
    FetchFrom(u64),
}

/// One partition replica following a leader (module docs).
#[derive(Debug, Clone)]
pub struct FollowerPartition {
    replica_id: i32,
    broker_epoch: i64,
    leader_id: i32,
    leader_epoch: i32,
    log_start_offset: u64,
    log_end_offset: u64,
    synced_offset: u64,
    high_watermark: u64,
    epochs: LeaderEpochCache,
    /// The simulator's planted bug (`crate::planted`), if any.
    #[cfg(feature = "planted-bugs")]
    planted: Option<crate::planted::PlantedBug>,
}

impl FollowerPartition {
    /// A follower of `leader_id` at `leader_epoch` whose log holds `[log_start, log_end)`, all of
    /// it synced (it was just opened), with the HW it checkpointed and its epoch cache.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        replica_id: i32,
        broker_epoch: i64,
        leader_id: i32,
        leader_epoch: i32,
        log_start_offset: u64,
        log_end_offset: u64,
        high_watermark: u64,
        epochs: LeaderEpochCache,
    ) -> Self {
        assert!(log_start_offset <= log_end_offset);
        let f = FollowerPartition {
            replica_id,
            broker_epoch,
            leader_id,
            leader_epoch,
            log_start_offset,
            log_end_offset,
            synced_offset: log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
            epochs,
            #[cfg(feature = "planted-bugs")]
            planted: None,
        };
        f.assert_invariants();
        f
    }

    pub fn leader_id(&self) -> i32 {
        self.leader_id
    }

    /// Selects a planted bug for this follower (the simulator's proof that its checks fail).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: Option<crate::planted::PlantedBug>) {
        self.planted = bug;
    }

    #[cfg(feature = "planted-bugs")]
    fn planted(&self, bug: crate::planted::PlantedBug) -> bool {
        self.planted == Some(bug)
    }

    #[cfg(not(feature = "planted-bugs"))]
    fn planted(&self, _bug: Never) -> bool {
        false
    }
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn log_end_offset(&self) -> u64 {
        self.log_end_offset
    }
    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }
    pub fn synced_offset(&self) -> u64 {
        self.synced_offset
    }
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }
    pub fn epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// The controller made `leader_id` the leader at `leader_epoch` (never older than ours). The
    /// log is kept whole: what to cut is learned from the new leader's first answer.
    pub fn on_new_leader(&mut self, leader_id: i32, leader_epoch: i32) {
        assert!(
            leader_epoch >= self.leader_epoch,
            "leader epoch moved back: {} -> {leader_epoch}",
            self.leader_epoch
        );
        self.leader_id = leader_id;
        self.leader_epoch = leader_epoch;
    }

    /// This broker re-registered with a new broker epoch (KIP-903).
    pub fn on_broker_epoch(&mut self, broker_epoch: i64) {
        self.broker_epoch = broker_epoch;
    }

    /// The next fetch for this partition: from the log end, with the epoch of the last appended
    /// batch, reporting the synced offset when `reporting` says so.
    pub fn next_fetch(&self, reporting: Reporting) -> FollowerFetch {
        FollowerFetch {
            replica_id: self.replica_id,
            replica_broker_epoch: Some(self.broker_epoch),
            current_leader_epoch: Some(self.leader_epoch),
            fetch_offset: self.log_end_offset,
            last_fetched_epoch: self.epochs.latest_epoch(),
            log_start_offset: self.log_start_offset,
            durable_offset: match reporting {
                Reporting::LogEnd => None,
                // Planted: the log end passed off as durable, so acks=all counts page cache.
                Reporting::Synced if self.planted(bug::ACK_BEFORE_FOLLOWER_FSYNC) => {
                    Some(self.log_end_offset)
                }
                Reporting::Synced => Some(self.synced_offset),
            },
        }
    }

    /// Whether `batches` (in order) may be appended as they are: contiguous from our log end,
    /// each with an epoch in [our latest, the leader's], non-decreasing. Input from the network,
    /// so a refusal, not a panic.
    pub fn check_batches(&self, batches: &[BatchMeta]) -> Result<(), BatchRefusal> {
        let mut expected = self.log_end_offset;
        let mut min_epoch = self.epochs.latest_epoch().unwrap_or(0);
        for b in batches {
            if b.base_offset != expected {
                return Err(BatchRefusal::NotContiguous {
                    expected,
                    base_offset: b.base_offset,
                });
            }
            if b.last_offset < b.base_offset {
                return Err(BatchRefusal::Inverted {
                    base_offset: b.base_offset,
                    last_offset: b.last_offset,
                });
            }
            if b.leader_epoch < min_epoch || b.leader_epoch > self.leader_epoch {
                return Err(BatchRefusal::BadEpoch {
                    base_offset: b.base_offset,
                    leader_epoch: b.leader_epoch,
                });
            }
            min_epoch = b.leader_epoch;
            expected = b.last_offset + 1;
        }
        Ok(())
    }

    /// The caller appended `batches` (which passed [`Self::check_batches`]) and the log end is
    /// now `log_end_offset`; the leader's answer carried `leader_high_watermark`. Records the
    /// batches' epochs and returns the new high watermark = min(leader HW, log end), which only
    /// moves forward here (a leader's HW never decreases; a new leader's may lag, Kafka's
    /// follower keeps its own then).
    pub fn on_appended(
        &mut self,
        batches: &[BatchMeta],
        log_end_offset: u64,
        leader_high_watermark: u64,
    ) -> u64 {
        let mut end = self.log_end_offset;
        for b in batches {
            // Pair assertion with the log's own: a batch lands exactly at the end.
            assert_eq!(
                b.base_offset, end,
                "appended batch does not start at the log end"
            );
            let latest_before = self.epochs.latest();
            if let Assigned::Replaced { removed } =
                self.epochs.assign(b.leader_epoch, b.base_offset)
            {
                // Only a newer epoch starting where our latest (say, one we led without writing)
                // started may replace it; anything more means the log was not truncated first.
                assert!(
                    removed == 1 && latest_before.is_some_and(|l| l.start_offset == b.base_offset),
                    "epoch {} at {} contradicted {removed} cached epochs ({latest_before:?})",
                    b.leader_epoch,
                    b.base_offset
                );
            }
            end = b.last_offset + 1;
        }
        assert_eq!(end, log_end_offset, "log end after append");
        self.log_end_offset = log_end_offset;
        let hw = leader_high_watermark.min(log_end_offset);
        self.high_watermark = self.high_watermark.max(hw);
        self.assert_invariants();
        self.high_watermark
    }

    /// The leader's answer carried only its HW (no records): learn it.
    pub fn on_high_watermark(&mut self, leader_high_watermark: u64) -> u64 {
        self.on_appended(&[], self.log_end_offset, leader_high_watermark)
    }

    /// The log has fdatasynced everything below `offset`.
    pub fn on_synced(&mut self, offset: u64) {
        assert!(offset <= self.log_end_offset, "synced past the log end");
        self.synced_offset = self.synced_offset.max(offset);
    }

    /// Where to truncate when the leader answered `diverging` (Kafka's
    /// `getOffsetTruncationState`): if we know that epoch, to the earlier of where it ends here and
    /// where it ends on the leader; if not, to the end of our largest epoch below it (and fetch
    /// again). Never past our log end.
    ///
    /// Never to our own high watermark (KIP-101). The HW a follower holds is one round trip behind
    /// the leader's, so truncating to it can throw away records the leader already committed;
    /// if the old leader then dies and this follower is elected, they are lost — and a follower
    /// that kept them while this one did not leaves the replicas' logs diverged at the same
    /// offsets. The leader's epoch boundaries say exactly which suffix is not the leader's.
    pub fn truncation_for(&self, diverging: EpochEndOffset) -> Truncation {
        if self.planted(bug::TRUNCATE_TO_HW) {
            // Planted: pre-KIP-101, the follower's own (lagging) watermark.
            return Truncation {
                offset: self.high_watermark.max(self.log_start_offset),
                complete: true,
            };
        }
        let leader_end = diverging.end().unwrap_or(0);
        if diverging.is_undefined() {
            // The leader found no epoch for us; it answers OFFSET_OUT_OF_RANGE instead of this,
            // so only an old-protocol leader gets here: Kafka truncates to the end it named.
            return Truncation {
                offset: leader_end.min(self.log_end_offset),
                complete: true,
            };
        }
        let ours = self
            .epochs
            .end_offset_for(diverging.epoch, self.log_end_offset);
        match ours.end() {
            Some(our_end) if !ours.is_undefined() && ours.epoch == diverging.epoch => Truncation {
                offset: our_end.min(leader_end).min(self.log_end_offset),
                complete: true,
            },
            Some(our_end) if !ours.is_undefined() => Truncation {
                offset: our_end.min(self.log_end_offset),
                complete: false,
            },
            _ => Truncation {
                offset: leader_end.min(self.log_end_offset),
                complete: true,
            },
        }
    }

    /// What to do after OFFSET_OUT_OF_RANGE, given the leader's log start and end.
    pub fn out_of_range(&self, leader_log_start: u64, leader_log_end: u64) -> OutOfRange {
        if leader_log_end < self.log_end_offset {
            OutOfRange::TruncateTo(leader_log_end)
        } else if leader_log_start > self.log_end_offset {
            OutOfRange::StartAt(leader_log_start)
        } else {
            OutOfRange::FetchFrom(self.log_end_offset)
        }
    }

    /// The caller truncated the log so that `offset` is its end. The epoch cache is cut with it;
    /// the HW and synced offset cannot stay above the end.
    pub fn on_truncated(&mut self, offset: u64) {
        assert!(
            offset <= self.log_end_offset && offset >= self.log_start_offset,
            "truncation to {offset} outside [{}, {}]",
            self.log_start_offset,
            self.log_end_offset
        );
        self.log_end_offset = offset;
        self.epochs.truncate_from_end(offset);
        self.synced_offset = self.synced_offset.min(offset);
        self.high_watermark = self.high_watermark.min(offset);
        self.assert_invariants();
    }

    /// The caller raised the log's start to `offset` (the leader's log start, capped at our log
    /// end): DeleteRecords reaching this replica, so a failover to it cannot bring deleted
    /// records back. Never lowers it; epochs wholly below it leave the cache, as in the log.
    pub fn on_log_start(&mut self, offset: u64) {
        assert!(
            offset <= self.log_end_offset,
            "log start {offset} past the log end {}",
            self.log_end_offset
        );
        self.log_start_offset = self.log_start_offset.max(offset);
        self.epochs.truncate_from_start(self.log_start_offset);
        self.assert_invariants();
    }

    /// The caller dropped the whole log and starts it again empty at `offset` (the leader's log
    /// start, [`OutOfRange::StartAt`]).
    pub fn on_restarted_at(&mut self, offset: u64) {
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.synced_offset = offset;
        self.high_watermark = offset;
        self.epochs.clear();
        self.assert_invariants();
    }

    fn assert_invariants(&self) {
        assert!(self.log_start_offset <= self.log_end_offset);
        assert!(
            self.synced_offset <= self.log_end_offset,
            "synced past the log end"
        );
        assert!(
            self.high_watermark <= self.log_end_offset,
            "follower HW {} past its log end {}",
            self.high_watermark,
            self.log_end_offset
        );
        if let Some(latest) = self.epochs.latest() {
            // Equal when we led that epoch and wrote nothing in it.
            assert!(
                latest.start_offset <= self.log_end_offset,
                "epoch {latest:?} starts past the log end {}",
                self.log_end_offset
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, u64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new();
        for &(e, s) in entries {
            c.assign(e, s);
        }
        c
    }

    fn batch(base_offset: u64, last_offset: u64, leader_epoch: i32) -> BatchMeta {
        BatchMeta {
            base_offset,
            last_offset,
            leader_epoch,
        }
    }

    /// DeleteRecords on a follower: its log start rises (never falls), its next fetch reports
    /// it to the leader, and epochs below it leave the cache.
    #[test]
    fn a_raised_log_start_is_reported_and_never_lowered() {
        let mut f = FollowerPartition::new(2, 7, 1, 3, 0, 20, 20, cache(&[(2, 0), (3, 10)]));
        f.on_log_start(12);
        assert_eq!(f.next_fetch(Reporting::LogEnd).log_start_offset, 12);
        assert_eq!(
            f.epochs()
                .entries()
                .first()
                .map(|e| (e.epoch, e.start_offset)),
            Some((3, 12))
        );
        f.on_log_start(5);
        assert_eq!(f.log_start_offset(), 12, "never lowered");
    }

    #[test]
    fn appends_learn_the_watermark_one_round_trip_behind() {
        let mut f = FollowerPartition::new(2, 7, 1, 3, 0, 10, 10, cache(&[(3, 0)]));
        let fetch = f.next_fetch(Reporting::LogEnd);
        assert_eq!(
            (
                fetch.fetch_offset,
                fetch.last_fetched_epoch,
                fetch.current_leader_epoch
            ),
            (10, Some(3), Some(3))
        );
        let batches = [batch(10, 14, 3), batch(15, 19, 3)];
        assert_eq!(f.check_batches(&batches), Ok(()));
        assert_eq!(
            f.on_appended(&batches, 20, 12),
            12,
            "leader HW below our end"
        );
        assert_eq!(f.on_high_watermark(25), 20, "never past our end");
        assert_eq!(f.next_fetch(Reporting::Synced).durable_offset, Some(10));
        f.on_synced(20);
        assert_eq!(f.next_fetch(Reporting::Synced).durable_offset, Some(20));
        assert_eq!(f.next_fetch(Reporting::LogEnd).durable_offset, None);
    }

    #[test]
    fn bad_batches_are_refused_before_appending() {
        let mut f = FollowerPartition::new(2, 7, 1, 4, 0, 10, 0, cache(&[(3, 0)]));
        assert_eq!(
            f.check_batches(&[batch(11, 12, 3)]),
            Err(BatchRefusal::NotContiguous {
                expected: 10,
                base_offset: 11
            })
        );
        assert_eq!(
            f.check_batches(&[batch(10, 12, 3), batch(12, 13, 3)]),
            Err(BatchRefusal::NotContiguous {
                expected: 13,
                base_offset: 12
            })
        );
        assert_eq!(
            f.check_batches(&[batch(10, 9, 3)]),
            Err(BatchRefusal::Inverted {
                base_offset: 10,
                last_offset: 9
            })
        );
        assert_eq!(
            f.check_batches(&[batch(10, 12, 5)]),
            Err(BatchRefusal::BadEpoch {
                base_offset: 10,
                leader_epoch: 5
            }),
            "newer than the leader"
        );
        assert_eq!(
            f.check_batches(&[batch(10, 12, 2)]),
            Err(BatchRefusal::BadEpoch {
                base_offset: 10,
                leader_epoch: 2
            }),
            "older than ours"
        );
        assert!(f.check_batches(&[batch(10, 12, -1)]).is_err());
        let ok = [batch(10, 12, 3), batch(13, 15, 4)];
        assert_eq!(f.check_batches(&ok), Ok(()));
        f.on_appended(&ok, 16, 0);
        assert_eq!(
            f.epochs().start_offset_of(4),
            Some(13),
            "epochs recorded as appended"
        );
    }

    #[test]
    #[should_panic(expected = "does not start at the log end")]
    fn an_append_elsewhere_than_the_end_is_a_bug() {
        let mut f = FollowerPartition::new(2, 7, 1, 3, 0, 10, 0, cache(&[(3, 0)]));
        f.on_appended(&[batch(11, 12, 3)], 13, 0);
    }

    #[test]
    fn truncation_goes_to_the_divergence_never_to_the_hw() {
        // We have epoch 2 from 0 and epoch 3 from 50 to 80; HW 40.
        let f = FollowerPartition::new(2, 7, 1, 5, 0, 80, 40, cache(&[(2, 0), (3, 50)]));
        // Leader: epoch 3 ended at 60 there.
        let d = EpochEndOffset {
            epoch: 3,
            end_offset: 60,
        };
        assert_eq!(
            f.truncation_for(d),
            Truncation {
                offset: 60,
                complete: true
            },
            "not 40"
        );
        // The leader's epoch 2 ended at 45, before ours (50): the earlier wins.
        let d = EpochEndOffset {
            epoch: 2,
            end_offset: 45,
        };
        assert_eq!(
            f.truncation_for(d),
            Truncation {
                offset: 45,
                complete: true
            }
        );
        // The leader's answer is an epoch (1) older than all of ours: our records from 0 on are
        // epoch 2, which the leader does not have, so everything goes.
        let d = EpochEndOffset {
            epoch: 1,
            end_offset: 20,
        };
        assert_eq!(
            f.truncation_for(d),
            Truncation {
                offset: 0,
                complete: true
            }
        );
        // Epoch 4 we never had: our largest below it is 3, ending at our log end.
        let f2 = FollowerPartition::new(2, 7, 1, 5, 0, 80, 40, cache(&[(2, 0), (3, 50), (5, 70)]));
        let d = EpochEndOffset {
            epoch: 4,
            end_offset: 75,
        };
        assert_eq!(
            f2.truncation_for(d),
            Truncation {
                offset: 70,
                complete: false
            }
        );
        let mut f = f;
        f.on_truncated(60);
        assert_eq!((f.log_end_offset(), f.high_watermark()), (60, 40));
        f.on_truncated(30);
        assert_eq!(
            (
                f.log_end_offset(),
                f.high_watermark(),
                f.epochs().latest_epoch()
            ),
            (30, 30, Some(2))
        );
    }

    #[test]
    fn out_of_range_answers() {
        let f = FollowerPartition::new(2, 7, 1, 5, 0, 80, 40, cache(&[(2, 0)]));
        assert_eq!(f.out_of_range(0, 70), OutOfRange::TruncateTo(70));
        assert_eq!(f.out_of_range(100, 120), OutOfRange::StartAt(100));
        assert_eq!(f.out_of_range(10, 120), OutOfRange::FetchFrom(80));
        let mut f = f;
        f.on_restarted_at(100);
        assert_eq!((f.log_end_offset(), f.epochs().latest_epoch()), (100, None));
    }
}
