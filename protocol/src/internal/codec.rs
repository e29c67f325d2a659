//! Internal frames to and from bytes: [`InternalFrame`] in, one whole native frame out, and back.
//!
//! A frame is `u32 length | u32 header length | flatbuffers header | payload` with the prefix
//! layout and constants of [`crate::frame`]; the header is an `InternalFrame` of
//! `schemas/internal.fbs` ([`crate::internal_wire`]). Raft messages travel inside the header as
//! byte vectors. The payload carries replica-fetch record batches: a [`ReplicaFetchAnswer`]'s
//! partitions' records, concatenated in answer order, each partition's share sized by its
//! `records_bytes`. Every other message has an empty payload.
//!
//! Two pairs of entry points:
//! - [`encode`] / [`decode`]: one contiguous frame with an empty payload (every message but a
//!   replica-fetch answer with records; a non-empty payload is [`InternalError::UnexpectedPayload`]);
//! - [`encode_with_payload`] / [`decode_with_payload`]: the payload as chunks the leader already
//!   holds (file ranges, tail-cache bytes) written after the header without copying
//!   ([`EncodedFrame::write_to_async`]), and on the follower a zero-copy [`Bytes::slice`] of the
//!   frame it read ([`ReplicaFetchAnswer::split_records`] cuts it per partition). Both check that
//!   the partitions' `records_bytes` add up to the payload's length
//!   ([`InternalError::RecordsBytesMismatch`]).
//!
//! Reading off a socket: take the 4-byte prefix, size the frame with
//! [`crate::frame::frame_bytes_from_prefix`] (it checks `max_frame_bytes` before anything is
//! allocated), read exactly that many bytes, prefix included, and hand them to [`decode`] (or
//! [`decode_with_payload`], where a replica-fetch answer may arrive) — the
//! same steps `broker/src/connection.rs` takes for native frames. This module adds no prefix
//! helper of its own.
//!
//! [`decode`] promises, for any bytes at all:
//! - it never panics and never allocates from a count or length it has not checked: the frame
//!   and header sizes are checked against [`FrameLimits`] first, the header passes the
//!   flatbuffers verifier (depth, table count and apparent size bounded by [`verifier_options`])
//!   before any field is read, and every vector count and string length is checked against the
//!   named limits below before it is copied out;
//! - every failure is an [`InternalError`];
//! - a frame it accepts has a payload exactly as long as its `records_bytes` say (empty for every
//!   message but a [`ReplicaFetchAnswer`]).
//!
//! [`encode`] checks the same limits, so a frame it writes is one [`decode`] accepts (with the
//! default [`FrameLimits`]); a peer never sends what it would itself refuse.

use bytes::Bytes;
use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

use super::alter_partition_codec::{
    decode_alter_partition, decode_alter_partition_answer, encode_alter_partition,
    encode_alter_partition_answer,
};
use super::limits::{check_count, check_len, decode_name, encode_name, verifier_options, Fbb};
pub use super::limits::{
    InternalError, CONFIGS_PER_TOPIC_MAX, CONFIG_VALUE_BYTES_MAX, ERROR_MESSAGE_BYTES_MAX,
    LISTENERS_PER_REGISTRATION_MAX, NAME_BYTES_MAX, RAFT_MESSAGES_PER_FRAME_MAX,
    RAFT_MESSAGE_BYTES_MAX, REPLICAS_PER_PARTITION_MAX, REPLICA_FETCH_PARTITIONS_MAX,
    TOPICS_PER_FORWARD_MAX, VERIFIER_DEPTH_MAX,
};
use super::replica_fetch_codec::{
    decode_replica_fetch, decode_replica_fetch_answer, encode_replica_fetch,
    encode_replica_fetch_answer,
};
use super::topic_admin_codec;
use super::txn_markers_codec::{
    decode_verify_txn, decode_verify_txn_answer, decode_write_txn_markers,
    decode_write_txn_markers_answer, encode_verify_txn, encode_verify_txn_answer,
    encode_write_txn_markers, encode_write_txn_markers_answer,
};
use super::types::{
    ForwardAnswer, ForwardOp, ForwardTopic, ForwardTopicOutcome, Heartbeat, HeartbeatAnswer,
    InternalFrame, InternalMessage, Listener, RegisterBroker, RegisterBrokerAnswer,
};
use crate::frame::{self, EncodedFrame, FrameError, FrameLimits, FRAME_PREFIX_BYTES};
use crate::internal_wire as fb;
use crate::ErrorCode;

// ---------------------------------------------------------------------------------------------
// encode

/// Encodes one frame, whole (prefix included), under the default [`FrameLimits`].
pub fn encode(frame: &InternalFrame) -> Result<Bytes, InternalError> {
    encode_with_limits(frame, &FrameLimits::default())
}

/// Encodes one frame under `limits` (a broker whose peers run smaller limits than the default
/// passes theirs, so it never sends a frame they would refuse).
pub fn encode_with_limits(
    frame: &InternalFrame,
    limits: &FrameLimits,
) -> Result<Bytes, InternalError> {
    let encoded = encode_with_payload(frame, Vec::new(), limits)?;
    // No payload chunks: the head is the whole frame, no second copy needed.
    debug_assert_eq!(encoded.len(), encoded.head.len());
    Ok(encoded.head)
}

/// Encodes one frame with a payload: the head (prefix and header) is built here, the chunks are
/// kept as given, so the caller writes `head` then each chunk (a writev) without copying the
/// record batches. The chunks' total must equal the partitions' `records_bytes` sum of a
/// [`InternalMessage::ReplicaFetchAnswer`] ([`InternalError::RecordsBytesMismatch`]); any other
/// message takes no chunks with bytes ([`InternalError::UnexpectedPayload`]). How the chunks cut
/// the payload does not matter (one partition may span several, or one chunk several partitions).
pub fn encode_with_payload(
    frame: &InternalFrame,
    payload: Vec<Bytes>,
    limits: &FrameLimits,
) -> Result<EncodedFrame, InternalError> {
    let payload_bytes: usize = payload.iter().map(Bytes::len).sum();
    check_payload(&frame.message, payload_bytes)?;
    let mut capacity_bytes = 256;
    if let InternalMessage::Raft(messages) = &frame.message {
        // Raft bytes are the only bulk a header carries: refuse an oversize batch before the
        // builder copies it.
        let raft_bytes: usize = messages.iter().map(Vec::len).sum();
        if raft_bytes > limits.max_header_bytes {
            return Err(FrameError::HeaderTooLarge {
                header_bytes: raft_bytes,
                max_header_bytes: limits.max_header_bytes,
            }
            .into());
        }
        // Each message adds a table, a vtable and a vector length: well under 32 bytes.
        capacity_bytes += raft_bytes + messages.len() * 32;
    }
    // A partition is a table of a handful of scalars and a name: under 128 bytes with its vtable.
    match &frame.message {
        InternalMessage::ReplicaFetch(f) if f.partitions.len() <= REPLICA_FETCH_PARTITIONS_MAX => {
            capacity_bytes += f.partitions.len() * 128;
        }
        InternalMessage::ReplicaFetchAnswer(a)
            if a.partitions.len() <= REPLICA_FETCH_PARTITIONS_MAX =>
        {
            capacity_bytes += a.partitions.len() * 128;
        }
        _ => {}
    }
    let mut fbb = FlatBufferBuilder::with_capacity(capacity_bytes);
    let (body_type, body) = encode_body(&mut fbb, &frame.message)?;
    let cluster_id = (!frame.cluster_id.is_empty())
        .then(|| encode_name(&mut fbb, "cluster id", &frame.cluster_id))
        .transpose()?;
    let root = fb::InternalFrame::create(
        &mut fbb,
        &fb::InternalFrameArgs {
            from_node: frame.from_node,
            correlation_id: frame.correlation_id,
            body_type,
            body: Some(body),
            cluster_id,
        },
    );
    fbb.finish_minimal(root);
    Ok(frame::assemble(fbb.finished_data(), payload, limits)?)
}

/// The payload a message must have: its partitions' records for a replica-fetch answer, none for
/// anything else.
fn check_payload(message: &InternalMessage, payload_bytes: usize) -> Result<(), InternalError> {
    match message {
        InternalMessage::ReplicaFetchAnswer(answer) => {
            let records_bytes = answer.records_bytes();
            if records_bytes != payload_bytes as u64 {
                return Err(InternalError::RecordsBytesMismatch {
                    records_bytes,
                    payload_bytes,
                });
            }
        }
        _ if payload_bytes != 0 => return Err(InternalError::UnexpectedPayload { payload_bytes }),
        _ => {}
    }
    Ok(())
}

// Numbers whose Rust form is narrower than the wire's: an absent option is -1, offsets are
// non-negative. Encoding refuses what decoding would not give back.

fn encode_body(
    fbb: &mut Fbb<'_>,
    message: &InternalMessage,
) -> Result<(fb::InternalBody, WIPOffset<UnionWIPOffset>), InternalError> {
    Ok(match message {
        InternalMessage::Raft(messages) => {
            check_count("raft messages", messages.len(), RAFT_MESSAGES_PER_FRAME_MAX)?;
            let mut offsets = Vec::with_capacity(messages.len());
            for message in messages {
                check_len("raft message", message.len(), RAFT_MESSAGE_BYTES_MAX)?;
                let data = fbb.create_vector(message);
                offsets.push(fb::RaftMessage::create(
                    fbb,
                    &fb::RaftMessageArgs { data: Some(data) },
                ));
            }
            let messages = fbb.create_vector(&offsets);
            let raft = fb::Raft::create(
                fbb,
                &fb::RaftArgs {
                    messages: Some(messages),
                },
            );
            (fb::InternalBody::Raft, raft.as_union_value())
        }
        InternalMessage::RegisterBroker(r) => (
            fb::InternalBody::RegisterBroker,
            encode_register_broker(fbb, r)?.as_union_value(),
        ),
        InternalMessage::RegisterBrokerAnswer(a) => {
            let message = encode_opt_message(fbb, a.message.as_deref())?;
            let answer = fb::RegisterBrokerAnswer::create(
                fbb,
                &fb::RegisterBrokerAnswerArgs {
                    error: a.error.code(),
                    message,
                    broker_epoch: a.broker_epoch,
                },
            );
            (
                fb::InternalBody::RegisterBrokerAnswer,
                answer.as_union_value(),
            )
        }
        InternalMessage::Heartbeat(h) => {
            let heartbeat = fb::Heartbeat::create(
                fbb,
                &fb::HeartbeatArgs {
                    broker_id: h.broker_id,
                    broker_epoch: h.broker_epoch,
                    current_metadata_offset: h.current_metadata_offset,
                    want_fence: h.want_fence,
                    want_shutdown: h.want_shutdown,
                },
            );
            (fb::InternalBody::Heartbeat, heartbeat.as_union_value())
        }
        InternalMessage::HeartbeatAnswer(a) => {
            let answer = fb::HeartbeatAnswer::create(
                fbb,
                &fb::HeartbeatAnswerArgs {
                    error: a.error.code(),
                    is_fenced: a.is_fenced,
                    should_shutdown: a.should_shutdown,
                },
            );
            (fb::InternalBody::HeartbeatAnswer, answer.as_union_value())
        }
        InternalMessage::ReplicaFetch(f) => (
            fb::InternalBody::ReplicaFetch,
            encode_replica_fetch(fbb, f)?.as_union_value(),
        ),
        InternalMessage::ReplicaFetchAnswer(a) => (
            fb::InternalBody::ReplicaFetchAnswer,
            encode_replica_fetch_answer(fbb, a)?.as_union_value(),
        ),
        InternalMessage::WriteTxnMarkers(m) => (
            fb::InternalBody::WriteTxnMarkers,
            encode_write_txn_markers(fbb, m)?.as_union_value(),
        ),
        InternalMessage::WriteTxnMarkersAnswer(a) => (
            fb::InternalBody::WriteTxnMarkersAnswer,
            encode_write_txn_markers_answer(fbb, a)?.as_union_value(),
        ),
        InternalMessage::VerifyTxn(v) => (
            fb::InternalBody::VerifyTxn,
            encode_verify_txn(fbb, v)?.as_union_value(),
        ),
        InternalMessage::VerifyTxnAnswer(code) => (
            fb::InternalBody::VerifyTxnAnswer,
            encode_verify_txn_answer(fbb, *code).as_union_value(),
        ),
        InternalMessage::Forward(op) => {
            let (op_type, op) = encode_forward_op(fbb, op)?;
            let forward = fb::Forward::create(
                fbb,
                &fb::ForwardArgs {
                    op_type,
                    op: Some(op),
                },
            );
            (fb::InternalBody::Forward, forward.as_union_value())
        }
        InternalMessage::ForwardAnswer(answer) => {
            let (answer_type, answer) = encode_forward_answer(fbb, answer)?;
            let answer = fb::ForwardAnswer::create(
                fbb,
                &fb::ForwardAnswerArgs {
                    answer_type,
                    answer: Some(answer),
                },
            );
            (fb::InternalBody::ForwardAnswer, answer.as_union_value())
        }
    })
}

fn encode_opt_message<'b>(
    fbb: &mut Fbb<'b>,
    message: Option<&str>,
) -> Result<Option<WIPOffset<&'b str>>, InternalError> {
    message
        .map(|m| {
            check_len("error message", m.len(), ERROR_MESSAGE_BYTES_MAX)?;
            Ok(fbb.create_string(m))
        })
        .transpose()
}

fn encode_register_broker<'b>(
    fbb: &mut Fbb<'b>,
    r: &RegisterBroker,
) -> Result<WIPOffset<fb::RegisterBroker<'b>>, InternalError> {
    check_count(
        "listeners",
        r.listeners.len(),
        LISTENERS_PER_REGISTRATION_MAX,
    )?;
    let mut listeners = Vec::with_capacity(r.listeners.len());
    for l in &r.listeners {
        let name = encode_name(fbb, "listener name", &l.name)?;
        let host = encode_name(fbb, "listener host", &l.host)?;
        listeners.push(fb::Listener::create(
            fbb,
            &fb::ListenerArgs {
                name: Some(name),
                host: Some(host),
                port: l.port,
            },
        ));
    }
    let listeners = fbb.create_vector(&listeners);
    let rack = r
        .rack
        .as_deref()
        .map(|rack| encode_name(fbb, "rack", rack))
        .transpose()?;
    let cluster_id = encode_name(fbb, "cluster id", &r.cluster_id)?;
    Ok(fb::RegisterBroker::create(
        fbb,
        &fb::RegisterBrokerArgs {
            broker_id: r.broker_id,
            incarnation_high: r.incarnation_high,
            incarnation_low: r.incarnation_low,
            listeners: Some(listeners),
            rack,
            previous_broker_epoch: r.previous_broker_epoch,
            cluster_id: Some(cluster_id),
        },
    ))
}

fn encode_forward_op(
    fbb: &mut Fbb<'_>,
    op: &ForwardOp,
) -> Result<(fb::ForwardOp, WIPOffset<UnionWIPOffset>), InternalError> {
    Ok(match op {
        ForwardOp::CreateTopics {
            topics,
            validate_only,
        } => {
            check_count("topics", topics.len(), TOPICS_PER_FORWARD_MAX)?;
            let mut offsets = Vec::with_capacity(topics.len());
            for t in topics {
                offsets.push(encode_forward_topic(fbb, t)?);
            }
            let topics = fbb.create_vector(&offsets);
            let create = fb::CreateTopics::create(
                fbb,
                &fb::CreateTopicsArgs {
                    topics: Some(topics),
                    validate_only: *validate_only,
                },
            );
            (fb::ForwardOp::CreateTopics, create.as_union_value())
        }
        ForwardOp::DeleteTopics { names } => {
            check_count("topics", names.len(), TOPICS_PER_FORWARD_MAX)?;
            let mut offsets = Vec::with_capacity(names.len());
            for name in names {
                offsets.push(encode_name(fbb, "topic name", name)?);
            }
            let names = fbb.create_vector(&offsets);
            let delete =
                fb::DeleteTopics::create(fbb, &fb::DeleteTopicsArgs { names: Some(names) });
            (fb::ForwardOp::DeleteTopics, delete.as_union_value())
        }
        ForwardOp::AllocateProducerIds {
            broker_id,
            broker_epoch,
        } => {
            let allocate = fb::AllocateProducerIds::create(
                fbb,
                &fb::AllocateProducerIdsArgs {
                    broker_id: *broker_id,
                    broker_epoch: *broker_epoch,
                },
            );
            (
                fb::ForwardOp::AllocateProducerIds,
                allocate.as_union_value(),
            )
        }
        ForwardOp::AlterPartition(op) => (
            fb::ForwardOp::AlterPartition,
            encode_alter_partition(fbb, op)?.as_union_value(),
        ),
        ForwardOp::CreatePartitions {
            topics,
            validate_only,
        } => (
            fb::ForwardOp::CreatePartitions,
            topic_admin_codec::encode_create_partitions(fbb, topics, *validate_only)?
                .as_union_value(),
        ),
        ForwardOp::AlterConfigs {
            topics,
            validate_only,
        } => (
            fb::ForwardOp::AlterConfigs,
            topic_admin_codec::encode_alter_configs(fbb, topics, *validate_only)?.as_union_value(),
        ),
        ForwardOp::ElectLeaders {
            unclean,
            partitions,
        } => (
            fb::ForwardOp::ElectLeaders,
            topic_admin_codec::encode_elect_leaders(fbb, *unclean, partitions)?.as_union_value(),
        ),
    })
}

fn encode_forward_topic<'b>(
    fbb: &mut Fbb<'b>,
    t: &ForwardTopic,
) -> Result<WIPOffset<fb::ForwardTopic<'b>>, InternalError> {
    let name = encode_name(fbb, "topic name", &t.name)?;
    check_count("topic configs", t.configs.len(), CONFIGS_PER_TOPIC_MAX)?;
    let mut configs = Vec::with_capacity(t.configs.len());
    for (key, value) in &t.configs {
        let key = encode_name(fbb, "config name", key)?;
        check_len("config value", value.len(), CONFIG_VALUE_BYTES_MAX)?;
        let value = fbb.create_string(value);
        configs.push(fb::TopicConfig::create(
            fbb,
            &fb::TopicConfigArgs {
                name: Some(key),
                value: Some(value),
            },
        ));
    }
    let configs = fbb.create_vector(&configs);
    Ok(fb::ForwardTopic::create(
        fbb,
        &fb::ForwardTopicArgs {
            name: Some(name),
            partitions: t.partitions,
            replication_factor: t.replication_factor,
            configs: Some(configs),
        },
    ))
}

fn encode_forward_answer(
    fbb: &mut Fbb<'_>,
    answer: &ForwardAnswer,
) -> Result<(fb::ForwardAnswerBody, WIPOffset<UnionWIPOffset>), InternalError> {
    Ok(match answer {
        ForwardAnswer::Topics(outcomes) => {
            check_count("topic outcomes", outcomes.len(), TOPICS_PER_FORWARD_MAX)?;
            let mut offsets = Vec::with_capacity(outcomes.len());
            for o in outcomes {
                let name = encode_name(fbb, "topic name", &o.name)?;
                let message = encode_opt_message(fbb, o.message.as_deref())?;
                offsets.push(fb::ForwardTopicOutcome::create(
                    fbb,
                    &fb::ForwardTopicOutcomeArgs {
                        name: Some(name),
                        error: o.error.code(),
                        message,
                    },
                ));
            }
            let topics = fbb.create_vector(&offsets);
            let outcomes = fb::TopicOutcomes::create(
                fbb,
                &fb::TopicOutcomesArgs {
                    topics: Some(topics),
                },
            );
            (
                fb::ForwardAnswerBody::TopicOutcomes,
                outcomes.as_union_value(),
            )
        }
        ForwardAnswer::ProducerIds(result) => {
            let args = match *result {
                Ok((first_producer_id, block_size)) => fb::ProducerIdsArgs {
                    error: ErrorCode::None.code(),
                    first_producer_id,
                    block_size,
                },
                Err(ErrorCode::None) => return Err(InternalError::ErrorCodeIsNone),
                Err(error) => fb::ProducerIdsArgs {
                    error: error.code(),
                    first_producer_id: 0,
                    block_size: 0,
                },
            };
            let ids = fb::ProducerIds::create(fbb, &args);
            (fb::ForwardAnswerBody::ProducerIds, ids.as_union_value())
        }
        ForwardAnswer::NotController => {
            let not = fb::NotController::create(fbb, &fb::NotControllerArgs {});
            (fb::ForwardAnswerBody::NotController, not.as_union_value())
        }
        ForwardAnswer::AlterPartition(answer) => (
            fb::ForwardAnswerBody::AlterPartitionAnswer,
            encode_alter_partition_answer(fbb, answer)?.as_union_value(),
        ),
    })
}

// ---------------------------------------------------------------------------------------------
// decode

/// Decodes one whole frame, prefix included, exactly as read off the socket (see the module doc).
/// The frame must have an empty payload ([`decode_with_payload`] takes one).
pub fn decode(frame: &[u8], limits: &FrameLimits) -> Result<InternalFrame, InternalError> {
    let (header, payload) = split(frame, limits)?;
    if !payload.is_empty() {
        return Err(InternalError::UnexpectedPayload {
            payload_bytes: payload.len(),
        });
    }
    decode_header(header, 0)
}

/// Decodes one whole frame like [`decode`], and returns its payload alongside: a zero-copy slice
/// of `frame`, exactly as long as a [`ReplicaFetchAnswer`]'s partitions' `records_bytes` add up
/// to (checked: [`InternalError::RecordsBytesMismatch`]), and empty for every other message.
pub fn decode_with_payload(
    frame: &Bytes,
    limits: &FrameLimits,
) -> Result<(InternalFrame, Bytes), InternalError> {
    let (header, payload) = split(frame, limits)?;
    let payload_bytes = payload.len();
    let decoded = decode_header(header, payload_bytes)?;
    Ok((decoded, frame.slice(frame.len() - payload_bytes..)))
}

/// The header of a frame whose payload is `payload_bytes` long.
fn decode_header(header: &[u8], payload_bytes: usize) -> Result<InternalFrame, InternalError> {
    let root = fb::root_as_internal_frame_with_opts(&verifier_options(header.len()), header)?;
    let message = match root.body_type() {
        fb::InternalBody::NONE => return Err(InternalError::MissingBody),
        fb::InternalBody::Raft => {
            decode_raft(root.body_as_raft().ok_or(InternalError::MissingBody)?)?
        }
        fb::InternalBody::RegisterBroker => {
            InternalMessage::RegisterBroker(decode_register_broker(
                root.body_as_register_broker()
                    .ok_or(InternalError::MissingBody)?,
            )?)
        }
        fb::InternalBody::RegisterBrokerAnswer => {
            let a = root
                .body_as_register_broker_answer()
                .ok_or(InternalError::MissingBody)?;
            InternalMessage::RegisterBrokerAnswer(RegisterBrokerAnswer {
                error: ErrorCode::from_wire(a.error()),
                message: decode_opt_message(a.message())?,
                broker_epoch: a.broker_epoch(),
            })
        }
        fb::InternalBody::Heartbeat => {
            let h = root.body_as_heartbeat().ok_or(InternalError::MissingBody)?;
            InternalMessage::Heartbeat(Heartbeat {
                broker_id: h.broker_id(),
                broker_epoch: h.broker_epoch(),
                current_metadata_offset: h.current_metadata_offset(),
                want_fence: h.want_fence(),
                want_shutdown: h.want_shutdown(),
            })
        }
        fb::InternalBody::HeartbeatAnswer => {
            let a = root
                .body_as_heartbeat_answer()
                .ok_or(InternalError::MissingBody)?;
            InternalMessage::HeartbeatAnswer(HeartbeatAnswer {
                error: ErrorCode::from_wire(a.error()),
                is_fenced: a.is_fenced(),
                should_shutdown: a.should_shutdown(),
            })
        }
        fb::InternalBody::Forward => InternalMessage::Forward(decode_forward_op(
            root.body_as_forward().ok_or(InternalError::MissingBody)?,
        )?),
        fb::InternalBody::ForwardAnswer => InternalMessage::ForwardAnswer(decode_forward_answer(
            root.body_as_forward_answer()
                .ok_or(InternalError::MissingBody)?,
        )?),
        fb::InternalBody::ReplicaFetch => InternalMessage::ReplicaFetch(decode_replica_fetch(
            root.body_as_replica_fetch()
                .ok_or(InternalError::MissingBody)?,
        )?),
        fb::InternalBody::ReplicaFetchAnswer => {
            InternalMessage::ReplicaFetchAnswer(decode_replica_fetch_answer(
                root.body_as_replica_fetch_answer()
                    .ok_or(InternalError::MissingBody)?,
            )?)
        }
        fb::InternalBody::WriteTxnMarkers => {
            InternalMessage::WriteTxnMarkers(decode_write_txn_markers(
                root.body_as_write_txn_markers()
                    .ok_or(InternalError::MissingBody)?,
            )?)
        }
        fb::InternalBody::WriteTxnMarkersAnswer => {
            InternalMessage::WriteTxnMarkersAnswer(decode_write_txn_markers_answer(
                root.body_as_write_txn_markers_answer()
                    .ok_or(InternalError::MissingBody)?,
            )?)
        }
        fb::InternalBody::VerifyTxn => InternalMessage::VerifyTxn(decode_verify_txn(
            root.body_as_verify_txn()
                .ok_or(InternalError::MissingBody)?,
        )?),
        fb::InternalBody::VerifyTxnAnswer => {
            InternalMessage::VerifyTxnAnswer(decode_verify_txn_answer(
                root.body_as_verify_txn_answer()
                    .ok_or(InternalError::MissingBody)?,
            ))
        }
        other => {
            return Err(InternalError::UnknownUnionType {
                union: "InternalBody",
                type_id: other.0,
            })
        }
    };
    check_payload(&message, payload_bytes)?;
    Ok(InternalFrame {
        from_node: root.from_node(),
        correlation_id: root.correlation_id(),
        message,
        cluster_id: decode_name("cluster id", root.cluster_id().unwrap_or_default())?,
    })
}

/// [`crate::frame::split_frame`]'s checks, in its order, on a borrowed frame (so decoding needs
/// no owned copy of what the caller already holds).
fn split<'f>(frame: &'f [u8], limits: &FrameLimits) -> Result<(&'f [u8], &'f [u8]), FrameError> {
    let [l0, l1, l2, l3, h0, h1, h2, h3, rest @ ..] = frame else {
        return Err(FrameError::Truncated {
            needed: FRAME_PREFIX_BYTES,
            have: frame.len(),
        });
    };
    let frame_bytes = frame::frame_bytes_from_prefix([*l0, *l1, *l2, *l3], limits)?;
    if frame.len() != frame_bytes {
        return Err(FrameError::Truncated {
            needed: frame_bytes,
            have: frame.len(),
        });
    }
    debug_assert_eq!(rest.len(), frame_bytes - FRAME_PREFIX_BYTES);
    let header_bytes = u32::from_be_bytes([*h0, *h1, *h2, *h3]);
    let Some((header, payload)) = rest.split_at_checked(header_bytes as usize) else {
        return Err(FrameError::BadHeaderLength {
            header_bytes,
            frame_bytes,
        });
    };
    if header.len() > limits.max_header_bytes {
        return Err(FrameError::HeaderTooLarge {
            header_bytes: header.len(),
            max_header_bytes: limits.max_header_bytes,
        });
    }
    Ok((header, payload))
}

fn decode_opt_message(message: Option<&str>) -> Result<Option<String>, InternalError> {
    message
        .map(|m| {
            check_len("error message", m.len(), ERROR_MESSAGE_BYTES_MAX)?;
            Ok(m.to_owned())
        })
        .transpose()
}

fn decode_raft(raft: fb::Raft<'_>) -> Result<InternalMessage, InternalError> {
    let Some(messages) = raft.messages() else {
        return Ok(InternalMessage::Raft(Vec::new()));
    };
    check_count("raft messages", messages.len(), RAFT_MESSAGES_PER_FRAME_MAX)?;
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let data = m.data();
        check_len("raft message", data.len(), RAFT_MESSAGE_BYTES_MAX)?;
        out.push(data.bytes().to_vec());
    }
    Ok(InternalMessage::Raft(out))
}

fn decode_register_broker(r: fb::RegisterBroker<'_>) -> Result<RegisterBroker, InternalError> {
    let mut listeners = Vec::new();
    if let Some(ls) = r.listeners() {
        check_count("listeners", ls.len(), LISTENERS_PER_REGISTRATION_MAX)?;
        listeners.reserve_exact(ls.len());
        for l in ls {
            listeners.push(Listener {
                name: decode_name("listener name", l.name())?,
                host: decode_name("listener host", l.host())?,
                port: l.port(),
            });
        }
    }
    Ok(RegisterBroker {
        broker_id: r.broker_id(),
        incarnation_high: r.incarnation_high(),
        incarnation_low: r.incarnation_low(),
        listeners,
        rack: r.rack().map(|rack| decode_name("rack", rack)).transpose()?,
        previous_broker_epoch: r.previous_broker_epoch(),
        cluster_id: decode_name("cluster id", r.cluster_id())?,
    })
}

fn decode_forward_op(forward: fb::Forward<'_>) -> Result<ForwardOp, InternalError> {
    const MISSING: InternalError = InternalError::MissingField {
        field: "Forward.op",
    };
    match forward.op_type() {
        fb::ForwardOp::NONE => Err(MISSING),
        fb::ForwardOp::CreateTopics => {
            let create = forward.op_as_create_topics().ok_or(MISSING)?;
            let mut topics = Vec::new();
            if let Some(ts) = create.topics() {
                check_count("topics", ts.len(), TOPICS_PER_FORWARD_MAX)?;
                topics.reserve_exact(ts.len());
                for t in ts {
                    topics.push(decode_forward_topic(t)?);
                }
            }
            Ok(ForwardOp::CreateTopics {
                topics,
                validate_only: create.validate_only(),
            })
        }
        fb::ForwardOp::DeleteTopics => {
            let delete = forward.op_as_delete_topics().ok_or(MISSING)?;
            let mut names = Vec::new();
            if let Some(ns) = delete.names() {
                check_count("topics", ns.len(), TOPICS_PER_FORWARD_MAX)?;
                names.reserve_exact(ns.len());
                for name in ns {
                    names.push(decode_name("topic name", name)?);
                }
            }
            Ok(ForwardOp::DeleteTopics { names })
        }
        fb::ForwardOp::AllocateProducerIds => {
            let allocate = forward.op_as_allocate_producer_ids().ok_or(MISSING)?;
            Ok(ForwardOp::AllocateProducerIds {
                broker_id: allocate.broker_id(),
                broker_epoch: allocate.broker_epoch(),
            })
        }
        fb::ForwardOp::AlterPartition => Ok(ForwardOp::AlterPartition(decode_alter_partition(
            forward.op_as_alter_partition().ok_or(MISSING)?,
        )?)),
        fb::ForwardOp::CreatePartitions => {
            let (topics, validate_only) = topic_admin_codec::decode_create_partitions(
                forward.op_as_create_partitions().ok_or(MISSING)?,
            )?;
            Ok(ForwardOp::CreatePartitions {
                topics,
                validate_only,
            })
        }
        fb::ForwardOp::AlterConfigs => {
            let (topics, validate_only) = topic_admin_codec::decode_alter_configs(
                forward.op_as_alter_configs().ok_or(MISSING)?,
            )?;
            Ok(ForwardOp::AlterConfigs {
                topics,
                validate_only,
            })
        }
        fb::ForwardOp::ElectLeaders => {
            let (unclean, partitions) = topic_admin_codec::decode_elect_leaders(
                forward.op_as_elect_leaders().ok_or(MISSING)?,
            )?;
            Ok(ForwardOp::ElectLeaders {
                unclean,
                partitions,
            })
        }
        other => Err(InternalError::UnknownUnionType {
            union: "ForwardOp",
            type_id: other.0,
        }),
    }
}

fn decode_forward_topic(t: fb::ForwardTopic<'_>) -> Result<ForwardTopic, InternalError> {
    let name = decode_name("topic name", t.name())?;
    let mut configs = Vec::new();
    if let Some(cs) = t.configs() {
        check_count("topic configs", cs.len(), CONFIGS_PER_TOPIC_MAX)?;
        configs.reserve_exact(cs.len());
        for c in cs {
            let key = decode_name("config name", c.name())?;
            let value = c.value();
            check_len("config value", value.len(), CONFIG_VALUE_BYTES_MAX)?;
            configs.push((key, value.to_owned()));
        }
    }
    Ok(ForwardTopic {
        name,
        partitions: t.partitions(),
        replication_factor: t.replication_factor(),
        configs,
    })
}

fn decode_forward_answer(answer: fb::ForwardAnswer<'_>) -> Result<ForwardAnswer, InternalError> {
    const MISSING: InternalError = InternalError::MissingField {
        field: "ForwardAnswer.answer",
    };
    match answer.answer_type() {
        fb::ForwardAnswerBody::NONE => Err(MISSING),
        fb::ForwardAnswerBody::TopicOutcomes => {
            let outcomes = answer.answer_as_topic_outcomes().ok_or(MISSING)?;
            let mut out = Vec::new();
            if let Some(ts) = outcomes.topics() {
                check_count("topic outcomes", ts.len(), TOPICS_PER_FORWARD_MAX)?;
                out.reserve_exact(ts.len());
                for t in ts {
                    out.push(ForwardTopicOutcome {
                        name: decode_name("topic name", t.name())?,
                        error: ErrorCode::from_wire(t.error()),
                        message: decode_opt_message(t.message())?,
                    });
                }
            }
            Ok(ForwardAnswer::Topics(out))
        }
        fb::ForwardAnswerBody::ProducerIds => {
            let ids = answer.answer_as_producer_ids().ok_or(MISSING)?;
            // Error 0 is success; any other number (an unknown one reads as
            // UNKNOWN_SERVER_ERROR, never as NONE) is the refusal, and the block is ignored.
            let result = match ErrorCode::from_wire(ids.error()) {
                ErrorCode::None => Ok((ids.first_producer_id(), ids.block_size())),
                error => Err(error),
            };
            Ok(ForwardAnswer::ProducerIds(result))
        }
        fb::ForwardAnswerBody::NotController => {
            answer.answer_as_not_controller().ok_or(MISSING)?;
            Ok(ForwardAnswer::NotController)
        }
        fb::ForwardAnswerBody::AlterPartitionAnswer => Ok(ForwardAnswer::AlterPartition(
            decode_alter_partition_answer(
                answer.answer_as_alter_partition_answer().ok_or(MISSING)?,
            )?,
        )),
        other => Err(InternalError::UnknownUnionType {
            union: "ForwardAnswerBody",
            type_id: other.0,
        }),
    }
}
