//! The rules both request fronts (native: `crate::handlers`, Kafka: `crate::kafka`) share,
//! written once so the two ports cannot drift apart. Each front reads its own request shape into
//! the plain inputs here and shapes the outputs into its own answer; everything between is one
//! piece of code:
//! - produce: the acks rule ([`acks_error`], [`answers`]) and [`produce`] — every partition
//!   appended concurrently through `crate::ops::produce_partition`, results in request order,
//!   the request's metrics recorded;
//! - fetch: [`fetch`] — `crate::ops::fetch` over the flattened request, results regrouped by
//!   topic in request order, metrics recorded — and [`last_stable_offset`];
//! - InitProducerId: [`init_producer_id`] (and its pure part, [`producer_id_refusal`]);
//! - requests refused before any handler ran: [`record_refused`];
//! - `build!`, the one way both fronts fill the generated native object-API structs (the Kafka
//!   front fills them to call the group coordinator's contract, `crate::handlers::groups`).
//!
//! It never encodes or decodes a wire format, and calls `crate::ops` and the shard exactly as the
//! fronts did before the rules moved here.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use spool_protocol::ErrorCode;

use crate::metrics::CoreMetrics;
use crate::requests::{FetchPartition, FetchResult, ProduceResult, TopicPartition};
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
/// `frame_bytes` is the size of the request frame the records are slices of.
pub async fn produce(
    shard: &Rc<Shard>,
    frame_bytes: usize,
    acks: i16,
    timeout_ms: i32,
    transactional_id: Option<String>,
    request_bytes: u64,
    topics: ByTopic<ProduceShare>,
) -> ByTopic<(i32, ProduceResult)> {
    let started = Instant::now();
    let refused = acks_error(acks);
    // The leaders keep the batches without copying them, within this core's bound on the
    // frames kept so (`frame_pins`).
    let topics = crate::frame_pins::shares(frame_bytes, topics);
    // Every partition's append is polled together, so they proceed concurrently, without a
    // task of its own (issue 19 item 3); results come back in request order.
    let mut shape = Vec::with_capacity(topics.len());
    let mut calls = Vec::new();
    for (topic, partitions) in topics {
        let count = partitions.len();
        for (partition, records) in partitions {
            let tp = TopicPartition::new(topic.clone(), partition);
            let (refused, transactional_id) = (refused.clone(), transactional_id.clone());
            calls.push(async move {
                let r = match (refused, records) {
                    (Some(e), _) | (None, Err(e)) => e,
                    (None, Ok(records)) => {
                        crate::ops::produce_partition(
                            shard,
                            tp,
                            records,
                            acks,
                            timeout_ms,
                            transactional_id,
                        )
                        .await
                    }
                };
                (partition, r)
            });
        }
        shape.push((topic, count));
    }
    let mut results = futures_util::future::join_all(calls).await.into_iter();
    let errors = results
        .as_slice()
        .iter()
        .filter(|(_, r)| r.error != ErrorCode::None)
        .count() as u64;
    let out: ByTopic<(i32, ProduceResult)> = shape
        .into_iter()
        .map(|(topic, n)| (topic, results.by_ref().take(n).collect()))
        .collect();
    shard
        .metrics
        .record_produce(request_bytes, micros_since(started));
    CoreMetrics::add(&shard.metrics.request_errors, errors);
    out
}

/// One partition of a fetch request: where to read and how much this partition may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchAt {
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// KIP-320's current leader epoch, when the request carries one.
    pub current_leader_epoch: Option<i32>,
}

/// Fetch, after the front has read the request: `crate::ops::fetch` over every partition (its
/// long poll and `max_bytes` rule), the results grouped back by topic in request order. Records
/// the request's metrics: one fetch of the record bytes returned, with its latency (the long-poll
/// wait included).
pub async fn fetch(
    shard: &Rc<Shard>,
    topics: ByTopic<FetchAt>,
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    read_committed: bool,
) -> ByTopic<(i32, FetchResult)> {
    let started = Instant::now();
    let wanted: Vec<FetchPartition> = topics
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions.iter().map(move |p| FetchPartition {
                tp: TopicPartition::new(topic.clone(), p.partition),
                fetch_offset: p.fetch_offset,
                max_bytes: p.max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                read_committed,
            })
        })
        .collect();
    let results = crate::ops::fetch(shard, &wanted, max_wait_ms, min_bytes, max_bytes).await;
    let bytes: u64 = results.iter().map(FetchResult::bytes).sum();
    shard.metrics.record_fetch(bytes, micros_since(started));
    regroup(topics, results)
}

/// Puts `results` (one per partition of `topics`, in the same order) back under their topics.
fn regroup<R>(topics: ByTopic<FetchAt>, results: Vec<R>) -> ByTopic<(i32, R)> {
    debug_assert_eq!(
        results.len(),
        topics.iter().map(|(_, p)| p.len()).sum::<usize>()
    );
    let mut results = results.into_iter();
    topics
        .into_iter()
        .map(|(topic, partitions)| {
            let answered = partitions
                .iter()
                .zip(results.by_ref())
                .map(|(p, r)| (p.partition, r))
                .collect();
            (topic, answered)
        })
        .collect()
}

/// The last stable offset a fetch reports (the partition's: below it every transaction is
/// decided).
pub fn last_stable_offset(r: &FetchResult) -> i64 {
    r.last_stable_offset
}

/// A producer's identity as InitProducerId hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// InitProducerId for an idempotent producer (no transactional id): a fresh producer id from
/// this core's block (the controller hands out blocks through raft, so ids are unique across
/// restarts) at epoch 0. With a transactional id the coordinator answers
/// (`handlers::txn::init_producer`).
pub async fn idempotent_producer_id(shard: &Rc<Shard>) -> Result<ProducerIdentity, ErrorCode> {
    let producer_id = shard.next_producer_id().await?;
    Ok(ProducerIdentity {
        producer_id,
        producer_epoch: 0,
    })
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
    fn fetch_results_go_back_under_their_topics_in_request_order() {
        let at = |partition| FetchAt {
            partition,
            fetch_offset: 0,
            max_bytes: 1,
            current_leader_epoch: None,
        };
        let topics = vec![
            ("a".to_string(), vec![at(2), at(0)]),
            ("b".to_string(), vec![]),
            ("a".to_string(), vec![at(1)]),
        ];
        let got = regroup(topics, vec!["a2", "a0", "a1"]);
        assert_eq!(
            got,
            vec![
                ("a".to_string(), vec![(2, "a2"), (0, "a0")]),
                ("b".to_string(), vec![]),
                ("a".to_string(), vec![(1, "a1")]),
            ]
        );
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
