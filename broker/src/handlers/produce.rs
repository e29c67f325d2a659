//! Produce: split by partition, route each share to its owning core (concurrently), gather.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use spool_protocol::payload;
use spool_protocol::wire::{
    self, PartitionProduceResponseT, ProduceRequestT, ProduceResponseT, TopicProduceResponseT,
};
use spool_protocol::ErrorCode;

use crate::mesh::{Reply, Request};
use crate::requests::{ProducePartition, ProduceResult, TopicPartition};
use crate::shard::Shard;

/// Returns `None` for acks=0 (the client expects no response).
pub async fn handle(
    shard: &Rc<Shard>,
    req: ProduceRequestT,
    frame_payload: &Bytes,
) -> Option<ProduceResponseT> {
    let started = Instant::now();
    let acks = req.acks;
    let valid_acks = (-1..=1).contains(&acks);
    let mut calls = Vec::new();
    let mut bytes = 0u64;
    for topic in req.topics.unwrap_or_default() {
        for p in topic.partitions.unwrap_or_default() {
            let tp = TopicPartition::new(topic.name.clone(), p.index);
            let records = payload::slice(frame_payload, &p.records);
            let me = Rc::clone(shard);
            let task = glommio::spawn_local(async move {
                let result = match records {
                    _ if !valid_acks => ProduceResult::error(
                        ErrorCode::InvalidRequiredAcks,
                        format!("acks must be 0, 1 or -1, got {acks}"),
                    ),
                    Err(e) => ProduceResult::error(ErrorCode::CorruptMessage, e.to_string()),
                    Ok(records) => {
                        produce_one(&me, tp.clone(), records, acks, req.timeout_ms).await
                    }
                };
                (tp, result)
            });
            bytes += u64::from(p.records.length);
            calls.push(task);
        }
    }
    let mut by_topic: Vec<TopicProduceResponseT> = Vec::new();
    let mut errors = 0;
    for call in calls {
        let (tp, r) = call.await;
        if r.error != ErrorCode::None {
            errors += 1;
        }
        let part = build!(PartitionProduceResponseT {
            index: tp.partition,
            error_code: wire::ErrorCode::from(r.error),
            base_offset: r.base_offset,
            log_append_time_ms: -1,
            log_start_offset: r.log_start_offset,
            record_errors: None,
            error_message: r.message,
        });
        match by_topic.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.partitions.get_or_insert_with(Vec::new).push(part),
            None => by_topic.push(build!(TopicProduceResponseT {
                name: tp.topic,
                partitions: Some(vec![part])
            })),
        }
    }
    shard
        .metrics
        .record_produce(bytes, started.elapsed().as_micros() as u64);
    crate::metrics::CoreMetrics::add(&shard.metrics.request_errors, errors);
    (acks != 0).then_some(build!(ProduceResponseT {
        responses: Some(by_topic)
    }))
}

async fn produce_one(
    shard: &Rc<Shard>,
    tp: TopicPartition,
    records: Bytes,
    acks: i16,
    timeout_ms: i32,
) -> ProduceResult {
    let Some(count) = super::partition_count(shard, &tp.topic) else {
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
