//! The internal topics coordinators live on (`__consumer_offsets`, `__transaction_state`):
//! creating one through the controller on first use, and finding which broker leads one of
//! its partitions and which core owns it here.

use std::rc::Rc;

use spool_protocol::ErrorCode;

use crate::requests::{ControllerOp, NewTopic, TopicPartition};
use crate::shard::Shard;

/// Creates internal topic `name` with `partitions` partitions and `configs` through the
/// controller unless it exists (at RF = min(3, live brokers), DESIGN §7); returns its partition
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
        replication_factor: shard.brokers("native").len().clamp(1, 3) as i16,
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
