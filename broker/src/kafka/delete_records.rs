//! DeleteRecords (API key 21, versions 0–2) on the Kafka port: the request's (topic, partition,
//! offset) triples handed to the front-independent [`crate::delete_records::delete_records`],
//! the answers put back in the request's shape (topics and partitions in request order).
//!
//! Promises: every partition the request names gets one answer, with Kafka's error code and
//! low watermark (-1 on error); nothing here decides what a DeleteRecords means.

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::requests::TopicPartition;
use crate::shard::Shard;

pub async fn delete_records(shard: &Rc<Shard>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let wanted: Vec<(TopicPartition, i64)> = req
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.0.as_str().to_owned();
            t.partitions.iter().map(move |p| {
                (
                    TopicPartition::new(name.clone(), p.partition_index),
                    p.offset,
                )
            })
        })
        .collect();
    let mut results = crate::delete_records::delete_records(shard, wanted, req.timeout_ms)
        .await
        .into_iter();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            // One result per pair, in order (the function's promise).
            let r = results.next().expect("a result per requested partition");
            parts.push(
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(r.low_watermark)
                    .with_error_code(r.error as i16),
            );
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
