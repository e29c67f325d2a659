//! Where a producer keeps each queued record's delivery slot until its report comes back.
//!
//! Record ids come from [`crate::client::producer::ProducerCore::send`] in increasing order, so
//! the slots live in a ring indexed by `id - first_id`: an insert is a push at the back, a
//! removal a take by index, with the front popped as it completes. This replaced a
//! `HashMap<RecordId, _>` whose hashing, inserts and removals were, with the allocations, the
//! largest cost per record in spool-loadgen's profile (BENCHMARKS.md, issue 19).
//!
//! Memory: one slot per id from the oldest unfinished record to the newest, which the
//! producer's buffer bounds (every record reserves its bytes until its report).

use std::collections::VecDeque;

use crate::client::accumulator::RecordId;

#[derive(Debug)]
pub struct Deliveries<T> {
    /// The id of `slots[0]`.
    first_id: RecordId,
    slots: VecDeque<Option<T>>,
    live: usize,
}

impl<T> Default for Deliveries<T> {
    fn default() -> Self {
        Self {
            first_id: 0,
            slots: VecDeque::new(),
            live: 0,
        }
    }
}

impl<T> Deliveries<T> {
    /// Keeps `slot` for `id`, which must be newer than every id inserted before.
    pub fn insert(&mut self, id: RecordId, slot: T) {
        if self.slots.is_empty() && self.live == 0 {
            self.first_id = id;
        }
        let end = self.first_id + self.slots.len() as u64;
        assert!(
            id >= end,
            "record id {id} inserted after {end}: ids only grow"
        );
        // Ids that got no slot (none, today) are holes.
        for _ in end..id {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(slot));
        self.live += 1;
    }

    /// Takes the slot of `id`, if it has one still.
    pub fn remove(&mut self, id: RecordId) -> Option<T> {
        let index = usize::try_from(id.checked_sub(self.first_id)?).ok()?;
        let slot = self.slots.get_mut(index)?.take()?;
        self.live -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.first_id += 1;
        }
        Some(slot)
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn len(&self) -> usize {
        self.live
    }

    /// Takes every slot still held, oldest first.
    pub fn drain(&mut self) -> Vec<T> {
        let out: Vec<T> = self.slots.drain(..).flatten().collect();
        self.first_id += out.len() as u64;
        self.live = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a map: any interleaving of in-order inserts and any-order removals gives the
        /// same slots back, and the ring starts at the oldest live id.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..3), 1..300)) {
            let mut d = Deliveries::default();
            let mut model = BTreeMap::new();
            let mut next_id = 5u64;
            for (insert, pick, gap) in ops {
                if insert {
                    next_id += gap;
                    d.insert(next_id, next_id * 10);
                    model.insert(next_id, next_id * 10);
                    next_id += 1;
                } else {
                    let id = next_id.saturating_sub(pick + 1);
                    prop_assert_eq!(d.remove(id), model.remove(&id));
                }
                prop_assert_eq!(d.len(), model.len());
                prop_assert_eq!(d.is_empty(), model.is_empty());
                // The ring starts at the oldest live id: finished ones do not pile up.
                match model.keys().next() {
                    Some(lo) => prop_assert_eq!(d.first_id, *lo),
                    None => prop_assert!(d.slots.is_empty()),
                }
            }
            let rest: Vec<u64> = model.values().copied().collect();
            prop_assert_eq!(d.drain(), rest);
            prop_assert!(d.is_empty());
        }
    }

    #[test]
    fn an_unknown_or_finished_id_has_no_slot() {
        let mut d = Deliveries::default();
        d.insert(3, "a");
        d.insert(4, "b");
        assert_eq!(d.remove(2), None);
        assert_eq!(d.remove(9), None);
        assert_eq!(d.remove(4), Some("b"));
        assert_eq!(d.remove(4), None);
        assert_eq!(d.remove(3), Some("a"));
        assert!(d.is_empty());
        d.insert(10, "c");
        assert_eq!(d.remove(10), Some("c"));
    }
}
