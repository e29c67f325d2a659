//! The front-independent operations both request fronts (native flatbuffers, Kafka wire) call:
//! each takes the broker's internal requests (`crate::requests`), routes them to the owning cores
//! through the [`Shard`], and returns internal results the front encodes its own way. A rule that
//! decides what a request means (unknown partition, min.insync.replicas, long-poll, max_bytes)
//! lives here or in `spool-core` once, so the two fronts cannot drift apart.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use spool_core::fetch_wait::{self, FetchWait, Next};
use spool_protocol::ErrorCode;

use crate::requests::{
    ControllerOp, EpochEndAnswer, EpochEndQuery, FetchPartition, FetchResult, ListOffsetsPartition,
    ListOffsetsResult, ProducePartition, ProduceResult, TopicOutcome, TopicPartition,
    WatchPartitions,
};
use crate::shard::Shard;

/// Partitions of `topic` in this core's metadata image.
pub fn partition_count(shard: &Shard, topic: &str) -> Option<i32> {
    shard.partition_count(topic)
}

/// Appends one partition's batches on its owner core (`transactional_id`: the request's, which
/// a transactional batch needs for its KIP-890 check).
pub async fn produce_partition(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
    transactional_id: Option<String>,
) -> ProduceResult {
    let Some(count) = shard.partition_count(&tp.topic) else {
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
    if let Some(code) = shard.not_leader(&tp) {
        return ProduceResult::error(
            code,
            format!("broker {} does not lead {tp}", shard.config.node_id),
        );
    }
    if acks == -1 {
        if let Some(refused) = below_min_isr(shard, &tp) {
            return refused;
        }
    }
    let Some(owner) = shard.owner(&tp) else {
        return ProduceResult::error(
            ErrorCode::LeaderNotAvailable,
            format!("{tp} is not open yet"),
        );
    };
    let request = ProducePartition {
        tp,
        records,
        acks,
        timeout_ms,
        transactional_id,
    };
    shard
        .call(owner, request)
        .await
        .unwrap_or_else(|e| ProduceResult::error(ErrorCode::RequestTimedOut, e.to_string()))
}

/// acks=all needs `min.insync.replicas` (capped by the replication factor) in the ISR.
fn below_min_isr(shard: &Shard, tp: &TopicPartition) -> Option<ProduceResult> {
    let image = shard.image.borrow();
    let t = image.topic(&tp.topic)?;
    let p = t.partitions.get(usize::try_from(tp.partition).ok()?)?;
    let required = t
        .config
        .resolve(&shard.config.topic_defaults)
        .required_isr(p.replicas.len());
    (p.isr.len() < required).then(|| {
        ProduceResult::error(
            ErrorCode::NotEnoughReplicas,
            format!(
                "{tp}: ISR {:?} below min.insync.replicas ({required})",
                p.isr
            ),
        )
    })
}

/// A fetch with long polling: reads every partition from its owner; if fewer than `min_bytes`
/// came back and `max_wait_ms` has not passed, waits for one of the partitions' high watermark to
/// move past its fetch offset and reads again (`spool_core::fetch_wait` decides). The results (in
/// `wanted` order) stay within `max_bytes`, whole partitions at a time, except that the first
/// non-empty partition always keeps its data (so a consumer always progresses).
pub async fn fetch(
    shard: &Rc<Shard>,
    wanted: &[FetchPartition],
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
) -> Vec<FetchResult> {
    // `--fetch-max-bytes` (Kafka's fetch.max.bytes) caps what any one request may ask for.
    let max_bytes = max_bytes.min(shard.config.fetch_max_bytes);
    let wait = FetchWait::new(crate::clock::monotonic_ms(), max_wait_ms, min_bytes);
    let mut results = loop {
        let results = fetch_all(shard, wanted).await;
        let bytes: u64 = results.iter().map(FetchResult::bytes).sum();
        let errors = results.iter().any(|r| r.error != ErrorCode::None);
        let now_ms = crate::clock::monotonic_ms();
        match wait.next(bytes, errors, shard.stopping.get(), now_ms) {
            Next::Answer => break results,
            Next::Wait { wait_ms } => {
                drop(results);
                wait_for_data(shard, wanted, wait_ms).await;
            }
        }
    };
    let sizes: Vec<u64> = results.iter().map(FetchResult::bytes).collect();
    for (r, keep) in results
        .iter_mut()
        .zip(fetch_wait::keep_within(max_bytes, &sizes))
    {
        if !keep {
            r.chunks.clear();
        }
    }
    results
}

async fn fetch_all(shard: &Rc<Shard>, wanted: &[FetchPartition]) -> Vec<FetchResult> {
    let calls: Vec<_> = wanted
        .iter()
        .cloned()
        .map(|mut w| {
            w.max_bytes = w.max_bytes.min(shard.config.fetch_max_bytes);
            let me = Rc::clone(shard);
            glommio::spawn_local(async move {
                if me
                    .partition_count(&w.tp.topic)
                    .is_none_or(|n| w.tp.partition < 0 || w.tp.partition >= n)
                {
                    return FetchResult::error(ErrorCode::UnknownTopicOrPartition);
                }
                if let Some(code) = me.not_leader(&w.tp) {
                    return FetchResult::error(code);
                }
                let Some(owner) = me.owner(&w.tp) else {
                    return FetchResult::error(ErrorCode::LeaderNotAvailable);
                };
                me.call(owner, w)
                    .await
                    .unwrap_or_else(|_| FetchResult::error(ErrorCode::RequestTimedOut))
            })
        })
        .collect();
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        out.push(c.await);
    }
    out
}

/// Returns when an owner reports new data for one of the partitions, or after `wait_ms`.
async fn wait_for_data(shard: &Rc<Shard>, wanted: &[FetchPartition], wait_ms: u64) {
    let mut by_owner: BTreeMap<usize, Vec<(TopicPartition, i64)>> = BTreeMap::new();
    for w in wanted {
        if let Some(owner) = shard.owner(&w.tp) {
            by_owner
                .entry(owner)
                .or_default()
                .push((w.tp.clone(), w.fetch_offset));
        }
    }
    let (tx, rx) = glommio::channels::local_channel::new_bounded::<()>(by_owner.len().max(1));
    let tx = Rc::new(tx);
    for (owner, partitions) in by_owner {
        let me = Rc::clone(shard);
        let tx = Rc::clone(&tx);
        glommio::spawn_local(async move {
            let watch = WatchPartitions {
                partitions,
                timeout_ms: wait_ms,
            };
            let _ = me.call(owner, watch).await;
            let _ = tx.try_send(());
        })
        .detach();
    }
    let timer = glommio::timer::sleep(Duration::from_millis(wait_ms));
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

/// ListOffsets for one partition (-2 earliest, -1 latest, otherwise a timestamp in ms); with
/// `read_committed`, latest is the last stable offset.
pub async fn list_offsets_partition(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    timestamp: i64,
    read_committed: bool,
) -> ListOffsetsResult {
    let failed = |error| ListOffsetsResult {
        error,
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
    };
    if let Some(code) = shard.not_leader(&tp) {
        return failed(code);
    }
    let Some(owner) = shard.owner(&tp) else {
        return failed(ErrorCode::UnknownTopicOrPartition);
    };
    shard
        .call(
            owner,
            ListOffsetsPartition {
                tp,
                timestamp,
                read_committed,
            },
        )
        .await
        .unwrap_or_else(|_| failed(ErrorCode::RequestTimedOut))
}

/// OffsetForLeaderEpoch for one partition, answered by its owner core on the leader.
pub async fn offset_for_leader_epoch(shard: &Rc<Shard>, query: EpochEndQuery) -> EpochEndAnswer {
    if shard
        .partition_count(&query.tp.topic)
        .is_none_or(|n| query.tp.partition < 0 || query.tp.partition >= n)
    {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    if let Some(code) = shard.not_leader(&query.tp) {
        return Err(code);
    }
    let Some(owner) = shard.owner(&query.tp) else {
        return Err(ErrorCode::LeaderNotAvailable);
    };
    shard
        .call(owner, query)
        .await
        .unwrap_or(Err(ErrorCode::RequestTimedOut))
}

/// Runs a metadata change on the controller (core 0); one outcome per name, in order.
pub async fn controller(
    shard: &Rc<Shard>,
    op: ControllerOp,
    names: &[String],
) -> Vec<TopicOutcome> {
    let message = match shard.call(0, op).await {
        Ok(outcomes) if outcomes.len() == names.len() => return outcomes,
        Ok(outcomes) => format!(
            "controller unavailable: {} outcomes for {} topics",
            outcomes.len(),
            names.len()
        ),
        Err(e) => format!("controller unavailable: {e}"),
    };
    names
        .iter()
        .map(|n| TopicOutcome {
            name: n.clone(),
            error: ErrorCode::NotController,
            message: Some(message.clone()),
        })
        .collect()
}
