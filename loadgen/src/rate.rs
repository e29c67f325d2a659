//! The send schedule for one producer. With `--rate`, message `i` is *intended* at
//! `start + i / rate`; latency is measured from that intended time, not from when the send
//! actually happened, so a stall is charged to every message it delayed (no coordinated
//! omission). Unlimited: every message is intended "now". Pure: times are offsets in ns.

/// When each message of one producer should go out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// Closed loop: send as fast as the client accepts.
    Unlimited,
    /// Open loop: `interval_ns` between intended send times (may be fractional).
    Fixed { interval_ns: f64 },
}

impl Schedule {
    /// The schedule for one of `producers` sharing `rate_msgs_per_s` (None: unlimited).
    pub fn new(rate_msgs_per_s: Option<f64>, producers: usize) -> Self {
        match rate_msgs_per_s {
            Some(r) if r > 0.0 && r.is_finite() && producers > 0 => Self::Fixed {
                interval_ns: 1e9 * producers as f64 / r,
            },
            _ => Self::Unlimited,
        }
    }

    /// The intended send time of message `index`, in ns after the producer's start; `None` when
    /// unlimited (the intended time is whenever the send is attempted).
    pub fn intended_offset_ns(&self, index: u64) -> Option<u64> {
        match *self {
            Self::Unlimited => None,
            Self::Fixed { interval_ns } => Some((index as f64 * interval_ns) as u64),
        }
    }

    /// How many messages are due by `elapsed_ns` after the start (for a producer that fell
    /// behind: it sends the backlog at once, each charged from its own intended time).
    pub fn due_by(&self, elapsed_ns: u64) -> Option<u64> {
        match *self {
            Self::Unlimited => None,
            Self::Fixed { interval_ns } => Some((elapsed_ns as f64 / interval_ns) as u64 + 1),
        }
    }
}

/// Splits `total` messages among `parts` producers as evenly as possible (the first ones get
/// the remainder).
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    if parts == 0 {
        return 0;
    }
    let parts = parts as u64;
    let index = index as u64;
    total / parts + u64::from(index < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_spaces_messages_evenly_across_producers() {
        // 1,000 msg/s over 4 producers: each sends every 4 ms.
        let s = Schedule::new(Some(1000.0), 4);
        assert_eq!(s.intended_offset_ns(0), Some(0));
        assert_eq!(s.intended_offset_ns(1), Some(4_000_000));
        assert_eq!(s.intended_offset_ns(250), Some(1_000_000_000));
        assert_eq!(s.due_by(0), Some(1));
        assert_eq!(s.due_by(3_999_999), Some(1));
        assert_eq!(s.due_by(4_000_000), Some(2));
    }

    #[test]
    fn no_rate_or_a_nonsense_rate_is_unlimited() {
        for r in [
            None,
            Some(0.0),
            Some(-5.0),
            Some(f64::NAN),
            Some(f64::INFINITY),
        ] {
            let s = Schedule::new(r, 2);
            assert_eq!(s, Schedule::Unlimited);
            assert_eq!(s.intended_offset_ns(10), None);
            assert_eq!(s.due_by(10), None);
        }
    }

    #[test]
    fn shares_add_up_to_the_total() {
        for (total, parts) in [(10, 3), (1_000_000, 7), (2, 5), (0, 4)] {
            let sum: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(sum, total);
            let max = (0..parts)
                .map(|i| share(total, parts, i))
                .max()
                .unwrap_or(0);
            let min = (0..parts)
                .map(|i| share(total, parts, i))
                .min()
                .unwrap_or(0);
            assert!(max - min <= 1);
        }
        assert_eq!(share(5, 0, 0), 0);
    }
}
