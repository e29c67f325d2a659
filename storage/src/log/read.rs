//! Reads: whole batches from an offset, as memory (tail cache) or page-cache file ranges for
//! zero-copy sending, or copied and CRC-checked; and the offset for a timestamp.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use glommio::io::BufferedFile;

use super::PartitionLog;
use crate::batch::{BatchHeader, BatchIter, ATTR_TIMESTAMP_LOG_APPEND};
use crate::error::LogError;
use crate::records;
use crate::segment::{read_at, HeaderCursor, Segment};

/// A piece of a read: bytes already in memory, or a range of a segment file in the page cache
/// (send it with splice; `file` stays valid even if the segment is deleted or compacted after).
#[derive(Clone)]
pub enum ReadChunk {
    Memory(Bytes),
    File {
        file: Rc<BufferedFile>,
        path: PathBuf,
        position: u64,
        len: u64,
    },
}

impl std::fmt::Debug for ReadChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadChunk::Memory(b) => write!(f, "Memory({} bytes)", b.len()),
            ReadChunk::File {
                path,
                position,
                len,
                ..
            } => {
                write!(f, "File({}, {position}+{len})", path.display())
            }
        }
    }
}

impl ReadChunk {
    pub fn len(&self) -> u64 {
        match self {
            ReadChunk::Memory(b) => b.len() as u64,
            ReadChunk::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The result of a read: whole batches, in order.
#[derive(Debug, Clone, Default)]
pub struct ReadSlice {
    pub chunks: Vec<ReadChunk>,
    pub bytes: u64,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    /// The offset after the last batch returned (0 when none is).
    pub next_offset: u64,
}

impl PartitionLog {
    /// Batches from the one holding `offset` up to `max_bytes` (at least one whole batch), none
    /// reaching `upper_offset` or the log end. `offset` must lie in `[log start, log end]`.
    pub async fn read(
        &self,
        offset: u64,
        max_bytes: usize,
        upper_offset: u64,
    ) -> Result<ReadSlice, LogError> {
        let (start, end, from_tail) = {
            let st = self.st.borrow();
            let (start, end) = (st.log_start_offset, st.log_end_offset);
            if offset < start || offset > end {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start_offset: start,
                    log_end_offset: end,
                });
            }
            let upper = upper_offset.min(end);
            let tail = (offset < upper && st.tail.covers(offset))
                .then(|| st.tail.read(offset, max_bytes, upper));
            (start, end, tail)
        };
        let mut out = ReadSlice {
            log_start_offset: start,
            log_end_offset: end,
            ..Default::default()
        };
        let upper = upper_offset.min(end);
        if offset >= upper {
            return Ok(out);
        }
        if let Some((batches, next)) = from_tail {
            // The tail knows where each batch it holds ends: no header is parsed.
            if !batches.is_empty() {
                out.next_offset = next;
            }
            for b in batches {
                out.bytes += b.len() as u64;
                out.chunks.push(ReadChunk::Memory(b));
            }
            return Ok(out);
        }
        let segments: Vec<Rc<Segment>> = {
            let st = self.st.borrow();
            let first = st
                .segments
                .range(..=offset)
                .next_back()
                .map(|(b, _)| *b)
                .unwrap_or(0);
            st.segments
                .range(first..)
                .map(|(_, s)| Rc::clone(s))
                .collect()
        };
        for seg in segments {
            if let Some((chunk, next)) = self.read_segment(&seg, offset, max_bytes, upper).await? {
                out.bytes += chunk.len();
                out.chunks.push(chunk);
                out.next_offset = next;
                break;
            }
        }
        Ok(out)
    }

    /// One segment's contribution: the file range of batches holding `offset`.. within limits,
    /// and the offset after its last batch.
    ///
    /// Batch headers are read only where the index cannot answer: to find the first batch when
    /// no entry starts exactly at `offset`, and to find the end when no indexed boundary lies
    /// within the limits. A consumer reading on from where its last read ended usually needs
    /// none, which matters because each header read goes through the page cache, and on a
    /// catch-up read of O_DIRECT-written data that is a second disk read of bytes the fetch then
    /// reads again with O_DIRECT (DESIGN §5; BENCHMARKS.md 2026-12-07).
    async fn read_segment(
        &self,
        seg: &Segment,
        offset: u64,
        max_bytes: usize,
        upper: u64,
    ) -> Result<Option<(ReadChunk, u64)>, LogError> {
        let (start_pos, end_pos, known_start) = {
            let idx = seg.index.borrow();
            if idx.next_offset <= offset {
                return Ok(None);
            }
            let known = idx.position_of_base(offset);
            (idx.lookup_offset(offset), idx.size_bytes, known)
        };
        seg.ensure_written(end_pos).await?;
        let file = seg.reader();
        let range = |position, len| ReadChunk::File {
            file: Rc::clone(&file),
            path: seg.log_path.clone(),
            position,
            len,
        };
        let by_index = |from: u64| {
            // Only boundaries inside what `ensure_written` covered: appends may have gone on.
            let bytes_max = (max_bytes as u64).min(end_pos.saturating_sub(from));
            let found = seg.index.borrow().boundary_within(from, bytes_max, upper);
            // Pair assertion: `from` holds the batch with `offset`, so a boundary past it ends
            // that batch or a later one.
            debug_assert!(
                found.is_none_or(|(pos, next)| pos > from && next > offset && next <= upper)
            );
            found
        };
        if let Some(first_pos) = known_start {
            if let Some((pos, next)) = by_index(first_pos) {
                return Ok(Some((range(first_pos, pos - first_pos), next)));
            }
        }
        let mut cur = HeaderCursor::new(Rc::clone(&file), start_pos, end_pos);
        let mut first_pos = None;
        let mut taken = 0u64;
        let mut next = offset;
        while let Some(h) = cur.peek(seg, self.config.get().max_batch_bytes).await? {
            let last = h.last_offset() as u64;
            if first_pos.is_none() {
                if last < offset {
                    cur.advance(&h);
                    continue;
                }
                if last >= upper {
                    break;
                }
                first_pos = Some(cur.position);
                if let Some((pos, n)) = by_index(cur.position) {
                    return Ok(Some((range(cur.position, pos - cur.position), n)));
                }
            } else if last >= upper || taken + h.total_bytes() as u64 > max_bytes as u64 {
                break;
            }
            taken += h.total_bytes() as u64;
            next = last + 1;
            cur.advance(&h);
        }
        Ok(first_pos.map(|position| (range(position, taken), next)))
    }

    /// The offset after the last whole batch in `batches` (whole batches, as reads return them),
    /// reading only their headers; `None` when there is none.
    pub fn next_offset_after(batches: &[u8]) -> Option<u64> {
        let mut pos = 0usize;
        let mut next = None;
        while let Some(rest) = batches.get(pos..).filter(|r| !r.is_empty()) {
            let Ok(h) = crate::batch::BatchHeader::parse(rest) else {
                break;
            };
            let total = h.total_bytes();
            if total == 0 || total > rest.len() {
                break;
            }
            next = Some(h.last_offset() as u64 + 1);
            pos += total;
        }
        next
    }

    /// Like [`PartitionLog::read`] but returns the bytes, each batch's CRC checked; a bad batch is
    /// [`LogError::Corrupt`] with its file and position.
    pub async fn read_copy(
        &self,
        offset: u64,
        max_bytes: usize,
        upper_offset: u64,
    ) -> Result<Bytes, LogError> {
        let slice = self.read(offset, max_bytes, upper_offset).await?;
        let mut out = BytesMut::with_capacity(slice.bytes as usize);
        for chunk in slice.chunks {
            match chunk {
                ReadChunk::Memory(b) => out.extend_from_slice(&b),
                ReadChunk::File {
                    file,
                    path,
                    position,
                    len,
                } => {
                    let data = read_at(&file, &path, position, len as usize).await?;
                    if data.len() as u64 != len {
                        return Err(LogError::Corrupt {
                            file: path,
                            position,
                            reason: "segment shorter than its index".into(),
                        });
                    }
                    for item in BatchIter::new(&data, self.config.get().max_batch_bytes) {
                        if let Err((p, e)) = item {
                            return Err(LogError::Corrupt {
                                file: path,
                                position: position + p as u64,
                                reason: e.to_string(),
                            });
                        }
                    }
                    out.extend_from_slice(&data);
                }
            }
        }
        Ok(out.freeze())
    }

    /// Kafka's ListOffsets by timestamp: the offset and timestamp of the first record at or after
    /// the log start whose timestamp is `>= timestamp_ms`, or `None` when every record is older.
    /// Under log-append time a record's timestamp is its batch's. A batch spool cannot decompress
    /// answers its base offset and its max timestamp (the best it can say without the records).
    pub async fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(u64, i64)>, LogError> {
        let (segments, log_start) = {
            let st = self.st.borrow();
            (
                st.segments.values().cloned().collect::<Vec<_>>(),
                st.log_start_offset,
            )
        };
        for seg in segments {
            let (pos, end) = {
                let idx = seg.index.borrow();
                if idx.max_timestamp < timestamp_ms || idx.next_offset <= log_start {
                    continue;
                }
                (idx.lookup_timestamp(timestamp_ms), idx.size_bytes)
            };
            seg.ensure_written(end).await?;
            let mut cur = HeaderCursor::new(seg.reader(), pos, end);
            while let Some(h) = cur.peek(&seg, self.config.get().max_batch_bytes).await? {
                if h.max_timestamp >= timestamp_ms && h.last_offset() as u64 >= log_start {
                    let found = self
                        .first_record_at_or_after(&seg, cur.position, &h, timestamp_ms, log_start)
                        .await?;
                    if found.is_some() {
                        return Ok(found);
                    }
                }
                cur.advance(&h);
            }
        }
        Ok(None)
    }

    /// The (offset, timestamp) of the first record of the batch `h` at or after `log_start` whose
    /// timestamp is `>= timestamp_ms`.
    async fn first_record_at_or_after(
        &self,
        seg: &Segment,
        position: u64,
        h: &BatchHeader,
        timestamp_ms: i64,
        log_start: u64,
    ) -> Result<Option<(u64, i64)>, LogError> {
        let bytes =
            Bytes::from(read_at(&seg.reader(), &seg.log_path, position, h.total_bytes()).await?);
        let recs = match records::read_batch(&bytes, self.config.get().max_batch_bytes) {
            Ok((_, recs)) => recs,
            Err(crate::batch::BatchError::UnsupportedCompression(_)) => {
                return Ok(Some((
                    (h.base_offset as u64).max(log_start),
                    h.max_timestamp,
                )))
            }
            Err(e) => return Err(seg.corrupt(position, e.to_string())),
        };
        let found = recs.iter().try_for_each(|r| {
            let ts = if h.attributes & ATTR_TIMESTAMP_LOG_APPEND != 0 {
                h.max_timestamp
            } else {
                h.base_timestamp + r.timestamp_delta
            };
            let offset = h.base_offset as u64 + r.offset_delta as u64;
            if ts >= timestamp_ms && offset >= log_start {
                ControlFlow::Break((offset, ts))
            } else {
                ControlFlow::Continue(())
            }
        });
        Ok(match found {
            ControlFlow::Break(hit) => Some(hit),
            ControlFlow::Continue(()) => None,
        })
    }
}
