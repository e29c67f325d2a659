//! The async (glommio) clients against the fake broker: admin, producer → consumer round trip,
//! a retriable error, and `send` waiting for buffer room. Each test runs inside one glommio
//! `LocalExecutor`, as the API requires.

mod support;

use std::time::{Duration, Instant};

use glommio::LocalExecutorBuilder;
use spool_protocol::client::admin::{AdminConfig, NewTopic};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::glommio_io::{Admin, Consumer, Producer};
use spool_protocol::client::partitioner::partition_for_key;
use spool_protocol::client::producer::ProducerConfig;
use spool_protocol::client::{ProducerRecord, TopicPartition};
use spool_protocol::wire::ApiKey;
use spool_protocol::ErrorCode;
use support::{FakeCluster, Fault};

fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    LocalExecutorBuilder::default()
        .name("client-test")
        .spawn(f)
        .expect("executor")
        .join()
        .expect("test task");
}

/// Async wait for a condition (a fuse against hangs, not a timing assertion).
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

#[test]
fn async_admin_produce_consume() {
    let cluster = FakeCluster::start(2);
    let bootstrap: Vec<String> = cluster.addrs.clone();
    run(move || async move {
        let boot: Vec<&str> = bootstrap.iter().map(String::as_str).collect();
        let mut admin = Admin::new(&boot, AdminConfig::default()).unwrap();
        assert!(admin
            .create_topics(vec![NewTopic::new("events", 2, 1)])
            .await
            .unwrap()[0]
            .1
            .is_ok());
        assert_eq!(
            admin.list_topics().await.unwrap(),
            vec!["events".to_owned()]
        );

        let producer = Producer::new(&boot, ProducerConfig::default()).unwrap();
        let mut futures = Vec::new();
        for i in 0..100 {
            let key = format!("k{}", i % 5);
            let rec = ProducerRecord::new("events", format!("v{i}")).with_key(key.clone());
            futures.push((key, producer.send(rec).await.unwrap()));
        }
        for (key, f) in futures {
            let md = f.await.unwrap();
            assert_eq!(md.partition, partition_for_key(key.as_bytes(), 2));
        }

        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            fetch_max_wait_ms: 100,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(&boot, config).unwrap();
        consumer.assign([
            TopicPartition::new("events", 0),
            TopicPartition::new("events", 1),
        ]);
        let mut got = Vec::new();
        while got.len() < 100 {
            let batch = consumer.poll(30_000).await.unwrap();
            assert!(!batch.is_empty());
            got.extend(batch);
        }
        let mut values: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
            .collect();
        values.sort();
        let mut expected: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
        expected.sort();
        assert_eq!(values, expected);

        let tp = TopicPartition::new("events", 0);
        consumer.seek(&tp, SeekTo::Latest).unwrap();
        let end = consumer.position(&tp, 10_000).await.unwrap();
        assert_eq!(end, got.iter().filter(|r| r.partition == 0).count() as i64);
        producer.close(10_000).await.unwrap();
    });
}

#[test]
fn async_producer_retries_and_waits_for_room() {
    let cluster = std::sync::Arc::new(FakeCluster::start(1));
    cluster.create_topic("t", 1, 0);
    cluster.inject(Fault {
        api: ApiKey::Produce,
        topic: "t".into(),
        partition: 0,
        error: ErrorCode::NotLeaderOrFollower,
        remaining: 1,
    });
    let c = cluster.clone();
    run(move || async move {
        let boot: Vec<&str> = c.bootstrap();
        let config = ProducerConfig {
            buffer_bytes: 2048,
            linger_ms: 0,
            batch_bytes: 512,
            retry_backoff_ms: 5,
            retry_backoff_max_ms: 20,
            ..ProducerConfig::default()
        };
        let producer = std::rc::Rc::new(Producer::new(&boot, config).unwrap());
        let md = producer
            .send(ProducerRecord::new("t", "first"))
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(md.offset, 0);
        assert_eq!(
            producer.stats().batch_retries,
            1,
            "NOT_LEADER_OR_FOLLOWER was retried"
        );

        // A malformed response frame: the connection is dropped and the batch retried.
        c.update(|s| s.garbage_next_response = true);
        let md = producer
            .send(ProducerRecord::new("t", "second"))
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(md.offset, 1);
        assert_eq!(c.records("t", 0).len(), 2, "retried without duplicating");

        c.update(|s| s.produce_gate_closed = true);
        let p = producer.clone();
        let sender = glommio::spawn_local(async move {
            let mut fs = Vec::new();
            for i in 0..100 {
                fs.push(
                    p.send(ProducerRecord::new("t", format!("{i:0>80}")))
                        .await
                        .unwrap(),
                );
            }
            let mut offsets = Vec::new();
            for f in fs {
                offsets.push(f.await.unwrap().offset);
            }
            offsets
        });
        eventually("a held produce", || c.state().produces_held >= 1).await;
        eventually("send to wait for room", || producer.send_waits() >= 1).await;
        assert!(producer.buffered_bytes() <= 2048);
        c.update(|s| s.produce_gate_closed = false);
        let offsets = sender.await;
        assert_eq!(offsets, (2..=101).collect::<Vec<i64>>());
    });
}

/// A fetch response of about a megabyte whose last 100 KB arrive after a pause, and then
/// nothing until the next request: the client's reader, which waits for large frames with a
/// receive mark, must still see each response whole (`spool_protocol::recv_lowat`).
#[test]
fn async_consumer_reads_large_responses_whose_end_comes_late() {
    let cluster = std::sync::Arc::new(FakeCluster::start(1));
    cluster.create_topic("big", 1, 0);
    let c = cluster.clone();
    run(move || async move {
        let boot: Vec<&str> = c.bootstrap();
        let producer = Producer::new(&boot, ProducerConfig::default()).unwrap();
        let value = vec![7u8; 1024];
        let mut acks = Vec::new();
        for _ in 0..2_000 {
            let rec = ProducerRecord::new("big", value.clone()).with_partition(0);
            acks.push(producer.send(rec).await.unwrap());
        }
        for a in acks {
            a.await.unwrap();
        }
        c.update(|s| s.paced_large_responses = true);
        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            fetch_max_wait_ms: 100,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(&boot, config).unwrap();
        consumer.assign([TopicPartition::new("big", 0)]);
        let mut got = 0usize;
        while got < 2_000 {
            // A response that never completes shows as an empty poll after the fuse.
            let batch = consumer.poll(30_000).await.unwrap();
            assert!(!batch.is_empty(), "a poll of 30 s got nothing after {got}");
            assert!(batch.iter().all(|r| r.value.as_deref() == Some(&value[..])));
            got += batch.len();
        }
        assert_eq!(got, 2_000);
        producer.close(10_000).await.unwrap();
    });
}
