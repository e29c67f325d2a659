//! Header-only scan of the log's tail: every batch's 61-byte header, oldest first, over at most a
//! caller-chosen number of bytes at the end of the log, and on request each control batch's
//! transaction marker. The broker rebuilds its idempotent-producer table and its partitions'
//! transaction state from it when a partition opens (DESIGN §9); nothing here decompresses
//! records, and only control batches (tiny) are read past their header.
//!
//! Promises: headers come in log order, each from a batch boundary (a scan never starts inside a
//! batch); the bytes read from the segments are at most `bytes_max` (the start is an indexed batch
//! position, so the scan may cover up to one index interval less than asked, never more). Reads
//! only: it takes no lock, so a caller that needs a stable tail keeps appends out itself.

use std::rc::Rc;

use super::PartitionLog;
use crate::batch::{BatchError, BatchHeader};
use crate::control::{read_marker, Marker, MARKER_BATCH_BYTES_MAX};
use crate::error::LogError;
use crate::segment::{HeaderCursor, Segment};

/// What a tail scan covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TailScan {
    /// Batches handed to the callback.
    pub batches: u64,
    /// Bytes of batches covered.
    pub bytes: u64,
    /// Whether the scan reached the first segment's start (the whole log was seen).
    pub whole_log: bool,
}

impl PartitionLog {
    /// Calls `f` with the header of every batch in (at most) the last `bytes_max` bytes of the
    /// log, oldest first.
    pub async fn for_each_tail_header(
        &self,
        bytes_max: u64,
        mut f: impl FnMut(&BatchHeader),
    ) -> Result<TailScan, LogError> {
        self.tail_scan(bytes_max, false, |h, _| f(h)).await
    }

    /// [`Self::for_each_tail_header`], also giving each control batch's marker: `Some` for a
    /// control batch whose marker reads, `None` for every other batch. A control batch whose
    /// marker does not read (not a transaction marker, or malformed) is reported with `None` and
    /// a warning, and the scan goes on. Only a control batch's own bytes are read past its
    /// header (a marker batch is 78 bytes, usually in the window its header came in).
    pub async fn for_each_tail_batch(
        &self,
        bytes_max: u64,
        f: impl FnMut(&BatchHeader, Option<Marker>),
    ) -> Result<TailScan, LogError> {
        self.tail_scan(bytes_max, true, f).await
    }

    async fn tail_scan(
        &self,
        bytes_max: u64,
        markers: bool,
        mut f: impl FnMut(&BatchHeader, Option<Marker>),
    ) -> Result<TailScan, LogError> {
        let plan = self.tail_plan(bytes_max);
        let whole_log = plan.first().is_none_or(|(_, start, _)| *start == 0)
            && plan.len() == self.segment_count_nonempty();
        let mut out = TailScan {
            whole_log,
            ..TailScan::default()
        };
        for (seg, start, end) in plan {
            seg.ensure_written(end).await?;
            let mut cur = HeaderCursor::new(seg.reader(), start, end);
            while let Some(h) = cur.peek(&seg, self.config.get().max_batch_bytes).await? {
                let marker = if markers && h.is_control() {
                    marker_at(&mut cur, &seg, &h).await?
                } else {
                    None
                };
                f(&h, marker);
                out.batches += 1;
                out.bytes += h.total_bytes() as u64;
                cur.advance(&h);
            }
        }
        Ok(out)
    }

    fn segment_count_nonempty(&self) -> usize {
        let st = self.st.borrow();
        st.segments
            .values()
            .filter(|s| !s.index.borrow().is_empty())
            .count()
    }

    /// The (segment, start position, end position) ranges to scan, oldest first: whole segments
    /// from the newest back while they fit `bytes_max`, then the part of the next one after its
    /// first indexed batch position that fits.
    fn tail_plan(&self, bytes_max: u64) -> Vec<(Rc<Segment>, u64, u64)> {
        let st = self.st.borrow();
        let mut left = bytes_max;
        let mut plan = Vec::new();
        for seg in st.segments.values().rev() {
            let idx = seg.index.borrow();
            let size = idx.size_bytes;
            if size == 0 {
                continue;
            }
            if size <= left {
                left -= size;
                plan.push((Rc::clone(seg), 0, size));
                continue;
            }
            let want = size - left;
            let entries = idx.offset_entries();
            let at = entries.partition_point(|&(_, pos)| u64::from(pos) < want);
            if let Some(&(_, pos)) = entries.get(at) {
                plan.push((Rc::clone(seg), u64::from(pos), size));
            }
            break;
        }
        plan.reverse();
        plan
    }
}

/// The marker of the control batch `h` at the cursor, or `None` (with a warning) when it is not
/// one; only I/O errors fail.
pub(super) async fn marker_at(
    cur: &mut HeaderCursor,
    seg: &Segment,
    h: &BatchHeader,
) -> Result<Option<Marker>, LogError> {
    let total = h.total_bytes();
    let read = if total > MARKER_BATCH_BYTES_MAX {
        Err(BatchError::BadLength {
            length: total as i64,
            min: crate::batch::HEADER_BYTES as i64,
            max: MARKER_BATCH_BYTES_MAX as i64,
        })
    } else {
        read_marker(cur.peek_bytes(seg, total).await?)
    };
    match read {
        Ok(marker) => Ok(Some(marker)),
        Err(e) => {
            tracing::warn!(
                file = %seg.log_path.display(),
                position = cur.position,
                offset = h.base_offset,
                producer_id = h.producer_id,
                "control batch without a readable transaction marker: {e}"
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::config::LogConfig;
    use crate::records::BatchBuilder;
    use crate::test_util::run;

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            index_interval_bytes: 256,
            write_buffer_bytes: 8192,
            preallocate_bytes: 16384,
            tail_cache_bytes: 2048,
            ..LogConfig::default()
        }
    }

    fn batch(producer_id: i64, seq: i32, n: usize) -> bytes::BytesMut {
        let mut b = BatchBuilder::new(1_000);
        b.producer_id = producer_id;
        b.producer_epoch = 3;
        b.base_sequence = seq;
        for i in 0..n {
            b.push(1_000, None, Some(Bytes::from(format!("value-{seq}-{i}"))));
        }
        b.build().unwrap()
    }

    async fn headers(log: &PartitionLog, bytes_max: u64) -> (Vec<BatchHeader>, TailScan) {
        let mut out = Vec::new();
        let scan = log
            .for_each_tail_header(bytes_max, |h| out.push(*h))
            .await
            .unwrap();
        (out, scan)
    }

    /// The whole log, in order, across segments and a reopen; a bounded scan sees a suffix of
    /// it within its byte bound.
    #[test]
    fn tail_headers_are_a_suffix_of_the_log_in_order() {
        run(|| async {
            let dir = tempfile::tempdir().unwrap();
            let mut appended = Vec::new();
            {
                let (log, _) = PartitionLog::open(dir.path(), config()).await.unwrap();
                let (empty, scan) = headers(&log, u64::MAX).await;
                assert!(empty.is_empty() && scan.whole_log);
                for seq in 0..120 {
                    let info = log.append(batch(7, seq * 3, 3), 0, 1_000).await.unwrap();
                    appended.push((info.base_offset, seq * 3));
                }
                log.close().await.unwrap();
            }
            let (log, _) = PartitionLog::open(dir.path(), config()).await.unwrap();
            assert!(log.segment_count() > 2, "the test spans several segments");
            let (all, scan) = headers(&log, u64::MAX).await;
            assert!(scan.whole_log);
            assert_eq!(scan.batches, 120);
            let got: Vec<(u64, i32)> = all
                .iter()
                .map(|h| (h.base_offset as u64, h.base_sequence))
                .collect();
            assert_eq!(got, appended);
            assert!(all
                .iter()
                .all(|h| h.producer_id == 7 && h.producer_epoch == 3));
            assert_eq!(scan.bytes, log.size_bytes());

            for bytes_max in [0u64, 100, 1000, 5000, 9000, 13000] {
                let (tail, scan) = headers(&log, bytes_max).await;
                assert!(scan.bytes <= bytes_max, "{scan:?} within {bytes_max}");
                assert!(!scan.whole_log);
                let want = &appended[appended.len() - tail.len()..];
                let got: Vec<(u64, i32)> = tail
                    .iter()
                    .map(|h| (h.base_offset as u64, h.base_sequence))
                    .collect();
                assert_eq!(got, want, "a suffix at {bytes_max}");
                if bytes_max >= 1000 {
                    assert!(!tail.is_empty(), "an index interval fits in {bytes_max}");
                }
            }
        });
    }

    /// Data batches and marker batches of two producers, across segments and a reopen: the scan
    /// reports each marker at its offset with its kind and coordinator epoch, `None` for data,
    /// and `None` (not an error) for a control batch that is not a marker.
    #[test]
    fn tail_batches_report_the_markers_at_their_offsets() {
        use crate::control::{marker_batch, Marker};
        run(|| async {
            let dir = tempfile::tempdir().unwrap();
            let mut want: Vec<(u64, bool, Option<Marker>)> = Vec::new();
            {
                let (log, _) = PartitionLog::open(dir.path(), config()).await.unwrap();
                for round in 0..40i32 {
                    let pid = 7 + i64::from(round % 2);
                    let mut data = BatchBuilder::new(1_000);
                    (data.producer_id, data.producer_epoch) = (pid, 3);
                    (data.base_sequence, data.transactional) = (round * 2, true);
                    data.push(1_000, None, Some(Bytes::from(format!("a-{round}"))));
                    data.push(1_000, None, Some(Bytes::from(format!("b-{round}"))));
                    let data = data.build().unwrap();
                    let info = log.append(data, 0, 1_000).await.unwrap();
                    want.push((info.base_offset, false, None));
                    let marker = Marker {
                        commit: round % 3 != 0,
                        coordinator_epoch: round,
                        decision_offset: -1,
                    };
                    let control = marker_batch(pid, 3, marker, 1_000);
                    let info = log.append(control, 0, 1_000).await.unwrap();
                    want.push((info.base_offset, true, Some(marker)));
                }
                // A control batch that is not a transaction marker (type 3).
                let mut other = BatchBuilder::new(1_000);
                (other.transactional, other.control) = (true, true);
                other.push(1_000, Some(Bytes::from_static(&[0, 0, 0, 3])), None);
                let info = log.append(other.build().unwrap(), 0, 1_000).await.unwrap();
                want.push((info.base_offset, true, None));
                log.close().await.unwrap();
            }
            let (log, _) = PartitionLog::open(dir.path(), config()).await.unwrap();
            assert!(log.segment_count() > 1, "the test spans segments");
            let mut got = Vec::new();
            let scan = log
                .for_each_tail_batch(u64::MAX, |h, m| {
                    got.push((h.base_offset as u64, h.is_control(), m))
                })
                .await
                .unwrap();
            assert!(scan.whole_log);
            assert_eq!(got, want);
            let (headers, header_scan) = headers(&log, u64::MAX).await;
            assert_eq!(
                header_scan, scan,
                "the header-only scan covers the same batches"
            );
            assert_eq!(headers.len(), want.len());
        });
    }

    /// A marker batch whose header ends inside the scan's read window and whose record does not:
    /// the cursor reads it whole from a new window and the scan goes on in step.
    #[test]
    fn a_marker_across_a_read_window_is_read_whole() {
        use crate::control::{marker_batch, Marker};
        use crate::segment::HEADER_WINDOW_BYTES;
        /// A one-record data batch of exactly `bytes` bytes (in [200, 8000]).
        fn data_of(bytes: usize) -> bytes::BytesMut {
            (100..bytes)
                .map(|len| {
                    let mut b = BatchBuilder::new(1_000);
                    b.push(1_000, None, Some(Bytes::from(vec![b'x'; len])));
                    b.build().unwrap()
                })
                .find(|b| b.len() == bytes)
                .expect("sizes step by one byte in this range")
        }
        run(|| async {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig {
                segment_bytes: 1 << 20,
                ..config()
            };
            let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
            let marker = Marker {
                commit: true,
                coordinator_epoch: 11,
                decision_offset: -1,
            };
            // The marker (78 bytes) starts 70 bytes before the first window's end.
            let marker_position = HEADER_WINDOW_BYTES - 70;
            let mut position = 0;
            while position < marker_position {
                let left = marker_position - position;
                let bytes = if left > 4_200 { 4_000 } else { left };
                log.append(data_of(bytes), 0, 1_000).await.unwrap();
                position += bytes;
            }
            assert_eq!(position, marker_position);
            let at = log.append(marker_batch(5, 0, marker, 1_000), 0, 1_000);
            let at = at.await.unwrap().base_offset;
            let after = log
                .append(data_of(300), 0, 1_000)
                .await
                .unwrap()
                .base_offset;
            let mut got = Vec::new();
            log.for_each_tail_batch(u64::MAX, |h, m| {
                if h.is_control() || m.is_some() || h.base_offset as u64 == after {
                    got.push((h.base_offset as u64, m))
                }
            })
            .await
            .unwrap();
            assert_eq!(got, vec![(at, Some(marker)), (after, None)]);
        });
    }
}
