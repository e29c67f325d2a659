//! The internal topics coordinators live on (`__consumer_offsets`, `__transaction_state`):
//! creating one through the controller on first use, and finding which broker leads one of
//! its partitions and which core owns it here.

use std::rc::Rc;

use spool_protocol::ErrorCode;

use crate::requests::{ControllerOp, NewTopic, TopicPartition};
use crate::shard::Shard;

/// The replication factor of an internal topic: 3, or the cluster's size when it is smaller
/// (DESIGN §7). The size counts every broker the cluster has — the controller voters and every
/// registered broker, fenced ones too — not the live ones: a topic created while one broker
/// of three is down must still get three replicas (Kafka's `offsets.topic.replication.factor`),
/// so until the placement finds three live brokers the creation fails and the client retries
/// (COORDINATOR_NOT_AVAILABLE). Created at two replicas, `__consumer_offsets` or
/// `__transaction_state` would keep two for good (the fault harness's `ctp` workload found it).
pub(crate) fn internal_replication_factor(voters: usize, registered: usize) -> i16 {
    voters.max(registered).clamp(1, 3) as i16
}

/// Creates internal topic `name` with `partitions` partitions and `configs` through the
/// controller unless it exists (at [`internal_replication_factor`]); returns its partition
/// count (the image's, which wins over `partitions`).
pub(crate) async fn create(
    shard: &Rc<Shard>,
    name: &str,
    partitions: i32,
    configs: Vec<(String, String)>,
) -> Result<i32, ErrorCode> {
    if let Some(n) = crate::ops::partition_count(shard, name) {
        return Ok(n);
    }
    let topic = NewTopic {
        name: name.to_string(),
        partitions,
        replication_factor: internal_replication_factor(
            shard.config.controller_voters.len(),
            shard.image.borrow().brokers().count(),
        ),
        configs,
    };
    let op = ControllerOp::CreateTopics {
        topics: vec![topic],
        validate_only: false,
    };
    let outcomes = crate::ops::controller(shard, op, &[name.to_string()]).await;
    match outcomes.first().map(|o| o.error) {
        Some(ErrorCode::None) | Some(ErrorCode::TopicAlreadyExists) => {}
        other => {
            tracing::warn!(?other, "creating {name}");
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
    }
    crate::ops::partition_count(shard, name).ok_or(ErrorCode::CoordinatorNotAvailable)
}

/// The broker leading internal partition `tp` and the core owning it here:
/// COORDINATOR_NOT_AVAILABLE while it has no leader or is not open on this broker.
pub(crate) fn leader_and_core(
    shard: &Shard,
    tp: &TopicPartition,
) -> Result<(i32, usize), ErrorCode> {
    crate::router::leader_and_owner(&shard.image.borrow(), &shard.router, tp)
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

/// `segment.bytes` of `__consumer_offsets` (Kafka's `offsets.topic.segment.bytes`): small enough
/// that segments close and compaction has something to clean.
pub const OFFSETS_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;

/// Creates `__consumer_offsets` (compacted) through the controller unless it exists; returns
/// its partition count. Its first user creates it: a group's FindCoordinator, or a
/// transaction's AddOffsetsToTxn (a producer may name a group before any consumer of it ran).
pub(crate) async fn offsets_topic(shard: &Rc<Shard>) -> Result<i32, ErrorCode> {
    let configs = vec![
        ("cleanup.policy".into(), "compact".into()),
        ("segment.bytes".into(), OFFSETS_SEGMENT_BYTES.to_string()),
    ];
    create(
        shard,
        crate::group::OFFSETS_TOPIC,
        shard.config.offsets_topic_partitions,
        configs,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::internal_replication_factor;

    #[test]
    fn the_replication_factor_counts_every_broker_not_the_live_ones() {
        // A single node (no voters configured, itself registered).
        assert_eq!(internal_replication_factor(0, 1), 1);
        assert_eq!(internal_replication_factor(0, 0), 1);
        // Three voters, one of them not registered yet (or fenced: still counted).
        assert_eq!(internal_replication_factor(3, 2), 3);
        assert_eq!(internal_replication_factor(3, 3), 3);
        // Two voters and a learner.
        assert_eq!(internal_replication_factor(2, 3), 3);
        assert_eq!(internal_replication_factor(2, 2), 2);
        assert_eq!(internal_replication_factor(5, 7), 3);
    }
}
