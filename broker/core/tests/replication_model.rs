//! A model of one partition replicated on three brokers, driven through spool-core's public
//! replication API only: the leader's `ReplicaState` and `follower_fetch::decide`, the followers'
//! `FollowerPartition`, `isr_change` on both ends with the controller's answers delayed,
//! `election::reconcile` for fencing, and metadata delivered to each broker late and
//! independently (so deposed leaders keep accepting acks=1 writes and followers keep fetching
//! from them). Logs are plain vectors of (epoch, id) records.
//!
//! After every step it checks:
//! - every prefix any leader ever exposed below its HW agrees with every other (the committed
//!   prefix only grows), and no leader's HW ever decreases;
//! - the current leader's HW ≤ the log end of every controller-ISR member;
//! - every controller-ISR member and eligible leader replica (KIP-966) holds the whole
//!   committed prefix, identically;
//! - a follower never truncates a committed record on the current leader's word: it never cuts
//!   below the part of its log that agrees with the committed prefix (the stronger form of
//!   "never below the leader's HW": records it holds that no leader committed, such as a deposed
//!   leader's acks=1 tail, may go). On a deposed leader's word (one that has not heard of its
//!   successor) it never cuts below what that leader committed; such a leader may make a
//!   follower outside the ISR cut records a later leader committed from an older epoch's tail
//!   (seed `56e401b5…` of the regressions file: the follower refetches them from the current
//!   leader, and the ISR's copies are checked separately);
//! - at most one ISR change in flight per (leader, leader epoch);
//! - every broker's epoch cache describes its log's records exactly;
//! - every record acknowledged to an acks=all producer (through `ack_wait`) is committed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use spool_core::ack_wait::{AckWaiters, Acks, Admission};
use spool_core::election::{reconcile, ElectionPolicy, PartitionView, NO_LEADER};
use spool_core::epoch_cache::LeaderEpochCache;
use spool_core::follower_fetch::{self, FetchDecision, FetchRefusal, LeaderView};
use spool_core::follower_state::{BatchMeta, FollowerPartition, OutOfRange, Reporting};
use spool_core::isr_change::{
    self, AlterPartitionAnswer, AlterPartitionRequest, BrokerStatus, ProposeInput,
};
use spool_core::replica::{Leadership, ReplicaState};

const BROKERS: i32 = 3;
const LAG_TIME_MAX_MS: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    epoch: i32,
    id: u64,
}

#[derive(Debug)]
enum Role {
    Leader {
        state: ReplicaState,
        epochs: LeaderEpochCache,
        leader_epoch: i32,
    },
    Follower(FollowerPartition),
}

#[derive(Debug)]
struct Broker {
    id: i32,
    log: Vec<Rec>,
    role: Role,
}

fn broker_epoch(id: i32) -> i64 {
    100 + i64::from(id)
}

fn leadership(v: &PartitionView) -> Leadership {
    Leadership {
        leader_id: v.leader,
        leader_epoch: v.leader_epoch,
        partition_epoch: v.partition_epoch,
        replicas: v.replicas.clone(),
        isr: v.isr.clone(),
    }
}

impl Broker {
    fn epochs(&self) -> &LeaderEpochCache {
        match &self.role {
            Role::Leader { epochs, .. } => epochs,
            Role::Follower(f) => f.epochs(),
        }
    }

    fn high_watermark(&self) -> u64 {
        match &self.role {
            Role::Leader { state, .. } => state.high_watermark(),
            Role::Follower(f) => f.high_watermark(),
        }
    }

    fn known_epoch(&self) -> i32 {
        match &self.role {
            Role::Leader { leader_epoch, .. } => *leader_epoch,
            Role::Follower(f) => f.leader_epoch(),
        }
    }

    /// The broker learns the controller's current partition state.
    fn learn(&mut self, v: &PartitionView, min_isr: usize, now_ms: u64) {
        if v.leader_epoch < self.known_epoch() {
            return;
        }
        let log_end = self.log.len() as u64;
        let hw = self.high_watermark();
        let role = std::mem::replace(
            &mut self.role,
            Role::Follower(FollowerPartition::new(
                self.id,
                0,
                NO_LEADER,
                0,
                0,
                0,
                0,
                LeaderEpochCache::new(),
            )),
        );
        self.role = match role {
            Role::Leader {
                mut state,
                epochs,
                leader_epoch,
            } if v.leader == self.id && v.leader_epoch == leader_epoch => {
                state.on_partition_change(leadership(v), now_ms);
                Role::Leader {
                    state,
                    epochs,
                    leader_epoch,
                }
            }
            other if v.leader == self.id => {
                let mut epochs = match other {
                    Role::Leader { epochs, .. } => epochs,
                    Role::Follower(f) => f.epochs().clone(),
                };
                epochs.assign(v.leader_epoch, log_end);
                let state =
                    ReplicaState::for_new_leader(leadership(v), min_isr, log_end, hw, now_ms);
                Role::Leader {
                    state,
                    epochs,
                    leader_epoch: v.leader_epoch,
                }
            }
            Role::Follower(mut f) => {
                f.on_new_leader(v.leader, v.leader_epoch);
                Role::Follower(f)
            }
            Role::Leader { epochs, .. } => Role::Follower(FollowerPartition::new(
                self.id,
                broker_epoch(self.id),
                v.leader,
                v.leader_epoch,
                0,
                log_end,
                hw,
                epochs,
            )),
        };
    }
}

#[derive(Debug, Clone)]
enum Ev {
    Produce {
        broker: i32,
        count: u64,
        acks_all: bool,
    },
    Fetch {
        follower: i32,
        max: u64,
    },
    Tick {
        ms: u64,
    },
    Propose {
        broker: i32,
    },
    ControllerHandles,
    DeliverAnswer,
    DeliverMetadata {
        broker: i32,
    },
    Fence {
        broker: i32,
    },
    Unfence {
        broker: i32,
    },
}

fn ev() -> impl Strategy<Value = Ev> {
    let b = 0..BROKERS;
    prop_oneof![
        3 => (b.clone(), 1u64..4, any::<bool>())
            .prop_map(|(broker, count, acks_all)| Ev::Produce { broker, count, acks_all }),
        6 => (b.clone(), 1u64..5).prop_map(|(follower, max)| Ev::Fetch { follower, max }),
        2 => (1u64..40).prop_map(|ms| Ev::Tick { ms }),
        2 => b.clone().prop_map(|broker| Ev::Propose { broker }),
        2 => Just(Ev::ControllerHandles),
        2 => Just(Ev::DeliverAnswer),
        3 => b.clone().prop_map(|broker| Ev::DeliverMetadata { broker }),
        1 => b.clone().prop_map(|broker| Ev::Fence { broker }),
        1 => b.prop_map(|broker| Ev::Unfence { broker }),
    ]
}

/// What a run exercised, so that a test can show the model is not vacuous.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    elections: u64,
    /// Elections of an eligible leader replica (KIP-966) from outside the ISR.
    eligible_leader_elections: u64,
    isr_shrinks: u64,
    isr_expands: u64,
    refusals: u64,
    records_truncated: u64,
    committed: u64,
    acked: u64,
    refused_not_enough_replicas: u64,
}

struct Model {
    stats: Stats,
    min_isr: usize,
    now_ms: u64,
    next_id: u64,
    brokers: Vec<Broker>,
    view: PartitionView,
    fenced: BTreeSet<i32>,
    requests: VecDeque<AlterPartitionRequest>,
    /// (leader, its leader epoch, the request's partition epoch, the answer).
    answers: VecDeque<(i32, i32, i32, AlterPartitionAnswer)>,
    in_flight: BTreeMap<(i32, i32), usize>,
    committed: Vec<Rec>,
    leader_hw: BTreeMap<(i32, i32), u64>,
    /// acks=all waiters per (leader, leader epoch), the record ids each request wrote, and the
    /// ids acknowledged.
    waiters: BTreeMap<(i32, i32), AckWaiters>,
    request_ids: BTreeMap<u64, Vec<u64>>,
    acked: BTreeSet<u64>,
}

impl Model {
    fn new(min_isr: usize) -> Self {
        let view = PartitionView {
            replicas: (0..BROKERS).collect(),
            isr: (0..BROKERS).collect(),
            eligible_leaders: vec![],
            leader: 0,
            leader_epoch: 0,
            partition_epoch: 0,
        };
        let mut brokers: Vec<Broker> = (0..BROKERS)
            .map(|id| Broker {
                id,
                log: vec![],
                role: Role::Follower(FollowerPartition::new(
                    id,
                    broker_epoch(id),
                    0,
                    0,
                    0,
                    0,
                    0,
                    LeaderEpochCache::new(),
                )),
            })
            .collect();
        let mut epochs = LeaderEpochCache::new();
        epochs.assign(0, 0);
        brokers[0].role = Role::Leader {
            state: ReplicaState::for_new_leader(leadership(&view), min_isr, 0, 0, 0),
            epochs,
            leader_epoch: 0,
        };
        Model {
            stats: Stats::default(),
            min_isr,
            now_ms: 0,
            next_id: 0,
            brokers,
            view,
            fenced: BTreeSet::new(),
            requests: VecDeque::new(),
            answers: VecDeque::new(),
            in_flight: BTreeMap::new(),
            committed: vec![],
            leader_hw: BTreeMap::new(),
            waiters: BTreeMap::new(),
            request_ids: BTreeMap::new(),
            acked: BTreeSet::new(),
        }
    }

    fn statuses(&self) -> BTreeMap<i32, BrokerStatus> {
        (0..BROKERS)
            .map(|b| {
                (
                    b,
                    BrokerStatus {
                        broker_epoch: broker_epoch(b),
                        fenced: self.fenced.contains(&b),
                        in_controlled_shutdown: false,
                        unclean_shutdown: false,
                    },
                )
            })
            .collect()
    }

    fn policy(&self) -> ElectionPolicy {
        ElectionPolicy {
            unclean_leader_election_enable: false,
            min_insync_replicas: self.min_isr as u32,
        }
    }

    fn reconcile(&mut self) {
        let nobody_unclean = BTreeSet::new();
        let policy = self.policy();
        if let Some(change) =
            reconcile(&self.view, &self.fenced, &nobody_unclean, &policy).expect("valid")
        {
            if change.leader != self.view.leader && change.leader != NO_LEADER {
                self.stats.elections += 1;
                if !self.view.isr.contains(&change.leader) {
                    self.stats.eligible_leader_elections += 1;
                }
            }
            self.view = self.view.with(&change);
        }
    }

    fn step(&mut self, ev: &Ev) -> Result<(), TestCaseError> {
        match *ev {
            Ev::Produce {
                broker,
                count,
                acks_all,
            } => {
                let b = &mut self.brokers[broker as usize];
                if let Role::Leader {
                    state,
                    leader_epoch,
                    ..
                } = &mut b.role
                {
                    let waiters = self.waiters.entry((broker, *leader_epoch)).or_default();
                    let acks = if acks_all { Acks::All } else { Acks::Leader };
                    let admission = match waiters.admit(acks, state.has_min_isr()) {
                        Ok(a) => a,
                        Err(e) => {
                            prop_assert_eq!(e, spool_core::ErrorCode::NotEnoughReplicas);
                            self.stats.refused_not_enough_replicas += 1;
                            return self.check();
                        }
                    };
                    let mut ids = vec![];
                    for _ in 0..count {
                        self.next_id += 1;
                        ids.push(self.next_id);
                        b.log.push(Rec {
                            epoch: *leader_epoch,
                            id: self.next_id,
                        });
                    }
                    let hw = state.on_leader_log_end(b.log.len() as u64);
                    if let Admission::Wait(slot) = admission {
                        let request_id = ids[0];
                        self.request_ids.insert(request_id, ids);
                        let released = waiters.register(
                            slot,
                            request_id,
                            b.log.len() as u64,
                            self.now_ms + 200,
                            hw,
                            self.now_ms,
                        );
                        if let Some(r) = released {
                            if r.result == spool_core::ErrorCode::None {
                                self.acked.extend(&self.request_ids[&r.request_id]);
                            }
                        }
                    }
                }
            }
            Ev::Fetch { follower, max } => self.fetch(follower, max)?,
            Ev::Tick { ms } => self.now_ms += ms,
            Ev::Propose { broker } => {
                let statuses = self.statuses();
                let now_ms = self.now_ms;
                let b = &mut self.brokers[broker as usize];
                if let Role::Leader {
                    state,
                    epochs,
                    leader_epoch,
                } = &mut b.role
                {
                    let input = ProposeInput {
                        own_broker_epoch: broker_epoch(broker),
                        brokers: &statuses,
                        leader_epoch_start_offset: epochs
                            .start_offset_of(*leader_epoch)
                            .expect("a leader records its epoch"),
                        lag_time_max_ms: LAG_TIME_MAX_MS,
                        now_ms,
                    };
                    if let Some(req) = isr_change::propose(state, &input) {
                        let n = self.in_flight.entry((broker, *leader_epoch)).or_default();
                        *n += 1;
                        prop_assert!(*n <= 1, "two ISR changes in flight for {broker}");
                        self.requests.push_back(req);
                    }
                }
            }
            Ev::ControllerHandles => {
                if let Some(req) = self.requests.pop_front() {
                    let answer = match isr_change::validate_alter_partition(
                        &req,
                        &self.view,
                        &self.statuses(),
                        self.min_isr,
                    ) {
                        Ok(Some(change)) => {
                            if change.isr.len() > self.view.isr.len() {
                                self.stats.isr_expands += 1;
                            } else {
                                self.stats.isr_shrinks += 1;
                            }
                            self.view = self.view.with(&change);
                            AlterPartitionAnswer::Committed(leadership(&self.view))
                        }
                        Ok(None) => AlterPartitionAnswer::Committed(leadership(&self.view)),
                        Err(e) => {
                            self.stats.refusals += 1;
                            AlterPartitionAnswer::Refused(e)
                        }
                    };
                    self.answers.push_back((
                        req.broker_id,
                        req.leader_epoch,
                        req.partition_epoch,
                        answer,
                    ));
                }
            }
            Ev::DeliverAnswer => {
                if let Some((broker, epoch, partition_epoch, answer)) = self.answers.pop_front() {
                    *self.in_flight.get_mut(&(broker, epoch)).expect("counted") -= 1;
                    let now_ms = self.now_ms;
                    if let Role::Leader {
                        state,
                        leader_epoch,
                        ..
                    } = &mut self.brokers[broker as usize].role
                    {
                        if *leader_epoch == epoch
                            && isr_change::answers_pending(state, epoch, partition_epoch)
                        {
                            isr_change::on_answer(state, answer, now_ms);
                        }
                    }
                }
            }
            Ev::DeliverMetadata { broker } => {
                let (view, min_isr, now_ms) = (self.view.clone(), self.min_isr, self.now_ms);
                self.brokers[broker as usize].learn(&view, min_isr, now_ms);
            }
            Ev::Fence { broker } => {
                self.fenced.insert(broker);
                self.reconcile();
            }
            Ev::Unfence { broker } => {
                self.fenced.remove(&broker);
                self.reconcile();
            }
        }
        self.check()
    }

    fn fetch(&mut self, follower: i32, max: u64) -> Result<(), TestCaseError> {
        let Role::Follower(f) = &self.brokers[follower as usize].role else {
            return Ok(());
        };
        let target = f.leader_id();
        if target == NO_LEADER || target == follower {
            return Ok(());
        }
        let request = f.next_fetch(Reporting::LogEnd);
        let broker_epochs: BTreeMap<i32, i64> =
            (0..BROKERS).map(|b| (b, broker_epoch(b))).collect();
        let now_ms = self.now_ms;
        // The leader's side.
        let l = &mut self.brokers[target as usize];
        let replicas: Vec<i32> = (0..BROKERS).collect();
        let log_end = l.log.len() as u64;
        let view = LeaderView {
            is_leader: matches!(l.role, Role::Leader { .. }),
            leader_epoch: l.known_epoch(),
            replicas: &replicas,
            broker_epochs: &broker_epochs,
            epochs: l.epochs(),
            log_start_offset: 0,
            log_end_offset: log_end,
        };
        let decision = follower_fetch::decide(&request, &view);
        let (records, leader_hw) = match (&decision, &mut l.role) {
            (
                Ok(FetchDecision::Read {
                    fetch_offset,
                    progress_offset,
                }),
                Role::Leader { state, .. },
            ) => {
                let hw = state.on_follower_fetch_with_epoch(
                    follower,
                    request.replica_broker_epoch,
                    *progress_offset,
                    now_ms,
                );
                let from = *fetch_offset as usize;
                let to = (from + max as usize).min(l.log.len());
                (l.log[from..to].to_vec(), hw)
            }
            _ => (vec![], 0),
        };
        let leader_len = l.log.len() as u64;
        // Whether the broker answering leads the controller's current epoch, and its HW: a
        // deposed leader that does not know it yet answers too, from a log that may lack what
        // its successors committed since.
        let (answering_hw, answering_is_current) = match &l.role {
            Role::Leader {
                state,
                leader_epoch,
                ..
            } => (
                state.high_watermark(),
                target == self.view.leader && *leader_epoch == self.view.leader_epoch,
            ),
            Role::Follower(_) => (0, false),
        };
        // The follower's side.
        let committed_len = self.committed.len() as u64;
        let b = &mut self.brokers[follower as usize];
        let Role::Follower(f) = &mut b.role else {
            unreachable!()
        };
        let own_len = b.log.len() as u64;
        // How much of its log is the committed prefix: a truncation must keep all of that.
        let agreed = b
            .log
            .iter()
            .zip(&self.committed)
            .take_while(|(a, c)| a == c)
            .count() as u64;
        // What the cut must keep: from the current leader, every committed record the follower
        // holds (that leader's log has them all); from a deposed one, what that leader had
        // committed (Kafka's "never below the leader's HW"). A deposed leader can tell a follower
        // outside the ISR to cut records its successor committed later; the copies that count
        // are the ISR's and the eligible leaders', which `check` holds to the committed prefix.
        let must_keep = if answering_is_current {
            agreed
        } else {
            agreed.min(answering_hw)
        };
        let truncated = &mut self.stats.records_truncated;
        let mut cut = |offset: u64| -> Result<(), TestCaseError> {
            *truncated += own_len.saturating_sub(offset);
            prop_assert!(
                offset >= must_keep,
                "follower {follower} truncates to {offset}, cutting committed records (it holds {agreed} of the {committed_len} committed; its end {own_len}; the answering broker {target} leads the current epoch: {answering_is_current}, its HW {answering_hw})"
            );
            Ok(())
        };
        match decision {
            Ok(FetchDecision::Read { fetch_offset, .. }) => {
                let batches: Vec<BatchMeta> = records
                    .iter()
                    .enumerate()
                    .map(|(i, r)| BatchMeta {
                        base_offset: fetch_offset + i as u64,
                        last_offset: fetch_offset + i as u64,
                        leader_epoch: r.epoch,
                    })
                    .collect();
                prop_assert_eq!(f.check_batches(&batches), Ok(()));
                b.log.extend_from_slice(&records);
                f.on_appended(&batches, b.log.len() as u64, leader_hw);
            }
            Ok(FetchDecision::Diverging(d)) => {
                let t = f.truncation_for(d);
                cut(t.offset)?;
                b.log.truncate(t.offset as usize);
                f.on_truncated(t.offset);
            }
            Err(
                FetchRefusal::OffsetOutOfRange { .. }
                | FetchRefusal::UnknownLastFetchedEpoch { .. },
            ) => match f.out_of_range(0, leader_len) {
                OutOfRange::TruncateTo(offset) => {
                    cut(offset)?;
                    b.log.truncate(offset as usize);
                    f.on_truncated(offset);
                }
                OutOfRange::StartAt(_) => prop_assert!(false, "the log start is always 0"),
                OutOfRange::FetchFrom(_) => {}
            },
            Err(_) => {}
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        // Every exposed prefix agrees; the committed prefix only grows; leaders' HWs only grow.
        for b in &self.brokers {
            let hw = b.high_watermark() as usize;
            prop_assert!(
                hw <= b.log.len(),
                "broker {} HW {hw} past its log end",
                b.id
            );
            let known = hw.min(self.committed.len());
            prop_assert_eq!(
                &b.log[..known],
                &self.committed[..known],
                "broker {} disagrees below its HW",
                b.id
            );
            if let Role::Leader {
                state,
                leader_epoch,
                ..
            } = &b.role
            {
                let last = self.leader_hw.entry((b.id, *leader_epoch)).or_default();
                prop_assert!(state.high_watermark() >= *last, "HW decreased");
                *last = state.high_watermark();
            }
            if hw > self.committed.len() {
                self.committed = b.log[..hw].to_vec();
                self.stats.committed = hw as u64;
            }
        }
        // acks=all: release what the events allow; everything acknowledged is committed.
        for ((broker, epoch), waiters) in &mut self.waiters {
            let released = match &self.brokers[*broker as usize].role {
                Role::Leader {
                    state,
                    leader_epoch,
                    ..
                } if leader_epoch == epoch => {
                    let mut r = waiters.on_high_watermark(state.high_watermark());
                    if !state.has_min_isr() {
                        r.extend(waiters.on_below_min_isr());
                    }
                    r.extend(waiters.on_tick(self.now_ms));
                    r
                }
                _ => waiters.on_leadership_lost(),
            };
            for r in released {
                if r.result == spool_core::ErrorCode::None {
                    self.acked.extend(&self.request_ids[&r.request_id]);
                }
            }
        }
        let committed_ids: BTreeSet<u64> = self.committed.iter().map(|r| r.id).collect();
        prop_assert!(
            self.acked.is_subset(&committed_ids),
            "acknowledged records missing from the committed prefix: {:?}",
            self.acked.difference(&committed_ids).collect::<Vec<_>>()
        );
        self.stats.acked = self.acked.len() as u64;
        // The current leader's HW is on every controller-ISR member, identically.
        if self.view.leader != NO_LEADER {
            let l = &self.brokers[self.view.leader as usize];
            if let Role::Leader {
                state,
                leader_epoch,
                ..
            } = &l.role
            {
                if *leader_epoch == self.view.leader_epoch {
                    for m in &self.view.isr {
                        let end = self.brokers[*m as usize].log.len() as u64;
                        prop_assert!(
                            state.high_watermark() <= end,
                            "leader HW {} past ISR member {m}'s log end {end}",
                            state.high_watermark()
                        );
                    }
                }
            }
        }
        // ... and on every eligible leader replica (KIP-966), which may be elected.
        for m in self.view.isr.iter().chain(&self.view.eligible_leaders) {
            let log = &self.brokers[*m as usize].log;
            prop_assert!(
                log.len() >= self.committed.len(),
                "ISR member or eligible leader {m} lacks committed records ({} < {})",
                log.len(),
                self.committed.len()
            );
            prop_assert_eq!(&log[..self.committed.len()], &self.committed[..]);
        }
        // Each epoch cache describes its log.
        for b in &self.brokers {
            let entries = b.epochs().entries();
            for (offset, rec) in b.log.iter().enumerate() {
                let i = entries.partition_point(|e| e.start_offset <= offset as u64);
                prop_assert!(
                    i > 0,
                    "broker {} offset {offset} before its first epoch",
                    b.id
                );
                prop_assert_eq!(
                    entries[i - 1].epoch,
                    rec.epoch,
                    "broker {} offset {}",
                    b.id,
                    offset
                );
            }
            if let Some(latest) = entries.last() {
                prop_assert!(latest.start_offset <= b.log.len() as u64);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
    #[test]
    fn replication_keeps_committed_records_through_failovers(
        min_isr in 1usize..=3,
        events in proptest::collection::vec(ev(), 1..300),
    ) {
        let mut model = Model::new(min_isr);
        for ev in &events {
            model.step(ev)?;
        }
    }
}

/// The model is not vacuous: over a fixed set of runs, leaders change, the ISR shrinks and grows
/// through the controller (and stale proposals are refused), divergent tails are truncated, and
/// records are committed.
#[test]
fn the_model_exercises_failover_isr_changes_and_truncation() {
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (1usize..=3, proptest::collection::vec(ev(), 100..300));
    let mut total = Stats::default();
    for _ in 0..100 {
        let (min_isr, events) = strategy.new_tree(&mut runner).expect("a case").current();
        let mut model = Model::new(min_isr);
        for ev in &events {
            model.step(ev).expect("the invariants hold");
        }
        let s = model.stats;
        total.elections += s.elections;
        total.eligible_leader_elections += s.eligible_leader_elections;
        total.isr_shrinks += s.isr_shrinks;
        total.isr_expands += s.isr_expands;
        total.refusals += s.refusals;
        total.records_truncated += s.records_truncated;
        total.committed += s.committed;
        total.acked += s.acked;
        total.refused_not_enough_replicas += s.refused_not_enough_replicas;
    }
    eprintln!("{total:?}");
    assert!(total.elections > 50, "{total:?}");
    assert!(total.eligible_leader_elections > 0, "{total:?}");
    assert!(total.isr_shrinks > 5 && total.isr_expands > 20, "{total:?}");
    assert!(total.refusals > 0, "{total:?}");
    assert!(total.records_truncated > 20, "{total:?}");
    assert!(total.committed > 200, "{total:?}");
    assert!(
        total.acked > 50 && total.refused_not_enough_replicas > 10,
        "{total:?}"
    );
}
