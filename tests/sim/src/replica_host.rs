//! [`ReplicaHost`]: the replication half of one simulated broker — the replicas the committed
//! metadata assigns to it, its fetch sessions to each leader, its periodic log fsync, and the
//! produce, read and AlterPartition traffic its leaders handle.
//!
//! Owns: the replicas by [`PartKey`] and their logs (which survive a crash as their synced part,
//! [`SimLog::crash`]); the newest [`MetaView`] it was sent; one fetch session in flight per
//! leader (many partitions in it); one fsync in flight; the acks=all requests waiting, by id.
//! Promises: the leader's answer to a fetch is `follower_fetch::decide`'s; follower progress,
//! the HW and ISR proposals are `ReplicaState`'s and `isr_change::propose`'s; the follower's
//! appends and truncations are `FollowerPartition`'s, reported with `Reporting::Synced`
//! (durability = fsync); produce admission and acks=all waits are `ack_wait`'s; idempotent
//! dedup is `ProducerStateTable`'s. Nothing is replicated before the broker is registered.
//! Never does: read a clock or entropy, or decide anything spool-core decides.

use std::collections::BTreeMap;
use std::sync::Arc;

use spool_core::ack_wait::{Acks, Admission, Released};
use spool_core::election::NO_LEADER;
use spool_core::epoch_cache::LeaderEpochCache;
use spool_core::follower_fetch::{self, FetchDecision, FetchRefusal, LeaderView};
use spool_core::follower_state::{BatchMeta, OutOfRange, Reporting};
use spool_core::isr_change::{self, AlterPartitionAnswer, ProposeInput};
use spool_core::planted::PlantedBug;
use spool_core::producer_state::Check;
use spool_protocol::ErrorCode;

use crate::message::{Endpoint, Envelope, Payload};
use crate::metaview::{MetaView, PartKey};
use crate::out::Out;
use crate::plog::{SimBatch, SimLog};
use crate::repl_event::ReplEvent;
use crate::repl_message::{PartAnswer, ProducedBatch, ReplMsg};
use crate::rng::SimRng;
use crate::sim_replica::{Role, SimReplica};

/// How often a broker's replication loop runs (fetches, fsync, ISR proposals).
pub const REPL_TICK_MS: u64 = 40;
/// `replica.lag.time.max.ms` in the simulator (production: 30 s) so runs see ISR shrinks.
pub const LAG_TIME_MAX_MS: u64 = 2_000;
/// A fetch session or an AlterPartition unanswered this long is given up.
pub const REPL_REQUEST_TIMEOUT_MS: u64 = 400;
/// An acks=all request waits this long (its `timeout_ms`).
pub const PRODUCE_TIMEOUT_MS: u64 = 3_000;
/// Batches per partition in one fetch answer or read.
pub const BATCHES_PER_FETCH_MAX: usize = 8;

struct Waiting {
    to: Endpoint,
    request_id: u64,
    key: PartKey,
    batch: SimBatch,
}

pub struct ReplicaHost {
    id: i32,
    planted: Option<PlantedBug>,
    up: bool,
    /// Its disk was wiped at some point in the run.
    wiped: bool,
    incarnation: u64,
    broker_epoch: Option<i64>,
    view: Arc<MetaView>,
    replicas: BTreeMap<PartKey, SimReplica>,
    /// Per leader: (session id, sent at).
    sessions: BTreeMap<i32, (u64, u64)>,
    next_session: u64,
    /// The fsync in flight: its token and each log's end when it started.
    syncing: Option<(u64, Vec<(PartKey, u64)>)>,
    next_token: u64,
    waiting: BTreeMap<u64, Waiting>,
    next_wait_id: u64,
}

impl ReplicaHost {
    pub fn new(id: i32, planted: Option<PlantedBug>) -> Self {
        ReplicaHost {
            id,
            planted,
            up: false,
            incarnation: 0,
            broker_epoch: None,
            wiped: false,
            view: Arc::new(MetaView {
                offset: -1,
                ..MetaView::default()
            }),
            replicas: BTreeMap::new(),
            sessions: BTreeMap::new(),
            next_session: 0,
            syncing: None,
            next_token: 0,
            waiting: BTreeMap::new(),
            next_wait_id: 0,
        }
    }

    pub fn id(&self) -> i32 {
        self.id
    }

    /// Whether its disk was ever wiped in this run ([`ReplicaHost::wipe`]).
    pub fn was_wiped(&self) -> bool {
        self.wiped
    }

    /// The broker epoch it registered with (`None` while it has not).
    pub fn broker_epoch(&self) -> Option<i64> {
        self.broker_epoch
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    pub fn view(&self) -> &Arc<MetaView> {
        &self.view
    }

    pub fn replicas(&self) -> &BTreeMap<PartKey, SimReplica> {
        &self.replicas
    }

    /// Every replica, as touched (after a crash or restart).
    pub fn touch_all(&self, out: &mut Out) {
        out.repl_touched
            .extend(self.replicas.keys().map(|k| (self.id, *k)));
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// (Re)starts: every replica follows no one until metadata arrives; logs are what the crash
    /// left.
    pub fn start(&mut self) {
        self.up = true;
        self.incarnation += 1;
        self.broker_epoch = None;
        self.view = Arc::new(MetaView {
            offset: -1,
            ..MetaView::default()
        });
        self.sessions.clear();
        self.syncing = None;
        self.waiting.clear();
        let me = self.id;
        for r in self.replicas.values_mut() {
            let log = std::mem::take(&mut r.log);
            let epochs = r.epochs().clone();
            *r = SimReplica::follower(me, -1, log, epochs);
        }
    }

    /// A crash that takes the partition logs with it (a replaced disk): every replica comes
    /// back empty, with an empty epoch cache.
    pub fn wipe(&mut self) {
        self.up = false;
        self.wiped = true;
        for r in self.replicas.values_mut() {
            let mut log = std::mem::take(&mut r.log);
            log.wipe();
            *r = SimReplica::follower(self.id, -1, log, LeaderEpochCache::new());
        }
    }

    pub fn crash(&mut self, lose_unsynced: bool, rng: &mut SimRng) {
        self.up = false;
        for r in self.replicas.values_mut() {
            let mut log = std::mem::take(&mut r.log);
            log.crash(lose_unsynced, rng);
            // The checkpoint is written at once (by rename); recovery cuts it to the log's end,
            // as Kafka's does.
            let mut epochs = r.epochs().clone();
            epochs.truncate_from_end(log.end_offset());
            *r = SimReplica::follower(self.id, -1, log, epochs);
        }
    }

    /// The broker (re)registered or heartbeated with this answer's metadata.
    pub fn on_metadata(
        &mut self,
        view: &Arc<MetaView>,
        broker_epoch: Option<i64>,
        now_ms: u64,
        out: &mut Out,
    ) {
        if !self.up {
            return;
        }
        self.broker_epoch = broker_epoch;
        let Some(epoch) = broker_epoch else {
            return;
        };
        if view.offset <= self.view.offset {
            return;
        }
        self.view = Arc::clone(view);
        let me = self.id;
        // Replicas no longer assigned here (topic deleted, reassigned) go.
        let gone: Vec<PartKey> = self
            .replicas
            .keys()
            .filter(|k| {
                view.partitions
                    .get(k)
                    .is_none_or(|p| !p.state.replicas.contains(&me))
            })
            .copied()
            .collect();
        for k in gone {
            if let Some(mut r) = self.replicas.remove(&k) {
                if let Role::Leader(l) = &mut r.role {
                    let released = l.waiters.on_leadership_lost();
                    self.answer_released(&released, out);
                }
            }
        }
        for (key, pv) in &view.partitions {
            if !pv.state.replicas.contains(&me) {
                continue;
            }
            let r = self.replicas.entry(*key).or_insert_with(|| {
                SimReplica::follower(me, epoch, SimLog::default(), LeaderEpochCache::new())
            });
            let learned = r.learn(me, epoch, pv, self.planted, now_ms);
            out.repl_touched.push((me, *key));
            if let Some(leader_epoch) = learned.took_leadership {
                out.note(format!("b{me} leads {key} at epoch {leader_epoch}"));
                out.repl.push(ReplEvent::LeaderTook {
                    broker: me,
                    key: *key,
                    leader_epoch,
                });
            }
            if let Role::Follower(f) = &mut r.role {
                f.plant(self.planted);
            }
            self.answer_released(&learned.released, out);
        }
    }

    /// The replication loop: fsync, leaders' ISR proposals and deadlines, followers' fetches.
    pub fn tick(&mut self, now_ms: u64, controller: u64, out: &mut Out) {
        if !self.up {
            return;
        }
        let Some(broker_epoch) = self.broker_epoch else {
            return;
        };
        if self.syncing.is_none() {
            let ends: Vec<(PartKey, u64)> = self
                .replicas
                .iter()
                .filter(|(_, r)| r.log.synced_offset() < r.log.end_offset())
                .map(|(k, r)| (*k, r.log.end_offset()))
                .collect();
            if !ends.is_empty() {
                self.next_token += 1;
                self.syncing = Some((self.next_token, ends));
                out.log_syncs
                    .push((self.id, self.incarnation, self.next_token));
            }
        }
        let me = self.id;
        let view = Arc::clone(&self.view);
        let mut released = Vec::new();
        let mut fetches: BTreeMap<i32, Vec<_>> = BTreeMap::new();
        for (key, r) in self.replicas.iter_mut() {
            let freed = r.release(now_ms);
            if !freed.is_empty() {
                out.repl_touched.push((me, *key));
                released.extend(freed);
            }
            match &mut r.role {
                Role::Leader(l) => {
                    if l.alter_sent_ms
                        .is_some_and(|t| now_ms >= t + REPL_REQUEST_TIMEOUT_MS)
                    {
                        // No answer: the change stays pending and is sent again below.
                        isr_change::on_answer(&mut l.state, AlterPartitionAnswer::Lost, now_ms);
                        l.alter_sent_ms = None;
                    }
                    if l.alter_sent_ms.is_none() {
                        if let Some(request) = isr_change::retry_request(&mut l.state, broker_epoch)
                        {
                            l.alter_sent_ms = Some(now_ms);
                            out.repl_touched.push((me, *key));
                            out.sends.push(Envelope::new(
                                Endpoint::Broker(me),
                                Endpoint::Node(controller),
                                Payload::Repl(Box::new(ReplMsg::AlterPartition {
                                    key: *key,
                                    request,
                                })),
                            ));
                            continue;
                        }
                    }
                    let Some(start) = l.epochs.start_offset_of(l.state.leader_epoch()) else {
                        continue;
                    };
                    let input = ProposeInput {
                        own_broker_epoch: broker_epoch,
                        brokers: &view.brokers,
                        leader_epoch_start_offset: start,
                        lag_time_max_ms: LAG_TIME_MAX_MS,
                        now_ms,
                    };
                    if let Some(request) = isr_change::propose(&mut l.state, &input) {
                        l.alter_sent_ms = Some(now_ms);
                        out.repl_touched.push((me, *key));
                        out.sends.push(Envelope::new(
                            Endpoint::Broker(me),
                            Endpoint::Node(controller),
                            Payload::Repl(Box::new(ReplMsg::AlterPartition { key: *key, request })),
                        ));
                    }
                }
                Role::Follower(f) => {
                    let leader = f.leader_id();
                    if leader != NO_LEADER && leader != me {
                        fetches
                            .entry(leader)
                            .or_default()
                            .push((*key, f.next_fetch(Reporting::Synced)));
                    }
                }
            }
        }
        self.answer_released(&released, out);
        for (leader, parts) in fetches {
            if self
                .sessions
                .get(&leader)
                .is_some_and(|(_, sent)| now_ms < sent + REPL_REQUEST_TIMEOUT_MS)
            {
                continue;
            }
            self.next_session += 1;
            self.sessions.insert(leader, (self.next_session, now_ms));
            out.sends.push(Envelope::new(
                Endpoint::Broker(me),
                Endpoint::Broker(leader),
                Payload::Repl(Box::new(ReplMsg::Fetch {
                    session: self.next_session,
                    parts,
                })),
            ));
        }
    }

    /// The fsync `token` of incarnation `incarnation` completed.
    pub fn sync_done(&mut self, incarnation: u64, token: u64, now_ms: u64, out: &mut Out) {
        if !self.up || incarnation != self.incarnation {
            return;
        }
        let Some((t, ends)) = self.syncing.take_if(|(t, _)| *t == token) else {
            return;
        };
        debug_assert_eq!(t, token);
        let mut released = Vec::new();
        for (key, end) in ends {
            if let Some(r) = self.replicas.get_mut(&key) {
                out.repl_touched.push((self.id, key));
                r.log.synced_through(end);
                r.on_synced();
                released.extend(r.release(now_ms));
            }
        }
        self.answer_released(&released, out);
    }

    pub fn handle(&mut self, from: Endpoint, msg: ReplMsg, now_ms: u64, out: &mut Out) {
        if !self.up {
            return;
        }
        match msg {
            ReplMsg::Fetch { session, parts } => {
                self.serve_fetch(from, session, parts, now_ms, out)
            }
            ReplMsg::FetchAnswer { session, parts } => {
                let Endpoint::Broker(leader) = from else {
                    return;
                };
                // Only the answer to the session's fetch in flight: a duplicate or a late one
                // would offer batches the log already moved past.
                if self
                    .sessions
                    .get(&leader)
                    .is_none_or(|(s, _)| *s != session)
                {
                    return;
                }
                self.sessions.remove(&leader);
                for (key, epoch, answer) in parts {
                    self.on_fetched(key, epoch, answer, out);
                }
            }
            ReplMsg::AlterPartitionAnswer {
                key,
                leader_epoch,
                partition_epoch,
                answer,
            } => {
                if let Some(r) = self.replicas.get_mut(&key) {
                    out.repl_touched.push((self.id, key));
                    if let Role::Leader(l) = &mut r.role {
                        if l.alter_sent_ms.is_some()
                            && isr_change::answers_pending(&l.state, leader_epoch, partition_epoch)
                        {
                            let outcome = isr_change::on_answer(&mut l.state, answer, now_ms);
                            l.alter_sent_ms = None;
                            out.note(format!("b{} {key} ISR change: {outcome:?}", self.id));
                        }
                    }
                    let released = r.release(now_ms);
                    self.answer_released(&released, out);
                }
            }
            ReplMsg::Produce {
                request_id,
                key,
                acks,
                batch,
            } => self.produce(from, request_id, key, acks, batch, now_ms, out),
            ReplMsg::Read {
                request_id,
                key,
                offset,
            } => {
                let (error, batches) = match self.replicas.get(&key).map(|r| (r, r.leader())) {
                    Some((r, Some(l))) => (
                        ErrorCode::None,
                        r.log
                            .read(offset, l.state.high_watermark(), BATCHES_PER_FETCH_MAX),
                    ),
                    _ => (ErrorCode::NotLeaderOrFollower, Vec::new()),
                };
                out.sends.push(Envelope::new(
                    Endpoint::Broker(self.id),
                    from,
                    Payload::Repl(Box::new(ReplMsg::ReadAnswer {
                        request_id,
                        key,
                        error,
                        batches,
                    })),
                ));
            }
            other => out.errors.push(format!(
                "b{} got an unexpected {}",
                self.id,
                other.describe()
            )),
        }
    }

    fn serve_fetch(
        &mut self,
        from: Endpoint,
        session: u64,
        parts: Vec<(PartKey, spool_core::follower_fetch::FollowerFetch)>,
        now_ms: u64,
        out: &mut Out,
    ) {
        let broker_epochs = self.view.broker_epochs();
        let mut answers = Vec::new();
        let mut released = Vec::new();
        for (key, fetch) in parts {
            let epoch = fetch.current_leader_epoch.unwrap_or(-1);
            let Some(r) = self.replicas.get_mut(&key) else {
                answers.push((
                    key,
                    epoch,
                    PartAnswer::Refused {
                        refusal: FetchRefusal::NotLeader,
                        log_start_offset: 0,
                        log_end_offset: 0,
                    },
                ));
                continue;
            };
            let replicas = match &r.role {
                Role::Leader(l) => l.state.leadership().replicas.clone(),
                Role::Follower(_) => Vec::new(),
            };
            let log_end = r.log.end_offset();
            let view = LeaderView {
                is_leader: r.leader().is_some(),
                leader_epoch: r.leader_epoch(),
                replicas: &replicas,
                broker_epochs: &broker_epochs,
                epochs: r.epochs(),
                log_start_offset: 0,
                log_end_offset: log_end,
            };
            let answer = match follower_fetch::decide(&fetch, &view) {
                Ok(FetchDecision::Read {
                    fetch_offset,
                    progress_offset,
                }) => {
                    let Role::Leader(l) = &mut r.role else {
                        unreachable!("decide reads only on a leader")
                    };
                    let hw_before = l.state.high_watermark();
                    let hw = l.state.on_follower_fetch_with_epoch(
                        fetch.replica_id,
                        fetch.replica_broker_epoch,
                        progress_offset,
                        now_ms,
                    );
                    let freed = r.release(now_ms);
                    // Only a moved HW or a release is anything the checks look at.
                    if hw != hw_before || !freed.is_empty() {
                        out.repl_touched.push((self.id, key));
                    }
                    released.extend(freed);
                    PartAnswer::Read {
                        batches: r.log.read(fetch_offset, log_end, BATCHES_PER_FETCH_MAX),
                        high_watermark: hw,
                    }
                }
                Ok(FetchDecision::Diverging(d)) => PartAnswer::Diverging(d),
                Err(refusal) => PartAnswer::Refused {
                    refusal,
                    log_start_offset: 0,
                    log_end_offset: log_end,
                },
            };
            answers.push((key, epoch, answer));
        }
        self.answer_released(&released, out);
        out.sends.push(Envelope::new(
            Endpoint::Broker(self.id),
            from,
            Payload::Repl(Box::new(ReplMsg::FetchAnswer {
                session,
                parts: answers,
            })),
        ));
    }

    fn on_fetched(&mut self, key: PartKey, epoch: i32, answer: PartAnswer, out: &mut Out) {
        let me = self.id;
        let Some(r) = self.replicas.get_mut(&key) else {
            return;
        };
        let Role::Follower(f) = &mut r.role else {
            return;
        };
        if f.leader_epoch() != epoch {
            return;
        }
        let truncate_to = match answer {
            PartAnswer::Read {
                batches,
                high_watermark,
            } => {
                let metas: Vec<BatchMeta> = batches
                    .iter()
                    .map(|b| BatchMeta {
                        base_offset: b.base_offset,
                        last_offset: b.last_offset(),
                        leader_epoch: b.leader_epoch,
                    })
                    .collect();
                if let Err(e) = f.check_batches(&metas) {
                    out.note(format!("b{me} {key} refused fetched batches: {e:?}"));
                    return;
                }
                for b in &batches {
                    r.log.append(*b);
                }
                let hw_before = f.high_watermark();
                if f.on_appended(&metas, r.log.end_offset(), high_watermark) != hw_before
                    || !batches.is_empty()
                {
                    out.repl_touched.push((me, key));
                }
                return;
            }
            PartAnswer::Diverging(d) => f.truncation_for(d).offset,
            PartAnswer::Refused {
                refusal:
                    FetchRefusal::OffsetOutOfRange { .. } | FetchRefusal::UnknownLastFetchedEpoch { .. },
                log_start_offset,
                log_end_offset,
            } => match f.out_of_range(log_start_offset, log_end_offset) {
                OutOfRange::TruncateTo(offset) => offset,
                OutOfRange::StartAt(_) | OutOfRange::FetchFrom(_) => return,
            },
            PartAnswer::Refused { .. } => return,
        };
        let before: Vec<SimBatch> = r
            .log
            .batches()
            .iter()
            .filter(|b| b.end_offset() > truncate_to)
            .copied()
            .collect();
        let end = r.log.truncate(truncate_to);
        f.on_truncated(end);
        out.repl_touched.push((me, key));
        if !before.is_empty() {
            out.note(format!("b{me} {key} truncates to {end}"));
            out.repl.push(ReplEvent::Truncated {
                broker: me,
                key,
                offset: end,
                cut: before,
            });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn produce(
        &mut self,
        from: Endpoint,
        request_id: u64,
        key: PartKey,
        acks: Acks,
        batch: ProducedBatch,
        now_ms: u64,
        out: &mut Out,
    ) {
        let me = self.id;
        let answer = |error: ErrorCode, base_offset: u64, out: &mut Out| {
            if acks != Acks::None {
                out.sends.push(Envelope::new(
                    Endpoint::Broker(me),
                    from,
                    Payload::Repl(Box::new(ReplMsg::ProduceAnswer {
                        request_id,
                        error,
                        base_offset,
                    })),
                ));
            }
        };
        let Some(r) = self.replicas.get_mut(&key) else {
            return answer(ErrorCode::NotLeaderOrFollower, 0, out);
        };
        let Role::Leader(l) = &mut r.role else {
            return answer(ErrorCode::NotLeaderOrFollower, 0, out);
        };
        out.repl_touched.push((me, key));
        let admission = match l.waiters.admit(acks, l.state.has_min_isr()) {
            Ok(a) => a,
            Err(e) => return answer(e, 0, out),
        };
        let appended = match batch.producer {
            Some((pid, pepoch, seq)) => {
                let last_seq = seq + batch.records as i32 - 1;
                match l.producers.check(pid, pepoch, seq, last_seq) {
                    Check::Append => None,
                    Check::Duplicate { base_offset } => Some(
                        r.log
                            .batch_at(base_offset)
                            .copied()
                            .ok_or(ErrorCode::UnknownServerError),
                    ),
                    Check::Reject(e) => Some(Err(e)),
                }
            }
            None => None,
        };
        let stored = match appended {
            Some(Ok(original)) => original,
            Some(Err(e)) => {
                if let Admission::Wait(slot) = admission {
                    l.waiters.cancel(slot);
                }
                return answer(e, 0, out);
            }
            None => {
                let b = SimBatch {
                    base_offset: r.log.end_offset(),
                    records: batch.records,
                    leader_epoch: l.state.leader_epoch(),
                    id: batch.id,
                    producer: batch.producer,
                };
                r.log.append(b);
                if let Some((pid, pepoch, seq)) = b.producer {
                    l.producers.on_append(
                        pid,
                        pepoch,
                        seq,
                        seq + b.records as i32 - 1,
                        b.base_offset,
                        b.last_offset(),
                    );
                }
                out.repl.push(ReplEvent::Appended {
                    broker: me,
                    key,
                    batch: b,
                });
                b
            }
        };
        match admission {
            Admission::NoWait => answer(ErrorCode::None, stored.base_offset, out),
            Admission::Wait(slot) => {
                self.next_wait_id += 1;
                let id = self.next_wait_id;
                self.waiting.insert(
                    id,
                    Waiting {
                        to: from,
                        request_id,
                        key,
                        batch: stored,
                    },
                );
                let hw = l.state.high_watermark();
                let released = l.waiters.register(
                    slot,
                    id,
                    stored.end_offset(),
                    now_ms + PRODUCE_TIMEOUT_MS,
                    hw,
                    now_ms,
                );
                self.answer_released(&released.into_iter().collect::<Vec<_>>(), out);
            }
        }
    }

    fn answer_released(&mut self, released: &[Released], out: &mut Out) {
        for rel in released {
            let Some(w) = self.waiting.remove(&rel.request_id) else {
                continue;
            };
            if rel.result == ErrorCode::None {
                let isr = self
                    .replicas
                    .get(&w.key)
                    .and_then(|r| r.leader())
                    .map(|l| l.state.isr().to_vec())
                    .unwrap_or_default();
                out.repl.push(ReplEvent::AckedAll {
                    broker: self.id,
                    key: w.key,
                    batch: w.batch,
                    isr,
                });
            }
            out.sends.push(Envelope::new(
                Endpoint::Broker(self.id),
                w.to,
                Payload::Repl(Box::new(ReplMsg::ProduceAnswer {
                    request_id: w.request_id,
                    error: rel.result,
                    base_offset: w.batch.base_offset,
                })),
            ));
        }
    }
}
