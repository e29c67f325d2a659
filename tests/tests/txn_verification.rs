//! KIP-890 part 1 with real processes (issue 18): three brokers (`spool serve` on 127.0.0.x),
//! and the Kafka requests a transactional producer sends, each written by hand
//! (`spool_tests::kafka_call`) so the test can send what no well-behaved client would.
//!
//! Over every partition of a three-partition topic (so the partition's leader is the
//! transaction coordinator's broker for some and another broker for others — the mesh and the
//! internal port both answer):
//! - a transactional batch to a partition the coordinator never added is refused with
//!   INVALID_TXN_STATE and appends nothing (no hanging transaction: the LSO stays at the high
//!   watermark);
//! - once AddPartitionsToTxn added it, the same batch is appended;
//! - after the transaction is aborted, a late batch of it (Jepsen's "late produce after abort"
//!   in Bufstream) is refused the same way, so it cannot open a transaction nobody ends: the
//!   LSO reaches the high watermark and stays there;
//! - a transactional batch in a request without a transactional id is refused.
//!
//! Every wait is bounded (`Cluster::wait_until`); nothing asserts a duration.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use spool_tests::client::create_topic_rf;
use spool_tests::cluster::Cluster;
use spool_tests::kafka_call::{kafka_call, try_kafka_call};

const TOPIC: &str = "kip890";
const PARTITIONS: i32 = 3;
const TXN_ID: &str = "kip890-producer";

const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_TXN_STATE: i16 = 48;

/// Small internal topics: a three-node cluster of one-core brokers starts them quickly.
const CLUSTER_ARGS: [&str; 4] = [
    "--transaction-state-partitions",
    "3",
    "--group-initial-rebalance-delay-ms",
    "0",
];

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One transactional record batch of (`producer_id`, `epoch`) at `sequence`.
fn batch(producer_id: i64, epoch: i16, sequence: i32) -> Bytes {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 0,
        key: None,
        value: Some(Bytes::from(format!("v{sequence}"))),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encoding a record batch");
    buf.freeze()
}

/// Produce v7 of `records` to `partition`; its error code.
fn produce(
    addr: SocketAddr,
    transactional_id: Option<&str>,
    partition: i32,
    records: Bytes,
) -> i16 {
    let request = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(name(t))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let r: ProduceResponse = kafka_call(addr, ApiKey::Produce, 7, &request);
    r.responses[0].partition_responses[0].error_code
}

/// (high watermark, LSO) of `partition` from its leader.
fn watermarks(addr: SocketAddr, partition: i32) -> (i64, i64) {
    let at = |isolation: i8| {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_isolation_level(isolation)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(name(TOPIC)))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1)])]);
        let r: ListOffsetsResponse = kafka_call(addr, ApiKey::ListOffsets, 4, &request);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE, "ListOffsets of {TOPIC}-{partition}");
        p.offset
    };
    (at(0), at(1))
}

/// The coordinator's node id for [`TXN_ID`], once the cluster has one (FindCoordinator v3,
/// key type 1).
fn coordinator(cluster: &Cluster) -> i32 {
    cluster.wait_until("a transaction coordinator", |c| {
        let request = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_key(name(TXN_ID));
        let r: FindCoordinatorResponse =
            try_kafka_call(c.node(1).kafka_addr(), ApiKey::FindCoordinator, 3, &request).ok()?;
        (r.error_code == NONE).then_some(r.node_id.0)
    })
}

/// Sends a coordinator request until it is not answered "not here yet"; its error code.
fn until_coordinated(cluster: &Cluster, what: &str, mut call: impl FnMut() -> i16) -> i16 {
    cluster.wait_until(what, |_| {
        let code = call();
        (![
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
        ]
        .contains(&code))
        .then_some(code)
    })
}

#[test]
fn a_transactional_batch_needs_its_partition_added_by_the_coordinator() {
    let cluster = Cluster::start_with_args(3, &CLUSTER_ARGS);
    cluster.wait_healthy();
    create_topic_rf(cluster.node(1), TOPIC, PARTITIONS, 3);
    let coordinator_id = coordinator(&cluster);
    let coordinator_addr = cluster.node(coordinator_id).kafka_addr();

    let mut identity = (-1i64, -1i16);
    let code = until_coordinated(&cluster, "InitProducerId", || {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(name(TXN_ID))))
            .with_transaction_timeout_ms(60_000);
        let r: InitProducerIdResponse =
            kafka_call(coordinator_addr, ApiKey::InitProducerId, 1, &request);
        identity = (r.producer_id.0, r.producer_epoch);
        r.error_code
    });
    assert_eq!(code, NONE, "InitProducerId");
    let (producer_id, epoch) = identity;

    let leaders: Vec<i32> = cluster.wait_until("every partition led", |c| {
        let rows = c.describe(1, TOPIC);
        (rows.len() == PARTITIONS as usize && rows.iter().all(|r| r.leader > 0))
            .then(|| rows.iter().map(|r| r.leader).collect())
    });
    let context = || format!("coordinator on broker {coordinator_id}, leaders {leaders:?}");

    for partition in 0..PARTITIONS {
        let leader = cluster.node(leaders[partition as usize]).kafka_addr();
        assert_eq!(
            produce(
                leader,
                Some(TXN_ID),
                partition,
                batch(producer_id, epoch, 0)
            ),
            INVALID_TXN_STATE,
            "partition {partition} never added: refused ({})",
            context()
        );
        assert_eq!(
            watermarks(leader, partition),
            (0, 0),
            "partition {partition}: nothing appended, no transaction left hanging ({})",
            context()
        );
        assert_eq!(
            produce(leader, None, partition, batch(producer_id, epoch, 0)),
            INVALID_TXN_STATE,
            "a transactional batch without the request's transactional id ({})",
            context()
        );
    }

    // Added: the same batches are appended.
    let topics = vec![AddPartitionsToTxnTopic::default()
        .with_name(TopicName(name(TOPIC)))
        .with_partitions((0..PARTITIONS).collect())];
    let code = until_coordinated(&cluster, "AddPartitionsToTxn", || {
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(name(TXN_ID)))
            .with_v3_and_below_producer_id(ProducerId(producer_id))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics.clone());
        let r: AddPartitionsToTxnResponse =
            kafka_call(coordinator_addr, ApiKey::AddPartitionsToTxn, 3, &request);
        r.results_by_topic_v3_and_below[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .find(|&c| c != NONE)
            .unwrap_or(NONE)
    });
    assert_eq!(code, NONE, "AddPartitionsToTxn");
    for partition in 0..PARTITIONS {
        let leader = cluster.node(leaders[partition as usize]).kafka_addr();
        assert_eq!(
            produce(
                leader,
                Some(TXN_ID),
                partition,
                batch(producer_id, epoch, 0)
            ),
            NONE,
            "partition {partition} added: appended ({})",
            context()
        );
        let (hw, lso) = watermarks(leader, partition);
        assert_eq!(
            (hw, lso),
            (1, 0),
            "partition {partition}: the open transaction holds the LSO"
        );
    }

    let code = until_coordinated(&cluster, "EndTxn", || {
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(name(TXN_ID)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_committed(false);
        let r: EndTxnResponse = kafka_call(coordinator_addr, ApiKey::EndTxn, 3, &request);
        r.error_code
    });
    assert_eq!(code, NONE, "EndTxn (abort)");
    for partition in 0..PARTITIONS {
        let leader = cluster.node(leaders[partition as usize]).kafka_addr();
        // The abort marker: data batch 0, marker 1.
        cluster.wait_until("the abort marker", |_| {
            (watermarks(leader, partition) == (2, 2)).then_some(())
        });
        assert_eq!(
            produce(
                leader,
                Some(TXN_ID),
                partition,
                batch(producer_id, epoch, 1)
            ),
            INVALID_TXN_STATE,
            "partition {partition}: a late batch of the aborted transaction ({})",
            context()
        );
        assert_eq!(
            watermarks(leader, partition),
            (2, 2),
            "partition {partition}: the late batch opened no transaction ({})",
            context()
        );
    }
}
