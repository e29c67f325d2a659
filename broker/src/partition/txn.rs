//! A partition's share of transactions (DESIGN §9): the markers a transaction coordinator
//! writes, what a transactional batch or a marker changes (the producer table's epochs and the
//! open and aborted transactions of spool-core's [`PartitionTxns`]), and what read_committed
//! readers see — the last stable offset (LSO) and the aborted transactions in a fetch's range.
//!
//! Promises: only a coordinator's produce may carry a control batch (`Origin` in `mod.rs`); a
//! client's transactional batch opens a transaction here only once its coordinator verified it
//! (KIP-890 part 1, `verify`: INVALID_TXN_STATE otherwise); a marker from a coordinator epoch
//! older than the producer's last marker here is refused (TRANSACTION_COORDINATOR_FENCED: a
//! deposed coordinator's), and so is a late copy of an older transaction's marker, told apart
//! by its decision offset; a retry of the marker already here is answered as that one, not
//! appended again (spool-core's `txn::marker_verdict`); a marker from an epoch older than the producer's is refused
//! (INVALID_PRODUCER_EPOCH) and one from a newer epoch fences the old one; markers are appended
//! like any batch (leader epoch, replication, acks=all, fdatasync under `durability = fsync`) and
//! answered only once the in-sync replicas hold them. The LSO never passes the high watermark,
//! nor the first offset of a transaction still open or decided above the high watermark.
//!
//! The aborted transactions a fetch reports come from the log's own per-segment index
//! (`PartitionLog::aborted_txns`, spool-storage's `txn_index`), which every replica keeps on
//! every append path and rebuilds on recovery: they cover the whole log, across restarts and
//! leadership moves, at most [`ABORTED_PER_FETCH_MAX`] per fetch (the earliest by first offset).
//! The open transactions are rebuilt with the producer table (same tail scan, same bound) and
//! seeded from the log's open transactions (`PartitionLog::open_txns`, bounded by spool-storage's
//! `OPEN_TXNS_MAX`), so one whose first batch precedes the scanned tail still holds the LSO
//! back from its first offset. What the tail scan cannot restore: a transaction completed before
//! the tail whose marker is still above the high watermark after a restart holds nothing back
//! (its marker is already in the log, so readers see it decided). Past `OPEN_TXNS_MAX` open
//! transactions in one partition the log indexes no abort of the untracked ones (logged there).

use spool_core::producer_state::{BatchInfo, Check};
use spool_core::txn::partition_txns::PartitionTxns;
use spool_core::txn::{marker_verdict, MarkerVerdict};
use spool_protocol::ErrorCode;
use spool_storage::batch::{self, BatchHeader};
use spool_storage::control::{self, Marker};
use spool_storage::LogError;

use super::{Origin, Partition};

/// Aborted transactions the in-memory [`PartitionTxns`] keeps: none, since fetches are answered
/// from the log's index (which holds them all); the in-memory state keeps only what the LSO needs.
pub(super) const IN_MEMORY_ABORTED_TXNS_MAX: usize = 0;
/// Aborted transactions one fetch of one partition reports.
pub const ABORTED_PER_FETCH_MAX: usize = 10_000;
/// How long a marker waits for the in-sync replicas.
const MARKER_TIMEOUT_MS: i32 = 5_000;

/// What the producer table and the transaction state say of one batch before its append.
pub(super) enum Checked {
    Data,
    /// A retry of a batch already in the log at this base offset.
    Duplicate {
        base_offset: u64,
    },
    Marker(Marker),
}

/// Replays one batch read back from the log into the transaction state.
pub(super) fn replay(
    txns: &mut PartitionTxns,
    info: &BatchInfo,
    transactional: bool,
    marker: Option<Marker>,
) {
    if info.is_control {
        if let Some(m) = marker {
            txns.on_marker(
                info.producer_id,
                info.producer_epoch,
                m.commit,
                info.base_offset,
            );
        }
    } else {
        txns.on_batch(
            info.producer_id,
            info.producer_epoch,
            transactional,
            info.base_offset,
            info.last_offset,
        );
    }
}

impl Partition {
    /// The producer table's verdict on a batch (under `append_turn`).
    pub(super) fn check_batch(
        &self,
        origin: Origin,
        b: &batch::Checked,
        last_seq: i32,
    ) -> Result<Checked, ErrorCode> {
        let h = b.header();
        if h.is_control() {
            let m = control::read_marker(b.bytes()).map_err(|_| ErrorCode::InvalidRecord)?;
            let verdict = marker_verdict(
                &self.producers.borrow(),
                &self.txns.borrow(),
                h.producer_id,
                h.producer_epoch,
                m.coordinator_epoch,
                m.decision_offset,
            )?;
            return Ok(match verdict {
                MarkerVerdict::Append => Checked::Marker(m),
                // Answered as the marker already in the log (acks wait for its replication).
                MarkerVerdict::AlreadyWritten { offset } => Checked::Duplicate {
                    base_offset: offset,
                },
            });
        }
        let Origin::Client(verified) = origin else {
            // A group coordinator's TxnOffsetCommit batch carries the producer's epoch but no
            // sequence: only a fenced epoch is refused.
            self.producers
                .borrow()
                .check_marker(h.producer_id, h.producer_epoch)
                .map_err(|_| ErrorCode::ProducerFenced)?;
            return Ok(Checked::Data);
        };
        let check = self.producers.borrow().check(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            last_seq,
        );
        match check {
            // KIP-890: no transaction opens here without its coordinator's word (`verify`).
            Check::Append
                if h.is_transactional() && !self.may_append_transactional(h, verified) =>
            {
                Err(ErrorCode::InvalidTxnState)
            }
            Check::Append => Ok(Checked::Data),
            Check::Duplicate { base_offset } => Ok(Checked::Duplicate { base_offset }),
            Check::Reject(code) => Err(code),
        }
    }

    pub(super) fn on_batch_appended(
        &self,
        origin: Origin,
        h: &BatchHeader,
        last_seq: i32,
        base_offset: u64,
        last_offset: u64,
    ) {
        if matches!(origin, Origin::Client(_)) {
            self.producers.borrow_mut().on_append(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last_seq,
                base_offset,
                last_offset,
            );
        }
        self.txns.borrow_mut().on_batch(
            h.producer_id,
            h.producer_epoch,
            h.is_transactional(),
            base_offset,
            last_offset,
        );
    }

    pub(super) fn on_marker_appended(&self, h: &BatchHeader, m: Marker, offset: u64) {
        self.forget_verifications(h.producer_id);
        {
            let mut producers = self.producers.borrow_mut();
            producers.on_marker(h.producer_id, h.producer_epoch, offset);
            producers.note_marker(
                h.producer_id,
                m.coordinator_epoch,
                m.decision_offset,
                offset,
            );
        }
        self.txns
            .borrow_mut()
            .on_marker(h.producer_id, h.producer_epoch, m.commit, offset);
    }

    /// Writes a commit (or abort) marker of (`producer_id`, `producer_epoch`), for the
    /// transaction decided at `decision_offset` (-1: unknown), as the leader and waits for the
    /// in-sync replicas (module docs): the code a coordinator's WriteTxnMarkers gets for this
    /// partition.
    pub async fn write_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        decision_offset: i64,
    ) -> ErrorCode {
        let now = crate::clock::now_ms();
        let marker = Marker {
            commit,
            coordinator_epoch,
            decision_offset,
        };
        let batch = control::marker_batch(producer_id, producer_epoch, marker, now).freeze();
        let r = self
            .produce_as(
                Origin::Coordinator,
                batch,
                -1,
                MARKER_TIMEOUT_MS,
                control::MARKER_BATCH_BYTES_MAX,
                now,
            )
            .await;
        if r.error != ErrorCode::None {
            tracing::debug!(tp = %self.tp, producer_id, producer_epoch, commit, code = ?r.error, message = ?r.message, "marker not written");
        }
        r.error
    }

    /// Rebuilds the producer table and the transaction state unless this leadership did.
    pub(super) async fn ensure_txn_state(&self) -> Result<(), LogError> {
        if self.producers_loaded.get() {
            return Ok(());
        }
        self.load_producer_state().await
    }

    /// The last stable offset (call after [`Partition::ensure_txn_state`]).
    pub fn last_stable_offset(&self) -> u64 {
        let hw = self.high_watermark();
        let mut txns = self.txns.borrow_mut();
        txns.on_high_watermark(hw);
        let lso = txns.last_stable_offset(hw);
        debug_assert!(lso <= hw, "{}: LSO {lso} above HW {hw}", self.tp);
        lso
    }

    /// (producer id, first offset) of the aborted transactions a read_committed fetch of
    /// [`from`, `to`) reports, from the log's index (module docs), and where the fetch's records
    /// must stop for that list to be whole: with more than [`ABORTED_PER_FETCH_MAX`] in range,
    /// the list holds the earliest and the fetch stops below the first offset of the next one
    /// (first offsets are distinct batches, so nothing the fetch returns belongs to one left out).
    pub(super) async fn aborted_in(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<(i64, i64)>, u64), LogError> {
        let from = from.max(self.log.log_start_offset());
        let max = self.aborted_per_fetch_max.get();
        let mut aborted = self.log.aborted_txns(from, to, max + 1).await?;
        let mut upper = to;
        if aborted.len() > max {
            let next = aborted[max].first_offset;
            aborted.truncate(max);
            if next > from {
                upper = upper.min(next);
            } else {
                // More aborted transactions than the bound all overlap `from`: the list cannot
                // be whole for any records, so the earliest go out and the rest would show.
                tracing::warn!(tp = %self.tp, from, to, max, "more aborted transactions overlap a fetch offset than one answer holds");
            }
        }
        let list = aborted
            .into_iter()
            .map(|a| (a.producer_id, a.first_offset as i64))
            .collect();
        Ok((list, upper))
    }

    /// The open transactions: (producer id, epoch, first offset), for DescribeProducers.
    pub fn open_transactions(&self) -> Vec<(i64, i16, u64)> {
        self.txns
            .borrow()
            .open_txns()
            .map(|t| (t.producer_id, t.producer_epoch, t.first_offset))
            .collect()
    }
}
