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
//! Transactions: the log's aborted-transaction index (`txn_index`) stays valid across a rewrite,
//! since no offset moves and no transactional or control batch is touched. A record of a
//! transactional batch may belong to an aborted transaction, which
//! this pass cannot tell (its marker may lie in a later segment), so transactional batches are
//! kept whole and supersede nothing: an aborted record never displaces the committed value
//! before it, and readers (read_committed, a coordinator's replay) still drop it by its marker.
//! The cost: transactional records are never cleaned (Kafka's cleaner removes aborted ones and,
//! later, markers; spool does not yet — issue 18). Like Kafka, the map is built from the closed segments only:
//! a key newer in the active segment is cleaned once that segment rolls.

use std::collections::HashMap;

use bytes::Bytes;

use crate::batch::{BatchError, BatchHeader, BatchIter, Compression, ATTR_TIMESTAMP_LOG_APPEND};
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

    /// Learns every keyed record of a segment image (segments fed oldest first).
    pub fn add_segment(
        &mut self,
        image: &Bytes,
        max_batch_bytes: usize,
    ) -> Result<(), CompactionError> {
        for item in BatchIter::new(image, max_batch_bytes) {
            let b = item.map_err(|(p, e)| CompactionError::Invalid {
                position: p as u64,
                error: e,
            })?;
            if b.header.is_control() || b.header.is_transactional() {
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

/// Rewrites one segment image, keeping what the module doc says.
pub fn compact_segment(
    image: &Bytes,
    map: &OffsetMap,
    now_ms: i64,
    delete_retention_ms: i64,
    max_batch_bytes: usize,
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
        let recs = match records::record_bytes(&bytes, &h) {
            Ok(body) if !h.is_control() && !h.is_transactional() => {
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
        if kept.is_empty() {
            out.batches_removed += 1;
            continue;
        }
        let mut builder = BatchBuilder::new(h.base_timestamp)
            .compression(h.compression().unwrap_or(Compression::None));
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
            position: b.position as u64,
            error: e,
        })?;
        crate::batch::set_partition_leader_epoch(&mut rebuilt, h.partition_leader_epoch);
        out.image.extend_from_slice(&rebuilt);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Builds a segment of batches of (key, value or tombstone, timestamp) records.
    fn image(batches: &[Vec<(u8, bool, i64)>], zstd: bool) -> Bytes {
        let mut out = Vec::new();
        let mut next = 100i64;
        for recs in batches {
            let mut b = BatchBuilder::new(0).compression(if zstd {
                Compression::Zstd
            } else {
                Compression::None
            });
            for &(k, live, ts) in recs {
                let value = live.then(|| Bytes::from(format!("v{next}-{}", b.len())));
                b.push(ts, Some(Bytes::from(vec![k])), value);
            }
            let mut bytes = b.build().unwrap();
            batch::set_base_offset(&mut bytes, next);
            batch::set_partition_leader_epoch(&mut bytes, 7);
            next += recs.len() as i64;
            out.extend_from_slice(&bytes);
        }
        Bytes::from(out)
    }

    #[test]
    fn transactional_records_supersede_nothing_and_are_kept() {
        // Key 1: a plain value at 100, then a transactional one at 101 (maybe aborted), then a
        // plain one for key 2 superseding nothing of key 1.
        let plain = image(&[vec![(1, true, 0)]], false);
        let mut txn = BatchBuilder::new(0);
        txn.producer_id = 9;
        txn.producer_epoch = 0;
        txn.transactional = true;
        txn.push(
            0,
            Some(Bytes::from(vec![1u8])),
            Some(Bytes::from_static(b"t")),
        );
        let mut txn = txn.build().unwrap();
        batch::set_base_offset(&mut txn, 101);
        batch::set_partition_leader_epoch(&mut txn, 7);
        let mut whole = plain.to_vec();
        whole.extend_from_slice(&txn);
        let whole = Bytes::from(whole);
        let mut map = OffsetMap::new(100);
        map.add_segment(&whole, usize::MAX).unwrap();
        assert_eq!(
            map.newest(&[1]),
            Some(100),
            "the transactional record is not learned"
        );
        let out = compact_segment(&whole, &map, 0, 0, usize::MAX).unwrap();
        assert_eq!(out.records_removed, 0);
        assert_eq!(&out.image[..], &whole[..], "both kept, byte for byte");
    }

    fn all_records(img: &Bytes) -> Vec<(u64, Option<Bytes>, Option<Bytes>, i64)> {
        let mut v = Vec::new();
        for b in BatchIter::new(img, usize::MAX) {
            let b = b.unwrap();
            assert_eq!(b.header.partition_leader_epoch, 7);
            let bytes = img.slice(b.position..b.position + b.bytes.len());
            let (h, recs) = records::read_batch(&bytes, usize::MAX).unwrap();
            for r in recs {
                v.push((
                    (h.base_offset + i64::from(r.offset_delta)) as u64,
                    r.key,
                    r.value,
                    h.base_timestamp + r.timestamp_delta,
                ));
            }
        }
        v
    }

    proptest! {
        /// Exactly the newest record per key survives (tombstones too, while young), at its
        /// original offset; older tombstones go.
        #[test]
        fn keeps_exactly_the_newest_record_per_key(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u8..12, proptest::bool::weighted(0.8), 0i64..1000), 1..12), 1..12),
            zstd in any::<bool>(),
            now in 0i64..2000,
        ) {
            let img = image(&batches, zstd);
            let before = all_records(&img);
            let mut map = OffsetMap::new(1000);
            map.add_segment(&img, usize::MAX).unwrap();
            let out = compact_segment(&img, &map, now, 500, usize::MAX).unwrap();
            let after = all_records(&Bytes::from(out.image.clone()));

            let mut newest: BTreeMap<Bytes, (u64, Option<Bytes>, i64)> = BTreeMap::new();
            for (o, k, v, ts) in &before { newest.insert(k.clone().unwrap(), (*o, v.clone(), *ts)); }
            let mut expect: Vec<_> = newest.into_iter()
                .filter(|(_, (_, v, ts))| v.is_some() || ts + 500 > now)
                .map(|(k, (o, v, ts))| (o, Some(k), v, ts)).collect();
            expect.sort_by_key(|e| e.0);
            prop_assert_eq!(&after, &expect);
            prop_assert_eq!(out.records_kept as usize, after.len());
            prop_assert_eq!((out.records_kept + out.records_removed) as usize, before.len());
            // Compacting again changes nothing.
            let again = compact_segment(&Bytes::from(out.image.clone()), &map, now, 500, usize::MAX).unwrap();
            prop_assert_eq!(again.image, out.image);
        }
    }
}
