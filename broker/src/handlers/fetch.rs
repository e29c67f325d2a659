//! Fetch on the native front: the long poll and the `max_bytes` rule are [`crate::ops::fetch`]'s
//! (shared with the Kafka front); this file only translates the request and places each
//! partition's bytes in the response payload. Only bytes below the high watermark are returned;
//! the response stays within `max_bytes` except that the first non-empty partition always gets
//! at least one batch (so a consumer always progresses).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use spool_protocol::wire::{
    self, FetchPartitionDataT, FetchRequestT, FetchResponseT, FetchableTopicResponseT,
    PayloadSliceT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::requests::{FetchChunk, FetchPartition, TopicPartition};
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: FetchRequestT) -> (FetchResponseT, Vec<FetchChunk>) {
    let started = Instant::now();
    let wanted: Vec<FetchPartition> = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic;
            t.partitions
                .unwrap_or_default()
                .into_iter()
                .map(move |p| FetchPartition {
                    tp: TopicPartition::new(topic.clone(), p.partition),
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                })
        })
        .collect();
    let results = crate::ops::fetch(
        shard,
        &wanted,
        req.max_wait_ms,
        req.min_bytes,
        req.max_bytes,
    )
    .await;
    let mut chunks = Vec::new();
    let mut offset = 0u64;
    let mut topics: BTreeMap<String, Vec<FetchPartitionDataT>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (want, r) in wanted.iter().zip(results) {
        let len = r.bytes();
        let records = (len > 0).then(|| {
            build!(PayloadSliceT {
                offset: offset as u32,
                length: len as u32
            })
        });
        offset += len;
        let data = build!(FetchPartitionDataT {
            partition_index: want.tp.partition,
            error_code: wire::ErrorCode::from(r.error),
            high_watermark: r.high_watermark,
            last_stable_offset: r.high_watermark,
            log_start_offset: r.log_start_offset,
            aborted_transactions: None,
            preferred_read_replica: -1,
            records: records,
        });
        chunks.extend(r.chunks);
        if !topics.contains_key(&want.tp.topic) {
            order.push(want.tp.topic.clone());
        }
        topics.entry(want.tp.topic.clone()).or_default().push(data);
    }
    shard
        .metrics
        .record_fetch(offset, started.elapsed().as_micros() as u64);
    let responses = order
        .into_iter()
        .map(|t| {
            let partitions = topics.remove(&t);
            build!(FetchableTopicResponseT {
                topic: t,
                partitions: partitions
            })
        })
        .collect();
    (
        build!(FetchResponseT {
            error_code: wire::ErrorCode::from(ErrorCode::None),
            responses: Some(responses)
        }),
        chunks,
    )
}
