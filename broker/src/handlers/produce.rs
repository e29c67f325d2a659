//! Produce on the native front: each partition's batches are located in the frame's payload,
//! then `crate::front_rules::produce` applies the rules both fronts share (acks, concurrent
//! appends on the owning cores, metrics); the answer groups partitions by topic name.

use std::rc::Rc;

use bytes::Bytes;
use spool_protocol::payload;
use spool_protocol::wire::{
    self, PartitionProduceResponseT, ProduceRequestT, ProduceResponseT, TopicProduceResponseT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::{self, build, ProduceShare};
use crate::requests::ProduceResult;
use crate::shard::Shard;

/// Returns `None` for acks=0 (the client expects no response).
pub async fn handle(
    shard: &Rc<Shard>,
    req: ProduceRequestT,
    frame_payload: &Bytes,
    frame_bytes: usize,
) -> Option<ProduceResponseT> {
    let mut bytes = 0u64;
    let topics = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|topic| {
            let shares: Vec<ProduceShare> = topic
                .partitions
                .unwrap_or_default()
                .into_iter()
                .map(|p| {
                    bytes += u64::from(p.records.length);
                    let records = payload::slice(frame_payload, &p.records).map_err(|e| {
                        ProduceResult::error(ErrorCode::CorruptMessage, e.to_string())
                    });
                    (p.index, records)
                })
                .collect();
            (topic.name, shares)
        })
        .collect();
    let results = front_rules::produce(
        shard,
        frame_bytes,
        req.acks,
        req.timeout_ms,
        req.transactional_id,
        bytes,
        topics,
    )
    .await;
    let mut by_topic: Vec<TopicProduceResponseT> = Vec::new();
    for (topic, partitions) in results {
        let parts = partitions.into_iter().map(|(index, r)| {
            build!(PartitionProduceResponseT {
                index: index,
                error_code: wire::ErrorCode::from(r.error),
                base_offset: r.base_offset,
                log_append_time_ms: -1,
                log_start_offset: r.log_start_offset,
                record_errors: None,
                error_message: r.message,
            })
        });
        // A topic named twice in the request is answered once, its partitions together.
        match by_topic.iter_mut().find(|t| t.name == topic) {
            Some(t) => t.partitions.get_or_insert_with(Vec::new).extend(parts),
            None => by_topic.push(build!(TopicProduceResponseT {
                name: topic,
                partitions: Some(parts.collect())
            })),
        }
    }
    front_rules::answers(req.acks).then_some(build!(ProduceResponseT {
        responses: Some(by_topic)
    }))
}
