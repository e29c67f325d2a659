//! Producer → fake broker → consumer round trips through the blocking API: keyed partitioning,
//! sticky keyless batches, acks 0 / 1 / all, zstd, seeks (offset, earliest, latest, timestamp) and
//! the admin calls.

mod support;

use bytes::Bytes;
use spool_protocol::client::admin::{AdminConfig, NewTopic};
use spool_protocol::client::blocking::{Admin, Consumer, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset};
use spool_protocol::client::partitioner::partition_for_key;
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ConsumerRecord, ProducerRecord, TopicPartition};
use spool_protocol::ErrorCode;
use spool_storage::batch::Compression;
use support::FakeCluster;

fn consume_all(consumer: &mut Consumer, want: usize) -> Vec<ConsumerRecord> {
    let mut got = Vec::new();
    while got.len() < want {
        let batch = consumer.poll(30_000).expect("poll");
        assert!(
            !batch.is_empty(),
            "no records within the poll timeout ({} of {want})",
            got.len()
        );
        got.extend(batch);
    }
    got
}

fn consumer_from_beginning(cluster: &FakeCluster, tps: &[TopicPartition]) -> Consumer {
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 200,
        ..ConsumerConfig::default()
    };
    let mut c = Consumer::new(&cluster.bootstrap(), config).expect("consumer");
    c.assign(tps.iter().cloned());
    c
}

fn round_trip(acks: Acks, compression: Compression) {
    let cluster = FakeCluster::start(2);
    let mut admin = Admin::new(&cluster.bootstrap(), AdminConfig::default()).expect("admin");
    let created = admin
        .create_topics(vec![NewTopic::new("orders", 3, 1)])
        .expect("create");
    assert_eq!(created, vec![("orders".to_owned(), Ok(()))]);

    let config = ProducerConfig {
        acks,
        compression,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(&cluster.bootstrap(), config).expect("producer");
    let mut futures = Vec::new();
    for i in 0..300 {
        let key = format!("key-{}", i % 17);
        let rec = ProducerRecord::new("orders", format!("value-{i}")).with_key(key.clone());
        futures.push((Some(key), i, producer.send(rec).expect("send")));
    }
    for i in 300..400 {
        futures.push((
            None,
            i,
            producer
                .send(ProducerRecord::new("orders", format!("value-{i}")))
                .expect("send"),
        ));
    }
    producer.flush(60_000).expect("flush");
    let mut delivered = Vec::new();
    for (key, i, f) in futures {
        let md = f.wait().expect("delivered");
        assert_eq!(&*md.topic, "orders");
        if let Some(k) = key {
            assert_eq!(
                md.partition,
                partition_for_key(k.as_bytes(), 3),
                "keyed records follow murmur2"
            );
        }
        if acks == Acks::None {
            assert_eq!(md.offset, -1);
        }
        delivered.push((i, md));
    }
    producer.close(10_000).expect("close");

    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("orders", p)).collect();
    let mut consumer = consumer_from_beginning(&cluster, &tps);
    let got = consume_all(&mut consumer, 400);
    assert_eq!(got.len(), 400);
    // Every value exactly once; within a partition, offsets are dense and in send order.
    let mut values: Vec<String> = got
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
        .collect();
    values.sort();
    let mut expected: Vec<String> = (0..400).map(|i| format!("value-{i}")).collect();
    expected.sort();
    assert_eq!(values, expected);
    for p in 0..3 {
        let offsets: Vec<i64> = got
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| r.offset)
            .collect();
        assert_eq!(offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
    }
    if acks != Acks::None {
        for (i, md) in &delivered {
            let r = got
                .iter()
                .find(|r| r.partition == md.partition && r.offset == md.offset)
                .expect("reported offset");
            assert_eq!(r.value.as_deref(), Some(format!("value-{i}").as_bytes()));
        }
    }
    for tp in &tps {
        assert_eq!(
            consumer.position(tp, 10_000).unwrap(),
            consumer.high_watermark(tp).unwrap()
        );
    }
}

#[test]
fn round_trip_acks_all() {
    round_trip(Acks::All, Compression::None);
}

#[test]
fn round_trip_acks_leader_zstd() {
    round_trip(Acks::Leader, Compression::Zstd);
}

#[test]
fn round_trip_acks_none() {
    round_trip(Acks::None, Compression::None);
}

#[test]
fn keyless_records_stick_to_a_partition_per_batch() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 4, 0);
    let producer =
        Producer::new(&cluster.bootstrap(), ProducerConfig::default()).expect("producer");
    let fs: Vec<_> = (0..20)
        .map(|i| {
            producer
                .send(ProducerRecord::new("t", format!("v{i}")))
                .unwrap()
        })
        .collect();
    producer.flush(30_000).unwrap();
    let partitions: Vec<i32> = fs
        .into_iter()
        .map(|f| f.wait().unwrap().partition)
        .collect();
    // 20 small records are far below batch_bytes: all on one partition.
    assert!(
        partitions.iter().all(|p| *p == partitions[0]),
        "{partitions:?}"
    );
}

#[test]
fn seek_to_offset_timestamp_earliest_latest() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("t", 1, 0);
    let producer =
        Producer::new(&cluster.bootstrap(), ProducerConfig::default()).expect("producer");
    for i in 0..10i64 {
        let rec = ProducerRecord::new("t", format!("v{i}"))
            .with_partition(0)
            .with_timestamp_ms(1_000 + i * 100);
        producer.send(rec).unwrap();
    }
    producer.flush(30_000).unwrap();
    let tp = TopicPartition::new("t", 0);
    let mut c = consumer_from_beginning(&cluster, std::slice::from_ref(&tp));

    c.seek(&tp, spool_protocol::client::consumer::SeekTo::Offset(7))
        .unwrap();
    assert_eq!(c.position(&tp, 10_000).unwrap(), 7);
    let got = consume_all(&mut c, 3);
    assert_eq!(
        got.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert_eq!(c.position(&tp, 10_000).unwrap(), 10);

    c.seek_to_timestamp(&tp, 1_450).unwrap();
    assert_eq!(
        c.position(&tp, 10_000).unwrap(),
        5,
        "first record with timestamp >= 1450"
    );
    let got = consume_all(&mut c, 5);
    assert_eq!(got[0].offset, 5);
    assert_eq!(got[0].timestamp_ms, 1_500);

    c.seek_to_beginning(&tp).unwrap();
    assert_eq!(c.position(&tp, 10_000).unwrap(), 0);
    assert_eq!(consume_all(&mut c, 10).len(), 10);

    c.seek_to_end(&tp).unwrap();
    assert_eq!(c.position(&tp, 10_000).unwrap(), 10);
    c.seek_to_timestamp(&tp, 99_999).unwrap();
    assert_eq!(
        c.position(&tp, 10_000).unwrap(),
        10,
        "no record that late: the end"
    );
    // Nothing new: a long poll returns empty.
    assert!(c.poll(300).unwrap().is_empty());
    // New data arrives while polling from the end.
    producer
        .send(ProducerRecord::new("t", "late").with_partition(0))
        .unwrap()
        .wait()
        .unwrap();
    let got = consume_all(&mut c, 1);
    assert_eq!(
        (got[0].offset, got[0].value.clone()),
        (10, Some(Bytes::from("late")))
    );
}

#[test]
fn admin_create_list_describe_delete() {
    let cluster = FakeCluster::start(2);
    let mut admin = Admin::new(&cluster.bootstrap(), AdminConfig::default()).expect("admin");
    let r = admin
        .create_topics(vec![
            NewTopic::new("a", 2, 1).config("retention.ms", "1000"),
            NewTopic::new("b", 1, 1),
        ])
        .unwrap();
    assert!(r.iter().all(|(_, res)| res.is_ok()), "{r:?}");
    let again = admin.create_topics(vec![NewTopic::new("a", 2, 1)]).unwrap();
    assert_eq!(
        again[0].1.as_ref().unwrap_err().error_code(),
        Some(ErrorCode::TopicAlreadyExists)
    );
    assert_eq!(
        admin.list_topics().unwrap(),
        vec!["a".to_owned(), "b".to_owned()]
    );
    let d = admin
        .describe_topics(vec!["a".into(), "missing".into()])
        .unwrap();
    let a = d[0].1.as_ref().unwrap();
    assert_eq!(a.partitions.len(), 2);
    assert_eq!(a.partitions[1].leader_id, 1);
    assert_eq!(
        d[1].1.as_ref().unwrap_err().error_code(),
        Some(ErrorCode::UnknownTopicOrPartition)
    );
    let del = admin.delete_topics(vec!["a".into(), "zzz".into()]).unwrap();
    assert!(del[0].1.is_ok());
    assert_eq!(
        del[1].1.as_ref().unwrap_err().error_code(),
        Some(ErrorCode::UnknownTopicOrPartition)
    );
    assert_eq!(admin.list_topics().unwrap(), vec!["b".to_owned()]);
}

#[test]
fn headers_reach_the_consumer() {
    let cluster = FakeCluster::start(1);
    cluster.create_topic("h", 1, 0);
    let producer =
        Producer::new(&cluster.bootstrap(), ProducerConfig::default()).expect("producer");
    let rec = ProducerRecord::new("h", "v")
        .with_key("k")
        .with_header("trace-id", Some(Bytes::from("abc")))
        .with_header("flag", None);
    producer.send(rec).unwrap().wait().unwrap();
    let tp = TopicPartition::new("h", 0);
    let mut c = consumer_from_beginning(&cluster, std::slice::from_ref(&tp));
    let got = consume_all(&mut c, 1);
    let headers: Vec<(Bytes, Option<Bytes>)> = got[0]
        .headers
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert_eq!(
        headers,
        vec![
            (Bytes::from("trace-id"), Some(Bytes::from("abc"))),
            (Bytes::from("flag"), None)
        ]
    );
    assert_eq!(got[0].key, Some(Bytes::from("k")));
}
