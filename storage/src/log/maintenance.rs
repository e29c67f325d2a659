//! Changes to the log other than appends: retention, deleting records before an offset,
//! truncation (for replication), and compaction. Each keeps the transaction index consistent
//! (txn.rs): a deleted segment's files go with it, truncation rebuilds the last segment's, and
//! compaction keeps them (no offset moves, and no transactional or control batch goes: an aborted
//! transaction's batch is only emptied). Compaction cleans transactional records by their fate
//! (`compaction_txn`): committed ones by key, aborted ones away, undecided ones kept. Each takes
//! `maintenance_lock`; those that touch the active segment also take `append_lock`.

use std::rc::Rc;

use bytes::Bytes;

use super::PartitionLog;
use crate::compaction::{self, OffsetMap, TxnOutcomes};
use crate::error::LogError;
use crate::retention::{self, SegmentStat};
use crate::scan::{scan_all, ScanStop};
use crate::segment::{
    open_reader, read_at, remove_if_exists, scan_file, segment_file, sync_dir,
    write_file_atomically, HeaderCursor, Segment,
};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionStats {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionStats {
    pub segments_rewritten: usize,
    pub records_kept: u64,
    pub records_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Batches left as they were because their codec cannot be decompressed here.
    pub opaque_batches: u64,
}

impl PartitionLog {
    fn closed_segments(&self) -> Vec<Rc<Segment>> {
        let st = self.st.borrow();
        let n = st.segments.len().saturating_sub(1);
        st.segments.values().take(n).cloned().collect()
    }

    /// Deletes whole closed segments past `retention.ms` / `retention.bytes`.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionStats, LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        self.check_open()?;
        let closed = self.closed_segments();
        let stats: Vec<SegmentStat> = closed
            .iter()
            .map(|s| {
                let idx = s.index.borrow();
                SegmentStat {
                    base_offset: s.base_offset,
                    next_offset: idx.next_offset,
                    size_bytes: idx.size_bytes,
                    max_timestamp: idx.max_timestamp,
                }
            })
            .collect();
        let active_bytes = self.st.borrow().active().size_bytes();
        let n = retention::segments_to_delete(
            &stats,
            active_bytes,
            self.config.get().retention_ms,
            self.config.get().retention_bytes,
            now_ms,
        );
        let mut out = RetentionStats {
            log_start_offset: self.log_start_offset(),
            ..Default::default()
        };
        if n == 0 {
            return Ok(out);
        }
        // Everything up to the first kept segment goes; that segment's base is the new start.
        let new_start = {
            let st = self.st.borrow();
            let kept = st
                .segments
                .keys()
                .nth(n)
                .copied()
                .unwrap_or(st.log_end_offset);
            kept.max(st.log_start_offset)
        };
        out.bytes_deleted = stats[..n].iter().map(|s| s.size_bytes).sum();
        out.segments_deleted = n;
        out.log_start_offset = new_start;
        self.advance_log_start(new_start).await?;
        Ok(out)
    }

    /// Kafka's DeleteRecords: offsets below `offset` become unreadable and whole segments below
    /// it are deleted. Returns the new log start.
    pub async fn delete_records_before(&self, offset: u64) -> Result<u64, LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        self.check_open()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset > start {
            self.advance_log_start(offset).await?;
        }
        Ok(self.log_start_offset())
    }

    /// Moves the log start forward, persisting it before deleting segments wholly below it.
    async fn advance_log_start(&self, new_start: u64) -> Result<(), LogError> {
        let epochs_changed = {
            let mut st = self.st.borrow_mut();
            st.log_start_offset = st.log_start_offset.max(new_start);
            let start = st.log_start_offset;
            st.epochs.truncate_from_start(start)
        };
        self.persist_log_start().await?;
        if epochs_changed {
            self.persist_epochs().await?;
        }
        let doomed: Vec<Rc<Segment>> = {
            let mut st = self.st.borrow_mut();
            let start = st.log_start_offset;
            let active_base = st.active().base_offset;
            // Only a prefix of segments goes, so the log never gets a hole.
            let mut out = Vec::new();
            while let Some((&base, seg)) = st.segments.iter().next() {
                if base == active_base || seg.next_offset() > start {
                    break;
                }
                let seg = Rc::clone(seg);
                st.segments.remove(&base);
                out.push(seg);
            }
            out
        };
        for seg in doomed {
            delete_segment_files(&seg).await?;
        }
        sync_dir(&self.dir).await
    }

    /// Truncates the log so it ends at the batch boundary at or below `offset` (replication's
    /// "truncate to the leader's epoch end"). Returns the new log end.
    pub async fn truncate_to(&self, offset: u64) -> Result<u64, LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        let _a = Self::lock(&self.append_lock, &self.dir).await?;
        self.check_open()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset >= end {
            return Ok(end);
        }
        if offset < start {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        // Seal the active writer: its staged bytes reach the file, then the file is cut.
        let active = self.st.borrow().active();
        if let Some(w) = active.writer() {
            w.seal().await?;
        }
        active.writer.borrow_mut().take();
        let (target, later): (Rc<Segment>, Vec<Rc<Segment>>) = {
            let mut st = self.st.borrow_mut();
            let base = st
                .segments
                .range(..=offset)
                .next_back()
                .map(|(b, _)| *b)
                .unwrap_or(start);
            let later_keys: Vec<u64> = st.segments.range(base + 1..).map(|(b, _)| *b).collect();
            let later = later_keys
                .iter()
                .filter_map(|b| st.segments.remove(b))
                .collect();
            (st.active(), later)
        };
        for seg in later {
            delete_segment_files(&seg).await?;
        }
        // Find the first batch holding `offset` or later; the file ends where it starts.
        let (from, size) = {
            let idx = target.index.borrow();
            (idx.lookup_offset(offset), idx.size_bytes)
        };
        let mut cur = HeaderCursor::new(target.reader(), from, size);
        while let Some(h) = cur.peek(&target, self.config.get().max_batch_bytes).await? {
            if h.last_offset() as u64 >= offset {
                break;
            }
            cur.advance(&h);
        }
        let cut = cur.position;
        let reader = target.reader();
        reader
            .truncate(cut)
            .await
            .map_err(|e| LogError::io("truncating", &target.log_path, e))?;
        let (index, stop, _) = scan_file(
            &reader,
            &target.log_path,
            target.base_offset,
            self.config.get().index_interval_bytes,
            self.config.get().max_batch_bytes,
        )
        .await?;
        if stop != ScanStop::End {
            return Err(target.corrupt(index.size_bytes, format!("after truncation: {stop:?}")));
        }
        *target.index.borrow_mut() = index;
        remove_if_exists(&segment_file(&self.dir, target.base_offset, "index")).await?;
        remove_if_exists(&segment_file(&self.dir, target.base_offset, "timeindex")).await?;
        // Entries at or past the cut go with it, and the open transactions are those at the new
        // end: both rebuilt from the target's snapshot (txn.rs).
        self.rebuild_txns_of_last().await?;
        self.activate(&target).await?;
        let new_end = target.next_offset();
        let epochs_changed = {
            let mut st = self.st.borrow_mut();
            st.log_end_offset = new_end;
            st.durable_offset = st.durable_offset.min(new_end);
            st.tail.clear();
            st.epochs.truncate_from_end(new_end) > 0
        };
        if epochs_changed {
            self.persist_epochs().await?;
        }
        sync_dir(&self.dir).await?;
        Ok(new_end)
    }

    /// Compacts the closed segments (`cleanup.policy=compact`): keeps the newest record per key,
    /// tombstones for `delete.retention.ms`. Offsets never change.
    pub async fn compact(&self, now_ms: i64) -> Result<CompactionStats, LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        self.check_open()?;
        let closed = self.closed_segments();
        let mut stats = CompactionStats::default();
        let txns = self.compaction_txn_view(&closed).await?;
        let mut map = OffsetMap::new(self.config.get().compaction_keys_max);
        let mut images = Vec::with_capacity(closed.len());
        for seg in &closed {
            let size = seg.size_bytes();
            let image = Bytes::from(read_at(&seg.reader(), &seg.log_path, 0, size as usize).await?);
            map.add_segment(&image, self.config.get().max_batch_bytes, &txns)
                .map_err(|e| compaction_error(seg, e))?;
            images.push(image);
        }
        stats.opaque_batches = map.opaque_batches;
        for (seg, image) in closed.iter().zip(images) {
            let out = compaction::compact_segment(
                &image,
                &map,
                now_ms,
                self.config.get().delete_retention_ms,
                self.config.get().max_batch_bytes,
                &txns,
            )
            .map_err(|e| compaction_error(seg, e))?;
            stats.records_kept += out.records_kept;
            stats.records_removed += out.records_removed;
            stats.bytes_before += image.len() as u64;
            stats.bytes_after += out.image.len() as u64;
            if out.image.len() == image.len() {
                continue;
            }
            self.replace_segment(seg, out.image).await?;
            stats.segments_rewritten += 1;
        }
        Ok(stats)
    }

    /// What compaction may know of the transactions of the `closed` segments (chosen before this
    /// is called, so all their batches precede the view): the open transactions now, then the
    /// aborted ones below their end (`compaction_txn`). Nothing is known when the log stopped
    /// tracking some open transactions or more aborted ones exist than the key map's bound.
    async fn compaction_txn_view(&self, closed: &[Rc<Segment>]) -> Result<TxnOutcomes, LogError> {
        let Some(end) = closed.last().map(|s| s.next_offset()) else {
            return Ok(TxnOutcomes::unknown());
        };
        let open = self.open_txns();
        let complete = self.untracked_txns() == 0;
        let max = self.config.get().compaction_keys_max;
        match self.aborted_txns(self.log_start_offset(), end, max).await {
            Ok(aborted) => Ok(TxnOutcomes::new(
                &open,
                &aborted,
                complete && aborted.len() < max,
            )),
            // An index that could not be written: transactional batches are kept whole until
            // a reopen rebuilds it.
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), "compaction keeps transactional batches whole: {e}");
                Ok(TxnOutcomes::unknown())
            }
        }
    }

    /// Swaps a closed segment's file for `image` (write beside, fsync, rename over, fsync dir),
    /// then its index and reader.
    async fn replace_segment(&self, seg: &Segment, image: Vec<u8>) -> Result<(), LogError> {
        let (index, stop) = scan_all(
            &image,
            seg.base_offset,
            self.config.get().index_interval_bytes,
            self.config.get().max_batch_bytes,
        );
        assert_eq!(stop, ScanStop::End, "a compacted image is whole batches");
        let cleaned = seg.log_path.with_extension("log.cleaned");
        write_file_atomically(&cleaned, image, true).await?;
        glommio::io::rename(&cleaned, &seg.log_path)
            .await
            .map_err(|e| LogError::io("renaming", &cleaned, e))?;
        sync_dir(&self.dir).await?;
        let reader = open_reader(&seg.log_path).await?;
        *seg.index.borrow_mut() = index;
        *seg.reader.borrow_mut() = Rc::new(reader);
        seg.write_index_files().await
    }
}

fn compaction_error(seg: &Segment, e: compaction::CompactionError) -> LogError {
    match e {
        compaction::CompactionError::Invalid { position, error } => {
            seg.corrupt(position, error.to_string())
        }
        other => LogError::Config(other.to_string()),
    }
}

pub(super) async fn delete_segment_files(seg: &Segment) -> Result<(), LogError> {
    super::txn::delete_txn_files(seg).await?;
    let dir = seg.dir().to_path_buf();
    remove_if_exists(&seg.log_path).await?;
    remove_if_exists(&segment_file(&dir, seg.base_offset, "index")).await?;
    remove_if_exists(&segment_file(&dir, seg.base_offset, "timeindex")).await
}
