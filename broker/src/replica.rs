//! Replica state of one partition on its leader: the in-sync replica set and the high watermark.
//!
//! Pure (DESIGN §3): inputs are log-end reports (the leader's own, in the form its durability
//! makes safe to expose, and each follower's from its fetches); the output is the high watermark,
//! `min(log end of every ISR member)`, which never moves backwards. Consumers read only below it,
//! so nothing they see can vanish in a failover. On a single replica the ISR is the leader alone
//! and the high watermark follows what the leader has made durable.

use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct ReplicaState {
    leader_id: i32,
    /// Log end of each ISR member (the leader included).
    isr_log_end: BTreeMap<i32, u64>,
    high_watermark: u64,
}

impl ReplicaState {
    pub fn new(leader_id: i32, isr: &[i32], start_offset: u64) -> Self {
        let mut isr_log_end: BTreeMap<i32, u64> = isr.iter().map(|&b| (b, start_offset)).collect();
        isr_log_end.insert(leader_id, start_offset);
        Self {
            leader_id,
            isr_log_end,
            high_watermark: start_offset,
        }
    }

    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }

    pub fn isr(&self) -> Vec<i32> {
        self.isr_log_end.keys().copied().collect()
    }

    /// The leader's exposable log end (its durable offset under `durability = fsync`).
    pub fn on_leader_log_end(&mut self, offset: u64) -> u64 {
        let id = self.leader_id;
        self.on_replica_log_end(id, offset)
    }

    /// A replica reported (by fetching) that it has everything below `offset`.
    pub fn on_replica_log_end(&mut self, broker_id: i32, offset: u64) -> u64 {
        if let Some(end) = self.isr_log_end.get_mut(&broker_id) {
            *end = (*end).max(offset);
        }
        let min = self
            .isr_log_end
            .values()
            .copied()
            .min()
            .unwrap_or(self.high_watermark);
        self.high_watermark = self.high_watermark.max(min);
        self.high_watermark
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn high_watermark_is_the_isr_minimum_and_never_decreases(
            reports in proptest::collection::vec((0i32..3, 0u64..1000), 0..60),
        ) {
            let mut r = ReplicaState::new(0, &[0, 1, 2], 0);
            let mut ends = [0u64; 3];
            let mut last = 0;
            for (b, o) in reports {
                ends[b as usize] = ends[b as usize].max(o);
                let hw = if b == 0 { r.on_leader_log_end(o) } else { r.on_replica_log_end(b, o) };
                prop_assert!(hw >= last);
                prop_assert_eq!(hw, *ends.iter().min().unwrap());
                last = hw;
            }
        }
    }

    #[test]
    fn a_single_replica_follows_the_leader() {
        let mut r = ReplicaState::new(7, &[7], 0);
        assert_eq!(r.on_leader_log_end(10), 10);
        assert_eq!(r.isr(), vec![7]);
        assert_eq!(
            r.on_replica_log_end(8, 50),
            10,
            "a non-member's report changes nothing"
        );
    }
}
