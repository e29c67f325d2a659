//! The native client library (`spool_protocol::client::blocking`) set up for tests: topics
//! created and checked, producers with bounded timeouts, and consuming until a condition holds or
//! a deadline passes.

use std::time::{Duration, Instant};

use spool_protocol::client::admin::{AdminConfig, NewTopic};
use spool_protocol::client::blocking::{Admin, Consumer, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ConsumerRecord, TopicPartition};

use crate::broker::Broker;

/// Bound on any one client operation; far above what an idle machine needs.
pub const OPERATION_TIMEOUT_MS: u64 = 30_000;

pub fn admin(broker: &Broker) -> Admin {
    let config = AdminConfig {
        request_timeout_ms: OPERATION_TIMEOUT_MS,
        operation_timeout_ms: OPERATION_TIMEOUT_MS,
        ..AdminConfig::default()
    };
    Admin::new(&[&broker.bootstrap()], config).expect("an admin client")
}

/// Creates `name` with `partitions` partitions (one replica); panics unless it was created.
pub fn create_topic(broker: &Broker, name: &str, partitions: i32) {
    create_topic_rf(broker, name, partitions, 1)
}

/// [`create_topic`] with `replication_factor` replicas per partition.
pub fn create_topic_rf(broker: &Broker, name: &str, partitions: i32, replication_factor: i16) {
    let results = admin(broker)
        .create_topics(vec![NewTopic::new(name, partitions, replication_factor)])
        .unwrap_or_else(|e| panic!("create topic {name}: {e}\n{}", broker.log_tail()));
    for (topic, r) in results {
        r.unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    }
}

/// A producer with `acks` and timeouts short enough that a dead broker fails a test instead of
/// hanging it.
pub fn producer(broker: &Broker, acks: Acks) -> Producer {
    Producer::new(&[&broker.bootstrap()], producer_config(acks)).expect("a producer")
}

pub fn producer_config(acks: Acks) -> ProducerConfig {
    ProducerConfig {
        acks,
        request_timeout_ms: OPERATION_TIMEOUT_MS,
        delivery_timeout_ms: OPERATION_TIMEOUT_MS * 2,
        max_block_ms: OPERATION_TIMEOUT_MS,
        ..ProducerConfig::default()
    }
}

/// A consumer reading `partitions` of `topic` from the earliest offset.
pub fn consumer_from_earliest(broker: &Broker, topic: &str, partitions: i32) -> Consumer {
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 200,
        request_timeout_ms: OPERATION_TIMEOUT_MS,
        ..ConsumerConfig::default()
    };
    let mut c = Consumer::new(&[&broker.bootstrap()], config).expect("a consumer");
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    c.assign(tps.clone());
    for tp in &tps {
        c.seek(tp, SeekTo::Earliest)
            .expect("seeking an assigned partition");
    }
    c
}

/// Reads `topic` back and checks it holds exactly `at`: the value the producer was told each
/// (partition, offset) got, no record more or fewer.
pub fn assert_reads_back(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    at: &std::collections::BTreeMap<(i32, i64), String>,
) {
    let read = consume_until(broker, topic, partitions, Duration::from_secs(60), |r| {
        r.len() >= at.len()
    });
    assert_eq!(read.len(), at.len(), "nothing more, nothing less");
    for r in &read {
        let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
        assert_eq!(
            at.get(&(r.partition, r.offset)),
            Some(&value),
            "partition {} offset {}",
            r.partition,
            r.offset
        );
    }
}

/// Reads `partitions` of `topic` from the beginning, in the order the consumer returns them, until
/// `done(records so far)` holds. Panics with what it has when `timeout` passes first.
pub fn consume_until(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    timeout: Duration,
    mut done: impl FnMut(&[ConsumerRecord]) -> bool,
) -> Vec<ConsumerRecord> {
    let mut consumer = consumer_from_earliest(broker, topic, partitions);
    let deadline = Instant::now() + timeout;
    let mut records = Vec::new();
    while !done(&records) {
        let now = Instant::now();
        assert!(
            now < deadline,
            "consuming {topic}: condition not met after {timeout:?} with {} records\n{}",
            records.len(),
            broker.log_tail()
        );
        let wait_ms = (deadline - now).as_millis().min(1000) as u64;
        let batch = consumer
            .poll(wait_ms)
            .unwrap_or_else(|e| panic!("consuming {topic}: {e}\n{}", broker.log_tail()));
        records.extend(batch);
    }
    records
}

/// The end offset (high watermark) of each of `partitions` of `topic`, in partition order.
pub fn end_offsets(broker: &Broker, topic: &str, partitions: i32) -> Vec<i64> {
    let mut c = consumer_from_earliest(broker, topic, partitions);
    (0..partitions)
        .map(|p| {
            let tp = TopicPartition::new(topic, p);
            c.seek(&tp, SeekTo::Latest)
                .expect("seeking an assigned partition");
            c.position(&tp, OPERATION_TIMEOUT_MS)
                .unwrap_or_else(|e| panic!("end offset of {tp}: {e}\n{}", broker.log_tail()))
        })
        .collect()
}
