//! The per-partition tail cache: the most recently appended batches, kept in memory so that
//! consumers at the head of the log are served without touching the disk.
//!
//! Bounded by `capacity_bytes` (oldest batches are evicted first; the newest batch always stays,
//! whatever its size). It holds a contiguous run of batches ending at the log end: a read at an
//! offset it covers needs no file. Pure.
//!
//! A batch may be held in two pieces, `head` then `body` (a leader's append keeps the producer's
//! bytes as they came and only its stamped first bytes apart, `log`): a read returns both, in
//! order, and their concatenation is the batch.

use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Debug, Clone)]
pub struct CachedBatch {
    pub base_offset: u64,
    /// One past the batch's last offset.
    pub next_offset: u64,
    /// The batch's first bytes when they lie apart from the rest (empty otherwise).
    pub head: Bytes,
    /// The rest of the batch (all of it when `head` is empty).
    pub body: Bytes,
}

impl CachedBatch {
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
pub struct TailCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    capacity_bytes: usize,
}

impl TailCache {
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            batches: VecDeque::new(),
            bytes: 0,
            capacity_bytes,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn push(&mut self, batch: CachedBatch) {
        debug_assert!(self
            .batches
            .back()
            .is_none_or(|b| b.next_offset <= batch.base_offset));
        self.bytes += batch.len();
        self.batches.push_back(batch);
        while self.bytes > self.capacity_bytes && self.batches.len() > 1 {
            if let Some(old) = self.batches.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Whether a read starting at `offset` can be answered from memory.
    pub fn covers(&self, offset: u64) -> bool {
        self.batches
            .front()
            .is_some_and(|b| b.base_offset <= offset)
    }

    /// Batches from the one holding `offset`, each with `last offset < upper_offset`, up to
    /// `max_bytes` (at least one batch, so a consumer always progresses), as pieces in order
    /// (one or two per batch), and the offset after the last batch (`offset` when none is).
    pub fn read(&self, offset: u64, max_bytes: usize, upper_offset: u64) -> (Vec<Bytes>, u64) {
        let start = self.batches.partition_point(|b| b.next_offset <= offset);
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut next = offset;
        for b in self.batches.iter().skip(start) {
            if b.next_offset > upper_offset || (total > 0 && total + b.len() > max_bytes) {
                break;
            }
            total += b.len();
            next = b.next_offset;
            if !b.head.is_empty() {
                out.push(b.head.clone());
            }
            out.push(b.body.clone());
        }
        (out, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(base: u64, n: u64, size: usize) -> CachedBatch {
        CachedBatch {
            base_offset: base,
            next_offset: base + n,
            head: Bytes::new(),
            body: Bytes::from(vec![0u8; size]),
        }
    }

    #[test]
    fn bounded_and_contiguous() {
        let mut t = TailCache::new(250);
        t.push(b(0, 10, 100));
        t.push(b(10, 10, 100));
        t.push(b(20, 10, 100));
        assert_eq!(t.bytes(), 200);
        assert!(!t.covers(5));
        assert!(t.covers(15));
        assert_eq!(
            t.read(15, 1, u64::MAX),
            (vec![Bytes::from(vec![0u8; 100])], 20),
            "at least one batch"
        );
        assert_eq!(t.read(15, 1000, u64::MAX).0.len(), 2);
        assert_eq!(
            t.read(15, 1000, 25),
            (vec![Bytes::from(vec![0u8; 100])], 20),
            "never past the upper offset"
        );
        assert_eq!(
            t.read(15, 1000, 15),
            (vec![], 15),
            "nothing below the upper offset"
        );
        t.push(b(30, 1, 1000));
        assert_eq!(
            t.bytes(),
            1000,
            "the newest batch stays even when it alone exceeds the bound"
        );
    }

    #[test]
    fn a_batch_in_two_pieces_reads_as_both_in_order_and_counts_whole() {
        let mut t = TailCache::new(150);
        let split = |base: u64| CachedBatch {
            base_offset: base,
            next_offset: base + 5,
            head: Bytes::from(vec![1u8; 16]),
            body: Bytes::from(vec![2u8; 84]),
        };
        t.push(split(0));
        assert_eq!(t.bytes(), 100, "head and body both count");
        let (pieces, next) = t.read(0, 1000, u64::MAX);
        assert_eq!(next, 5);
        assert_eq!(
            pieces,
            vec![Bytes::from(vec![1u8; 16]), Bytes::from(vec![2u8; 84])]
        );
        t.push(split(5));
        assert_eq!(
            t.bytes(),
            100,
            "the older batch left whole, both of its pieces"
        );
        assert!(!t.covers(0));
        assert!(t.covers(5));
    }
}
