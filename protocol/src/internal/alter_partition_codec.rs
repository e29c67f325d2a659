//! AlterPartition to and from its flatbuffers form (`AlterPartition`, `AlterPartitionAnswer` of
//! `schemas/internal.fbs`): a partition leader's ISR change forwarded to the active controller,
//! and the controller's answer — the partition's committed state or why not.
//!
//! Owns: these two messages' fields, each checked against its range on both sides (ids and
//! epochs non-negative; a broker epoch -1 for unknown; the answer's leader -1 for none), the ISR
//! and replica counts against [`REPLICAS_PER_PARTITION_MAX`], and the answer's "error 0 means
//! the state, anything else the refusal" reading. Never does: frame, verify or route a message
//! (the codec does), or decide anything about the partition (the controller does).

use flatbuffers::WIPOffset;

use super::limits::{
    at_least, check_count, opt_i32_from_wire, opt_i32_to_wire, Fbb, InternalError,
    REPLICAS_PER_PARTITION_MAX,
};
use super::types::{AlterPartitionOp, AlterPartitionRefusal, PartitionLeadership};
use crate::internal_wire as fb;
use crate::ErrorCode;

/// Ids, epochs and partition indexes.
const NON_NEGATIVE: i128 = 0;
/// Broker epochs (-1: unknown) and leaders (-1: none).
const OR_MINUS_ONE: i128 = -1;

pub(super) fn encode_alter_partition<'b>(
    fbb: &mut Fbb<'b>,
    op: &AlterPartitionOp,
) -> Result<WIPOffset<fb::AlterPartition<'b>>, InternalError> {
    check_count("ISR members", op.new_isr.len(), REPLICAS_PER_PARTITION_MAX)?;
    let mut members = Vec::with_capacity(op.new_isr.len());
    for &(broker_id, broker_epoch) in &op.new_isr {
        members.push(fb::IsrMember::new(
            at_least("ISR member broker_id", broker_id, NON_NEGATIVE)?,
            at_least("ISR member broker_epoch", broker_epoch, OR_MINUS_ONE)?,
        ));
    }
    let new_isr = fbb.create_vector(&members);
    let (high, low) = topic_id_halves(op.topic_id);
    let topic_id = fb::TopicId::new(high, low);
    Ok(fb::AlterPartition::create(
        fbb,
        &fb::AlterPartitionArgs {
            topic_id: Some(&topic_id),
            partition: at_least("partition", op.partition, NON_NEGATIVE)?,
            broker_id: at_least("broker_id", op.broker_id, NON_NEGATIVE)?,
            broker_epoch: at_least("broker_epoch", op.broker_epoch, OR_MINUS_ONE)?,
            leader_epoch: at_least("leader_epoch", op.leader_epoch, NON_NEGATIVE)?,
            partition_epoch: at_least("partition_epoch", op.partition_epoch, NON_NEGATIVE)?,
            new_isr: Some(new_isr),
        },
    ))
}

pub(super) fn decode_alter_partition(
    a: fb::AlterPartition<'_>,
) -> Result<AlterPartitionOp, InternalError> {
    let mut new_isr = Vec::new();
    if let Some(members) = a.new_isr() {
        check_count("ISR members", members.len(), REPLICAS_PER_PARTITION_MAX)?;
        new_isr.reserve_exact(members.len());
        for m in members {
            new_isr.push((
                at_least("ISR member broker_id", m.broker_id(), NON_NEGATIVE)?,
                at_least("ISR member broker_epoch", m.broker_epoch(), OR_MINUS_ONE)?,
            ));
        }
    }
    let topic_id = a.topic_id();
    Ok(AlterPartitionOp {
        topic_id: topic_id_bytes(topic_id.high(), topic_id.low()),
        partition: at_least("partition", a.partition(), NON_NEGATIVE)?,
        broker_id: at_least("broker_id", a.broker_id(), NON_NEGATIVE)?,
        broker_epoch: at_least("broker_epoch", a.broker_epoch(), OR_MINUS_ONE)?,
        leader_epoch: at_least("leader_epoch", a.leader_epoch(), NON_NEGATIVE)?,
        partition_epoch: at_least("partition_epoch", a.partition_epoch(), NON_NEGATIVE)?,
        new_isr,
    })
}

pub(super) fn encode_alter_partition_answer<'b>(
    fbb: &mut Fbb<'b>,
    answer: &Result<PartitionLeadership, AlterPartitionRefusal>,
) -> Result<WIPOffset<fb::AlterPartitionAnswer<'b>>, InternalError> {
    let args = match answer {
        Ok(state) => {
            let replicas = broker_ids(fbb, "replicas", &state.replicas)?;
            let isr = broker_ids(fbb, "isr", &state.isr)?;
            fb::AlterPartitionAnswerArgs {
                error: ErrorCode::None.code(),
                ineligible_broker_id: -1,
                leader: at_least("leader", state.leader_id, OR_MINUS_ONE)?,
                leader_epoch: at_least("leader_epoch", state.leader_epoch, NON_NEGATIVE)?,
                partition_epoch: at_least("partition_epoch", state.partition_epoch, NON_NEGATIVE)?,
                replicas: Some(replicas),
                isr: Some(isr),
            }
        }
        Err(refusal) if refusal.error == ErrorCode::None => {
            return Err(InternalError::ErrorCodeIsNone)
        }
        Err(refusal) => fb::AlterPartitionAnswerArgs {
            error: refusal.error.code(),
            ineligible_broker_id: opt_i32_to_wire(
                "ineligible_broker_id",
                refusal.ineligible_broker_id,
            )?,
            ..Default::default()
        },
    };
    Ok(fb::AlterPartitionAnswer::create(fbb, &args))
}

pub(super) fn decode_alter_partition_answer(
    a: fb::AlterPartitionAnswer<'_>,
) -> Result<Result<PartitionLeadership, AlterPartitionRefusal>, InternalError> {
    // Error 0 is the committed state; any other number (an unknown one reads as
    // UNKNOWN_SERVER_ERROR, never as NONE) is the refusal, and the state fields are ignored.
    match ErrorCode::from_wire(a.error()) {
        ErrorCode::None => Ok(Ok(PartitionLeadership {
            leader_id: at_least("leader", a.leader(), OR_MINUS_ONE)?,
            leader_epoch: at_least("leader_epoch", a.leader_epoch(), NON_NEGATIVE)?,
            partition_epoch: at_least("partition_epoch", a.partition_epoch(), NON_NEGATIVE)?,
            replicas: decode_broker_ids("replicas", a.replicas())?,
            isr: decode_broker_ids("isr", a.isr())?,
        })),
        error => Ok(Err(AlterPartitionRefusal {
            error,
            ineligible_broker_id: opt_i32_from_wire(
                "ineligible_broker_id",
                a.ineligible_broker_id(),
            )?,
        })),
    }
}

fn broker_ids<'b>(
    fbb: &mut Fbb<'b>,
    what: &'static str,
    ids: &[i32],
) -> Result<WIPOffset<flatbuffers::Vector<'b, i32>>, InternalError> {
    check_count(what, ids.len(), REPLICAS_PER_PARTITION_MAX)?;
    for &id in ids {
        at_least(what, id, NON_NEGATIVE)?;
    }
    Ok(fbb.create_vector(ids))
}

fn decode_broker_ids(
    what: &'static str,
    ids: Option<flatbuffers::Vector<'_, i32>>,
) -> Result<Vec<i32>, InternalError> {
    let Some(ids) = ids else {
        return Ok(Vec::new());
    };
    check_count(what, ids.len(), REPLICAS_PER_PARTITION_MAX)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(at_least(what, id, NON_NEGATIVE)?);
    }
    Ok(out)
}

/// The wire's two halves of a topic id (the `high` half is its first 8 bytes, big-endian).
fn topic_id_halves(id: [u8; 16]) -> (u64, u64) {
    let [h0, h1, h2, h3, h4, h5, h6, h7, l0, l1, l2, l3, l4, l5, l6, l7] = id;
    (
        u64::from_be_bytes([h0, h1, h2, h3, h4, h5, h6, h7]),
        u64::from_be_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
    )
}

fn topic_id_bytes(high: u64, low: u64) -> [u8; 16] {
    let mut id = [0; 16];
    id[..8].copy_from_slice(&high.to_be_bytes());
    id[8..].copy_from_slice(&low.to_be_bytes());
    id
}
