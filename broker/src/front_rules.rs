//! The rules both request fronts (native: `crate::handlers`, Kafka: `crate::kafka`) share,
//! written once so the two ports cannot drift apart: what a front decides about a request before
//! and after the front-independent operations of `crate::ops`, and the helpers both use to
//! build answers. Each front keeps only its own wire shapes.
//!
//! Nothing here knows a wire format beyond the generated native object-API structs that
//! [`build!`] fills (the Kafka front fills them too, to call the group coordinator's contract).

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use spool_protocol::ErrorCode;

use crate::metrics::CoreMetrics;
use crate::requests::{ProduceResult, TopicPartition};
use crate::shard::Shard;

/// Builds a generated (non-exhaustive) flatbuffers object-API struct from its default: the
/// generated structs are `#[non_exhaustive]`, so outside `spool-protocol` they can only be made
/// as `Default` plus field assignments.
macro_rules! build {
    ($t:ty { $($f:ident : $v:expr),* $(,)? }) => {{
        let mut value = <$t>::default();
        $(value.$f = $v;)*
        value
    }};
}
pub(crate) use build;

/// A request's partitions grouped by topic, in request order: the shape both fronts' produce and
/// fetch requests have, and the shape their answers keep.
pub type ByTopic<P> = Vec<(String, Vec<P>)>;

fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Counts a request refused before any handler ran — an API or version the front's table does
/// not list, or (Kafka port) a frame that does not decode — as one request error.
pub fn record_refused(shard: &Shard) {
    CoreMetrics::add(&shard.metrics.request_errors, 1);
}

/// Kafka's acks rule, on both ports: 0 (no response), 1 (the leader's append) or -1 (every
/// in-sync replica, `crate::ops::produce_partition` checks min.insync.replicas). Anything else
/// is INVALID_REQUIRED_ACKS on every partition of the request, which is still answered.
pub fn acks_error(acks: i16) -> Option<ProduceResult> {
    (!(-1..=1).contains(&acks)).then(|| {
        ProduceResult::error(
            ErrorCode::InvalidRequiredAcks,
            format!("acks must be 0, 1 or -1, got {acks}"),
        )
    })
}

/// Whether a produce request with `acks` gets a response: acks=0 gets none at all (the client
/// does not read one).
pub fn answers(acks: i16) -> bool {
    acks != 0
}

/// One partition of a produce request as a front read it: its index and its record batches, or
/// the error the front found reading them (a payload slice out of bounds, null records).
pub type ProduceShare = (i32, Result<Bytes, ProduceResult>);

/// Produce, after the front has read the request: the acks rule, then every partition's batches
/// appended on its owner core concurrently (`crate::ops::produce_partition`); results keep the
/// request's order. Records the request's metrics: one produce of `request_bytes` (the record
/// bytes the client sent) with its latency, and one request error per partition that failed.
pub async fn produce(
    shard: &Rc<Shard>,
    acks: i16,
    timeout_ms: i32,
    request_bytes: u64,
    topics: ByTopic<ProduceShare>,
) -> ByTopic<(i32, ProduceResult)> {
    let started = Instant::now();
    let refused = acks_error(acks);
    // Every partition is spawned before any is awaited, so they append concurrently.
    let calls: Vec<_> = topics
        .into_iter()
        .map(|(topic, partitions)| {
            let tasks: Vec<_> = partitions
                .into_iter()
                .map(|(partition, records)| {
                    let tp = TopicPartition::new(topic.clone(), partition);
                    let refused = refused.clone();
                    let me = Rc::clone(shard);
                    let task = glommio::spawn_local(async move {
                        match (refused, records) {
                            (Some(e), _) | (None, Err(e)) => e,
                            (None, Ok(records)) => {
                                crate::ops::produce_partition(&me, tp, records, acks, timeout_ms)
                                    .await
                            }
                        }
                    });
                    (partition, task)
                })
                .collect();
            (topic, tasks)
        })
        .collect();
    let mut errors = 0;
    let mut out = Vec::with_capacity(calls.len());
    for (topic, tasks) in calls {
        let mut results = Vec::with_capacity(tasks.len());
        for (partition, task) in tasks {
            let r = task.await;
            if r.error != ErrorCode::None {
                errors += 1;
            }
            results.push((partition, r));
        }
        out.push((topic, results));
    }
    shard
        .metrics
        .record_produce(request_bytes, micros_since(started));
    CoreMetrics::add(&shard.metrics.request_errors, errors);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_may_be_zero_one_or_all() {
        for acks in [-1, 0, 1] {
            assert_eq!(acks_error(acks), None, "acks={acks}");
        }
        for acks in [-2, 2, i16::MIN, i16::MAX] {
            let e = acks_error(acks).expect("refused");
            assert_eq!(e.error, ErrorCode::InvalidRequiredAcks);
            assert_eq!((e.base_offset, e.log_start_offset), (-1, -1));
            assert_eq!(
                e.message.as_deref(),
                Some(format!("acks must be 0, 1 or -1, got {acks}").as_str())
            );
        }
    }

    #[test]
    fn only_acks_zero_goes_unanswered() {
        assert!(!answers(0));
        // An invalid acks value is answered, with INVALID_REQUIRED_ACKS.
        for acks in [-1, 1, 2, -2] {
            assert!(answers(acks), "acks={acks}");
        }
    }
}
