//! Replica fetches to and from their flatbuffers form (`ReplicaFetch`, `ReplicaFetchAnswer` of
//! `schemas/internal.fbs`): a follower's request for many partitions, and the leader's answer
//! whose records travel in the frame's payload ([`super::codec::encode_with_payload`]).
//!
//! Owns: these two messages' fields, each checked against its range ("-1 means absent" epochs
//! and offsets, offsets within `i64`) and the partition count against
//! [`REPLICA_FETCH_PARTITIONS_MAX`]. Never does: frame, verify or route a message (the codec
//! does), or check records against the payload (the codec does, once the header is read).

use flatbuffers::WIPOffset;

use super::limits::{
    check_count, decode_name, encode_name, opt_i32_from_wire, opt_i32_to_wire, opt_i64_from_wire,
    opt_i64_to_wire, opt_u64_from_wire, opt_u64_to_wire, u64_from_wire, u64_to_wire, Fbb,
    InternalError, REPLICA_FETCH_PARTITIONS_MAX,
};
use super::types::{
    EpochEndOffset, ReplicaFetch, ReplicaFetchAnswer, ReplicaFetchAnswerPartition,
    ReplicaFetchPartition,
};
use crate::internal_wire as fb;
use crate::ErrorCode;

pub(super) fn encode_replica_fetch<'b>(
    fbb: &mut Fbb<'b>,
    f: &ReplicaFetch,
) -> Result<WIPOffset<fb::ReplicaFetch<'b>>, InternalError> {
    check_count(
        "replica fetch partitions",
        f.partitions.len(),
        REPLICA_FETCH_PARTITIONS_MAX,
    )?;
    let mut partitions = Vec::with_capacity(f.partitions.len());
    for p in &f.partitions {
        let topic = encode_name(fbb, "topic name", &p.topic)?;
        let args = fb::ReplicaFetchPartitionArgs {
            topic: Some(topic),
            partition: p.partition,
            current_leader_epoch: opt_i32_to_wire("current_leader_epoch", p.current_leader_epoch)?,
            fetch_offset: u64_to_wire("fetch_offset", p.fetch_offset)?,
            last_fetched_epoch: opt_i32_to_wire("last_fetched_epoch", p.last_fetched_epoch)?,
            log_start_offset: u64_to_wire("log_start_offset", p.log_start_offset)?,
            durable_offset: opt_u64_to_wire("durable_offset", p.durable_offset)?,
        };
        partitions.push(fb::ReplicaFetchPartition::create(fbb, &args));
    }
    let partitions = fbb.create_vector(&partitions);
    Ok(fb::ReplicaFetch::create(
        fbb,
        &fb::ReplicaFetchArgs {
            replica_id: f.replica_id,
            broker_epoch: opt_i64_to_wire("broker_epoch", f.broker_epoch)?,
            max_wait_ms: f.max_wait_ms,
            min_bytes: f.min_bytes,
            max_bytes: f.max_bytes,
            partitions: Some(partitions),
        },
    ))
}

pub(super) fn encode_replica_fetch_answer<'b>(
    fbb: &mut Fbb<'b>,
    a: &ReplicaFetchAnswer,
) -> Result<WIPOffset<fb::ReplicaFetchAnswer<'b>>, InternalError> {
    check_count(
        "replica fetch partitions",
        a.partitions.len(),
        REPLICA_FETCH_PARTITIONS_MAX,
    )?;
    let mut partitions = Vec::with_capacity(a.partitions.len());
    for p in &a.partitions {
        let topic = encode_name(fbb, "topic name", &p.topic)?;
        let diverging_epoch = p
            .diverging_epoch
            .map(|d| fb::EpochEndOffset::new(d.epoch, d.end_offset));
        partitions.push(fb::ReplicaFetchAnswerPartition::create(
            fbb,
            &fb::ReplicaFetchAnswerPartitionArgs {
                topic: Some(topic),
                partition: p.partition,
                error: p.error.code(),
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                log_end_offset: p.log_end_offset,
                diverging_epoch: diverging_epoch.as_ref(),
                records_bytes: p.records_bytes,
            },
        ));
    }
    let partitions = fbb.create_vector(&partitions);
    Ok(fb::ReplicaFetchAnswer::create(
        fbb,
        &fb::ReplicaFetchAnswerArgs {
            error: a.error.code(),
            partitions: Some(partitions),
        },
    ))
}

pub(super) fn decode_replica_fetch(f: fb::ReplicaFetch<'_>) -> Result<ReplicaFetch, InternalError> {
    let mut partitions = Vec::new();
    if let Some(ps) = f.partitions() {
        check_count(
            "replica fetch partitions",
            ps.len(),
            REPLICA_FETCH_PARTITIONS_MAX,
        )?;
        partitions.reserve_exact(ps.len());
        for p in ps {
            partitions.push(ReplicaFetchPartition {
                topic: decode_name("topic name", p.topic())?,
                partition: p.partition(),
                current_leader_epoch: opt_i32_from_wire(
                    "current_leader_epoch",
                    p.current_leader_epoch(),
                )?,
                fetch_offset: u64_from_wire("fetch_offset", p.fetch_offset())?,
                last_fetched_epoch: opt_i32_from_wire(
                    "last_fetched_epoch",
                    p.last_fetched_epoch(),
                )?,
                log_start_offset: u64_from_wire("log_start_offset", p.log_start_offset())?,
                durable_offset: opt_u64_from_wire("durable_offset", p.durable_offset())?,
            });
        }
    }
    Ok(ReplicaFetch {
        replica_id: f.replica_id(),
        broker_epoch: opt_i64_from_wire("broker_epoch", f.broker_epoch())?,
        max_wait_ms: f.max_wait_ms(),
        min_bytes: f.min_bytes(),
        max_bytes: f.max_bytes(),
        partitions,
    })
}

pub(super) fn decode_replica_fetch_answer(
    a: fb::ReplicaFetchAnswer<'_>,
) -> Result<ReplicaFetchAnswer, InternalError> {
    let mut partitions = Vec::new();
    if let Some(ps) = a.partitions() {
        check_count(
            "replica fetch partitions",
            ps.len(),
            REPLICA_FETCH_PARTITIONS_MAX,
        )?;
        partitions.reserve_exact(ps.len());
        for p in ps {
            partitions.push(ReplicaFetchAnswerPartition {
                topic: decode_name("topic name", p.topic())?,
                partition: p.partition(),
                error: ErrorCode::from_wire(p.error()),
                high_watermark: p.high_watermark(),
                log_start_offset: p.log_start_offset(),
                log_end_offset: p.log_end_offset(),
                diverging_epoch: p.diverging_epoch().map(|d| EpochEndOffset {
                    epoch: d.epoch(),
                    end_offset: d.end_offset(),
                }),
                records_bytes: p.records_bytes(),
            });
        }
    }
    Ok(ReplicaFetchAnswer {
        error: ErrorCode::from_wire(a.error()),
        partitions,
    })
}
