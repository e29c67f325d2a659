//! WriteTxnMarkers and VerifyTxn, and their answers, to and from their flatbuffers form
//! (`schemas/internal.fbs`): a transaction coordinator's commit or abort marker for partitions
//! another broker leads, and that broker's code per partition; a partition leader's KIP-890
//! check with a coordinator, and its code.
//!
//! Owns: these messages' fields, checked on both sides (producer id and epoch, coordinator
//! epoch and partition indexes non-negative, a decision offset -1 or more; names bounded, a transactional id by
//! [`TRANSACTIONAL_ID_BYTES_MAX`]; at most [`MARKER_PARTITIONS_MAX`] partitions). Never does: frame, verify or route a message (the
//! codec does), or write a marker (the partition does).

use flatbuffers::WIPOffset;

use super::limits::{
    at_least, check_count, check_len, decode_name, encode_name, Fbb, InternalError,
};
use super::types::{TxnMarkerResult, VerifyTxn, WriteTxnMarkers};
use crate::internal_wire as fb;
use crate::ErrorCode;

/// Partitions one WriteTxnMarkers may name (a transaction's partitions on one broker).
pub const MARKER_PARTITIONS_MAX: usize = 100_000;
/// Longest transactional id a VerifyTxn carries (the brokers' own limit on the ids they take).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 1024;

const NON_NEGATIVE: i128 = 0;
/// A decision offset: an offset, or -1 for none.
const UNKNOWN_OR_OFFSET: i128 = -1;

pub(super) fn encode_write_txn_markers<'b>(
    fbb: &mut Fbb<'b>,
    m: &WriteTxnMarkers,
) -> Result<WIPOffset<fb::WriteTxnMarkers<'b>>, InternalError> {
    check_count(
        "marker partitions",
        m.partitions.len(),
        MARKER_PARTITIONS_MAX,
    )?;
    let mut partitions = Vec::with_capacity(m.partitions.len());
    for (topic, partition) in &m.partitions {
        let topic = encode_name(fbb, "marker topic", topic)?;
        partitions.push(fb::TxnMarkerPartition::create(
            fbb,
            &fb::TxnMarkerPartitionArgs {
                topic: Some(topic),
                partition: at_least("marker partition", *partition, NON_NEGATIVE)?,
            },
        ));
    }
    let partitions = fbb.create_vector(&partitions);
    Ok(fb::WriteTxnMarkers::create(
        fbb,
        &fb::WriteTxnMarkersArgs {
            producer_id: at_least("producer_id", m.producer_id, NON_NEGATIVE)?,
            producer_epoch: at_least("producer_epoch", m.producer_epoch, NON_NEGATIVE)?,
            commit: m.commit,
            coordinator_epoch: at_least("coordinator_epoch", m.coordinator_epoch, NON_NEGATIVE)?,
            partitions: Some(partitions),
            decision_offset: at_least("decision_offset", m.decision_offset, UNKNOWN_OR_OFFSET)?,
        },
    ))
}

pub(super) fn decode_write_txn_markers(
    m: fb::WriteTxnMarkers<'_>,
) -> Result<WriteTxnMarkers, InternalError> {
    let mut partitions = Vec::new();
    if let Some(ps) = m.partitions() {
        check_count("marker partitions", ps.len(), MARKER_PARTITIONS_MAX)?;
        partitions.reserve_exact(ps.len());
        for p in ps {
            partitions.push((
                decode_name("marker topic", p.topic())?,
                at_least("marker partition", p.partition(), NON_NEGATIVE)?,
            ));
        }
    }
    Ok(WriteTxnMarkers {
        producer_id: at_least("producer_id", m.producer_id(), NON_NEGATIVE)?,
        producer_epoch: at_least("producer_epoch", m.producer_epoch(), NON_NEGATIVE)?,
        commit: m.commit(),
        coordinator_epoch: at_least("coordinator_epoch", m.coordinator_epoch(), NON_NEGATIVE)?,
        partitions,
        decision_offset: at_least("decision_offset", m.decision_offset(), UNKNOWN_OR_OFFSET)?,
    })
}

pub(super) fn encode_write_txn_markers_answer<'b>(
    fbb: &mut Fbb<'b>,
    results: &[TxnMarkerResult],
) -> Result<WIPOffset<fb::WriteTxnMarkersAnswer<'b>>, InternalError> {
    check_count("marker results", results.len(), MARKER_PARTITIONS_MAX)?;
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let topic = encode_name(fbb, "marker topic", &r.topic)?;
        out.push(fb::TxnMarkerResult::create(
            fbb,
            &fb::TxnMarkerResultArgs {
                topic: Some(topic),
                partition: at_least("marker partition", r.partition, NON_NEGATIVE)?,
                error: r.error.code(),
            },
        ));
    }
    let results = fbb.create_vector(&out);
    Ok(fb::WriteTxnMarkersAnswer::create(
        fbb,
        &fb::WriteTxnMarkersAnswerArgs {
            results: Some(results),
        },
    ))
}

pub(super) fn decode_write_txn_markers_answer(
    a: fb::WriteTxnMarkersAnswer<'_>,
) -> Result<Vec<TxnMarkerResult>, InternalError> {
    let mut out = Vec::new();
    if let Some(rs) = a.results() {
        check_count("marker results", rs.len(), MARKER_PARTITIONS_MAX)?;
        out.reserve_exact(rs.len());
        for r in rs {
            out.push(TxnMarkerResult {
                topic: decode_name("marker topic", r.topic())?,
                partition: at_least("marker partition", r.partition(), NON_NEGATIVE)?,
                error: ErrorCode::from_wire(r.error()),
            });
        }
    }
    Ok(out)
}

pub(super) fn encode_verify_txn<'b>(
    fbb: &mut Fbb<'b>,
    v: &VerifyTxn,
) -> Result<WIPOffset<fb::VerifyTxn<'b>>, InternalError> {
    check_len(
        "transactional id",
        v.transactional_id.len(),
        TRANSACTIONAL_ID_BYTES_MAX,
    )?;
    let transactional_id = fbb.create_string(&v.transactional_id);
    let topic = encode_name(fbb, "verified topic", &v.topic)?;
    Ok(fb::VerifyTxn::create(
        fbb,
        &fb::VerifyTxnArgs {
            transactional_id: Some(transactional_id),
            producer_id: at_least("producer_id", v.producer_id, NON_NEGATIVE)?,
            producer_epoch: at_least("producer_epoch", v.producer_epoch, NON_NEGATIVE)?,
            topic: Some(topic),
            partition: at_least("verified partition", v.partition, NON_NEGATIVE)?,
        },
    ))
}

pub(super) fn decode_verify_txn(v: fb::VerifyTxn<'_>) -> Result<VerifyTxn, InternalError> {
    check_len(
        "transactional id",
        v.transactional_id().len(),
        TRANSACTIONAL_ID_BYTES_MAX,
    )?;
    Ok(VerifyTxn {
        transactional_id: v.transactional_id().to_owned(),
        producer_id: at_least("producer_id", v.producer_id(), NON_NEGATIVE)?,
        producer_epoch: at_least("producer_epoch", v.producer_epoch(), NON_NEGATIVE)?,
        topic: decode_name("verified topic", v.topic())?,
        partition: at_least("verified partition", v.partition(), NON_NEGATIVE)?,
    })
}

pub(super) fn encode_verify_txn_answer<'b>(
    fbb: &mut Fbb<'b>,
    code: ErrorCode,
) -> WIPOffset<fb::VerifyTxnAnswer<'b>> {
    fb::VerifyTxnAnswer::create(fbb, &fb::VerifyTxnAnswerArgs { error: code.code() })
}

pub(super) fn decode_verify_txn_answer(a: fb::VerifyTxnAnswer<'_>) -> ErrorCode {
    ErrorCode::from_wire(a.error())
}
