//! The per-core budget for the response bytes the broker allocates itself
//! (`--response-memory-bytes`, split evenly across cores): the same parts as the request budget
//! ([`crate::request_memory`]'s `CoreBudget` and `Charge`), a separate pool, so that clients
//! slow to read their responses can at worst hold up other responses, never the reading of
//! requests (a producer keeps producing while consumers stall).
//!
//! What is charged, before it is allocated:
//! - **A cold piece of a fetch** (`net_io`, the `read` way): a file range whose pages are not in
//!   the page cache is read into a buffer of at most `net_io::PIECE_BYTES_MAX`; the piece is
//!   charged before the read and given back once it is written. A connection's writer sends one
//!   response at a time and one piece at a time, so a connection holds at most one piece; a
//!   piece that does not fit waits (holding nothing else, so waits cannot deadlock).
//! - **Cold pieces read ahead** (`net_io`, the `direct` way): up to
//!   `net_io::DIRECT_READ_AHEAD_PIECES` pieces of one response are read at once, each charged
//!   before its read. Only the piece the writer needs next may wait for memory, and only when the
//!   connection holds no other piece; read-ahead takes memory only if it is free now. So a
//!   connection never waits for memory while holding some, and waits cannot deadlock.
//! - **The pipe's bytes read back** when a client cannot take a spliced piece (`net_io`), the
//!   same way.
//! - **A `--fetch-copy` read** (`partition`): the copy is charged for the most it can be (the
//!   partition's `max_bytes`, capped) and shrunk to what it is. A copy that does not fit within
//!   [`COPY_WAIT_MS`] is not made: the partition answers with no records this time (the
//!   consumer's next fetch asks again), because a fetch that waited for long while holding the
//!   copies of its other partitions could deadlock with another doing the same; the short wait
//!   keeps a long poll that keeps finding no memory from spinning.
//!
//! Not charged: memory slices of the log's tail (the log's own buffers, bounded by the log, only
//! referenced), response heads (a few bytes per partition), and metadata-sized answers.
//!
//! How long a response can hold its charge is bounded too: a response that makes no progress
//! for `--connections-max-idle-ms` closes its connection (`connection`), as an idle one would be.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

use crate::request_memory::{with_charge, Charge, CoreBudget};

/// Default `--response-memory-bytes`: this fraction of the machine's memory (the request budget
/// takes a quarter).
pub const DEFAULT_MEMORY_FRACTION: u64 = 8;
/// The longest a `--fetch-copy` read waits for memory before it answers no records.
pub const COPY_WAIT_MS: u64 = 10;

thread_local! {
    /// Each executor thread is one core: its response budget, installed once at start-up.
    static CORE: RefCell<Option<Rc<CoreBudget>>> = const { RefCell::new(None) };
}

/// Installs this core's response budget (`per_core_bytes`); called once per core by `runtime`.
pub fn install(per_core_bytes: usize) {
    let core = Rc::new(CoreBudget::new(per_core_bytes));
    CORE.with(|c| *c.borrow_mut() = Some(core));
}

/// This core's response budget; `None` where none was installed (unit tests): nothing is
/// charged.
pub fn current() -> Option<Rc<CoreBudget>> {
    CORE.with(|c| c.borrow().clone())
}

/// Charges `bytes` (at most the whole budget: a piece is never larger than a core's share, which
/// the configuration checks, but a charge must never be refused for its size), waiting for
/// them; `None` where no budget is installed.
pub async fn charge(bytes: usize) -> std::io::Result<Option<Charge>> {
    let Some(core) = current() else {
        return Ok(None);
    };
    let bytes = bytes.min(core.budget().capacity_bytes());
    core.charge(bytes)
        .await
        .map(Some)
        .map_err(std::io::Error::other)
}

/// Charges `bytes` (capped as [`charge`] caps them) only if they are left now: `Some(None)`
/// where no budget is installed, `None` when they do not fit.
pub fn try_charge(bytes: usize) -> Option<Option<Charge>> {
    let Some(core) = current() else {
        return Some(None);
    };
    let bytes = bytes.min(core.budget().capacity_bytes());
    core.try_charge(bytes).map(Some)
}

/// Runs `read` (a copy of about `most_bytes`: the copy's limit, which one whole batch may pass)
/// charged to this core's response budget, the charge riding on the bytes it returns. `None`
/// (nothing kept) when the charge does not fit now, or the copy came out larger and the rest
/// does not fit either. Without a budget (unit tests) the copy is simply made.
pub async fn charged_copy<E>(
    most_bytes: usize,
    read: impl std::future::Future<Output = Result<Bytes, E>>,
) -> Option<Result<Bytes, E>> {
    let Some(core) = current() else {
        return Some(read.await);
    };
    let want = most_bytes.clamp(1, core.budget().capacity_bytes());
    let mut charge = match core.try_charge(want) {
        Some(c) => c,
        // A short wait, never a long one (the module doc says why): long enough that a long
        // poll answered empty for want of memory, which then asks again, does not spin the core.
        None => {
            futures_lite::future::or(async { core.charge(want).await.ok() }, async {
                glommio::timer::sleep(std::time::Duration::from_millis(COPY_WAIT_MS)).await;
                None
            })
            .await?
        }
    };
    let bytes = match read.await {
        Ok(b) => b,
        Err(e) => return Some(Err(e)),
    };
    if bytes.len() > charge.bytes() {
        charge.absorb(core.try_charge(bytes.len() - charge.bytes())?);
    } else {
        charge.shrink_to(bytes.len());
    }
    Some(Ok(with_charge(bytes, charge)))
}

/// Default `--response-memory-bytes`: an eighth of the machine's memory (512 MiB if unknown).
pub fn default_total_bytes() -> u64 {
    crate::request_memory::machine_memory_bytes().map_or(512 << 20, |m| m / DEFAULT_MEMORY_FRACTION)
}

/// These metric lines for this core (HELP/TYPE in `metrics::header`).
pub fn render(core: usize) -> String {
    let Some(b) = current() else {
        return String::new();
    };
    crate::request_memory::render_budget("spool_response_memory", "waiting", core, &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_executor::run;
    use std::time::Duration;

    #[test]
    fn a_response_charge_waits_shrinks_and_rides_on_its_bytes() {
        run(|| async {
            assert!(charge(10).await.expect("no budget").is_none());
            install(100);
            let core = current().expect("installed");
            // Larger than the budget: charged as the whole budget, not refused.
            let whole = charge(1000).await.expect("charged").expect("installed");
            assert_eq!(whole.bytes(), 100);
            assert!(core.try_charge(1).is_none(), "nothing left");
            let waiter =
                glommio::spawn_local(async { charge(30).await.map(|c| c.map(|c| c.bytes())) });
            glommio::timer::sleep(Duration::from_millis(5)).await;
            assert_eq!(core.waiting(), 1, "30 more do not fit in 0");
            let mut whole = whole;
            whole.shrink_to(60);
            assert_eq!(core.budget().in_use_bytes(), 60);
            assert_eq!(waiter.await.expect("charged").expect("installed"), 30);
            // A charge carried by bytes goes when the last slice of them does.
            let bytes =
                crate::request_memory::with_charge(bytes::Bytes::from(vec![1u8; 60]), whole);
            let slice = bytes.slice(1..2);
            drop(bytes);
            assert_eq!(core.budget().in_use_bytes(), 60);
            drop(slice);
            assert_eq!(core.budget().in_use_bytes(), 0);
        });
    }
}
