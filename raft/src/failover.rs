//! Fencing and unfencing brokers, and moving partitions off brokers in controlled shutdown, as
//! metadata records: the controller's failover decisions ([`spool_core::election`],
//! [`spool_core::liveness`], [`crate::controlled_shutdown::decide`]) mapped onto the
//! [`MetadataImage`] and back into records (DESIGN §7 "Liveness", "Elections", "Controlled
//! shutdown").
//!
//! Owns: turning the image into spool-core's plain views (which brokers are fenced, which are in
//! controlled shutdown, each partition's state, each topic's election policy) and each decision
//! into a `FenceBroker`, `UnfenceBroker`, `BrokerHeartbeat` or `PartitionChange` record, in the
//! order Kafka writes them: fencing writes the partition changes first and the fence last (so no
//! reader sees a fenced broker still leading), unfencing writes the unfence first and the
//! elections after (so every new leader is unfenced when it is named), entering controlled
//! shutdown writes the heartbeat that records it first and the partition changes after.
//! Promises: pure functions of `(image, request)`, like [`crate::validate`]: a refusal produces no
//! records; the records returned apply in order to the image they were computed from. Each
//! decision is a fixpoint over the image, so when only some of the records were proposed (a
//! throttled proposal, a lost leadership), computing again over the latest image proposes the
//! rest and never repeats a change already in it.
//! Never does: propose (the [`crate::Controller`] methods do), keep broker sessions (the active
//! controller's [`spool_core::liveness::BrokerSessions`] does, fed by the driver), or decide
//! anything itself — every rule lives in spool-core.

use std::collections::BTreeSet;

use spool_core::election::{forget_lost_log, ElectionPolicy, MalformedPartition, PartitionChange};
use spool_core::liveness::LivenessBroker;
use spool_core::topic_config::TopicDefaults;
use spool_protocol::metadata_records::{MetadataRecordBodyT, MetadataRecordT};
use spool_protocol::ErrorCode;

use crate::controlled_shutdown::{decide, shutting_down_brokers};
use crate::image::{MetadataImage, PartitionState, TopicId, TopicImage, LEADER_UNCHANGED};
use crate::records::{self, PartitionFields};
use crate::validate::{
    validate_heartbeat, validate_register_broker, HeartbeatRequest, Refusal, RegisterBrokerRequest,
};

/// What a failover decision wants written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailoverRecords {
    /// Propose these in order.
    pub records: Vec<MetadataRecordT>,
    /// Partitions whose committed state breaks the partition invariants (ISR empty, leader
    /// outside it, …): nothing was decided for them. No validated record makes one; the caller
    /// logs them.
    pub malformed: Vec<MalformedAt>,
}

/// One partition [`FailoverRecords::malformed`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedAt {
    pub topic: String,
    pub partition_index: i32,
    pub error: MalformedPartition,
}

/// The image's brokers as [`spool_core::liveness::BrokerSessions::expired`] takes them.
pub fn liveness_brokers(image: &MetadataImage) -> Vec<LivenessBroker> {
    image
        .brokers()
        .map(|b| LivenessBroker {
            broker_id: b.broker_id,
            fenced: b.fenced,
        })
        .collect()
}

/// Records that fence `broker_ids` (a session timeout, or an operator): one `PartitionChange`
/// per partition the fencing changes, then one `FenceBroker` per broker not already fenced.
/// An id that is not registered is refused (BROKER_NOT_AVAILABLE) and nothing is returned.
/// `defaults` are the broker-wide topic defaults (for `unclean.leader.election.enable`).
pub fn fence_brokers_records(
    image: &MetadataImage,
    broker_ids: &[i32],
    defaults: &TopicDefaults,
) -> Result<FailoverRecords, Refusal> {
    let mut fences = Vec::new();
    let mut to_fence = BTreeSet::new();
    for &id in broker_ids {
        let broker = image.broker(id).ok_or_else(|| {
            Refusal::new(
                ErrorCode::BrokerNotAvailable,
                format!("broker {id} is not registered"),
            )
        })?;
        if to_fence.insert(id) && !broker.fenced {
            fences.push(records::fence_broker(id, broker.broker_epoch));
        }
    }
    let fenced = fenced_brokers(image, &to_fence, None);
    let mut out = partition_changes(image, &fenced, &shutting_down_brokers(image), defaults);
    out.records.extend(fences);
    Ok(out)
}

/// Records that unfence `broker_id` at `broker_epoch`: `UnfenceBroker` (when the image has it
/// fenced), then one `PartitionChange` per partition that gets a leader back. Refused for an
/// unregistered broker (BROKER_NOT_AVAILABLE) or another epoch (STALE_BROKER_EPOCH).
pub fn unfence_broker_records(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    defaults: &TopicDefaults,
) -> Result<FailoverRecords, Refusal> {
    let broker = image.broker(broker_id).ok_or_else(|| {
        Refusal::new(
            ErrorCode::BrokerNotAvailable,
            format!("broker {broker_id} is not registered"),
        )
    })?;
    if broker.broker_epoch != broker_epoch {
        return Err(Refusal::new(
            ErrorCode::StaleBrokerEpoch,
            format!(
                "broker {broker_id} epoch {broker_epoch} is not the registered {}",
                broker.broker_epoch
            ),
        ));
    }
    let unfence = broker
        .fenced
        .then(|| records::unfence_broker(broker_id, broker_epoch));
    let fenced = fenced_brokers(image, &BTreeSet::new(), Some(broker_id));
    let changes = partition_changes(image, &fenced, &shutting_down_brokers(image), defaults);
    Ok(FailoverRecords {
        records: unfence.into_iter().chain(changes.records).collect(),
        malformed: changes.malformed,
    })
}

/// [`validate_heartbeat`], plus the partition changes its record causes: a heartbeat that
/// unfences the broker also elects leaders where it can lead again (after the unfence); one
/// asking to be fenced first moves leadership and ISR membership off it (before the heartbeat
/// record that fences it); one entering controlled shutdown is recorded first, then moves
/// leadership and ISR membership off it where another live ISR member can take over
/// ([`crate::controlled_shutdown::decide`]). Empty records: the heartbeat changes nothing.
pub fn heartbeat_records(
    image: &MetadataImage,
    request: &HeartbeatRequest,
    caught_up_offset: i64,
    defaults: &TopicDefaults,
) -> Result<FailoverRecords, Refusal> {
    let Some(record) = validate_heartbeat(image, request, caught_up_offset)? else {
        return Ok(FailoverRecords::default());
    };
    let id = request.broker_id;
    let fences_it = matches!(&record.body, MetadataRecordBodyT::BrokerHeartbeat(h) if h.want_fence)
        && image.broker(id).is_some_and(|b| !b.fenced);
    let enters_shutdown = matches!(&record.body, MetadataRecordBodyT::BrokerHeartbeat(h) if h.want_shutdown)
        && image.broker(id).is_some_and(|b| !b.in_controlled_shutdown);
    match &record.body {
        MetadataRecordBodyT::UnfenceBroker(_) => {
            let fenced = fenced_brokers(image, &BTreeSet::new(), Some(id));
            let changes =
                partition_changes(image, &fenced, &shutting_down_brokers(image), defaults);
            Ok(first_then(record, changes))
        }
        _ if fences_it => {
            let fenced = fenced_brokers(image, &BTreeSet::from([id]), None);
            let mut changes =
                partition_changes(image, &fenced, &shutting_down_brokers(image), defaults);
            changes.records.push(record);
            Ok(changes)
        }
        _ if enters_shutdown => {
            let fenced = fenced_brokers(image, &BTreeSet::new(), None);
            let mut shutting_down = shutting_down_brokers(image);
            shutting_down.insert(id);
            let changes = partition_changes(image, &fenced, &shutting_down, defaults);
            Ok(first_then(record, changes))
        }
        _ => Ok(FailoverRecords {
            records: vec![record],
            malformed: Vec::new(),
        }),
    }
}

/// `record`, then `changes`.
fn first_then(record: MetadataRecordT, changes: FailoverRecords) -> FailoverRecords {
    FailoverRecords {
        records: std::iter::once(record).chain(changes.records).collect(),
        malformed: changes.malformed,
    }
}

/// A broker registration as records: [`validate_register_broker`]'s record, preceded — when
/// the id's current registration is unfenced (the same incarnation whose answer was lost, or a
/// restart the session rules let through) — by the records that fence it the usual way, its
/// leaderships and ISR memberships moved first, so no reader ever sees a re-registered (fenced)
/// broker leading — and, when it registers after an unclean shutdown, by the changes that take
/// it out of every ISR (even as the last member) and eligible set, since its log may be gone
/// (KIP-903). The registration is the last record.
pub fn register_broker_records(
    image: &MetadataImage,
    request: &RegisterBrokerRequest,
    defaults: &TopicDefaults,
) -> Result<FailoverRecords, Refusal> {
    let registration = validate_register_broker(image, request)?;
    let unfenced = image.broker(request.broker_id).is_some_and(|b| !b.fenced);
    let mut out = if unfenced {
        fence_brokers_records(image, &[request.broker_id], defaults)?
    } else {
        FailoverRecords::default()
    };
    let unclean =
        matches!(&registration.body, MetadataRecordBodyT::RegisterBroker(r) if r.unclean_shutdown);
    if unclean {
        // Its log may be gone: it leaves every ISR and eligible set (after the fence, so over
        // the image the fence leaves).
        let mut fenced = image.clone();
        for r in &out.records {
            // Records computed from this image apply to it, in order.
            let applied = fenced.apply(r);
            debug_assert!(applied.is_ok(), "{applied:?}");
        }
        let lost = lost_log_changes(&fenced, request.broker_id);
        out.records.extend(lost.records);
        out.malformed.extend(lost.malformed);
    }
    // The registration applies after the fence as well as before it: it only needs a newer
    // epoch than the registered one, which fencing leaves alone.
    out.records.push(registration);
    Ok(out)
}

/// One `PartitionChange` for every partition whose ISR or eligible set names `broker`, which is
/// registering after an unclean shutdown ([`spool_core::election::forget_lost_log`]).
fn lost_log_changes(image: &MetadataImage, broker: i32) -> FailoverRecords {
    each_partition(image, |_, state| forget_lost_log(&state.view(), broker))
}

/// `decide`'s change for every partition of the image, as records; the partitions it finds
/// malformed, reported.
fn each_partition(
    image: &MetadataImage,
    mut decide: impl FnMut(
        &TopicImage,
        &PartitionState,
    ) -> Result<Option<PartitionChange>, MalformedPartition>,
) -> FailoverRecords {
    let mut out = FailoverRecords::default();
    for topic in image.topics() {
        for (partition_index, state) in (0..).zip(&topic.partitions) {
            match decide(topic, state) {
                Ok(None) => {}
                Ok(Some(change)) => out.records.push(partition_change_record(
                    topic.topic_id,
                    partition_index,
                    state,
                    &change,
                )),
                Err(error) => out.malformed.push(MalformedAt {
                    topic: topic.name.clone(),
                    partition_index,
                    error,
                }),
            }
        }
    }
    out
}

/// The partition changes the image needs as it stands: leaders for partitions whose leader is
/// fenced or missing, fenced brokers out of every ISR, leaderships and ISR memberships moved
/// off brokers in controlled shutdown where another live ISR member can take over. Empty when
/// every partition fits. The active controller runs this on its own (not only when a heartbeat
/// or a fence changes something), so a decision lost with a leadership — an unfence committed
/// without all of its elections, a controlled shutdown recorded without all of its moves — is
/// made again.
pub fn reconcile_records(image: &MetadataImage, defaults: &TopicDefaults) -> FailoverRecords {
    let fenced = fenced_brokers(image, &BTreeSet::new(), None);
    partition_changes(image, &fenced, &shutting_down_brokers(image), defaults)
}

/// Brokers that may not lead or stay in an ISR: those the image has fenced, plus `also`, minus
/// `except`, plus every replica id that no registration names (it cannot be alive).
fn fenced_brokers(
    image: &MetadataImage,
    also: &BTreeSet<i32>,
    except: Option<i32>,
) -> BTreeSet<i32> {
    let mut fenced: BTreeSet<i32> = image
        .brokers()
        .filter(|b| b.fenced)
        .map(|b| b.broker_id)
        .chain(also.iter().copied())
        .collect();
    for topic in image.topics() {
        for p in &topic.partitions {
            fenced.extend(p.replicas.iter().filter(|b| image.broker(**b).is_none()));
        }
    }
    if let Some(id) = except {
        fenced.remove(&id);
    }
    fenced
}

/// One `PartitionChange` for every partition of the image that does not fit `fenced` and
/// `shutting_down` ([`decide`]).
fn partition_changes(
    image: &MetadataImage,
    fenced: &BTreeSet<i32>,
    shutting_down: &BTreeSet<i32>,
    defaults: &TopicDefaults,
) -> FailoverRecords {
    let unclean_shutdown: BTreeSet<i32> = image
        .brokers()
        .filter(|b| b.unclean_shutdown)
        .map(|b| b.broker_id)
        .collect();
    each_partition(image, |topic, state| {
        let policy = ElectionPolicy::from(&topic.config.resolve(defaults));
        decide(
            &state.view(),
            fenced,
            shutting_down,
            &unclean_shutdown,
            &policy,
        )
    })
}

/// The record for `change`: only what changed is written (leader [`LEADER_UNCHANGED`], ISR
/// absent otherwise), the epochs always. Operator elections (`crate::topic_admin`) write theirs
/// with it too.
pub(crate) fn partition_change_record(
    topic_id: TopicId,
    partition_index: i32,
    before: &PartitionState,
    change: &PartitionChange,
) -> MetadataRecordT {
    let leader = if change.leader == before.leader {
        LEADER_UNCHANGED
    } else {
        change.leader
    };
    let isr = (change.isr != before.isr).then(|| change.isr.clone());
    let eligible_leaders = (change.eligible_leaders != before.eligible_leaders)
        .then(|| change.eligible_leaders.clone());
    records::partition_change(
        topic_id,
        partition_index,
        PartitionFields {
            leader,
            isr,
            eligible_leaders,
            leader_epoch: change.leader_epoch,
            partition_epoch: change.partition_epoch,
            ..PartitionFields::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::NO_LEADER;
    use crate::Uuid128;

    /// Brokers 1-3 registered and unfenced, topic "t" with `partitions` as given.
    fn image(partitions: &[(&[i32], &[i32], i32)], configs: &[(&str, &str)]) -> MetadataImage {
        let mut image = MetadataImage::new();
        for id in 1..=3 {
            let epoch = i64::from(id) * 10;
            assert_eq!(
                image.apply(&records::register_broker(id, None, epoch, vec![], None)),
                Ok(())
            );
            assert_eq!(image.apply(&records::unfence_broker(id, epoch)), Ok(()));
        }
        let assignments = (0..)
            .zip(partitions)
            .map(|(i, (replicas, isr, leader))| {
                records::partition_assignment(i, replicas.to_vec(), isr.to_vec(), *leader, 0, 0)
            })
            .collect();
        let configs = configs
            .iter()
            .map(|(k, v)| records::topic_config(k, Some(v)))
            .collect();
        let create = records::create_topic("t", Uuid128 { high: 1, low: 1 }, configs, assignments);
        assert_eq!(image.apply(&create), Ok(()));
        image
    }

    fn apply_all(image: &mut MetadataImage, out: &FailoverRecords) {
        for r in &out.records {
            assert_eq!(image.apply(r), Ok(()), "{r:?}");
        }
    }

    fn partition(image: &MetadataImage, i: usize) -> PartitionState {
        image.topic("t").expect("t").partitions[i].clone()
    }

    #[test]
    fn fencing_writes_partition_changes_then_the_fence_and_is_idempotent() {
        let mut img = image(
            &[(&[1, 2, 3], &[1, 2, 3], 1), (&[2, 3, 1], &[2, 3, 1], 2)],
            &[],
        );
        let out = fence_brokers_records(&img, &[1, 1], &TopicDefaults::default()).expect("ok");
        assert!(out.malformed.is_empty());
        let kinds: Vec<&str> = out
            .records
            .iter()
            .map(|r| match &r.body {
                MetadataRecordBodyT::PartitionChange(_) => "change",
                MetadataRecordBodyT::FenceBroker(_) => "fence",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["change", "change", "fence"]);
        apply_all(&mut img, &out);
        let p0 = partition(&img, 0);
        assert_eq!((p0.leader, p0.isr.as_slice()), (2, &[2, 3][..]));
        assert_eq!((p0.leader_epoch, p0.partition_epoch), (1, 1));
        let p1 = partition(&img, 1);
        assert_eq!((p1.leader, p1.isr.as_slice()), (2, &[2, 3][..]));
        assert_eq!((p1.leader_epoch, p1.partition_epoch), (0, 1));
        assert!(img.broker(1).expect("b1").fenced);
        let again = fence_brokers_records(&img, &[1], &TopicDefaults::default()).expect("ok");
        assert_eq!(again, FailoverRecords::default());
    }

    #[test]
    fn unknown_brokers_and_stale_epochs_are_refused() {
        let img = image(&[(&[1], &[1], 1)], &[]);
        let d = TopicDefaults::default();
        let code = |r: Result<FailoverRecords, Refusal>| r.map_err(|r| r.code).map(|_| ());
        assert_eq!(
            code(fence_brokers_records(&img, &[1, 9], &d)),
            Err(ErrorCode::BrokerNotAvailable)
        );
        assert_eq!(
            code(unfence_broker_records(&img, 9, 1, &d)),
            Err(ErrorCode::BrokerNotAvailable)
        );
        assert_eq!(
            code(unfence_broker_records(&img, 1, 11, &d)),
            Err(ErrorCode::StaleBrokerEpoch)
        );
    }

    #[test]
    fn unfencing_writes_the_unfence_then_the_elections() {
        let mut img = image(&[(&[1, 2], &[1], 1)], &[]);
        let d = TopicDefaults::default();
        let fence = fence_brokers_records(&img, &[1], &d).expect("ok");
        apply_all(&mut img, &fence);
        let p = partition(&img, 0);
        assert_eq!(
            (p.leader, p.isr.as_slice(), p.leader_epoch),
            (NO_LEADER, &[1][..], 1)
        );
        let out = unfence_broker_records(&img, 1, 10, &d).expect("ok");
        assert!(matches!(
            out.records[0].body,
            MetadataRecordBodyT::UnfenceBroker(_)
        ));
        assert_eq!(out.records.len(), 2);
        apply_all(&mut img, &out);
        let p = partition(&img, 0);
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 2, 2));
    }

    #[test]
    fn the_topic_config_decides_unclean_elections() {
        let d = TopicDefaults::default();
        for (configs, leader) in [
            (&[][..], NO_LEADER),
            (&[("unclean.leader.election.enable", "true")][..], 2),
        ] {
            let mut img = image(&[(&[1, 2], &[1], 1)], configs);
            let fence = fence_brokers_records(&img, &[1], &d).expect("ok");
            apply_all(&mut img, &fence);
            assert_eq!(partition(&img, 0).leader, leader, "{configs:?}");
        }
    }

    #[test]
    fn malformed_partitions_are_reported_not_decided() {
        // A leader outside its ISR can only come from a hand-made record.
        let img = image(&[(&[1, 2], &[2], 1), (&[1, 2], &[1, 2], 1)], &[]);
        let out = fence_brokers_records(&img, &[1], &TopicDefaults::default()).expect("ok");
        assert_eq!(
            out.malformed,
            vec![MalformedAt {
                topic: "t".into(),
                partition_index: 0,
                error: MalformedPartition::LeaderNotInIsr(1),
            }]
        );
        assert_eq!(out.records.len(), 2, "partition 1 and the fence");
    }
}
