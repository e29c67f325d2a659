//! The per-core budget for request bytes (`--request-memory-bytes`, split evenly across cores):
//! a client frame's buffer is charged to its core's budget *before* it is allocated, and given
//! back when the last `Bytes` of that frame is dropped — wherever that happens (a produce's batch
//! may be dropped by the core owning its partition, so the budget is an atomic behind an `Arc`,
//! not a `Cell`).
//!
//! Promises:
//! - A frame that fits in what is left is charged at once (the fast path: one atomic update).
//! - A frame that does not fit waits, and its connection stops reading meanwhile, so TCP pushes
//!   back on the client instead of the broker allocating. Waiters on one core queue in order
//!   (a glommio semaphore of one place: the head of the queue is the only one looking); the head
//!   looks again every [`RECHECK_MS`] — memory comes back from any core, and a timer on the
//!   waiting core is cheaper than a cross-thread wake-up on every release. A frame that fits
//!   goes ahead of the queue (a small request is never held behind a large one); so a large
//!   frame can wait for as long as small ones keep the budget too full for it.
//! - A frame larger than the whole per-core budget is refused (its connection is closed with the
//!   reason), so one oversized claim can never wait forever or hold the rest back.
//!
//! Not covered here: responses and fetch buffers, which have a budget of their own built from
//! the same parts ([`crate::response_memory`]), and what decoding allocates beyond the frame.
//! The internal port is not charged.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

/// How often the head of a core's queue looks for memory given back.
pub const RECHECK_MS: u64 = 1;
/// Default `--request-memory-bytes`: this fraction of the machine's memory.
pub const DEFAULT_MEMORY_FRACTION: u64 = 4;

/// One core's budget.
pub struct Budget {
    capacity_bytes: usize,
    available_bytes: AtomicUsize,
}

impl Budget {
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            available_bytes: AtomicUsize::new(capacity_bytes),
        }
    }

    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Bytes charged now.
    pub fn in_use_bytes(&self) -> usize {
        self.capacity_bytes
            .saturating_sub(self.available_bytes.load(Ordering::Relaxed))
    }

    /// Takes `bytes` if that many are left.
    fn try_take(self: &Arc<Self>, bytes: usize) -> Option<Charge> {
        // Relaxed: a count whose only promise is its own bound.
        self.available_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                a.checked_sub(bytes)
            })
            .ok()?;
        Some(Charge {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

/// Bytes charged to a budget, given back on drop.
pub struct Charge {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Charge {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `other` into this charge (both from the same budget): one charge to give back.
    pub fn absorb(&mut self, mut other: Charge) {
        debug_assert!(
            Arc::ptr_eq(&self.budget, &other.budget),
            "charges of two budgets"
        );
        self.bytes += other.bytes;
        other.bytes = 0;
    }

    /// Gives back what is charged beyond `bytes` (a charge taken for the most a read could
    /// bring, once the read has brought less).
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            let excess = self.bytes - bytes;
            self.bytes = bytes;
            self.budget
                .available_bytes
                .fetch_add(excess, Ordering::Relaxed);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let before = self
            .budget
            .available_bytes
            .fetch_add(self.bytes, Ordering::Relaxed);
        debug_assert!(
            before + self.bytes <= self.budget.capacity_bytes,
            "request memory given back twice"
        );
    }
}

/// A frame's buffer together with its charge: the charge goes when the buffer does.
struct Charged<B> {
    buf: B,
    _charge: Charge,
}

impl<B: AsRef<[u8]>> AsRef<[u8]> for Charged<B> {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref()
    }
}

/// The first `frame_bytes` of a pooled frame buffer (filled that far) as `Bytes` that give the
/// charge back, and the buffer to its pool, when the last of them drops.
pub fn pooled_into_bytes(
    buf: spool_protocol::frame_pool::FrameBuf,
    frame_bytes: usize,
    charge: Option<Charge>,
) -> Bytes {
    match charge {
        None => buf.into_frame_bytes(frame_bytes),
        Some(c) => {
            assert!(frame_bytes <= buf.len(), "a frame larger than its buffer");
            Bytes::from_owner(Charged { buf, _charge: c }).slice(..frame_bytes)
        }
    }
}

/// `Bytes` already filled, with a charge that goes when the last of them drops.
struct ChargedBytes {
    bytes: Bytes,
    _charge: Charge,
}

impl AsRef<[u8]> for ChargedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// `bytes` carrying `charge`: it is given back when the last clone or slice of them drops.
pub fn with_charge(bytes: Bytes, charge: Charge) -> Bytes {
    Bytes::from_owner(ChargedBytes {
        bytes,
        _charge: charge,
    })
}

/// This core's budget and its queue of waiters.
pub struct CoreBudget {
    budget: Arc<Budget>,
    /// One place: held by the waiter at the head of the queue.
    turn: glommio::sync::Semaphore,
    waiting: std::cell::Cell<usize>,
}

impl CoreBudget {
    /// A core's budget of `capacity_bytes`, with an empty queue.
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            budget: Arc::new(Budget::new(capacity_bytes)),
            turn: glommio::sync::Semaphore::new(1),
            waiting: std::cell::Cell::new(0),
        }
    }

    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// Charges `bytes` now if they are left, without waiting.
    pub fn try_charge(&self, bytes: usize) -> Option<Charge> {
        self.budget.try_take(bytes)
    }

    /// Connections on this core waiting for memory now.
    pub fn waiting(&self) -> usize {
        self.waiting.get()
    }

    /// Charges `bytes`, waiting for them if they are not there; `Err` (with the reason) when
    /// `bytes` exceeds the whole budget.
    pub async fn charge(&self, bytes: usize) -> Result<Charge, String> {
        if bytes > self.budget.capacity_bytes {
            return Err(format!(
                "a frame of {bytes} bytes is larger than this core's request memory ({} bytes: --request-memory-bytes split across cores)",
                self.budget.capacity_bytes
            ));
        }
        if let Some(c) = self.budget.try_take(bytes) {
            return Ok(c);
        }
        self.waiting.set(self.waiting.get() + 1);
        let _waiting = Waiting(self);
        // Closed never: the semaphore lives as long as the core.
        let _turn = self
            .turn
            .acquire_permit(1)
            .await
            .map_err(|e| format!("request memory queue: {e}"))?;
        loop {
            if let Some(c) = self.budget.try_take(bytes) {
                return Ok(c);
            }
            glommio::timer::sleep(Duration::from_millis(RECHECK_MS)).await;
        }
    }
}

/// Counts a waiter out when its wait ends, however it ends (its connection may be dropped).
struct Waiting<'a>(&'a CoreBudget);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let w = &self.0.waiting;
        w.set(w.get().saturating_sub(1));
    }
}

thread_local! {
    /// Each executor thread is one core: its budget, installed once at start-up.
    static CORE: RefCell<Option<Rc<CoreBudget>>> = const { RefCell::new(None) };
}

/// Installs this core's budget (`per_core_bytes`); called once per core by `runtime`.
pub fn install(per_core_bytes: usize) {
    let core = Rc::new(CoreBudget::new(per_core_bytes));
    CORE.with(|c| *c.borrow_mut() = Some(core));
}

/// This core's budget; `None` where none was installed (unit tests): nothing is charged.
pub fn current() -> Option<Rc<CoreBudget>> {
    CORE.with(|c| c.borrow().clone())
}

/// The machine's memory in bytes, if the system says.
pub fn machine_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf takes no pointers and only reads system configuration.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page_bytes > 0).then(|| pages as u64 * page_bytes as u64)
}

/// Default `--request-memory-bytes`: a quarter of the machine's memory (1 GiB if unknown).
pub fn default_total_bytes() -> u64 {
    machine_memory_bytes().map_or(1 << 30, |m| m / DEFAULT_MEMORY_FRACTION)
}

/// These metric lines for this core (HELP/TYPE in `metrics::header`).
pub fn render(core: usize) -> String {
    let Some(b) = current() else {
        return String::new();
    };
    render_budget("spool_request_memory", "waiting_connections", core, &b)
}

/// A core budget's three metric lines: `{prefix}_bytes` (charged now),
/// `{prefix}_capacity_bytes` and `{prefix}_{waiting}` (waiters queued).
pub fn render_budget(prefix: &str, waiting: &str, core: usize, b: &CoreBudget) -> String {
    format!(
        "{prefix}_bytes{{core=\"{core}\"}} {}\n\
         {prefix}_capacity_bytes{{core=\"{core}\"}} {}\n\
         {prefix}_{waiting}{{core=\"{core}\"}} {}\n",
        b.budget.in_use_bytes(),
        b.budget.capacity_bytes,
        b.waiting()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_executor::run;

    #[test]
    fn charges_wait_for_memory_and_bytes_give_it_back() {
        run(|| async {
            install(100);
            let core = current().expect("installed");
            let a = core.charge(60).await.expect("fits");
            let frame =
                pooled_into_bytes(spool_protocol::frame_pool::FrameBuf::take(60), 60, Some(a));
            let slice = frame.slice(10..20);
            drop(frame);
            // A slice still holds the whole frame's charge.
            assert_eq!(core.budget().in_use_bytes(), 60);
            let waiter = {
                let core = Rc::clone(&core);
                glommio::spawn_local(async move { core.charge(50).await.map(|_| ()) })
            };
            glommio::timer::sleep(Duration::from_millis(5)).await;
            assert_eq!(core.waiting(), 1, "50 more do not fit in 40");
            // A small one goes ahead of the waiting one.
            let small = core.charge(10).await.expect("fits beside");
            drop(small);
            drop(slice);
            waiter.await.expect("charged once the memory came back");
            assert_eq!(core.waiting(), 0);
            assert_eq!(core.budget().in_use_bytes(), 0);
            assert!(core.charge(101).await.is_err(), "larger than the budget");
        });
    }
}
