//! The idempotent-producer table of one partition (DESIGN §9): for each producer id, its epoch
//! and the last five batches it wrote, so a retried batch gets its original offset instead of
//! being written twice.
//!
//! Pure. Rules: a batch without a producer id is always appended; an unknown producer id is
//! accepted at any sequence (its history was not kept, e.g. after a restart — see the module
//! note below); an older epoch is PRODUCER_FENCED; a newer epoch must start at sequence 0; within
//! an epoch a batch matching a cached one is a duplicate (answered with the original offset), the
//! next sequence is appended, anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (a gap) or
//! DUPLICATE_SEQUENCE_NUMBER (older than the cached five). Bounded by `producers_max`: past it,
//! the producer idle longest is forgotten.
//!
//! Not yet: the table is not snapshotted at segment roll nor rebuilt from the log on open, so
//! deduplication does not survive a broker restart.

use std::collections::{HashMap, VecDeque};

use spool_protocol::ErrorCode;

/// Batches remembered per producer (Kafka's max.in.flight for idempotence).
pub const BATCHES_PER_PRODUCER: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    base_offset: u64,
}

#[derive(Debug, Clone)]
struct Producer {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    last_offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Append,
    /// A retry of a batch already in the log at this base offset.
    Duplicate {
        base_offset: u64,
    },
    Reject(ErrorCode),
}

#[derive(Debug)]
pub struct ProducerStateTable {
    producers: HashMap<i64, Producer>,
    producers_max: usize,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl ProducerStateTable {
    pub fn new(producers_max: usize) -> Self {
        Self {
            producers: HashMap::new(),
            producers_max: producers_max.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> Check {
        if producer_id < 0 {
            return Check::Append;
        }
        let Some(p) = self.producers.get(&producer_id) else {
            return Check::Append;
        };
        if epoch < p.epoch {
            return Check::Reject(ErrorCode::ProducerFenced);
        }
        if epoch > p.epoch {
            return if first_seq == 0 {
                Check::Append
            } else {
                Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
            };
        }
        if let Some(b) = p
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return Check::Duplicate {
                base_offset: b.base_offset,
            };
        }
        let Some(last) = p.batches.back() else {
            return Check::Append;
        };
        if first_seq == next_seq(last.last_seq) {
            return Check::Append;
        }
        let oldest = p.batches.front().map_or(last.first_seq, |b| b.first_seq);
        if first_seq < oldest {
            Check::Reject(ErrorCode::DuplicateSequenceNumber)
        } else {
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        }
    }

    /// Records an appended batch (call only after [`ProducerStateTable::check`] said `Append`).
    pub fn on_append(
        &mut self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        base_offset: u64,
        last_offset: u64,
    ) {
        if producer_id < 0 {
            return;
        }
        if !self.producers.contains_key(&producer_id) && self.producers.len() >= self.producers_max
        {
            if let Some(idle) = self
                .producers
                .iter()
                .min_by_key(|(_, p)| p.last_offset)
                .map(|(id, _)| *id)
            {
                self.producers.remove(&idle);
            }
        }
        let p = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| Producer {
                epoch,
                batches: VecDeque::new(),
                last_offset,
            });
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        p.batches.push_back(BatchMeta {
            first_seq,
            last_seq,
            base_offset,
        });
        if p.batches.len() > BATCHES_PER_PRODUCER {
            p.batches.pop_front();
        }
        p.last_offset = last_offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_idlest_producer_is_forgotten_past_the_bound() {
        let mut t = ProducerStateTable::new(2);
        t.on_append(1, 0, 0, 0, 10, 10);
        t.on_append(2, 0, 0, 0, 11, 11);
        t.on_append(3, 0, 0, 0, 12, 12);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.check(1, 0, 0, 0),
            Check::Append,
            "producer 1 was forgotten"
        );
        assert_eq!(t.check(3, 0, 0, 0), Check::Duplicate { base_offset: 12 });
    }

    #[test]
    fn retries_fences_and_gaps() {
        let mut t = ProducerStateTable::new(100);
        assert_eq!(t.check(7, 0, 0, 9), Check::Append);
        t.on_append(7, 0, 0, 9, 100, 109);
        assert_eq!(t.check(7, 0, 0, 9), Check::Duplicate { base_offset: 100 });
        assert_eq!(t.check(7, 0, 10, 19), Check::Append);
        assert_eq!(
            t.check(7, 0, 12, 19),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            t.check(7, 0, 20, 29),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber),
            "a gap"
        );
        assert_eq!(
            t.check(7, 1, 5, 9),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(t.check(7, 1, 0, 9), Check::Append);
        t.on_append(7, 1, 0, 9, 200, 209);
        assert_eq!(
            t.check(7, 0, 10, 19),
            Check::Reject(ErrorCode::ProducerFenced)
        );
        assert_eq!(t.check(-1, -1, -1, -1), Check::Append);
    }

    proptest! {
        /// Any retry of any of the last five batches is recognised with its original offset; the
        /// table never grows past its bound.
        #[test]
        fn the_last_five_batches_are_deduplicated(sizes in proptest::collection::vec(1i32..20, 1..30), retry in 0usize..5, producers in 1usize..3) {
            let mut t = ProducerStateTable::new(2);
            let mut seq = 0;
            let mut offset = 0u64;
            let mut log = Vec::new();
            for (i, n) in sizes.iter().enumerate() {
                let pid = (i % producers) as i64;
                if pid != 0 { t.on_append(pid + 100, 0, 0, 0, offset, offset); offset += 1; continue; }
                prop_assert_eq!(t.check(0, 0, seq, seq + n - 1), Check::Append);
                t.on_append(0, 0, seq, seq + n - 1, offset, offset + *n as u64 - 1);
                log.push((seq, seq + n - 1, offset));
                offset += *n as u64;
                seq += n;
                prop_assert!(t.len() <= 2);
            }
            if let Some(&(f, l, o)) = log.iter().rev().nth(retry) {
                if t.producers.contains_key(&0) {
                    prop_assert_eq!(t.check(0, 0, f, l), Check::Duplicate { base_offset: o });
                }
            }
        }
    }
}
