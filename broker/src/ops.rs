//! The front-independent operations both request fronts (native flatbuffers, Kafka wire) call:
//! each takes the broker's internal requests (`crate::requests`), routes them to the owning cores
//! through the [`Shard`], and returns internal results the front encodes its own way. A rule that
//! decides what a request means (unknown partition, min.insync.replicas, long-poll, max_bytes)
//! lives here once, so the two fronts cannot drift apart.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use spool_protocol::ErrorCode;

use crate::mesh::{ControllerOp, Reply, Request, TopicOutcome};
use crate::requests::{
    FetchPartition, FetchResult, ListOffsetsPartition, ListOffsetsResult, ProducePartition,
    ProduceResult, TopicPartition,
};
use crate::shard::Shard;

/// The longest a fetch may wait, whatever the client asks.
pub const FETCH_MAX_WAIT_MS: u64 = 30_000;

/// Partitions of `topic` in this core's metadata image.
pub fn partition_count(shard: &Shard, topic: &str) -> Option<i32> {
    shard
        .image
        .borrow()
        .topic(topic)
        .map(|t| t.partitions.len() as i32)
}

/// Appends one partition's batches on its owner core.
pub async fn produce_partition(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> ProduceResult {
    let Some(count) = partition_count(shard, &tp.topic) else {
        return ProduceResult::error(
            ErrorCode::UnknownTopicOrPartition,
            format!("unknown topic {}", tp.topic),
        );
    };
    if tp.partition < 0 || tp.partition >= count {
        return ProduceResult::error(
            ErrorCode::UnknownTopicOrPartition,
            format!(
                "topic {} has {count} partitions, not {}",
                tp.topic, tp.partition
            ),
        );
    }
    if acks == -1 {
        // min.insync.replicas, capped by the replication factor: a topic of one replica accepts
        // acks=all from its leader alone (the single-node case).
        let image = shard.image.borrow();
        if let Some(t) = image.topic(&tp.topic) {
            let p = &t.partitions[tp.partition as usize];
            let min_isr = t.config_i64("min.insync.replicas").unwrap_or(2).max(1) as usize;
            if p.isr.len() < min_isr.min(p.replicas.len().max(1)) {
                return ProduceResult::error(
                    ErrorCode::NotEnoughReplicas,
                    format!("{tp}: ISR {:?} below min.insync.replicas", p.isr),
                );
            }
        }
    }
    let Some(owner) = shard.owner(&tp) else {
        return ProduceResult::error(
            ErrorCode::LeaderNotAvailable,
            format!("{tp} is not open yet"),
        );
    };
    let request = Request::Produce(ProducePartition {
        tp,
        records,
        acks,
        timeout_ms,
    });
    match shard.call(owner, request).await {
        Reply::Produce(r) => r,
        other => ProduceResult::error(ErrorCode::RequestTimedOut, format!("{other:?}")),
    }
}

/// A fetch with long polling: reads every partition from its owner; if fewer than `min_bytes`
/// came back and `max_wait_ms` has not passed, waits for one of the partitions' high watermark to
/// move past its fetch offset and reads again. The results (in `wanted` order) stay within
/// `max_bytes`, whole partitions at a time, except that the first non-empty partition always
/// keeps at least its first batch (so a consumer always progresses).
pub async fn fetch(
    shard: &Rc<Shard>,
    wanted: &[FetchPartition],
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
) -> Vec<FetchResult> {
    let started = Instant::now();
    let max_wait_ms = (max_wait_ms.max(0) as u64).min(FETCH_MAX_WAIT_MS);
    let deadline = started + Duration::from_millis(max_wait_ms);
    let min_bytes = min_bytes.max(0) as u64;
    let mut results = loop {
        let results = fetch_all(shard, wanted).await;
        let bytes: u64 = results.iter().map(FetchResult::bytes).sum();
        let errors = results.iter().any(|r| r.error != ErrorCode::None);
        let now = Instant::now();
        if bytes >= min_bytes.max(1) || errors || now >= deadline || shard.stopping.get() {
            break results;
        }
        drop(results);
        wait_for_data(shard, wanted, deadline - now).await;
    };
    let max_bytes = max_bytes.max(0) as u64;
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
    results
}

async fn fetch_all(shard: &Rc<Shard>, wanted: &[FetchPartition]) -> Vec<FetchResult> {
    let calls: Vec<_> = wanted
        .iter()
        .cloned()
        .map(|w| {
            let me = Rc::clone(shard);
            glommio::spawn_local(async move {
                if partition_count(&me, &w.tp.topic)
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

/// ListOffsets for one partition (-2 earliest, -1 latest, otherwise a timestamp in ms).
pub async fn list_offsets_partition(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    timestamp: i64,
) -> ListOffsetsResult {
    let failed = |error| ListOffsetsResult {
        error,
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
    };
    let Some(owner) = shard.owner(&tp) else {
        return failed(ErrorCode::UnknownTopicOrPartition);
    };
    match shard
        .call(
            owner,
            Request::ListOffsets(ListOffsetsPartition { tp, timestamp }),
        )
        .await
    {
        Reply::ListOffsets(r) => r,
        _ => failed(ErrorCode::RequestTimedOut),
    }
}

/// Runs a metadata change on the controller (core 0); one outcome per name, in order.
pub async fn controller(
    shard: &Rc<Shard>,
    op: ControllerOp,
    names: &[String],
) -> Vec<TopicOutcome> {
    match shard.call(0, Request::Controller(op)).await {
        Reply::Controller(outcomes) if outcomes.len() == names.len() => outcomes,
        other => {
            let message = format!("controller unavailable: {other:?}");
            names
                .iter()
                .map(|n| TopicOutcome {
                    name: n.clone(),
                    error: ErrorCode::NotController,
                    message: Some(message.clone()),
                })
                .collect()
        }
    }
}
