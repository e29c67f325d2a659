//! One core's share of a follower's fetch (DESIGN §7): the partitions of one `ReplicaFetch` that
//! this core owns, each served by its [`Partition`] in request order, with the fetch's long
//! poll.
//!
//! Owns: the byte budget across the share's partitions ([`REPLICA_FETCH_PARTITION_BYTES_MAX`]
//! each, `max_bytes` in all; a partition past the budget is still served — its follower's
//! progress counts — but sends no records), and the wait: with no records to send, no error and
//! `max_wait_ms` left, the share waits for one of its partitions to grow, its role to change, the
//! deadline or the core's stop, then serves once more. The wait is one future on the watchers the
//! partitions already keep: no task per partition.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use spool_protocol::ErrorCode;

use crate::local::Local;
use crate::partition::Partition;
use crate::requests::{ReplicaFetchRead, ReplicaFetchShare};

/// Record bytes one partition sends in one fetch answer (Kafka's `replica.fetch.max.bytes`).
pub const REPLICA_FETCH_PARTITION_BYTES_MAX: usize = 1 << 20;

/// The registered, unfenced brokers' epochs (a fetch's broker epoch is checked against them).
pub fn broker_epochs(local: &Local) -> BTreeMap<i32, i64> {
    local
        .image
        .borrow()
        .brokers()
        .filter(|b| !b.fenced)
        .map(|b| (b.broker_id, b.broker_epoch))
        .collect()
}

/// Serves `share` on this core (module docs).
pub async fn serve(local: &Local, share: ReplicaFetchShare) -> Vec<ReplicaFetchRead> {
    let parts: Vec<Option<Rc<Partition>>> = share
        .partitions
        .iter()
        .map(|(tp, _)| local.partition(tp))
        .collect();
    let deadline_ms = crate::clock::monotonic_ms() + share.max_wait_ms;
    loop {
        let epochs = broker_epochs(local);
        let now_ms = crate::clock::monotonic_ms();
        let mut reads = Vec::with_capacity(parts.len());
        let mut budget = share.max_bytes;
        for (part, (_, fetch)) in parts.iter().zip(&share.partitions) {
            let read = match part {
                Some(p) => {
                    let max_bytes = budget.min(REPLICA_FETCH_PARTITION_BYTES_MAX);
                    p.serve_replica_fetch(fetch, &epochs, max_bytes, now_ms)
                        .await
                }
                None => ReplicaFetchRead::error(ErrorCode::NotLeaderOrFollower),
            };
            budget = budget.saturating_sub(read.records.len());
            reads.push(read);
        }
        let sending = reads
            .iter()
            .any(|r| !r.records.is_empty() || r.error != ErrorCode::None || r.diverging.is_some());
        let now_ms = crate::clock::monotonic_ms();
        if sending || now_ms >= deadline_ms || local.stopping.get() {
            return reads;
        }
        drop(reads);
        let grown = futures_lite::future::poll_fn(|cx| {
            for (part, (_, fetch)) in parts.iter().zip(&share.partitions) {
                match part {
                    Some(p) if !p.has_data_past(fetch.fetch_offset) => p.watch(cx.waker()),
                    _ => return Poll::Ready(()),
                }
            }
            Poll::Pending
        });
        let timer = glommio::timer::sleep(Duration::from_millis(deadline_ms - now_ms));
        let stopped = async {
            let _: Option<()> = local.stopped_signal().await;
        };
        futures_lite::future::or(futures_lite::future::or(grown, timer), stopped).await;
    }
}
