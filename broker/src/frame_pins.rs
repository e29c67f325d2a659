//! The per-core bound on request frames that partitions' tail caches keep alive (issue 19
//! item 3: no copy of a produced batch besides the one into the O_DIRECT staging).
//!
//! A leader appends a client's batch without copying it
//! (`spool_storage::PartitionLog::append_checked`): its tail cache keeps a slice of the request
//! frame, and a slice keeps the whole frame alive — and charged to the request budget of the
//! core that read it ([`crate::request_memory`]) — until the tail evicts the batch and every
//! fetch answer holding it is sent. Unbounded, tails could come to hold that whole budget, and a
//! connection waiting for request memory would wait on appends that only new requests bring.
//!
//! So a frame's batches are kept only while the frames kept this way on the reading core stay
//! within its bound ([`bound_for`]: a quarter of the core's request budget, and never so much
//! that the largest frame no longer fits beside them). A frame past the bound has each of its
//! batches copied out ([`shares`]; the copy every leader append made before), so that frame goes
//! when its request ends and only the copies stay, bounded per partition by the tail cache.
//!
//! Accounting is per frame and exact: a frame reserves its bytes once, however many partitions'
//! batches it carries, and gives them back when the last of its batches drops, on whichever core
//! that happens (a reservation shared by the frame's batches, on an atomic). Frame buffers are
//! rounded up to a power of two by the frame pool, so the memory behind the reserved bytes is at
//! most twice as much.
//!
//! Other appends (a coordinator's markers and records, a group's offsets) build batches of their
//! own, which pin nothing but themselves; only the fronts' frames come through here.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// A request's partitions by topic, each with its records or the error they already have.
pub type Shares<E> = Vec<(String, Vec<(i32, Result<Bytes, E>)>)>;

/// The bound where no request budget was installed (unit tests), per core.
pub const UNINSTALLED_BOUND_BYTES: usize = 64 << 20;

/// One core's reservations.
#[derive(Debug)]
pub struct PinBudget {
    bound_bytes: usize,
    pinned_bytes: AtomicUsize,
    /// Frames whose batches were copied out because the bound was reached.
    copied_frames: AtomicU64,
}

impl PinBudget {
    pub fn new(bound_bytes: usize) -> Self {
        Self {
            bound_bytes,
            pinned_bytes: AtomicUsize::new(0),
            copied_frames: AtomicU64::new(0),
        }
    }

    pub fn copied_frames(&self) -> u64 {
        self.copied_frames.load(Ordering::Relaxed)
    }

    /// Bytes of frames whose batches may be kept now.
    pub fn pinned_bytes(&self) -> usize {
        self.pinned_bytes.load(Ordering::Relaxed)
    }

    pub fn bound_bytes(&self) -> usize {
        self.bound_bytes
    }

    /// Reserves `frame_bytes` if they fit within the bound.
    fn reserve(self: &Arc<Self>, frame_bytes: usize) -> Option<Arc<FramePin>> {
        // Relaxed: a count whose only promise is its own bound.
        self.pinned_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                p.checked_add(frame_bytes)
                    .filter(|&after| after <= self.bound_bytes)
            })
            .ok()?;
        Some(Arc::new(FramePin {
            budget: Arc::clone(self),
            frame_bytes,
        }))
    }
}

/// The bound for a core whose request budget is `request_budget_bytes`, with frames of at most
/// `max_frame_bytes`: a quarter of the budget, less whatever would leave the largest frame no
/// room beside the kept ones.
pub fn bound_for(request_budget_bytes: usize, max_frame_bytes: usize) -> usize {
    (request_budget_bytes / 4).min(request_budget_bytes.saturating_sub(max_frame_bytes))
}

/// One frame's reservation, given back when the last batch holding it drops.
#[derive(Debug)]
struct FramePin {
    budget: Arc<PinBudget>,
    frame_bytes: usize,
}

impl Drop for FramePin {
    fn drop(&mut self) {
        let before = self
            .budget
            .pinned_bytes
            .fetch_sub(self.frame_bytes, Ordering::Relaxed);
        // Pair assertion: only what was reserved is given back.
        debug_assert!(before >= self.frame_bytes, "a frame pin given back twice");
    }
}

/// A kept batch: the frame's slice, with the frame's reservation.
struct Kept {
    slice: Bytes,
    _pin: Arc<FramePin>,
}

impl AsRef<[u8]> for Kept {
    fn as_ref(&self) -> &[u8] {
        &self.slice
    }
}

thread_local! {
    /// Each executor thread is one core: its bound, installed once at start-up.
    static CORE: RefCell<Option<Arc<PinBudget>>> = const { RefCell::new(None) };
}

/// Installs this core's bound; called once per core by `runtime`, beside the request budget.
pub fn install(bound_bytes: usize) {
    CORE.with(|c| *c.borrow_mut() = Some(Arc::new(PinBudget::new(bound_bytes))));
}

/// This core's budget ([`UNINSTALLED_BOUND_BYTES`] where none was installed).
pub fn current() -> Arc<PinBudget> {
    CORE.with(|c| {
        Arc::clone(
            c.borrow_mut()
                .get_or_insert_with(|| Arc::new(PinBudget::new(UNINSTALLED_BOUND_BYTES))),
        )
    })
}

/// The produce `topics` of one request frame of `frame_bytes`, each partition's records made
/// safe to keep: slices carrying the frame's reservation when it fits this core's bound,
/// copies of their own otherwise.
pub fn shares<E>(frame_bytes: usize, topics: Shares<E>) -> Shares<E> {
    shares_within(&current(), frame_bytes, topics)
}

fn shares_within<E>(
    budget: &Arc<PinBudget>,
    frame_bytes: usize,
    mut topics: Shares<E>,
) -> Shares<E> {
    let pin = budget.reserve(frame_bytes);
    if pin.is_none() {
        budget.copied_frames.fetch_add(1, Ordering::Relaxed);
    }
    for (_, partitions) in &mut topics {
        for (_, records) in partitions.iter_mut() {
            if let Ok(slice) = records {
                *slice = match &pin {
                    Some(pin) => Bytes::from_owner(Kept {
                        slice: std::mem::take(slice),
                        _pin: Arc::clone(pin),
                    }),
                    None => Bytes::copy_from_slice(slice),
                };
            }
        }
    }
    topics
}

/// This core's metric lines: the frame bytes kept for tail caches now, the bound, and the
/// frames copied out because the bound was reached.
pub fn render(core: usize) -> String {
    let b = current();
    format!(
        "spool_request_memory_kept_bytes{{core=\"{core}\"}} {}\n\
         spool_request_memory_kept_bound_bytes{{core=\"{core}\"}} {}\n\
         spool_produce_frames_copied_total{{core=\"{core}\"}} {}\n",
        b.pinned_bytes(),
        b.bound_bytes(),
        b.copied_frames()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::ProduceResult;
    use spool_protocol::ErrorCode;

    fn request(frame: &Bytes) -> Shares<ProduceResult> {
        vec![(
            "t".to_string(),
            vec![
                (0, Ok(frame.slice(0..10))),
                (1, Ok(frame.slice(10..30))),
                (
                    2,
                    Err(ProduceResult::error(
                        ErrorCode::CorruptMessage,
                        "bad".to_string(),
                    )),
                ),
            ],
        )]
    }

    fn records(shares: &Shares<ProduceResult>) -> Vec<Bytes> {
        shares[0]
            .1
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok().cloned())
            .collect()
    }

    #[test]
    fn a_frame_within_the_bound_is_kept_once_and_given_back_by_its_last_batch() {
        let budget = Arc::new(PinBudget::new(100));
        let frame = Bytes::from((0u8..64).collect::<Vec<_>>());
        let kept = records(&shares_within(&budget, 64, request(&frame)));
        assert_eq!(budget.pinned_bytes(), 64, "one reservation for the frame");
        assert_eq!(kept[0], frame.slice(0..10));
        assert_eq!(kept[1].as_ptr(), frame[10..].as_ptr(), "kept, not copied");
        // A second frame of 64 does not fit beside the first: its batches are copies.
        let other = Bytes::from(vec![9u8; 64]);
        let copied = records(&shares_within(&budget, 64, request(&other)));
        assert_eq!(budget.pinned_bytes(), 64);
        assert_eq!(budget.copied_frames(), 1);
        assert_eq!(copied[1], other.slice(10..30));
        assert_ne!(copied[1].as_ptr(), other[10..].as_ptr(), "copied out");
        // A slice of a kept batch (a tail's body) holds the reservation too.
        let body = kept[1].slice(4..);
        drop(kept);
        assert_eq!(budget.pinned_bytes(), 64, "still held by a slice");
        drop(body);
        assert_eq!(budget.pinned_bytes(), 0, "given back by the last batch");
        let again = records(&shares_within(&budget, 64, request(&other)));
        assert_eq!(again[1].as_ptr(), other[10..].as_ptr(), "room again");
        assert_eq!(budget.pinned_bytes(), 64);
    }

    #[test]
    fn the_bound_leaves_room_for_the_largest_frame() {
        assert_eq!(bound_for(1000, 100), 250);
        assert_eq!(bound_for(1000, 900), 100);
        assert_eq!(bound_for(1000, 2000), 0);
        let budget = Arc::new(PinBudget::new(0));
        let frame = Bytes::from(vec![1u8; 30]);
        let copied = records(&shares_within(&budget, 30, request(&frame)));
        assert_ne!(
            copied[0].as_ptr(),
            frame.as_ptr(),
            "a zero bound keeps nothing"
        );
        assert_eq!(budget.pinned_bytes(), 0);
    }
}
