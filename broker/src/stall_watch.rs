//! Names the step a core is stuck in. Applying committed metadata is a chain of awaits (a
//! partition's role change waits for its append turn, a deposed leader syncs, a group
//! coordinator unloads); the controller publishes the next records only once every core has
//! applied these, so one await that never ends freezes every core's view of the cluster while
//! raft keeps committing. A follower's fetch session is the same kind of chain: its next fetch
//! waits until every partition of the last answer is appended and synced, so one apply that
//! never ends stops that follower replicating anything from that leader. Such a stall must be
//! visible in the log, by name, not inferred.
//!
//! Owns: [`watch`], which awaits a future and, if it is still pending after
//! [`STALL_WARN_MS`], logs a warning naming it — then keeps waiting (a slow disk is not an
//! error), and logs again, with the time it took, when it ends. Never does: cancel or time out
//! the future, or change what it returns.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a watched step may take before it is reported as stalled.
pub const STALL_WARN_MS: u64 = 5_000;

/// Awaits `step`; reports it when it takes longer than [`STALL_WARN_MS`] (module docs).
pub async fn watch<T>(what: impl Fn() -> String, step: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let mut step = std::pin::pin!(step);
    let first = futures_lite::future::or(async { Some((&mut step).await) }, async {
        glommio::timer::sleep(Duration::from_millis(STALL_WARN_MS)).await;
        None
    })
    .await;
    if let Some(out) = first {
        return out;
    }
    tracing::warn!(step = %what(), waited_ms = STALL_WARN_MS, "a step is stalled; still waiting");
    let out = step.await;
    tracing::warn!(step = %what(), took_ms = started.elapsed().as_millis() as u64, "a stalled step finished");
    out
}
