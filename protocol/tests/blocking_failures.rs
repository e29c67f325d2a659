//! The blocking clients against a misbehaving fake broker: retriable errors are retried,
//! NOT_LEADER_OR_FOLLOWER refreshes metadata and follows the new leader, a lost acknowledgement is
//! retried without duplicating (idempotence), a malformed response frame costs a reconnect and
//! nothing else, non-retriable errors fail the records, and a full buffer makes `send` wait.
//! Conditions are awaited, never slept for.

mod support;

use std::time::{Duration, Instant};

use spool_protocol::client::blocking::{Consumer, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ClientError, ProducerRecord, TopicPartition};
use spool_protocol::wire::ApiKey;
use spool_protocol::ErrorCode;
use support::{FakeCluster, Fault};

fn fast_retries() -> ProducerConfig {
    ProducerConfig {
        retry_backoff_ms: 5,
        retry_backoff_max_ms: 20,
        ..ProducerConfig::default()
    }
}

fn values(cluster: &FakeCluster, topic: &str, partition: i32) -> Vec<(i64, String)> {
    cluster
        .records(topic, partition)
        .into_iter()
        .map(|(o, r)| (o, String::from_utf8(r.value.unwrap().to_vec()).unwrap()))
        .collect()
}

/// Waits for a condition outside the fake cluster's state (a fuse, not a timing assertion).
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn retriable_error_is_retried_until_it_succeeds() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    cluster.inject(Fault {
        api: ApiKey::Produce,
        topic: "t".into(),
        partition: 0,
        error: ErrorCode::NotEnoughReplicas,
        remaining: 3,
    });
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    let md = producer
        .send(ProducerRecord::new("t", "v0"))
        .unwrap()
        .wait()
        .expect("delivered after retries");
    assert_eq!((md.partition, md.offset), (0, 0));
    assert_eq!(producer.stats().batch_retries, 3);
    assert_eq!(values(&cluster, "t", 0), vec![(0, "v0".to_owned())]);
}

#[test]
fn non_retriable_error_fails_the_records() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    cluster.inject(Fault {
        api: ApiKey::Produce,
        topic: "t".into(),
        partition: 0,
        error: ErrorCode::MessageTooLarge,
        remaining: 1,
    });
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    let err = producer
        .send(ProducerRecord::new("t", "v0"))
        .unwrap()
        .wait()
        .unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::MessageTooLarge));
    // The producer carries on (with a fresh producer id) for later records.
    let md = producer
        .send(ProducerRecord::new("t", "v1"))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(md.offset, 0);
}

#[test]
fn retries_run_out() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    cluster.inject(Fault {
        api: ApiKey::Produce,
        topic: "t".into(),
        partition: 0,
        error: ErrorCode::RequestTimedOut,
        remaining: 100,
    });
    let config = ProducerConfig {
        retries: 2,
        ..fast_retries()
    };
    let producer = Producer::new(&cluster.bootstrap(), config).unwrap();
    let err = producer
        .send(ProducerRecord::new("t", "v0"))
        .unwrap()
        .wait()
        .unwrap_err();
    assert_eq!(err.error_code(), Some(ErrorCode::RequestTimedOut));
    assert_eq!(producer.stats().batch_retries, 2);
    assert_eq!(cluster.state().produce_requests, 3);
}

#[test]
fn not_leader_refreshes_metadata_and_follows_the_leader() {
    let cluster = FakeCluster::start(2);
    cluster.create_topic("t", 1, 0);
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    assert_eq!(
        producer
            .send(ProducerRecord::new("t", "a"))
            .unwrap()
            .wait()
            .unwrap()
            .offset,
        0
    );
    let metadata_before = cluster.state().metadata_requests;

    // Leadership moves to broker 1; broker 0 now answers NOT_LEADER_OR_FOLLOWER.
    cluster.set_leader("t", 0, 1);
    let md = producer
        .send(ProducerRecord::new("t", "b"))
        .unwrap()
        .wait()
        .expect("delivered via the new leader");
    assert_eq!(md.offset, 1);
    assert!(
        cluster.state().metadata_requests > metadata_before,
        "metadata was refreshed"
    );
    assert!(producer.stats().batch_retries >= 1);
    assert_eq!(
        values(&cluster, "t", 0),
        vec![(0, "a".to_owned()), (1, "b".to_owned())]
    );

    // The consumer follows the leader the same way.
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 100,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(&cluster.bootstrap(), config).unwrap();
    let tp = TopicPartition::new("t", 0);
    consumer.assign([tp.clone()]);
    let mut got = Vec::new();
    while got.len() < 2 {
        got.extend(consumer.poll(30_000).unwrap());
    }
    cluster.set_leader("t", 0, 0);
    producer
        .send(ProducerRecord::new("t", "c"))
        .unwrap()
        .wait()
        .unwrap();
    while got.len() < 3 {
        got.extend(consumer.poll(30_000).unwrap());
    }
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

#[test]
fn unknown_topic_waits_for_the_topic() {
    let cluster = FakeCluster::start(1);
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    let f = producer.send(ProducerRecord::new("later", "v")).unwrap();
    cluster.wait_until("a metadata request for the unknown topic", |s| {
        s.metadata_requests >= 1
    });
    cluster.create_topic("later", 1, 0);
    assert_eq!(f.wait().unwrap().offset, 0);
}

#[test]
fn lost_acknowledgement_is_retried_without_duplicates() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    producer
        .send(ProducerRecord::new("t", "first"))
        .unwrap()
        .wait()
        .unwrap();
    // The broker appends the next batch, then drops the connection before answering.
    cluster.update(|s| s.drop_after_next_produce = true);
    let md = producer
        .send(ProducerRecord::new("t", "second"))
        .unwrap()
        .wait()
        .expect("delivered after reconnect");
    assert_eq!(md.offset, 1, "the retry got its original offset");
    assert_eq!(
        values(&cluster, "t", 0),
        vec![(0, "first".to_owned()), (1, "second".to_owned())]
    );
    assert!(producer.stats().batch_retries >= 1);
}

#[test]
fn malformed_response_frame_reconnects_and_retries() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    producer
        .send(ProducerRecord::new("t", "first"))
        .unwrap()
        .wait()
        .unwrap();
    cluster.update(|s| s.garbage_next_response = true);
    let md = producer
        .send(ProducerRecord::new("t", "second"))
        .unwrap()
        .wait()
        .expect("delivered");
    assert_eq!(md.offset, 1);
    assert_eq!(
        values(&cluster, "t", 0).len(),
        2,
        "idempotence kept the retry from duplicating"
    );
}

#[test]
fn full_buffer_makes_send_wait_until_deliveries_free_room() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    cluster.update(|s| s.produce_gate_closed = true);
    let buffer_bytes = 4096;
    let config = ProducerConfig {
        buffer_bytes,
        linger_ms: 0,
        batch_bytes: 1024,
        ..fast_retries()
    };
    let producer = std::sync::Arc::new(Producer::new(&cluster.bootstrap(), config).unwrap());
    let sender = {
        let producer = producer.clone();
        std::thread::spawn(move || {
            let fs: Vec<_> = (0..200)
                .map(|i| {
                    producer
                        .send(ProducerRecord::new("t", format!("{i:0>100}")))
                        .expect("send")
                })
                .collect();
            fs.into_iter()
                .map(|f| f.wait().expect("delivered").offset)
                .collect::<Vec<_>>()
        })
    };
    // The sender fills the buffer and blocks while the broker holds the produce request.
    cluster.wait_until("a held produce request", |s| s.produces_held >= 1);
    eventually("send to wait for room", || producer.send_waits() >= 1);
    assert!(producer.buffered_bytes() <= buffer_bytes);
    assert!(!sender.is_finished());
    assert!(
        cluster.records("t", 0).is_empty(),
        "nothing acknowledged yet"
    );

    cluster.update(|s| s.produce_gate_closed = false);
    let offsets = sender.join().unwrap();
    assert_eq!(
        offsets,
        (0..200).collect::<Vec<i64>>(),
        "in order, once each"
    );
    assert_eq!(producer.buffered_bytes(), 0);
}

#[test]
fn try_send_reports_a_full_buffer_and_oversize_records_are_refused() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    cluster.update(|s| s.produce_gate_closed = true);
    let config = ProducerConfig {
        buffer_bytes: 1000,
        linger_ms: 0,
        acks: Acks::All,
        ..fast_retries()
    };
    let producer = Producer::new(&cluster.bootstrap(), config).unwrap();
    let big = ProducerRecord::new("t", vec![0u8; 2000]);
    assert!(matches!(
        producer.send(big),
        Err(ClientError::RecordTooLarge { .. })
    ));
    let mut accepted = Vec::new();
    loop {
        match producer.try_send(ProducerRecord::new("t", vec![1u8; 100])) {
            Ok(f) => accepted.push(f),
            Err(ClientError::BufferFull { buffer_bytes }) => {
                assert_eq!(buffer_bytes, 1000);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(accepted.len(), 1000 / 121);
    cluster.update(|s| s.produce_gate_closed = false);
    for f in accepted {
        f.wait().unwrap();
    }
}

#[test]
fn consumer_reconnects_after_losing_a_fetch_and_misses_nothing() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    let producer = Producer::new(&cluster.bootstrap(), fast_retries()).unwrap();
    for i in 0..5 {
        producer
            .send(ProducerRecord::new("t", format!("a{i}")))
            .unwrap();
    }
    producer.flush(30_000).unwrap();
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 100,
        retry_backoff_ms: 5,
        ..ConsumerConfig::default()
    };
    // The consumer's first fetch is answered by a dropped connection.
    cluster.update(|s| s.drop_next_fetch = true);
    let mut consumer = Consumer::new(&cluster.bootstrap(), config).unwrap();
    consumer.assign([TopicPartition::new("t", 0)]);
    let mut got = Vec::new();
    while got.len() < 5 {
        got.extend(consumer.poll(30_000).unwrap());
    }
    assert!(
        !cluster.state().drop_next_fetch,
        "a fetch was dropped before any record arrived"
    );
    for i in 5..10 {
        producer
            .send(ProducerRecord::new("t", format!("a{i}")))
            .unwrap();
    }
    producer.flush(30_000).unwrap();
    while got.len() < 10 {
        got.extend(consumer.poll(30_000).unwrap());
    }
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..10).collect::<Vec<i64>>()
    );
}
