//! [`IdSource`]: the controller's only source of "random" values — a seeded splitmix64
//! stream that makes new topic ids and raft election timeouts.
//!
//! Owns: turning a caller's `seed` (plus a stream label, so one seed feeds several independent
//! streams) into a reproducible sequence of 64-bit values.
//! Promises: the same `(seed, stream)` yields the same sequence on every platform and in every
//! run, so a simulator that fixes the seed replays a run exactly; different seeds or streams
//! yield unrelated sequences.
//! Never does: read a clock or OS entropy. The broker draws the seed from OS entropy once at
//! start-up and passes it in; the simulator passes a fixed one.
//!
//! Written by hand rather than taken from `rand`: splitmix64 is a dozen lines, needs no new
//! dependency, and its output is fixed by its definition, not by a crate version. It is not
//! cryptographic — topic ids need to be unique, not unguessable.

use crate::uuid128::Uuid128;

/// splitmix64's increment (2^64 / φ), per Steele, Lea & Flood, "Fast splittable pseudorandom
/// number generators" (2014).
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finaliser: a bijection on u64 that spreads every input bit over the output.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Stream label: the topic ids a controller makes.
pub const STREAM_TOPIC_IDS: u64 = 1;
/// Stream label: a raft node's randomized election timeouts.
pub const STREAM_ELECTION_TIMEOUTS: u64 = 2;

/// A seeded, deterministic stream of 64-bit values (splitmix64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdSource {
    state: u64,
}

impl IdSource {
    /// The stream labelled `stream` (e.g. `[STREAM_ELECTION_TIMEOUTS, node_id, incarnation]`)
    /// of the run seeded with `seed`. Every label part is hashed into the starting state in
    /// order, so node 1's election timeouts and node 2's are unrelated even when both nodes are
    /// given the same seed, and a restarted node (new incarnation) does not replay its old draws.
    pub fn new(seed: u64, stream: &[u64]) -> Self {
        let state = stream.iter().fold(mix64(seed), |h, part| {
            mix64(h ^ mix64(part.wrapping_add(GOLDEN_GAMMA)))
        });
        IdSource { state }
    }

    /// The next value of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A value in `lo..hi` (`lo` when the range is empty). Uses the high bits of a 64×64-bit
    /// product (Lemire's method): the bias for the small ranges used here (tens of ticks) is
    /// below 2^-58, far below anything a test could see.
    pub fn in_range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        let scaled = (u128::from(self.next_u64()) * u128::from(span)) >> 64;
        // `scaled < span`, so it fits back in a u64.
        lo + scaled as u64
    }

    /// The next 128-bit value (may be zero; callers that need a non-zero id check).
    pub fn next_uuid(&mut self) -> Uuid128 {
        let high = self.next_u64();
        let low = self.next_u64();
        Uuid128 { high, low }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_stream_give_the_same_sequence() {
        let mut a = IdSource::new(42, &[7]);
        let mut b = IdSource::new(42, &[7]);
        let xs: Vec<u64> = (0..64).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..64).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
    }

    #[test]
    fn different_seeds_or_streams_give_different_sequences() {
        let first = |seed, stream: &[u64]| {
            let mut s = IdSource::new(seed, stream);
            (0..8).map(|_| s.next_u64()).collect::<Vec<_>>()
        };
        assert_ne!(first(1, &[0]), first(2, &[0]));
        assert_ne!(first(1, &[0]), first(1, &[1]));
        assert_ne!(first(1, &[]), first(1, &[0]));
        // Label parts are ordered, and seed and label are not interchangeable.
        assert_ne!(first(1, &[2, 3]), first(1, &[3, 2]));
        assert_ne!(first(1, &[2]), first(2, &[1]));
    }

    #[test]
    fn splitmix64_matches_its_reference_output() {
        // Reference values of splitmix64 seeded with 0 (state += gamma, then mix), as in
        // Vigna's splitmix64.c: the generator is the published one, not a look-alike.
        let mut s = IdSource { state: 0 };
        assert_eq!(s.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(s.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(s.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn in_range_stays_in_range_and_covers_it() {
        let mut s = IdSource::new(9, &[9]);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = s.in_range(10, 20);
            assert!((10..20).contains(&v), "{v} outside 10..20");
            seen[(v - 10) as usize] = true;
        }
        assert!(
            seen.iter().all(|s| *s),
            "some value of 10..20 never drawn: {seen:?}"
        );
        assert_eq!(s.in_range(5, 5), 5);
        assert_eq!(s.in_range(5, 3), 5);
    }
}
