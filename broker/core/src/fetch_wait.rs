//! When a long-polling fetch answers, and which partitions' data fit its `max_bytes` (Kafka's
//! Fetch semantics, shared by both fronts).
//!
//! Pure: the caller reads the clock and passes `now_ms`; this decides. A fetch answers as soon as
//! it has `min_bytes` (at least one byte), any partition has an error, its wait is over, or the
//! broker is stopping; otherwise it waits for new data until its deadline.

/// The longest a fetch may wait, whatever the client asks.
pub const FETCH_MAX_WAIT_MS: u64 = 30_000;

/// One fetch's waiting rule, fixed when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchWait {
    deadline_ms: u64,
    min_bytes: u64,
}

/// What the fetch does after a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Answer,
    /// Wait at most this long for new data, then read again.
    Wait {
        wait_ms: u64,
    },
}

impl FetchWait {
    /// A fetch that arrived at `now_ms` asking to wait up to `max_wait_ms` for `min_bytes`
    /// (negative values count as 0; the wait is capped at [`FETCH_MAX_WAIT_MS`]).
    pub fn new(now_ms: u64, max_wait_ms: i32, min_bytes: i32) -> Self {
        let wait_ms = u64::try_from(max_wait_ms)
            .unwrap_or(0)
            .min(FETCH_MAX_WAIT_MS);
        FetchWait {
            deadline_ms: now_ms.saturating_add(wait_ms),
            min_bytes: u64::try_from(min_bytes).unwrap_or(0).max(1),
        }
    }

    /// After a read that found `bytes` bytes (and an error on some partition, or not).
    pub fn next(&self, bytes: u64, any_error: bool, stopping: bool, now_ms: u64) -> Next {
        if bytes >= self.min_bytes || any_error || stopping || now_ms >= self.deadline_ms {
            Next::Answer
        } else {
            Next::Wait {
                wait_ms: self.deadline_ms - now_ms,
            }
        }
    }
}

/// Which partitions keep their data within `max_bytes` (in request order, given each one's
/// size): whole partitions at a time, except that the first non-empty partition always keeps its
/// data, so a consumer always progresses (Kafka's rule).
pub fn keep_within(max_bytes: i32, sizes: &[u64]) -> Vec<bool> {
    let max_bytes = u64::try_from(max_bytes).unwrap_or(0);
    let mut total = 0u64;
    sizes
        .iter()
        .map(|&b| {
            if b == 0 {
                return true;
            }
            if total > 0 && total + b > max_bytes {
                false
            } else {
                total += b;
                true
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn waits_until_min_bytes_an_error_the_deadline_or_stop() {
        let w = FetchWait::new(1_000, 500, 10);
        assert_eq!(w.next(0, false, false, 1_000), Next::Wait { wait_ms: 500 });
        assert_eq!(w.next(9, false, false, 1_200), Next::Wait { wait_ms: 300 });
        assert_eq!(w.next(10, false, false, 1_200), Next::Answer);
        assert_eq!(w.next(0, true, false, 1_200), Next::Answer);
        assert_eq!(w.next(0, false, true, 1_200), Next::Answer);
        assert_eq!(w.next(0, false, false, 1_500), Next::Answer);
        let w = FetchWait::new(0, -5, -5);
        assert_eq!(w.next(0, false, false, 0), Next::Answer, "no wait asked");
        let w = FetchWait::new(0, i32::MAX, 0);
        assert_eq!(
            w.next(0, false, false, 0),
            Next::Wait {
                wait_ms: FETCH_MAX_WAIT_MS
            }
        );
    }

    proptest! {
        #[test]
        fn keeps_the_first_non_empty_and_stays_within_max_bytes(
            max_bytes in -10i32..5000,
            sizes in proptest::collection::vec(0u64..2000, 0..12),
        ) {
            let keep = keep_within(max_bytes, &sizes);
            prop_assert_eq!(keep.len(), sizes.len());
            let kept: Vec<u64> = sizes.iter().zip(&keep).filter(|(_, k)| **k).map(|(s, _)| *s).collect();
            let total: u64 = kept.iter().sum();
            let first = sizes.iter().copied().find(|s| *s > 0).unwrap_or(0);
            prop_assert!(total <= first.max(u64::try_from(max_bytes).unwrap_or(0)));
            if let Some(i) = sizes.iter().position(|s| *s > 0) {
                prop_assert!(keep[i], "the first non-empty partition keeps its data");
            }
        }
    }
}
