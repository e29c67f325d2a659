//! Turning one partition's fetched bytes into consumer records — a pure function, no state.
//!
//! Batches are validated (length, magic, CRC-32C: once per batch) and decoded by `spool_storage`; records before
//! the fetch offset (the front of a batch the broker returned whole) are skipped; control batches
//! are never returned. Under `read_committed`, transactional batches of producers listed as
//! aborted are dropped from their transaction's first offset until that producer's ABORT marker,
//! as Kafka's consumer does. A partial batch at the end (the broker cut at the byte limit) ends the
//! data without an error; any other invalid batch ends it with one.

use std::collections::BTreeSet;

use bytes::Bytes;
use spool_storage::batch::{BatchError, BatchHeader, BatchIter};
use spool_storage::records::read_validated_batch;

use crate::client::{ClientError, ConsumerRecord, TopicPartition};

/// What one partition's fetched bytes held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub records: Vec<ConsumerRecord>,
    /// The next offset to fetch: past every batch consumed, returned or skipped.
    pub next_offset: i64,
    /// Why decoding stopped early (a corrupt batch), if it did.
    pub error: Option<ClientError>,
}

/// Decodes `bytes` (whole RecordBatch v2 batches, maybe a partial one last) fetched at
/// `fetch_offset`. `aborted` lists (producer id, first offset) of aborted transactions.
pub fn decode_fetched(
    tp: &TopicPartition,
    bytes: &Bytes,
    fetch_offset: i64,
    aborted: &[(i64, i64)],
    read_committed: bool,
    max_batch_bytes: usize,
) -> Decoded {
    let mut by_first_offset: Vec<(i64, i64)> =
        aborted.iter().map(|&(pid, first)| (first, pid)).collect();
    by_first_offset.sort_unstable();
    let mut pending_aborts = by_first_offset.into_iter().peekable();
    let mut active_aborts: BTreeSet<i64> = BTreeSet::new();
    let mut next_offset = fetch_offset;
    let mut records = Vec::new();
    let mut seen_batch = false;
    for item in BatchIter::new(bytes, max_batch_bytes) {
        let batch = match item {
            Ok(b) => b,
            Err((_, BatchError::Truncated { .. })) if seen_batch => break,
            Err((_, BatchError::Truncated { needed, .. })) => {
                let e = ClientError::Corrupt(format!(
                    "{tp}: the batch at offset {next_offset} needs {needed} bytes, more than the fetch \
                     returned (raise max_partition_fetch_bytes)"
                ));
                return Decoded {
                    records,
                    next_offset,
                    error: Some(e),
                };
            }
            Err((position, e)) => {
                let e = ClientError::Corrupt(format!(
                    "{tp}: batch at fetch offset {next_offset} (byte {position}): {e}"
                ));
                return Decoded {
                    records,
                    next_offset,
                    error: Some(e),
                };
            }
        };
        seen_batch = true;
        let h = batch.header;
        // Offsets come from the broker: refuse ones that would overflow rather than panic.
        let Some(last_offset) = h
            .base_offset
            .checked_add(i64::from(h.last_offset_delta))
            .filter(|o| *o < i64::MAX && h.base_offset >= 0)
        else {
            let e = ClientError::Corrupt(format!(
                "{tp}: batch with base offset {} is out of range",
                h.base_offset
            ));
            return Decoded {
                records,
                next_offset,
                error: Some(e),
            };
        };
        if last_offset < next_offset {
            continue;
        }
        if read_committed {
            while let Some(&(first, pid)) = pending_aborts.peek() {
                if first > last_offset {
                    break;
                }
                active_aborts.insert(pid);
                pending_aborts.next();
            }
        }
        let batch_bytes = bytes.slice(batch.position..batch.position + batch.bytes.len());
        if h.is_control() {
            if read_committed && is_abort_marker(&batch_bytes, &h) {
                active_aborts.remove(&h.producer_id);
            }
            next_offset = last_offset + 1;
            continue;
        }
        if read_committed && h.is_transactional() && active_aborts.contains(&h.producer_id) {
            next_offset = last_offset + 1;
            continue;
        }
        // The iterator checked this batch's length and CRC-32C: decode it without a second sum.
        let decoded = match read_validated_batch(&batch_bytes, &h) {
            Ok(r) => r,
            Err(e) => {
                let e =
                    ClientError::Corrupt(format!("{tp}: batch at offset {}: {e}", h.base_offset));
                return Decoded {
                    records,
                    next_offset,
                    error: Some(e),
                };
            }
        };
        for r in decoded {
            let offset = h.base_offset.saturating_add(i64::from(r.offset_delta));
            if offset < next_offset {
                continue;
            }
            records.push(ConsumerRecord {
                topic: tp.topic.clone(),
                partition: tp.partition,
                offset,
                timestamp_ms: h.base_timestamp.saturating_add(r.timestamp_delta),
                key: r.key,
                value: r.value,
                headers: r.headers,
            });
        }
        next_offset = last_offset + 1;
    }
    Decoded {
        records,
        next_offset,
        error: None,
    }
}

/// Whether a control batch holds an ABORT marker: the control record's key is
/// `version i16 | type i16`, type 0 = abort, 1 = commit.
fn is_abort_marker(batch: &Bytes, header: &BatchHeader) -> bool {
    match read_validated_batch(batch, header) {
        Ok(records) => records
            .first()
            .and_then(|r| r.key.as_ref())
            .is_some_and(|k| k.len() >= 4 && i16::from_be_bytes([k[2], k[3]]) == 0),
        Err(_) => false,
    }
}
