//! Choosing a partition: Kafka's default partitioner, byte for byte.
//!
//! - Keyed records: `(murmur2(key) & 0x7fffffff) % partitions`, with Kafka's murmur2 (seed
//!   0x9747b28c, m 0x5bd1e995, r 24), so a key lands where Java and librdkafka (`murmur2_random`)
//!   clients put it. The test vectors from DESIGN §6 are unit tests below.
//! - Keyless records: sticky partitioning (KIP-480 / KIP-794): stay on one partition until about
//!   `batch_bytes` have gone to it, then switch to another partition with a leader, so keyless
//!   records fill whole batches instead of spraying tiny ones.

use crate::client::types::TopicMap;

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit result.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`.
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record. `partitions` must be non-zero.
pub fn partition_for_key(key: &[u8], partitions: usize) -> i32 {
    debug_assert!(partitions > 0);
    // Partition counts fit an i32 (the wire type), and the result is < partitions.
    (to_positive(murmur2(key)) as u64 % partitions.max(1) as u64) as i32
}

/// Sticky choice for keyless records, per topic.
#[derive(Debug)]
pub struct StickyPartitioner {
    /// topic → (current partition, bytes sent to it since it was chosen).
    current: TopicMap<String, (i32, usize)>,
    switch_after_bytes: usize,
    rng: u64,
}

impl StickyPartitioner {
    /// `switch_after_bytes` is the producer's `batch_bytes`; `seed` makes choices reproducible.
    pub fn new(switch_after_bytes: usize, seed: u64) -> Self {
        Self {
            current: TopicMap::default(),
            switch_after_bytes: switch_after_bytes.max(1),
            rng: seed | 1,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: plenty for spreading partitions.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// The partition for a keyless record of `record_bytes`. `available` lists partitions with a
    /// leader (preferred), ascending; `partitions` is the topic's count, used when none has a
    /// leader. Called per record: nothing is allocated unless the choice changes.
    pub fn partition(
        &mut self,
        topic: &str,
        available: &[i32],
        partitions: usize,
        record_bytes: usize,
    ) -> i32 {
        debug_assert!(available.is_sorted(), "available partitions ascending");
        let valid = |p: i32| {
            if available.is_empty() {
                (p as usize) < partitions
            } else {
                available.binary_search(&p).is_ok()
            }
        };
        let reuse = match self.current.get(topic) {
            Some(&(p, sent)) => valid(p) && sent < self.switch_after_bytes,
            None => false,
        };
        if !reuse {
            let previous = self.current.get(topic).map(|&(p, _)| p);
            let choice = self.choose(available, partitions, previous);
            self.current.insert(topic.to_owned(), (choice, 0));
        }
        let Some(entry) = self.current.get_mut(topic) else {
            unreachable!("the topic's choice was kept or made just above");
        };
        entry.1 += record_bytes;
        entry.0
    }

    fn choose(&mut self, available: &[i32], partitions: usize, previous: Option<i32>) -> i32 {
        let mut pool: Vec<i32> = if available.is_empty() {
            (0..partitions.max(1) as i32).collect()
        } else {
            available.to_vec()
        };
        pool.sort_unstable();
        pool.dedup();
        // Prefer a partition other than the one just left, when there is one.
        let others: Vec<i32> = pool
            .iter()
            .copied()
            .filter(|p| Some(*p) != previous)
            .collect();
        let from = if others.is_empty() { &pool } else { &others };
        from[(self.next_random() % from.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own test vectors (`UtilsTest.testMurmur2`), as listed in DESIGN §6.
    #[test]
    fn murmur2_matches_kafka_test_vectors() {
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    #[test]
    fn keyed_partition_is_positive_murmur_mod_count() {
        // -973932308 & 0x7fffffff = 1173551340; % 7 = 1173551340 - 7*167650191 = 3
        assert_eq!(to_positive(-973_932_308), 1_173_551_340);
        assert_eq!(partition_for_key(b"21", 7), 3);
        for n in 1..50 {
            let p = partition_for_key(b"foobar", n);
            assert!((0..n as i32).contains(&p));
        }
    }

    #[test]
    fn sticky_stays_until_batch_bytes_then_moves() {
        let mut s = StickyPartitioner::new(100, 42);
        let first = s.partition("t", &[0, 1, 2, 3], 4, 40);
        assert_eq!(s.partition("t", &[0, 1, 2, 3], 4, 40), first);
        assert_eq!(s.partition("t", &[0, 1, 2, 3], 4, 40), first);
        // 120 bytes sent: the next record switches.
        let next = s.partition("t", &[0, 1, 2, 3], 4, 40);
        assert_ne!(next, first);
    }

    #[test]
    fn sticky_prefers_partitions_with_leaders() {
        let mut s = StickyPartitioner::new(1, 7);
        for _ in 0..100 {
            let p = s.partition("t", &[2, 5], 8, 10);
            assert!(p == 2 || p == 5);
        }
        // With no leader anywhere it still picks a valid partition.
        assert!((0..3).contains(&s.partition("u", &[], 3, 1)));
        // Duplicates in a (broker-supplied) list cannot make it spin.
        for _ in 0..10 {
            assert_eq!(s.partition("v", &[4, 4, 4], 8, 10), 4);
        }
    }
}
