//! Restarting a log empty at an offset past its end (Kafka's `UnifiedLog.truncateFullyAndStartAt`):
//! a follower whose whole log lies below its leader's log start (it was away while retention or
//! DeleteRecords moved the leader's start past everything it has) drops every segment and
//! starts again at the leader's log start, with log start = log end = that offset.
//!
//! Owns: [`PartitionLog::truncate_fully_and_start_at`] and the roll-forward of an interrupted
//! one at open ([`PartitionLog::finish_start_at`]).
//!
//! Promises: only for an offset past the log end (an offset at or below it is refused with
//! `OffsetOutOfRange` and nothing changes: records the leader still has are never dropped this
//! way). A crash at any point leaves, on reopen, either the old log untouched or the new empty
//! one at `offset` — never a log with a gap or a start past its end. The steps, in order:
//! 1. the log-start checkpoint is written (atomically, fsynced) with `offset`. Before it, the
//!    disk holds the old log. After it, the checkpoint names a start past every segment's end,
//!    which a healthy log never does (DeleteRecords and retention stop at the log end), and
//!    open finishes the job whatever is left: it deletes every segment and creates the empty
//!    one at the checkpoint, so a half-deleted old log (gaps included) is never served;
//! 2. the leader-epoch checkpoint is written empty (the deleted records' epochs no longer
//!    apply; Kafka's `leaderEpochCache.clearAndFlush()`);
//! 3. every segment's files are deleted, oldest first, and the directory fsynced — so the new
//!    segment's entry can never reach the disk while an old one is still there;
//! 4. the empty active segment at `offset` is created (its directory entry fsynced);
//! 5. the in-memory state takes it all in one step: segments, start = end = durable = offset,
//!    empty tail cache and epoch cache.
//!
//! A failed I/O at any step (the seal of the active writer, before step 1, included) leaves the
//! log refusing work (`Offline`) until it is reopened, which then rolls forward as above (or,
//! failed before step 1, finds the old log). Step 3 deletes each segment's transaction files
//! with it, and step 5 empties the open transactions (txn.rs). The log keeps no idempotent-producer
//! table or high-watermark checkpoint of its own: the broker rebuilds producer state from the
//! log and holds the HW.

use std::collections::BTreeMap;

use super::{PartitionLog, EPOCH_CHECKPOINT};
use crate::epoch::LeaderEpochCache;
use crate::error::LogError;
use crate::segment::{sync_dir, write_file_atomically};

/// The steps of [`PartitionLog::truncate_fully_and_start_at`] a test may stop after, as a crash
/// would (module docs). Outside tests, only a name.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartAtStep {
    /// Before the first write: the old log must come back.
    Sealed,
    LogStartWritten,
    EpochsCleared,
    FirstSegmentDeleted,
    SegmentsDeleted,
    SegmentCreated,
}

impl PartitionLog {
    /// Drops every record and restarts the log empty at `offset`, which must lie past the log
    /// end (module docs). On return the log starts and ends at `offset`, durably.
    pub async fn truncate_fully_and_start_at(&self, offset: u64) -> Result<(), LogError> {
        let _m = Self::lock(&self.maintenance_lock, &self.dir).await?;
        let _a = Self::lock(&self.append_lock, &self.dir).await?;
        self.check_open()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if offset <= end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let restarted = self.start_at_steps(offset).await;
        if let Err(e) = &restarted {
            // The disk may be anywhere between the old log and the new one: reopening decides.
            self.st.borrow_mut().closed = true;
            tracing::warn!(dir = %self.dir.display(), offset, "restarting the log empty failed: {e}");
        }
        restarted
    }

    async fn start_at_steps(&self, offset: u64) -> Result<(), LogError> {
        // Seal the writer first: nothing is staged behind the files about to go.
        let active = self.st.borrow().active();
        if let Some(w) = active.writer() {
            w.seal().await?;
        }
        active.writer.borrow_mut().take();
        self.crash_point(StartAtStep::Sealed)?;
        self.write_log_start(offset).await?;
        self.crash_point(StartAtStep::LogStartWritten)?;
        self.finish_start_at(offset).await
    }

    /// Steps 2–5 of the module docs: also what open runs when it finds a log-start checkpoint
    /// past every segment's end (an interrupted restart). The segments have no writer.
    pub(super) async fn finish_start_at(&self, offset: u64) -> Result<(), LogError> {
        let empty = LeaderEpochCache::default();
        write_file_atomically(
            &self.dir.join(EPOCH_CHECKPOINT),
            empty.encode().into_bytes(),
            true,
        )
        .await?;
        self.crash_point(StartAtStep::EpochsCleared)?;
        let old: Vec<_> = self.st.borrow().segments.values().cloned().collect();
        for (i, seg) in old.iter().enumerate() {
            super::maintenance::delete_segment_files(seg).await?;
            if i == 0 {
                self.crash_point(StartAtStep::FirstSegmentDeleted)?;
            }
        }
        sync_dir(&self.dir).await?;
        self.crash_point(StartAtStep::SegmentsDeleted)?;
        let seg = self.create_segment(offset).await?;
        self.crash_point(StartAtStep::SegmentCreated)?;
        let mut st = self.st.borrow_mut();
        st.segments = BTreeMap::from([(offset, seg)]);
        st.log_start_offset = offset;
        st.log_end_offset = offset;
        st.durable_offset = offset;
        st.tail.clear();
        st.epochs = empty;
        st.txns = crate::txn_tracker::OpenTxnTracker::new(crate::txn_tracker::OPEN_TXNS_MAX);
        Ok(())
    }

    /// In tests, stops the restart after `step` as a crash would (the caller then drops the log
    /// without closing it); otherwise nothing.
    #[cfg(test)]
    fn crash_point(&self, step: StartAtStep) -> Result<(), LogError> {
        if self.crash_after.get() == Some(step) {
            return Err(LogError::Offline {
                dir: self.dir.clone(),
                reason: format!("test crash after {step:?}"),
            });
        }
        Ok(())
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn crash_point(&self, _step: StartAtStep) -> Result<(), LogError> {
        Ok(())
    }

    /// In tests: make the next restart stop after `step` (see [`StartAtStep`]).
    #[cfg(test)]
    pub(crate) fn crash_restart_after(&self, step: StartAtStep) {
        self.crash_after.set(Some(step));
    }
}
