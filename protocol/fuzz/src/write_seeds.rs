//! Writes seed inputs for the fuzz targets that have none in `seeds/` (those are the native
//! frames, written by spool-protocol's `write_fuzz_seeds` test): valid internal frames of each
//! message kind, valid record batches (plain, zstd, with headers, two end to end) and valid Kafka
//! requests of the APIs the broker serves at every version the codec carries. A fuzzer that
//! starts from valid inputs gets past the verifier, the CRC and the header at once instead of
//! rediscovering them. `cargo fuzz build` builds it with the targets; run it as
//! `target/x86_64-unknown-linux-gnu/release/write_seeds DIR`: it writes
//! `DIR/internal_codec/`, `DIR/record_batch/` and `DIR/kafka_request/`. `scripts/fuzz.sh` runs it
//! when a target's corpus is empty.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use spool_protocol::frame::FrameLimits;
use spool_protocol::internal::*;
use spool_protocol::kafka::versions::codec_range;
use spool_protocol::ErrorCode;
use spool_storage::batch::Compression;
use spool_storage::records::{BatchBuilder, Record, RecordHeader};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("create seed dir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

fn batches() -> Vec<Bytes> {
    let mut out = Vec::new();
    for compression in [Compression::None, Compression::Zstd] {
        let mut b = BatchBuilder::new(1_700_000_000_000).compression(compression);
        for i in 0..3 {
            b.push(1_700_000_000_000 + i, Some(Bytes::from(format!("k{i}"))), Some(Bytes::from("value")));
        }
        b.push_record(Record {
            offset_delta: 3,
            timestamp_delta: 4,
            key: None,
            value: None,
            headers: vec![RecordHeader { key: Bytes::from("h"), value: Some(Bytes::from("v")) }],
        });
        out.push(b.build().expect("build batch").freeze());
    }
    let mut idempotent = BatchBuilder::new(0);
    idempotent.producer_id = 7;
    idempotent.producer_epoch = 1;
    idempotent.base_sequence = 0;
    idempotent.push(0, None, Some(Bytes::from("x")));
    out.push(idempotent.build().expect("build batch").freeze());
    out
}

fn internal_frames(batch: &Bytes) -> Vec<(InternalFrame, Vec<Bytes>)> {
    let frame = |message| InternalFrame {
        from_node: 1,
        correlation_id: 5,
        message,
        cluster_id: "cluster-a".to_owned(),
    };
    vec![
        (frame(InternalMessage::Raft(vec![vec![8, 3, 16, 1, 24, 2], vec![]])), vec![]),
        (
            frame(InternalMessage::RegisterBroker(RegisterBroker {
                broker_id: 1,
                incarnation_high: 9,
                incarnation_low: 10,
                listeners: vec![Listener { name: "kafka".into(), host: "127.0.0.1".into(), port: 9092 }],
                rack: Some("r1".into()),
                previous_broker_epoch: -1,
                cluster_id: "cluster-a".into(),
            })),
            vec![],
        ),
        (
            frame(InternalMessage::RegisterBrokerAnswer(RegisterBrokerAnswer {
                error: ErrorCode::None,
                message: Some("ok".into()),
                broker_epoch: 3,
            })),
            vec![],
        ),
        (
            frame(InternalMessage::Heartbeat(Heartbeat {
                broker_id: 1,
                broker_epoch: 3,
                current_metadata_offset: 40,
                want_fence: false,
                want_shutdown: true,
            })),
            vec![],
        ),
        (
            frame(InternalMessage::HeartbeatAnswer(HeartbeatAnswer {
                error: ErrorCode::None,
                is_fenced: false,
                should_shutdown: false,
            })),
            vec![],
        ),
        (
            frame(InternalMessage::Forward(ForwardOp::CreateTopics {
                topics: vec![ForwardTopic {
                    name: "t".into(),
                    partitions: 3,
                    replication_factor: 1,
                    configs: vec![("retention.ms".into(), "1000".into())],
                }],
                validate_only: false,
            })),
            vec![],
        ),
        (frame(InternalMessage::Forward(ForwardOp::DeleteTopics { names: vec!["t".into()] })), vec![]),
        (
            frame(InternalMessage::Forward(ForwardOp::AllocateProducerIds { broker_id: 1, broker_epoch: 3 })),
            vec![],
        ),
        (
            frame(InternalMessage::Forward(ForwardOp::AlterPartition(AlterPartitionOp {
                topic_id: [7; 16],
                partition: 0,
                broker_id: 1,
                broker_epoch: 3,
                leader_epoch: 2,
                partition_epoch: 4,
                new_isr: vec![(1, 3), (2, 5)],
            }))),
            vec![],
        ),
        (
            frame(InternalMessage::ForwardAnswer(ForwardAnswer::Topics(vec![ForwardTopicOutcome {
                name: "t".into(),
                error: ErrorCode::None,
                message: None,
            }]))),
            vec![],
        ),
        (frame(InternalMessage::ForwardAnswer(ForwardAnswer::ProducerIds(Ok((1000, 1000))))), vec![]),
        (frame(InternalMessage::ForwardAnswer(ForwardAnswer::NotController)), vec![]),
        (
            frame(InternalMessage::ForwardAnswer(ForwardAnswer::AlterPartition(Ok(PartitionLeadership {
                leader_id: 1,
                leader_epoch: 2,
                partition_epoch: 5,
                replicas: vec![1, 2],
                isr: vec![1],
            })))),
            vec![],
        ),
        (
            frame(InternalMessage::ReplicaFetch(ReplicaFetch {
                replica_id: 2,
                broker_epoch: Some(3),
                max_wait_ms: 500,
                min_bytes: 1,
                max_bytes: 1 << 20,
                partitions: vec![ReplicaFetchPartition {
                    topic: "t".into(),
                    partition: 0,
                    current_leader_epoch: Some(2),
                    fetch_offset: 10,
                    last_fetched_epoch: Some(1),
                    log_start_offset: 0,
                    durable_offset: Some(9),
                }],
            })),
            vec![],
        ),
        (
            frame(InternalMessage::ReplicaFetchAnswer(ReplicaFetchAnswer {
                error: ErrorCode::None,
                partitions: vec![
                    ReplicaFetchAnswerPartition {
                        topic: "t".into(),
                        partition: 0,
                        error: ErrorCode::None,
                        high_watermark: 10,
                        log_start_offset: 0,
                        log_end_offset: 12,
                        diverging_epoch: None,
                        records_bytes: batch.len() as u32,
                    },
                    ReplicaFetchAnswerPartition {
                        topic: "t".into(),
                        partition: 1,
                        error: ErrorCode::None,
                        high_watermark: 0,
                        log_start_offset: 0,
                        log_end_offset: 0,
                        diverging_epoch: Some(EpochEndOffset { epoch: 1, end_offset: 4 }),
                        records_bytes: 0,
                    },
                ],
            })),
            vec![batch.clone()],
        ),
    ]
}

fn kafka_bodies(batch: &Bytes) -> Vec<(ApiKey, RequestKind)> {
    let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(batch.clone()))]),
    ]);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("t")))),
    ]));
    let fetch = FetchRequest::default().with_max_wait_ms(500).with_max_bytes(1 << 20).with_topics(vec![
        fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![fetch_request::FetchPartition::default().with_fetch_offset(3)]),
    ]);
    vec![
        (ApiKey::Produce, RequestKind::Produce(produce)),
        (ApiKey::Fetch, RequestKind::Fetch(fetch)),
        (ApiKey::Metadata, RequestKind::Metadata(metadata)),
        (ApiKey::ApiVersions, RequestKind::ApiVersions(ApiVersionsRequest::default())),
        (ApiKey::ListOffsets, RequestKind::ListOffsets(ListOffsetsRequest::default())),
        (ApiKey::OffsetCommit, RequestKind::OffsetCommit(OffsetCommitRequest::default())),
        (ApiKey::OffsetFetch, RequestKind::OffsetFetch(OffsetFetchRequest::default())),
        (ApiKey::FindCoordinator, RequestKind::FindCoordinator(FindCoordinatorRequest::default())),
        (ApiKey::JoinGroup, RequestKind::JoinGroup(JoinGroupRequest::default())),
        (ApiKey::Heartbeat, RequestKind::Heartbeat(HeartbeatRequest::default())),
        (ApiKey::LeaveGroup, RequestKind::LeaveGroup(LeaveGroupRequest::default())),
        (ApiKey::SyncGroup, RequestKind::SyncGroup(SyncGroupRequest::default())),
        (ApiKey::DescribeGroups, RequestKind::DescribeGroups(DescribeGroupsRequest::default())),
        (ApiKey::ListGroups, RequestKind::ListGroups(ListGroupsRequest::default())),
        (ApiKey::CreateTopics, RequestKind::CreateTopics(CreateTopicsRequest::default())),
        (ApiKey::DeleteTopics, RequestKind::DeleteTopics(DeleteTopicsRequest::default())),
        (ApiKey::InitProducerId, RequestKind::InitProducerId(InitProducerIdRequest::default())),
        (ApiKey::SaslHandshake, RequestKind::SaslHandshake(SaslHandshakeRequest::default())),
    ]
}

fn main() {
    let root = std::env::args().nth(1).expect("usage: write_seeds DIR");
    let root = Path::new(&root);

    let batches = batches();
    let dir = root.join("record_batch");
    let mut two = BytesMut::new();
    for (i, b) in batches.iter().enumerate() {
        write(&dir, &format!("batch-{i}"), b);
        two.extend_from_slice(b);
    }
    write(&dir, "batches-end-to-end", &two);

    let dir = root.join("internal_codec");
    let limits = FrameLimits::default();
    for (i, (frame, payload)) in internal_frames(&batches[0]).iter().enumerate() {
        let encoded = encode_with_payload(frame, payload.clone(), &limits).expect("encode internal frame");
        let mut whole = encoded.head.to_vec();
        for chunk in &encoded.payload {
            whole.extend_from_slice(chunk);
        }
        write(&dir, &format!("internal-{i}"), &whole);
    }

    let dir = root.join("kafka_request");
    let mut written = 0;
    for (api_key, body) in kafka_bodies(&batches[0]) {
        let (min, max) = codec_range(api_key);
        for version in min..=max {
            let mut out = BytesMut::new();
            let header = RequestHeader::default()
                .with_request_api_key(api_key as i16)
                .with_request_api_version(version)
                .with_correlation_id(42)
                .with_client_id(Some(StrBytes::from_static_str("seed")));
            // A default body may not fit every version (a field a version lacks): skip those.
            if header.encode(&mut out, api_key.request_header_version(version)).is_err()
                || body.encode(&mut out, version).is_err()
            {
                continue;
            }
            write(&dir, &format!("{api_key:?}-v{version}"), &out);
            written += 1;
        }
    }
    eprintln!("write_seeds: {} batches, internal frames and {written} Kafka requests under {}", batches.len(), root.display());
}
