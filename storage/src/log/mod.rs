//! The partition log: one directory of segments, owned by one core.
//!
//! Owns the ordered segments (closed ones read-only, the last one active), the log start and end
//! offsets, the durable offset, the tail cache and the leader-epoch cache, and drives the
//! writer, recovery, retention, compaction and a follower's restart past its end (`start_at`).
//! Promises:
//! - `append` assigns offsets by writing `baseOffset` and `partitionLeaderEpoch` into the batch
//!   header in place (no re-encoding) and returns them; appends are applied in call order.
//!   `append_checked` keeps a shared batch's bytes unchanged and stamps a copy of its first 16
//!   bytes instead: the tail cache and the writer take the two pieces in order.
//! - `sync_to(o)` returns once every offset below `o` is fdatasynced (group commit: concurrent
//!   callers share fdatasyncs).
//! - reads return whole batches, at least one even past `max_bytes`, never at or past the caller's
//!   upper offset (the high watermark), from memory for the tail and as page-cache file ranges
//!   (for splice) or copies otherwise.
//! - after `close`, reopening skips the scan; after a crash, only the active segment is scanned
//!   and its torn tail truncated; corruption in a closed segment is an error naming file and
//!   position, never skipped.
//! - every append path (leader and follower) keeps each segment's aborted-transaction index and
//!   the open transactions ([`PartitionLog::aborted_txns`], [`PartitionLog::open_txns`]),
//!   consistent through rolls, truncation, retention, compaction, close and crash recovery
//!   (`txn`, which owns them).
//!
//! Concurrency: methods take `&self` and the log lives in an `Rc` on its core. Appends (and roll)
//! are serialized by `append_lock`; truncation, retention, compaction and close also take
//! `maintenance_lock` (always before `append_lock`). No `RefCell` borrow is held across `.await`.

mod headers;
mod maintenance;
mod open;
mod read;
mod start_at;
mod txn;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::BytesMut;
use glommio::sync::{Permit, Semaphore};

use crate::batch;
use crate::config::LogConfig;
use crate::epoch::LeaderEpochCache;
use crate::error::LogError;
use crate::index::SegmentIndex;
use crate::segment::{open_reader, segment_file, sync_dir, write_file_atomically, Segment};
use crate::tail::{CachedBatch, TailCache};
use crate::txn_tracker::OpenTxnTracker;
use crate::writer::SegmentWriter;

pub use headers::TailScan;
pub use maintenance::{CompactionStats, RetentionStats};
pub use open::OpenStats;
pub use read::{ReadChunk, ReadSlice};

pub(crate) const CLEAN_MARKER: &str = ".clean_shutdown";
pub(crate) const EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub(crate) const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub(crate) const LOCK_FILE: &str = ".lock";

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: u64,
    pub last_offset: u64,
    /// The log end after this append (the offset a `sync_to` for this batch names).
    pub log_end_offset: u64,
    pub max_timestamp: i64,
}

pub(crate) struct LogState {
    pub segments: BTreeMap<u64, Rc<Segment>>,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    pub durable_offset: u64,
    pub tail: TailCache,
    pub epochs: LeaderEpochCache,
    /// The transactions open at the log end (`txn`).
    pub txns: OpenTxnTracker,
    pub closed: bool,
}

impl LogState {
    pub fn active(&self) -> Rc<Segment> {
        // A log always has at least one segment: open creates one, retention never deletes the
        // active one, truncation keeps the segment it truncates into.
        Rc::clone(
            self.segments
                .values()
                .next_back()
                .expect("a log has an active segment"),
        )
    }
}

pub struct PartitionLog {
    dir: PathBuf,
    /// The settings in force: a `Cell`, so a topic config change applies to the open log
    /// ([`Self::set_topic_settings`]) and no borrow is ever held across an await.
    config: Cell<LogConfig>,
    st: RefCell<LogState>,
    append_lock: Semaphore,
    maintenance_lock: Semaphore,
    /// Held (flock) for the log's lifetime so a second process cannot open the same directory.
    lock: RefCell<Option<std::fs::File>>,
    /// fdatasyncs of this log's segments: how many (a probe for group commit), how long.
    syncs: Rc<crate::sync_probe::SyncProbe>,
    /// Where a test stops [`PartitionLog::truncate_fully_and_start_at`], as a crash would.
    #[cfg(test)]
    crash_after: std::cell::Cell<Option<start_at::StartAtStep>>,
}

/// A batch on its way into the log, and who owns its memory.
enum Incoming {
    /// Bytes the log may change in place (a batch of its own, or a follower's copy).
    Owned(BytesMut),
    /// Bytes shared with their sender (a slice of a request frame): kept as they are, in the
    /// tail cache too, so their memory is the caller's to bound (the broker's fronts bound the
    /// frames that tails keep). Never changed: the stamped head is a copy.
    Kept(bytes::Bytes),
}

impl Incoming {
    /// The batch stamped with `(base offset, leader epoch)` when given, as (head, body) pieces
    /// whose concatenation is the batch, and the whole batch (stamped when owned, as it came
    /// when kept).
    fn stamped(self, stamp: Option<(i64, i32)>) -> (bytes::Bytes, bytes::Bytes, bytes::Bytes) {
        match self {
            Incoming::Owned(mut b) => {
                if let Some((base_offset, epoch)) = stamp {
                    batch::set_base_offset(&mut b, base_offset);
                    batch::set_partition_leader_epoch(&mut b, epoch);
                }
                let b = b.freeze();
                (bytes::Bytes::new(), b.clone(), b)
            }
            Incoming::Kept(b) => match stamp {
                None => (bytes::Bytes::new(), b.clone(), b),
                Some((base_offset, epoch)) => {
                    // A validated batch is at least a header long, so it has a head to stamp.
                    let at = batch::STAMPED_HEAD_BYTES;
                    let mut head = BytesMut::from(&b[..at]);
                    batch::set_base_offset(&mut head, base_offset);
                    batch::set_partition_leader_epoch(&mut head, epoch);
                    (head.freeze(), b.slice(at..), b)
                }
            },
        }
    }
}

/// Who decides a batch's offsets and epoch.
#[derive(Debug, Clone, Copy)]
enum Stamp {
    /// The leader: the log's end and this epoch.
    Leader(i32),
    /// The leader already did: the batch is written as it came.
    AsReplicated,
}

impl PartitionLog {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The settings in force now (a copy).
    pub fn config(&self) -> LogConfig {
        self.config.get()
    }

    /// A topic config change, applied to the open log (Kafka applies topic configs live): the
    /// segment roll size and time, retention, the cleanup policy and `delete.retention.ms` take
    /// `topic`'s values from the next append or maintenance pass on. The largest batch accepted
    /// only grows here: batches already in the log must stay readable, and the broker checks a
    /// lowered `max.message.bytes` itself before appending. Buffer and index settings are the
    /// broker's, not the topic's, and stay as opened.
    pub fn set_topic_settings(&self, topic: &LogConfig) {
        let mut c = self.config.get();
        c.segment_bytes = topic.segment_bytes;
        c.segment_ms = topic.segment_ms;
        c.retention_ms = topic.retention_ms;
        c.retention_bytes = topic.retention_bytes;
        c.cleanup_policy = topic.cleanup_policy;
        c.delete_retention_ms = topic.delete_retention_ms;
        c.max_batch_bytes = c.max_batch_bytes.max(topic.max_batch_bytes);
        self.config.set(c);
    }

    pub fn log_start_offset(&self) -> u64 {
        self.st.borrow().log_start_offset
    }

    pub fn log_end_offset(&self) -> u64 {
        self.st.borrow().log_end_offset
    }

    /// Every offset below this is fdatasynced.
    pub fn durable_offset(&self) -> u64 {
        self.st.borrow().durable_offset
    }

    /// fdatasyncs issued on segment files since open.
    pub fn fdatasync_count(&self) -> u64 {
        self.syncs.issued_count()
    }

    /// fdatasyncs issued on segment files since open, and how long the finished ones took.
    pub fn sync_stats(&self) -> crate::sync_probe::SyncStats {
        self.syncs.stats()
    }

    pub fn segment_count(&self) -> usize {
        self.st.borrow().segments.len()
    }

    /// Bytes of valid batches across all segments.
    pub fn size_bytes(&self) -> u64 {
        self.st
            .borrow()
            .segments
            .values()
            .map(|s| s.size_bytes())
            .sum()
    }

    pub fn leader_epochs(&self) -> LeaderEpochCache {
        self.st.borrow().epochs.clone()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<u64> {
        self.st.borrow().segments.keys().copied().collect()
    }

    fn check_open(&self) -> Result<(), LogError> {
        if self.st.borrow().closed {
            return Err(LogError::Offline {
                dir: self.dir.clone(),
                reason: "log is closed".into(),
            });
        }
        Ok(())
    }

    async fn lock<'a>(sem: &'a Semaphore, dir: &Path) -> Result<Permit<'a>, LogError> {
        sem.acquire_permit(1)
            .await
            .map_err(|e| LogError::io("log lock", dir, e))
    }

    /// Appends one client batch (validated here: length, magic, CRC) written by `leader_epoch`:
    /// the log gives it its offsets and stamps the epoch.
    pub async fn append(
        &self,
        batch_bytes: BytesMut,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let header = batch::validate(&batch_bytes, self.config.get().max_batch_bytes)?;
        self.append_validated(
            Incoming::Owned(batch_bytes),
            header,
            Stamp::Leader(leader_epoch),
            now_ms,
        )
        .await
    }

    /// [`Self::append`] for a batch already validated ([`batch::Checked`]): the same, without
    /// checking its CRC a second time. Its size is still held to this log's largest batch.
    ///
    /// The batch's bytes are kept, not copied (issue 19: the copy to the O_DIRECT staging is
    /// the only one on the produce path): the tail cache holds them, behind a stamped copy of
    /// their first [`batch::STAMPED_HEAD_BYTES`], until it evicts the batch. A slice keeps all
    /// of the buffer it lies in alive, so the caller bounds what that pins (the broker's
    /// fronts do, `frame_pins`). The caller's bytes are never changed.
    pub async fn append_checked(
        &self,
        batch: batch::Checked,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let max = self.config.get().max_batch_bytes;
        if batch.total_bytes() > max {
            return Err(LogError::Batch(batch::BatchError::BadLength {
                length: batch.total_bytes() as i64,
                min: batch::HEADER_BYTES as i64,
                max: i64::try_from(max).unwrap_or(i64::MAX),
            }));
        }
        // No copy: the batch's bytes are kept as they came, and only its first
        // `batch::STAMPED_HEAD_BYTES`, which the stamp changes, are copied apart.
        self.append_validated(
            Incoming::Kept(batch.bytes().clone()),
            *batch.header(),
            Stamp::Leader(leader_epoch),
            now_ms,
        )
        .await
    }

    /// Appends one batch a follower fetched from its leader, unchanged: its base offset must be
    /// this log's end ([`LogError::NotContiguous`] otherwise, and nothing is written) and it
    /// keeps the leader's offsets and epoch, which the epoch cache records when it is new
    /// (DESIGN §7: followers append the leader's batches as they are).
    pub async fn append_replicated(
        &self,
        batch_bytes: BytesMut,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let header = batch::validate(&batch_bytes, self.config.get().max_batch_bytes)?;
        self.append_validated(
            Incoming::Owned(batch_bytes),
            header,
            Stamp::AsReplicated,
            now_ms,
        )
        .await
    }

    /// A broker just became the leader in `leader_epoch`: the epoch starts at this log's end
    /// (KIP-101), recorded in `leader-epoch-checkpoint` before anything is appended in it, so
    /// a follower asking where an older epoch ends gets this offset even before the first
    /// batch of the new one. Returns whether the cache changed (an epoch already started, or
    /// an older one, changes nothing).
    pub async fn begin_leader_epoch(&self, leader_epoch: i32) -> Result<bool, LogError> {
        let _turn = Self::lock(&self.append_lock, &self.dir).await?;
        self.check_open()?;
        let changed = {
            let mut st = self.st.borrow_mut();
            if st.epochs.latest_epoch().is_some_and(|e| e >= leader_epoch) || leader_epoch < 0 {
                false
            } else {
                let end = st.log_end_offset;
                !matches!(
                    st.epochs.assign(leader_epoch, end),
                    crate::epoch::Assigned::Unchanged
                )
            }
        };
        if changed {
            self.persist_epochs().await?;
        }
        Ok(changed)
    }

    async fn append_validated(
        &self,
        incoming: Incoming,
        header: batch::BatchHeader,
        stamp: Stamp,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let _turn = Self::lock(&self.append_lock, &self.dir).await?;
        self.check_open()?;
        let log_end = self.st.borrow().log_end_offset;
        let leader_epoch = match stamp {
            Stamp::Leader(epoch) => epoch,
            Stamp::AsReplicated => {
                if header.base_offset != log_end as i64 {
                    return Err(LogError::NotContiguous {
                        dir: self.dir.clone(),
                        base_offset: header.base_offset,
                        log_end_offset: log_end,
                    });
                }
                header.partition_leader_epoch
            }
        };
        self.maybe_roll(header.total_bytes() as u64, now_ms).await?;
        let (active, base_offset, epoch_changed) = {
            let mut st = self.st.borrow_mut();
            let base = st.log_end_offset;
            // A batch without an epoch (-1, from a pre-epoch writer) leaves the cache alone.
            let changed = leader_epoch >= 0
                && !matches!(
                    st.epochs.assign(leader_epoch, base),
                    crate::epoch::Assigned::Unchanged
                );
            (st.active(), base, changed)
        };
        if epoch_changed {
            self.persist_epochs().await?;
        }
        let stamp_with = match stamp {
            Stamp::Leader(_) => Some((base_offset as i64, leader_epoch)),
            // Pair assertion: the bytes already say where they go (checked under the lock).
            Stamp::AsReplicated => {
                assert_eq!(header.base_offset, base_offset as i64);
                None
            }
        };
        let (head, body, whole) = incoming.stamped(stamp_with);
        // Pair assertion: the two pieces are exactly the batch the header describes.
        assert_eq!(
            head.len() + body.len(),
            header.total_bytes(),
            "stamped batch length"
        );
        let writer = active.writer().ok_or_else(|| LogError::Offline {
            dir: self.dir.clone(),
            reason: "active segment has no writer".into(),
        })?;
        let next = base_offset + header.offset_count();
        let position = writer.append_parts(&[&head, &body], next).await?;
        let mut h = header;
        h.base_offset = base_offset as i64;
        h.partition_leader_epoch = leader_epoch;
        {
            let mut idx = active.index.borrow_mut();
            // Pair assertion: the writer put the batch exactly where the index says the end is.
            assert_eq!(
                position, idx.size_bytes,
                "append position matches the segment end"
            );
            idx.on_append(&h);
        }
        if active.first_append_ms.get().is_none() {
            active.first_append_ms.set(Some(now_ms));
        }
        {
            let mut st = self.st.borrow_mut();
            st.log_end_offset = next;
            st.tail.push(CachedBatch {
                base_offset,
                next_offset: next,
                head,
                body: body.clone(),
            });
        }
        // The batch is in the log: its transaction bookkeeping follows, in log order (under
        // `append_lock`). It reads a control batch's record, which the stamp does not touch, so
        // a kept batch's unstamped bytes serve as well as the stamped ones.
        self.track_txn_batch(&active, &h, &whole).await?;
        Ok(AppendInfo {
            base_offset,
            last_offset: next - 1,
            log_end_offset: next,
            max_timestamp: h.max_timestamp,
        })
    }

    /// Returns once every offset below `offset` is durable. Concurrent callers share fdatasyncs:
    /// each waits only for the sync that covers its own batch.
    /// An `offset` past the log end asks for the whole log.
    pub async fn sync_to(&self, offset: u64) -> Result<(), LogError> {
        loop {
            let (writer, target) = {
                let st = self.st.borrow();
                let target = offset.min(st.log_end_offset);
                if st.durable_offset >= target {
                    return Ok(());
                }
                match st.active().writer() {
                    Some(w) => (w, target),
                    None => {
                        return Err(LogError::Offline {
                            dir: self.dir.clone(),
                            reason: "log is closed".into(),
                        })
                    }
                }
            };
            // Never a mark past the log end: no append will ever record one, and the writer
            // would fdatasync forever waiting for it (a caller's offset from before a
            // truncation, say).
            writer.sync_mark(target).await?;
            let mut st = self.st.borrow_mut();
            st.durable_offset = st
                .durable_offset
                .max(writer.synced_mark().min(st.log_end_offset));
        }
    }

    /// Writes staged bytes to the file without fdatasync (for `durability = "replicated"`).
    pub async fn flush(&self) -> Result<(), LogError> {
        let w = self.st.borrow().active().writer();
        if let Some(w) = w {
            w.flush().await?;
        }
        Ok(())
    }

    async fn maybe_roll(&self, incoming_bytes: u64, now_ms: i64) -> Result<(), LogError> {
        let active = self.st.borrow().active();
        let size = active.size_bytes();
        if size == 0 {
            return Ok(());
        }
        let by_size = size + incoming_bytes > self.config.get().segment_bytes;
        let by_time = match (self.config.get().segment_ms, active.first_append_ms.get()) {
            (Some(ms), Some(first)) => now_ms.saturating_sub(first) >= ms,
            _ => false,
        };
        if by_size || by_time {
            self.roll().await?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at the log end. Caller holds `append_lock`.
    pub(crate) async fn roll(&self) -> Result<(), LogError> {
        let (old, base) = {
            let st = self.st.borrow();
            (st.active(), st.log_end_offset)
        };
        if let Some(w) = old.writer() {
            w.seal().await?;
        }
        old.writer.borrow_mut().take();
        old.write_index_files().await?;
        self.seal_txn_index(&old).await?;
        let seg = self.create_segment(base).await?;
        {
            let mut st = self.st.borrow_mut();
            st.durable_offset = st.durable_offset.max(base);
            st.segments.insert(base, seg);
        }
        self.write_txn_snapshot(base).await;
        Ok(())
    }

    /// Creates an empty active segment at `base` (file, writer, reader) and makes its directory
    /// entry durable.
    pub(crate) async fn create_segment(&self, base: u64) -> Result<Rc<Segment>, LogError> {
        let path = segment_file(&self.dir, base, "log");
        // Transaction files of an earlier segment at this base (a crash while deleting it) are
        // not this one's.
        crate::segment::remove_if_exists(&crate::txn_index::txn_index_path(&self.dir, base))
            .await?;
        crate::segment::remove_if_exists(&segment_file(&self.dir, base, txn::TXN_SNAPSHOT_EXT))
            .await?;
        let writer = SegmentWriter::open(
            path.clone(),
            0,
            base,
            &[],
            &self.config.get(),
            Rc::clone(&self.syncs),
        )
        .await?;
        let reader = open_reader(&path).await?;
        sync_dir(&self.dir).await?;
        let seg = Segment::new(
            base,
            path,
            SegmentIndex::new(base, self.config.get().index_interval_bytes),
            reader,
        );
        *seg.writer.borrow_mut() = Some(writer);
        Ok(seg)
    }

    pub(crate) async fn persist_epochs(&self) -> Result<(), LogError> {
        let text = self.st.borrow().epochs.encode();
        write_file_atomically(&self.dir.join(EPOCH_CHECKPOINT), text.into_bytes(), true).await
    }

    pub(crate) async fn persist_log_start(&self) -> Result<(), LogError> {
        let start = self.st.borrow().log_start_offset;
        self.write_log_start(start).await
    }

    /// Writes `offset` to the log-start checkpoint (atomically, fsynced), whatever the
    /// in-memory start is.
    pub(crate) async fn write_log_start(&self, offset: u64) -> Result<(), LogError> {
        let text = format!("{offset}\n");
        write_file_atomically(
            &self.dir.join(LOG_START_CHECKPOINT),
            text.into_bytes(),
            true,
        )
        .await
    }

    /// Clean shutdown: syncs and trims the active segment, writes its indexes and the open
    /// transactions (`txn`), and leaves the marker that lets the next open skip the scan. The log refuses work afterwards.
    pub async fn close(&self) -> Result<(), LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        let _a = Self::lock(&self.append_lock, &self.dir).await?;
        if self.st.borrow().closed {
            return Ok(());
        }
        let active = self.st.borrow().active();
        if let Some(w) = active.writer() {
            w.seal().await?;
        }
        active.writer.borrow_mut().take();
        active.write_index_files().await?;
        self.seal_txn_index(&active).await?;
        self.write_txn_checkpoint().await?;
        self.st.borrow_mut().closed = true;
        write_file_atomically(&self.dir.join(CLEAN_MARKER), Vec::new(), true).await?;
        // Another opener may take the directory now. Dropping the lock is a close(2) of a file
        // never written: it releases the flock and does no I/O, so it stays on the reactor.
        self.lock.borrow_mut().take();
        Ok(())
    }
}

#[cfg(test)]
mod compaction_txn_tests;
#[cfg(test)]
mod delete_tests;
#[cfg(test)]
mod kept_tests;
#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod start_at_tests;
#[cfg(test)]
mod sync_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
