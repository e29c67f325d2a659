//! One partition replica on its owner core: the log, its role (leading: the replica state,
//! its followers' progress and the acks=all waiters; following: where it fetches from), and the
//! long-poll watchers waiting for new data.
//!
//! Promises: a produce is acknowledged per `acks` and the durability mode (DESIGN §1, §5) — with
//! `durability = fsync`, acks=1 and acks=all answer only after an fdatasync covers the batch
//! (group-committed), and acks=all only once the high watermark covers it: every member of the
//! in-sync set has it (on disk, under fsync: followers report what they have fdatasynced).
//! Consumers read only below the high watermark. Bad batches get CORRUPT_MESSAGE or
//! MESSAGE_TOO_LARGE and nothing of the request is appended; a full disk answers
//! KAFKA_STORAGE_ERROR and reads keep working. Only the leader appends client batches; a
//! follower appends only what it fetched from its leader, with the leader's offsets and epochs.
//!
//! Idempotent producers (DESIGN §9): before the first produce decides anything, the producer
//! table is rebuilt from the batch headers of the log's last [`PRODUCER_STATE_REBUILD_BYTES_MAX`]
//! bytes (under `append_turn`, so no append moves the tail meanwhile), so a retry of a batch
//! written before a restart — clean or `kill -9` — is answered with its original offset and not
//! appended twice. A producer whose last batch is older than that tail is unknown after a restart
//! and is accepted at any sequence (Kafka's rule for expired producers). A follower that becomes
//! the leader rebuilds the table the same way from the batches it replicated, so a retry sent to
//! the new leader gets its original offset too. Transactions are not bound by that tail: the log
//! indexes aborted transactions and tracks open ones itself (`txn`).
//!
//! Files: this one (the struct, produce, fetch, list offsets), [`role`] (taking the committed
//! partition state: becoming leader or follower), [`leader`] (serving followers' fetches, the
//! acks=all waiters, ISR proposals), [`follower`] (applying what the leader sent), [`delete`]
//! (DeleteRecords: the leader's log start, and the followers following it), [`txn`] and
//! [`read`] (markers, the LSO, read_committed), [`verify`] (KIP-890's check before a
//! transaction opens here).

mod delete;
#[cfg(test)]
mod delete_tests;
mod follower;
mod leader;
#[cfg(test)]
mod pair_support;
mod read;
#[cfg(test)]
mod restart_tests;
mod role;
mod txn;
#[cfg(test)]
mod txn_index_tests;
mod verify;
#[cfg(test)]
mod verify_tests;

pub use delete::DELETE_TO_HIGH_WATERMARK;
pub use follower::NotApplied;
pub use role::{Committed, NO_LEADER};
pub use verify::Verified;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

use bytes::Bytes;
use spool_protocol::ErrorCode;
use spool_storage::batch::{self, BatchError};
use spool_storage::{Durability, LogError, PartitionLog};

use glommio::sync::Semaphore;

use std::collections::HashMap;

use glommio::channels::local_channel::LocalSender;
use spool_core::ack_wait::Acks;
use spool_core::producer_state::{BatchInfo, ProducerStateTable};
use spool_core::txn::partition_txns::PartitionTxns;

use role::Role;

use crate::requests::{ProduceResult, TopicPartition};

pub struct Partition {
    pub tp: TopicPartition,
    pub log: Rc<PartitionLog>,
    durability: Durability,
    /// This broker's id.
    me: i32,
    /// Leading or following, as the committed metadata last said ([`role`]).
    role: RefCell<Role>,
    /// The acks=all requests waiting for the high watermark, by request id: where each one's
    /// answer goes (the waiter table itself is the leader role's `AckWaiters`).
    ack_senders: RefCell<HashMap<u64, LocalSender<ErrorCode>>>,
    next_request_id: Cell<u64>,
    /// The high watermark long-polls were last woken for.
    notified_hw: Cell<u64>,
    /// Fetches waiting for this partition to grow (woken on every high-watermark move).
    watchers: RefCell<Vec<Waker>>,
    /// Copy fetch data instead of handing out file ranges (the config switch DESIGN §5 asks for).
    copy_reads: bool,
    /// Idempotent producers' recent batches; checked and updated under `append_turn`.
    producers: RefCell<ProducerStateTable>,
    /// Open and aborted transactions (`txn`); rebuilt and updated with `producers`.
    txns: RefCell<PartitionTxns>,
    /// Whether `producers` and `txns` were rebuilt from the log (once per leadership, at the
    /// first produce or fetch).
    producers_loaded: Cell<bool>,
    /// The tail the producer table is rebuilt from: [`PRODUCER_STATE_REBUILD_BYTES_MAX`], less in
    /// tests that need a transaction to begin before it.
    rebuild_bytes_max: Cell<u64>,
    /// Aborted transactions one fetch reports: [`txn::ABORTED_PER_FETCH_MAX`], less in tests of
    /// the cut.
    aborted_per_fetch_max: Cell<usize>,
    /// Serializes check-then-append, so two retries of one batch cannot both pass the check.
    append_turn: Semaphore,
    /// KIP-890 verifications in flight ([`verify`]).
    verifications: RefCell<verify::Verifications>,
}

/// Who writes a produce's batches: clients write data (a transactional batch opening its
/// producer's transaction here under a KIP-890 token, [`verify`]), transaction coordinators
/// markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Client(Option<Verified>),
    Coordinator,
}

/// Long-poll wakers kept per partition.
pub const WATCHERS_MAX: usize = 1024;

/// Producers remembered per partition.
const PRODUCERS_PER_PARTITION_MAX: usize = 10_000;

/// Bytes at the end of the log whose batch headers rebuild the producer table after a restart
/// (only the 61-byte headers are used; a scan reads them in 64 KiB windows).
pub const PRODUCER_STATE_REBUILD_BYTES_MAX: u64 = 64 << 20;

/// Maps a storage error to the protocol's code.
pub fn log_error_code(e: &LogError) -> ErrorCode {
    match e {
        LogError::Batch(BatchError::BadLength { .. }) => ErrorCode::MessageTooLarge,
        LogError::Batch(BatchError::UnsupportedCompression(_)) => {
            ErrorCode::UnsupportedCompressionType
        }
        LogError::Batch(_) => ErrorCode::CorruptMessage,
        LogError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        // Only a follower's replicated append meets this (it fetches from its log end next).
        LogError::NotContiguous { .. } => ErrorCode::OffsetOutOfRange,
        LogError::DiskFull { .. } | LogError::Offline { .. } | LogError::Io { .. } => {
            ErrorCode::KafkaStorageError
        }
        LogError::Corrupt { .. } => ErrorCode::KafkaStorageError,
        LogError::Config(_) => ErrorCode::InvalidConfig,
        LogError::Locked { .. } => ErrorCode::KafkaStorageError,
    }
}

impl Partition {
    /// A replica of `tp` over `log`, following no one until [`Partition::learn`] gives it the
    /// committed partition state.
    pub fn new(
        tp: TopicPartition,
        log: Rc<PartitionLog>,
        broker_id: i32,
        durability: Durability,
        copy_reads: bool,
    ) -> Rc<Self> {
        let role = Role::unassigned(broker_id, &log);
        Rc::new(Self {
            tp,
            log,
            durability,
            me: broker_id,
            role: RefCell::new(role),
            ack_senders: RefCell::new(HashMap::new()),
            next_request_id: Cell::new(1),
            notified_hw: Cell::new(0),
            watchers: RefCell::new(Vec::new()),
            copy_reads,
            producers: RefCell::new(ProducerStateTable::new(PRODUCERS_PER_PARTITION_MAX)),
            txns: RefCell::new(PartitionTxns::new(txn::IN_MEMORY_ABORTED_TXNS_MAX)),
            producers_loaded: Cell::new(false),
            rebuild_bytes_max: Cell::new(PRODUCER_STATE_REBUILD_BYTES_MAX),
            aborted_per_fetch_max: Cell::new(txn::ABORTED_PER_FETCH_MAX),
            append_turn: Semaphore::new(1),
            verifications: RefCell::new(verify::Verifications::default()),
        })
    }

    pub fn high_watermark(&self) -> u64 {
        self.role.borrow().high_watermark()
    }

    pub fn leader_epoch(&self) -> i32 {
        self.role.borrow().leader_epoch()
    }

    /// Whether this replica leads (as the committed metadata it last took says).
    pub fn is_leader(&self) -> bool {
        self.role.borrow().is_leader()
    }

    /// Wakes everyone waiting for this partition to change (its log end or high watermark).
    fn wake_watchers(&self) {
        let woken: Vec<Waker> = self.watchers.borrow_mut().drain(..).collect();
        for w in woken {
            w.wake();
        }
    }

    /// Registers a waker to be woken when the high watermark moves. Fetches that time out leave
    /// their wakers behind on an idle partition, so the list is bounded: past
    /// [`WATCHERS_MAX`] everyone is woken (a spurious wake only makes a fetch look again).
    pub fn watch(&self, waker: &Waker) {
        let mut w = self.watchers.borrow_mut();
        if w.iter().any(|x| x.will_wake(waker)) {
            return;
        }
        if w.len() >= WATCHERS_MAX {
            for x in w.drain(..) {
                x.wake();
            }
        }
        w.push(waker.clone());
    }

    /// Rebuilds the producer table from the log's tail unless that was done already. Opening a
    /// partition may call it to take the scan off the first produce; `produce` calls it anyway.
    pub async fn load_producer_state(&self) -> Result<(), LogError> {
        let Ok(_turn) = self.append_turn.acquire_permit(1).await else {
            return Ok(());
        };
        self.load_producer_state_in_turn().await
    }

    /// In tests: rebuild the producer table from only the last `bytes` of the log.
    #[cfg(test)]
    pub(super) fn set_rebuild_bytes_max(&self, bytes: u64) {
        self.rebuild_bytes_max.set(bytes);
    }

    /// In tests: report at most `max` aborted transactions per fetch.
    #[cfg(test)]
    pub(super) fn set_aborted_per_fetch_max(&self, max: usize) {
        self.aborted_per_fetch_max.set(max);
    }

    /// [`Partition::load_producer_state`] for a caller holding `append_turn`.
    async fn load_producer_state_in_turn(&self) -> Result<(), LogError> {
        if self.producers_loaded.get() {
            return Ok(());
        }
        let mut table = ProducerStateTable::new(PRODUCERS_PER_PARTITION_MAX);
        let mut txns = PartitionTxns::new(txn::IN_MEMORY_ABORTED_TXNS_MAX);
        let scan = self
            .log
            .for_each_tail_batch(self.rebuild_bytes_max.get(), |h, marker| {
                let info = BatchInfo {
                    producer_id: h.producer_id,
                    producer_epoch: h.producer_epoch,
                    first_seq: h.base_sequence,
                    last_seq: h.base_sequence.wrapping_add(h.last_offset_delta),
                    base_offset: h.base_offset as u64,
                    last_offset: h.last_offset() as u64,
                    is_control: h.is_control(),
                };
                table.replay(&info);
                if let Some(m) = marker {
                    table.note_marker(
                        h.producer_id,
                        m.coordinator_epoch,
                        m.decision_offset,
                        h.base_offset as u64,
                    );
                }
                txn::replay(&mut txns, &info, h.is_transactional(), marker);
            })
            .await?;
        // A transaction open at the log end may have begun before the scanned tail: the log
        // knows where (its open transactions survive restarts, spool-storage's `txn`).
        let open_in_log = self.log.open_txns();
        for t in &open_in_log {
            txns.seed_open(t.producer_id, t.producer_epoch, t.first_offset);
        }
        tracing::debug!(
            tp = %self.tp,
            batches = scan.batches,
            bytes = scan.bytes,
            whole_log = scan.whole_log,
            producers = table.len(),
            open_transactions = txns.open_txns().count(),
            open_in_log = open_in_log.len(),
            "rebuilt the producer table from the log"
        );
        *self.txns.borrow_mut() = txns;
        *self.producers.borrow_mut() = table;
        self.producers_loaded.set(true);
        Ok(())
    }

    /// Validates every batch first (so a bad one appends nothing), then — on the leader, with the
    /// in-sync set `acks` needs — appends them in order, stamped with the leader epoch and `now_ms`
    /// (the log-append time the caller read). acks=all then waits, without a task of its own,
    /// until the high watermark covers the batches, for at most `timeout_ms`. A transactional
    /// batch opening its producer's transaction here needs `verified` ([`verify`]).
    pub async fn produce(
        &self,
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
        max_message_bytes: usize,
        now_ms: i64,
        verified: Option<Verified>,
    ) -> ProduceResult {
        self.produce_as(
            Origin::Client(verified),
            records,
            acks,
            timeout_ms,
            max_message_bytes,
            now_ms,
        )
        .await
    }

    /// A coordinator's own batches, acks=all: a transaction coordinator's markers, or a group
    /// coordinator's TxnOffsetCommit records in a transactional batch of the client's producer
    /// (no sequence: the producer table checks only its epoch, `txn`).
    pub async fn produce_for_coordinator(
        &self,
        records: Bytes,
        timeout_ms: i32,
        max_message_bytes: usize,
        now_ms: i64,
    ) -> ProduceResult {
        self.produce_as(
            Origin::Coordinator,
            records,
            -1,
            timeout_ms,
            max_message_bytes,
            now_ms,
        )
        .await
    }

    /// [`Partition::produce`] for a client's batches or a coordinator's.
    async fn produce_as(
        &self,
        origin: Origin,
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
        max_message_bytes: usize,
        now_ms: i64,
    ) -> ProduceResult {
        let acks = match Acks::from_wire(acks) {
            Ok(a) => a,
            Err(code) => {
                return ProduceResult::error(code, format!("acks must be 0, 1 or -1, got {acks}"))
            }
        };
        let batches = match self.split_batches(origin, &records, max_message_bytes) {
            Ok(b) => b,
            Err(r) => return r,
        };
        let mut first = None;
        let mut end = 0;
        let admitted = {
            let Ok(_turn) = self.append_turn.acquire_permit(1).await else {
                return ProduceResult::error(
                    ErrorCode::KafkaStorageError,
                    format!("{}: closing", self.tp),
                );
            };
            if let Err(e) = self.load_producer_state_in_turn().await {
                return ProduceResult::error(
                    log_error_code(&e),
                    format!("{}: rebuilding the producer table: {e}", self.tp),
                );
            }
            // Admission under the turn: no role change (it takes the turn too) can come between
            // it and the append.
            // The admission's borrow ends with this statement: the refusal below borrows again.
            let admission = self.role.borrow_mut().admit(acks);
            let admitted = match admission {
                Ok(a) => a,
                Err(code) => {
                    let isr = self.role.borrow().isr_text();
                    return ProduceResult::error(code, format!("{}: {isr}", self.tp));
                }
            };
            if let Err(r) = self
                .append_in_turn(origin, batches, now_ms, &mut first, &mut end)
                .await
            {
                self.role.borrow_mut().cancel(admitted);
                return r;
            }
            admitted
        };
        // Followers long-polling this partition fetch the new batches now, while the leader's
        // own fdatasync runs.
        self.wake_watchers();
        let now = crate::clock::monotonic_ms();
        match self.durability {
            // The whole log is exposable (`end` may be a duplicate's, below the log end).
            Durability::Replicated => self.on_leader_log_end(self.log.log_end_offset(), now),
            Durability::Fsync if acks == Acks::None => {
                // Nobody waits for this one; the next sync covers it and moves the watermark.
            }
            Durability::Fsync => {
                if let Err(e) = self.log.sync_to(end).await {
                    self.role.borrow_mut().cancel(admitted);
                    return ProduceResult::error(log_error_code(&e), format!("{}: {e}", self.tp));
                }
                self.on_leader_log_end(self.log.durable_offset(), crate::clock::monotonic_ms());
            }
        }
        let acknowledged = ProduceResult {
            error: ErrorCode::None,
            base_offset: first.map_or(-1, |o| o as i64),
            log_start_offset: self.log.log_start_offset() as i64,
            message: None,
        };
        match self.wait_for_in_sync(admitted, end, timeout_ms).await {
            ErrorCode::None => acknowledged,
            code => ProduceResult::error(
                code,
                format!(
                    "{}: offsets below {end} not acknowledged by the in-sync replicas: {}",
                    self.tp,
                    self.role.borrow().isr_text()
                ),
            ),
        }
    }

    /// The request's batches, each validated (length, magic, CRC, size), as slices of `records`.
    fn split_batches(
        &self,
        origin: Origin,
        records: &Bytes,
        max_message_bytes: usize,
    ) -> Result<Vec<batch::Checked>, ProduceResult> {
        let mut batches = Vec::new();
        let mut at = 0usize;
        while at < records.len() {
            // The batch's one CRC check: the log trusts `Checked` and does not repeat it.
            match batch::Checked::first_of(&records.slice(at..), max_message_bytes) {
                Ok(b) if b.header().is_control() && origin != Origin::Coordinator => {
                    // Markers come from a transaction coordinator only (Kafka's rule).
                    return Err(ProduceResult::error(
                        ErrorCode::InvalidRecord,
                        format!(
                            "{}: batch at byte {at}: control batches are written by transaction coordinators only",
                            self.tp
                        ),
                    ));
                }
                Ok(b) => {
                    at += b.total_bytes();
                    batches.push(b);
                }
                Err(e) => {
                    let code = match e {
                        BatchError::BadLength { length, .. }
                            if length > max_message_bytes as i64 =>
                        {
                            ErrorCode::MessageTooLarge
                        }
                        _ => ErrorCode::CorruptMessage,
                    };
                    return Err(ProduceResult::error(
                        code,
                        format!("{}: batch at byte {at}: {e}", self.tp),
                    ));
                }
            }
        }
        if batches.is_empty() {
            return Err(ProduceResult::error(
                ErrorCode::CorruptMessage,
                format!("{}: no record batch", self.tp),
            ));
        }
        Ok(batches)
    }

    /// Appends `batches` (the caller holds `append_turn`), each checked against the producer
    /// table first: a duplicate is answered with its original offsets and not appended again.
    /// `first` and `end` become the request's first offset and the end of its last batch.
    async fn append_in_turn(
        &self,
        origin: Origin,
        batches: Vec<batch::Checked>,
        now_ms: i64,
        first: &mut Option<u64>,
        end: &mut u64,
    ) -> Result<(), ProduceResult> {
        for b in batches {
            let h = *b.header();
            let last_seq = h.base_sequence.wrapping_add(h.last_offset_delta);
            let marker = match self.check_batch(origin, &b, last_seq) {
                Ok(txn::Checked::Duplicate { base_offset }) => {
                    first.get_or_insert(base_offset);
                    *end = (*end).max(base_offset + h.offset_count());
                    continue;
                }
                Ok(txn::Checked::Data) => None,
                Ok(txn::Checked::Marker(m)) => Some(m),
                Err(code) => {
                    return Err(ProduceResult::error(
                        code,
                        format!(
                            "{}: producer {} epoch {} sequence {}",
                            self.tp, h.producer_id, h.producer_epoch, h.base_sequence
                        ),
                    ))
                }
            };
            let end_before = self.log.log_end_offset();
            let info = self
                .log
                .append_checked(b, self.leader_epoch(), now_ms)
                .await
                .map_err(|e| {
                    ProduceResult::error(log_error_code(&e), format!("{}: {e}", self.tp))
                })?;
            // Pair assertions: the batch got the offsets right after the log end (appends are
            // serialized by `append_turn`), and the log end moved past exactly its records.
            assert_eq!(info.base_offset, end_before, "{}: append offset", self.tp);
            assert_eq!(
                info.last_offset + 1,
                info.base_offset + h.offset_count(),
                "{}: appended offsets",
                self.tp
            );
            assert_eq!(
                info.log_end_offset,
                info.last_offset + 1,
                "{}: log end",
                self.tp
            );
            match marker {
                Some(m) => self.on_marker_appended(&h, m, info.base_offset),
                None => {
                    self.on_batch_appended(origin, &h, last_seq, info.base_offset, info.last_offset)
                }
            }
            first.get_or_insert(info.base_offset);
            *end = info.log_end_offset;
        }
        Ok(())
    }

    /// Makes everything appended durable and visible (the interval flush of acks=0 producers).
    pub async fn sync(&self) -> Result<(), LogError> {
        let end = self.log.log_end_offset();
        if self.durability == Durability::Fsync && self.log.durable_offset() < end {
            self.log.sync_to(end).await?;
            self.on_synced(self.log.durable_offset(), crate::clock::monotonic_ms());
        } else if self.durability == Durability::Replicated {
            self.log.flush().await?;
        }
        Ok(())
    }
}
