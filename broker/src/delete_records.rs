//! DeleteRecords, front-independent (Kafka's `ReplicaManager.deleteRecords`): both fronts (the
//! Kafka port and the native protocol / CLI) call [`delete_records`] with (partition, offset)
//! pairs and encode its results their own way.
//!
//! Owns the rules before a partition's owner core is asked: an unknown topic or partition →
//! UNKNOWN_TOPIC_OR_PARTITION; this broker not the leader → NOT_LEADER_OR_FOLLOWER; a partition
//! not open yet → LEADER_NOT_AVAILABLE. The owner core decides the rest
//! (`partition::delete`): offset -1 means the high watermark; past the high watermark or
//! negative → OFFSET_OUT_OF_RANGE; answered once every ISR member's log start reached the
//! offset, or REQUEST_TIMED_OUT after `timeout_ms`. Partitions are asked concurrently, so one
//! slow partition costs the request its timeout once, not once per partition.
//!
//! Promises: one result per requested pair, in request order; `low_watermark` is -1 on error.

use std::rc::Rc;

use spool_protocol::ErrorCode;

use crate::requests::{DeleteRecordsPartition, TopicPartition};
use crate::shard::Shard;

/// Partitions one request may name (Kafka bounds a request only by its frame; this keeps the
/// concurrent calls bounded). Past it every partition answers INVALID_REQUEST.
pub const DELETE_RECORDS_PARTITIONS_MAX: usize = 10_000;

/// One partition's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsResult {
    pub tp: TopicPartition,
    pub error: ErrorCode,
    /// The partition's new low watermark (the smallest log start in the ISR); -1 on error.
    pub low_watermark: i64,
}

/// Deletes, for each `(partition, offset)`, the records below `offset` (module docs).
pub async fn delete_records(
    shard: &Rc<Shard>,
    wanted: Vec<(TopicPartition, i64)>,
    timeout_ms: i32,
) -> Vec<DeleteRecordsResult> {
    let too_many = wanted.len() > DELETE_RECORDS_PARTITIONS_MAX;
    let calls: Vec<_> = wanted
        .into_iter()
        .map(|(tp, offset)| {
            let me = Rc::clone(shard);
            glommio::spawn_local(async move {
                let answer = if too_many {
                    Err(ErrorCode::InvalidRequest)
                } else {
                    one(&me, tp.clone(), offset, timeout_ms).await
                };
                match answer {
                    Ok(low) => DeleteRecordsResult {
                        tp,
                        error: ErrorCode::None,
                        low_watermark: i64::try_from(low).unwrap_or(i64::MAX),
                    },
                    Err(error) => DeleteRecordsResult {
                        tp,
                        error,
                        low_watermark: -1,
                    },
                }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        out.push(c.await);
    }
    out
}

async fn one(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    offset: i64,
    timeout_ms: i32,
) -> Result<u64, ErrorCode> {
    if shard
        .partition_count(&tp.topic)
        .is_none_or(|n| tp.partition < 0 || tp.partition >= n)
    {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    // Kafka refuses a log that is only compacted (its offsets are keys' histories) and allows
    // `compact,delete`: decided from the topic's policy, which the storage layer folds into one.
    let deletes = shard.image.borrow().topic(&tp.topic).map(|t| {
        crate::topic_config::resolved(&shard.config, t)
            .cleanup_policy
            .delete
    });
    if deletes == Some(false) {
        return Err(ErrorCode::PolicyViolation);
    }
    if let Some(code) = shard.not_leader(&tp) {
        return Err(code);
    }
    let Some(owner) = shard.owner(&tp) else {
        return Err(ErrorCode::LeaderNotAvailable);
    };
    let request = DeleteRecordsPartition {
        tp,
        offset,
        timeout_ms,
    };
    shard
        .call(owner, request)
        .await
        .unwrap_or(Err(ErrorCode::RequestTimedOut))
}
