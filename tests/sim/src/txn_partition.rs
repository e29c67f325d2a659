//! [`TxnPartition`]: one data partition of the transaction world — its log of data batches and
//! control markers, and its leader's transaction state, spool-core's real
//! [`ProducerStateTable`] and [`PartitionTxns`].
//!
//! Owns: the log (single replica, every append durable before it is answered: the high watermark
//! is the log end, and a crash loses nothing), the checks a leader makes before an append in
//! `broker/src/partition/txn.rs`'s order — the producer table's epoch and sequence check, KIP-890
//! verification with the coordinator for a producer's first batch of a transaction here, and
//! spool-core's `marker_verdict` for markers (the producer-epoch and coordinator-epoch fences,
//! and the decision offset that refuses a late copy of an older transaction's marker) — and, after a
//! crash, rebuilding both structs by replaying the whole log the way
//! `Partition::load_producer_state_in_turn` replays its tail.
//! Promises: every append is reported as an [`Appended`] for the checkers; a fetch returns only
//! what lies below the last stable offset, with the aborted transactions of its range.
//! Never does: decide anything itself (spool-core does), or replicate (one replica; the
//! replication world in [`crate::world`] covers that).

use spool_core::producer_state::{BatchInfo, Check, ProducerStateTable};
use spool_core::txn::partition_txns::{AbortedTxn, PartitionTxns};
use spool_core::txn::{marker_verdict, MarkerVerdict};
use spool_protocol::ErrorCode;

use crate::txn_net::{DataBatch, RecordTag};

/// Producers one partition's table remembers (large: the world has a handful).
const PRODUCERS_MAX: usize = 1_000;
/// Aborted transactions kept per partition.
const ABORTED_MAX: usize = 100_000;
/// Entries one fetch returns at most.
pub const FETCH_ENTRIES_MAX: usize = 64;

/// One log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Data {
        base_offset: u64,
        batch: DataBatch,
    },
    Marker {
        offset: u64,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        decision_offset: i64,
    },
}

impl Entry {
    pub fn base_offset(&self) -> u64 {
        match self {
            Entry::Data { base_offset, .. } => *base_offset,
            Entry::Marker { offset, .. } => *offset,
        }
    }

    pub fn last_offset(&self) -> u64 {
        match self {
            Entry::Data { base_offset, batch } => *base_offset + batch.records.len() as u64 - 1,
            Entry::Marker { offset, .. } => *offset,
        }
    }

    fn info(&self) -> BatchInfo {
        match self {
            Entry::Data { base_offset, batch } => BatchInfo {
                producer_id: batch.producer_id,
                producer_epoch: batch.producer_epoch,
                first_seq: batch.first_seq,
                last_seq: batch.last_seq(),
                base_offset: *base_offset,
                last_offset: self.last_offset(),
                is_control: false,
            },
            Entry::Marker {
                offset,
                producer_id,
                producer_epoch,
                ..
            } => BatchInfo {
                producer_id: *producer_id,
                producer_epoch: *producer_epoch,
                first_seq: -1,
                last_seq: -1,
                base_offset: *offset,
                last_offset: *offset,
                is_control: true,
            },
        }
    }
}

/// What one append wrote, for the checkers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    Data {
        producer_id: i64,
        producer_epoch: i16,
        base_offset: u64,
        records: Vec<RecordTag>,
    },
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        offset: u64,
    },
}

/// A read_committed fetch's answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub entries: Vec<Entry>,
    pub aborted: Vec<AbortedTxn>,
    /// Where the next fetch starts.
    pub next_offset: u64,
}

pub struct TxnPartition {
    pub id: i32,
    pub up: bool,
    log: Vec<Entry>,
    log_end: u64,
    producers: ProducerStateTable,
    txns: PartitionTxns,
}

impl TxnPartition {
    pub fn new(id: i32) -> Self {
        TxnPartition {
            id,
            up: true,
            log: Vec::new(),
            log_end: 0,
            producers: ProducerStateTable::new(PRODUCERS_MAX),
            txns: PartitionTxns::new(ABORTED_MAX),
        }
    }

    pub fn log(&self) -> &[Entry] {
        &self.log
    }

    /// The leader crashed: its in-memory state is gone (the log is durable).
    pub fn crash(&mut self) {
        self.up = false;
        self.producers = ProducerStateTable::new(PRODUCERS_MAX);
        self.txns = PartitionTxns::new(ABORTED_MAX);
    }

    /// The leader is back: both tables rebuilt from the log, in log order.
    pub fn restart(&mut self) {
        let mut producers = ProducerStateTable::new(PRODUCERS_MAX);
        let mut txns = PartitionTxns::new(ABORTED_MAX);
        for e in &self.log {
            let info = e.info();
            producers.replay(&info);
            match e {
                Entry::Data { .. } => txns.on_batch(
                    info.producer_id,
                    info.producer_epoch,
                    true,
                    info.base_offset,
                    info.last_offset,
                ),
                Entry::Marker {
                    commit,
                    coordinator_epoch,
                    decision_offset,
                    ..
                } => {
                    producers.note_marker(
                        info.producer_id,
                        *coordinator_epoch,
                        *decision_offset,
                        info.base_offset,
                    );
                    txns.on_marker(
                        info.producer_id,
                        info.producer_epoch,
                        *commit,
                        info.base_offset,
                    );
                }
            }
        }
        txns.on_high_watermark(self.log_end);
        self.producers = producers;
        self.txns = txns;
        self.up = true;
    }

    /// A client's transactional batch: its base offset (the original one for a retry), or why
    /// not. `verify` is the coordinator's KIP-890 answer, asked only for a producer with no
    /// open transaction here at the batch's epoch.
    pub fn produce(
        &mut self,
        batch: DataBatch,
        verify: impl FnOnce(i64, i16) -> ErrorCode,
    ) -> (Result<u64, ErrorCode>, Option<Appended>) {
        assert!(self.up, "produce on a partition that is down");
        let check = self.producers.check(
            batch.producer_id,
            batch.producer_epoch,
            batch.first_seq,
            batch.last_seq(),
        );
        match check {
            Check::Duplicate { base_offset } => return (Ok(base_offset), None),
            Check::Reject(code) => return (Err(code), None),
            Check::Append => {}
        }
        let open_here = self
            .txns
            .open_txn(batch.producer_id)
            .is_some_and(|o| o.producer_epoch == batch.producer_epoch);
        if !open_here {
            let code = verify(batch.producer_id, batch.producer_epoch);
            if code != ErrorCode::None {
                return (Err(code), None);
            }
        }
        let base_offset = self.log_end;
        let count = batch.records.len() as u64;
        let last_offset = base_offset + count - 1;
        self.producers.on_append(
            batch.producer_id,
            batch.producer_epoch,
            batch.first_seq,
            batch.last_seq(),
            base_offset,
            last_offset,
        );
        self.txns.on_batch(
            batch.producer_id,
            batch.producer_epoch,
            true,
            base_offset,
            last_offset,
        );
        let appended = Appended::Data {
            producer_id: batch.producer_id,
            producer_epoch: batch.producer_epoch,
            base_offset,
            records: batch.records.clone(),
        };
        self.push(Entry::Data { base_offset, batch });
        (Ok(base_offset), Some(appended))
    }

    /// A coordinator's marker for the transaction decided at `decision_offset`: NONE once
    /// appended (or already here: a retry), or the fence that refused it.
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        decision_offset: i64,
    ) -> (ErrorCode, Option<Appended>) {
        assert!(self.up, "marker on a partition that is down");
        match marker_verdict(
            &self.producers,
            &self.txns,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            decision_offset,
        ) {
            Err(code) => return (code, None),
            Ok(MarkerVerdict::AlreadyWritten { .. }) => return (ErrorCode::None, None),
            Ok(MarkerVerdict::Append) => {}
        }
        let offset = self.log_end;
        self.producers
            .on_marker(producer_id, producer_epoch, offset);
        self.producers
            .note_marker(producer_id, coordinator_epoch, decision_offset, offset);
        self.txns
            .on_marker(producer_id, producer_epoch, commit, offset);
        self.push(Entry::Marker {
            offset,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            decision_offset,
        });
        (
            ErrorCode::None,
            Some(Appended::Marker {
                producer_id,
                producer_epoch,
                commit,
                offset,
            }),
        )
    }

    /// The last stable offset (the high watermark is the log end).
    pub fn last_stable_offset(&self) -> u64 {
        let lso = self.txns.last_stable_offset(self.log_end);
        assert!(
            lso <= self.log_end,
            "p{}: LSO {lso} past the log end",
            self.id
        );
        lso
    }

    /// A read_committed fetch from `from`: whole entries below the LSO, at most
    /// [`FETCH_ENTRIES_MAX`], and the aborted transactions the range overlaps.
    pub fn fetch(&self, from: u64) -> Fetched {
        let lso = self.last_stable_offset();
        let start = self.log.partition_point(|e| e.last_offset() < from);
        let entries: Vec<Entry> = self.log[start..]
            .iter()
            .take_while(|e| e.last_offset() < lso)
            .take(FETCH_ENTRIES_MAX)
            .cloned()
            .collect();
        let next_offset = entries.last().map_or(from, |e| e.last_offset() + 1);
        let aborted = self.txns.aborted(from, next_offset, usize::MAX);
        Fetched {
            entries,
            aborted,
            next_offset,
        }
    }

    fn push(&mut self, e: Entry) {
        assert_eq!(
            e.base_offset(),
            self.log_end,
            "p{}: append off the end",
            self.id
        );
        self.log_end = e.last_offset() + 1;
        self.log.push(e);
        self.txns.on_high_watermark(self.log_end);
    }
}
