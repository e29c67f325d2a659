//! The log's own record of transactions: each segment's aborted-transaction index
//! (`<base>.txnindex`, [`crate::txn_index`]) and the open transactions ([`OpenTxnTracker`],
//! snapshotted as `<base>.txnsnap` when a segment starts and as `txn-open-checkpoint` at a clean
//! close). Kept by the log itself on every append path (leader and follower alike), so every
//! replica has it and it survives restarts and leadership moves.
//!
//! Promises:
//! - after every append, the active segment's index holds an entry (producer id, first offset,
//!   marker offset) for each abort marker in it whose producer had a transaction open (tracked:
//!   [`OPEN_TXNS_MAX`]), and [`PartitionLog::open_txns`] is the transactions open at the log end;
//! - truncation drops entries at or past the cut and rebuilds the open transactions for the new
//!   end; retention and DeleteRecords delete a segment's files with it; compaction keeps them
//!   (it never moves an offset nor removes a transactional or control batch: an aborted
//!   transaction's batch is emptied, its header kept);
//! - open trusts a closed segment's file only if it decodes whole, and after a clean close the
//!   active one's too; any other file, and after a crash the active segment's, is rebuilt by a
//!   header walk from the newest snapshot at or before it (markers read, records never
//!   decompressed); without any snapshot the walk starts at the first segment with nothing open.
//!
//! A failed write of an index entry fails that append and marks the segment: queries touching it
//! answer `Offline` until the log is reopened, which rebuilds the file. Nothing here holds a
//! `RefCell` borrow across an await.

use std::rc::Rc;

use super::{OpenStats, PartitionLog};
use crate::batch::BatchHeader;
use crate::control::read_marker;
use crate::error::LogError;
use crate::segment::{
    read_small_file, remove_if_exists, segment_file, write_file_atomically, HeaderCursor, Segment,
    TxnIndexMeta,
};
use crate::txn_index::{self, AbortedTxnEntry};
use crate::txn_tracker::{
    decode_snapshot, encode_snapshot, OpenTxnEntry, OpenTxnTracker, OPEN_TXNS_MAX,
};

pub(crate) const TXN_SNAPSHOT_EXT: &str = "txnsnap";
/// The open transactions at the log end, written by a clean close and read (then removed) by the
/// next open.
pub(crate) const TXN_CHECKPOINT: &str = "txn-open-checkpoint";

impl PartitionLog {
    /// Every aborted transaction overlapping [`from`, `to`) — marker at or after `from`, first
    /// offset below `to` — ordered by first offset (then producer id), at most `max` (the
    /// earliest). Reads the index files of the segments that can hold one (a segment with no
    /// entry, or none starting below `to`, is skipped without I/O); memory is `max` entries plus
    /// one segment's file.
    pub async fn aborted_txns(
        &self,
        from: u64,
        to: u64,
        max: usize,
    ) -> Result<Vec<AbortedTxnEntry>, LogError> {
        if from >= to || max == 0 {
            return Ok(Vec::new());
        }
        // A marker at or after `from` lies in a segment that ends past `from`.
        let segments: Vec<Rc<Segment>> = self
            .st
            .borrow()
            .segments
            .values()
            .filter(|s| s.next_offset() > from)
            .cloned()
            .collect();
        let mut out: Vec<AbortedTxnEntry> = Vec::new();
        for seg in segments {
            let meta = seg.txn_index.get();
            // Its summary undercounts: an entry may be missing.
            if meta.failed {
                return Err(LogError::Offline {
                    dir: self.dir.clone(),
                    reason: format!(
                        "the transaction index of segment {} could not be written; reopen the log",
                        seg.base_offset
                    ),
                });
            }
            if meta.entries == 0 || meta.min_first_offset >= to {
                continue;
            }
            if out.len() >= max
                && out
                    .last()
                    .is_some_and(|l| meta.min_first_offset > l.first_offset)
            {
                continue;
            }
            txn_index::for_each_entry(&self.dir, seg.base_offset, meta.file_bytes, |window| {
                out.extend(
                    window
                        .iter()
                        .filter(|e| e.last_offset >= from && e.first_offset < to),
                );
                if out.len() > max {
                    out.sort_unstable_by_key(|e| (e.first_offset, e.producer_id, e.last_offset));
                    out.truncate(max);
                }
            })
            .await?;
            out.sort_unstable_by_key(|e| (e.first_offset, e.producer_id, e.last_offset));
            out.truncate(max);
        }
        Ok(out)
    }

    /// The transactions open at the log end (a first batch and no marker yet), by first offset.
    /// At most [`OPEN_TXNS_MAX`]; [`Self::untracked_txns`] counts those past it.
    pub fn open_txns(&self) -> Vec<OpenTxnEntry> {
        self.st.borrow().txns.entries()
    }

    /// Transactions opened while [`OPEN_TXNS_MAX`] were open, since open: not tracked, so their
    /// aborts are not indexed.
    pub fn untracked_txns(&self) -> u64 {
        self.st.borrow().txns.untracked()
    }

    /// A batch just appended to `active` at its final offsets: updates the open transactions and,
    /// for an abort marker, appends the index entry.
    pub(super) async fn track_txn_batch(
        &self,
        active: &Segment,
        h: &BatchHeader,
        bytes: &[u8],
    ) -> Result<(), LogError> {
        if !h.is_transactional() || h.producer_id < 0 {
            return Ok(());
        }
        let marker = if h.is_control() {
            read_marker(bytes).ok()
        } else {
            None
        };
        let (aborted, untracked) = {
            let mut st = self.st.borrow_mut();
            let before = st.txns.untracked();
            let aborted = st.txns.on_batch(h, marker);
            let untracked = st.txns.untracked();
            (aborted, (untracked > before).then_some(untracked))
        };
        // Warned at the 1st, 2nd, 4th, 8th… untracked transaction, so a flood stays readable.
        if let Some(n) = untracked.filter(|n| n.is_power_of_two()) {
            tracing::warn!(untracked = n, dir = %self.dir.display(), producer_id = h.producer_id, offset = h.base_offset, max = OPEN_TXNS_MAX, "too many open transactions: this one is not tracked, and an abort of it will not hide its records from read_committed readers");
        }
        let Some(entry) = aborted else {
            return Ok(());
        };
        let meta = active.txn_index.get();
        if meta.failed {
            return Ok(());
        }
        match txn_index::append_entry(&self.dir, active.base_offset, meta.file_bytes, &entry).await
        {
            Ok(len) => {
                active.txn_index.set(meta.with(&entry, len));
                Ok(())
            }
            Err(e) => {
                active.txn_index.set(TxnIndexMeta {
                    failed: true,
                    ..meta
                });
                Err(e)
            }
        }
    }

    /// Makes a segment's index durable as it rolls or the log closes; a failed one's file is
    /// removed so the next open rebuilds it.
    pub(super) async fn seal_txn_index(&self, seg: &Segment) -> Result<(), LogError> {
        let meta = seg.txn_index.get();
        if meta.failed {
            return remove_if_exists(&txn_index::txn_index_path(&self.dir, seg.base_offset)).await;
        }
        let len = txn_index::seal(&self.dir, seg.base_offset, meta.file_bytes).await?;
        seg.txn_index.set(TxnIndexMeta {
            file_bytes: len,
            ..meta
        });
        Ok(())
    }

    /// Writes the open transactions as the snapshot of the segment starting at `base` (the log
    /// end now), durably. A failure only costs a longer walk at the next recovery (from an
    /// earlier snapshot), so it is logged, not returned.
    pub(super) async fn write_txn_snapshot(&self, base: u64) {
        let bytes = encode_snapshot(base, &self.open_txns());
        let path = segment_file(&self.dir, base, TXN_SNAPSHOT_EXT);
        if let Err(e) = write_file_atomically(&path, bytes, true).await {
            tracing::warn!(file = %path.display(), "writing the transaction snapshot: {e}");
        }
    }

    /// At a clean close: the open transactions at the log end, durably.
    pub(super) async fn write_txn_checkpoint(&self) -> Result<(), LogError> {
        let end = self.st.borrow().log_end_offset;
        let bytes = encode_snapshot(end, &self.open_txns());
        write_file_atomically(&self.dir.join(TXN_CHECKPOINT), bytes, true).await
    }

    /// Recovery (module doc): loads or rebuilds every segment's index and the open transactions.
    /// Called by open once the segments and the log end are settled.
    pub(super) async fn recover_txn_state(
        &self,
        clean: bool,
        stats: &mut OpenStats,
    ) -> Result<(), LogError> {
        let segments: Vec<Rc<Segment>> = self.st.borrow().segments.values().cloned().collect();
        let last = segments.len().saturating_sub(1);
        let mut rebuild = vec![false; segments.len()];
        for (i, seg) in segments.iter().enumerate() {
            if !clean && i == last {
                rebuild[i] = true;
                continue;
            }
            match txn_index::load(&self.dir, seg.base_offset, seg.next_offset()).await? {
                Some(entries) => seg.txn_index.set(TxnIndexMeta::of(&entries)),
                None => rebuild[i] = true,
            }
        }
        let checkpoint = self.dir.join(TXN_CHECKPOINT);
        let mut tracker_known = false;
        if let Some(bytes) = read_small_file(&checkpoint).await? {
            let end = self.st.borrow().log_end_offset;
            match decode_snapshot(&bytes) {
                Ok((offset, entries)) if clean && offset == end => {
                    self.st.borrow_mut().txns =
                        OpenTxnTracker::from_entries(entries, OPEN_TXNS_MAX);
                    tracker_known = true;
                }
                _ => {}
            }
            // From here on only the live state counts; a later crash must walk.
            remove_if_exists(&checkpoint).await?;
        }
        let first_rebuild = rebuild.iter().position(|r| *r);
        let from = match (first_rebuild, tracker_known) {
            (Some(i), _) => i,
            (None, false) => last,
            (None, true) => return Ok(()),
        };
        self.walk_txns(&segments, from, &rebuild, stats).await
    }

    /// After truncation into the last segment: its index and the open transactions, again.
    pub(super) async fn rebuild_txns_of_last(&self) -> Result<(), LogError> {
        let segments: Vec<Rc<Segment>> = self.st.borrow().segments.values().cloned().collect();
        let Some(last) = segments.len().checked_sub(1) else {
            return Ok(());
        };
        segments[last].txn_index.set(TxnIndexMeta::default());
        let mut rebuild = vec![false; segments.len()];
        rebuild[last] = true;
        self.walk_txns(&segments, last, &rebuild, &mut OpenStats::default())
            .await
    }

    /// Replays the segments from the newest snapshot at or before `segments[from]` to the end:
    /// rewrites the index of each segment `rebuild` marks, writes the snapshots missing up to
    /// `from`, and takes the open transactions at the end.
    async fn walk_txns(
        &self,
        segments: &[Rc<Segment>],
        from: usize,
        rebuild: &[bool],
        stats: &mut OpenStats,
    ) -> Result<(), LogError> {
        let mut start = from;
        let mut tracker = None;
        while let Some(seg) = segments.get(start) {
            if let Some(t) = self.load_txn_snapshot(seg.base_offset).await? {
                tracker = Some(t);
                break;
            }
            if start == 0 {
                break;
            }
            start -= 1;
        }
        let found = tracker.is_some();
        let mut tracker = tracker.unwrap_or_else(|| OpenTxnTracker::new(OPEN_TXNS_MAX));
        for (k, seg) in segments.iter().enumerate().skip(start) {
            // Segments in (start, from] have no snapshot (start is the newest at or before
            // from); later ones may. Each one missing is written, so the next walk is short.
            let missing = if k <= from {
                k > start || !found
            } else {
                self.load_txn_snapshot(seg.base_offset).await?.is_none()
            };
            if missing {
                let bytes = encode_snapshot(seg.base_offset, &tracker.entries());
                let path = segment_file(&self.dir, seg.base_offset, TXN_SNAPSHOT_EXT);
                write_file_atomically(&path, bytes, true).await?;
            }
            let entries = self.walk_segment(seg, &mut tracker).await?;
            stats.txn_segments_walked += 1;
            if rebuild.get(k).copied().unwrap_or(false) {
                txn_index::write_whole(&self.dir, seg.base_offset, &entries, true).await?;
                seg.txn_index.set(TxnIndexMeta::of(&entries));
                stats.txn_indexes_rebuilt += 1;
            }
        }
        if tracker.untracked() > 0 {
            tracing::warn!(dir = %self.dir.display(), untracked = tracker.untracked(), max = OPEN_TXNS_MAX, "too many open transactions while rebuilding: some are not tracked");
        }
        let walked = segments.len() - start.min(segments.len());
        if walked > 1 {
            tracing::info!(dir = %self.dir.display(), segments = walked, from_segment = segments.get(start).map(|s| s.base_offset), open = tracker.len(), "rebuilt the transaction state of the log");
        }
        self.st.borrow_mut().txns = tracker;
        Ok(())
    }

    /// The tracker a segment's snapshot holds, `None` when it is missing or unreadable (logged).
    async fn load_txn_snapshot(&self, base: u64) -> Result<Option<OpenTxnTracker>, LogError> {
        let path = segment_file(&self.dir, base, TXN_SNAPSHOT_EXT);
        let Some(bytes) = read_small_file(&path).await? else {
            return Ok(None);
        };
        match decode_snapshot(&bytes) {
            Ok((offset, entries)) if offset == base => {
                Ok(Some(OpenTxnTracker::from_entries(entries, OPEN_TXNS_MAX)))
            }
            Ok((offset, _)) => {
                tracing::warn!(file = %path.display(), offset, "transaction snapshot of another offset: ignored");
                Ok(None)
            }
            Err(reason) => {
                tracing::warn!(file = %path.display(), "unreadable transaction snapshot ({reason}): ignored");
                Ok(None)
            }
        }
    }

    /// Every batch header of `seg` into `tracker` (markers read), returning the segment's abort
    /// entries.
    async fn walk_segment(
        &self,
        seg: &Segment,
        tracker: &mut OpenTxnTracker,
    ) -> Result<Vec<AbortedTxnEntry>, LogError> {
        let size = seg.size_bytes();
        seg.ensure_written(size).await?;
        let max_batch_bytes = self.config.get().max_batch_bytes;
        let mut cur = HeaderCursor::new(seg.reader(), 0, size);
        let mut out = Vec::new();
        while let Some(h) = cur.peek(seg, max_batch_bytes).await? {
            let marker = if h.is_control() && h.is_transactional() && h.producer_id >= 0 {
                super::headers::marker_at(&mut cur, seg, &h).await?
            } else {
                None
            };
            if let Some(e) = tracker.on_batch(&h, marker) {
                out.push(e);
            }
            cur.advance(&h);
        }
        Ok(out)
    }
}

/// Removes a segment's transaction files (before its log, so a crash between leaves a segment
/// without them, which recovery rebuilds, never stale files of a deleted segment).
pub(super) async fn delete_txn_files(seg: &Segment) -> Result<(), LogError> {
    let dir = seg.dir().to_path_buf();
    remove_if_exists(&txn_index::txn_index_path(&dir, seg.base_offset)).await?;
    remove_if_exists(&segment_file(&dir, seg.base_offset, TXN_SNAPSHOT_EXT)).await
}
