//! The internal protocol's codec (`spool_protocol::internal`), through its public API only:
//! - every `InternalFrame` of every variant round-trips (`decode(encode(x)) == x`, proptest);
//! - truncated frames, random bytes and bit-flipped valid frames never panic, and what decodes is
//!   a frame `encode` accepts again (proptest);
//! - each named limit holds at its edge, on both sides (encode refuses, and decode refuses a
//!   header built by hand past the limit);
//! - a frame announcing more than the limit is refused from its prefix alone;
//! - a missing body, a missing union value and an unknown union member are typed errors;
//! - one small frame's bytes are pinned (a golden test), so a schema or layout change that alters
//!   the wire is seen.

use flatbuffers::FlatBufferBuilder;
use proptest::collection::vec;
use proptest::prelude::*;
use spool_protocol::frame::{self, FrameError, FrameLimits};
use spool_protocol::internal::codec::{
    CONFIGS_PER_TOPIC_MAX, CONFIG_VALUE_BYTES_MAX, ERROR_MESSAGE_BYTES_MAX,
    LISTENERS_PER_REGISTRATION_MAX, NAME_BYTES_MAX, RAFT_MESSAGES_PER_FRAME_MAX,
    RAFT_MESSAGE_BYTES_MAX, TOPICS_PER_FORWARD_MAX,
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
    ]
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
    frame_around(fbb.finished_data())
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
