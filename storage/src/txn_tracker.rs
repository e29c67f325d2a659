//! Which producers have a transaction open in the log, and where each began: what decides an
//! aborted-transaction index entry's first offset ([`crate::txn_index`]), plus the snapshot file
//! that carries this state across a segment roll or a clean close.
//!
//! Pure: no I/O. [`OpenTxnTracker::on_batch`] takes every appended (or replayed) batch in log order:
//! a transactional data batch of producer id >= 0 opens its producer's transaction at its base
//! offset unless one is open; a control batch with a transaction marker closes it, and an abort
//! of an open transaction yields the index entry (first offset, marker offset). A marker of a
//! producer with no open transaction yields nothing (no records of it to hide: markers are
//! retried). Epochs are not checked here (the broker's producer table does).
//!
//! Bound: at most `max_open` producers ([`OPEN_TXNS_MAX`] in the log). Past it a newly opening
//! transaction is not tracked ([`OpenTxnTracker::untracked`] counts them, the log warns): its abort
//! records no entry, so its records show to read_committed readers, and the broker's LSO does not
//! know it from here.
//!
//! Snapshot format ([`encode_snapshot`]), big-endian: magic `SPTXSN01` | offset u64 (the log
//! offset the state is at) | count u32 | count × (producer id i64 | first offset u64 | producer
//! epoch i16 | 6 zero bytes) | CRC-32C of everything before u32. [`decode_snapshot`] never panics
//! and refuses any file that is not exactly that.

use std::collections::HashMap;

use crate::batch::BatchHeader;
use crate::control::Marker;
use crate::txn_index::AbortedTxnEntry;

/// Open transactions one log tracks (see the module doc for what happens past it).
pub const OPEN_TXNS_MAX: usize = 10_000;
const SNAPSHOT_MAGIC: &[u8; 8] = b"SPTXSN01";
const SNAPSHOT_HEADER_BYTES: usize = 20;
const SNAPSHOT_ENTRY_BYTES: usize = 24;

/// A transaction with data in the log and no marker yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpenTxnEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: u64,
}

#[derive(Debug, Clone)]
pub struct OpenTxnTracker {
    open: HashMap<i64, OpenTxnEntry>,
    max_open: usize,
    untracked: u64,
}

impl OpenTxnTracker {
    pub fn new(max_open: usize) -> Self {
        Self {
            open: HashMap::new(),
            max_open,
            untracked: 0,
        }
    }

    /// The state a snapshot held (its first `max_open` entries by first offset).
    pub fn from_entries(mut entries: Vec<OpenTxnEntry>, max_open: usize) -> Self {
        entries.sort_unstable_by_key(|e| (e.first_offset, e.producer_id));
        let mut t = Self::new(max_open);
        for e in entries {
            if t.open.len() >= max_open {
                t.untracked += 1;
            } else {
                t.open.entry(e.producer_id).or_insert(e);
            }
        }
        t
    }

    /// One batch at its final offsets, in log order (module doc). `marker` is the control
    /// batch's marker when it reads as one.
    pub fn on_batch(&mut self, h: &BatchHeader, marker: Option<Marker>) -> Option<AbortedTxnEntry> {
        if !h.is_transactional() || h.producer_id < 0 || h.base_offset < 0 {
            return None;
        }
        let base_offset = h.base_offset as u64;
        if h.is_control() {
            let m = marker?;
            let open = self.open.remove(&h.producer_id)?;
            return (!m.commit).then_some(AbortedTxnEntry {
                producer_id: h.producer_id,
                first_offset: open.first_offset,
                last_offset: base_offset,
            });
        }
        if self.open.contains_key(&h.producer_id) {
            return None;
        }
        if self.open.len() >= self.max_open {
            self.untracked += 1;
            return None;
        }
        self.open.insert(
            h.producer_id,
            OpenTxnEntry {
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                first_offset: base_offset,
            },
        );
        None
    }

    /// The open transactions, by first offset (then producer id).
    pub fn entries(&self) -> Vec<OpenTxnEntry> {
        let mut out: Vec<OpenTxnEntry> = self.open.values().copied().collect();
        out.sort_unstable_by_key(|e| (e.first_offset, e.producer_id));
        out
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Transactions not tracked because `max_open` were (module doc).
    pub fn untracked(&self) -> u64 {
        self.untracked
    }
}

/// The snapshot file of `entries` at log offset `offset`.
pub fn encode_snapshot(offset: u64, entries: &[OpenTxnEntry]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(SNAPSHOT_HEADER_BYTES + entries.len() * SNAPSHOT_ENTRY_BYTES + 4);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.first_offset.to_be_bytes());
        out.extend_from_slice(&e.producer_epoch.to_be_bytes());
        out.extend_from_slice(&[0u8; 6]);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// (offset, entries) of a snapshot file; Err with the reason for anything else.
pub fn decode_snapshot(bytes: &[u8]) -> Result<(u64, Vec<OpenTxnEntry>), String> {
    let body_len = bytes
        .len()
        .checked_sub(4)
        .filter(|n| *n >= SNAPSHOT_HEADER_BYTES)
        .ok_or_else(|| format!("snapshot of {} bytes is too short", bytes.len()))?;
    let (body, crc) = bytes.split_at(body_len);
    let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if stored != crc32c::crc32c(body) {
        return Err("snapshot CRC mismatch".into());
    }
    if &body[..8] != SNAPSHOT_MAGIC {
        return Err("not a transaction snapshot".into());
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let offset = u64_at(8);
    let count = u32::from_be_bytes([body[16], body[17], body[18], body[19]]) as usize;
    if (body.len() - SNAPSHOT_HEADER_BYTES) / SNAPSHOT_ENTRY_BYTES != count
        || (body.len() - SNAPSHOT_HEADER_BYTES) % SNAPSHOT_ENTRY_BYTES != 0
    {
        return Err(format!(
            "snapshot says {count} entries in {} bytes",
            body.len()
        ));
    }
    let entries = (0..count)
        .map(|i| {
            let at = SNAPSHOT_HEADER_BYTES + i * SNAPSHOT_ENTRY_BYTES;
            OpenTxnEntry {
                producer_id: u64_at(at) as i64,
                first_offset: u64_at(at + 8),
                producer_epoch: i16::from_be_bytes([body[at + 16], body[at + 17]]),
            }
        })
        .collect();
    Ok((offset, entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{ATTR_CONTROL, ATTR_TRANSACTIONAL};

    fn header(producer_id: i64, base_offset: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id,
            producer_epoch: 1,
            base_sequence: 0,
            record_count: 1,
        }
    }

    const DATA: i16 = ATTR_TRANSACTIONAL;
    const CONTROL: i16 = ATTR_TRANSACTIONAL | ATTR_CONTROL;
    const ABORT: Marker = Marker {
        commit: false,
        coordinator_epoch: 0,
        decision_offset: -1,
    };
    const COMMIT: Marker = Marker {
        commit: true,
        coordinator_epoch: 0,
        decision_offset: -1,
    };

    #[test]
    fn an_abort_of_an_open_txn_yields_its_first_offset_and_a_commit_nothing() {
        let mut t = OpenTxnTracker::new(10);
        assert_eq!(t.on_batch(&header(7, 0, DATA), None), None);
        assert_eq!(t.on_batch(&header(7, 3, DATA), None), None);
        assert_eq!(
            t.on_batch(&header(8, 4, 0), None),
            None,
            "not transactional"
        );
        assert_eq!(t.len(), 1);
        let got = t.on_batch(&header(7, 5, CONTROL), Some(ABORT));
        let want = AbortedTxnEntry {
            producer_id: 7,
            first_offset: 0,
            last_offset: 5,
        };
        assert_eq!(got, Some(want));
        assert!(t.is_empty());
        assert_eq!(
            t.on_batch(&header(7, 6, CONTROL), Some(ABORT)),
            None,
            "a retry"
        );
        t.on_batch(&header(7, 7, DATA), None);
        assert_eq!(t.on_batch(&header(7, 8, CONTROL), Some(COMMIT)), None);
        assert!(t.is_empty());
        t.on_batch(&header(7, 9, DATA), None);
        assert_eq!(t.on_batch(&header(7, 10, CONTROL), None), None);
        assert_eq!(t.len(), 1, "a control batch without a marker ends nothing");
    }

    #[test]
    fn past_the_bound_new_transactions_are_counted_not_tracked() {
        let mut t = OpenTxnTracker::new(2);
        for pid in 0..4 {
            t.on_batch(&header(pid, pid, DATA), None);
        }
        assert_eq!((t.len(), t.untracked()), (2, 2));
        assert_eq!(t.on_batch(&header(3, 9, CONTROL), Some(ABORT)), None);
        let back = OpenTxnTracker::from_entries(t.entries(), 1);
        assert_eq!((back.len(), back.untracked()), (1, 1));
        assert_eq!(back.entries()[0].producer_id, 0, "the oldest is kept");
    }

    #[test]
    fn snapshots_round_trip_and_any_damage_is_refused() {
        let entries = vec![
            OpenTxnEntry {
                producer_id: -5,
                producer_epoch: -1,
                first_offset: 3,
            },
            OpenTxnEntry {
                producer_id: i64::MAX,
                producer_epoch: 300,
                first_offset: u64::MAX,
            },
        ];
        let bytes = encode_snapshot(42, &entries);
        assert_eq!(decode_snapshot(&bytes), Ok((42, entries.clone())));
        assert_eq!(decode_snapshot(&encode_snapshot(0, &[])), Ok((0, vec![])));
        for cut in 0..bytes.len() {
            assert!(decode_snapshot(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode_snapshot(&b).is_err(), "flip at {i}");
        }
    }
}
