//! Tests of the sans-IO group coordinator: join/sync/heartbeat flows, generations, timeouts via
//! `tick`, static membership, offset commits and their checks, replay, and a proptest driving
//! random inputs that checks the invariants after every step.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spool_error_code::ErrorCode;

use super::records::{self, OffsetValue};
use super::*;

mod delete;
mod txn_offsets;

const GROUP: &str = "g";
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 60_000;

/// A coordinator with every offsets partition loaded, and a harness that completes appends.
struct H {
    c: Coordinator,
    now: u64,
    next_id: RequestId,
    answers: BTreeMap<RequestId, Response>,
    /// Appended records, in order (what a replay would read).
    log: Vec<(i32, bytes::Bytes, Option<bytes::Bytes>)>,
    /// Appended transactional records (partition, producer id, key, value), in order.
    txn_log: Vec<(i32, i64, bytes::Bytes, Option<bytes::Bytes>)>,
    /// When set, appends fail with this code.
    fail_appends: Option<ErrorCode>,
}

fn config(delay_ms: u64) -> CoordinatorConfig {
    CoordinatorConfig {
        offsets_partitions: 4,
        initial_rebalance_delay_ms: delay_ms,
        min_session_timeout_ms: 6_000,
        max_session_timeout_ms: 1_800_000,
    }
}

impl H {
    fn new(delay_ms: u64) -> Self {
        let mut c = Coordinator::new(config(delay_ms), 7);
        for p in 0..4 {
            c.begin_load(p);
            c.finish_load(p, 0);
        }
        Self {
            c,
            now: 1_000,
            next_id: 1,
            answers: BTreeMap::new(),
            log: Vec::new(),
            txn_log: Vec::new(),
            fail_appends: None,
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(a) = queue.pop_front() {
            match a {
                Action::Respond(id, r) => {
                    assert!(
                        self.answers.insert(id, r).is_none(),
                        "request {id} answered twice"
                    );
                }
                Action::Persist {
                    token,
                    partition,
                    records,
                } => {
                    let result = match self.fail_appends {
                        Some(code) => Err(code),
                        None => {
                            for (k, v) in records {
                                self.log.push((partition, k, v));
                            }
                            Ok(())
                        }
                    };
                    queue.extend(self.c.persisted(token, result, self.now));
                }
                Action::PersistTxn {
                    token,
                    partition,
                    producer_id,
                    records,
                    ..
                } => {
                    for (k, v) in records {
                        self.txn_log.push((partition, producer_id, k, v));
                    }
                    queue.extend(self.c.persisted(token, Ok(()), self.now));
                }
            }
        }
    }

    fn send(&mut self, make: impl FnOnce(RequestId) -> Input) -> RequestId {
        let id = self.next_id;
        self.next_id += 1;
        let actions = self.c.handle(make(id), self.now);
        self.apply(actions);
        id
    }

    fn advance(&mut self, ms: u64) {
        self.now += ms;
        let actions = self.c.tick(self.now);
        self.apply(actions);
    }

    fn join_args(&self, member: &str, instance: Option<&str>, meta: &[u8]) -> JoinArgs {
        JoinArgs {
            group_id: GROUP.into(),
            member_id: member.into(),
            group_instance_id: instance.map(String::from),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: SESSION_MS,
            rebalance_timeout_ms: REBALANCE_MS,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), meta.to_vec())],
        }
    }

    fn join(&mut self, member: &str) -> RequestId {
        let a = self.join_args(member, None, b"m");
        self.send(|id| Input::Join(id, a))
    }

    fn join_static(&mut self, member: &str, instance: &str) -> RequestId {
        let a = self.join_args(member, Some(instance), b"m");
        self.send(|id| Input::Join(id, a))
    }

    fn joined(&self, id: RequestId) -> Option<&JoinResult> {
        match self.answers.get(&id) {
            Some(Response::Join(j)) => Some(j),
            None => None,
            other => panic!("not a join answer: {other:?}"),
        }
    }

    fn sync(
        &mut self,
        member: &str,
        generation: i32,
        assignments: Vec<(String, Vec<u8>)>,
    ) -> RequestId {
        let a = SyncArgs {
            group_id: GROUP.into(),
            generation,
            member_id: member.into(),
            group_instance_id: None,
            assignments,
        };
        self.send(|id| Input::Sync(id, a))
    }

    fn synced(&self, id: RequestId) -> Option<&SyncResult> {
        match self.answers.get(&id) {
            Some(Response::Sync(s)) => Some(s),
            None => None,
            other => panic!("not a sync answer: {other:?}"),
        }
    }

    fn heartbeat(&mut self, member: &str, generation: i32) -> ErrorCode {
        let a = HeartbeatArgs {
            group_id: GROUP.into(),
            generation,
            member_id: member.into(),
            group_instance_id: None,
        };
        let id = self.send(|id| Input::Heartbeat(id, a));
        match self.answers.get(&id) {
            Some(Response::Heartbeat(c)) => *c,
            other => panic!("not a heartbeat answer: {other:?}"),
        }
    }

    fn commit(&mut self, member: &str, generation: i32, offset: i64) -> Vec<ErrorCode> {
        let a = CommitArgs {
            group_id: GROUP.into(),
            generation,
            member_id: member.into(),
            group_instance_id: None,
            offsets: vec![("t".into(), 0, value(offset))],
            producer: None,
        };
        let id = self.send(|id| Input::Commit(id, a));
        match self.answers.get(&id) {
            Some(Response::Commit(r)) => r.iter().map(|x| x.2).collect(),
            other => panic!("not a commit answer: {other:?}"),
        }
    }

    fn committed(&self) -> Option<i64> {
        let got = self
            .c
            .fetch_offsets(GROUP, Some(vec![("t".into(), vec![0])]))
            .unwrap();
        got[0].2.as_ref().map(|v| v.offset)
    }

    fn state(&self) -> GroupState {
        self.c.group(GROUP).map_or(GroupState::Dead, |g| g.state())
    }

    /// One member joins a fresh group (no initial delay) and becomes Stable; returns its id.
    fn single_stable_member(&mut self) -> (String, i32) {
        let j = self.join("");
        let r = self.joined(j).cloned().expect("join answered at once");
        assert_eq!(r.error, ErrorCode::None);
        let s = self.sync(
            &r.member_id,
            r.generation,
            vec![(r.member_id.clone(), b"a0".to_vec())],
        );
        assert_eq!(self.synced(s).unwrap().error, ErrorCode::None);
        (r.member_id, r.generation)
    }
}

fn value(offset: i64) -> OffsetValue {
    OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 0,
    }
}

#[test]
fn one_member_joins_syncs_and_heartbeats() {
    let mut h = H::new(0);
    let (m, gen) = h.single_stable_member();
    assert_eq!(gen, 1);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.c.group(GROUP).unwrap().leader(), Some(m.as_str()));
    assert_eq!(h.heartbeat(&m, gen), ErrorCode::None);
    assert_eq!(h.heartbeat(&m, gen - 1), ErrorCode::IllegalGeneration);
    assert_eq!(h.heartbeat("nobody", gen), ErrorCode::UnknownMemberId);
    // The group-metadata record was written before the sync was answered.
    assert!(h.log.iter().any(|(_, k, v)| {
        v.is_some()
            && records::decode_key(k).unwrap()
                == records::RecordKey::Group {
                    group: GROUP.into(),
                }
    }));
}

#[test]
fn member_ids_are_assigned_from_the_client_id() {
    let mut h = H::new(0);
    let (m, _) = h.single_stable_member();
    assert!(m.starts_with("c-") && m.len() > 20, "{m}");
}

#[test]
fn rebalance_completes_as_soon_as_every_member_rejoined() {
    let mut h = H::new(0);
    let (a, gen1) = h.single_stable_member();
    // b joins: a rebalance starts; a learns of it by heartbeat.
    let jb = h.join("");
    assert!(h.joined(jb).is_none(), "b waits for a to rejoin");
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, gen1), ErrorCode::RebalanceInProgress);
    // a rejoins: the join phase ends at once, without waiting for any timeout.
    let ja = h.join(&a);
    let ra = h.joined(ja).cloned().unwrap();
    let rb = h.joined(jb).cloned().unwrap();
    assert_eq!(ra.generation, gen1 + 1);
    assert_eq!(rb.generation, gen1 + 1);
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2, "the leader gets every member");
    assert!(rb.members.is_empty(), "followers get no member list");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    // The follower's sync waits for the leader's.
    let sb = h.sync(&rb.member_id, rb.generation, vec![]);
    assert!(h.synced(sb).is_none());
    let sa = h.sync(
        &a,
        ra.generation,
        vec![
            (a.clone(), b"A".to_vec()),
            (rb.member_id.clone(), b"B".to_vec()),
        ],
    );
    assert_eq!(h.synced(sa).unwrap().assignment, b"A");
    assert_eq!(h.synced(sb).unwrap().assignment, b"B");
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn a_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout() {
    let mut h = H::new(0);
    let (a, _) = h.single_stable_member();
    let jb = h.join("");
    // a keeps heartbeating (told REBALANCE_IN_PROGRESS each time) but never rejoins.
    for _ in 0..11 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&a, 1), ErrorCode::RebalanceInProgress);
    }
    h.advance(REBALANCE_MS as u64 - 55_001);
    assert!(h.joined(jb).is_none());
    h.advance(1);
    let rb = h.joined(jb).cloned().unwrap();
    assert_eq!(rb.error, ErrorCode::None);
    assert_eq!(rb.leader, rb.member_id, "b leads once a is gone");
    assert!(!h.c.group(GROUP).unwrap().members.contains_key(&a));
    assert_eq!(h.heartbeat(&a, rb.generation), ErrorCode::UnknownMemberId);
}

#[test]
fn session_timeout_removes_a_silent_member_and_rebalances() {
    let mut h = H::new(0);
    let (a, gen) = h.single_stable_member();
    h.advance(SESSION_MS as u64 - 1);
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::None);
    h.advance(SESSION_MS as u64 - 1);
    assert_eq!(h.state(), GroupState::Stable);
    h.advance(1);
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(h.c.group(GROUP).map(|g| g.generation()), Some(gen + 1));
    h.advance(coordinator::EMPTY_GROUP_RETENTION_MS);
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "an empty group without offsets is dropped"
    );
}

#[test]
fn new_group_waits_the_initial_delay_and_extends_it_for_new_members() {
    let mut h = H::new(3_000);
    let j1 = h.join("");
    h.advance(2_000);
    assert!(h.joined(j1).is_none());
    let j2 = h.join("");
    h.advance(1_000);
    // A member arrived during the delay: it is extended once more.
    assert!(h.joined(j1).is_none());
    h.advance(2_900);
    assert!(h.joined(j1).is_none());
    h.advance(100);
    let r1 = h.joined(j1).cloned().unwrap();
    let r2 = h.joined(j2).cloned().unwrap();
    assert_eq!((r1.generation, r2.generation), (1, 1));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
}

#[test]
fn initial_delay_applies_only_to_a_new_group() {
    let mut h = H::new(3_000);
    let j1 = h.join("");
    h.advance(3_000);
    let r1 = h.joined(j1).cloned().unwrap();
    h.sync(&r1.member_id, r1.generation, vec![]);
    assert_eq!(h.state(), GroupState::Stable);
    let j2 = h.join("");
    let ja = h.join(&r1.member_id);
    assert!(h.joined(j2).is_some() && h.joined(ja).is_some());
}

#[test]
fn static_member_rejoin_gets_a_new_id_and_no_rebalance() {
    let mut h = H::new(0);
    let j = h.join_static("", "i1");
    let r = h.joined(j).cloned().unwrap();
    h.sync(
        &r.member_id,
        r.generation,
        vec![(r.member_id.clone(), b"mine".to_vec())],
    );
    assert_eq!(h.state(), GroupState::Stable);
    // The process restarts within the session timeout and rejoins with its instance id.
    let j2 = h.join_static("", "i1");
    let r2 = h.joined(j2).cloned().unwrap();
    assert_eq!(r2.error, ErrorCode::None);
    assert_ne!(r2.member_id, r.member_id);
    assert_eq!(r2.generation, r.generation, "no rebalance");
    assert_eq!(h.state(), GroupState::Stable);
    let s = h.sync(&r2.member_id, r2.generation, vec![]);
    assert_eq!(h.synced(s).unwrap().assignment, b"mine");
    // The old member id is fenced.
    let a = HeartbeatArgs {
        group_id: GROUP.into(),
        generation: r.generation,
        member_id: r.member_id.clone(),
        group_instance_id: Some("i1".into()),
    };
    let id = h.send(|id| Input::Heartbeat(id, a));
    assert_eq!(
        h.answers[&id],
        Response::Heartbeat(ErrorCode::FencedInstanceId)
    );
}

#[test]
fn static_member_with_changed_subscription_rebalances() {
    let mut h = H::new(0);
    let j = h.join_static("", "i1");
    let r = h.joined(j).cloned().unwrap();
    h.sync(&r.member_id, r.generation, vec![]);
    let a = h.join_args("", Some("i1"), b"other topics");
    let j2 = h.send(|id| Input::Join(id, a));
    let r2 = h.joined(j2).cloned().unwrap();
    assert_eq!(r2.generation, r.generation + 1);
}

#[test]
fn commit_checks_generation_member_and_rebalance() {
    let mut h = H::new(0);
    let (a, gen) = h.single_stable_member();
    assert_eq!(h.commit(&a, gen, 10), vec![ErrorCode::None]);
    assert_eq!(h.committed(), Some(10));
    assert_eq!(
        h.commit(&a, gen - 1, 11),
        vec![ErrorCode::IllegalGeneration]
    );
    assert_eq!(
        h.commit("stranger", gen, 12),
        vec![ErrorCode::UnknownMemberId]
    );
    // A simple commit (generation -1) is refused while the group has members.
    assert_eq!(h.commit("", -1, 13), vec![ErrorCode::UnknownMemberId]);
    assert_eq!(h.committed(), Some(10));
    // A new member joins and a rejoins: CompletingRebalance refuses commits of the new generation.
    let jb = h.join("");
    assert_eq!(
        h.commit(&a, gen, 14),
        vec![ErrorCode::None],
        "PreparingRebalance still takes the old generation"
    );
    let ja = h.join(&a);
    let gen2 = h.joined(ja).unwrap().generation;
    assert!(h.joined(jb).is_some());
    assert_eq!(h.commit(&a, gen2, 15), vec![ErrorCode::RebalanceInProgress]);
    assert_eq!(h.commit(&a, gen, 16), vec![ErrorCode::IllegalGeneration]);
    assert_eq!(h.committed(), Some(14));
}

#[test]
fn simple_commit_into_an_unknown_or_empty_group() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    assert_eq!(h.committed(), Some(5));
    assert_eq!(h.commit("m", 3, 6), vec![ErrorCode::UnknownMemberId]);
    let mut h = H::new(0);
    assert_eq!(h.commit("m", 3, 6), vec![ErrorCode::IllegalGeneration]);
}

#[test]
fn a_failed_append_changes_nothing() {
    let mut h = H::new(0);
    let (a, gen) = h.single_stable_member();
    assert_eq!(h.commit(&a, gen, 1), vec![ErrorCode::None]);
    h.fail_appends = Some(ErrorCode::NotCoordinator);
    assert_eq!(h.commit(&a, gen, 2), vec![ErrorCode::NotCoordinator]);
    assert_eq!(h.committed(), Some(1));
}

#[test]
fn invalid_session_timeout_and_protocols() {
    let mut h = H::new(0);
    let mut a = h.join_args("", None, b"m");
    a.session_timeout_ms = 5_999;
    let id = h.send(|id| Input::Join(id, a));
    assert_eq!(
        h.joined(id).unwrap().error,
        ErrorCode::InvalidSessionTimeout
    );
    let (_, _) = h.single_stable_member();
    let mut b = h.join_args("", None, b"m");
    b.protocols = vec![("roundrobin".into(), vec![])];
    let id = h.send(|id| Input::Join(id, b));
    assert_eq!(
        h.joined(id).unwrap().error,
        ErrorCode::InconsistentGroupProtocol
    );
}

#[test]
fn leave_rebalances_the_rest_and_last_leave_empties() {
    let mut h = H::new(0);
    let (a, _) = h.single_stable_member();
    let a2 = LeaveArgs {
        group_id: GROUP.into(),
        members: vec![(a.clone(), None)],
    };
    let id = h.send(|id| Input::Leave(id, a2));
    assert_eq!(
        h.answers[&id],
        Response::Leave(ErrorCode::None, vec![(a, None, ErrorCode::None)])
    );
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn requests_wait_while_a_partition_loads_and_replay_restores_the_group() {
    let mut h = H::new(0);
    let (a, gen) = h.single_stable_member();
    assert_eq!(h.commit(&a, gen, 42), vec![ErrorCode::None]);
    let p = coordinator_partition(GROUP, 4);
    let mut c = Coordinator::new(config(0), 9);
    c.begin_load(p);
    let hb = HeartbeatArgs {
        group_id: GROUP.into(),
        generation: gen,
        member_id: a.clone(),
        group_instance_id: None,
    };
    let out = c.handle(Input::Heartbeat(1, hb.clone()), 0);
    assert_eq!(
        out,
        vec![Action::Respond(
            1,
            Response::Heartbeat(ErrorCode::CoordinatorLoadInProgress)
        )]
    );
    for (_, k, v) in &h.log {
        c.load_record(p, k, v.as_deref(), None).unwrap();
    }
    c.finish_load(p, 100);
    let out = c.handle(Input::Heartbeat(2, hb), 200);
    assert_eq!(
        out,
        vec![Action::Respond(2, Response::Heartbeat(ErrorCode::None))]
    );
    let g = c.group(GROUP).unwrap();
    assert_eq!((g.state(), g.generation()), (GroupState::Stable, gen));
    let got = c.fetch_offsets(GROUP, None).unwrap();
    assert_eq!(got[0].2.as_ref().map(|v| v.offset), Some(42));
    // Restored members that never heartbeat expire by their session timeout.
    let out = c.tick(200 + SESSION_MS as u64);
    assert!(out.iter().any(|a| matches!(a, Action::Persist { .. })));
    assert_eq!(c.group(GROUP).unwrap().state(), GroupState::Empty);
}

#[test]
fn deleted_topics_lose_their_offsets_with_tombstones() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    let actions = h.c.topic_deleted("t");
    h.apply(actions);
    assert_eq!(h.committed(), None);
    let (_, k, v) = h.log.last().unwrap();
    assert!(v.is_none());
    assert!(matches!(
        records::decode_key(k).unwrap(),
        records::RecordKey::Offset { .. }
    ));
}

#[test]
fn other_partitions_are_not_coordinated_here() {
    let mut c = Coordinator::new(config(0), 1);
    let out = c.handle(
        Input::Heartbeat(
            1,
            HeartbeatArgs {
                group_id: GROUP.into(),
                generation: 1,
                member_id: "m".into(),
                group_instance_id: None,
            },
        ),
        0,
    );
    assert_eq!(
        out,
        vec![Action::Respond(
            1,
            Response::Heartbeat(ErrorCode::NotCoordinator)
        )]
    );
}

#[test]
fn shutdown_answers_every_waiting_request() {
    let mut h = H::new(3_000);
    let j = h.join("");
    assert!(h.joined(j).is_none());
    let actions = h.c.shutdown();
    h.apply(actions);
    assert_eq!(
        h.joined(j).unwrap().error,
        ErrorCode::CoordinatorNotAvailable
    );
}

// ---- the invariants, under random inputs ----

#[derive(Debug, Clone)]
enum Step {
    Join(usize),
    JoinStatic(usize),
    Sync(usize),
    Heartbeat(usize),
    Leave(usize),
    Commit(usize, i64),
    Advance(u64),
    FailAppends(bool),
    /// Every client with a member id does what a well-behaved client would: rejoin during a
    /// rebalance, then sync (the leader with an assignment for everyone).
    Settle,
}

/// Learns member ids and generations from answered joins (a refused member starts over).
fn learn(h: &H, joins: &mut BTreeMap<RequestId, usize>, clients: &mut [(String, i32)]) {
    let answered: Vec<RequestId> = joins
        .keys()
        .copied()
        .filter(|id| h.answers.contains_key(id))
        .collect();
    for id in answered {
        let i = joins.remove(&id).unwrap_or(0);
        if let Some(Response::Join(j)) = h.answers.get(&id) {
            if j.error == ErrorCode::None {
                clients[i] = (j.member_id.clone(), j.generation);
            } else if j.error == ErrorCode::UnknownMemberId
                || j.error == ErrorCode::FencedInstanceId
            {
                clients[i] = (String::new(), -1);
            }
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0usize..4).prop_map(Step::Join),
        1 => (0usize..4).prop_map(Step::JoinStatic),
        2 => (0usize..4).prop_map(Step::Sync),
        2 => (0usize..4).prop_map(Step::Heartbeat),
        1 => (0usize..4).prop_map(Step::Leave),
        3 => ((0usize..4), 0i64..1000).prop_map(|(m, o)| Step::Commit(m, o)),
        2 => prop_oneof![Just(100u64), Just(3_000), Just(11_000), Just(61_000)].prop_map(Step::Advance),
        1 => any::<bool>().prop_map(Step::FailAppends),
        4 => Just(Step::Settle),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn invariants_hold_under_random_inputs(steps in proptest::collection::vec(step(), 1..80)) {
        let mut h = H::new(3_000);
        // What each simulated client believes: member id and generation.
        let mut clients: Vec<(String, i32)> = vec![(String::new(), -1); 4];
        let mut last_generation = 0;
        let mut expected_offset: Option<i64> = None;
        // Join requests not yet answered, and whose they are.
        let mut joins: BTreeMap<RequestId, usize> = BTreeMap::new();
        for s in steps {
            match s {
                Step::Join(i) | Step::JoinStatic(i) => {
                    let inst = matches!(s, Step::JoinStatic(_)).then(|| format!("i{i}"));
                    let a = h.join_args(&clients[i].0, inst.as_deref(), b"m");
                    let id = h.send(|id| Input::Join(id, a));
                    joins.insert(id, i);
                }
                Step::Sync(i) => {
                    let (m, g) = clients[i].clone();
                    let all: Vec<(String, Vec<u8>)> = clients.iter().map(|(m, _)| (m.clone(), m.as_bytes().to_vec())).collect();
                    h.sync(&m, g, all);
                }
                Step::Heartbeat(i) => {
                    let (m, g) = clients[i].clone();
                    h.heartbeat(&m, g);
                }
                Step::Leave(i) => {
                    let a = LeaveArgs { group_id: GROUP.into(), members: vec![(clients[i].0.clone(), None)] };
                    h.send(|id| Input::Leave(id, a));
                }
                Step::Commit(i, o) => {
                    let (m, g) = clients[i].clone();
                    let codes = h.commit(&m, g, o);
                    if codes == vec![ErrorCode::None] {
                        expected_offset = Some(o);
                    }
                }
                Step::Advance(ms) => h.advance(ms),
                Step::FailAppends(f) => h.fail_appends = f.then_some(ErrorCode::NotCoordinator),
                Step::Settle => {
                    if h.state() == GroupState::PreparingRebalance {
                        for (i, c) in clients.clone().iter().enumerate() {
                            if !c.0.is_empty() {
                                let a = h.join_args(&c.0, None, b"m");
                                let id = h.send(|id| Input::Join(id, a));
                                joins.insert(id, i);
                            }
                        }
                        learn(&h, &mut joins, &mut clients);
                    }
                    let all: Vec<(String, Vec<u8>)> = clients.iter().map(|(m, _)| (m.clone(), m.as_bytes().to_vec())).collect();
                    for (m, g) in clients.clone() {
                        if !m.is_empty() {
                            h.sync(&m, g, all.clone());
                        }
                    }
                }
            }
            learn(&h, &mut joins, &mut clients);
            if h.c.group(GROUP).is_none() {
                last_generation = 0;
            }
            if let Some(g) = h.c.group(GROUP) {
                prop_assert!(g.generation() >= last_generation, "generation went back");
                last_generation = g.generation();
                if let Some(l) = g.leader() {
                    prop_assert!(g.members.contains_key(l), "leader is not a member");
                }
                if g.state() == GroupState::Stable {
                    prop_assert!(g.member_count() > 0);
                    for (m, a) in g.assignments() {
                        prop_assert!(a.is_some(), "stable member {m} without an assignment");
                    }
                }
                if g.state() == GroupState::Empty {
                    prop_assert_eq!(g.member_count(), 0);
                }
            }
            let got = h.c.fetch_offsets(GROUP, Some(vec![("t".into(), vec![0])])).unwrap();
            prop_assert_eq!(got[0].2.as_ref().map(|v| v.offset), expected_offset);
        }
        // A restart replays the log: the same offsets, and the last completed generation.
        let mut replayed = Coordinator::new(config(3_000), 1);
        for p in 0..4 {
            replayed.begin_load(p);
        }
        for (p, k, v) in &h.log {
            prop_assert!(replayed.load_record(*p, k, v.as_deref(), None).is_ok());
        }
        for p in 0..4 {
            replayed.finish_load(p, h.now);
        }
        prop_assert_eq!(
            replayed.fetch_offsets(GROUP, None).unwrap(),
            h.c.fetch_offsets(GROUP, None).unwrap()
        );
        if let (Some(live), Some(back)) = (h.c.group(GROUP), replayed.group(GROUP)) {
            prop_assert!(back.generation() <= live.generation());
            if live.state() == GroupState::Stable {
                prop_assert_eq!(back.generation(), live.generation());
                prop_assert_eq!(back.state(), GroupState::Stable);
                prop_assert_eq!(back.leader(), live.leader());
                let a: Vec<_> = live.assignments().collect();
                let b: Vec<_> = back.assignments().collect();
                prop_assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn oversized_names_are_refused_and_client_ids_are_cut() {
    let mut h = H::new(0);
    let mut a = h.join_args("", None, b"m");
    a.protocols = vec![("r".repeat(coordinator::NAME_BYTES_MAX + 1), vec![])];
    let id = h.send(|id| Input::Join(id, a));
    assert_eq!(h.joined(id).unwrap().error, ErrorCode::InvalidRequest);
    let mut b = h.join_args("", None, b"m");
    b.client_id = "é".repeat(100_000);
    let id = h.send(|id| Input::Join(id, b));
    let r = h.joined(id).cloned().unwrap();
    assert_eq!(r.error, ErrorCode::None);
    let s = h.sync(&r.member_id, r.generation, vec![]);
    assert_eq!(h.synced(s).unwrap().error, ErrorCode::None);
    // The group record holding the cut client id decodes again.
    let (_, k, v) = h.log.last().unwrap();
    assert!(records::decode(k, v.as_deref()).is_ok());
}

#[test]
fn an_empty_groups_offsets_expire_after_the_retention() {
    let mut h = H::new(0);
    let (a, gen) = h.single_stable_member();
    assert_eq!(h.commit(&a, gen, 7), vec![ErrorCode::None]);
    // The member goes (session timeout): the group is Empty from now on.
    h.advance(SESSION_MS as u64);
    assert_eq!(h.state(), GroupState::Empty);
    h.advance(coordinator::OFFSETS_RETENTION_MS - 1_000);
    assert_eq!(h.committed(), Some(7), "kept within the retention");
    h.advance(1_000);
    assert_eq!(h.committed(), None);
    assert!(
        h.log.iter().any(|(_, k, v)| v.is_none()
            && matches!(
                records::decode_key(k),
                Ok(records::RecordKey::Offset { .. })
            )),
        "a tombstone was written for the offset"
    );
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "and the group, empty for long, is dropped"
    );
}
