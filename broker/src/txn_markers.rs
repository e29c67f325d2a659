//! Transaction markers between the coordinator and the partitions (Kafka's WriteTxnMarkers,
//! DESIGN §9): each core's marker writer takes the work its transaction coordinator hands it
//! (`crate::txn::driver`) and writes the commit or abort marker to every partition of the
//! transaction — through the mesh to the owner core when this broker leads the partition, over
//! the internal port to the leader otherwise — and [`serve`] answers another broker's markers.
//!
//! Promises: a transaction's Complete record is asked for only once every partition's leader
//! answered NONE (the marker is on its in-sync replicas), or the partition is gone (deleted:
//! UNKNOWN_TOPIC_OR_PARTITION), or it refused the epoch as older than its producer's (a newer
//! epoch's marker already ended the transaction there), or the coordinator epoch as older than
//! a marker's it holds, or the transaction as older than one it already marked
//! (TRANSACTION_COORDINATOR_FENCED: a newer coordinator took over, or this call is a late copy;
//! spool-core's `txn::marker_verdict`). Every marker carries its transaction's decision offset
//! (the Prepare record's offset), so a copy of a call this writer gave up on — still in a
//! connection a cut link stalled — can never end the producer's next transaction when it lands
//! late; a retry of a marker already written is answered as that one. Anything else — no leader, a leader
//! change, too few in-sync replicas, a timeout — is retried after [`MARKER_RETRY_BACKOFF_MS`],
//! for as long as this core still coordinates the id: if the coordinator moves, the new one
//! replays the Prepare record and writes the markers again (they are idempotent: a marker for a
//! producer with no open transaction changes nothing). Bounded: one task per prepared
//! transaction; the number of partitions per call is the transaction's own.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use spool_protocol::internal::{InternalMessage, TxnMarkerResult, WriteTxnMarkers};
use spool_protocol::ErrorCode;

use crate::peers::Peers;
use crate::requests::{TopicPartition, WriteMarkerPartition};
use crate::shard::Shard;
use crate::txn::driver::MarkerWork;

/// Wait before writing the markers that failed again.
pub const MARKER_RETRY_BACKOFF_MS: u64 = 100;
/// How long one call to another broker's internal port may take.
const MARKER_CALL_TIMEOUT_MS: u64 = 10_000;

/// Starts this core's marker writer.
pub fn spawn(shard: &Rc<Shard>) {
    let Some(work) = shard.txns.take_marker_work() else {
        return;
    };
    let peers = Rc::clone(&shard.txn_peers);
    let shard = Rc::clone(shard);
    glommio::spawn_local(async move {
        while let Some(w) = work.recv().await {
            let (shard, peers) = (Rc::clone(&shard), Rc::clone(&peers));
            glommio::spawn_local(async move { write_all(&shard, &peers, w).await }).detach();
        }
    })
    .detach();
}

/// Writes `work`'s markers until every partition has its own (module docs), then tells the
/// coordinator.
async fn write_all(shard: &Rc<Shard>, peers: &Rc<Peers>, work: MarkerWork) {
    let mut left: Vec<TopicPartition> = work.partitions.clone();
    loop {
        if shard.stopping.get() || !shard.txns.coordinates(&work.transactional_id) {
            return;
        }
        peers.learn_addresses(&shard.image.borrow());
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        let mut failed = Vec::new();
        for tp in left {
            match leader_of(shard, &tp) {
                Some(Some(leader)) => by_leader.entry(leader).or_default().push(tp),
                // No leader now: later.
                Some(None) => failed.push(tp),
                // Deleted: nothing to mark.
                None => {}
            }
        }
        let mut tasks = Vec::new();
        for (leader, tps) in by_leader {
            let (shard, peers, w) = (Rc::clone(shard), Rc::clone(peers), work.clone());
            tasks.push(glommio::spawn_local(async move {
                write_to(&shard, &peers, leader, &w, tps).await
            }));
        }
        for t in tasks {
            failed.extend(t.await);
        }
        if failed.is_empty() {
            break;
        }
        tracing::debug!(transactional_id = %work.transactional_id, left = failed.len(), "retrying markers");
        left = failed;
        glommio::timer::sleep(Duration::from_millis(MARKER_RETRY_BACKOFF_MS)).await;
    }
    shard.txns.markers_written(&work.transactional_id).await;
}

/// Writes the markers of `tps` (all led by `leader`); returns those to try again.
async fn write_to(
    shard: &Rc<Shard>,
    peers: &Peers,
    leader: i32,
    w: &MarkerWork,
    tps: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    if leader == shard.config.node_id {
        let results = write_here(
            shard,
            WriteTxnMarkers {
                producer_id: w.producer_id,
                producer_epoch: w.producer_epoch,
                commit: w.commit,
                coordinator_epoch: w.coordinator_epoch,
                partitions: tps
                    .iter()
                    .map(|tp| (tp.topic.clone(), tp.partition))
                    .collect(),
                decision_offset: w.decision_offset,
            },
        )
        .await;
        return retry_list(w, results);
    }
    let message = InternalMessage::WriteTxnMarkers(WriteTxnMarkers {
        producer_id: w.producer_id,
        producer_epoch: w.producer_epoch,
        commit: w.commit,
        coordinator_epoch: w.coordinator_epoch,
        partitions: tps
            .iter()
            .map(|tp| (tp.topic.clone(), tp.partition))
            .collect(),
        decision_offset: w.decision_offset,
    });
    match peers.call(leader, message, MARKER_CALL_TIMEOUT_MS).await {
        Ok(InternalMessage::WriteTxnMarkersAnswer(results)) if results.len() == tps.len() => {
            retry_list(w, results)
        }
        Ok(other) => {
            tracing::warn!(leader, answer = ?std::mem::discriminant(&other), "unexpected answer to WriteTxnMarkers");
            tps
        }
        Err(e) => {
            tracing::debug!(leader, "WriteTxnMarkers: {e}");
            tps
        }
    }
}

/// The partitions whose marker must be written again, from their leader's codes.
fn retry_list(w: &MarkerWork, results: Vec<TxnMarkerResult>) -> Vec<TopicPartition> {
    results
        .into_iter()
        .filter_map(|r| match r.error {
            ErrorCode::None | ErrorCode::UnknownTopicOrPartition => None,
            ErrorCode::InvalidProducerEpoch | ErrorCode::ProducerFenced => {
                tracing::warn!(transactional_id = %w.transactional_id, topic = %r.topic, partition = r.partition, epoch = w.producer_epoch, "a newer epoch already marked the partition");
                None
            }
            ErrorCode::TransactionCoordinatorFenced => {
                tracing::warn!(transactional_id = %w.transactional_id, topic = %r.topic, partition = r.partition, coordinator_epoch = w.coordinator_epoch, decision_offset = w.decision_offset, "a newer coordinator, or a newer transaction, already marked the partition");
                None
            }
            _ => Some(TopicPartition::new(r.topic, r.partition)),
        })
        .collect()
}

/// Another broker's (or this one's) markers for partitions this broker leads: each written on
/// its owner core, concurrently; one code per partition, in request order.
pub async fn serve(shard: &Rc<Shard>, m: WriteTxnMarkers) -> Vec<TxnMarkerResult> {
    write_here(shard, m).await
}

async fn write_here(shard: &Rc<Shard>, m: WriteTxnMarkers) -> Vec<TxnMarkerResult> {
    let tasks: Vec<_> = m
        .partitions
        .iter()
        .map(|(topic, partition)| {
            let tp = TopicPartition::new(topic.clone(), *partition);
            let shard = Rc::clone(shard);
            let call = WriteMarkerPartition {
                tp: tp.clone(),
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                commit: m.commit,
                coordinator_epoch: m.coordinator_epoch,
                decision_offset: m.decision_offset,
            };
            glommio::spawn_local(async move {
                let error = match shard.owner(&tp) {
                    Some(core) => shard
                        .call(core, call)
                        .await
                        .unwrap_or(ErrorCode::RequestTimedOut),
                    None if shard.image.borrow().topic(&tp.topic).is_none() => {
                        ErrorCode::UnknownTopicOrPartition
                    }
                    None => ErrorCode::NotLeaderOrFollower,
                };
                TxnMarkerResult {
                    topic: tp.topic,
                    partition: tp.partition,
                    error,
                }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await);
    }
    out
}

/// `Some(Some(leader))`, `Some(None)` while the partition has no leader, `None` when it does
/// not exist (deleted).
fn leader_of(shard: &Shard, tp: &TopicPartition) -> Option<Option<i32>> {
    let image = shard.image.borrow();
    let topic = image.topic(&tp.topic)?;
    let p = topic.partitions.get(usize::try_from(tp.partition).ok()?)?;
    Some((p.leader >= 0).then_some(p.leader))
}
