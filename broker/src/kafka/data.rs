//! Produce, Fetch and ListOffsets on the Kafka front: translated into the internal requests of
//! [`crate::ops`] through the rules both fronts share ([`crate::front_rules`]: acks, concurrent
//! appends, the fetch grouping, metrics), answered in Kafka's shapes.
//!
//! - Produce (v3+): each partition's `records` are raw RecordBatch v2 bytes and go to the log
//!   untouched; idempotent producers' id/epoch/sequence are checked by the partition's producer
//!   table; acks=0 gets no response at all.
//! - Fetch (v4–v11): full fetches only — an incremental-session request is answered with
//!   session id 0, which tells the client no session exists, so it keeps sending full fetches.
//!   Records go out straight from the log: the response framing comes from
//!   `spool_protocol::kafka::fetch` and the record chunks (memory or segment-file ranges) are
//!   written between its pieces by the same splice path as the native front.
//! - ListOffsets (v1+): -2 earliest, -1 latest (the high watermark), otherwise by timestamp.
//! - OffsetForLeaderEpoch (v2–v4): where an epoch ends in the leader's log (KIP-101), with the
//!   KIP-320 check of the sender's current leader epoch — what a consumer asks after a leader
//!   change to learn whether its position was truncated away.

use std::rc::Rc;

use kafka_protocol::messages::{
    list_offsets_response, offset_for_leader_epoch_response, produce_response, FetchRequest,
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse, TopicName,
};
use spool_protocol::kafka::fetch::{
    encode_fetch_response, FetchPartitionFrame, FetchResponseFrame, FetchTopicFrame,
};
use spool_protocol::ErrorCode;

use super::kstr;
use crate::front_rules::{self, FetchAt, ProduceShare};
use crate::handlers::Outgoing;
use crate::requests::{
    EpochEndQuery, FetchChunk, ListOffsetsResult, ProduceResult, TopicPartition,
};
use crate::shard::Shard;

/// Kafka's isolation level for read_committed fetches.
const READ_COMMITTED: i8 = 1;

/// `None` for acks=0 (the client expects no response).
pub async fn produce(
    shard: &Rc<Shard>,
    req: ProduceRequest,
    version: i16,
    frame_bytes: usize,
) -> Option<ProduceResponse> {
    let mut bytes = 0u64;
    let topics = req
        .topic_data
        .into_iter()
        .map(|t| {
            let name = t.name.0.as_str().to_owned();
            let shares: Vec<ProduceShare> = t
                .partition_data
                .into_iter()
                .map(|p| {
                    bytes += p.records.as_ref().map_or(0, |r| r.len() as u64);
                    let records = p.records.ok_or_else(|| {
                        let tp = TopicPartition::new(name.clone(), p.index);
                        ProduceResult::error(
                            ErrorCode::CorruptMessage,
                            format!("{tp}: null records"),
                        )
                    });
                    (p.index, records)
                })
                .collect();
            (name, shares)
        })
        .collect();
    let transactional_id = req.transactional_id.as_ref().map(|t| t.to_string());
    let results = front_rules::produce(
        shard,
        frame_bytes,
        req.acks,
        req.timeout_ms,
        transactional_id,
        bytes,
        topics,
    )
    .await;
    let responses = results
        .into_iter()
        .map(|(name, partitions)| {
            produce_response::TopicProduceResponse::default()
                .with_name(TopicName(kstr(name)))
                .with_partition_responses(
                    partitions
                        .into_iter()
                        .map(|(index, r)| produce_partition_answer(index, r, version))
                        .collect(),
                )
        })
        .collect();
    front_rules::answers(req.acks).then(|| ProduceResponse::default().with_responses(responses))
}

/// One partition's Produce answer; the error message exists from v8.
pub(super) fn produce_partition_answer(
    index: i32,
    r: ProduceResult,
    version: i16,
) -> produce_response::PartitionProduceResponse {
    let part = produce_response::PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(r.error as i16)
        .with_base_offset(r.base_offset)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(r.log_start_offset);
    if version >= 8 {
        part.with_error_message(r.message.map(kstr))
    } else {
        part
    }
}

pub async fn fetch(
    shard: &Rc<Shard>,
    req: FetchRequest,
    version: i16,
    correlation_id: i32,
) -> Outgoing {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| FetchAt {
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    // v9+; -1 (and older versions): not checked.
                    current_leader_epoch: (p.current_leader_epoch >= 0)
                        .then_some(p.current_leader_epoch),
                })
                .collect();
            (t.topic.0.as_str().to_owned(), partitions)
        })
        .collect();
    let read_committed = req.isolation_level == READ_COMMITTED;
    let results = front_rules::fetch(
        shard,
        topics,
        req.max_wait_ms,
        req.min_bytes,
        req.max_bytes,
        read_committed,
    )
    .await;
    let mut frame = FetchResponseFrame::default();
    let mut chunks_per_partition: Vec<Vec<FetchChunk>> = Vec::new();
    for (name, answered) in results {
        let mut partitions = Vec::with_capacity(answered.len());
        for (partition, r) in answered {
            partitions.push(FetchPartitionFrame {
                partition_index: partition,
                error_code: r.error as i16,
                high_watermark: r.high_watermark,
                last_stable_offset: front_rules::last_stable_offset(&r),
                log_start_offset: r.log_start_offset,
                // read_committed only; null for read_uncommitted, as Kafka answers.
                aborted_transactions: read_committed.then(|| r.aborted.clone()),
                // Bounded by the request's max_bytes (an i32) plus one batch (max.message.bytes).
                records_bytes: u32::try_from(r.bytes()).unwrap_or(u32::MAX),
            });
            chunks_per_partition.push(r.chunks);
        }
        frame.topics.push(FetchTopicFrame { name, partitions });
    }
    let pieces = match encode_fetch_response(version, correlation_id, &frame) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("framing a Kafka fetch response: {e}");
            return Outgoing::Nothing;
        }
    };
    let mut pieces = pieces.into_iter();
    let head = pieces.next().unwrap_or_default();
    let mut chunks = Vec::new();
    for (partition_chunks, piece) in chunks_per_partition.into_iter().zip(pieces) {
        chunks.extend(partition_chunks);
        if !piece.is_empty() {
            chunks.push(FetchChunk::Memory(piece));
        }
    }
    Outgoing::Frame { head, chunks }
}

pub async fn list_offsets(
    shard: &Rc<Shard>,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // v2+; v1 has no isolation level (read_uncommitted).
    let read_committed = req.isolation_level == READ_COMMITTED;
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.as_str().to_owned();
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let r =
                crate::ops::list_offsets_partition(shard, tp, p.timestamp, read_committed).await;
            let part = list_offsets_partition_answer(p.partition_index, r, version);
            parts.push(part);
        }
        topics.push(
            list_offsets_response::ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}

pub async fn offset_for_leader_epoch(
    shard: &Rc<Shard>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.topic.0.as_str().to_owned();
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let query = EpochEndQuery {
                tp: TopicPartition::new(name.clone(), p.partition),
                // -1 on the wire: not checked (Kafka's rule for old clients).
                current_leader_epoch: (p.current_leader_epoch >= 0)
                    .then_some(p.current_leader_epoch),
                leader_epoch: p.leader_epoch,
            };
            let answer = crate::ops::offset_for_leader_epoch(shard, query).await;
            let part = offset_for_leader_epoch_response::EpochEndOffset::default()
                .with_partition(p.partition);
            parts.push(match answer {
                Ok(e) => part
                    .with_leader_epoch(e.epoch)
                    .with_end_offset(e.end_offset),
                Err(code) => part
                    .with_error_code(code as i16)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1),
            });
        }
        topics.push(
            offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(parts),
        );
    }
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// One partition's ListOffsets answer; the leader epoch exists from v4.
pub(super) fn list_offsets_partition_answer(
    index: i32,
    r: ListOffsetsResult,
    version: i16,
) -> list_offsets_response::ListOffsetsPartitionResponse {
    let part = list_offsets_response::ListOffsetsPartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(r.error as i16)
        .with_timestamp(r.timestamp)
        .with_offset(r.offset);
    if version >= 4 {
        part.with_leader_epoch(r.leader_epoch)
    } else {
        part
    }
}
