//! DeleteRecords on the Kafka port (Kafka's `ReplicaManager.deleteRecords`), against real broker
//! processes: the low watermark it answers, ListOffsets earliest and Fetch below and at it, the
//! out-of-range and -1 (high watermark) cases, the log start surviving a `kill -9` restart, and,
//! on three brokers, the followers' log start following the leader's so that the new leader after
//! a `kill -9` of the old one still starts at or past the deleted offset.
//!
//! Every wait is on a condition with a deadline; nothing sleeps to hope.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use spool_protocol::client::producer::Acks;
use spool_protocol::client::ProducerRecord;
use spool_tests::client::{create_topic, producer};
use spool_tests::cluster::Cluster;
use spool_tests::kafka_call::kafka_call;
use spool_tests::kafka_clients::start_broker;
use spool_tests::log_files::persisted_log_start;
use spool_tests::replicated::{cluster_with_topic_on, wait_re_led};
use spool_tests::{Broker, BrokerOptions};

const OFFSET_OUT_OF_RANGE: i16 = 1;
/// DeleteRecords' own timeout: far above what a follower's next two fetches take.
const DELETE_TIMEOUT_MS: i32 = 30_000;

/// Produces `n` records to `partition` of `topic`, one batch each (flushed one by one).
fn produce_batches(broker: &Broker, topic: &str, partition: i32, n: usize) {
    let p = producer(broker, Acks::All);
    for i in 0..n {
        let mut r = ProducerRecord::new(topic, Bytes::from(format!("v-{i}")));
        r.partition = Some(partition);
        p.send(r).expect("queued");
        p.flush(30_000).expect("acknowledged");
    }
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// DeleteRecords v2 for one partition: (error code, low watermark).
fn delete_records(addr: SocketAddr, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(DELETE_TIMEOUT_MS)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let r: DeleteRecordsResponse = kafka_call(addr, ApiKey::DeleteRecords, 2, &request);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.partition_index, partition);
    (p.error_code, p.low_watermark)
}

/// ListOffsets v1, earliest: (error code, offset).
fn earliest(addr: SocketAddr, topic: &str, partition: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-2)])]);
    let r: ListOffsetsResponse = kafka_call(addr, ApiKey::ListOffsets, 1, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// ListOffsets earliest, asked until the broker leads the partition again (a restarted broker
/// answers NOT_LEADER_OR_FOLLOWER until its metadata says it leads), within 60 s.
fn earliest_once_led(addr: SocketAddr, topic: &str, partition: i32) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match earliest(addr, topic, partition) {
            (0, offset) => return offset,
            (code, _) => assert!(
                std::time::Instant::now() < deadline,
                "ListOffsets still answers {code} after 60 s"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Fetch v4 from `offset`: (error code, base offset of the first batch returned, if any).
fn fetch_at(addr: SocketAddr, topic: &str, partition: i32, offset: i64) -> (i16, Option<i64>) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = kafka_call(addr, ApiKey::Fetch, 4, &request);
    let p = &r.responses[0].partitions[0];
    // A batch starts with its base offset (8 bytes, big-endian).
    let base = p
        .records
        .as_ref()
        .filter(|b| b.len() >= 8)
        .map(|b| i64::from_be_bytes(b[..8].try_into().expect("8 bytes")));
    (p.error_code, base)
}

#[test]
fn delete_records_moves_the_log_start_on_the_kafka_port_and_survives_a_kill9() {
    let mut broker = start_broker(BrokerOptions::default());
    let topic = "deleted";
    create_topic(&broker, topic, 1);
    produce_batches(&broker, topic, 0, 10);
    let addr = broker.kafka_addr();

    assert_eq!(
        delete_records(addr, topic, 0, 4),
        (0, 4),
        "the new low watermark"
    );
    assert_eq!(earliest(addr, topic, 0), (0, 4));
    assert_eq!(
        fetch_at(addr, topic, 0, 2).0,
        OFFSET_OUT_OF_RANGE,
        "below the log start"
    );
    assert_eq!(
        fetch_at(addr, topic, 0, 4),
        (0, Some(4)),
        "from the log start on"
    );
    assert_eq!(
        delete_records(addr, topic, 0, 20),
        (OFFSET_OUT_OF_RANGE, -1),
        "past the high watermark"
    );
    assert_eq!(
        delete_records(addr, topic, 0, 2),
        (0, 4),
        "an offset below the start moves nothing back"
    );
    assert_eq!(
        delete_records(addr, "no-such-topic", 0, 1).0,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );

    broker.kill9();
    broker.restart();
    broker.wait_kafka_ready();
    let addr = broker.kafka_addr();
    assert_eq!(
        earliest_once_led(addr, topic, 0),
        4,
        "the log start survives a kill -9"
    );
    assert_eq!(fetch_at(addr, topic, 0, 3).0, OFFSET_OUT_OF_RANGE);

    assert_eq!(
        delete_records(addr, topic, 0, -1),
        (0, 10),
        "-1: the high watermark"
    );
    assert_eq!(earliest(addr, topic, 0), (0, 10));
}

#[test]
fn followers_follow_the_log_start_so_a_failover_does_not_bring_records_back() {
    let topic = "deleted-replicated";
    let (mut cluster, controller, victim, led) =
        cluster_with_topic_on(Cluster::start(3), topic, 3, &[]);
    let partition = led[0];
    produce_batches(cluster.node(victim), topic, partition, 10);
    let addr = cluster.node(victim).kafka_addr();
    // Answered only once every ISR member reported a log start at or past 6.
    assert_eq!(delete_records(addr, topic, partition, 6), (0, 6));
    for id in (1..=3).filter(|&i| i != victim) {
        let start = persisted_log_start(cluster.node(id).data_dir(), topic, partition);
        assert!(
            start.is_some_and(|s| s >= 6),
            "broker {id}'s persisted log start for {topic}-{partition}: {start:?}"
        );
    }
    cluster.node_mut(victim).kill9();
    let watcher = if controller != victim {
        controller
    } else {
        (1..=3).find(|&i| i != victim).expect("a survivor")
    };
    wait_re_led(&cluster, watcher, topic, victim, &[partition]);
    let leader = cluster
        .describe(watcher, topic)
        .into_iter()
        .find(|r| r.partition == partition)
        .map(|r| r.leader)
        .expect("the partition's row");
    let new_addr = cluster.node(leader).kafka_addr();
    let offset = earliest_once_led(new_addr, topic, partition);
    assert!(
        offset >= 6,
        "the new leader's log starts at {offset}, below the deleted 6"
    );
    assert_eq!(
        fetch_at(new_addr, topic, partition, 3).0,
        OFFSET_OUT_OF_RANGE
    );
}
