//! Fetch with long polling: read every requested partition from its owner; if fewer than
//! `min_bytes` came back and `max_wait_ms` has not passed, ask the owners to wake us when one of
//! the partitions' high watermark moves past the fetch offset, and read again. Only bytes below
//! the high watermark are returned; the response stays within `max_bytes` except that the first
//! non-empty partition always gets at least one batch (so a consumer always progresses).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use spool_protocol::wire::{
    self, FetchPartitionDataT, FetchRequestT, FetchResponseT, FetchableTopicResponseT,
    PayloadSliceT,
};
use spool_protocol::ErrorCode;

use crate::mesh::{Reply, Request};
use crate::requests::{FetchChunk, FetchPartition, FetchResult, TopicPartition};
use crate::shard::Shard;

/// The longest a fetch may wait, whatever the client asks.
const MAX_WAIT_MS: u64 = 30_000;

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
    let max_wait_ms = (req.max_wait_ms.max(0) as u64).min(MAX_WAIT_MS);
    let deadline = started + Duration::from_millis(max_wait_ms);
    let min_bytes = req.min_bytes.max(0) as u64;
    let mut results = loop {
        let results = fetch_all(shard, &wanted).await;
        let bytes: u64 = results.iter().map(FetchResult::bytes).sum();
        let errors = results.iter().any(|r| r.error != ErrorCode::None);
        let now = Instant::now();
        if bytes >= min_bytes.max(1) || errors || now >= deadline || shard.stopping.get() {
            break results;
        }
        drop(results);
        wait_for_data(shard, &wanted, deadline - now).await;
    };
    // Trim to max_bytes, whole partitions at a time.
    let max_bytes = req.max_bytes.max(0) as u64;
    let mut total = 0u64;
    for r in results.iter_mut() {
        let b = r.bytes();
        if b == 0 {
            continue;
        }
        if total > 0 && total + b > max_bytes {
            r.chunks.clear();
        } else {
            total += b;
        }
    }
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

async fn fetch_all(shard: &Rc<Shard>, wanted: &[FetchPartition]) -> Vec<FetchResult> {
    let calls: Vec<_> = wanted
        .iter()
        .cloned()
        .map(|w| {
            let me = Rc::clone(shard);
            glommio::spawn_local(async move {
                if super::partition_count(&me, &w.tp.topic)
                    .is_none_or(|n| w.tp.partition < 0 || w.tp.partition >= n)
                {
                    return FetchResult::error(ErrorCode::UnknownTopicOrPartition);
                }
                let Some(owner) = me.owner(&w.tp) else {
                    return FetchResult::error(ErrorCode::LeaderNotAvailable);
                };
                match me.call(owner, Request::Fetch(w)).await {
                    Reply::Fetch(r) => r,
                    _ => FetchResult::error(ErrorCode::RequestTimedOut),
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

/// Returns when an owner reports new data for one of the partitions, or after `wait`.
async fn wait_for_data(shard: &Rc<Shard>, wanted: &[FetchPartition], wait: Duration) {
    let mut by_owner: BTreeMap<usize, Vec<(TopicPartition, i64)>> = BTreeMap::new();
    for w in wanted {
        if let Some(owner) = shard.owner(&w.tp) {
            by_owner
                .entry(owner)
                .or_default()
                .push((w.tp.clone(), w.fetch_offset));
        }
    }
    let timeout_ms = wait.as_millis() as u64;
    let (tx, rx) = glommio::channels::local_channel::new_bounded::<()>(by_owner.len().max(1));
    let tx = Rc::new(tx);
    for (owner, partitions) in by_owner {
        let me = Rc::clone(shard);
        let tx = Rc::clone(&tx);
        glommio::spawn_local(async move {
            let _ = me
                .call(
                    owner,
                    Request::Watch {
                        partitions,
                        timeout_ms,
                    },
                )
                .await;
            let _ = tx.try_send(());
        })
        .detach();
    }
    let timer = glommio::timer::sleep(wait);
    let data_or_timeout = futures_lite::future::or(
        async {
            let _ = rx.recv().await;
        },
        timer,
    );
    // A shutdown answers every waiting fetch with what it has.
    futures_lite::future::or(data_or_timeout, async {
        let _: Option<()> = shard.stopped_signal().await;
    })
    .await;
}
