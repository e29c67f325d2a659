//! Replaying an internal compacted topic's partition (`__consumer_offsets`,
//! `__transaction_state`) when this broker becomes its leader: every keyed record of its data
//! batches, in log order, from the log start to the log end.
//!
//! To the log end, not the high watermark, as Kafka's coordinators load: a new leader's log is
//! what every replica will hold (followers truncate to it), while its high watermark can lag the
//! writes the previous coordinator acknowledged until its followers' next fetches. Records of
//! transactional batches come with their producer id, and transaction markers are reported in
//! their place in the log; a record without a key, or one `apply` refuses, is counted as skipped
//! and logged, never fatal. Reads are bounded ([`REPLAY_READ_BYTES`] per step).

use bytes::Bytes;
use spool_storage::batch::BatchIter;
use spool_storage::records as log_records;

use crate::partition::Partition;

/// Bytes read per step while replaying.
pub const REPLAY_READ_BYTES: usize = 1 << 20;

/// Records applied and records skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    pub applied: u64,
    pub skipped: u64,
}

/// What a replay hands its caller, in log order.
pub enum Replay<'a> {
    /// A keyed record (value `None`: a tombstone) at `offset`; `txn_producer` is the producer
    /// id of a transactional batch's record.
    Record {
        key: &'a [u8],
        value: Option<&'a [u8]>,
        txn_producer: Option<i64>,
        offset: u64,
    },
    /// A transaction marker of `producer_id`.
    Marker { producer_id: i64, commit: bool },
}

/// Calls `apply` for every keyed record and every transaction marker of `part` (module docs).
/// `max_message_bytes` bounds a batch.
pub async fn replay(
    part: &Partition,
    max_message_bytes: usize,
    mut apply: impl FnMut(Replay<'_>) -> Result<(), String>,
) -> Replayed {
    let mut out = Replayed::default();
    let mut offset = part.log.log_start_offset();
    let end = part.log.log_end_offset();
    let max_batch = max_message_bytes.max(part.log.config().max_batch_bytes);
    while offset < end {
        let bytes = match part.log.read_copy(offset, REPLAY_READ_BYTES, end).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(tp = %part.tp, offset, "replaying: {e}");
                break;
            }
        };
        if bytes.is_empty() {
            break;
        }
        let mut next = offset;
        for item in BatchIter::new(&bytes, max_batch) {
            let Ok(batch) = item else {
                tracing::error!(tp = %part.tp, offset, "replaying: bad batch");
                return out;
            };
            next = next.max((batch.header.last_offset() + 1).max(0) as u64);
            if batch.header.is_control() {
                match spool_storage::control::read_marker(batch.bytes) {
                    Ok(m) => {
                        let marker = Replay::Marker {
                            producer_id: batch.header.producer_id,
                            commit: m.commit,
                        };
                        if let Err(e) = apply(marker) {
                            tracing::warn!(tp = %part.tp, offset, "skipping a marker: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(tp = %part.tp, offset, "an unreadable control batch: {e}")
                    }
                }
                continue;
            }
            let txn_producer = batch
                .header
                .is_transactional()
                .then_some(batch.header.producer_id);
            let whole = Bytes::copy_from_slice(batch.bytes);
            let Ok((h, records)) = log_records::read_batch(&whole, max_batch) else {
                out.skipped += 1;
                continue;
            };
            for r in records {
                let at = h.base_offset + i64::from(r.offset_delta);
                if at < offset as i64 {
                    continue;
                }
                let Some(key) = r.key else {
                    out.skipped += 1;
                    continue;
                };
                let record = Replay::Record {
                    key: &key,
                    value: r.value.as_deref(),
                    txn_producer,
                    offset: at as u64,
                };
                match apply(record) {
                    Ok(()) => out.applied += 1,
                    Err(e) => {
                        out.skipped += 1;
                        tracing::warn!(tp = %part.tp, at, "skipping a record: {e}");
                    }
                }
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    out
}
