//! Fetch on the native front: the long poll, the `max_bytes` rule and the metrics are
//! [`crate::front_rules::fetch`]'s (shared with the Kafka front); this file only translates the
//! request and places each partition's bytes in the response payload. Only bytes below the high
//! watermark are returned; the response stays within `max_bytes` except that the first non-empty
//! partition always gets at least one batch (so a consumer always progresses).

use std::rc::Rc;

use spool_protocol::wire::{
    self, FetchPartitionDataT, FetchRequestT, FetchResponseT, FetchableTopicResponseT,
    PayloadSliceT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::{self, build, FetchAt};
use crate::requests::FetchChunk;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: FetchRequestT) -> (FetchResponseT, Vec<FetchChunk>) {
    let topics = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .unwrap_or_default()
                .into_iter()
                .map(|p| FetchAt {
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    // The native Fetch carries no leader epoch.
                    current_leader_epoch: None,
                })
                .collect();
            (t.topic, partitions)
        })
        .collect();
    let read_committed = req.isolation_level == wire::IsolationLevel::ReadCommitted;
    let results = front_rules::fetch(
        shard,
        topics,
        req.max_wait_ms,
        req.min_bytes,
        req.max_bytes,
        read_committed,
    )
    .await;
    let mut chunks = Vec::new();
    let mut offset = 0u64;
    let mut responses: Vec<FetchableTopicResponseT> = Vec::new();
    for (topic, partitions) in results {
        let mut data = Vec::with_capacity(partitions.len());
        for (partition, r) in partitions {
            let len = r.bytes();
            let records = (len > 0).then(|| {
                build!(PayloadSliceT {
                    offset: offset as u32,
                    length: len as u32
                })
            });
            offset += len;
            data.push(build!(FetchPartitionDataT {
                partition_index: partition,
                error_code: wire::ErrorCode::from(r.error),
                high_watermark: r.high_watermark,
                last_stable_offset: front_rules::last_stable_offset(&r),
                log_start_offset: r.log_start_offset,
                aborted_transactions: read_committed.then(|| {
                    r.aborted
                        .iter()
                        .map(|&(producer_id, first_offset)| wire::AbortedTransactionT {
                            producer_id,
                            first_offset,
                        })
                        .collect()
                }),
                preferred_read_replica: -1,
                records: records,
            }));
            chunks.extend(r.chunks);
        }
        // A topic named twice in the request is answered once, its partitions together.
        match responses.iter_mut().find(|t| t.topic == topic) {
            Some(t) => t.partitions.get_or_insert_with(Vec::new).extend(data),
            None => responses.push(build!(FetchableTopicResponseT {
                topic: topic,
                partitions: Some(data)
            })),
        }
    }
    (
        build!(FetchResponseT {
            error_code: wire::ErrorCode::from(ErrorCode::None),
            responses: Some(responses)
        }),
        chunks,
    )
}
