//! Log compaction (`cleanup.policy=compact`): keep only the newest record per key.
//!
//! Pure. [`OffsetMap`] learns, from the segments being cleaned, the newest offset of every key;
//! [`compact_segment`] rewrites one segment image keeping a keyed record only if it is that newest
//! one, and a tombstone (null value) only while `timestamp + delete_retention_ms > now_ms`.
//! Offsets never change: a rewritten batch keeps its base offset, `lastOffsetDelta`, leader
//! epoch, producer fields and max timestamp, so the log simply gets gaps. Records without a key,
//! control batches, and batches compressed with a codec spool cannot decompress (gzip, snappy,
//! lz4) are kept untouched and counted.
//!
//! Transactions (Kafka's cleaner does the same), by each transactional batch's fate
//! ([`TxnOutcomes`], from the log's open transactions and aborted-transaction index):
//! - committed: its records are like any others (they supersede and are superseded by key);
//! - aborted: its records go and supersede nothing; the batch stays, empty (`recordCount` 0, its
//!   header whole), so the producer's sequence, epoch and offsets stay in the log for the
//!   producer table's rebuild, and the index entry still points at a batch;
//! - not decided yet, or not known (the log's view incomplete): kept whole, superseding nothing.
//!
//! Control batches (markers) are always kept. No offset moves, so the aborted-transaction index
//! stays valid across a rewrite. Like Kafka, the map is built from the closed segments only: a
//! key newer in the active segment is cleaned once that segment rolls.

use std::collections::HashMap;

use bytes::Bytes;

use crate::batch::{BatchError, BatchHeader, BatchIter, Compression, ATTR_TIMESTAMP_LOG_APPEND};
pub use crate::compaction_txn::{TxnFate, TxnOutcomes};
use crate::records::{self, BatchBuilder};

/// Newest offset per key across the segments being cleaned. Bounded by `max_keys`.
#[derive(Debug, Default)]
pub struct OffsetMap {
    newest: HashMap<Bytes, u64>,
    max_keys: usize,
    /// Batches whose records could not be read (unsupported codec): left as they are.
    pub opaque_batches: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    #[error("batch at position {position} is invalid: {error}")]
    Invalid { position: u64, error: BatchError },
    #[error("more than {0} distinct keys; raise the compaction key limit")]
    TooManyKeys(usize),
}

impl OffsetMap {
    pub fn new(max_keys: usize) -> Self {
        Self {
            newest: HashMap::new(),
            max_keys,
            opaque_batches: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.newest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }

    pub fn newest(&self, key: &[u8]) -> Option<u64> {
        self.newest.get(key).copied()
    }

    /// Learns every keyed record of a segment image (segments fed oldest first), of
    /// transactional batches only the committed ones.
    pub fn add_segment(
        &mut self,
        image: &Bytes,
        max_batch_bytes: usize,
        txns: &TxnOutcomes,
    ) -> Result<(), CompactionError> {
        for item in BatchIter::new(image, max_batch_bytes) {
            let b = item.map_err(|(p, e)| CompactionError::Invalid {
                position: p as u64,
                error: e,
            })?;
            if b.header.is_control() || !cleanable(&b.header, txns) {
                continue;
            }
            let bytes = image.slice(b.position..b.position + b.bytes.len());
            let recs = match records::record_bytes(&bytes, &b.header) {
                Ok(body) => records::decode_records(&body, b.header.record_count).map_err(|e| {
                    CompactionError::Invalid {
                        position: b.position as u64,
                        error: e,
                    }
                })?,
                Err(BatchError::UnsupportedCompression(_)) => {
                    self.opaque_batches += 1;
                    continue;
                }
                Err(e) => {
                    return Err(CompactionError::Invalid {
                        position: b.position as u64,
                        error: e,
                    })
                }
            };
            for r in recs {
                if let Some(k) = r.key {
                    let offset = (b.header.base_offset + i64::from(r.offset_delta)) as u64;
                    if !self.newest.contains_key(&k) && self.newest.len() >= self.max_keys {
                        return Err(CompactionError::TooManyKeys(self.max_keys));
                    }
                    self.newest.insert(k, offset);
                }
            }
        }
        Ok(())
    }
}

/// The result of cleaning one segment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Compacted {
    pub image: Vec<u8>,
    pub records_kept: u64,
    pub records_removed: u64,
    pub batches_removed: u64,
}

fn record_timestamp(h: &BatchHeader, timestamp_delta: i64) -> i64 {
    if h.attributes & ATTR_TIMESTAMP_LOG_APPEND != 0 {
        h.max_timestamp
    } else {
        h.base_timestamp + timestamp_delta
    }
}

/// Whether a data batch's records are cleaned by key: a plain one, or a committed
/// transaction's.
fn cleanable(h: &BatchHeader, txns: &TxnOutcomes) -> bool {
    !h.is_transactional() || txns.fate(h.producer_id, h.base_offset as u64) == TxnFate::Committed
}

/// Rewrites one segment image, keeping what the module doc says.
pub fn compact_segment(
    image: &Bytes,
    map: &OffsetMap,
    now_ms: i64,
    delete_retention_ms: i64,
    max_batch_bytes: usize,
    txns: &TxnOutcomes,
) -> Result<Compacted, CompactionError> {
    let mut out = Compacted {
        image: Vec::with_capacity(image.len()),
        ..Default::default()
    };
    for item in BatchIter::new(image, max_batch_bytes) {
        let b = item.map_err(|(p, e)| CompactionError::Invalid {
            position: p as u64,
            error: e,
        })?;
        let h = b.header;
        let bytes = image.slice(b.position..b.position + b.bytes.len());
        let aborted = !h.is_control()
            && h.is_transactional()
            && txns.fate(h.producer_id, h.base_offset as u64) == TxnFate::Aborted;
        if aborted && h.record_count > 0 {
            out.records_removed += h.record_count as u64;
            out.image
                .extend_from_slice(&rebuild(&h, Vec::new(), b.position)?);
            continue;
        }
        let recs = match records::record_bytes(&bytes, &h) {
            Ok(body) if !h.is_control() && !aborted && cleanable(&h, txns) => {
                records::decode_records(&body, h.record_count).map_err(|e| {
                    CompactionError::Invalid {
                        position: b.position as u64,
                        error: e,
                    }
                })?
            }
            Ok(_) | Err(BatchError::UnsupportedCompression(_)) => {
                out.image.extend_from_slice(b.bytes);
                out.records_kept += h.record_count.max(0) as u64;
                continue;
            }
            Err(e) => {
                return Err(CompactionError::Invalid {
                    position: b.position as u64,
                    error: e,
                })
            }
        };
        let total = recs.len() as u64;
        let kept: Vec<_> = recs
            .into_iter()
            .filter(|r| {
                let Some(key) = &r.key else { return true };
                let offset = (h.base_offset + i64::from(r.offset_delta)) as u64;
                if map.newest(key).is_some_and(|newest| newest > offset) {
                    return false;
                }
                r.value.is_some()
                    || record_timestamp(&h, r.timestamp_delta).saturating_add(delete_retention_ms)
                        > now_ms
            })
            .collect();
        out.records_kept += kept.len() as u64;
        out.records_removed += total - kept.len() as u64;
        if kept.len() as u64 == total {
            out.image.extend_from_slice(b.bytes);
            continue;
        }
        if kept.is_empty() && !h.is_transactional() {
            out.batches_removed += 1;
            continue;
        }
        // A committed transaction's batch stays even empty: its producer's sequence and epoch
        // stay in the log, like an aborted one's.
        out.image.extend_from_slice(&rebuild(&h, kept, b.position)?);
    }
    Ok(out)
}

/// `h`'s batch again with only `kept` of its records (none: an empty batch), every header field
/// but the record count, length and CRC unchanged.
fn rebuild(
    h: &BatchHeader,
    kept: Vec<records::Record>,
    position: usize,
) -> Result<Vec<u8>, CompactionError> {
    // An empty batch has no body to compress (and spool cannot compress every codec).
    let compression = match kept.is_empty() {
        true => Compression::None,
        false => h.compression().unwrap_or(Compression::None),
    };
    let mut builder = BatchBuilder::new(h.base_timestamp).compression(compression);
    builder.base_offset = h.base_offset;
    builder.producer_id = h.producer_id;
    builder.producer_epoch = h.producer_epoch;
    builder.base_sequence = h.base_sequence;
    builder.transactional = h.is_transactional();
    builder.last_offset_delta = Some(h.last_offset_delta);
    builder.max_timestamp = Some(h.max_timestamp);
    builder.log_append_time = h.attributes & ATTR_TIMESTAMP_LOG_APPEND != 0;
    for r in kept {
        builder.push_record(r);
    }
    let mut rebuilt = builder.build().map_err(|e| CompactionError::Invalid {
        position: position as u64,
        error: e,
    })?;
    crate::batch::set_partition_leader_epoch(&mut rebuilt, h.partition_leader_epoch);
    Ok(rebuilt.to_vec())
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
