//! The recovery scan: walks a segment's bytes batch by batch (length + CRC + offsets going
//! forward) and reports where the valid prefix ends and why.
//!
//! Pure and incremental: the I/O layer feeds windows of the file and gets back either "need more
//! from position P" or the final verdict, so a 1 GiB active segment is scanned in bounded memory.
//! It rebuilds the segment's [`SegmentIndex`] as it goes. What to do with the verdict (truncate a
//! torn active tail, report a corrupt closed segment) is the caller's decision.

use crate::batch::{self, BatchError, HEADER_BYTES, LOG_OVERHEAD_BYTES};
use crate::index::SegmentIndex;

/// Why the valid prefix ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStop {
    /// The bytes ended exactly after a whole batch.
    End,
    /// A batch starts but the bytes end before it does: a torn write.
    Incomplete { position: u64 },
    /// A zero length prefix: never-written (preallocated or padding) space.
    Zeroes { position: u64 },
    /// The bytes at `position` are not a valid batch, or its offsets go backwards.
    Invalid { position: u64, reason: String },
}

impl ScanStop {
    pub fn position(&self) -> Option<u64> {
        match self {
            ScanStop::End => None,
            ScanStop::Incomplete { position }
            | ScanStop::Zeroes { position }
            | ScanStop::Invalid { position, .. } => Some(*position),
        }
    }
}

/// What the scanner wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Feed a window starting at file position `from` holding at least `at_least` bytes (or
    /// whatever is left of the file, with `eof` set).
    NeedMore {
        from: u64,
        at_least: usize,
    },
    Done(ScanStop),
}

pub struct Scanner {
    pub index: SegmentIndex,
    max_batch_bytes: usize,
}

impl Scanner {
    pub fn new(base_offset: u64, index_interval_bytes: u64, max_batch_bytes: usize) -> Self {
        Self {
            index: SegmentIndex::new(base_offset, index_interval_bytes),
            max_batch_bytes,
        }
    }

    /// File position up to which batches are valid so far.
    pub fn position(&self) -> u64 {
        self.index.size_bytes
    }

    /// Consumes whole batches from `window`, which starts at file position `window_pos`
    /// (== [`Scanner::position`]); `eof` says the window reaches the end of the file.
    pub fn feed(&mut self, window: &[u8], window_pos: u64, eof: bool) -> Step {
        assert_eq!(window_pos, self.position(), "windows are fed in order");
        let mut consumed = 0usize;
        loop {
            let position = self.position();
            let rest = &window[consumed..];
            if rest.is_empty() {
                return if eof {
                    Step::Done(ScanStop::End)
                } else {
                    Step::NeedMore {
                        from: position,
                        at_least: HEADER_BYTES,
                    }
                };
            }
            let Some(total) = batch::peek_total_bytes(rest) else {
                return if !eof {
                    Step::NeedMore {
                        from: position,
                        at_least: HEADER_BYTES,
                    }
                } else if rest.iter().all(|&b| b == 0) {
                    Step::Done(ScanStop::Zeroes { position })
                } else {
                    Step::Done(ScanStop::Incomplete { position })
                };
            };
            if rest[..LOG_OVERHEAD_BYTES].iter().all(|&b| b == 0) {
                return Step::Done(ScanStop::Zeroes { position });
            }
            if total < HEADER_BYTES as i64 || total > self.max_batch_bytes as i64 {
                let err = BatchError::BadLength {
                    length: total,
                    min: HEADER_BYTES as i64,
                    max: self.max_batch_bytes as i64,
                };
                return Step::Done(ScanStop::Invalid {
                    position,
                    reason: err.to_string(),
                });
            }
            let total = total as usize;
            if rest.len() < total {
                return if eof {
                    Step::Done(ScanStop::Incomplete { position })
                } else {
                    Step::NeedMore {
                        from: position,
                        at_least: total,
                    }
                };
            }
            let header = match batch::validate(rest, self.max_batch_bytes) {
                Ok(h) => h,
                Err(e) => {
                    return Step::Done(ScanStop::Invalid {
                        position,
                        reason: e.to_string(),
                    })
                }
            };
            if header.base_offset < 0 || (header.base_offset as u64) < self.index.next_offset {
                return Step::Done(ScanStop::Invalid {
                    position,
                    reason: format!(
                        "batch base offset {} is below the segment's next offset {}",
                        header.base_offset, self.index.next_offset
                    ),
                });
            }
            self.index.on_append(&header);
            consumed += total;
        }
    }
}

/// Scans a whole in-memory segment image.
pub fn scan_all(
    bytes: &[u8],
    base_offset: u64,
    index_interval_bytes: u64,
    max_batch_bytes: usize,
) -> (SegmentIndex, ScanStop) {
    let mut s = Scanner::new(base_offset, index_interval_bytes, max_batch_bytes);
    match s.feed(bytes, 0, true) {
        Step::Done(stop) => (s.index, stop),
        Step::NeedMore { .. } => unreachable!("eof was set"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::BatchBuilder;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn log_image(sizes: &[(usize, usize)]) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        let mut next = 0i64;
        for &(n, vbytes) in sizes {
            let mut b = BatchBuilder::new(1_000);
            for _ in 0..n {
                b.push(
                    1_000,
                    Some(Bytes::from_static(b"k")),
                    Some(Bytes::from(vec![1u8; vbytes])),
                );
            }
            let mut bytes = b.build().unwrap();
            batch::set_base_offset(&mut bytes, next);
            next += n as i64;
            out.extend_from_slice(&bytes);
            ends.push(out.len() as u64);
        }
        (out, ends)
    }

    proptest! {
        /// A log cut at any byte (and possibly followed by zeroed, preallocated space) recovers
        /// to exactly the batches that were fully written.
        #[test]
        fn cut_at_any_byte_recovers_the_whole_batches(
            sizes in proptest::collection::vec((1usize..10, 0usize..300), 1..30),
            cut_frac in 0.0f64..=1.0,
            zero_tail in 0usize..5000,
            window in 61usize..4096,
        ) {
            let (img, ends) = log_image(&sizes);
            let cut = ((img.len() as f64) * cut_frac) as usize;
            let mut file = img[..cut].to_vec();
            file.resize(cut + zero_tail, 0);
            // A batch survives when the file holds its exact bytes: fully before the cut, or cut
            // only in trailing zero bytes that the zeroed tail restores.
            let intact = |e: u64| (e as usize) <= file.len() && file[..e as usize] == img[..e as usize];
            let expect = ends.iter().copied().take_while(|&e| intact(e)).last().unwrap_or(0);
            let expect_batches = ends.iter().take_while(|&&e| intact(e)).count() as u64;

            // Fed in small windows, as the I/O layer does.
            let mut s = Scanner::new(0, 4096, 1 << 20);
            let mut pos = 0usize;
            let mut want = window;
            let stop = loop {
                let end = (pos + want).min(file.len());
                match s.feed(&file[pos..end], pos as u64, end == file.len()) {
                    Step::Done(stop) => break stop,
                    Step::NeedMore { from, at_least } => { pos = from as usize; want = at_least.max(window); }
                }
            };
            prop_assert_eq!(s.position(), expect);
            let expect_next: u64 = sizes.iter().take(expect_batches as usize).map(|s| s.0 as u64).sum();
            prop_assert_eq!(s.index.next_offset, expect_next);
            if expect as usize == file.len() {
                prop_assert_eq!(stop, ScanStop::End);
            } else {
                // A cut inside a header followed by zeroes may read as a bad length: for the
                // active segment every stop truncates, so only the position matters.
                prop_assert_eq!(stop.position(), Some(expect));
            }
        }

        #[test]
        fn a_flipped_bit_stops_the_scan_at_its_batch(
            sizes in proptest::collection::vec((1usize..10, 0usize..300), 2..20),
            victim_frac in 0.0f64..1.0, bit in 0u8..8,
        ) {
            let (mut img, ends) = log_image(&sizes);
            let victim = ((sizes.len() as f64) * victim_frac) as usize;
            let start = if victim == 0 { 0 } else { ends[victim - 1] as usize };
            // Flip a bit inside the CRC-covered part or the length of the victim batch.
            let at = start + 8 + (ends[victim] as usize - start - 8) * (bit as usize) / 8;
            let at = if (12..16).contains(&(at - start)) { start + 21 } else { at };
            img[at] ^= 1 << bit;
            let (idx, stop) = scan_all(&img, 0, 4096, 1 << 20);
            prop_assert_eq!(idx.size_bytes, start as u64);
            prop_assert!(!matches!(stop, ScanStop::End));
        }
    }

    #[test]
    fn offsets_going_backwards_are_invalid() {
        let (img, _) = log_image(&[(2, 10)]);
        let mut twice = img.clone();
        twice.extend_from_slice(&img);
        let (idx, stop) = scan_all(&twice, 0, 4096, 1 << 20);
        assert_eq!(idx.size_bytes, img.len() as u64);
        assert!(matches!(stop, ScanStop::Invalid { position, .. } if position == img.len() as u64));
    }
}
