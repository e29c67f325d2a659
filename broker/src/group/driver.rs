//! The glommio side of one core's group coordinator: feeds requests and time to the sans-IO
//! [`Coordinator`], appends the records it asks for to this core's `__consumer_offsets`
//! partitions (acks=all: durable under `durability = fsync` before anything is answered), holds a
//! one-shot channel per waiting request (a JoinGroup may wait up to its rebalance timeout), and
//! replays a partition when this core opens it.
//!
//! Promises: appends are written in the order the coordinator asked for them, one round at a
//! time (everything queued for a partition in one batch: group commit, one fdatasync), and every
//! outcome of a round is reported before the next round starts, so memory and log agree on the
//! newest record per key; at shutdown every
//! waiting request is answered (COORDINATOR_NOT_AVAILABLE), so SIGTERM never hangs on a held
//! JoinGroup. No `RefCell` borrow is held across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use glommio::channels::local_channel::{self, LocalSender};
use glommio::sync::Semaphore;
use spool_protocol::ErrorCode;
use spool_storage::records::BatchBuilder;

use super::coordinator::Coordinator;
use super::types::{
    Action, CoordinatorConfig, GroupAnswer, GroupCall, Input, JoinResult, PersistToken, RequestId,
    Response, SyncResult,
};
use super::OFFSETS_TOPIC;
use crate::clock::{now_ms, now_ms_u64};
use crate::internal_replay::Replay;
use crate::local::Local;
use crate::partition::Partition;
use crate::requests::TopicPartition;

/// How often the coordinator's clock advances (session expiry, join deadlines, initial delay).
pub const TICK_INTERVAL_MS: u64 = 100;
/// Room left in a batch for record framing (varints, attributes) beyond key and value bytes.
/// How long an offset commit waits for the offsets partition's in-sync replicas (acks=all) before
/// it fails with a retriable error (Kafka's `offsets.commit.timeout.ms`).
const OFFSET_COMMIT_TIMEOUT_MS: i32 = 5_000;
const BATCH_SLACK_BYTES: usize = 64;

/// Records for `__consumer_offsets`: (key, value; `None` = tombstone).
type Records = Vec<(Bytes, Option<Bytes>)>;
/// A TxnOffsetCommit's producer (id, epoch): its records go in a transactional batch.
type TxnProducer = Option<(i64, i16)>;
/// An append the coordinator asked for: (token, offsets partition, producer, records).
type QueuedAppend = (PersistToken, i32, TxnProducer, Records);

pub struct GroupDriver {
    machine: RefCell<Coordinator>,
    waiting: RefCell<HashMap<RequestId, LocalSender<Response>>>,
    next_id: Cell<RequestId>,
    /// Appends asked for and not yet written, in order.
    appends: RefCell<VecDeque<QueuedAppend>>,
    /// One append round at a time (see the module doc).
    append_turn: Semaphore,
    stopped: Cell<bool>,
    /// The offsets partitions whose groups this core coordinates (loading or loaded): those it
    /// owns and this broker leads.
    served: RefCell<BTreeSet<i32>>,
    /// This core's state: the offsets partitions it owns, its image, config and lifecycle.
    local: Rc<Local>,
}

fn clock_ms() -> u64 {
    now_ms_u64()
}

/// Kafka's mapping of an offsets-log append error to what a group client is told.
fn append_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge => ErrorCode::InvalidCommitOffsetSize,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}

/// The answer to `call` that carries only `code`.
fn refused(call: &GroupCall, code: ErrorCode) -> GroupAnswer {
    let r = match call {
        GroupCall::Join(a) => Response::Join(JoinResult::error(code, &a.member_id)),
        GroupCall::Sync(_) => Response::Sync(SyncResult::error(code)),
        GroupCall::Heartbeat(_) => Response::Heartbeat(code),
        GroupCall::Leave(_) => Response::Leave(code, Vec::new()),
        GroupCall::Commit(a) => Response::Commit(
            a.offsets
                .iter()
                .map(|(t, p, _)| (t.clone(), *p, code))
                .collect(),
        ),
        GroupCall::FetchOffsets { .. } => return GroupAnswer::Offsets(Err(code)),
        GroupCall::Describe(_) => return GroupAnswer::Described(Err(code)),
        GroupCall::List => return GroupAnswer::Listed(Vec::new()),
        GroupCall::DeleteGroups(gs) => {
            Response::DeleteGroups(gs.iter().map(|g| (g.clone(), code)).collect())
        }
        GroupCall::DeleteOffsets(_) => Response::DeleteOffsets(code, Vec::new()),
    };
    GroupAnswer::Response(r)
}

impl GroupDriver {
    /// `seed` is the entropy of member ids (drawn by the caller, at the edge).
    pub fn new(config: CoordinatorConfig, local: Rc<Local>, seed: u64) -> Rc<Self> {
        let seed = seed ^ ((local.core as u64) << 48);
        Rc::new(Self {
            machine: RefCell::new(Coordinator::new(config, seed)),
            waiting: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            appends: RefCell::new(VecDeque::new()),
            append_turn: Semaphore::new(1),
            stopped: Cell::new(false),
            served: RefCell::new(BTreeSet::new()),
            local,
        })
    }

    /// Whether this core coordinates the groups of offsets partition `partition`.
    pub fn serves(&self, partition: i32) -> bool {
        self.served.borrow().contains(&partition)
    }

    /// Groups coordinated here (for /metrics).
    pub fn group_count(&self) -> usize {
        self.machine.borrow().group_count()
    }

    /// Runs a read-only query against the coordinator.
    pub fn query<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        f(&self.machine.borrow())
    }

    /// Feeds one request in and waits for its answer; `None` when the coordinator stopped first.
    pub async fn call(&self, make: impl FnOnce(RequestId) -> Input) -> Option<Response> {
        if self.stopped.get() {
            return None;
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = local_channel::new_bounded(1);
        self.waiting.borrow_mut().insert(id, tx);
        let actions = self.machine.borrow_mut().handle(make(id), clock_ms());
        self.run(actions).await;
        rx.recv().await
    }

    /// Serves one routed group request.
    pub async fn serve(&self, call: GroupCall) -> GroupAnswer {
        if self.local.partition_count(OFFSETS_TOPIC).is_none() {
            // The topic was just created and this core has not applied it yet (the asking core
            // has): its partitions open here in a moment.
            return refused(&call, ErrorCode::CoordinatorLoadInProgress);
        }
        let input: Box<dyn FnOnce(RequestId) -> Input> = match call {
            GroupCall::Join(a) => Box::new(|id| Input::Join(id, a)),
            GroupCall::Sync(a) => Box::new(|id| Input::Sync(id, a)),
            GroupCall::Heartbeat(a) => Box::new(|id| Input::Heartbeat(id, a)),
            GroupCall::Leave(a) => Box::new(|id| Input::Leave(id, a)),
            GroupCall::Commit(a) => Box::new(|id| Input::Commit(id, a)),
            GroupCall::DeleteGroups(gs) => Box::new(|id| Input::DeleteGroups(id, gs)),
            GroupCall::DeleteOffsets(a) => Box::new(|id| Input::DeleteOffsets(id, a)),
            GroupCall::FetchOffsets {
                group_id,
                topics,
                require_stable,
            } => {
                return GroupAnswer::Offsets(
                    self.query(|c| c.fetch_offsets_stable(&group_id, topics, require_stable)),
                )
            }
            GroupCall::Describe(g) => {
                return GroupAnswer::Described(self.query(|c| c.describe(&g)))
            }
            GroupCall::List => return GroupAnswer::Listed(self.query(|c| c.list())),
        };
        match self.call(input).await {
            Some(r) => GroupAnswer::Response(r),
            None => GroupAnswer::Unavailable,
        }
    }

    /// A transaction marker of `producer_id` was written to offsets partition `partition`: its
    /// staged TxnOffsetCommits there are committed or dropped.
    pub fn on_txn_marker(&self, partition: i32, producer_id: i64, commit: bool) {
        self.machine
            .borrow_mut()
            .on_txn_marker(partition, producer_id, commit);
    }

    /// `__consumer_offsets` has `partitions` partitions (the image's count wins over the flag).
    pub fn set_partition_count(&self, partitions: i32) {
        self.machine.borrow_mut().set_partition_count(partitions);
    }

    /// Executes actions: answers go out at once, appends join the queue, and then this task
    /// takes one turn at the queue (see [`GroupDriver::append_round`]).
    async fn run(&self, actions: Vec<Action>) {
        self.dispatch(actions);
        if self.appends.borrow().is_empty() {
            return;
        }
        let Ok(_turn) = self.append_turn.acquire_permit(1).await else {
            return;
        };
        self.append_round().await;
    }

    /// Answers go to their waiting requests; appends are queued.
    fn dispatch(&self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Respond(id, r) => {
                    let tx = self.waiting.borrow_mut().remove(&id);
                    if let Some(tx) = tx {
                        let _ = tx.try_send(r);
                    }
                }
                Action::Persist {
                    token,
                    partition,
                    records,
                } => self
                    .appends
                    .borrow_mut()
                    .push_back((token, partition, None, records)),
                Action::PersistTxn {
                    token,
                    partition,
                    producer_id,
                    producer_epoch,
                    records,
                } => self.appends.borrow_mut().push_back((
                    token,
                    partition,
                    Some((producer_id, producer_epoch)),
                    records,
                )),
            }
        }
    }

    /// Group commit: everything queued for one partition goes out as one batch (one fdatasync),
    /// then each append's outcome is reported in queue order. Runs under `append_turn`, so a
    /// caller whose appends another task took finds them done once it gets the turn. Appends
    /// that outcomes ask for meanwhile wait for the next turn (at the latest the next tick).
    async fn append_round(&self) {
        let queued: Vec<QueuedAppend> = self.appends.borrow_mut().drain(..).collect();
        // A transactional producer's records go in batches of their own.
        let mut by_partition: BTreeMap<(i32, TxnProducer), Vec<(PersistToken, Records)>> =
            BTreeMap::new();
        for (token, partition, producer, records) in queued {
            by_partition
                .entry((partition, producer))
                .or_default()
                .push((token, records));
        }
        for ((partition, producer), items) in by_partition {
            let all: Records = items.iter().flat_map(|(_, r)| r.iter().cloned()).collect();
            let result = self.append(partition, producer, all).await;
            if result == Err(ErrorCode::InvalidCommitOffsetSize) && items.len() > 1 {
                // One record too large for a batch must not fail its neighbours: one by one.
                for (token, records) in items {
                    let result = self.append(partition, producer, records).await;
                    self.report(token, result);
                }
            } else {
                for (token, _) in items {
                    self.report(token, result);
                }
            }
        }
    }

    fn report(&self, token: PersistToken, result: Result<(), ErrorCode>) {
        let more = self
            .machine
            .borrow_mut()
            .persisted(token, result, clock_ms());
        self.dispatch(more);
    }

    async fn append(
        &self,
        partition: i32,
        producer: TxnProducer,
        records: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<(), ErrorCode> {
        let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
        let Some(part) = self.local.partition(&tp) else {
            return Err(ErrorCode::NotCoordinator);
        };
        // Batches up to the batch size limit, appended by one produce (one fdatasync).
        let now = now_ms();
        let budget = self
            .local
            .config
            .max_message_bytes
            .saturating_sub(BATCH_SLACK_BYTES);
        let new_batch = || {
            let mut b = BatchBuilder::new(now);
            if let Some((producer_id, producer_epoch)) = producer {
                b.producer_id = producer_id;
                b.producer_epoch = producer_epoch;
                b.transactional = true;
            }
            b
        };
        let mut batches = BytesMut::new();
        let mut b = new_batch();
        for (k, v) in records {
            let size = k.len() + v.as_ref().map_or(0, |v| v.len()) + BATCH_SLACK_BYTES;
            if !b.is_empty() && b.estimated_bytes() + size > budget {
                batches.extend_from_slice(&b.build().map_err(|_| ErrorCode::UnknownServerError)?);
                b = new_batch();
            }
            b.push(now, Some(k), v);
        }
        if !b.is_empty() {
            batches.extend_from_slice(&b.build().map_err(|_| ErrorCode::UnknownServerError)?);
        }
        if batches.is_empty() {
            return Ok(());
        }
        let max_bytes = self.local.config.max_message_bytes;
        let r = match producer {
            None => {
                part.produce(
                    batches.freeze(),
                    -1,
                    OFFSET_COMMIT_TIMEOUT_MS,
                    max_bytes,
                    now,
                    None,
                )
                .await
            }
            Some(_) => {
                part.produce_for_coordinator(
                    batches.freeze(),
                    OFFSET_COMMIT_TIMEOUT_MS,
                    max_bytes,
                    now,
                )
                .await
            }
        };
        if r.error == ErrorCode::None {
            Ok(())
        } else {
            tracing::warn!(%tp, code = ?r.error, message = ?r.message, "offsets append failed");
            Err(append_error(r.error))
        }
    }

    /// Ticks the coordinator until the core stops, then answers everything still waiting.
    pub fn spawn_ticker(self: &Rc<Self>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            while !me.local.stopping.get() {
                if me.local.sleep_unless_stopped(TICK_INTERVAL_MS).await {
                    break;
                }
                let actions = me.machine.borrow_mut().tick(clock_ms());
                me.run(actions).await;
            }
            me.stop();
        })
        .detach();
    }

    /// Answers every waiting request and refuses new ones.
    pub fn stop(&self) {
        self.stopped.set(true);
        let actions = self.machine.borrow_mut().shutdown();
        let mut waiting = self.waiting.borrow_mut();
        for a in actions {
            if let Action::Respond(id, r) = a {
                if let Some(tx) = waiting.remove(&id) {
                    let _ = tx.try_send(r);
                }
            }
        }
        // Anything else waiting (an append in flight) sees its channel close.
        waiting.clear();
    }

    /// This core is about to open offsets partition `partition`: requests for its groups wait
    /// (COORDINATOR_LOAD_IN_PROGRESS) until [`GroupDriver::begin_load`]'s replay has run.
    pub fn expect_load(&self, partition: i32) {
        self.served.borrow_mut().insert(partition);
        self.machine.borrow_mut().begin_load(partition);
    }

    /// This core opened offsets partition `partition`: replays it, then serves its groups.
    pub fn begin_load(self: &Rc<Self>, part: Rc<Partition>, partition: i32) {
        self.served.borrow_mut().insert(partition);
        if !self.machine.borrow().is_loading(partition) {
            self.machine.borrow_mut().begin_load(partition);
        }
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let (records, skipped) = me.replay(&part, partition).await;
            if !me.serves(partition) {
                // Unloaded while replaying (the leadership moved on): nothing to serve.
                return;
            }
            me.machine.borrow_mut().finish_load(partition, clock_ms());
            if records + skipped > 0 {
                tracing::info!(
                    core = me.local.core,
                    partition,
                    records,
                    skipped,
                    "loaded consumer groups"
                );
            } else {
                tracing::debug!(
                    core = me.local.core,
                    partition,
                    "no consumer groups to load"
                );
            }
        })
        .detach();
    }

    /// Replays the partition's records into the coordinator (`crate::internal_replay`);
    /// returns (records applied, records skipped as undecodable).
    async fn replay(&self, part: &Partition, partition: i32) -> (u64, u64) {
        let max_bytes = self.local.config.max_message_bytes;
        let r = crate::internal_replay::replay(part, max_bytes, |r| {
            let mut machine = self.machine.borrow_mut();
            match r {
                Replay::Record {
                    key,
                    value,
                    txn_producer,
                    ..
                } => machine
                    .load_record(partition, key, value, txn_producer)
                    .map_err(|e| e.to_string()),
                Replay::Marker {
                    producer_id,
                    commit,
                } => {
                    machine.on_txn_marker(partition, producer_id, commit);
                    Ok(())
                }
            }
        })
        .await;
        (r.applied, r.skipped)
    }

    /// The partition's groups are no longer coordinated here: it left this core (topic
    /// deleted), or another broker leads it now.
    pub async fn unload(&self, partition: i32) {
        self.served.borrow_mut().remove(&partition);
        let actions = self.machine.borrow_mut().unload(partition);
        self.run(actions).await;
    }

    /// A topic was deleted: its committed offsets go (tombstones written).
    pub async fn topic_deleted(&self, topic: &str) {
        let actions = self.machine.borrow_mut().topic_deleted(topic);
        self.run(actions).await;
    }
}
