//! Produce: split by partition, route each share to its owning core (concurrently), gather.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use spool_protocol::payload;
use spool_protocol::wire::{
    self, PartitionProduceResponseT, ProduceRequestT, ProduceResponseT, TopicProduceResponseT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::requests::{ProduceResult, TopicPartition};
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
                        crate::ops::produce_partition(
                            &me,
                            tp.clone(),
                            records,
                            acks,
                            req.timeout_ms,
                        )
                        .await
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
