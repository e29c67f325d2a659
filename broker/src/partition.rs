//! One partition on its owner core: the log, the replica state (high watermark), and the
//! long-poll watchers waiting for new data.
//!
//! Promises: a produce is acknowledged per `acks` and the durability mode (DESIGN §1, §5) — with
//! `durability = fsync`, acks=1 and acks=all answer only after an fdatasync covers the batch
//! (group-committed); consumers read only below the high watermark, which under fsync is the
//! durable offset. Bad batches get CORRUPT_MESSAGE or MESSAGE_TOO_LARGE and nothing of the request
//! is appended; a full disk answers KAFKA_STORAGE_ERROR and reads keep working.
//!
//! Idempotent producers (DESIGN §9): before the first produce decides anything, the producer
//! table is rebuilt from the batch headers of the log's last [`PRODUCER_STATE_REBUILD_BYTES_MAX`]
//! bytes (under `append_turn`, so no append moves the tail meanwhile), so a retry of a batch
//! written before a restart — clean or `kill -9` — is answered with its original offset and not
//! appended twice. A producer whose last batch is older than that tail is unknown after a restart
//! and is accepted at any sequence (Kafka's rule for expired producers).

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::rc::Rc;
use std::task::Waker;

use bytes::{Bytes, BytesMut};
use spool_protocol::ErrorCode;
use spool_storage::batch::{self, BatchError};
use spool_storage::{Durability, LogError, PartitionLog, ReadChunk};

use glommio::sync::Semaphore;

use spool_core::producer_state::{BatchInfo, Check, ProducerStateTable};
use spool_core::replica::ReplicaState;

use crate::requests::{FetchChunk, FetchResult, ListOffsetsResult, ProduceResult, TopicPartition};
use crate::requests::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};

pub struct Partition {
    pub tp: TopicPartition,
    pub log: Rc<PartitionLog>,
    durability: Durability,
    replica: RefCell<ReplicaState>,
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
    pub fn new(
        tp: TopicPartition,
        log: Rc<PartitionLog>,
        broker_id: i32,
        leader_epoch: i32,
        durability: Durability,
        copy_reads: bool,
    ) -> Rc<Self> {
        let start = match durability {
            Durability::Fsync => log.durable_offset(),
            Durability::Replicated => log.log_end_offset(),
        };
        Rc::new(Self {
            tp,
            log,
            durability,
            // One replica leading itself until replication (the cluster milestone) hands the
            // partition a replica set from the metadata image.
            replica: RefCell::new(ReplicaState::sole_leader(broker_id, leader_epoch, start)),
            watchers: RefCell::new(Vec::new()),
            copy_reads,
            producers: RefCell::new(ProducerStateTable::new(PRODUCERS_PER_PARTITION_MAX)),
            producers_loaded: Cell::new(false),
            append_turn: Semaphore::new(1),
        })
    }

    pub fn high_watermark(&self) -> u64 {
        self.replica.borrow().high_watermark()
    }

    pub fn leader_epoch(&self) -> i32 {
        self.replica.borrow().leader_epoch()
    }

    /// The metadata log made this broker the leader in a newer leader epoch (the old leader was
    /// fenced, or this broker came back): batches appended from now on carry it, so the
    /// leader-epoch checkpoint records where the epoch starts. Until replication the partition
    /// keeps leading alone, its high watermark where it was.
    pub fn on_new_leader_epoch(&self, broker_id: i32, leader_epoch: i32) {
        if leader_epoch <= self.leader_epoch() {
            return;
        }
        let hw = self.high_watermark();
        *self.replica.borrow_mut() = ReplicaState::sole_leader(broker_id, leader_epoch, hw);
        debug_assert_eq!(
            self.high_watermark(),
            hw,
            "a new epoch keeps the high watermark"
        );
    }

    fn advance_high_watermark(&self, leader_end: u64) {
        let before = self.high_watermark();
        let after = self.replica.borrow_mut().on_leader_log_end(leader_end);
        if after > before {
            for w in self.watchers.borrow_mut().drain(..) {
                w.wake();
            }
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

    /// Validates every batch first (so a bad one appends nothing), then appends them in order,
    /// stamped with the leader epoch and `now_ms` (the log-append time the caller read).
    pub async fn produce(
        &self,
        records: Bytes,
        acks: i16,
        max_message_bytes: usize,
        now_ms: i64,
    ) -> ProduceResult {
        let mut batches = Vec::new();
        let mut at = 0usize;
        while at < records.len() {
            match batch::validate(&records[at..], max_message_bytes) {
                Ok(h) => {
                    batches.push(records.slice(at..at + h.total_bytes()));
                    at += h.total_bytes();
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
                    return ProduceResult::error(
                        code,
                        format!("{}: batch at byte {at}: {e}", self.tp),
                    );
                }
            }
        }
        if batches.is_empty() {
            return ProduceResult::error(
                ErrorCode::CorruptMessage,
                format!("{}: no record batch", self.tp),
            );
        }
        let mut first = None;
        let mut end = 0;
        {
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
            for b in batches {
                let h = match batch::BatchHeader::parse(&b) {
                    Ok(h) => h,
                    Err(e) => {
                        return ProduceResult::error(ErrorCode::CorruptMessage, e.to_string())
                    }
                };
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
                        end = end.max(base_offset + h.offset_count());
                        continue;
                    }
                    Check::Reject(code) => {
                        return ProduceResult::error(
                            code,
                            format!(
                                "{}: producer {} epoch {} sequence {}",
                                self.tp, h.producer_id, h.producer_epoch, h.base_sequence
                            ),
                        )
                    }
                }
                let end_before = self.log.log_end_offset();
                match self
                    .log
                    .append(BytesMut::from(&b[..]), self.leader_epoch(), now_ms)
                    .await
                {
                    Ok(info) => {
                        // Pair assertions: the batch got the offsets right after the log end
                        // (appends are serialized by `append_turn`), and the log end moved past
                        // exactly its records.
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
                        end = info.log_end_offset;
                    }
                    Err(e) => {
                        return ProduceResult::error(
                            log_error_code(&e),
                            format!("{}: {e}", self.tp),
                        )
                    }
                }
            }
        }
        match self.durability {
            // The whole log is exposable (`end` may be a duplicate's, below the log end).
            Durability::Replicated => self.advance_high_watermark(self.log.log_end_offset()),
            Durability::Fsync if acks == 0 => {
                // Nobody waits for this one; the next sync covers it and moves the watermark.
            }
            Durability::Fsync => {
                if let Err(e) = self.log.sync_to(end).await {
                    return ProduceResult::error(log_error_code(&e), format!("{}: {e}", self.tp));
                }
                self.advance_high_watermark(self.log.durable_offset());
            }
        }
        ProduceResult {
            error: ErrorCode::None,
            base_offset: first.map_or(-1, |o| o as i64),
            log_start_offset: self.log.log_start_offset() as i64,
            message: None,
        }
    }

    /// Makes everything appended durable and visible (the interval flush of acks=0 producers).
    pub async fn sync(&self) -> Result<(), LogError> {
        let end = self.log.log_end_offset();
        if self.durability == Durability::Fsync && self.high_watermark() < end {
            self.log.sync_to(end).await?;
            self.advance_high_watermark(self.log.durable_offset());
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
            self.log
                .read_copy(offset as u64, max_bytes, hw)
                .await
                .map(|b| vec![ReadChunk::Memory(b)])
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
                Ok(Some(o)) if o < self.high_watermark() => ok(o, ts),
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
