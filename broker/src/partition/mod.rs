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
//! the new leader gets its original offset too.
//!
//! Files: this one (the struct, produce, fetch, list offsets), [`role`] (taking the committed
//! partition state: becoming leader or follower), [`leader`] (serving followers' fetches, the
//! acks=all waiters, ISR proposals), [`follower`] (applying what the leader sent), [`delete`]
//! (DeleteRecords: the leader's log start, and the followers following it).

mod delete;
#[cfg(test)]
mod delete_tests;
mod follower;
mod leader;
#[cfg(test)]
mod pair_support;
#[cfg(test)]
mod restart_tests;
mod role;

pub use delete::DELETE_TO_HIGH_WATERMARK;
pub use follower::NotApplied;
pub use role::{Committed, NO_LEADER};

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::rc::Rc;
use std::task::Waker;

use bytes::Bytes;
use spool_protocol::ErrorCode;
use spool_storage::batch::{self, BatchError};
use spool_storage::{Durability, LogError, PartitionLog, ReadChunk};

use glommio::sync::Semaphore;

use std::collections::HashMap;

use glommio::channels::local_channel::LocalSender;
use spool_core::ack_wait::Acks;
use spool_core::producer_state::{BatchInfo, Check, ProducerStateTable};

use role::Role;

use crate::requests::{FetchChunk, FetchResult, ListOffsetsResult, ProduceResult, TopicPartition};
use crate::requests::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};

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
    /// Whether `producers` was rebuilt from the log (done once, at the first produce).
    producers_loaded: Cell<bool>,
    /// Serializes check-then-append, so two retries of one batch cannot both pass the check.
    append_turn: Semaphore,
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
            producers_loaded: Cell::new(false),
            append_turn: Semaphore::new(1),
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

    /// [`Partition::load_producer_state`] for a caller holding `append_turn`.
    async fn load_producer_state_in_turn(&self) -> Result<(), LogError> {
        if self.producers_loaded.get() {
            return Ok(());
        }
        let mut table = ProducerStateTable::new(PRODUCERS_PER_PARTITION_MAX);
        let scan = self
            .log
            .for_each_tail_header(PRODUCER_STATE_REBUILD_BYTES_MAX, |h| {
                table.replay(&BatchInfo {
                    producer_id: h.producer_id,
                    producer_epoch: h.producer_epoch,
                    first_seq: h.base_sequence,
                    last_seq: h.base_sequence.wrapping_add(h.last_offset_delta),
                    base_offset: h.base_offset as u64,
                    last_offset: h.last_offset() as u64,
                    is_control: h.is_control(),
                })
            })
            .await?;
        tracing::debug!(
            tp = %self.tp,
            batches = scan.batches,
            bytes = scan.bytes,
            whole_log = scan.whole_log,
            producers = table.len(),
            "rebuilt the producer table from the log"
        );
        *self.producers.borrow_mut() = table;
        self.producers_loaded.set(true);
        Ok(())
    }

    /// Validates every batch first (so a bad one appends nothing), then — on the leader, with the
    /// in-sync set `acks` needs — appends them in order, stamped with the leader epoch and `now_ms`
    /// (the log-append time the caller read). acks=all then waits, without a task of its own,
    /// until the high watermark covers the batches, for at most `timeout_ms`.
    pub async fn produce(
        &self,
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
        let batches = match self.split_batches(&records, max_message_bytes) {
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
                .append_in_turn(batches, now_ms, &mut first, &mut end)
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
        records: &Bytes,
        max_message_bytes: usize,
    ) -> Result<Vec<batch::Checked>, ProduceResult> {
        let mut batches = Vec::new();
        let mut at = 0usize;
        while at < records.len() {
            // The batch's one CRC check: the log trusts `Checked` and does not repeat it.
            match batch::Checked::first_of(&records.slice(at..), max_message_bytes) {
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
        batches: Vec<batch::Checked>,
        now_ms: i64,
        first: &mut Option<u64>,
        end: &mut u64,
    ) -> Result<(), ProduceResult> {
        for b in batches {
            let h = *b.header();
            let last_seq = h.base_sequence.wrapping_add(h.last_offset_delta);
            let check = self.producers.borrow().check(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last_seq,
            );
            match check {
                Check::Append => {}
                Check::Duplicate { base_offset } => {
                    first.get_or_insert(base_offset);
                    *end = (*end).max(base_offset + h.offset_count());
                    continue;
                }
                Check::Reject(code) => {
                    return Err(ProduceResult::error(
                        code,
                        format!(
                            "{}: producer {} epoch {} sequence {}",
                            self.tp, h.producer_id, h.producer_epoch, h.base_sequence
                        ),
                    ))
                }
            }
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
            self.producers.borrow_mut().on_append(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last_seq,
                info.base_offset,
                info.last_offset,
            );
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

    /// Reads from `offset` below the high watermark.
    pub async fn fetch(&self, offset: i64, max_bytes: i32) -> FetchResult {
        let hw = self.high_watermark();
        let start = self.log.log_start_offset();
        let mut out = FetchResult {
            error: ErrorCode::None,
            high_watermark: hw as i64,
            log_start_offset: start as i64,
            chunks: Vec::new(),
        };
        // Kafka's rule: out of range only outside [log start, log end]; between the high
        // watermark and the log end a fetch is simply empty (the data is not safe to show yet).
        if offset < 0 || (offset as u64) < start || (offset as u64) > self.log.log_end_offset() {
            out.error = ErrorCode::OffsetOutOfRange;
            return out;
        }
        let max_bytes = max_bytes.max(0) as usize;
        let slice = if self.copy_reads {
            // Charged to the response budget before the copy is made; without room now, no
            // records this time (`response_memory` says why not a wait).
            let copy = self.log.read_copy(offset as u64, max_bytes, hw);
            match crate::response_memory::charged_copy(max_bytes, copy).await {
                None => return out,
                Some(read) => read.map(|b| vec![ReadChunk::Memory(b)]),
            }
        } else {
            self.log
                .read(offset as u64, max_bytes, hw)
                .await
                .map(|s| s.chunks)
        };
        match slice {
            Ok(chunks) => {
                for c in chunks {
                    match c {
                        ReadChunk::Memory(b) if !b.is_empty() => {
                            out.chunks.push(FetchChunk::Memory(b))
                        }
                        ReadChunk::Memory(_) => {}
                        ReadChunk::File {
                            file,
                            position,
                            len,
                            ..
                        } => {
                            // SAFETY: the descriptor belongs to `file`, alive for this borrow.
                            let fd = unsafe { BorrowedFd::borrow_raw(file.as_raw_fd()) };
                            match fd.try_clone_to_owned() {
                                Ok(fd) => out.chunks.push(FetchChunk::File { fd, position, len }),
                                Err(_) => {
                                    out.error = ErrorCode::KafkaStorageError;
                                    out.chunks.clear();
                                    return out;
                                }
                            }
                        }
                    }
                }
            }
            Err(e) => out.error = log_error_code(&e),
        }
        out
    }

    pub async fn list_offsets(&self, timestamp: i64) -> ListOffsetsResult {
        let epoch = self.leader_epoch();
        let ok = |offset: u64, ts: i64| ListOffsetsResult {
            error: ErrorCode::None,
            timestamp: ts,
            offset: offset as i64,
            leader_epoch: epoch,
        };
        match timestamp {
            EARLIEST_TIMESTAMP => ok(self.log.log_start_offset(), -1),
            LATEST_TIMESTAMP => ok(self.high_watermark(), -1),
            ts if ts < 0 => ListOffsetsResult {
                error: ErrorCode::InvalidRequest,
                timestamp: ts,
                offset: -1,
                leader_epoch: epoch,
            },
            ts => match self.log.offset_for_timestamp(ts).await {
                // The found record's own timestamp, as Kafka answers (clients show it).
                Ok(Some((o, found_ts))) if o < self.high_watermark() => ok(o, found_ts),
                Ok(_) => ListOffsetsResult {
                    error: ErrorCode::None,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: epoch,
                },
                Err(e) => ListOffsetsResult {
                    error: log_error_code(&e),
                    timestamp: ts,
                    offset: -1,
                    leader_epoch: epoch,
                },
            },
        }
    }
}
