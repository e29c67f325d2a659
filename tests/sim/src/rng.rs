//! [`SimRng`]: the simulator's one source of randomness.
//!
//! Owns: a splitmix64 stream started from the run's seed. Every random choice of a run — fault
//! times, message delays, losses, duplications, fsync latencies, workload timing — is drawn from
//! the one `SimRng` the world holds, in event order, so the seed alone fixes the run.
//! Promises: the same seed gives the same sequence on every platform and build; no draw reads
//! OS entropy or time.
//! Never does: hand out a second independent stream (the raft nodes seed their own election
//! timeouts from the run seed through spool-raft's `IdSource`).

/// A deterministic pseudo-random stream (splitmix64).
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; `n` must be non-zero.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "range({lo}, {hi})");
        lo + self.below(hi - lo + 1)
    }

    /// `true` with probability `p` (clamped to `0..=1`).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        // 53 random bits as a float in [0, 1): exact and platform-independent.
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_bounds_hold() {
        let (mut a, mut b) = (SimRng::new(7), SimRng::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let r = a.range(3, 9);
            b.range(3, 9);
            assert!((3..=9).contains(&r));
        }
        assert_ne!(SimRng::new(1).next_u64(), SimRng::new(2).next_u64());
    }
}
