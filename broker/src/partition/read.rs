//! Reads of a partition for clients: Fetch (below the high watermark, or below the last stable
//! offset for read_committed, with the aborted transactions in range — `txn`) and ListOffsets.
//!
//! Promises: nothing at or above the high watermark is ever returned; a read_committed reader
//! gets nothing at or above the LSO, and every aborted transaction whose records overlap what it
//! is sent, from the log's index, looked up for the records read only (at most
//! `txn::ABORTED_PER_FETCH_MAX`: past it the records are read again, stopping where the list
//! would be incomplete); an offset outside [log start, log end] is OFFSET_OUT_OF_RANGE.

use std::os::fd::{AsRawFd, BorrowedFd};

use spool_protocol::ErrorCode;
use spool_storage::{PartitionLog, ReadChunk};

use super::{log_error_code, Partition};
use crate::requests::{FetchChunk, FetchResult, ListOffsetsResult};
use crate::requests::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};

impl Partition {
    /// Reads from `offset` below the high watermark, or below the last stable offset for
    /// `read_committed` (with the aborted transactions in range).
    pub async fn fetch(&self, offset: i64, max_bytes: i32, read_committed: bool) -> FetchResult {
        if let Err(e) = self.ensure_txn_state().await {
            return FetchResult::error(log_error_code(&e));
        }
        let hw = self.high_watermark();
        let lso = self.last_stable_offset();
        let start = self.log.log_start_offset();
        let mut out = FetchResult {
            error: ErrorCode::None,
            high_watermark: hw as i64,
            last_stable_offset: lso as i64,
            log_start_offset: start as i64,
            aborted: Vec::new(),
            chunks: Vec::new(),
        };
        let upper = if read_committed { lso } else { hw };
        // Kafka's rule: out of range only outside [log start, log end]; between the high
        // watermark and the log end a fetch is simply empty (the data is not safe to show yet).
        if offset < 0 || (offset as u64) < start || (offset as u64) > self.log.log_end_offset() {
            out.error = ErrorCode::OffsetOutOfRange;
            return out;
        }
        let max_bytes = max_bytes.max(0) as usize;
        let mut slice = match self.read_chunks(offset as u64, max_bytes, upper).await {
            Some(slice) => slice,
            None => return out,
        };
        // The aborted transactions of what is returned (Kafka's bound too: a consumer far
        // behind does not read the index of the whole log on every fetch).
        if let (true, Ok((_, next))) = (read_committed, &slice) {
            let next = *next;
            if next > offset as u64 {
                match self.aborted_in(offset as u64, next).await {
                    Ok((aborted, whole_below)) => {
                        out.aborted = aborted;
                        if whole_below < next {
                            // More aborted transactions than one answer holds: the records
                            // stop where the list would be incomplete.
                            slice = match self
                                .read_chunks(offset as u64, max_bytes, whole_below)
                                .await
                            {
                                Some(slice) => slice,
                                None => return out,
                            };
                        }
                    }
                    Err(e) => return FetchResult::error(log_error_code(&e)),
                }
            }
        }
        match slice.map(|(chunks, _)| chunks) {
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

    /// Batches from `offset` below `upper` (at most `max_bytes`, at least one) and the offset
    /// after the last; `None` when a copy found no room in the response budget.
    async fn read_chunks(
        &self,
        offset: u64,
        max_bytes: usize,
        upper: u64,
    ) -> Option<Result<(Vec<ReadChunk>, u64), spool_storage::LogError>> {
        if self.copy_reads {
            // Charged to the response budget before the copy is made; without room now, no
            // records this time (`response_memory` says why not a wait).
            let copy = self.log.read_copy(offset, max_bytes, upper);
            let read = crate::response_memory::charged_copy(max_bytes, copy).await?;
            Some(read.map(|b| {
                let next = PartitionLog::next_offset_after(&b).unwrap_or(offset);
                (vec![ReadChunk::Memory(b)], next)
            }))
        } else {
            Some(
                self.log
                    .read(offset, max_bytes, upper)
                    .await
                    .map(|s| (s.chunks, s.next_offset.max(offset))),
            )
        }
    }

    /// ListOffsets; with `read_committed`, the latest offset is the last stable offset and a
    /// timestamp is looked up below it.
    pub async fn list_offsets(&self, timestamp: i64, read_committed: bool) -> ListOffsetsResult {
        let epoch = self.leader_epoch();
        let upper = if read_committed {
            if let Err(e) = self.ensure_txn_state().await {
                return ListOffsetsResult {
                    error: log_error_code(&e),
                    timestamp,
                    offset: -1,
                    leader_epoch: epoch,
                };
            }
            self.last_stable_offset()
        } else {
            self.high_watermark()
        };
        let ok = |offset: u64, ts: i64| ListOffsetsResult {
            error: ErrorCode::None,
            timestamp: ts,
            offset: offset as i64,
            leader_epoch: epoch,
        };
        match timestamp {
            EARLIEST_TIMESTAMP => ok(self.log.log_start_offset(), -1),
            LATEST_TIMESTAMP => ok(upper, -1),
            ts if ts < 0 => ListOffsetsResult {
                error: ErrorCode::InvalidRequest,
                timestamp: ts,
                offset: -1,
                leader_epoch: epoch,
            },
            ts => match self.log.offset_for_timestamp(ts).await {
                // The found record's own timestamp, as Kafka answers (clients show it).
                Ok(Some((o, found_ts))) if o < upper => ok(o, found_ts),
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
