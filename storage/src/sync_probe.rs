//! How a log's fdatasyncs went: how many, and how long each took, in fixed buckets — the probe
//! behind the broker's `spool_log_fdatasync_seconds` histogram (Kafka's
//! `LogFlushRateAndTimeMs`). With durability `fsync` an acknowledgement waits for one, so a
//! produce latency tail is either here (the disk) or not (the broker).
//!
//! Owned by one log, shared by its segment writers (`Rc`, one core); it only counts.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds of the buckets, in µs; a last bucket counts the slower ones.
pub const SYNC_BUCKETS_US: [u64; 11] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
];

/// Buckets, the last one unbounded.
const BUCKETS: usize = SYNC_BUCKETS_US.len() + 1;

/// The live counters of one log.
#[derive(Debug, Default)]
pub struct SyncProbe {
    /// fdatasyncs issued (counted when issued, so a hung one shows).
    issued: Cell<u64>,
    /// Durations of the finished ones (failed ones included).
    finished: [Cell<u64>; BUCKETS],
    sum_us: Cell<u64>,
}

impl SyncProbe {
    pub fn issued(&self) {
        self.issued.set(self.issued.get() + 1);
    }

    /// An fdatasync issued earlier finished after `took`.
    pub fn finished(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let at = SYNC_BUCKETS_US.partition_point(|&bound| bound < us);
        let bucket = &self.finished[at];
        bucket.set(bucket.get() + 1);
        self.sum_us.set(self.sum_us.get().saturating_add(us));
    }

    pub fn issued_count(&self) -> u64 {
        self.issued.get()
    }

    pub fn stats(&self) -> SyncStats {
        SyncStats {
            issued: self.issued.get(),
            finished: std::array::from_fn(|i| self.finished[i].get()),
            sum_us: self.sum_us.get(),
        }
    }
}

/// A copy of [`SyncProbe`]'s counters, to add up over logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    pub issued: u64,
    /// Per bucket of [`SYNC_BUCKETS_US`] (not cumulative); the last is the slower ones.
    pub finished: [u64; BUCKETS],
    pub sum_us: u64,
}

impl SyncStats {
    pub fn add(&mut self, other: &SyncStats) {
        self.issued += other.issued;
        for (a, b) in self.finished.iter_mut().zip(other.finished) {
            *a += b;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    pub fn finished_count(&self) -> u64 {
        self.finished.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let p = SyncProbe::default();
        for us in [0, 100, 101, 250_000, 250_001, 10_000_000] {
            p.issued();
            p.finished(Duration::from_micros(us));
        }
        let s = p.stats();
        assert_eq!(s.issued, 6);
        assert_eq!(s.finished[0], 2, "0 and 100 µs: ≤ 100");
        assert_eq!(s.finished[1], 1, "101 µs: ≤ 250");
        assert_eq!(
            s.finished[BUCKETS - 2],
            1,
            "250 ms exactly: the last bounded"
        );
        assert_eq!(s.finished[BUCKETS - 1], 2, "slower: the unbounded one");
        assert_eq!(s.finished_count(), 6);
        assert_eq!(s.sum_us, 100 + 101 + 250_000 + 250_001 + 10_000_000);
        let mut twice = s;
        twice.add(&s);
        assert_eq!(twice.finished_count(), 12);
        assert_eq!(twice.issued, 12);
    }
}
