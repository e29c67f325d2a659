//! Header-only scan of the log's tail: every batch's 61-byte header, oldest first, over at most a
//! caller-chosen number of bytes at the end of the log. The broker rebuilds its idempotent-producer
//! table from it when a partition opens (DESIGN §9); nothing here decompresses records.
//!
//! Promises: headers come in log order, each from a batch boundary (a scan never starts inside a
//! batch); the bytes read from the segments are at most `bytes_max` (the start is an indexed batch
//! position, so the scan may cover up to one index interval less than asked, never more). Reads
//! only: it takes no lock, so a caller that needs a stable tail keeps appends out itself.

use std::rc::Rc;

use super::PartitionLog;
use crate::batch::BatchHeader;
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
                f(&h);
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
}
