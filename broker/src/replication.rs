//! The replication driver of one core (DESIGN §7): the fetch sessions of the partitions this
//! core follows, and the ISR changes and deadlines of those it leads.
//!
//! Owns, per core:
//! - one fetch session per leader: a task that sends the leader one `ReplicaFetch` for every
//!   partition of this core that follows it (its fields from each partition's
//!   `FollowerPartition`), waits for the answer (the leader long-polls it), applies every
//!   partition's share concurrently (their fdatasyncs overlap), and fetches again. The task ends when no partition here follows that
//!   leader any more; a partition whose answer failed sits out [`PARTITION_ERROR_BACKOFF_MS`]
//!   (so one partition whose metadata lags does not spin the session);
//! - a tick every [`REPLICATION_TICK_MS`]: peers' addresses from the image, sessions for new
//!   leaders, each led partition's ISR proposal (`isr_change::propose`, sent to core 0 as an
//!   [`AlterPartition`] call: served there or forwarded to the active controller) and its
//!   acks=all deadlines.
//!
//! Bounded: at most [`REPLICA_FETCH_PARTITIONS_MAX`] partitions and [`REPLICA_FETCH_MAX_BYTES`]
//! per fetch, one fetch in flight per session, one ISR change in flight per partition. Never
//! decides anything itself: every rule is the partition's (and spool-core's).
//!
//! Departure from DESIGN §7 ("one fetch session per (leader, follower, core)"): the sessions are
//! per follower core, but the internal port listens on core 0 only (as raft does), so every
//! session lands on the leader's core 0, and each partition's share hops over the core mesh to
//! the core that owns it (`crate::internal_server`, `crate::replica_share`); the records come
//! back over the mesh as copies (`read_copy`) and are sent as one buffer, not spliced from the
//! segment files. On this two-core machine the hop and the copy are small next to the
//! fdatasyncs; a per-core internal listener (a handshake naming the follower's core, or one port
//! per core) is the fix when a profile says so.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use spool_core::follower_fetch::FollowerFetch;
use spool_core::isr_change::{AlterPartitionAnswer, BrokerStatus, ProposeInput};
use spool_protocol::internal::{
    InternalMessage, ReplicaFetch, ReplicaFetchPartition, REPLICA_FETCH_PARTITIONS_MAX,
};
use spool_protocol::ErrorCode;

use crate::metrics::CoreMetrics;
use crate::partition::Partition;
use crate::peers::Peers;
use crate::requests::{AlterPartition, ReplicaFetchRead, TopicPartition};
use crate::shard::Shard;

/// How often a core looks for new leaders to fetch from, ISR changes to propose and deadlines.
pub const REPLICATION_TICK_MS: u64 = 100;
/// How long the leader may hold a fetch that finds nothing new (Kafka's
/// `replica.fetch.wait.max.ms`).
pub const REPLICA_FETCH_WAIT_MAX_MS: i32 = 500;
/// Record bytes one fetch answer may carry (Kafka's `replica.fetch.response.max.bytes`).
pub const REPLICA_FETCH_MAX_BYTES: i32 = 10 << 20;
/// How long a fetch may go unanswered past its wait before the session gives up on it.
pub const REPLICA_FETCH_TIMEOUT_MS: u64 = 5_000;
/// Wait after a failed fetch before the session's next one.
pub const FETCH_BACKOFF_MS: u64 = 100;
/// How long a partition whose answer failed sits out of its session.
pub const PARTITION_ERROR_BACKOFF_MS: u64 = 200;
/// An ISR change unanswered this long is abandoned and proposed afresh.
pub const ALTER_PARTITION_TIMEOUT_MS: u64 = 10_000;

struct Replication {
    /// This core's connections to leaders' internal ports.
    peers: Rc<Peers>,
    /// Leaders this core has a fetch session with.
    sessions: RefCell<BTreeSet<i32>>,
}

/// Starts this core's replication driver (clustered brokers only: it has nothing to do alone).
pub fn spawn(shard: &Rc<Shard>) {
    let shard = Rc::clone(shard);
    glommio::spawn_local(async move {
        let repl = Rc::new(Replication {
            peers: Peers::new(
                shard.config.node_id,
                Vec::new(),
                crate::peer_connect::source_ip(&shard.config.host),
            ),
            sessions: RefCell::new(BTreeSet::new()),
        });
        shard.until_ready().await;
        while !shard.stopping.get() {
            tick(&shard, &repl);
            let stopped = async {
                let _: Option<()> = shard.stopped_signal().await;
            };
            futures_lite::future::or(
                glommio::timer::sleep(Duration::from_millis(REPLICATION_TICK_MS)),
                stopped,
            )
            .await;
        }
    })
    .detach();
}

fn tick(shard: &Rc<Shard>, repl: &Rc<Replication>) {
    repl.peers.learn_addresses(&shard.image.borrow());
    let parts: Vec<(TopicPartition, Rc<Partition>)> = shard
        .partitions
        .borrow()
        .iter()
        .map(|(tp, p)| (tp.clone(), Rc::clone(p)))
        .collect();
    let now_ms = crate::clock::monotonic_ms();
    let mut leaders = BTreeSet::new();
    for (_, part) in &parts {
        if let Some((leader, _)) = part.next_replica_fetch() {
            leaders.insert(leader);
        }
    }
    for leader in leaders {
        if repl.sessions.borrow_mut().insert(leader) {
            let (shard, repl) = (Rc::clone(shard), Rc::clone(repl));
            glommio::spawn_local(async move {
                run_session(&shard, &repl, leader).await;
                repl.sessions.borrow_mut().remove(&leader);
            })
            .detach();
        }
    }
    let brokers = broker_statuses(shard);
    let own_broker_epoch = brokers
        .get(&shard.config.node_id)
        .map_or(-1, |b| b.broker_epoch);
    for (tp, part) in parts.iter().filter(|(_, p)| p.is_leader()) {
        part.release(now_ms);
        let (Some(config), Some(topic_id)) = (shard.topic_config(&tp.topic), topic_id(shard, tp))
        else {
            continue;
        };
        let input = ProposeInput {
            own_broker_epoch,
            brokers: &brokers,
            // The partition fills in where its epoch starts, from its own log.
            leader_epoch_start_offset: 0,
            lag_time_max_ms: config.replica_lag_time_max_ms,
            now_ms,
        };
        let Some(request) = part.propose_isr_change(&input, ALTER_PARTITION_TIMEOUT_MS) else {
            continue;
        };
        tracing::info!(%tp, from = ?part.isr(), to = ?request.isr(), "asking the controller to change the ISR");
        let (leader_epoch, partition_epoch) = (request.leader_epoch, request.partition_epoch);
        let (isr_before, requested) = (part.isr().len(), request.isr());
        let call = AlterPartition {
            topic_id,
            partition: tp.partition,
            request,
        };
        let (shard, part) = (Rc::clone(shard), Rc::clone(part));
        glommio::spawn_local(async move {
            let answer = match shard.call(0, call).await {
                Ok(a) => a,
                Err(_) => AlterPartitionAnswer::Lost,
            };
            // Counted by what the controller committed (the metadata log may have brought the
            // change to the partition before this answer did).
            if let AlterPartitionAnswer::Committed(l) = &answer {
                if l.isr == requested && l.isr.len() < isr_before {
                    CoreMetrics::add(&shard.metrics.isr_shrinks, 1);
                } else if l.isr == requested && l.isr.len() > isr_before {
                    CoreMetrics::add(&shard.metrics.isr_expands, 1);
                }
            }
            part.on_alter_answer(
                leader_epoch,
                partition_epoch,
                answer,
                crate::clock::monotonic_ms(),
            );
        })
        .detach();
    }
}

/// Where every registered broker's internal port is, from the image.
fn broker_statuses(shard: &Shard) -> BTreeMap<i32, BrokerStatus> {
    spool_raft::alter_partition::broker_statuses(&shard.image.borrow())
}

fn topic_id(shard: &Shard, tp: &TopicPartition) -> Option<spool_raft::TopicId> {
    shard.image.borrow().topic(&tp.topic).map(|t| t.topic_id)
}

/// One fetch session: this core's partitions that follow `leader` (module docs).
async fn run_session(shard: &Rc<Shard>, repl: &Replication, leader: i32) {
    let mut sitting_out: HashMap<TopicPartition, u64> = HashMap::new();
    // Partitions whose last answer could not be applied (logged when it starts and ends).
    let mut failing: HashSet<TopicPartition> = HashSet::new();
    while !shard.stopping.get() {
        let now_ms = crate::clock::monotonic_ms();
        sitting_out.retain(|_, until| *until > now_ms);
        let following: Vec<(Rc<Partition>, FollowerFetch)> = shard
            .partitions
            .borrow()
            .values()
            .filter_map(|p| match p.next_replica_fetch() {
                Some((l, f)) if l == leader => Some((Rc::clone(p), f)),
                _ => None,
            })
            .collect();
        if following.is_empty() {
            return;
        }
        let parts: Vec<(Rc<Partition>, FollowerFetch)> = following
            .into_iter()
            .filter(|(p, _)| !sitting_out.contains_key(&p.tp))
            .take(REPLICA_FETCH_PARTITIONS_MAX)
            .collect();
        if parts.is_empty() {
            glommio::timer::sleep(Duration::from_millis(FETCH_BACKOFF_MS)).await;
            continue;
        }
        let request = ReplicaFetch {
            replica_id: shard.config.node_id,
            broker_epoch: parts[0].1.replica_broker_epoch,
            max_wait_ms: REPLICA_FETCH_WAIT_MAX_MS,
            min_bytes: 1,
            max_bytes: REPLICA_FETCH_MAX_BYTES,
            partitions: parts
                .iter()
                .map(|(p, f)| ReplicaFetchPartition {
                    topic: p.tp.topic.clone(),
                    partition: p.tp.partition,
                    current_leader_epoch: f.current_leader_epoch,
                    fetch_offset: f.fetch_offset,
                    last_fetched_epoch: f.last_fetched_epoch,
                    log_start_offset: f.log_start_offset,
                    durable_offset: f.durable_offset,
                })
                .collect(),
        };
        let timeout_ms = REPLICA_FETCH_WAIT_MAX_MS as u64 + REPLICA_FETCH_TIMEOUT_MS;
        let answer = repl
            .peers
            .call_with_payload(leader, InternalMessage::ReplicaFetch(request), timeout_ms)
            .await;
        let (answer, payload) = match answer {
            Ok((InternalMessage::ReplicaFetchAnswer(a), payload)) if a.error == ErrorCode::None => {
                (a, payload)
            }
            other => {
                tracing::debug!(
                    leader,
                    "a replica fetch failed: {:?}",
                    other.map(|(m, _)| m)
                );
                glommio::timer::sleep(Duration::from_millis(FETCH_BACKOFF_MS)).await;
                continue;
            }
        };
        let records = match answer.split_records(&payload) {
            Some(r) if answer.partitions.len() == parts.len() => r,
            _ => {
                tracing::warn!(leader, "a replica fetch answer does not match its request");
                glommio::timer::sleep(Duration::from_millis(FETCH_BACKOFF_MS)).await;
                continue;
            }
        };
        let now_ms = crate::clock::now_ms();
        // Every partition's share is applied at once: each appends under its own turn and
        // fdatasyncs its own file, so the syncs overlap on the disk instead of queueing one
        // behind another (applied in turn, a fetch of N partitions cost N syncs end to end
        // before the next fetch could report any of them).
        let mut applying = Vec::with_capacity(parts.len());
        for (((part, fetch), a), records) in parts.into_iter().zip(&answer.partitions).zip(records)
        {
            if a.topic != part.tp.topic || a.partition != part.tp.partition {
                sitting_out.insert(part.tp.clone(), backoff_until());
                continue;
            }
            let read = ReplicaFetchRead {
                error: a.error,
                high_watermark: a.high_watermark,
                log_start_offset: a.log_start_offset,
                log_end_offset: a.log_end_offset,
                diverging: a
                    .diverging_epoch
                    .map(|d| spool_core::epoch_cache::EpochEndOffset {
                        epoch: d.epoch,
                        end_offset: d.end_offset,
                    }),
                records,
            };
            let epoch = fetch.current_leader_epoch.unwrap_or(-1);
            applying.push(glommio::spawn_local(async move {
                let applied = crate::stall_watch::watch(
                    || format!("{}: applying a replica fetch from broker {leader}", part.tp),
                    part.on_replica_answer(epoch, &read, now_ms),
                )
                .await;
                (part, applied)
            }));
        }
        // The next fetch waits for all of them: it reports each partition's new synced offset.
        for task in applying {
            let (part, applied) = task.await;
            match applied {
                Ok(()) => {
                    if failing.remove(&part.tp) {
                        tracing::info!(tp = %part.tp, leader, "replica fetches apply again");
                    }
                }
                Err(e) => {
                    // Once per episode at info (a full disk, a refusal), then quietly: the
                    // partition sits out and retries every PARTITION_ERROR_BACKOFF_MS.
                    if failing.insert(part.tp.clone()) {
                        tracing::info!(tp = %part.tp, leader, "replica fetch not applied, retrying: {}", e.0);
                    } else {
                        tracing::debug!(tp = %part.tp, leader, "replica fetch not applied: {}", e.0);
                    }
                    sitting_out.insert(part.tp.clone(), backoff_until());
                }
            }
        }
    }
}

fn backoff_until() -> u64 {
    crate::clock::monotonic_ms() + PARTITION_ERROR_BACKOFF_MS
}
