//! Replication seen by clients (the replication issue's items 7 and 10): librdkafka's idempotent
//! producer at acks=all through `kill -9` of a partition leader, and a consumer group through
//! `kill -9` of its coordinator's broker. Afterwards the checker counts what was acknowledged,
//! read back, missing and duplicated; the promise is none missing and none twice.
//!
//! Every wait is on a condition with a deadline; nothing sleeps to hope.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use spool_tests::checker::{assert_none, Acked};
use spool_tests::cluster::Cluster;
use spool_tests::group_checks::{missing, printed_twice};
use spool_tests::group_consumer::{GroupConsumer, MemberOptions};
use spool_tests::kafka_call::kafka_call;
use spool_tests::replicated::cluster_with_topic_on;

const PARTITIONS: i32 = 3;
/// Messages librdkafka sends before the kill, and after.
const BEFORE_KILL: u64 = 2_000;
const AFTER_KILL: u64 = 2_000;
/// Bound on librdkafka delivering everything (a debug-build cluster on a busy machine).
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(180);
/// Bound on reading everything back.
const READ_TIMEOUT: Duration = Duration::from_secs(90);

/// A healthy three-node cluster (small `__consumer_offsets`) with `topic` at RF 3; the
/// controller's id.
fn cluster_with_topic(topic: &str) -> (Cluster, i32) {
    let cluster = Cluster::start_with_args(3, &["--offsets-topic-partitions", "3"]);
    let (cluster, controller, _, _) = cluster_with_topic_on(cluster, topic, PARTITIONS, &[]);
    (cluster, controller)
}

/// One delivery report as librdkafka hands it over: sequence number, partition and offset, or
/// why not.
type Report = (u64, Result<(i32, i64), String>);

#[derive(Default)]
struct Deliveries {
    reports: Mutex<Vec<Report>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let outcome = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        self.reports
            .lock()
            .expect("delivery reports")
            .push((seq as u64, outcome));
    }
}

fn queue(producer: &BaseProducer<Deliveries>, topic: &str, seqs: std::ops::Range<u64>) {
    let deadline = Instant::now() + PRODUCE_TIMEOUT;
    for seq in seqs {
        let (key, value) = (format!("k-{}", seq % 97), format!("g-{seq}"));
        let mut record = BaseRecord::with_opaque_to(topic, seq as usize)
            .key(&key)
            .payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    assert!(Instant::now() < deadline, "librdkafka's queue stayed full");
                    record = back;
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("queueing message {seq}: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
}

#[test]
fn librdkafka_at_acks_all_through_kill_9_of_a_leader_loses_and_duplicates_nothing() {
    let (mut cluster, controller) = cluster_with_topic("rd-durable");
    let rows = cluster.describe(controller, "rd-durable");
    let victim = rows
        .iter()
        .map(|r| r.leader)
        .find(|&l| l != controller)
        .expect("a partition led by a broker that is not the controller");
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set(
            "bootstrap.servers",
            cluster.node(controller).kafka_bootstrap(),
        )
        .set("client.id", "spool-tests-replication")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .create_with_context(Deliveries::default())
        .expect("an rdkafka producer");
    queue(&producer, "rd-durable", 0..BEFORE_KILL);
    // Some of it acknowledged before the kill (the rest is in flight or queued).
    let deadline = Instant::now() + PRODUCE_TIMEOUT;
    while producer.context().reports.lock().expect("reports").len() < (BEFORE_KILL / 2) as usize {
        assert!(Instant::now() < deadline, "no deliveries before the kill");
        producer.poll(Duration::from_millis(50));
    }
    cluster.node_mut(victim).kill9();
    queue(
        &producer,
        "rd-durable",
        BEFORE_KILL..BEFORE_KILL + AFTER_KILL,
    );
    producer
        .flush(PRODUCE_TIMEOUT)
        .unwrap_or_else(|e| panic!("flush: {e}"));
    let reports = std::mem::take(&mut *producer.context().reports.lock().expect("reports"));
    let failed: Vec<String> = reports
        .iter()
        .filter_map(|(seq, r)| r.as_ref().err().map(|e| format!("message {seq}: {e}")))
        .collect();
    assert_none("delivery failures", &failed);
    let acked: Vec<Acked> = reports
        .iter()
        .filter_map(|(seq, r)| {
            let (partition, offset) = *r.as_ref().ok()?;
            Some(Acked {
                partition,
                offset,
                value: bytes::Bytes::from(format!("g-{seq}")),
            })
        })
        .collect();
    let survivor = (1..=3).find(|&i| i != victim).expect("a survivor");
    let last = spool_tests::checker::last_acked_offsets(&acked);
    let read = spool_tests::client::consume_until(
        cluster.node(survivor),
        "rd-durable",
        PARTITIONS,
        READ_TIMEOUT,
        |r| spool_tests::checker::reached(r, &last),
    );
    let lost = spool_tests::checker::missing_acked(&acked, &read);
    let twice = spool_tests::checker::duplicates(&read);
    let mut values: BTreeMap<&[u8], usize> = BTreeMap::new();
    for r in &read {
        if let Some(v) = &r.value {
            *values.entry(v.as_ref()).or_default() += 1;
        }
    }
    let value_twice = values.values().filter(|&&n| n > 1).count();
    // The figures the closing note quotes.
    eprintln!(
        "RESULT rdkafka_kill9 sent={} acknowledged={} read_back={} missing={} duplicated={} (offsets twice: {})",
        BEFORE_KILL + AFTER_KILL,
        acked.len(),
        read.len(),
        lost.len(),
        value_twice,
        twice.len()
    );
    assert_eq!(
        acked.len() as u64,
        BEFORE_KILL + AFTER_KILL,
        "every message acknowledged"
    );
    assert_none("acknowledged messages read back", &lost);
    assert_none("offsets read twice", &twice);
    assert_eq!(
        value_twice, 0,
        "no message stored twice (idempotence across the failover)"
    );
}

/// Java's `String.hashCode` (what Kafka's coordinator placement hashes), for group ids of ASCII.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

#[test]
fn a_group_survives_kill_9_of_its_coordinator_with_committed_offsets_intact() {
    let (mut cluster, controller) = cluster_with_topic("grouped-failover");
    let first = spool_tests::paced::produce_spread(
        cluster.node(controller),
        "grouped-failover",
        PARTITIONS,
        0,
        30,
    );
    // The offsets topic exists once a member has looked for its coordinator.
    let opts = MemberOptions::default();
    let group = "survivors";
    let bootstrap = cluster.node(controller);
    let member = GroupConsumer::start(bootstrap, "m1", "grouped-failover", group, &opts);
    spool_tests::group_consumer::wait_until("all 30 printed", READ_TIMEOUT, &[&member], || {
        member.with(|o| missing("grouped-failover", &first, &[o]).is_empty())
    });
    assert_eq!(member.terminate().code(), Some(0), "{}", member.summary());
    let committed_before = spool_tests::group_cli::describe(bootstrap, group).committed();
    assert_eq!(
        committed_before.values().sum::<i64>(),
        30,
        "all 30 committed before the kill: {committed_before:?}"
    );
    // The coordinator: the leader of the group's offsets partition.
    let offsets_partition = (java_string_hash(group) & 0x7fff_ffff) % 3;
    let coordinator =
        cluster.describe(controller, "__consumer_offsets")[offsets_partition as usize].leader;
    assert!(coordinator >= 1, "the offsets partition has a leader");
    cluster.node_mut(coordinator).kill9();
    let survivor = (1..=3).find(|&i| i != coordinator).expect("a survivor");
    // The new coordinator answers from the replicated offsets: the same commits.
    let committed_after = cluster.wait_until("the group described by a new coordinator", |c| {
        let out = spool_tests::cli::spool(
            c.node(survivor),
            &["group", "describe", group, "--format", "json"],
            "",
        );
        let d = spool_tests::group_cli::parse_description(&out.stdout).ok()?;
        (!d.offsets.is_empty()).then(|| d.committed())
    });
    assert_eq!(
        committed_after, committed_before,
        "committed offsets survive the coordinator"
    );
    // The group goes on: a new member resumes at the committed offsets and reads only what
    // came after.
    let second = spool_tests::paced::produce_spread(
        cluster.node(survivor),
        "grouped-failover",
        PARTITIONS,
        30,
        30,
    );
    let member = GroupConsumer::start(
        cluster.node(survivor),
        "m2",
        "grouped-failover",
        group,
        &opts,
    );
    spool_tests::group_consumer::wait_until(
        "the 30 new records printed",
        READ_TIMEOUT,
        &[&member],
        || member.with(|o| missing("grouped-failover", &second, &[o]).is_empty()),
    );
    let out = member.snapshot();
    let old: Vec<String> = out
        .records
        .iter()
        .filter(|r| committed_before.get(&r.tp).is_some_and(|&c| r.offset < c))
        .map(|r| format!("{}-{} offset {}", r.tp.topic, r.tp.partition, r.offset))
        .collect();
    assert_none("records below the committed offsets read again", &old);
    assert_none("records printed twice", &printed_twice(&[("m2", &out)]));
    assert_eq!(member.terminate().code(), Some(0), "{}", member.summary());
}

/// OffsetForLeaderEpoch v3 for partition 0 of `topic`: (error code, leader epoch, end offset).
fn offset_for_leader_epoch(
    addr: std::net::SocketAddr,
    topic: &str,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_leader_epoch(leader_epoch)])]);
    let r: OffsetForLeaderEpochResponse =
        kafka_call(addr, ApiKey::OffsetForLeaderEpoch, 3, &request);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// A Kafka Fetch v11 of partition 0 of `topic` from offset 0 with `current_leader_epoch`: the
/// partition's error code.
fn fetch_error(addr: std::net::SocketAddr, topic: &str, current_leader_epoch: i32) -> i16 {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current_leader_epoch)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = kafka_call(addr, ApiKey::Fetch, 11, &request);
    r.responses[0].partitions[0].error_code
}

/// A Kafka ListOffsets v4 of partition 0 of `topic` (the latest offset), as a consumer sends it:
/// the partition's error code.
fn list_offsets_error(addr: std::net::SocketAddr, topic: &str) -> i16 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let r: ListOffsetsResponse = kafka_call(addr, ApiKey::ListOffsets, 4, &request);
    r.topics[0].partitions[0].error_code
}

#[test]
fn offset_for_leader_epoch_names_where_the_old_epoch_ended_after_a_failover() {
    let (mut cluster, controller) = cluster_with_topic("epochs");
    let before = spool_tests::paced::produce_spread(cluster.node(controller), "epochs", 1, 0, 20);
    assert_eq!(before.last().map(|a| a.offset), Some(19));
    let leader = cluster.describe(controller, "epochs")[0].leader;
    let follower = (1..=3).find(|&i| i != leader).expect("a follower");
    // Only the leader answers; at epoch 0 its log ends at 20.
    assert_eq!(
        offset_for_leader_epoch(cluster.node(follower).kafka_addr(), "epochs", 0, 0).0,
        6,
        "a follower answers NOT_LEADER_OR_FOLLOWER"
    );
    assert_eq!(
        offset_for_leader_epoch(cluster.node(leader).kafka_addr(), "epochs", 0, 0),
        (0, 0, 20)
    );
    // Consumers are served by the leader only (the fault harness's finding 10: a follower
    // still catching up answered OFFSET_OUT_OF_RANGE, and its consumer reset to the start): a
    // follower's Fetch and ListOffsets answer NOT_LEADER_OR_FOLLOWER (6), the leader's do not.
    let (at_follower, at_leader) = (
        cluster.node(follower).kafka_addr(),
        cluster.node(leader).kafka_addr(),
    );
    assert_eq!(
        fetch_error(at_follower, "epochs", -1),
        6,
        "a follower's Fetch"
    );
    assert_eq!(
        fetch_error(at_leader, "epochs", -1),
        0,
        "the leader's Fetch"
    );
    assert_eq!(
        list_offsets_error(at_follower, "epochs"),
        6,
        "a follower's ListOffsets"
    );
    assert_eq!(
        list_offsets_error(at_leader, "epochs"),
        0,
        "the leader's ListOffsets"
    );
    cluster.node_mut(leader).kill9();
    let survivor = (1..=3).find(|&i| i != leader).expect("a survivor");
    let row = cluster.wait_until("a new leader", |c| {
        let r = c.describe(survivor, "epochs").into_iter().next()?;
        (r.leader >= 0 && r.leader != leader).then_some(r)
    });
    assert!(row.leader_epoch >= 1, "a new leader epoch: {row:?}");
    let more = spool_tests::paced::produce_spread(cluster.node(row.leader), "epochs", 1, 20, 5);
    assert_eq!(
        more.first().map(|a| a.offset),
        Some(20),
        "the new leader continues at 20"
    );
    let new_leader = cluster.node(row.leader).kafka_addr();
    // Epoch 0 ended where the new epoch began (20); the current epoch ends at the log end.
    assert_eq!(
        offset_for_leader_epoch(new_leader, "epochs", row.leader_epoch, 0),
        (0, 0, 20)
    );
    assert_eq!(
        offset_for_leader_epoch(new_leader, "epochs", row.leader_epoch, row.leader_epoch),
        (0, row.leader_epoch, 25)
    );
    // A consumer still at the old epoch is fenced (KIP-320), one ahead is told to wait.
    assert_eq!(
        offset_for_leader_epoch(new_leader, "epochs", 0, 0).0,
        74,
        "FENCED_LEADER_EPOCH"
    );
    assert_eq!(
        offset_for_leader_epoch(new_leader, "epochs", row.leader_epoch + 1, 0).0,
        75,
        "UNKNOWN_LEADER_EPOCH"
    );
    // Fetch carries the same check (KIP-320).
    assert_eq!(
        fetch_error(new_leader, "epochs", 0),
        74,
        "a fetch at the old epoch is fenced"
    );
    assert_eq!(fetch_error(new_leader, "epochs", row.leader_epoch + 1), 75);
    assert_eq!(fetch_error(new_leader, "epochs", row.leader_epoch), 0);
    assert_eq!(
        fetch_error(new_leader, "epochs", -1),
        0,
        "no epoch: not checked"
    );
}
