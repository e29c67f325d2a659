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
    let mut syncs = spool_storage::sync_probe::SyncStats::default();
    for p in parts.values() {
        syncs.add(&p.log.sync_stats());
    }
    let mut text = local.metrics.render(parts.len(), log_bytes, &syncs);
    text.push_str(&replication_text(local.core, &parts));
    text
}

/// What this core's leaders see of replication: partitions led, under-replicated and under
/// min ISR (by the leader's committed ISR), and each follower's lag in messages and in ms.
fn replication_text(
    core: usize,
    parts: &std::collections::HashMap<
        crate::requests::TopicPartition,
        std::rc::Rc<crate::partition::Partition>,
    >,
) -> String {
    use std::fmt::Write;
    let now_ms = crate::clock::monotonic_ms();
    let (mut led, mut under_replicated, mut under_min_isr) = (0, 0, 0);
    let mut lags = String::new();
    let mut sorted: Vec<_> = parts.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    for (tp, p) in sorted {
        let Some((under, below_min)) = p.replication_health() else {
            continue;
        };
        led += 1;
        under_replicated += u64::from(under);
        under_min_isr += u64::from(below_min);
        for (follower, messages, ms) in p.follower_lags(now_ms) {
            let labels = format!(
                "topic=\"{}\",partition=\"{}\",follower=\"{follower}\"",
                tp.topic, tp.partition
            );
            let _ = writeln!(lags, "spool_replica_lag_messages{{{labels}}} {messages}");
            let _ = writeln!(lags, "spool_replica_lag_ms{{{labels}}} {ms}");
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "spool_leader_partitions{{core=\"{core}\"}} {led}");
    let _ = writeln!(
        out,
        "spool_leader_under_replicated_partitions{{core=\"{core}\"}} {under_replicated}"
    );
    let _ = writeln!(
        out,
        "spool_leader_under_min_isr_partitions{{core=\"{core}\"}} {under_min_isr}"
    );
    out.push_str(&lags);
    out
}
