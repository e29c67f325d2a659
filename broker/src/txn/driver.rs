//! The glommio side of one core's transaction coordinator (DESIGN §9): feeds requests and time
//! to the sans-IO [`TxnCoordinator`], appends the records it asks for to this core's
//! `__transaction_state` partitions (acks=all: durable on the in-sync replicas before anything
//! is answered or acted on), hands the markers a durable PrepareCommit or PrepareAbort needs to
//! the marker writer (`crate::txn_markers`, above the shard: markers go to partitions on any
//! core or broker), and replays a partition when this broker becomes its leader.
//!
//! Promises: a request is answered only after its record is durable (NOT_COORDINATOR when the
//! write failed: the id's state stays as it was); markers are asked for only after their
//! Prepare record is durable, and the Complete record is written only after the writer reports
//! every marker written; a prepared transaction found on replay has its markers written again
//! (markers are idempotent), so a coordinator lost between prepare and complete never leaves a
//! transaction half done. A request refused CONCURRENT_TRANSACTIONS waits here for the id's next
//! record (up to [`CONCURRENT_WAIT_MS`]) and is decided again; an AddPartitionsToTxn waiting so
//! while its producer's previous transaction completes rides on the completing write: the
//! Complete record and the next Ongoing record are appended as one batch (one fdatasync), and the
//! request, decided again, finds its partitions added (`TxnCoordinator::complete_then_add`). No
//! `RefCell` borrow is held across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use spool_protocol::ErrorCode;
use spool_storage::records::BatchBuilder;

use super::calls::{TxnAnswer, TxnCall};
use super::records;
use super::{
    coordinator_partition, NextAdd, Step, TxnAction, TxnCoordinator, TxnMetadata,
    TRANSACTION_STATE_TOPIC,
};
use crate::clock::{now_ms, now_ms_u64};
use crate::internal_replay::Replay;
use crate::local::Local;
use crate::partition::Partition;
use crate::requests::TopicPartition;

/// How often open transactions are checked against their timeouts, and markers whose Complete
/// record failed are completed again.
pub const TICK_INTERVAL_MS: u64 = 1_000;
/// Longest a request refused with CONCURRENT_TRANSACTIONS waits for its id's next record.
pub const CONCURRENT_WAIT_MS: u64 = 1_000;
/// How long a `__transaction_state` write waits for the in-sync replicas.
const STATE_WRITE_TIMEOUT_MS: i32 = 5_000;

/// Markers one prepared transaction needs, with the coordinator epoch they are written under
/// (the leader epoch of the id's `__transaction_state` partition, so a partition can refuse a
/// deposed coordinator's late markers).
#[derive(Debug, Clone)]
pub struct MarkerWork {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
    /// The Prepare record's offset in `__transaction_state`, written into every marker so a
    /// partition can tell this transaction's marker from a late copy of an older one's.
    pub decision_offset: i64,
}

/// A request waiting for its id's next record: its token, its wake-up, and, for an
/// AddPartitionsToTxn, what it adds (to fold into a completing write).
struct Waiter {
    token: u64,
    wake: LocalSender<()>,
    next_add: Option<NextAdd>,
}

pub struct TxnDriver {
    machine: RefCell<TxnCoordinator>,
    /// The `__transaction_state` partitions whose ids this core coordinates (loaded).
    served: RefCell<BTreeSet<i32>>,
    /// Those being replayed: their ids' requests get COORDINATOR_LOAD_IN_PROGRESS.
    loading: RefCell<BTreeSet<i32>>,
    /// Ids whose markers are all written but whose Complete record has not been written yet.
    completing: RefCell<BTreeSet<String>>,
    /// Requests waiting for an id's next record (`serve`); each woken once, then dropped.
    waiters: RefCell<HashMap<String, Vec<Waiter>>>,
    next_waiter: Cell<u64>,
    markers_tx: LocalSender<MarkerWork>,
    markers_rx: RefCell<Option<LocalReceiver<MarkerWork>>>,
    stopped: Cell<bool>,
    local: Rc<Local>,
}

fn clock_ms() -> u64 {
    now_ms_u64()
}

impl TxnDriver {
    pub fn new(local: Rc<Local>) -> Rc<Self> {
        // Unbounded, but holds at most one entry per prepared transaction, and a transactional
        // id has at most one (the coordinator's one-pending-record rule).
        let (markers_tx, markers_rx) = local_channel::new_unbounded();
        Rc::new(Self {
            machine: RefCell::new(TxnCoordinator::new(local.config.transaction_max_timeout_ms)),
            served: RefCell::new(BTreeSet::new()),
            loading: RefCell::new(BTreeSet::new()),
            completing: RefCell::new(BTreeSet::new()),
            waiters: RefCell::new(HashMap::new()),
            next_waiter: Cell::new(0),
            markers_tx,
            markers_rx: RefCell::new(Some(markers_rx)),
            stopped: Cell::new(false),
            local,
        })
    }

    /// The receiving end of the marker work (taken once, by the marker writer).
    pub fn take_marker_work(&self) -> Option<LocalReceiver<MarkerWork>> {
        self.markers_rx.borrow_mut().take()
    }

    /// Whether this core coordinates the ids of `__transaction_state` partition `partition`.
    pub fn serves(&self, partition: i32) -> bool {
        self.served.borrow().contains(&partition)
    }

    /// Whether this core coordinates `transactional_id` now (its partition is served here).
    pub fn coordinates(&self, transactional_id: &str) -> bool {
        self.partition_of(transactional_id).is_ok()
    }

    /// Transactional ids coordinated here (for /metrics).
    pub fn id_count(&self) -> usize {
        self.machine.borrow().list().count()
    }

    fn partition_of(&self, transactional_id: &str) -> Result<i32, ErrorCode> {
        let n = self
            .local
            .partition_count(TRANSACTION_STATE_TOPIC)
            .ok_or(ErrorCode::CoordinatorLoadInProgress)?;
        let p = coordinator_partition(transactional_id, n);
        if self.loading.borrow().contains(&p) {
            return Err(ErrorCode::CoordinatorLoadInProgress);
        }
        if !self.serves(p) {
            return Err(ErrorCode::NotCoordinator);
        }
        Ok(p)
    }

    /// Serves one routed transaction request. A request refused with CONCURRENT_TRANSACTIONS
    /// (the id's record is being written, or its markers are) waits here, up to
    /// [`CONCURRENT_WAIT_MS`], for the id's next record and is decided again, instead of sending
    /// the client into its retry backoff (librdkafka's and Java's are 100 ms and 20 ms: a
    /// transaction begun right after a commit would otherwise wait that long for its
    /// AddPartitionsToTxn).
    pub async fn serve(&self, call: TxnCall) -> TxnAnswer {
        let deadline_ms = clock_ms() + CONCURRENT_WAIT_MS;
        loop {
            let id = match &call {
                TxnCall::InitProducerId {
                    transactional_id, ..
                }
                | TxnCall::AddPartitions {
                    transactional_id, ..
                }
                | TxnCall::EndTxn {
                    transactional_id, ..
                } => transactional_id.clone(),
                TxnCall::Describe(_) | TxnCall::List | TxnCall::Verify { .. } => {
                    return self.serve_once(call).await
                }
            };
            // Registered before deciding, so a record written meanwhile is not missed.
            let token = self.next_waiter.get();
            self.next_waiter.set(token + 1);
            let (tx, rx) = local_channel::new_bounded(1);
            let next_add = match &call {
                TxnCall::AddPartitions {
                    producer_id,
                    producer_epoch,
                    partitions,
                    ..
                } => Some(NextAdd {
                    producer_id: *producer_id,
                    producer_epoch: *producer_epoch,
                    partitions: partitions.clone(),
                }),
                _ => None,
            };
            self.waiters
                .borrow_mut()
                .entry(id.clone())
                .or_default()
                .push(Waiter {
                    token,
                    wake: tx,
                    next_add,
                });
            let answer = self.serve_once(call.clone()).await;
            let busy = matches!(
                answer,
                TxnAnswer::Producer(Err(ErrorCode::ConcurrentTransactions))
                    | TxnAnswer::Done(Err(ErrorCode::ConcurrentTransactions))
            );
            let now = clock_ms();
            let woken = if !busy || now >= deadline_ms || self.stopped.get() {
                false
            } else {
                futures_lite::future::or(async { rx.recv().await.is_some() }, async {
                    glommio::timer::sleep(Duration::from_millis(deadline_ms - now)).await;
                    false
                })
                .await
            };
            if !woken {
                self.forget_waiter(&id, token);
                return answer;
            }
        }
    }

    /// Wakes the requests waiting for `transactional_id`'s next record.
    fn wake(&self, transactional_id: &str) {
        let woken = self.waiters.borrow_mut().remove(transactional_id);
        for w in woken.into_iter().flatten() {
            let _ = w.wake.try_send(());
        }
    }

    /// A request that stopped waiting takes its slot back.
    fn forget_waiter(&self, transactional_id: &str, token: u64) {
        let mut waiters = self.waiters.borrow_mut();
        if let Some(list) = waiters.get_mut(transactional_id) {
            list.retain(|w| w.token != token);
            if list.is_empty() {
                waiters.remove(transactional_id);
            }
        }
    }

    async fn serve_once(&self, call: TxnCall) -> TxnAnswer {
        if self.stopped.get() {
            return TxnAnswer::Refused(ErrorCode::CoordinatorNotAvailable);
        }
        let now = clock_ms();
        match call {
            TxnCall::InitProducerId {
                transactional_id,
                timeout_ms,
                expected,
                mut fresh_producer_id,
            } => {
                if let Err(code) = self.partition_of(&transactional_id) {
                    return TxnAnswer::Producer(Err(code));
                }
                let step = self.machine.borrow_mut().init_producer_id(
                    &transactional_id,
                    timeout_ms,
                    expected,
                    now,
                    &mut || fresh_producer_id.take(),
                );
                let r = self.take_step(&transactional_id, step).await;
                TxnAnswer::Producer(r.map(|m| {
                    let m = m.expect("a successful InitProducerId writes a record");
                    (m.producer_id, m.producer_epoch)
                }))
            }
            TxnCall::AddPartitions {
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
            } => {
                if let Err(code) = self.partition_of(&transactional_id) {
                    return TxnAnswer::Done(Err(code));
                }
                let step = self.machine.borrow_mut().add_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                    now,
                );
                TxnAnswer::Done(self.take_step(&transactional_id, step).await.map(|_| ()))
            }
            TxnCall::EndTxn {
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
            } => {
                if let Err(code) = self.partition_of(&transactional_id) {
                    return TxnAnswer::Done(Err(code));
                }
                let step = self.machine.borrow_mut().end_txn(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    commit,
                    now,
                );
                TxnAnswer::Done(self.take_step(&transactional_id, step).await.map(|_| ()))
            }
            TxnCall::Describe(ids) => TxnAnswer::Described(
                ids.into_iter()
                    .map(|id| {
                        let r = self.partition_of(&id).and_then(|_| {
                            self.machine
                                .borrow()
                                .describe(&id)
                                .filter(|m| m.producer_epoch >= 0)
                                .cloned()
                                .ok_or(ErrorCode::TransactionalIdNotFound)
                        });
                        (id, r)
                    })
                    .collect(),
            ),
            TxnCall::Verify {
                transactional_id,
                producer_id,
                producer_epoch,
                tp,
            } => TxnAnswer::Done(
                self.partition_of(&transactional_id)
                    .map(|_| {
                        self.machine.borrow().verify(
                            &transactional_id,
                            producer_id,
                            producer_epoch,
                            &tp,
                        )
                    })
                    .and_then(|code| match code {
                        ErrorCode::None => Ok(()),
                        code => Err(code),
                    }),
            ),
            TxnCall::List => TxnAnswer::Listed(
                self.machine
                    .borrow()
                    .list()
                    .filter(|m| m.producer_epoch >= 0)
                    .cloned()
                    .collect(),
            ),
        }
    }

    /// Carries out a coordinator step: an answer as it is; a record written, then the answer
    /// (with the record that took effect) or NOT_COORDINATOR when the write failed.
    async fn take_step(
        &self,
        transactional_id: &str,
        step: Step,
    ) -> Result<Option<TxnMetadata>, ErrorCode> {
        match step {
            Step::Answer(r) => r.map(|()| None),
            Step::Write { record, answer } => {
                if self
                    .write(transactional_id, std::slice::from_ref(&record))
                    .await
                {
                    answer.map(|()| Some(record))
                } else {
                    Err(ErrorCode::NotCoordinator)
                }
            }
        }
    }

    /// Appends `records` as one batch (the last is the id's pending one) and tells the
    /// coordinator the outcome and where the last record is; markers it then asks for go to the
    /// marker writer. Whether the records are durable.
    async fn write(&self, transactional_id: &str, records: &[TxnMetadata]) -> bool {
        let written_at = match self.append(transactional_id, records).await {
            Ok(offset) => Some(offset),
            Err(code) => {
                tracing::warn!(transactional_id, ?code, "transaction state write failed");
                None
            }
        };
        let durable = written_at.is_some();
        let actions = self
            .machine
            .borrow_mut()
            .on_written(transactional_id, written_at);
        for a in actions {
            self.send_markers(a);
        }
        self.wake(transactional_id);
        durable
    }

    fn send_markers(&self, action: TxnAction) {
        let TxnAction::WriteMarkers {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            partitions,
            decision_offset,
        } = action;
        let n = self
            .local
            .partition_count(TRANSACTION_STATE_TOPIC)
            .unwrap_or(1);
        let tp = TopicPartition::new(
            TRANSACTION_STATE_TOPIC,
            coordinator_partition(&transactional_id, n),
        );
        let coordinator_epoch = self.local.partition(&tp).map_or(0, |p| p.leader_epoch());
        let work = MarkerWork {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            partitions,
            decision_offset,
        };
        if self.markers_tx.try_send(work).is_err() {
            // Only once the writer is gone (the core is stopping): the next leader resumes it.
            tracing::debug!("marker work dropped: the marker writer stopped");
        }
    }

    /// The marker writer wrote every marker of the id's prepared transaction: the Complete
    /// record follows (retried each tick until it is written), with the next transaction's
    /// Ongoing record in the same batch when its AddPartitionsToTxn is waiting.
    pub async fn markers_written(&self, transactional_id: &str) {
        let next_add = self
            .waiters
            .borrow()
            .get(transactional_id)
            .and_then(|list| list.iter().find_map(|w| w.next_add.clone()));
        let records = self.machine.borrow_mut().complete_then_add(
            transactional_id,
            clock_ms(),
            next_add.as_ref(),
        );
        if records.is_empty() {
            return;
        }
        if self.write(transactional_id, &records).await {
            self.completing.borrow_mut().remove(transactional_id);
        } else {
            self.completing
                .borrow_mut()
                .insert(transactional_id.to_string());
        }
    }

    /// Appends `records` to the id's `__transaction_state` partition as one batch (acks=all);
    /// the last record's offset.
    async fn append(
        &self,
        transactional_id: &str,
        records: &[TxnMetadata],
    ) -> Result<u64, ErrorCode> {
        let partition = self.partition_of(transactional_id)?;
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        let part = self.local.partition(&tp).ok_or(ErrorCode::NotCoordinator)?;
        let now = now_ms();
        let mut b = BatchBuilder::new(now);
        for record in records {
            b.push(
                now,
                Some(records::encode_key(transactional_id)),
                Some(records::encode_value(record)),
            );
        }
        let batch: Bytes = b
            .build()
            .map_err(|_| ErrorCode::UnknownServerError)?
            .freeze();
        let r = part
            .produce(
                batch,
                -1,
                STATE_WRITE_TIMEOUT_MS,
                self.local.config.max_message_bytes,
                now,
                None,
            )
            .await;
        match r.error {
            ErrorCode::None => u64::try_from(r.base_offset)
                .ok()
                .and_then(|base| base.checked_add(records.len() as u64 - 1))
                .ok_or(ErrorCode::UnknownServerError),
            code => Err(code),
        }
    }

    /// Expires transactions past their timeout and completes what a failed Complete write
    /// left, every [`TICK_INTERVAL_MS`], until the core stops.
    pub fn spawn_ticker(self: &Rc<Self>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            while !me.local.stopping.get() {
                if me.local.sleep_unless_stopped(TICK_INTERVAL_MS).await {
                    break;
                }
                me.tick().await;
            }
            me.stopped.set(true);
        })
        .detach();
    }

    async fn tick(&self) {
        let expired = self.machine.borrow_mut().expire(clock_ms());
        for record in expired {
            tracing::info!(
                transactional_id = %record.transactional_id,
                producer_id = record.producer_id,
                producer_epoch = record.producer_epoch,
                "aborting a transaction past its timeout"
            );
            let id = record.transactional_id.clone();
            self.write(&id, std::slice::from_ref(&record)).await;
        }
        let completing: Vec<String> = self.completing.borrow().iter().cloned().collect();
        for id in completing {
            self.markers_written(&id).await;
        }
    }

    /// This broker now leads `__transaction_state` partition `partition`, open on this core:
    /// its ids load (requests wait meanwhile), then prepared transactions get their markers.
    pub fn begin_load(self: &Rc<Self>, part: Rc<Partition>, partition: i32) {
        if !self.loading.borrow_mut().insert(partition) {
            return;
        }
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let r = crate::internal_replay::replay(&part, me.local.config.max_message_bytes, |r| {
                let Replay::Record {
                    key, value, offset, ..
                } = r
                else {
                    return Ok(());
                };
                let (id, meta) = records::decode(key, value).map_err(|e| e.to_string())?;
                me.machine.borrow_mut().replay(&id, meta, offset);
                Ok(())
            })
            .await;
            if !me.loading.borrow_mut().remove(&partition) {
                // Unloaded while replaying (the leadership moved on).
                return;
            }
            me.served.borrow_mut().insert(partition);
            let n = me
                .local
                .partition_count(TRANSACTION_STATE_TOPIC)
                .unwrap_or(1);
            let resumed: Vec<TxnAction> = me
                .machine
                .borrow()
                .resume()
                .into_iter()
                .filter(
                    |TxnAction::WriteMarkers {
                         transactional_id, ..
                     }| {
                        coordinator_partition(transactional_id, n) == partition
                    },
                )
                .collect();
            tracing::info!(
                core = me.local.core,
                partition,
                applied = r.applied,
                skipped = r.skipped,
                resumed = resumed.len(),
                "loaded transactional ids"
            );
            for a in resumed {
                me.send_markers(a);
            }
        })
        .detach();
    }

    /// The partition's ids are no longer coordinated here (another broker leads it, or it
    /// left this core).
    pub fn unload(&self, partition: i32) {
        let was = self.served.borrow_mut().remove(&partition);
        let was_loading = self.loading.borrow_mut().remove(&partition);
        if !(was || was_loading) {
            return;
        }
        let n = self
            .local
            .partition_count(TRANSACTION_STATE_TOPIC)
            .unwrap_or(1);
        self.machine
            .borrow_mut()
            .unload(|id| coordinator_partition(id, n) == partition);
        self.completing
            .borrow_mut()
            .retain(|id| coordinator_partition(id, n) != partition);
    }
}
