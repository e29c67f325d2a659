//! Which core owns which partition (DESIGN §4): balanced by count, decided when the replica is
//! created, identically on every core.
//!
//! Pure. Every core applies the same committed metadata records in the same order, so every core
//! computes the same map without talking about it: a new partition goes to the core owning the
//! fewest partitions (lowest core id on ties).

use std::collections::BTreeMap;

use crate::TopicPartition;

#[derive(Debug, Clone)]
pub struct ShardMap {
    owners: BTreeMap<TopicPartition, usize>,
    counts: Vec<usize>,
}

impl ShardMap {
    pub fn new(cores: usize) -> Self {
        Self {
            owners: BTreeMap::new(),
            counts: vec![0; cores.max(1)],
        }
    }

    pub fn cores(&self) -> usize {
        self.counts.len()
    }

    /// Assigns `tp` (idempotent: an assigned partition keeps its core).
    pub fn assign(&mut self, tp: &TopicPartition) -> usize {
        if let Some(&core) = self.owners.get(tp) {
            return core;
        }
        let core = (0..self.counts.len())
            .min_by_key(|&c| (self.counts[c], c))
            .unwrap_or(0);
        self.counts[core] += 1;
        self.owners.insert(tp.clone(), core);
        core
    }

    pub fn remove(&mut self, tp: &TopicPartition) {
        if let Some(core) = self.owners.remove(tp) {
            self.counts[core] -= 1;
        }
    }

    pub fn owner(&self, tp: &TopicPartition) -> Option<usize> {
        self.owners.get(tp).copied()
    }

    pub fn partitions_on(&self, core: usize) -> usize {
        self.counts.get(core).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn balanced_and_deterministic(cores in 1usize..16, ops in proptest::collection::vec((0u8..6, 0i32..8, any::<bool>()), 0..200)) {
            let mut a = ShardMap::new(cores);
            let mut b = ShardMap::new(cores);
            for (t, p, add) in ops {
                let tp = TopicPartition::new(format!("t{t}"), p);
                if add { prop_assert_eq!(a.assign(&tp), b.assign(&tp)); } else { a.remove(&tp); b.remove(&tp); }
            }
            let total: usize = (0..cores).map(|c| a.partitions_on(c)).sum();
            prop_assert_eq!(total, a.owners.len());
        }
    }

    #[test]
    fn sixteen_partitions_spread_evenly() {
        let mut m = ShardMap::new(4);
        for p in 0..16 {
            m.assign(&TopicPartition::new("t", p));
        }
        assert!((0..4).all(|c| m.partitions_on(c) == 4));
    }
}
