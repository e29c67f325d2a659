//! The internal protocol's codec (`spool_protocol::internal`), through its public API only:
//! - every `InternalFrame` of every variant round-trips (`decode(encode(x)) == x`, proptest);
//! - truncated frames, random bytes and bit-flipped valid frames never panic, and what decodes is
//!   a frame `encode` accepts again (proptest);
//! - each named limit holds at its edge, on both sides (encode refuses, and decode refuses a
//!   header built by hand past the limit);
//! - a frame announcing more than the limit is refused from its prefix alone;
//! - a missing body, a missing union value and an unknown union member are typed errors;
//! - replica fetches and their answers round-trip through `encode_with_payload` /
//!   `decode_with_payload` with the payload cut into random chunks (kept as given, zero-copy), and
//!   the decoded payload is a slice of the frame that `split_records` cuts per partition;
//! - a payload that differs from the partitions' `records_bytes` sum, a payload on a message that
//!   has none, and an offset or epoch out of range are typed errors, both ways;
//! - AlterPartition and its answer: negative ids and epochs (but -1 where it means unknown or no
//!   leader) are refused both ways, the answer's error 0 alone means the state, and the topic id
//!   keeps its byte order;
//! - one small frame's bytes are pinned (a golden test), so a schema or layout change that alters
//!   the wire is seen.

use bytes::Bytes;
use flatbuffers::FlatBufferBuilder;
use proptest::collection::vec;
use proptest::prelude::*;
use spool_protocol::frame::{self, FrameError, FrameLimits};
use spool_protocol::internal::codec::{
    CONFIGS_PER_TOPIC_MAX, CONFIG_VALUE_BYTES_MAX, ERROR_MESSAGE_BYTES_MAX,
    LISTENERS_PER_REGISTRATION_MAX, NAME_BYTES_MAX, RAFT_MESSAGES_PER_FRAME_MAX,
    RAFT_MESSAGE_BYTES_MAX, REPLICAS_PER_PARTITION_MAX, REPLICA_FETCH_PARTITIONS_MAX,
    TOPICS_PER_FORWARD_MAX,
};
use spool_protocol::internal::*;
use spool_protocol::internal_wire as fb;
use spool_protocol::ErrorCode;

// ---- strategies ----

fn error_code() -> impl Strategy<Value = ErrorCode> {
    proptest::sample::select(ErrorCode::ALL.to_vec())
}

/// Names of up to 16 chars of any non-control code point: at most 64 bytes, under NAME_BYTES_MAX.
fn name() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn message() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("\\PC{0,40}")
}

fn listener() -> impl Strategy<Value = Listener> {
    (name(), name(), any::<u16>()).prop_map(|(name, host, port)| Listener { name, host, port })
}

fn forward_topic() -> impl Strategy<Value = ForwardTopic> {
    (
        name(),
        any::<i32>(),
        any::<i16>(),
        vec((name(), "\\PC{0,40}"), 0..4),
    )
        .prop_map(
            |(name, partitions, replication_factor, configs)| ForwardTopic {
                name,
                partitions,
                replication_factor,
                configs,
            },
        )
}

fn forward_op() -> impl Strategy<Value = ForwardOp> {
    prop_oneof![
        (vec(forward_topic(), 0..4), any::<bool>()).prop_map(|(topics, validate_only)| {
            ForwardOp::CreateTopics {
                topics,
                validate_only,
            }
        }),
        vec(name(), 0..6).prop_map(|names| ForwardOp::DeleteTopics { names }),
        (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
            ForwardOp::AllocateProducerIds {
                broker_id,
                broker_epoch,
            }
        }),
        alter_partition_op().prop_map(ForwardOp::AlterPartition),
    ]
}

/// Ids, epochs and partition indexes: non-negative.
fn id() -> impl Strategy<Value = i32> {
    0..=i32::MAX
}

/// A broker epoch: non-negative, or -1 (unknown).
fn broker_epoch() -> impl Strategy<Value = i64> {
    -1..=i64::MAX
}

fn alter_partition_op() -> impl Strategy<Value = AlterPartitionOp> {
    (
        any::<[u8; 16]>(),
        id(),
        id(),
        broker_epoch(),
        id(),
        id(),
        vec((id(), broker_epoch()), 0..5),
    )
        .prop_map(
            |(
                topic_id,
                partition,
                broker_id,
                broker_epoch,
                leader_epoch,
                partition_epoch,
                new_isr,
            )| {
                AlterPartitionOp {
                    topic_id,
                    partition,
                    broker_id,
                    broker_epoch,
                    leader_epoch,
                    partition_epoch,
                    new_isr,
                }
            },
        )
}

fn alter_partition_answer() -> impl Strategy<Value = ForwardAnswer> {
    let state = (-1..=i32::MAX, id(), id(), vec(id(), 0..5), vec(id(), 0..5)).prop_map(
        |(leader_id, leader_epoch, partition_epoch, replicas, isr)| PartitionLeadership {
            leader_id,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
        },
    );
    let refusal = (
        error_code().prop_filter("an error, not NONE", |e| *e != ErrorCode::None),
        proptest::option::of(id()),
    )
        .prop_map(|(error, ineligible_broker_id)| AlterPartitionRefusal {
            error,
            ineligible_broker_id,
        });
    prop_oneof![
        state.prop_map(|s| ForwardAnswer::AlterPartition(Ok(s))),
        refusal.prop_map(|r| ForwardAnswer::AlterPartition(Err(r))),
    ]
}

fn forward_answer() -> impl Strategy<Value = ForwardAnswer> {
    let outcome =
        (name(), error_code(), message()).prop_map(|(name, error, message)| ForwardTopicOutcome {
            name,
            error,
            message,
        });
    // Err(NONE) has no encoding (error 0 is success on the wire): draw real errors only.
    let refusal = error_code().prop_filter("an error, not NONE", |e| *e != ErrorCode::None);
    prop_oneof![
        vec(outcome, 0..5).prop_map(ForwardAnswer::Topics),
        (any::<i64>(), any::<i32>()).prop_map(|ids| ForwardAnswer::ProducerIds(Ok(ids))),
        refusal.prop_map(|e| ForwardAnswer::ProducerIds(Err(e))),
        Just(ForwardAnswer::NotController),
        alter_partition_answer(),
    ]
}

/// -1 on the wire is `None`; any non-negative value is `Some`.
fn opt_epoch() -> impl Strategy<Value = Option<i32>> {
    proptest::option::of(0..=i32::MAX)
}

fn offset() -> impl Strategy<Value = u64> {
    0..=i64::MAX as u64
}

fn replica_fetch() -> impl Strategy<Value = ReplicaFetch> {
    let partition = (
        name(),
        any::<i32>(),
        opt_epoch(),
        offset(),
        opt_epoch(),
        offset(),
        proptest::option::of(offset()),
    )
        .prop_map(
            |(
                topic,
                partition,
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                log_start_offset,
                durable_offset,
            )| ReplicaFetchPartition {
                topic,
                partition,
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                log_start_offset,
                durable_offset,
            },
        );
    (
        any::<i32>(),
        proptest::option::of(0..=i64::MAX),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        vec(partition, 0..6),
    )
        .prop_map(
            |(replica_id, broker_epoch, max_wait_ms, min_bytes, max_bytes, partitions)| {
                ReplicaFetch {
                    replica_id,
                    broker_epoch,
                    max_wait_ms,
                    min_bytes,
                    max_bytes,
                    partitions,
                }
            },
        )
}

/// An answer partition whose records are `records` (its `records_bytes` is their length).
fn answer_partition() -> impl Strategy<Value = (ReplicaFetchAnswerPartition, Vec<u8>)> {
    (
        name(),
        any::<i32>(),
        error_code(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        proptest::option::of(
            (any::<i32>(), any::<i64>())
                .prop_map(|(epoch, end_offset)| EpochEndOffset { epoch, end_offset }),
        ),
        prop_oneof![Just(Vec::new()), vec(any::<u8>(), 0..200)],
    )
        .prop_map(
            |(
                topic,
                partition,
                error,
                high_watermark,
                log_start_offset,
                log_end_offset,
                diverging_epoch,
                records,
            )| {
                (
                    ReplicaFetchAnswerPartition {
                        topic,
                        partition,
                        error,
                        high_watermark,
                        log_start_offset,
                        log_end_offset,
                        diverging_epoch,
                        records_bytes: records.len() as u32,
                    },
                    records,
                )
            },
        )
}

/// An answer and each partition's records, in answer order.
fn replica_fetch_answer() -> impl Strategy<Value = (ReplicaFetchAnswer, Vec<Vec<u8>>)> {
    (error_code(), vec(answer_partition(), 0..6)).prop_map(|(error, parts)| {
        let (partitions, records) = parts.into_iter().unzip();
        (ReplicaFetchAnswer { error, partitions }, records)
    })
}

/// An answer without records (what `encode` carries).
fn empty_replica_fetch_answer() -> impl Strategy<Value = ReplicaFetchAnswer> {
    replica_fetch_answer().prop_map(|(mut answer, _)| {
        for p in &mut answer.partitions {
            p.records_bytes = 0;
        }
        answer
    })
}

/// `payload` cut at the given points into chunks (some possibly empty).
fn chunks(payload: &[u8], cuts: &[prop::sample::Index]) -> Vec<Bytes> {
    let payload = Bytes::copy_from_slice(payload);
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(payload.len() + 1)).collect();
    at.push(0);
    at.push(payload.len());
    at.sort_unstable();
    at.windows(2).map(|w| payload.slice(w[0]..w[1])).collect()
}

fn internal_message() -> impl Strategy<Value = InternalMessage> {
    prop_oneof![
        vec(vec(any::<u8>(), 0..64), 0..6).prop_map(InternalMessage::Raft),
        (
            any::<i32>(),
            any::<u64>(),
            any::<u64>(),
            vec(listener(), 0..4),
            proptest::option::of(name()),
            any::<i64>(),
            name(),
        )
            .prop_map(
                |(
                    broker_id,
                    incarnation_high,
                    incarnation_low,
                    listeners,
                    rack,
                    previous_broker_epoch,
                    cluster_id,
                )| {
                    InternalMessage::RegisterBroker(RegisterBroker {
                        broker_id,
                        incarnation_high,
                        incarnation_low,
                        listeners,
                        rack,
                        previous_broker_epoch,
                        cluster_id,
                    })
                }
            ),
        (error_code(), message(), any::<i64>()).prop_map(|(error, message, broker_epoch)| {
            InternalMessage::RegisterBrokerAnswer(RegisterBrokerAnswer {
                error,
                message,
                broker_epoch,
            })
        }),
        (
            any::<i32>(),
            any::<i64>(),
            any::<i64>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(
                |(broker_id, broker_epoch, current_metadata_offset, want_fence, want_shutdown)| {
                    InternalMessage::Heartbeat(Heartbeat {
                        broker_id,
                        broker_epoch,
                        current_metadata_offset,
                        want_fence,
                        want_shutdown,
                    })
                }
            ),
        (error_code(), any::<bool>(), any::<bool>()).prop_map(
            |(error, is_fenced, should_shutdown)| {
                InternalMessage::HeartbeatAnswer(HeartbeatAnswer {
                    error,
                    is_fenced,
                    should_shutdown,
                })
            }
        ),
        forward_op().prop_map(InternalMessage::Forward),
        forward_answer().prop_map(InternalMessage::ForwardAnswer),
        replica_fetch().prop_map(InternalMessage::ReplicaFetch),
        empty_replica_fetch_answer().prop_map(InternalMessage::ReplicaFetchAnswer),
        (
            0i64..=i64::MAX,
            0i16..=i16::MAX,
            any::<bool>(),
            0i32..=i32::MAX,
            vec((name(), 0i32..=i32::MAX), 0..5),
            -1i64..=i64::MAX,
        )
            .prop_map(
                |(
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    partitions,
                    decision_offset,
                )| {
                    InternalMessage::WriteTxnMarkers(WriteTxnMarkers {
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                        partitions,
                        decision_offset,
                    })
                }
            ),
        vec(
            (name(), 0i32..=i32::MAX, error_code()).prop_map(|(topic, partition, error)| {
                TxnMarkerResult {
                    topic,
                    partition,
                    error,
                }
            }),
            0..5
        )
        .prop_map(InternalMessage::WriteTxnMarkersAnswer),
        (
            "\\PC{1,40}",
            0i64..=i64::MAX,
            0i16..=i16::MAX,
            name(),
            0i32..=i32::MAX,
        )
            .prop_map(
                |(transactional_id, producer_id, producer_epoch, topic, partition)| {
                    InternalMessage::VerifyTxn(VerifyTxn {
                        transactional_id,
                        producer_id,
                        producer_epoch,
                        topic,
                        partition,
                    })
                }
            ),
        error_code().prop_map(InternalMessage::VerifyTxnAnswer),
    ]
}

fn internal_frame() -> impl Strategy<Value = InternalFrame> {
    (
        any::<i32>(),
        any::<i32>(),
        internal_message(),
        "[0-9a-f]{0,32}",
    )
        .prop_map(
            |(from_node, correlation_id, message, cluster_id)| InternalFrame {
                from_node,
                correlation_id,
                message,
                cluster_id,
            },
        )
}

// ---- helpers ----

fn limits() -> FrameLimits {
    FrameLimits::default()
}

/// Wraps a hand-built header in the native envelope (empty payload).
fn frame_around(header: &[u8]) -> Vec<u8> {
    frame::assemble(header, Vec::new(), &limits())
        .expect("test header fits the default limits")
        .to_bytes()
        .to_vec()
}

/// A frame whose header is an `InternalFrame` with the given body, built with the generated
/// builder directly, so it can say what `encode` never would.
fn hand_built(
    build: impl FnOnce(
        &mut FlatBufferBuilder<'static>,
    ) -> (
        fb::InternalBody,
        Option<flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset>>,
    ),
) -> Vec<u8> {
    frame_around(&hand_built_header(build))
}

/// The header [`hand_built`] wraps, alone.
fn hand_built_header(
    build: impl FnOnce(
        &mut FlatBufferBuilder<'static>,
    ) -> (
        fb::InternalBody,
        Option<flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset>>,
    ),
) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let (body_type, body) = build(&mut fbb);
    let root = fb::InternalFrame::create(
        &mut fbb,
        &fb::InternalFrameArgs {
            from_node: 1,
            correlation_id: 2,
            body_type,
            body,
            cluster_id: None,
        },
    );
    fbb.finish_minimal(root);
    fbb.finished_data().to_vec()
}

fn frame_of(message: InternalMessage) -> InternalFrame {
    InternalFrame {
        from_node: 3,
        correlation_id: 9,
        message,
        cluster_id: String::new(),
    }
}

fn register(listeners: Vec<Listener>, cluster_id: String) -> InternalMessage {
    InternalMessage::RegisterBroker(RegisterBroker {
        broker_id: 1,
        incarnation_high: 2,
        incarnation_low: 3,
        listeners,
        rack: None,
        previous_broker_epoch: -1,
        cluster_id,
    })
}

fn listener_named(name: &str) -> Listener {
    Listener {
        name: name.into(),
        host: "127.0.0.1".into(),
        port: 9094,
    }
}

/// Anything `decode` returns Ok must be a frame `encode` accepts again, and re-decode the same.
fn assert_sane(decoded: Result<InternalFrame, InternalError>) {
    if let Ok(frame) = decoded {
        let again = encode(&frame).expect("a decoded frame re-encodes");
        assert_eq!(decode(&again, &limits()).expect("and re-decodes"), frame);
    }
}

// ---- properties ----

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn every_frame_round_trips(frame in internal_frame()) {
        let bytes = encode(&frame).expect("a bounded frame encodes");
        // The prefix says the whole frame's size, exactly as a reader sizes it.
        let prefix = [bytes[0], bytes[1], bytes[2], bytes[3]];
        prop_assert_eq!(frame::frame_bytes_from_prefix(prefix, &limits()).unwrap(), bytes.len());
        prop_assert_eq!(decode(&bytes, &limits()).expect("its own encoding decodes"), frame);
    }

    #[test]
    fn truncated_frames_are_refused(frame in internal_frame(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&frame).unwrap();
        let n = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..n], &limits()).is_err());
    }

    /// Truncated inside the header, with both length fields rewritten to agree: the damage reaches
    /// the verifier instead of the size check.
    #[test]
    fn consistently_truncated_headers_never_panic(
        frame in internal_frame(),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = encode(&frame).unwrap();
        let header = &bytes[frame::FRAME_PREFIX_BYTES..];
        let short = frame_around(&header[..cut.index(header.len())]);
        assert_sane(decode(&short, &limits()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        assert_sane(decode(&bytes, &limits()));
    }

    /// Random headers behind a valid envelope: the verifier sees them all.
    #[test]
    fn random_headers_never_panic(header in vec(any::<u8>(), 0..256)) {
        assert_sane(decode(&frame_around(&header), &limits()));
    }

    /// An answer with records, its payload cut into random chunks: the chunks travel as given
    /// (the same buffers, not copies), and the decoded payload is a slice of the frame read.
    #[test]
    fn replica_fetch_answers_round_trip_with_payload(
        (answer, records) in replica_fetch_answer(),
        cuts in vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let payload: Vec<u8> = records.concat();
        let chunks = chunks(&payload, &cuts);
        let frame = frame_of(InternalMessage::ReplicaFetchAnswer(answer.clone()));
        let encoded = encode_with_payload(&frame, chunks.clone(), &limits()).expect("encodes");
        prop_assert_eq!(encoded.payload.len(), chunks.len());
        for (sent, given) in encoded.payload.iter().zip(&chunks) {
            prop_assert_eq!(sent.as_ptr(), given.as_ptr());
        }
        let bytes = encoded.to_bytes();
        let prefix = [bytes[0], bytes[1], bytes[2], bytes[3]];
        prop_assert_eq!(frame::frame_bytes_from_prefix(prefix, &limits()).unwrap(), bytes.len());

        let (decoded, got) = decode_with_payload(&bytes, &limits()).expect("decodes");
        prop_assert_eq!(&decoded, &frame);
        prop_assert_eq!(&got[..], &payload[..]);
        prop_assert_eq!(got.as_ptr(), bytes[bytes.len() - payload.len()..].as_ptr());
        let split = answer.split_records(&got).expect("records_bytes add up");
        let split: Vec<Vec<u8>> = split.iter().map(|b| b.to_vec()).collect();
        prop_assert_eq!(split, records);
        // `decode` takes no payload: an answer with records is refused there, not truncated.
        if !payload.is_empty() {
            let is_unexpected = matches!(
                decode(&bytes, &limits()),
                Err(InternalError::UnexpectedPayload { .. })
            );
            prop_assert!(is_unexpected);
        }
    }

    /// Every message round-trips through the payload-carrying pair too (an empty payload).
    #[test]
    fn every_frame_round_trips_with_payload_api(frame in internal_frame()) {
        let encoded = encode_with_payload(&frame, vec![Bytes::new()], &limits()).unwrap();
        let (decoded, payload) = decode_with_payload(&encoded.to_bytes(), &limits()).unwrap();
        prop_assert_eq!(decoded, frame);
        prop_assert!(payload.is_empty());
    }

    #[test]
    fn truncated_frames_with_payload_are_refused(
        (answer, records) in replica_fetch_answer(),
        cut in any::<prop::sample::Index>(),
    ) {
        let frame = frame_of(InternalMessage::ReplicaFetchAnswer(answer));
        let payload = Bytes::from(records.concat());
        let bytes = encode_with_payload(&frame, vec![payload], &limits()).unwrap().to_bytes();
        let n = cut.index(bytes.len());
        prop_assert!(decode_with_payload(&bytes.slice(..n), &limits()).is_err());
    }

    /// The prefix rewritten to agree with a payload cut short or grown: the sum check sees it.
    #[test]
    fn a_payload_of_the_wrong_length_is_refused(
        (answer, records) in replica_fetch_answer(),
        cut in any::<prop::sample::Index>(),
        extra in vec(any::<u8>(), 1..16),
    ) {
        let frame = frame_of(InternalMessage::ReplicaFetchAnswer(answer));
        let payload = records.concat();
        let bytes = encode_with_payload(&frame, vec![Bytes::from(payload.clone())], &limits())
            .unwrap()
            .to_bytes();
        let header_bytes = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
        let header = &bytes[frame::FRAME_PREFIX_BYTES..frame::FRAME_PREFIX_BYTES + header_bytes];
        let short = &payload[..cut.index(payload.len() + 1)];
        let mut long = payload.clone();
        long.extend_from_slice(&extra);
        for wrong in [short, &long[..]] {
            if wrong.len() == payload.len() {
                continue;
            }
            let bytes = with_payload(header, wrong);
            let err = decode_with_payload(&bytes, &limits()).unwrap_err();
            let is_mismatch = matches!(
                err,
                InternalError::RecordsBytesMismatch { records_bytes, payload_bytes }
                    if records_bytes == payload.len() as u64 && payload_bytes == wrong.len()
            );
            prop_assert!(is_mismatch, "{}", err);
            prop_assert_eq!(err.error_code(), ErrorCode::CorruptMessage);
        }
    }

    #[test]
    fn bit_flipped_frames_with_payload_never_panic(
        (answer, records) in replica_fetch_answer(),
        flips in vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let frame = frame_of(InternalMessage::ReplicaFetchAnswer(answer));
        let payload = Bytes::from(records.concat());
        let mut bytes = encode_with_payload(&frame, vec![payload], &limits())
            .unwrap()
            .to_bytes()
            .to_vec();
        for (at, bit) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if let Ok((frame, payload)) = decode_with_payload(&Bytes::from(bytes), &limits()) {
            let again = encode_with_payload(&frame, vec![payload.clone()], &limits())
                .expect("a decoded frame re-encodes")
                .to_bytes();
            let (frame2, payload2) = decode_with_payload(&again, &limits()).unwrap();
            prop_assert_eq!(frame2, frame);
            prop_assert_eq!(payload2, payload);
        }
    }

    #[test]
    fn random_payload_frames_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = decode_with_payload(&Bytes::from(bytes), &limits());
    }

    #[test]
    fn bit_flipped_frames_never_panic(
        frame in internal_frame(),
        flips in vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let mut bytes = encode(&frame).unwrap().to_vec();
        for (at, bit) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        assert_sane(decode(&bytes, &limits()));
    }
}

// ---- the envelope ----

#[test]
fn an_oversize_prefix_is_refused_before_the_frame_is_read() {
    // 8 bytes that announce 4 GiB: refused from the prefix, not as "truncated" after reading.
    let mut bytes = u32::MAX.to_be_bytes().to_vec();
    bytes.extend_from_slice(&0u32.to_be_bytes());
    let err = decode(&bytes, &limits()).unwrap_err();
    assert!(
        matches!(err, InternalError::Frame(FrameError::FrameTooLarge { .. })),
        "{err}"
    );
    assert_eq!(err.error_code(), ErrorCode::MessageTooLarge);
}

#[test]
fn a_header_over_the_limit_is_refused() {
    let frame = frame_of(InternalMessage::Raft(vec![vec![7; 300]]));
    let bytes = encode(&frame).unwrap();
    let tight = FrameLimits {
        max_frame_bytes: 1024,
        max_header_bytes: 256,
    };
    let err = decode(&bytes, &tight).unwrap_err();
    assert!(
        matches!(err, InternalError::Frame(FrameError::HeaderTooLarge { .. })),
        "{err}"
    );
    // The encoder refuses it under the same limits, before building the header.
    let err = encode_with_limits(&frame, &tight).unwrap_err();
    assert!(
        matches!(err, InternalError::Frame(FrameError::HeaderTooLarge { .. })),
        "{err}"
    );
}

#[test]
fn a_header_length_past_the_frame_is_refused() {
    let mut bytes = encode(&frame_of(InternalMessage::Raft(vec![])))
        .unwrap()
        .to_vec();
    bytes[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let err = decode(&bytes, &limits()).unwrap_err();
    assert!(
        matches!(
            err,
            InternalError::Frame(FrameError::BadHeaderLength { .. })
        ),
        "{err}"
    );
}

#[test]
fn a_payload_is_refused() {
    let bytes = encode(&frame_of(InternalMessage::Raft(vec![]))).unwrap();
    let header = &bytes[frame::FRAME_PREFIX_BYTES..];
    let with_payload = frame::assemble(header, vec![bytes::Bytes::from_static(b"xyz")], &limits())
        .unwrap()
        .to_bytes();
    let err = decode(&with_payload, &limits()).unwrap_err();
    assert!(
        matches!(err, InternalError::UnexpectedPayload { payload_bytes: 3 }),
        "{err}"
    );
}

/// A whole frame around `header` and `payload` (lengths consistent).
fn with_payload(header: &[u8], payload: &[u8]) -> Bytes {
    frame::assemble(header, vec![Bytes::copy_from_slice(payload)], &limits())
        .unwrap()
        .to_bytes()
}

fn answer_partition_with(records_bytes: u32) -> ReplicaFetchAnswerPartition {
    ReplicaFetchAnswerPartition {
        topic: "t".into(),
        partition: 0,
        error: ErrorCode::None,
        high_watermark: 10,
        log_start_offset: 0,
        log_end_offset: 12,
        diverging_epoch: None,
        records_bytes,
    }
}

fn fetch_partition(topic: &str) -> ReplicaFetchPartition {
    ReplicaFetchPartition {
        topic: topic.into(),
        partition: 0,
        current_leader_epoch: Some(3),
        fetch_offset: 100,
        last_fetched_epoch: Some(2),
        log_start_offset: 0,
        durable_offset: None,
    }
}

fn fetch(partitions: Vec<ReplicaFetchPartition>) -> InternalMessage {
    InternalMessage::ReplicaFetch(ReplicaFetch {
        replica_id: 2,
        broker_epoch: Some(7),
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        partitions,
    })
}

fn answer(partitions: Vec<ReplicaFetchAnswerPartition>) -> InternalMessage {
    InternalMessage::ReplicaFetchAnswer(ReplicaFetchAnswer {
        error: ErrorCode::None,
        partitions,
    })
}

#[test]
fn encode_with_payload_checks_the_records_bytes_sum() {
    let frame = frame_of(answer(vec![
        answer_partition_with(3),
        answer_partition_with(2),
    ]));
    let five = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de")];
    encode_with_payload(&frame, five, &limits()).expect("3 + 2 bytes");
    for wrong in [
        vec![],
        vec![Bytes::from_static(b"abcd")],
        vec![Bytes::from(vec![0; 6])],
    ] {
        let err = encode_with_payload(&frame, wrong, &limits()).unwrap_err();
        assert!(
            matches!(
                err,
                InternalError::RecordsBytesMismatch {
                    records_bytes: 5,
                    ..
                }
            ),
            "{err}"
        );
    }
    // `encode` carries no payload, so an answer with records is a mismatch there too.
    assert!(matches!(
        encode(&frame),
        Err(InternalError::RecordsBytesMismatch { .. })
    ));
}

#[test]
fn records_bytes_that_overflow_a_u32_sum_are_a_mismatch() {
    let frame = frame_of(answer(vec![
        answer_partition_with(u32::MAX),
        answer_partition_with(u32::MAX),
    ]));
    let err = encode_with_payload(&frame, vec![Bytes::from_static(b"x")], &limits()).unwrap_err();
    assert!(
        matches!(
            err,
            InternalError::RecordsBytesMismatch {
                records_bytes: 8_589_934_590,
                payload_bytes: 1
            }
        ),
        "{err}"
    );
    // And decoding the same header, built by hand behind a 1-byte payload.
    let header = hand_built_header(|fbb| {
        let topic = fbb.create_string("t");
        let p = fb::ReplicaFetchAnswerPartition::create(
            fbb,
            &fb::ReplicaFetchAnswerPartitionArgs {
                topic: Some(topic),
                records_bytes: u32::MAX,
                ..Default::default()
            },
        );
        let partitions = fbb.create_vector(&[p, p]);
        let a = fb::ReplicaFetchAnswer::create(
            fbb,
            &fb::ReplicaFetchAnswerArgs {
                error: 0,
                partitions: Some(partitions),
            },
        );
        (
            fb::InternalBody::ReplicaFetchAnswer,
            Some(a.as_union_value()),
        )
    });
    let err = decode_with_payload(&with_payload(&header, b"x"), &limits()).unwrap_err();
    assert!(
        matches!(err, InternalError::RecordsBytesMismatch { .. }),
        "{err}"
    );
}

#[test]
fn a_replica_fetch_takes_no_payload() {
    let frame = frame_of(fetch(vec![fetch_partition("t")]));
    let err = encode_with_payload(&frame, vec![Bytes::from_static(b"x")], &limits()).unwrap_err();
    assert!(
        matches!(err, InternalError::UnexpectedPayload { payload_bytes: 1 }),
        "{err}"
    );
    let bytes = encode(&frame).unwrap();
    let err = decode_with_payload(
        &with_payload(&bytes[frame::FRAME_PREFIX_BYTES..], b"xyz"),
        &limits(),
    )
    .unwrap_err();
    assert!(
        matches!(err, InternalError::UnexpectedPayload { payload_bytes: 3 }),
        "{err}"
    );
    // Without a payload both decoders agree.
    let (decoded, payload) = decode_with_payload(&bytes, &limits()).unwrap();
    assert_eq!(decoded, frame);
    assert_eq!(decode(&bytes, &limits()).unwrap(), frame);
    assert!(payload.is_empty());
}

#[test]
fn a_fetch_answer_splits_its_payload_per_partition() {
    let InternalMessage::ReplicaFetchAnswer(a) = answer(vec![
        answer_partition_with(3),
        answer_partition_with(0),
        answer_partition_with(2),
    ]) else {
        unreachable!()
    };
    let payload = Bytes::from_static(b"abcde");
    let split = a.split_records(&payload).unwrap();
    assert_eq!(split, vec![&b"abc"[..], &b""[..], &b"de"[..]]);
    assert_eq!(a.split_records(&Bytes::from_static(b"abcd")), None);
}

#[test]
fn out_of_range_numbers_are_refused_both_ways() {
    let mut p = fetch_partition("t");
    p.fetch_offset = u64::MAX;
    let err = encode(&frame_of(fetch(vec![p]))).unwrap_err();
    assert!(
        matches!(
            err,
            InternalError::OutOfRange {
                field: "fetch_offset",
                ..
            }
        ),
        "{err}"
    );
    let mut p = fetch_partition("t");
    p.current_leader_epoch = Some(-2);
    assert!(matches!(
        encode(&frame_of(fetch(vec![p]))),
        Err(InternalError::OutOfRange {
            field: "current_leader_epoch",
            value: -2
        })
    ));

    // On the wire: -1 is absent, another negative is refused.
    let by_hand = |fetch_offset: i64, current_leader_epoch: i32, durable_offset: i64| {
        fetch_by_hand(1, "t", |args| {
            args.fetch_offset = fetch_offset;
            args.current_leader_epoch = current_leader_epoch;
            args.durable_offset = durable_offset;
        })
    };
    let frame = decode(&by_hand(5, -1, -1), &limits()).unwrap();
    let InternalMessage::ReplicaFetch(f) = frame.message else {
        panic!("a replica fetch, got {:?}", frame.message);
    };
    assert_eq!(f.partitions[0].fetch_offset, 5);
    assert_eq!(f.partitions[0].current_leader_epoch, None);
    assert_eq!(f.partitions[0].durable_offset, None);
    for (bytes, field) in [
        (by_hand(-5, -1, -1), "fetch_offset"),
        (by_hand(5, -2, -1), "current_leader_epoch"),
        (by_hand(5, -1, -3), "durable_offset"),
    ] {
        let err = decode(&bytes, &limits()).unwrap_err();
        assert!(
            matches!(err, InternalError::OutOfRange { field: f, .. } if f == field),
            "{field}: {err}"
        );
    }
}

/// A ReplicaFetch of `count` partitions named `topic`, each laid out from the default arguments
/// as `edit` changes them.
fn fetch_by_hand(
    count: usize,
    topic: &str,
    edit: impl Fn(&mut fb::ReplicaFetchPartitionArgs<'_>),
) -> Vec<u8> {
    hand_built(|fbb| {
        let topic = fbb.create_string(topic);
        let mut args = fb::ReplicaFetchPartitionArgs {
            topic: Some(topic),
            ..Default::default()
        };
        edit(&mut args);
        let p = fb::ReplicaFetchPartition::create(fbb, &args);
        let partitions = fbb.create_vector(&vec![p; count]);
        let f = fb::ReplicaFetch::create(
            fbb,
            &fb::ReplicaFetchArgs {
                partitions: Some(partitions),
                ..Default::default()
            },
        );
        (fb::InternalBody::ReplicaFetch, Some(f.as_union_value()))
    })
}

fn answer_by_hand(count: usize, topic: &str) -> Vec<u8> {
    hand_built(|fbb| {
        let topic = fbb.create_string(topic);
        let p = fb::ReplicaFetchAnswerPartition::create(
            fbb,
            &fb::ReplicaFetchAnswerPartitionArgs {
                topic: Some(topic),
                ..Default::default()
            },
        );
        let partitions = fbb.create_vector(&vec![p; count]);
        let a = fb::ReplicaFetchAnswer::create(
            fbb,
            &fb::ReplicaFetchAnswerArgs {
                error: 0,
                partitions: Some(partitions),
            },
        );
        (
            fb::InternalBody::ReplicaFetchAnswer,
            Some(a.as_union_value()),
        )
    })
}

#[test]
fn replica_fetch_partitions_limit() {
    let p = fetch_partition("t");
    check_limit(
        fetch(vec![p.clone(); REPLICA_FETCH_PARTITIONS_MAX]),
        fetch(vec![p; REPLICA_FETCH_PARTITIONS_MAX + 1]),
        fetch_by_hand(REPLICA_FETCH_PARTITIONS_MAX + 1, "t", |_| {}),
        "replica fetch partitions",
    );
    let p = answer_partition_with(0);
    check_limit(
        answer(vec![p.clone(); REPLICA_FETCH_PARTITIONS_MAX]),
        answer(vec![p; REPLICA_FETCH_PARTITIONS_MAX + 1]),
        answer_by_hand(REPLICA_FETCH_PARTITIONS_MAX + 1, "t"),
        "replica fetch partitions",
    );
}

#[test]
fn replica_fetch_topic_name_limit() {
    let at = "x".repeat(NAME_BYTES_MAX);
    let over = "x".repeat(NAME_BYTES_MAX + 1);
    check_limit(
        fetch(vec![fetch_partition(&at)]),
        fetch(vec![fetch_partition(&over)]),
        fetch_by_hand(1, &over, |_| {}),
        "topic name",
    );
    let named = |name: &str| ReplicaFetchAnswerPartition {
        topic: name.into(),
        ..answer_partition_with(0)
    };
    check_limit(
        answer(vec![named(&at)]),
        answer(vec![named(&over)]),
        answer_by_hand(1, &over),
        "topic name",
    );
}

// ---- bodies and unions ----

#[test]
fn a_frame_without_a_body_is_refused() {
    let bytes = hand_built(|_| (fb::InternalBody::NONE, None));
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(InternalError::MissingBody)
    ));
}

#[test]
fn an_unknown_body_is_refused() {
    let bytes = hand_built(|fbb| {
        let t = fb::NotController::create(fbb, &fb::NotControllerArgs {});
        (fb::InternalBody(200), Some(t.as_union_value()))
    });
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(InternalError::UnknownUnionType {
            union: "InternalBody",
            type_id: 200
        })
    ));
}

#[test]
fn a_forward_without_an_op_is_refused() {
    let bytes = hand_built(|fbb| {
        let t = fb::Forward::create(fbb, &fb::ForwardArgs::default());
        (fb::InternalBody::Forward, Some(t.as_union_value()))
    });
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(InternalError::MissingField {
            field: "Forward.op"
        })
    ));
}

#[test]
fn an_unknown_forward_answer_is_refused() {
    let bytes = hand_built(|fbb| {
        let n = fb::NotController::create(fbb, &fb::NotControllerArgs {});
        let t = fb::ForwardAnswer::create(
            fbb,
            &fb::ForwardAnswerArgs {
                answer_type: fb::ForwardAnswerBody(9),
                answer: Some(n.as_union_value()),
            },
        );
        (fb::InternalBody::ForwardAnswer, Some(t.as_union_value()))
    });
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(InternalError::UnknownUnionType {
            union: "ForwardAnswerBody",
            type_id: 9
        })
    ));
}

#[test]
fn a_missing_required_string_fails_verification() {
    // A Listener without a host: the schema marks it required, so the verifier refuses it. The
    // generated builder will not write one, so the table is laid out slot by slot.
    let bytes = hand_built(|fbb| {
        let name = fbb.create_string("native");
        let start = fbb.start_table();
        fbb.push_slot_always(fb::Listener::VT_NAME, name);
        let l = fbb.end_table(start);
        let l: flatbuffers::WIPOffset<fb::Listener> = flatbuffers::WIPOffset::new(l.value());
        let listeners = fbb.create_vector(&[l]);
        let cluster_id = fbb.create_string("c");
        let r = fb::RegisterBroker::create(
            fbb,
            &fb::RegisterBrokerArgs {
                listeners: Some(listeners),
                cluster_id: Some(cluster_id),
                ..Default::default()
            },
        );
        (fb::InternalBody::RegisterBroker, Some(r.as_union_value()))
    });
    let err = decode(&bytes, &limits()).unwrap_err();
    assert!(matches!(err, InternalError::Verify(_)), "{err}");
}

#[test]
fn absent_vectors_read_as_empty() {
    let bytes = hand_built(|fbb| {
        let t = fb::Raft::create(fbb, &fb::RaftArgs { messages: None });
        (fb::InternalBody::Raft, Some(t.as_union_value()))
    });
    let frame = decode(&bytes, &limits()).unwrap();
    assert_eq!(frame.message, InternalMessage::Raft(vec![]));
}

#[test]
fn unknown_error_numbers_read_as_unknown_server_error() {
    let bytes = hand_built(|fbb| {
        let t = fb::HeartbeatAnswer::create(
            fbb,
            &fb::HeartbeatAnswerArgs {
                error: 31_000,
                ..Default::default()
            },
        );
        (fb::InternalBody::HeartbeatAnswer, Some(t.as_union_value()))
    });
    let frame = decode(&bytes, &limits()).unwrap();
    let InternalMessage::HeartbeatAnswer(a) = frame.message else {
        panic!("a heartbeat answer, got {:?}", frame.message);
    };
    assert_eq!(a.error, ErrorCode::UnknownServerError);
}

#[test]
fn producer_ids_err_none_has_no_encoding() {
    let frame = frame_of(InternalMessage::ForwardAnswer(ForwardAnswer::ProducerIds(
        Err(ErrorCode::None),
    )));
    assert!(matches!(
        encode(&frame),
        Err(InternalError::ErrorCodeIsNone)
    ));
}

// ---- named limits, at the edge, both sides ----

/// `at_max` encodes and decodes; `over` is refused by `encode` and, built by hand, by `decode`,
/// both with `TooMany`/`TooLong` naming `what`.
fn check_limit(at_max: InternalMessage, over: InternalMessage, over_by_hand: Vec<u8>, what: &str) {
    let at_max = frame_of(at_max);
    let bytes = encode(&at_max).expect("at the limit encodes");
    assert_eq!(decode(&bytes, &limits()).unwrap(), at_max);

    let refused = |err: InternalError| match err {
        InternalError::TooMany { what: w, .. } | InternalError::TooLong { what: w, .. } => {
            assert_eq!(w, what);
            assert_eq!(err.error_code(), ErrorCode::MessageTooLarge);
        }
        other => panic!("{what}: expected a limit error, got {other}"),
    };
    refused(encode(&frame_of(over)).unwrap_err());
    refused(decode(&over_by_hand, &limits()).unwrap_err());
}

fn raft_by_hand(messages: &[Vec<u8>]) -> Vec<u8> {
    hand_built(|fbb| {
        let offsets: Vec<_> = messages
            .iter()
            .map(|m| {
                let data = fbb.create_vector(m);
                fb::RaftMessage::create(fbb, &fb::RaftMessageArgs { data: Some(data) })
            })
            .collect();
        let messages = fbb.create_vector(&offsets);
        let t = fb::Raft::create(
            fbb,
            &fb::RaftArgs {
                messages: Some(messages),
            },
        );
        (fb::InternalBody::Raft, Some(t.as_union_value()))
    })
}

#[test]
fn raft_messages_per_frame_limit() {
    let at = vec![vec![]; RAFT_MESSAGES_PER_FRAME_MAX];
    let over = vec![vec![]; RAFT_MESSAGES_PER_FRAME_MAX + 1];
    check_limit(
        InternalMessage::Raft(at),
        InternalMessage::Raft(over.clone()),
        raft_by_hand(&over),
        "raft messages",
    );
}

#[test]
fn raft_message_bytes_limit() {
    let at = vec![vec![1; RAFT_MESSAGE_BYTES_MAX]];
    let over = vec![vec![1; RAFT_MESSAGE_BYTES_MAX + 1]];
    check_limit(
        InternalMessage::Raft(at),
        InternalMessage::Raft(over.clone()),
        raft_by_hand(&over),
        "raft message",
    );
}

fn register_by_hand(listeners: &[Listener], cluster_id: &str) -> Vec<u8> {
    hand_built(|fbb| {
        let offsets: Vec<_> = listeners
            .iter()
            .map(|l| {
                let name = fbb.create_string(&l.name);
                let host = fbb.create_string(&l.host);
                fb::Listener::create(
                    fbb,
                    &fb::ListenerArgs {
                        name: Some(name),
                        host: Some(host),
                        port: l.port,
                    },
                )
            })
            .collect();
        let listeners = fbb.create_vector(&offsets);
        let cluster_id = fbb.create_string(cluster_id);
        let t = fb::RegisterBroker::create(
            fbb,
            &fb::RegisterBrokerArgs {
                listeners: Some(listeners),
                cluster_id: Some(cluster_id),
                ..Default::default()
            },
        );
        (fb::InternalBody::RegisterBroker, Some(t.as_union_value()))
    })
}

#[test]
fn listeners_per_registration_limit() {
    let at = vec![listener_named("native"); LISTENERS_PER_REGISTRATION_MAX];
    let over = vec![listener_named("native"); LISTENERS_PER_REGISTRATION_MAX + 1];
    check_limit(
        register(at, "c".into()),
        register(over.clone(), "c".into()),
        register_by_hand(&over, "c"),
        "listeners",
    );
}

#[test]
fn name_bytes_limit() {
    let at = "x".repeat(NAME_BYTES_MAX);
    let over = "x".repeat(NAME_BYTES_MAX + 1);
    check_limit(
        register(vec![], at.clone()),
        register(vec![], over.clone()),
        register_by_hand(&[], &over),
        "cluster id",
    );
    check_limit(
        register(vec![listener_named(&at)], "c".into()),
        register(vec![listener_named(&over)], "c".into()),
        register_by_hand(&[listener_named(&over)], "c"),
        "listener name",
    );
}

fn create_topics_by_hand(topics: &[ForwardTopic]) -> Vec<u8> {
    hand_built(|fbb| {
        let offsets: Vec<_> = topics
            .iter()
            .map(|t| {
                let configs: Vec<_> = t
                    .configs
                    .iter()
                    .map(|(k, v)| {
                        let name = fbb.create_string(k);
                        let value = fbb.create_string(v);
                        fb::TopicConfig::create(
                            fbb,
                            &fb::TopicConfigArgs {
                                name: Some(name),
                                value: Some(value),
                            },
                        )
                    })
                    .collect();
                let configs = fbb.create_vector(&configs);
                let name = fbb.create_string(&t.name);
                fb::ForwardTopic::create(
                    fbb,
                    &fb::ForwardTopicArgs {
                        name: Some(name),
                        partitions: t.partitions,
                        replication_factor: t.replication_factor,
                        configs: Some(configs),
                    },
                )
            })
            .collect();
        let topics = fbb.create_vector(&offsets);
        let create = fb::CreateTopics::create(
            fbb,
            &fb::CreateTopicsArgs {
                topics: Some(topics),
                validate_only: false,
            },
        );
        let forward = fb::Forward::create(
            fbb,
            &fb::ForwardArgs {
                op_type: fb::ForwardOp::CreateTopics,
                op: Some(create.as_union_value()),
            },
        );
        (fb::InternalBody::Forward, Some(forward.as_union_value()))
    })
}

fn create(topics: Vec<ForwardTopic>) -> InternalMessage {
    InternalMessage::Forward(ForwardOp::CreateTopics {
        topics,
        validate_only: false,
    })
}

fn topic(name: &str, configs: Vec<(String, String)>) -> ForwardTopic {
    ForwardTopic {
        name: name.into(),
        partitions: 3,
        replication_factor: 3,
        configs,
    }
}

#[test]
fn topics_per_forward_limit() {
    let at = vec![topic("t", vec![]); TOPICS_PER_FORWARD_MAX];
    let over = vec![topic("t", vec![]); TOPICS_PER_FORWARD_MAX + 1];
    check_limit(
        create(at),
        create(over.clone()),
        create_topics_by_hand(&over),
        "topics",
    );
}

#[test]
fn configs_per_topic_limit() {
    let config = ("retention.ms".to_string(), "1000".to_string());
    let at = vec![topic("t", vec![config.clone(); CONFIGS_PER_TOPIC_MAX])];
    let over = vec![topic("t", vec![config; CONFIGS_PER_TOPIC_MAX + 1])];
    check_limit(
        create(at),
        create(over.clone()),
        create_topics_by_hand(&over),
        "topic configs",
    );
}

#[test]
fn config_value_bytes_limit() {
    let config = |n| vec![("k".to_string(), "v".repeat(n))];
    let at = vec![topic("t", config(CONFIG_VALUE_BYTES_MAX))];
    let over = vec![topic("t", config(CONFIG_VALUE_BYTES_MAX + 1))];
    check_limit(
        create(at),
        create(over.clone()),
        create_topics_by_hand(&over),
        "config value",
    );
}

#[test]
fn error_message_bytes_limit() {
    let answer = |n| {
        InternalMessage::RegisterBrokerAnswer(RegisterBrokerAnswer {
            error: ErrorCode::InvalidRequest,
            message: Some("m".repeat(n)),
            broker_epoch: -1,
        })
    };
    let over_by_hand = hand_built(|fbb| {
        let message = fbb.create_string(&"m".repeat(ERROR_MESSAGE_BYTES_MAX + 1));
        let t = fb::RegisterBrokerAnswer::create(
            fbb,
            &fb::RegisterBrokerAnswerArgs {
                error: 42,
                message: Some(message),
                broker_epoch: -1,
            },
        );
        (
            fb::InternalBody::RegisterBrokerAnswer,
            Some(t.as_union_value()),
        )
    });
    check_limit(
        answer(ERROR_MESSAGE_BYTES_MAX),
        answer(ERROR_MESSAGE_BYTES_MAX + 1),
        over_by_hand,
        "error message",
    );
}

// ---- AlterPartition ----

fn alter_op(new_isr: Vec<(i32, i64)>) -> AlterPartitionOp {
    AlterPartitionOp {
        topic_id: [7; 16],
        partition: 2,
        broker_id: 1,
        broker_epoch: 10,
        leader_epoch: 3,
        partition_epoch: 5,
        new_isr,
    }
}

fn alter(op: AlterPartitionOp) -> InternalMessage {
    InternalMessage::Forward(ForwardOp::AlterPartition(op))
}

fn alter_answer(answer: Result<PartitionLeadership, AlterPartitionRefusal>) -> InternalMessage {
    InternalMessage::ForwardAnswer(ForwardAnswer::AlterPartition(answer))
}

fn leadership(replicas: Vec<i32>, isr: Vec<i32>) -> PartitionLeadership {
    PartitionLeadership {
        leader_id: 1,
        leader_epoch: 3,
        partition_epoch: 6,
        replicas,
        isr,
    }
}

/// An AlterPartition laid out from `args` as `edit` changes them, with `members` as its ISR.
fn alter_by_hand(
    members: &[(i32, i64)],
    edit: impl FnOnce(&mut fb::AlterPartitionArgs<'_>),
) -> Vec<u8> {
    hand_built(|fbb| {
        let members: Vec<fb::IsrMember> = members
            .iter()
            .map(|&(b, e)| fb::IsrMember::new(b, e))
            .collect();
        let new_isr = fbb.create_vector(&members);
        let topic_id = fb::TopicId::new(1, 2);
        let mut args = fb::AlterPartitionArgs {
            topic_id: Some(&topic_id),
            broker_epoch: 10,
            new_isr: Some(new_isr),
            ..Default::default()
        };
        edit(&mut args);
        let op = fb::AlterPartition::create(fbb, &args);
        let forward = fb::Forward::create(
            fbb,
            &fb::ForwardArgs {
                op_type: fb::ForwardOp::AlterPartition,
                op: Some(op.as_union_value()),
            },
        );
        (fb::InternalBody::Forward, Some(forward.as_union_value()))
    })
}

/// An AlterPartitionAnswer laid out from `args` as `edit` changes them.
fn alter_answer_by_hand(
    replicas: &[i32],
    edit: impl FnOnce(&mut fb::AlterPartitionAnswerArgs<'_>),
) -> Vec<u8> {
    hand_built(|fbb| {
        let replicas = fbb.create_vector(replicas);
        let mut args = fb::AlterPartitionAnswerArgs {
            replicas: Some(replicas),
            ..Default::default()
        };
        edit(&mut args);
        let a = fb::AlterPartitionAnswer::create(fbb, &args);
        let answer = fb::ForwardAnswer::create(
            fbb,
            &fb::ForwardAnswerArgs {
                answer_type: fb::ForwardAnswerBody::AlterPartitionAnswer,
                answer: Some(a.as_union_value()),
            },
        );
        (
            fb::InternalBody::ForwardAnswer,
            Some(answer.as_union_value()),
        )
    })
}

fn assert_out_of_range(result: Result<impl std::fmt::Debug, InternalError>, field: &str) {
    match result {
        Err(InternalError::OutOfRange { field: f, .. }) if f == field => {}
        other => panic!("{field}: expected OutOfRange, got {other:?}"),
    }
}

#[test]
fn alter_partition_topic_ids_keep_their_byte_order() {
    let mut op = alter_op(vec![(1, 10), (2, -1)]);
    op.topic_id = *b"0123456789abcdef";
    let frame = frame_of(alter(op.clone()));
    assert_eq!(decode(&encode(&frame).unwrap(), &limits()).unwrap(), frame);
    // The wire's `high` half is the first 8 bytes, big-endian.
    let decoded = decode(&alter_by_hand(&[], |_| {}), &limits()).unwrap();
    let InternalMessage::Forward(ForwardOp::AlterPartition(got)) = decoded.message else {
        panic!("an AlterPartition, got {:?}", decoded.message);
    };
    let mut want = [0; 16];
    want[7] = 1;
    want[15] = 2;
    assert_eq!(got.topic_id, want);
}

#[test]
fn alter_partition_negative_numbers_are_refused_both_ways() {
    // Encoding: every id and epoch, and a member's broker epoch below -1.
    let cases: Vec<(AlterPartitionOp, &str)> = vec![
        (
            AlterPartitionOp {
                partition: -1,
                ..alter_op(vec![])
            },
            "partition",
        ),
        (
            AlterPartitionOp {
                broker_id: -1,
                ..alter_op(vec![])
            },
            "broker_id",
        ),
        (
            AlterPartitionOp {
                broker_epoch: -2,
                ..alter_op(vec![])
            },
            "broker_epoch",
        ),
        (
            AlterPartitionOp {
                leader_epoch: -1,
                ..alter_op(vec![])
            },
            "leader_epoch",
        ),
        (
            AlterPartitionOp {
                partition_epoch: -1,
                ..alter_op(vec![])
            },
            "partition_epoch",
        ),
        (alter_op(vec![(1, 10), (-3, 1)]), "ISR member broker_id"),
        (alter_op(vec![(1, 10), (2, -2)]), "ISR member broker_epoch"),
    ];
    for (op, field) in cases {
        assert_out_of_range(encode(&frame_of(alter(op))), field);
    }
    // -1 broker epochs mean unknown and pass.
    let unknown = alter_op(vec![(1, -1)]);
    let unknown = AlterPartitionOp {
        broker_epoch: -1,
        ..unknown
    };
    let frame = frame_of(alter(unknown));
    assert_eq!(decode(&encode(&frame).unwrap(), &limits()).unwrap(), frame);

    // Decoding the same numbers, built by hand.
    let decode_hand = |bytes: Vec<u8>| decode(&bytes, &limits());
    assert_out_of_range(
        decode_hand(alter_by_hand(&[], |a| a.partition = -1)),
        "partition",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[], |a| a.broker_id = -7)),
        "broker_id",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[], |a| a.broker_epoch = i64::MIN)),
        "broker_epoch",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[], |a| a.leader_epoch = -1)),
        "leader_epoch",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[], |a| a.partition_epoch = i32::MIN)),
        "partition_epoch",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[(-1, 5)], |_| {})),
        "ISR member broker_id",
    );
    assert_out_of_range(
        decode_hand(alter_by_hand(&[(1, -5)], |_| {})),
        "ISR member broker_epoch",
    );

    // The answer: a leader below -1 (none), negative epochs and broker ids.
    let bad_state = |edit: fn(&mut PartitionLeadership)| {
        let mut state = leadership(vec![1, 2], vec![1]);
        edit(&mut state);
        encode(&frame_of(alter_answer(Ok(state))))
    };
    assert_out_of_range(bad_state(|s| s.leader_id = -2), "leader");
    assert_out_of_range(bad_state(|s| s.leader_epoch = -1), "leader_epoch");
    assert_out_of_range(bad_state(|s| s.partition_epoch = -1), "partition_epoch");
    assert_out_of_range(bad_state(|s| s.replicas.push(-1)), "replicas");
    assert_out_of_range(bad_state(|s| s.isr.push(-1)), "isr");
    let leaderless = PartitionLeadership {
        leader_id: -1,
        ..leadership(vec![1], vec![1])
    };
    let frame = frame_of(alter_answer(Ok(leaderless)));
    assert_eq!(decode(&encode(&frame).unwrap(), &limits()).unwrap(), frame);
    assert_out_of_range(
        encode(&frame_of(alter_answer(Err(AlterPartitionRefusal {
            error: ErrorCode::IneligibleReplica,
            ineligible_broker_id: Some(-4),
        })))),
        "ineligible_broker_id",
    );
    assert_out_of_range(
        decode_hand(alter_answer_by_hand(&[], |a| a.leader = -2)),
        "leader",
    );
    assert_out_of_range(
        decode_hand(alter_answer_by_hand(&[3, -1], |_| {})),
        "replicas",
    );
    assert_out_of_range(
        decode_hand(alter_answer_by_hand(&[], |a| {
            a.error = ErrorCode::IneligibleReplica.code();
            a.ineligible_broker_id = -9;
        })),
        "ineligible_broker_id",
    );
}

#[test]
fn alter_partition_answers_read_error_zero_as_the_state() {
    // Error 0: the state; the refusal's field is ignored. Another number: the refusal, and the
    // state is ignored — an unknown number reads as UNKNOWN_SERVER_ERROR, never as success.
    let ok = decode(
        &alter_answer_by_hand(&[1, 2], |a| {
            a.leader = 1;
            a.ineligible_broker_id = 5;
        }),
        &limits(),
    )
    .unwrap();
    assert_eq!(
        ok.message,
        alter_answer(Ok(PartitionLeadership {
            leader_id: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![],
        }))
    );
    let refused = decode(
        &alter_answer_by_hand(&[-5], |a| {
            a.error = 31_000;
            a.leader = -9;
        }),
        &limits(),
    )
    .unwrap();
    assert_eq!(
        refused.message,
        alter_answer(Err(AlterPartitionRefusal {
            error: ErrorCode::UnknownServerError,
            ineligible_broker_id: None,
        }))
    );
    let none = frame_of(alter_answer(Err(AlterPartitionRefusal {
        error: ErrorCode::None,
        ineligible_broker_id: None,
    })));
    assert!(matches!(encode(&none), Err(InternalError::ErrorCodeIsNone)));
}

#[test]
fn an_alter_partition_without_a_topic_id_fails_verification() {
    // The schema marks `topic_id` required; the generated builder asserts it, so the table is
    // laid out slot by slot.
    let bytes = hand_built(|fbb| {
        let start = fbb.start_table();
        fbb.push_slot::<i32>(fb::AlterPartition::VT_PARTITION, 1, 0);
        let op = fbb.end_table(start);
        let forward = fb::Forward::create(
            fbb,
            &fb::ForwardArgs {
                op_type: fb::ForwardOp::AlterPartition,
                op: Some(op.as_union_value()),
            },
        );
        (fb::InternalBody::Forward, Some(forward.as_union_value()))
    });
    let err = decode(&bytes, &limits()).unwrap_err();
    assert!(matches!(err, InternalError::Verify(_)), "{err}");
}

#[test]
fn replicas_per_partition_limit() {
    let members = |n: usize| vec![(1, 10); n];
    check_limit(
        alter(alter_op(members(REPLICAS_PER_PARTITION_MAX))),
        alter(alter_op(members(REPLICAS_PER_PARTITION_MAX + 1))),
        alter_by_hand(&members(REPLICAS_PER_PARTITION_MAX + 1), |_| {}),
        "ISR members",
    );
    let ids = |n: usize| vec![1; n];
    check_limit(
        alter_answer(Ok(leadership(ids(REPLICAS_PER_PARTITION_MAX), vec![1]))),
        alter_answer(Ok(leadership(ids(REPLICAS_PER_PARTITION_MAX + 1), vec![1]))),
        alter_answer_by_hand(&ids(REPLICAS_PER_PARTITION_MAX + 1), |_| {}),
        "replicas",
    );
    check_limit(
        alter_answer(Ok(leadership(vec![1], ids(REPLICAS_PER_PARTITION_MAX)))),
        alter_answer(Ok(leadership(vec![1], ids(REPLICAS_PER_PARTITION_MAX + 1)))),
        hand_built(|fbb| {
            let isr = fbb.create_vector(&ids(REPLICAS_PER_PARTITION_MAX + 1));
            let a = fb::AlterPartitionAnswer::create(
                fbb,
                &fb::AlterPartitionAnswerArgs {
                    isr: Some(isr),
                    ..Default::default()
                },
            );
            let answer = fb::ForwardAnswer::create(
                fbb,
                &fb::ForwardAnswerArgs {
                    answer_type: fb::ForwardAnswerBody::AlterPartitionAnswer,
                    answer: Some(a.as_union_value()),
                },
            );
            (
                fb::InternalBody::ForwardAnswer,
                Some(answer.as_union_value()),
            )
        }),
        "isr",
    );
}

// ---- golden bytes ----

/// A heartbeat from node 1 (correlation id 7): broker 1, epoch 5, applied offset 42, asking to be
/// fenced. The bytes are flatc 25.12.19's layout of `schemas/internal.fbs` behind the native
/// prefix; if this test fails, the wire changed — on purpose only, and with every peer upgraded.
#[test]
fn a_known_frame_has_known_bytes() {
    let frame = InternalFrame {
        from_node: 1,
        correlation_id: 7,
        cluster_id: String::new(),
        message: InternalMessage::Heartbeat(Heartbeat {
            broker_id: 1,
            broker_epoch: 5,
            current_metadata_offset: 42,
            want_fence: true,
            want_shutdown: false,
        }),
    };
    let bytes = encode(&frame).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, GOLDEN_HEARTBEAT_HEX);
    assert_eq!(decode(&bytes, &limits()).unwrap(), frame);
}

const GOLDEN_HEARTBEAT_HEX: &str = "000000540000005014000000000000000c00140008000c00070010000c000000000000040100000007000000100000000c001c0008000c00140007000c000000000000010100000005000000000000002a00000000000000";
