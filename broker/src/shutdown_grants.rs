//! The active controller's count of controlled shutdowns it let through — heartbeats it answered
//! `should_shutdown` — for `spool_controlled_shutdowns_total` (DESIGN §10). A broker keeps
//! heartbeating after the answer until it stops, so each broker epoch counts once.
//!
//! Owns: the latest counted epoch per broker id and the total. Promises: bounded by the number of
//! broker ids that ever asked (one entry each); the total never decreases. Never does: decide
//! whether a broker may stop (`spool_raft::controlled_shutdown::should_shut_down` does).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct ShutdownGrants {
    counted_epoch: RefCell<BTreeMap<i32, i64>>,
    total: Cell<u64>,
}

impl ShutdownGrants {
    /// `broker_id` at `broker_epoch` was told it may stop; returns whether this is the first
    /// time for that epoch (the caller logs it then).
    pub fn record(&self, broker_id: i32, broker_epoch: i64) -> bool {
        let mut counted = self.counted_epoch.borrow_mut();
        if counted.get(&broker_id).is_some_and(|e| *e >= broker_epoch) {
            return false;
        }
        counted.insert(broker_id, broker_epoch);
        self.total.set(self.total.get().saturating_add(1));
        true
    }

    pub fn total(&self) -> u64 {
        self.total.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_broker_epoch_counts_once() {
        let g = ShutdownGrants::default();
        assert!(g.record(1, 10));
        assert!(!g.record(1, 10), "the heartbeats after the answer");
        assert!(g.record(2, 11));
        assert!(g.record(1, 12), "the restarted broker's next shutdown");
        assert!(!g.record(1, 10), "a late heartbeat of an old epoch");
        assert_eq!(g.total(), 3);
    }
}
