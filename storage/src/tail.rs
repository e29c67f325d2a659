//! The per-partition tail cache: the most recently appended batches, kept in memory so that
//! consumers at the head of the log are served without touching the disk.
//!
//! Bounded by `capacity_bytes` (oldest batches are evicted first; the newest batch always stays,
//! whatever its size). It holds a contiguous run of batches ending at the log end: a read at an
//! offset it covers needs no file. Pure.

use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Debug, Clone)]
pub struct CachedBatch {
    pub base_offset: u64,
    /// One past the batch's last offset.
    pub next_offset: u64,
    pub bytes: Bytes,
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
        self.bytes += batch.bytes.len();
        self.batches.push_back(batch);
        while self.bytes > self.capacity_bytes && self.batches.len() > 1 {
            if let Some(old) = self.batches.pop_front() {
                self.bytes -= old.bytes.len();
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
    /// `max_bytes` (at least one batch, so a consumer always progresses).
    pub fn read(&self, offset: u64, max_bytes: usize, upper_offset: u64) -> Vec<Bytes> {
        let start = self.batches.partition_point(|b| b.next_offset <= offset);
        let mut out = Vec::new();
        let mut total = 0usize;
        for b in self.batches.iter().skip(start) {
            if b.next_offset > upper_offset
                || (!out.is_empty() && total + b.bytes.len() > max_bytes)
            {
                break;
            }
            total += b.bytes.len();
            out.push(b.bytes.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(base: u64, n: u64, size: usize) -> CachedBatch {
        CachedBatch {
            base_offset: base,
            next_offset: base + n,
            bytes: Bytes::from(vec![0u8; size]),
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
        assert_eq!(t.read(15, 1, u64::MAX).len(), 1, "at least one batch");
        assert_eq!(t.read(15, 1000, u64::MAX).len(), 2);
        assert_eq!(t.read(15, 1000, 25).len(), 1, "never past the upper offset");
        t.push(b(30, 1, 1000));
        assert_eq!(
            t.bytes(),
            1000,
            "the newest batch stays even when it alone exceeds the bound"
        );
    }
}
