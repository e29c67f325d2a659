//! The segment writes one core has in flight, across every log it appends to.
//!
//! Owns one bound: at most [`CORE_WRITES_IN_FLIGHT_MAX`] O_DIRECT writes in flight per core
//! (per executor thread), whatever the number of partitions. Each writer still keeps its own
//! `writes_in_flight_max` (a per-file queue depth); this bound is the core's, because the disk
//! wants a queue depth of a few writes in all, not a few per partition (DESIGN §12).
//!
//! Why: with only the per-partition bound, 1,000 partitions on one core may put 4,000 writes of
//! 256 KiB in flight — a gigabyte queued at the disk and held in staging memory — and
//! `storage-bench` measured 607 MB/s there against 1,389 MB/s for one partition. With a
//! core-wide bound of 4 / 8 / 16 / 32 the same run gave 943 / 1,125 / 1,035 / 1,198 MB/s
//! (BENCHMARKS.md, 2026-12-06). Waiters are served in arrival order (glommio's semaphore is
//! FIFO), so a partition waits behind at most the writes already queued, never starves.
//!
//! A permit is taken after the writer's own slot and held until the write completes; writes
//! always complete (or fail), so no permit is held while waiting for another one that only a
//! waiter could free. Shared-nothing: each thread has its own, with no locks.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use glommio::sync::{Semaphore, StaticPermit};

/// Writes in flight per core, across all its segments.
pub const CORE_WRITES_IN_FLIGHT_MAX: usize = 16;

struct CoreWrites {
    slots: RefCell<Rc<Semaphore>>,
    in_flight: Cell<usize>,
    high_water: Cell<usize>,
}

fn new_slots(limit: usize) -> Rc<Semaphore> {
    let slots = Rc::new(Semaphore::new(limit as u64));
    // glommio's semaphore asserts on drop that nobody waits on it; a thread-local dropped at
    // thread exit could still see a waiter of a leaked task. One clone is kept forever instead
    // (one small allocation per thread).
    std::mem::forget(Rc::clone(&slots));
    slots
}

thread_local! {
    static CORE: CoreWrites = CoreWrites {
        slots: RefCell::new(new_slots(CORE_WRITES_IN_FLIGHT_MAX)),
        in_flight: Cell::new(0),
        high_water: Cell::new(0),
    };
}

/// One write's share of the core's bound; dropping it frees the slot.
pub struct CoreWrite {
    _permit: StaticPermit,
}

impl Drop for CoreWrite {
    fn drop(&mut self) {
        CORE.with(|c| {
            let n = c.in_flight.get();
            assert!(n > 0, "a core write slot freed more often than taken");
            c.in_flight.set(n - 1);
        });
    }
}

/// Waits for a slot of this core's bound.
pub async fn acquire() -> glommio::Result<CoreWrite, ()> {
    let slots = CORE.with(|c| Rc::clone(&c.slots.borrow()));
    let permit = slots.acquire_static_permit(1).await?;
    CORE.with(|c| {
        let n = c.in_flight.get() + 1;
        c.in_flight.set(n);
        c.high_water.set(c.high_water.get().max(n));
    });
    Ok(CoreWrite { _permit: permit })
}

/// Writes this core has in flight now.
pub fn in_flight() -> usize {
    CORE.with(|c| c.in_flight.get())
}

/// The most writes this core has had in flight at once (since the last [`reset_high_water`]).
pub fn high_water() -> usize {
    CORE.with(|c| c.high_water.get())
}

pub fn reset_high_water() {
    CORE.with(|c| c.high_water.set(c.in_flight.get()));
}

/// Sets this core's bound (for tests and benches; the broker keeps the default). Writes already
/// in flight keep the slots they hold in the old bound.
pub fn set_limit(limit: usize) {
    assert!(limit > 0, "a core needs at least one write in flight");
    CORE.with(|c| *c.slots.borrow_mut() = new_slots(limit));
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::config::LogConfig;
    use crate::test_util::run;
    use crate::writer::SegmentWriter;

    /// Twelve segments on one core, each allowed two writes in flight (24 in all), under a core
    /// bound of three: the core never has more than three in flight, reaches three, and every
    /// segment still holds exactly what was appended to it, in order.
    #[test]
    fn the_core_bound_caps_writes_in_flight_across_segments_and_loses_nothing() {
        run(|| async {
            set_limit(3);
            reset_high_water();
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig {
                write_buffer_bytes: 4096,
                writes_in_flight_max: 2,
                preallocate_bytes: 0,
                ..LogConfig::default()
            };
            let mut tasks = Vec::new();
            for s in 0..12u8 {
                let path = dir.path().join(format!("{s}.log"));
                let w = SegmentWriter::open(path.clone(), 0, 0, &[], &config, Rc::default())
                    .await
                    .unwrap();
                tasks.push(glommio::spawn_local(async move {
                    let mut expect = Vec::new();
                    for i in 0..40u64 {
                        // A whole staging buffer per append: each one is a write.
                        let chunk = vec![s.wrapping_mul(31).wrapping_add(i as u8); 4096];
                        w.append(&chunk, i + 1).await.unwrap();
                        expect.extend_from_slice(&chunk);
                        assert!(in_flight() <= 3, "{} writes in flight", in_flight());
                    }
                    assert_eq!(w.seal().await.unwrap(), expect.len() as u64);
                    (path, expect)
                }));
            }
            for t in tasks {
                let (path, expect) = t.await;
                assert_eq!(std::fs::read(&path).unwrap(), expect, "{}", path.display());
            }
            assert_eq!(high_water(), 3, "the bound was reached and never passed");
            assert_eq!(in_flight(), 0, "every slot came back");
            set_limit(CORE_WRITES_IN_FLIGHT_MAX);
        });
    }
}
