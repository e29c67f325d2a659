//! The leader's decision for one partition of a follower's fetch, and its OffsetForLeaderEpoch
//! answer (REPLICATION.md "Follower fetch"; Kafka's `Partition.fetchRecords` / `readRecords`,
//! KIP-320, KIP-903, KAFKA-10554).
//!
//! Owns: [`decide`] — given what the follower sent ([`FollowerFetch`]) and what this broker knows
//! ([`LeaderView`]), whether to read from the fetch offset, to answer a diverging epoch (the
//! follower truncates to it and fetches again), or to refuse with an error; and
//! [`offset_for_leader_epoch`], the same epoch lookup answered on its own.
//!
//! Promises, in Kafka's order of checks:
//! 1. the sender's current leader epoch against ours: older → FENCED_LEADER_EPOCH, newer →
//!    UNKNOWN_LEADER_EPOCH (absent: not checked, as Kafka does for old versions);
//! 2. only the leader answers (NOT_LEADER_OR_FOLLOWER) — Redpanda answered epoch lookups from
//!    non-leaders and consumers lost records (#5435);
//! 3. the sender must be a replica (NOT_LEADER_OR_FOLLOWER) whose broker epoch is not older than
//!    the one registered for it (KIP-903: a restarted broker's stale fetch must not count);
//! 4. with a last fetched epoch: the leader's end for that epoch; UNDEFINED → OFFSET_OUT_OF_RANGE;
//!    a fetch offset below our log start → OFFSET_OUT_OF_RANGE whatever the epochs; the epoch we
//!    know is older, or it ended before the fetch offset → diverging epoch {epoch, end offset};
//! 5. the fetch offset must lie in [log start, log end] → else OFFSET_OUT_OF_RANGE;
//! 6. otherwise read from the fetch offset. Only then may the caller feed
//!    [`crate::replica::ReplicaState::on_follower_fetch`] with [`FetchDecision::Read`]'s
//!    `progress_offset`: a diverging answer must not move the follower's progress (its log past
//!    the divergence is not the leader's).
//!
//! Never does: read the log, touch follower progress, or decide ISR changes (`isr_change`).

use std::collections::BTreeMap;

use crate::epoch_cache::{EpochEndOffset, LeaderEpochCache};
use crate::ErrorCode;

/// One partition of a follower's fetch, as it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    pub replica_id: i32,
    /// KIP-903's replica broker epoch; `None` when the request has none (old versions, -1).
    pub replica_broker_epoch: Option<i64>,
    /// KIP-320's current leader epoch; `None` when absent (-1).
    pub current_leader_epoch: Option<i32>,
    /// Where to read from: the follower's log end.
    pub fetch_offset: u64,
    /// The epoch of the follower's last appended batch (its cache's latest); `None` when its log
    /// has none.
    pub last_fetched_epoch: Option<i32>,
    pub log_start_offset: u64,
    /// What the follower reports as safely held, when it differs from `fetch_offset`: under
    /// `durability = fsync` the offset it has fdatasynced (`follower_state`). `None`: the fetch
    /// offset.
    pub durable_offset: Option<u64>,
}

/// What this broker knows of the partition when the fetch arrives.
#[derive(Debug, Clone, Copy)]
pub struct LeaderView<'a> {
    pub is_leader: bool,
    /// This broker's view of the partition's leader epoch (led or followed).
    pub leader_epoch: i32,
    pub replicas: &'a [i32],
    /// The broker epoch each registered, unfenced broker has, from the metadata log.
    pub broker_epochs: &'a BTreeMap<i32, i64>,
    pub epochs: &'a LeaderEpochCache,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
}

/// A fetch the leader answers without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchDecision {
    /// Read from `fetch_offset`; afterwards feed `progress_offset` (≤ `fetch_offset`) to
    /// `ReplicaState::on_follower_fetch`.
    Read {
        fetch_offset: u64,
        progress_offset: u64,
    },
    /// The follower's log diverges from ours: it truncates to `end_offset` (or to where its own
    /// copy of `epoch` ends, if earlier) and fetches again. No records, no progress.
    Diverging(EpochEndOffset),
}

/// Why the leader refused one partition of a fetch. Each maps to one Kafka code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchRefusal {
    /// The sender's leader epoch is older than ours.
    FencedLeaderEpoch {
        theirs: i32,
        ours: i32,
    },
    /// The sender's leader epoch is newer: our metadata is behind.
    UnknownLeaderEpoch {
        theirs: i32,
        ours: i32,
    },
    NotLeader,
    NotAReplica {
        replica_id: i32,
    },
    /// The sender's broker epoch is older than its registration's: a fetch from before a restart.
    StaleBrokerEpoch {
        theirs: i64,
        registered: i64,
    },
    /// We know no end for the last fetched epoch (newer than ours, or our cache is empty).
    UnknownLastFetchedEpoch {
        epoch: i32,
    },
    OffsetOutOfRange {
        fetch_offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
}

impl FetchRefusal {
    /// The code on the wire. A stale broker epoch answers NOT_LEADER_OR_FOLLOWER, as Kafka's
    /// leader does (the follower refreshes its metadata and retries with its new epoch).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            FetchRefusal::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            FetchRefusal::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
            FetchRefusal::NotLeader
            | FetchRefusal::NotAReplica { .. }
            | FetchRefusal::StaleBrokerEpoch { .. } => ErrorCode::NotLeaderOrFollower,
            FetchRefusal::UnknownLastFetchedEpoch { .. }
            | FetchRefusal::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        }
    }
}

/// The current-leader-epoch check both requests share (Kafka's `checkCurrentLeaderEpoch`), then
/// leadership.
fn check_epoch_and_leadership(
    current_leader_epoch: Option<i32>,
    view: &LeaderView<'_>,
) -> Result<(), FetchRefusal> {
    if let Some(theirs) = current_leader_epoch {
        let ours = view.leader_epoch;
        if theirs < ours {
            return Err(FetchRefusal::FencedLeaderEpoch { theirs, ours });
        }
        if theirs > ours {
            return Err(FetchRefusal::UnknownLeaderEpoch { theirs, ours });
        }
    }
    if !view.is_leader {
        return Err(FetchRefusal::NotLeader);
    }
    Ok(())
}

/// The leader's decision for one partition of a follower's fetch (module docs for the order).
pub fn decide(fetch: &FollowerFetch, view: &LeaderView<'_>) -> Result<FetchDecision, FetchRefusal> {
    assert!(
        view.log_start_offset <= view.log_end_offset,
        "log start {} past log end {}",
        view.log_start_offset,
        view.log_end_offset
    );
    check_epoch_and_leadership(fetch.current_leader_epoch, view)?;
    if !view.replicas.contains(&fetch.replica_id) {
        return Err(FetchRefusal::NotAReplica {
            replica_id: fetch.replica_id,
        });
    }
    if let (Some(theirs), Some(&registered)) = (
        fetch.replica_broker_epoch,
        view.broker_epochs.get(&fetch.replica_id),
    ) {
        // A newer epoch than ours means our metadata lags: not the sender's fault.
        if theirs < registered {
            return Err(FetchRefusal::StaleBrokerEpoch { theirs, registered });
        }
    }
    let out_of_range = FetchRefusal::OffsetOutOfRange {
        fetch_offset: fetch.fetch_offset,
        log_start_offset: view.log_start_offset,
        log_end_offset: view.log_end_offset,
    };
    if let Some(last_fetched) = fetch.last_fetched_epoch {
        let ours = view
            .epochs
            .end_offset_for(last_fetched, view.log_end_offset);
        let Some(end) = ours.end().filter(|_| !ours.is_undefined()) else {
            return Err(FetchRefusal::UnknownLastFetchedEpoch {
                epoch: last_fetched,
            });
        };
        if fetch.fetch_offset < view.log_start_offset {
            return Err(out_of_range);
        }
        if ours.epoch < last_fetched || end < fetch.fetch_offset {
            return Ok(FetchDecision::Diverging(ours));
        }
    }
    if fetch.fetch_offset < view.log_start_offset || fetch.fetch_offset > view.log_end_offset {
        return Err(out_of_range);
    }
    let progress_offset = fetch
        .durable_offset
        .map_or(fetch.fetch_offset, |d| d.min(fetch.fetch_offset));
    Ok(FetchDecision::Read {
        fetch_offset: fetch.fetch_offset,
        progress_offset,
    })
}

/// OffsetForLeaderEpoch for one partition (followers on old paths, and consumers checking their
/// position after a leader change): only the leader answers, after the current-epoch check. An
/// epoch we know nothing about answers UNDEFINED (-1, -1) with no error, as Kafka does.
pub fn offset_for_leader_epoch(
    current_leader_epoch: Option<i32>,
    requested_epoch: i32,
    view: &LeaderView<'_>,
) -> Result<EpochEndOffset, FetchRefusal> {
    check_epoch_and_leadership(current_leader_epoch, view)?;
    Ok(view
        .epochs
        .end_offset_for(requested_epoch, view.log_end_offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        broker_epochs: BTreeMap<i32, i64>,
        epochs: LeaderEpochCache,
        replicas: Vec<i32>,
    }

    impl Fixture {
        fn new() -> Self {
            let mut epochs = LeaderEpochCache::new();
            epochs.assign(1, 0);
            epochs.assign(3, 50);
            epochs.assign(5, 80);
            Fixture {
                broker_epochs: BTreeMap::from([(1, 100), (2, 200), (3, 300)]),
                epochs,
                replicas: vec![1, 2, 3],
            }
        }

        fn view(&self) -> LeaderView<'_> {
            LeaderView {
                is_leader: true,
                leader_epoch: 5,
                replicas: &self.replicas,
                broker_epochs: &self.broker_epochs,
                epochs: &self.epochs,
                log_start_offset: 10,
                log_end_offset: 120,
            }
        }
    }

    fn fetch(fetch_offset: u64, last_fetched_epoch: Option<i32>) -> FollowerFetch {
        FollowerFetch {
            replica_id: 2,
            replica_broker_epoch: Some(200),
            current_leader_epoch: Some(5),
            fetch_offset,
            last_fetched_epoch,
            log_start_offset: 0,
            durable_offset: None,
        }
    }

    fn code(r: Result<FetchDecision, FetchRefusal>) -> ErrorCode {
        r.expect_err("a refusal").error_code()
    }

    #[test]
    fn epochs_leadership_and_membership_are_checked_in_kafkas_order() {
        let f = Fixture::new();
        let v = f.view();
        let older = FollowerFetch {
            current_leader_epoch: Some(4),
            ..fetch(100, Some(5))
        };
        assert_eq!(code(decide(&older, &v)), ErrorCode::FencedLeaderEpoch);
        let newer = FollowerFetch {
            current_leader_epoch: Some(6),
            ..fetch(100, Some(5))
        };
        assert_eq!(code(decide(&newer, &v)), ErrorCode::UnknownLeaderEpoch);
        let not_leader = LeaderView {
            is_leader: false,
            ..v
        };
        assert_eq!(
            code(decide(&older, &not_leader)),
            ErrorCode::FencedLeaderEpoch,
            "epoch first"
        );
        assert_eq!(
            decide(&fetch(100, Some(5)), &not_leader),
            Err(FetchRefusal::NotLeader)
        );
        let stranger = FollowerFetch {
            replica_id: 9,
            ..fetch(100, Some(5))
        };
        assert_eq!(code(decide(&stranger, &v)), ErrorCode::NotLeaderOrFollower);
        let stale = FollowerFetch {
            replica_broker_epoch: Some(199),
            ..fetch(100, Some(5))
        };
        assert_eq!(
            decide(&stale, &v),
            Err(FetchRefusal::StaleBrokerEpoch {
                theirs: 199,
                registered: 200
            })
        );
        let ahead = FollowerFetch {
            replica_broker_epoch: Some(201),
            ..fetch(100, Some(5))
        };
        assert!(
            decide(&ahead, &v).is_ok(),
            "our metadata lags: not a stale fetch"
        );
        let no_epochs = FollowerFetch {
            current_leader_epoch: None,
            replica_broker_epoch: None,
            ..fetch(100, Some(5))
        };
        assert!(decide(&no_epochs, &v).is_ok());
    }

    #[test]
    fn a_follower_in_step_reads_and_reports_its_durable_offset() {
        let f = Fixture::new();
        let v = f.view();
        assert_eq!(
            decide(&fetch(100, Some(5)), &v),
            Ok(FetchDecision::Read {
                fetch_offset: 100,
                progress_offset: 100
            })
        );
        assert_eq!(
            decide(&fetch(120, Some(5)), &v),
            Ok(FetchDecision::Read {
                fetch_offset: 120,
                progress_offset: 120
            }),
            "at the log end: an empty read"
        );
        let synced = FollowerFetch {
            durable_offset: Some(90),
            ..fetch(100, Some(5))
        };
        assert_eq!(
            decide(&synced, &v),
            Ok(FetchDecision::Read {
                fetch_offset: 100,
                progress_offset: 90
            })
        );
        assert_eq!(
            decide(&fetch(60, Some(3)), &v),
            Ok(FetchDecision::Read {
                fetch_offset: 60,
                progress_offset: 60
            }),
            "within epoch 3, which ended at 80"
        );
        assert!(
            decide(&fetch(10, None), &v).is_ok(),
            "a follower with an empty log"
        );
    }

    #[test]
    fn a_divergent_follower_is_told_where_its_epoch_ended() {
        let f = Fixture::new();
        let v = f.view();
        // Epoch 3 ended at 80 here; the follower has epoch-3 records up to 95.
        let d = EpochEndOffset {
            epoch: 3,
            end_offset: 80,
        };
        assert_eq!(
            decide(&fetch(95, Some(3)), &v),
            Ok(FetchDecision::Diverging(d))
        );
        // It led epoch 4, which we never saw: our largest epoch ≤ 4 is 3.
        assert_eq!(
            decide(&fetch(85, Some(4)), &v),
            Ok(FetchDecision::Diverging(d))
        );
        assert_eq!(
            decide(&fetch(70, Some(4)), &v),
            Ok(FetchDecision::Diverging(d)),
            "epoch older, whatever the offset"
        );
        // Older than our first entry: (its epoch, our first start).
        let c = EpochEndOffset {
            epoch: 0,
            end_offset: 0,
        };
        assert_eq!(
            decide(&fetch(30, Some(0)), &v),
            Ok(FetchDecision::Diverging(c))
        );
    }

    #[test]
    fn out_of_range_and_unknown_epochs() {
        let f = Fixture::new();
        let v = f.view();
        // Past our end within our own epoch: the follower's tail is not ours, so it diverges.
        assert_eq!(
            decide(&fetch(121, Some(5)), &v),
            Ok(FetchDecision::Diverging(EpochEndOffset {
                epoch: 5,
                end_offset: 120
            }))
        );
        assert_eq!(
            code(decide(&fetch(121, None), &v)),
            ErrorCode::OffsetOutOfRange
        );
        assert_eq!(
            code(decide(&fetch(5, None), &v)),
            ErrorCode::OffsetOutOfRange
        );
        assert_eq!(
            code(decide(&fetch(5, Some(3)), &v)),
            ErrorCode::OffsetOutOfRange,
            "below log start whatever the epochs"
        );
        assert_eq!(
            decide(&fetch(100, Some(6)), &v),
            Err(FetchRefusal::UnknownLastFetchedEpoch { epoch: 6 })
        );
        let empty = LeaderEpochCache::new();
        let v_empty = LeaderView {
            epochs: &empty,
            ..v
        };
        assert_eq!(
            code(decide(&fetch(100, Some(1)), &v_empty)),
            ErrorCode::OffsetOutOfRange
        );
    }

    #[test]
    fn only_the_leader_answers_offset_for_leader_epoch() {
        let f = Fixture::new();
        let v = f.view();
        assert_eq!(
            offset_for_leader_epoch(Some(5), 4, &v),
            Ok(EpochEndOffset {
                epoch: 3,
                end_offset: 80
            })
        );
        assert_eq!(
            offset_for_leader_epoch(None, 5, &v),
            Ok(EpochEndOffset {
                epoch: 5,
                end_offset: 120
            })
        );
        assert_eq!(
            offset_for_leader_epoch(Some(5), 9, &v),
            Ok(EpochEndOffset::UNDEFINED)
        );
        let follower = LeaderView {
            is_leader: false,
            ..v
        };
        assert_eq!(
            offset_for_leader_epoch(Some(5), 4, &follower),
            Err(FetchRefusal::NotLeader)
        );
        assert_eq!(
            offset_for_leader_epoch(Some(4), 4, &v).map_err(|r| r.error_code()),
            Err(ErrorCode::FencedLeaderEpoch)
        );
    }
}
