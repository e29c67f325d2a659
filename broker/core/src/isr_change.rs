//! ISR changes, both ends of AlterPartition (REPLICATION.md "High watermark and ISR", KIP-497,
//! KIP-903, KIP-966; Kafka's `Partition.maybeShrinkIsr` / `maybeExpandIsr` and the controller's
//! `ReplicationControlManager.alterPartition` / `PartitionChangeBuilder`).
//!
//! Owns, on the leader: [`propose`] — whether to ask the controller to shrink the ISR (members
//! out of sync for `replica.lag.time.max.ms`) or expand it (one caught-up replica), as an
//! [`AlterPartitionRequest`] carrying the partition epoch it was computed from; and
//! [`on_answer`], which takes the controller's answer and says what it does to the in-flight
//! slot. The slot itself (`isr_slot`) lives in [`ReplicaState`], so that the watermark sees the
//! "maximal ISR".
//!
//! Owns, on the controller: [`validate_alter_partition`], the checks in Kafka's order and the
//! committed [`PartitionChange`], with KIP-966's eligible leader replicas as
//! [`eligible_leaders_after`] computes them.
//!
//! Promises: at most one change in flight per partition (asserted by `ReplicaState`); shrink is
//! proposed before expand (a lagging member holds the watermark, so removing it is the urgent
//! one); an expansion only for a replica whose log end ≥ HW and ≥ the start of the leader's
//! current epoch, on an unfenced broker not shutting down, whose fetches carry its registered
//! broker epoch; the controller commits only changes from the current leader at the current
//! leader and partition epochs, and every committed change bumps the partition epoch by one.
//!
//! Never does: apply an ISR change locally before the controller commits it, or elect leaders
//! (`election`).

use std::collections::BTreeMap;

use crate::election::{eligible_leaders_after, PartitionChange, PartitionView};
use crate::replica::{Leadership, ReplicaState};
use crate::ErrorCode;

/// A broker as the metadata log describes it (to the leader and to the controller alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokerStatus {
    pub broker_epoch: i64,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// It registered after an unclean shutdown (its previous broker epoch did not match, KIP-966):
    /// it may have lost unsynced records, so it is never kept as an eligible leader.
    pub unclean_shutdown: bool,
}

/// One member of a proposed ISR, with the broker epoch the leader saw in its fetches (KIP-903);
/// -1 when unknown (the leader itself sends its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    pub broker_id: i32,
    pub broker_epoch: i64,
}

/// An AlterPartition request for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The sender (the leader) and its broker epoch.
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub leader_epoch: i32,
    /// The partition epoch the proposal was computed from.
    pub partition_epoch: i32,
    pub new_isr: Vec<IsrMember>,
}

impl AlterPartitionRequest {
    pub fn isr(&self) -> Vec<i32> {
        self.new_isr.iter().map(|m| m.broker_id).collect()
    }
}

/// Why the controller refused an AlterPartition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterPartitionError {
    /// The sender's broker epoch is not its registration's (KRaft's check in the place where the
    /// ZooKeeper controller checked a controller epoch).
    StaleBrokerEpoch,
    /// The request's leader epoch is not the partition's.
    FencedLeaderEpoch,
    /// The sender does not lead the partition, or the ISR is not a distinct subset of the replicas
    /// containing the leader: INVALID_REQUEST, as Kafka answers.
    InvalidRequest,
    /// The request was computed from another partition epoch.
    InvalidUpdateVersion,
    /// A proposed member is unregistered, fenced, shutting down, or carries a stale broker epoch.
    IneligibleReplica { broker_id: i32 },
}

impl AlterPartitionError {
    /// The wire number (Kafka's).
    pub fn code(&self) -> i16 {
        self.error_code().code()
    }

    /// Kafka's error code for the refusal.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            AlterPartitionError::StaleBrokerEpoch => ErrorCode::StaleBrokerEpoch,
            AlterPartitionError::FencedLeaderEpoch => ErrorCode::FencedLeaderEpoch,
            AlterPartitionError::InvalidRequest => ErrorCode::InvalidRequest,
            AlterPartitionError::InvalidUpdateVersion => ErrorCode::InvalidUpdateVersion,
            AlterPartitionError::IneligibleReplica { .. } => ErrorCode::IneligibleReplica,
        }
    }
}

/// The leader's input for [`propose`].
#[derive(Debug, Clone, Copy)]
pub struct ProposeInput<'a> {
    /// This broker's own broker epoch.
    pub own_broker_epoch: i64,
    /// Every registered broker, from the metadata log.
    pub brokers: &'a BTreeMap<i32, BrokerStatus>,
    /// Where the leader's current epoch starts in its log (its epoch cache).
    pub leader_epoch_start_offset: u64,
    pub lag_time_max_ms: u64,
    pub now_ms: u64,
}

/// The ISR change the leader should send now, if any; when it returns one it has also taken the
/// in-flight slot ([`ReplicaState::begin_isr_change`]). Nothing while a change is in flight.
pub fn propose(
    replica: &mut ReplicaState,
    input: &ProposeInput<'_>,
) -> Option<AlterPartitionRequest> {
    if replica.isr_slot().is_taken() {
        return None;
    }
    let leadership = replica.leadership().clone();
    let out: Vec<i32> = replica
        .out_of_sync(input.now_ms, input.lag_time_max_ms)
        .into_iter()
        .filter(|b| *b != leadership.leader_id)
        .collect();
    let new_isr: Vec<i32> = if !out.is_empty() {
        leadership
            .isr
            .iter()
            .copied()
            .filter(|b| !out.contains(b))
            .collect()
    } else {
        let joiner = leadership
            .replicas
            .iter()
            .copied()
            .find(|b| !leadership.isr.contains(b) && may_join(replica, *b, input))?;
        leadership.isr.iter().copied().chain([joiner]).collect()
    };
    let request = AlterPartitionRequest {
        broker_id: leadership.leader_id,
        broker_epoch: input.own_broker_epoch,
        leader_epoch: leadership.leader_epoch,
        partition_epoch: leadership.partition_epoch,
        new_isr: new_isr
            .iter()
            .map(|&b| IsrMember {
                broker_id: b,
                broker_epoch: if b == leadership.leader_id {
                    input.own_broker_epoch
                } else {
                    replica
                        .follower(b)
                        .and_then(|f| f.broker_epoch)
                        .unwrap_or(-1)
                },
            })
            .collect(),
    };
    replica.begin_isr_change(new_isr);
    Some(request)
}

/// Kafka's rejoin rule (`isFollowerInSync` and `isReplicaIsrEligible`).
fn may_join(replica: &ReplicaState, broker_id: i32, input: &ProposeInput<'_>) -> bool {
    let Some(f) = replica.follower(broker_id) else {
        return false;
    };
    let Some(status) = input.brokers.get(&broker_id) else {
        return false;
    };
    let epoch_matches = f.broker_epoch.is_none_or(|e| e == status.broker_epoch);
    f.log_end_offset >= replica.high_watermark()
        && f.log_end_offset >= input.leader_epoch_start_offset
        && !status.fenced
        && !status.in_controlled_shutdown
        && epoch_matches
}

/// The controller's answer to an [`AlterPartitionRequest`], as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterPartitionAnswer {
    /// The committed partition state (the request's, or a newer one).
    Committed(Leadership),
    Refused(AlterPartitionError),
    /// No answer came (timeout, controller change), so the change may or may not be committed:
    /// it stays in flight — its members keep holding the watermark — and the leader sends the
    /// same request again ([`retry_request`]), as Kafka does, until an answer or a newer
    /// committed partition state ends it. (Freeing the slot here let a leader whose expansion
    /// had in fact committed acknowledge acks=all without the new member, which the controller
    /// could then elect: found by the simulator, seed 2100.)
    Lost,
}

/// What the leader should do after [`on_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// The committed state is now this leader's.
    Applied,
    /// The answer belongs to another leader or leader epoch: wait for the metadata log's
    /// partition change and rebuild (this leader may be deposed).
    NotOurs,
    /// Refused. After INELIGIBLE_REPLICA the slot is free; after any other refusal the change
    /// stays pending, unsent, until a newer partition state ends it.
    Refused(AlterPartitionError),
    Lost,
}

/// Takes the controller's answer. Afterwards the in-flight slot is free, except after a lost
/// answer (the change stays pending, to be sent again with [`retry_request`]) and after a stale
/// refusal (it stays pending, unsent, until a newer partition state ends it).
pub fn on_answer(
    replica: &mut ReplicaState,
    answer: AlterPartitionAnswer,
    now_ms: u64,
) -> AnswerOutcome {
    let outcome = match answer {
        AlterPartitionAnswer::Committed(leadership) => {
            if replica.on_partition_change(leadership, now_ms) {
                AnswerOutcome::Applied
            } else {
                AnswerOutcome::NotOurs
            }
        }
        // INELIGIBLE_REPLICA is checked last, after the leader and partition epochs matched:
        // the controller says the request was not applied and the partition stands where it was
        // computed, so the slot is free (Kafka reverts to its committed state then, and only
        // then).
        AlterPartitionAnswer::Refused(e @ AlterPartitionError::IneligibleReplica { .. }) => {
            AnswerOutcome::Refused(e)
        }
        // Any other refusal is stale (the controller has moved past this leader, partition or
        // broker epoch; the leader may be deposed) or names a state this leader has not seen.
        // Freeing the slot would let a deposed leader's watermark forget the members the change
        // involved and advance past what the new leader holds (the simulator's seeds 2502 and
        // 7481). Kafka keeps its state pending then too: the change waits, unsent, for the
        // newer partition state, which ends it.
        AlterPartitionAnswer::Refused(e) => {
            replica.isr_change_refused_as_stale();
            return AnswerOutcome::Refused(e);
        }
        AlterPartitionAnswer::Lost => {
            replica.isr_change_answer_lost();
            return AnswerOutcome::Lost;
        }
    };
    replica.end_isr_change();
    assert!(!replica.isr_slot().is_taken());
    outcome
}

/// Whether an answer to the request sent at (`leader_epoch`, `partition_epoch`) answers the
/// change in flight. Copies of one request may be answered twice (it was sent again after a lost
/// answer); only the first may end the change, and a late copy must not end a newer one.
pub fn answers_pending(replica: &ReplicaState, leader_epoch: i32, partition_epoch: i32) -> bool {
    replica.leader_epoch() == leader_epoch && replica.isr_slot().awaits_answer_from(partition_epoch)
}

/// The change whose answer was lost (`on_answer(Lost)`, a timeout), as the request to send
/// again — it is then in flight again: the same ISR from the same partition epoch, so the
/// controller commits it once at most (a second copy finds the ISR already so, or a newer
/// partition epoch, which it refuses). `None` when no such change waits.
pub fn retry_request(
    replica: &mut ReplicaState,
    own_broker_epoch: i64,
) -> Option<AlterPartitionRequest> {
    let (pending, base_epoch) = replica.resend_isr_change()?;
    let leadership = replica.leadership();
    Some(AlterPartitionRequest {
        broker_id: leadership.leader_id,
        broker_epoch: own_broker_epoch,
        leader_epoch: leadership.leader_epoch,
        partition_epoch: base_epoch,
        new_isr: pending
            .iter()
            .map(|&b| IsrMember {
                broker_id: b,
                broker_epoch: if b == leadership.leader_id {
                    own_broker_epoch
                } else {
                    replica
                        .follower(b)
                        .and_then(|f| f.broker_epoch)
                        .unwrap_or(-1)
                },
            })
            .collect(),
    })
}

/// The controller's decision on one AlterPartition, checks in Kafka's order: the sender's broker
/// epoch, the leader epoch, the sender leads, the partition epoch, the ISR's shape, each member's
/// eligibility. `Ok(None)`: the ISR is already that (nothing to write; answer the current state).
/// `Ok(Some(change))`: the record to commit — leader and leader epoch kept, partition epoch + 1,
/// eligible leaders updated by [`eligible_leaders_after`].
pub fn validate_alter_partition(
    request: &AlterPartitionRequest,
    partition: &PartitionView,
    brokers: &BTreeMap<i32, BrokerStatus>,
    min_insync_replicas: usize,
) -> Result<Option<PartitionChange>, AlterPartitionError> {
    let sender = brokers.get(&request.broker_id);
    if sender.is_none_or(|s| s.broker_epoch != request.broker_epoch) {
        return Err(AlterPartitionError::StaleBrokerEpoch);
    }
    if request.leader_epoch != partition.leader_epoch {
        return Err(AlterPartitionError::FencedLeaderEpoch);
    }
    if request.broker_id != partition.leader {
        return Err(AlterPartitionError::InvalidRequest);
    }
    if request.partition_epoch != partition.partition_epoch {
        return Err(AlterPartitionError::InvalidUpdateVersion);
    }
    let isr = request.isr();
    let distinct = isr.iter().enumerate().all(|(i, b)| !isr[..i].contains(b));
    if !distinct
        || !isr.iter().all(|b| partition.replicas.contains(b))
        || !isr.contains(&partition.leader)
    {
        return Err(AlterPartitionError::InvalidRequest);
    }
    for m in &request.new_isr {
        let eligible = brokers.get(&m.broker_id).is_some_and(|s| {
            !s.fenced
                && !s.in_controlled_shutdown
                && (m.broker_epoch == -1 || m.broker_epoch == s.broker_epoch)
        });
        if !eligible {
            return Err(AlterPartitionError::IneligibleReplica {
                broker_id: m.broker_id,
            });
        }
    }
    if isr == partition.isr {
        return Ok(None);
    }
    let eligible_leaders = eligible_leaders_after(partition, &isr, min_insync_replicas, |b| {
        brokers.get(&b).is_none_or(|s| s.unclean_shutdown)
    });
    let change = PartitionChange {
        leader: partition.leader,
        isr,
        eligible_leaders,
        leader_epoch: partition.leader_epoch,
        partition_epoch: partition
            .partition_epoch
            .checked_add(1)
            .ok_or(AlterPartitionError::InvalidRequest)?,
        unclean: false,
    };
    let after = partition.with(&change);
    assert!(after.check().is_ok(), "AlterPartition produced {after:?}");
    assert!(after
        .eligible_leaders
        .iter()
        .all(|b| !after.isr.contains(b)));
    Ok(Some(change))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(broker_epoch: i64) -> BrokerStatus {
        BrokerStatus {
            broker_epoch,
            fenced: false,
            in_controlled_shutdown: false,
            unclean_shutdown: false,
        }
    }

    fn brokers() -> BTreeMap<i32, BrokerStatus> {
        BTreeMap::from([(0, status(10)), (1, status(11)), (2, status(12))])
    }

    fn leader(isr: &[i32]) -> ReplicaState {
        ReplicaState::new(
            Leadership {
                leader_id: 0,
                leader_epoch: 3,
                partition_epoch: 7,
                replicas: vec![0, 1, 2],
                isr: isr.to_vec(),
            },
            2,
            100,
            0,
        )
    }

    fn input(brokers: &BTreeMap<i32, BrokerStatus>, now_ms: u64) -> ProposeInput<'_> {
        ProposeInput {
            own_broker_epoch: 10,
            brokers,
            leader_epoch_start_offset: 100,
            lag_time_max_ms: 30_000,
            now_ms,
        }
    }

    fn view(isr: &[i32]) -> PartitionView {
        PartitionView {
            replicas: vec![0, 1, 2],
            isr: isr.to_vec(),
            eligible_leaders: vec![],
            leader: 0,
            leader_epoch: 3,
            partition_epoch: 7,
        }
    }

    #[test]
    fn a_lagging_member_is_proposed_out_and_only_one_change_flies() {
        let b = brokers();
        let mut r = leader(&[0, 1, 2]);
        r.on_leader_log_end(150);
        r.on_follower_fetch_with_epoch(1, Some(11), 150, 35_000);
        assert_eq!(propose(&mut r, &input(&b, 20_000)), None, "nobody lags yet");
        let req = propose(&mut r, &input(&b, 35_000)).expect("a shrink");
        assert_eq!(req.isr(), vec![0, 1]);
        assert_eq!((req.leader_epoch, req.partition_epoch), (3, 7));
        assert_eq!(
            req.new_isr[1],
            IsrMember {
                broker_id: 1,
                broker_epoch: 11
            }
        );
        assert_eq!(propose(&mut r, &input(&b, 36_000)), None, "one in flight");
        assert_eq!(
            r.high_watermark(),
            100,
            "the member being removed still holds the watermark"
        );
        let committed = Leadership {
            partition_epoch: 8,
            isr: vec![0, 1],
            ..r.leadership().clone()
        };
        assert_eq!(
            on_answer(&mut r, AlterPartitionAnswer::Committed(committed), 36_000),
            AnswerOutcome::Applied
        );
        assert_eq!((r.isr(), r.high_watermark()), (&[0, 1][..], 150));
        assert!(r.pending_isr().is_none());
    }

    #[test]
    fn a_lost_answer_keeps_the_change_pending_and_only_its_own_answer_ends_it() {
        // The simulator's seed 2100: an expansion whose answer was lost had in fact committed.
        // Freeing the slot let the leader count only the old ISR for acks=all, and the
        // controller then elected the new member, which lacked what was acknowledged.
        let b = brokers();
        let mut r = leader(&[0, 1]);
        r.on_leader_log_end(200);
        r.on_follower_fetch_with_epoch(1, Some(11), 200, 1_000);
        r.on_follower_fetch_with_epoch(2, Some(12), 200, 1_000);
        let req = propose(&mut r, &input(&b, 1_000)).expect("an expansion");
        assert_eq!(req.isr(), vec![0, 1, 2]);
        assert_eq!(
            on_answer(&mut r, AlterPartitionAnswer::Lost, 1_100),
            AnswerOutcome::Lost
        );
        assert_eq!(r.pending_isr(), Some(&[0, 1, 2][..]), "still in flight");
        r.on_leader_log_end(300);
        r.on_follower_fetch_with_epoch(1, Some(11), 300, 1_200);
        assert_eq!(
            r.high_watermark(),
            200,
            "broker 2, maybe in the ISR already, still holds the watermark"
        );
        assert_eq!(propose(&mut r, &input(&b, 1_200)), None, "no second change");
        let again = retry_request(&mut r, 10).expect("the same request again");
        assert_eq!(again, req, "same ISR, same partition epoch");
        // The copy's answer (the controller finds the ISR already so) ends it; a late answer to
        // an older request (another partition epoch) does not count.
        assert!(!answers_pending(&r, 3, 6));
        assert!(answers_pending(&r, 3, 7));
        let committed = Leadership {
            partition_epoch: 8,
            isr: vec![0, 1, 2],
            ..r.leadership().clone()
        };
        assert_eq!(
            on_answer(&mut r, AlterPartitionAnswer::Committed(committed), 1_300),
            AnswerOutcome::Applied
        );
        assert!(r.pending_isr().is_none());
        assert!(
            !answers_pending(&r, 3, 7),
            "nothing pending: a duplicate answer is ignored"
        );
        assert_eq!(retry_request(&mut r, 10), None);
    }

    #[test]
    fn a_caught_up_replica_is_proposed_in_and_holds_the_watermark_meanwhile() {
        let mut b = brokers();
        let mut r = leader(&[0, 1]);
        r.on_leader_log_end(200);
        r.on_follower_fetch_with_epoch(1, Some(11), 200, 1_000);
        assert_eq!(r.high_watermark(), 200);
        r.on_leader_log_end(300);
        // Broker 2 is below the epoch start, then below the HW, then fenced, then stale.
        r.on_follower_fetch_with_epoch(2, Some(12), 90, 1_000);
        assert_eq!(propose(&mut r, &input(&b, 1_000)), None);
        r.on_follower_fetch_with_epoch(2, Some(12), 150, 1_000);
        assert_eq!(propose(&mut r, &input(&b, 1_000)), None, "below the HW");
        r.on_follower_fetch_with_epoch(2, Some(12), 250, 1_000);
        b.get_mut(&2).expect("registered").fenced = true;
        assert_eq!(propose(&mut r, &input(&b, 1_000)), None, "fenced");
        b.insert(2, status(13));
        assert_eq!(
            propose(&mut r, &input(&b, 1_000)),
            None,
            "its fetches carry an older broker epoch"
        );
        r.on_follower_fetch_with_epoch(2, Some(13), 250, 1_000);
        let req = propose(&mut r, &input(&b, 1_000)).expect("an expansion");
        assert_eq!(req.isr(), vec![0, 1, 2]);
        r.on_follower_fetch_with_epoch(1, Some(11), 300, 1_000);
        assert_eq!(
            r.high_watermark(),
            250,
            "maximal ISR: the joiner holds the watermark"
        );
        let refused = AlterPartitionAnswer::Refused(AlterPartitionError::InvalidUpdateVersion);
        assert_eq!(
            on_answer(&mut r, refused, 1_000),
            AnswerOutcome::Refused(AlterPartitionError::InvalidUpdateVersion)
        );
        // Refused as stale: the change stays pending (the joiner keeps holding the watermark)
        // and nothing is resent until a newer partition state arrives.
        assert_eq!(r.pending_isr(), Some(&[0, 1, 2][..]));
        assert_eq!(r.high_watermark(), 250);
        assert_eq!(retry_request(&mut r, 10), None);
        assert_eq!(propose(&mut r, &input(&b, 1_000)), None);
        let newer = Leadership {
            partition_epoch: 8,
            ..r.leadership().clone()
        };
        assert!(r.on_partition_change(newer, 1_000));
        assert!(r.pending_isr().is_none(), "the newer state ends it");
        // The watermark moved on without the joiner (300); it joins once it has caught up.
        r.on_follower_fetch_with_epoch(2, Some(13), 300, 1_000);
        let other = Leadership {
            leader_epoch: 4,
            ..r.leadership().clone()
        };
        propose(&mut r, &input(&b, 1_000)).expect("proposed again");
        assert_eq!(
            on_answer(&mut r, AlterPartitionAnswer::Committed(other), 1_000),
            AnswerOutcome::NotOurs
        );
        assert!(r.pending_isr().is_none());
    }

    /// A committed state newer than the change's base supersedes the change before its answer
    /// comes: it can no longer commit, so it stops holding the watermark, but nothing new is
    /// proposed until its answer comes (one request in flight); a refusal for an ineligible
    /// replica frees the slot at once.
    #[test]
    fn a_newer_partition_state_supersedes_the_change_and_ineligible_frees_it() {
        let b = brokers();
        let mut r = leader(&[0, 1]);
        r.on_leader_log_end(300);
        r.on_follower_fetch_with_epoch(1, Some(11), 300, 1_000);
        r.on_follower_fetch_with_epoch(2, Some(12), 300, 1_000);
        let req = propose(&mut r, &input(&b, 1_000)).expect("an expansion");
        assert_eq!(req.isr(), vec![0, 1, 2]);
        r.on_leader_log_end(400);
        r.on_follower_fetch_with_epoch(1, Some(11), 400, 1_000);
        assert_eq!(r.high_watermark(), 300, "the joiner holds the watermark");
        // The controller shrank the ISR meanwhile (a fenced broker), at partition epoch 8.
        let newer = Leadership {
            partition_epoch: 8,
            isr: vec![0],
            ..r.leadership().clone()
        };
        assert!(r.on_partition_change(newer, 1_000));
        assert!(r.pending_isr().is_none(), "superseded: it holds nothing");
        assert_eq!(retry_request(&mut r, 10), None, "nor is it sent again");
        assert_eq!(
            propose(&mut r, &input(&b, 1_000)),
            None,
            "its answer is due"
        );
        let late = AlterPartitionAnswer::Refused(AlterPartitionError::InvalidUpdateVersion);
        assert!(answers_pending(&r, 3, 7));
        on_answer(&mut r, late, 1_000);
        assert!(!r.isr_slot().is_taken());

        // From epoch 8: 1 rejoins; the controller finds it ineligible (fenced meanwhile).
        let req = propose(&mut r, &input(&b, 1_000)).expect("an expansion");
        assert_eq!((req.partition_epoch, req.isr()), (8, vec![0, 1]));
        assert!(answers_pending(&r, 3, 8));
        let refused =
            AlterPartitionAnswer::Refused(AlterPartitionError::IneligibleReplica { broker_id: 1 });
        assert_eq!(
            on_answer(&mut r, refused, 1_000),
            AnswerOutcome::Refused(AlterPartitionError::IneligibleReplica { broker_id: 1 })
        );
        assert!(
            r.pending_isr().is_none(),
            "not applied, the state unchanged"
        );
        assert!(
            propose(&mut r, &input(&b, 1_000)).is_some(),
            "may propose again"
        );
    }

    fn request(isr: &[(i32, i64)]) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker_id: 0,
            broker_epoch: 10,
            leader_epoch: 3,
            partition_epoch: 7,
            new_isr: isr
                .iter()
                .map(|&(broker_id, broker_epoch)| IsrMember {
                    broker_id,
                    broker_epoch,
                })
                .collect(),
        }
    }

    #[test]
    fn the_controller_checks_in_kafkas_order() {
        let b = brokers();
        let p = view(&[0, 1, 2]);
        let ok = request(&[(0, 10), (1, 11)]);
        let c = validate_alter_partition(&ok, &p, &b, 2)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            (
                c.leader,
                c.isr.as_slice(),
                c.leader_epoch,
                c.partition_epoch
            ),
            (0, &[0, 1][..], 3, 8)
        );
        let cases: Vec<(AlterPartitionRequest, AlterPartitionError)> = vec![
            // Everything wrong at once: the first check answers.
            (
                AlterPartitionRequest {
                    broker_epoch: 9,
                    leader_epoch: 2,
                    partition_epoch: 6,
                    ..request(&[(1, 11)])
                },
                AlterPartitionError::StaleBrokerEpoch,
            ),
            (
                AlterPartitionRequest {
                    leader_epoch: 2,
                    partition_epoch: 6,
                    ..request(&[(1, 11)])
                },
                AlterPartitionError::FencedLeaderEpoch,
            ),
            (
                AlterPartitionRequest {
                    broker_id: 1,
                    broker_epoch: 11,
                    partition_epoch: 6,
                    ..request(&[(1, 11)])
                },
                AlterPartitionError::InvalidRequest,
            ),
            (
                AlterPartitionRequest {
                    partition_epoch: 6,
                    ..request(&[(1, 11)])
                },
                AlterPartitionError::InvalidUpdateVersion,
            ),
            (request(&[(1, 11)]), AlterPartitionError::InvalidRequest),
            (
                request(&[(0, 10), (5, 1)]),
                AlterPartitionError::InvalidRequest,
            ),
            (
                request(&[(0, 10), (1, 11), (1, 11)]),
                AlterPartitionError::InvalidRequest,
            ),
            (
                request(&[(0, 10), (1, 10)]),
                AlterPartitionError::IneligibleReplica { broker_id: 1 },
            ),
        ];
        for (req, want) in cases {
            assert_eq!(
                validate_alter_partition(&req, &p, &b, 2),
                Err(want),
                "{req:?}"
            );
        }
        let mut fenced = b.clone();
        fenced.get_mut(&2).expect("registered").fenced = true;
        assert_eq!(
            validate_alter_partition(
                &request(&[(0, 10), (1, 11), (2, -1)]),
                &view(&[0, 1]),
                &fenced,
                2
            ),
            Err(AlterPartitionError::IneligibleReplica { broker_id: 2 })
        );
        assert_eq!(
            validate_alter_partition(&request(&[(0, 10), (1, 11), (2, 12)]), &p, &b, 2),
            Ok(None)
        );
        assert_eq!(AlterPartitionError::InvalidUpdateVersion.code(), 95);
        assert_eq!(
            AlterPartitionError::IneligibleReplica { broker_id: 1 }.code(),
            107
        );
        assert_eq!(AlterPartitionError::FencedLeaderEpoch.code(), 74);
    }

    #[test]
    fn members_removed_below_min_isr_stay_eligible_unless_unclean() {
        let mut b = brokers();
        let p = view(&[0, 1, 2]);
        let c = validate_alter_partition(&request(&[(0, 10), (1, 11)]), &p, &b, 2)
            .expect("ok")
            .expect("change");
        assert!(c.eligible_leaders.is_empty(), "at min ISR: none needed");
        let p = p.with(&c);
        let c = validate_alter_partition(
            &AlterPartitionRequest {
                partition_epoch: 8,
                ..request(&[(0, 10)])
            },
            &p,
            &b,
            2,
        )
        .expect("ok")
        .expect("change");
        assert_eq!(
            c.eligible_leaders,
            vec![1],
            "removed below min ISR: kept eligible"
        );
        b.get_mut(&1).expect("registered").unclean_shutdown = true;
        assert!(eligible_leaders_after(&p, &[0], 2, |x| b[&x].unclean_shutdown).is_empty());
        let q = p.with(&c);
        assert_eq!(
            eligible_leaders_after(&q, &[0, 1], 2, |_| false),
            Vec::<i32>::new(),
            "back at min ISR"
        );
        assert_eq!(eligible_leaders_after(&q, &[0], 3, |_| false), vec![1]);
    }
}
