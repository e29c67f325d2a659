//! One core's periodic work on the partitions it owns (DESIGN §5): making acks=0 appends durable
//! and visible, retention and compaction, the clean close at shutdown, and the per-core metrics
//! text. Each pass takes the partitions out of the map first, so no borrow is held across an
//! `.await`.

use std::rc::Rc;

use crate::local::Local;
use crate::partition::Partition;

fn partitions(local: &Local) -> Vec<Rc<Partition>> {
    local.partitions.borrow().values().cloned().collect()
}

/// Syncs every partition whose acknowledged-but-unsynced tail (acks=0) is not yet visible.
pub async fn flush_partitions(local: &Local) {
    for p in partitions(local) {
        if let Err(e) = p.sync().await {
            tracing::warn!(tp = %p.tp, "periodic flush: {e}");
        }
    }
}

/// Retention on every partition; compaction on `cleanup.policy=compact` ones.
pub async fn enforce_retention(local: &Local, now_ms: i64) {
    for p in partitions(local) {
        if let Err(e) = p.log.enforce_retention(now_ms).await {
            tracing::warn!(tp = %p.tp, "retention: {e}");
        }
        if p.log.config().cleanup_policy == spool_storage::CleanupPolicy::Compact {
            if let Err(e) = p.log.compact(now_ms).await {
                tracing::warn!(tp = %p.tp, "compaction: {e}");
            }
        }
    }
}

/// Closes every partition log cleanly (flush, index, clean marker).
pub async fn close_partitions(local: &Local) {
    let parts: Vec<Rc<Partition>> = local
        .partitions
        .borrow_mut()
        .drain()
        .map(|(_, p)| p)
        .collect();
    for p in parts {
        if let Err(e) = p.log.close().await {
            tracing::error!(tp = %p.tp, "clean close failed: {e}");
        }
    }
}

/// This core's partition metrics, as Prometheus text lines.
pub fn metrics_text(local: &Local) -> String {
    let parts = local.partitions.borrow();
    let log_bytes: u64 = parts.values().map(|p| p.log.size_bytes()).sum();
    local.metrics.render(parts.len(), log_bytes)
}
