//! AlterPartition on the controller: a partition leader's ISR change (KIP-497), decided by
//! spool-core's [`validate_alter_partition`] over the [`MetadataImage`] and written as one
//! `PartitionChange` record (REPLICATION.md "High watermark and ISR").
//!
//! Owns: mapping the image onto spool-core's views (the partition's [`PartitionView`], every
//! registered broker's [`BrokerStatus`], the topic's `min.insync.replicas` resolved over the
//! caller's defaults) and the decision back into a record — leader unchanged
//! ([`LEADER_UNCHANGED`]), the new ISR, the epochs the decision chose (leader epoch kept,
//! partition epoch + 1); [`decide`], which answers only from a settled image what writes
//! nothing; [`leadership`], the partition state an answer carries; and the outcome types of
//! [`crate::Controller::alter_partition`] ([`AlterOutcome`], [`AlterRefused`]).
//! Promises: pure functions of `(image, request)`, like [`crate::failover`]: a refusal produces no
//! record; `Ok(None)` when the ISR already is the requested one (nothing to write — answer with
//! the current state); a record returned applies to the image it was computed from. Computed
//! against the latest image (the committed one plus proposals in flight), a second change from
//! the same partition epoch is refused INVALID_UPDATE_VERSION, so at most one is in flight.
//! Never does: propose ([`crate::Controller::alter_partition`] does), or decide anything itself —
//! every rule lives in `spool_core::isr_change`.

use std::collections::BTreeMap;

use spool_core::isr_change::{
    validate_alter_partition, AlterPartitionError, AlterPartitionRequest, BrokerStatus,
};
use spool_core::replica::Leadership;
use spool_core::topic_config::TopicDefaults;
use spool_protocol::metadata_records::MetadataRecordT;
use spool_protocol::ErrorCode;

use crate::image::{MetadataImage, PartitionState, TopicId, LEADER_UNCHANGED};
use crate::node::MetadataRaft;
use crate::proposal::ProposalId;
use crate::records::{self, PartitionFields};
use crate::validate::Refusal;

/// What [`crate::Controller::alter_partition`] did with a valid request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterOutcome {
    /// The change is proposed: answer once this proposal commits, with the committed state.
    Proposed(ProposalId),
    /// The ISR already is the requested one; nothing was written: answer with the current state.
    AlreadySo,
}

/// Why [`crate::Controller::alter_partition`] wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterRefused {
    /// The controller could not take it (NOT_CONTROLLER, its own proposals not yet committed,
    /// THROTTLING_QUOTA_EXCEEDED, …): no answer about the partition — the leader treats the
    /// answer as lost and sends the same request again.
    Controller(Refusal),
    /// The request does not fit the partition: answer the leader with this error.
    Invalid(AlterPartitionError),
}

/// The active controller's decision on `request` over `raft`'s latest image (so that a second
/// change from one partition epoch is refused while the first is in flight): the record to
/// propose; `Ok(None)` when the ISR already is the requested one; a refusal. An answer that
/// writes nothing — `Ok(None)`, [`AlterRefused::Invalid`] — is given only when nothing this
/// controller proposed waits to commit, since the leader takes it as committed truth (it applies
/// the state, or waits for newer metadata after a refusal); a decision over proposals that may
/// yet be lost (this controller deposed before they commit) is [`AlterRefused::Controller`]
/// instead, and the leader asks again. Kafka's controller likewise answers only once its log
/// holds what it wrote before. (Answering a refusal from such a state left a leader waiting
/// forever for metadata that never came: the simulator, seed 43.)
pub fn decide(
    raft: &MetadataRaft,
    topic_id: TopicId,
    partition: i32,
    request: &AlterPartitionRequest,
    defaults: &TopicDefaults,
) -> Result<Option<MetadataRecordT>, AlterRefused> {
    match alter_partition_records(raft.latest_image(), topic_id, partition, request, defaults) {
        Ok(Some(record)) => Ok(Some(record)),
        _ if !raft.is_settled() => Err(AlterRefused::Controller(Refusal::new(
            ErrorCode::RequestTimedOut,
            "the controller's own proposals have not committed yet",
        ))),
        Ok(None) => Ok(None),
        Err(e) => Err(AlterRefused::Invalid(e)),
    }
}

/// The record that applies `request` to partition `partition` of topic `topic_id`, `Ok(None)`
/// when its ISR already is the requested one, or why not. An unknown topic id or partition (a
/// deleted topic, a request from a stale leader) is INVALID_REQUEST: the leader waits for newer
/// metadata. `defaults` are the broker-wide topic defaults the topic's own
/// `min.insync.replicas` falls back to: KIP-966's eligible leaders depend on it.
pub fn alter_partition_records(
    image: &MetadataImage,
    topic_id: TopicId,
    partition: i32,
    request: &AlterPartitionRequest,
    defaults: &TopicDefaults,
) -> Result<Option<MetadataRecordT>, AlterPartitionError> {
    let topic = image
        .topic_by_id(topic_id)
        .ok_or(AlterPartitionError::InvalidRequest)?;
    let state =
        partition_state(image, topic_id, partition).ok_or(AlterPartitionError::InvalidRequest)?;
    let view = state.view();
    let brokers = broker_statuses(image);
    // A u32 always fits a usize on the targets spool builds for; saturate rather than panic.
    let min_insync_replicas =
        usize::try_from(topic.config.resolve(defaults).min_insync_replicas).unwrap_or(usize::MAX);
    let change = validate_alter_partition(request, &view, &brokers, min_insync_replicas)?;
    Ok(change.map(|c| {
        // The decision keeps the leader and its epoch; only the ISR and the partition epoch move.
        debug_assert_eq!(
            (c.leader, c.leader_epoch),
            (state.leader, state.leader_epoch)
        );
        let eligible_leaders =
            (c.eligible_leaders != state.eligible_leaders).then_some(c.eligible_leaders);
        records::partition_change(
            topic_id,
            partition,
            PartitionFields {
                leader: LEADER_UNCHANGED,
                isr: Some(c.isr),
                eligible_leaders,
                leader_epoch: c.leader_epoch,
                partition_epoch: c.partition_epoch,
                ..PartitionFields::default()
            },
        )
    }))
}

/// The partition's state as an AlterPartition answer carries it (leader, epochs, replicas, ISR);
/// `None` for an unknown topic id or partition.
pub fn leadership(image: &MetadataImage, topic_id: TopicId, partition: i32) -> Option<Leadership> {
    let p = partition_state(image, topic_id, partition)?;
    Some(Leadership {
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
    })
}

fn partition_state(
    image: &MetadataImage,
    topic_id: TopicId,
    partition: i32,
) -> Option<&PartitionState> {
    let topic = image.topic_by_id(topic_id)?;
    usize::try_from(partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
}

/// A registered broker as spool-core's ISR rules see it.
pub fn broker_status(b: &crate::image::BrokerRegistration) -> BrokerStatus {
    BrokerStatus {
        broker_epoch: b.broker_epoch,
        fenced: b.fenced,
        in_controlled_shutdown: b.in_controlled_shutdown,
        unclean_shutdown: b.unclean_shutdown,
    }
}

/// Every registered broker of `image`, by id, as [`broker_status`] maps it (the controller's
/// AlterPartition check and a leader's ISR proposals read the same view).
pub fn broker_statuses(image: &MetadataImage) -> BTreeMap<i32, BrokerStatus> {
    image
        .brokers()
        .map(|b| (b.broker_id, broker_status(b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_core::isr_change::IsrMember;
    use spool_protocol::metadata_records::MetadataRecordBodyT;

    const TOPIC: TopicId = crate::Uuid128 { high: 1, low: 1 };

    /// Brokers 1-3 (epochs 10, 20, 30) registered and unfenced; topic `TOPIC` with one partition
    /// on replicas 1, 2, 3, led by 1 at leader epoch 0, partition epoch 0, with `isr`.
    fn image(isr: &[i32], configs: &[(&str, &str)]) -> MetadataImage {
        let mut image = MetadataImage::new();
        for id in 1..=3 {
            let epoch = i64::from(id) * 10;
            assert_eq!(
                image.apply(&records::register_broker(id, None, epoch, vec![], None)),
                Ok(())
            );
            assert_eq!(image.apply(&records::unfence_broker(id, epoch)), Ok(()));
        }
        let p = records::partition_assignment(0, vec![1, 2, 3], isr.to_vec(), 1, 0, 0);
        let configs = configs
            .iter()
            .map(|(k, v)| records::topic_config(k, Some(v)))
            .collect();
        let create = records::create_topic("t", TOPIC, configs, vec![p]);
        assert_eq!(image.apply(&create), Ok(()));
        image
    }

    fn request(isr: &[i32]) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: 10,
            leader_epoch: 0,
            partition_epoch: 0,
            new_isr: isr
                .iter()
                .map(|&b| IsrMember {
                    broker_id: b,
                    broker_epoch: i64::from(b) * 10,
                })
                .collect(),
        }
    }

    fn decide(
        image: &MetadataImage,
        req: &AlterPartitionRequest,
    ) -> Result<Option<MetadataRecordT>, AlterPartitionError> {
        alter_partition_records(image, TOPIC, 0, req, &TopicDefaults::default())
    }

    #[test]
    fn a_shrink_writes_the_new_isr_with_the_leader_unchanged() {
        let mut img = image(&[1, 2, 3], &[]);
        let record = decide(&img, &request(&[1, 2]))
            .expect("valid")
            .expect("a change");
        let MetadataRecordBodyT::PartitionChange(c) = &record.body else {
            panic!("a partition change, got {record:?}");
        };
        assert_eq!(c.leader, LEADER_UNCHANGED);
        assert_eq!(c.isr.as_deref(), Some(&[1, 2][..]));
        assert_eq!(c.replicas, None);
        assert_eq!((c.leader_epoch, c.partition_epoch), (0, 1));
        assert_eq!(img.apply(&record), Ok(()));
        let after = leadership(&img, TOPIC, 0).expect("known");
        assert_eq!(
            (after.leader_id, after.isr.as_slice(), after.partition_epoch),
            (1, &[1, 2][..], 1)
        );
    }

    #[test]
    fn the_isr_it_already_has_writes_nothing() {
        let img = image(&[1, 2], &[]);
        assert_eq!(decide(&img, &request(&[1, 2])), Ok(None));
    }

    #[test]
    fn unknown_partitions_and_bad_requests_are_refused() {
        let img = image(&[1, 2, 3], &[]);
        let d = TopicDefaults::default();
        let other = crate::Uuid128 { high: 9, low: 9 };
        for (topic_id, partition) in [(other, 0), (TOPIC, 1), (TOPIC, -1)] {
            assert_eq!(
                alter_partition_records(&img, topic_id, partition, &request(&[1, 2]), &d),
                Err(AlterPartitionError::InvalidRequest),
                "{topic_id:?}/{partition}"
            );
        }
        let stale = AlterPartitionRequest {
            partition_epoch: 5,
            ..request(&[1, 2])
        };
        assert_eq!(
            decide(&img, &stale),
            Err(AlterPartitionError::InvalidUpdateVersion)
        );
        assert_eq!(leadership(&img, other, 0), None);
    }
}
