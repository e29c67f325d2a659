//! The group member driven by scripted coordinator responses, with a clock moved by hand.

use super::*;
use crate::client::group::protocol::{Assignment, Subscription};
use crate::client::net::ClientCore;
use crate::client::test_util::{metadata, requests, respond};
use crate::codec::Request;
use crate::wire::*;
use crate::ErrorCode;

pub(super) const T0: u64 = 1_000_000;

fn config(assignor: Assignor, instance: Option<&str>) -> ConsumerConfig {
    ConsumerConfig {
        group_id: Some("g".into()),
        group_instance_id: instance.map(str::to_owned),
        assignor,
        ..ConsumerConfig::default()
    }
}

pub(super) fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

pub(super) fn tps(ps: &[i32]) -> Vec<TopicPartition> {
    ps.iter().map(|p| tp(*p)).collect()
}

/// The one request `core` sends now (panics on more or none).
pub(super) fn one(core: &mut GroupCore, now_ms: u64) -> (String, Request) {
    let mut r = requests(&core.poll_actions(now_ms));
    assert_eq!(r.len(), 1, "expected one request, got {r:?}");
    r.remove(0)
}

pub(super) fn reply(
    core: &mut GroupCore,
    (addr, req): &(String, Request),
    body: ResponseBodyT,
    now_ms: u64,
) {
    core.on_response(addr, respond(req, body, bytes::Bytes::new()), now_ms);
}

fn found(core: &mut GroupCore) {
    let req = one(core, T0);
    assert!(matches!(
        req.1.header.body,
        RequestBodyT::FindCoordinatorRequest(_)
    ));
    let mut r = FindCoordinatorResponseT::default();
    r.host = Some("c".into());
    r.port = 1;
    reply(
        core,
        &req,
        ResponseBodyT::FindCoordinatorResponse(Box::new(r)),
        T0,
    );
}

fn join_response(
    member: &str,
    leader: &str,
    generation: i32,
    protocol: Assignor,
    members: &[(&str, Subscription)],
) -> ResponseBodyT {
    let mut r = JoinGroupResponseT::default();
    r.member_id = Some(member.into());
    r.leader = Some(leader.into());
    r.generation_id = generation;
    r.protocol_name = Some(protocol.name().into());
    r.members = Some(
        members
            .iter()
            .map(|(id, s)| JoinGroupResponseMemberT {
                member_id: (*id).into(),
                group_instance_id: None,
                metadata: Some(s.encode().unwrap().to_vec()),
            })
            .collect(),
    );
    ResponseBodyT::JoinGroupResponse(Box::new(r))
}

fn sync_response(partitions: &[i32]) -> ResponseBodyT {
    let mut r = SyncGroupResponseT::default();
    r.assignment = Some(
        Assignment {
            partitions: tps(partitions),
            user_data: None,
        }
        .encode()
        .unwrap()
        .to_vec(),
    );
    ResponseBodyT::SyncGroupResponse(Box::new(r))
}

pub(super) fn error_body(req: &Request, code: ErrorCode) -> ResponseBodyT {
    match &req.header.body {
        RequestBodyT::HeartbeatRequest(_) => {
            let mut r = HeartbeatResponseT::default();
            r.error_code = code.into();
            ResponseBodyT::HeartbeatResponse(Box::new(r))
        }
        RequestBodyT::JoinGroupRequest(_) => {
            let mut r = JoinGroupResponseT::default();
            r.error_code = code.into();
            r.member_id = Some("assigned-id".into());
            ResponseBodyT::JoinGroupResponse(Box::new(r))
        }
        RequestBodyT::OffsetCommitRequest(c) => {
            let mut r = OffsetCommitResponseT::default();
            r.topics = Some(
                c.topics
                    .iter()
                    .flatten()
                    .map(|t| OffsetCommitResponseTopicT {
                        name: t.name.clone(),
                        partitions: Some(
                            t.partitions
                                .iter()
                                .flatten()
                                .map(|p| {
                                    let mut pr = OffsetCommitResponsePartitionT::default();
                                    pr.partition_index = p.partition_index;
                                    pr.error_code = code.into();
                                    pr
                                })
                                .collect(),
                        ),
                    })
                    .collect(),
            );
            ResponseBodyT::OffsetCommitResponse(Box::new(r))
        }
        RequestBodyT::LeaveGroupRequest(_) => {
            let mut r = LeaveGroupResponseT::default();
            r.error_code = code.into();
            ResponseBodyT::LeaveGroupResponse(Box::new(r))
        }
        other => panic!("no scripted answer for {other:?}"),
    }
}

fn offset_fetch_response(req: &Request, committed: &[(i32, i64)]) -> ResponseBodyT {
    let RequestBodyT::OffsetFetchRequest(f) = &req.header.body else {
        panic!("not an offset fetch: {req:?}")
    };
    let mut r = OffsetFetchResponseT::default();
    r.topics = Some(
        f.topics
            .iter()
            .flatten()
            .map(|t| OffsetFetchResponseTopicT {
                name: t.name.clone(),
                partitions: Some(
                    t.partition_indexes
                        .iter()
                        .flatten()
                        .map(|p| {
                            let mut pr = OffsetFetchResponsePartitionT::default();
                            pr.partition_index = *p;
                            pr.committed_offset = committed
                                .iter()
                                .find(|(q, _)| q == p)
                                .map_or(-1, |(_, o)| *o);
                            pr
                        })
                        .collect(),
                ),
            })
            .collect(),
    );
    ResponseBodyT::OffsetFetchResponse(Box::new(r))
}

/// A sole member (the leader) of `g` holding all four partitions of `t`, stable in generation 1.
pub(super) fn stable_leader(assignor: Assignor, instance: Option<&str>) -> GroupCore {
    let mut core = GroupCore::new(
        config(assignor, instance),
        vec!["boot:1".into()],
        vec!["t".into()],
        T0,
    )
    .unwrap();
    found(&mut core);
    let join = one(&mut core, T0);
    let RequestBodyT::JoinGroupRequest(j) = &join.1.header.body else {
        panic!("not a join: {join:?}")
    };
    assert_eq!(join.0, "c:1");
    assert_eq!(j.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(j.member_id.as_deref(), Some(""));
    let protocols = j.protocols.clone().unwrap();
    assert_eq!(protocols[0].name, assignor.name());
    let sub = Subscription::decode(protocols[0].metadata.as_deref().unwrap()).unwrap();
    assert_eq!(sub.topics, vec!["t".to_owned()]);
    reply(
        &mut core,
        &join,
        join_response("m1", "m1", 1, assignor, &[("m1", sub)]),
        T0,
    );
    let md = one(&mut core, T0);
    assert!(matches!(md.1.header.body, RequestBodyT::MetadataRequest(_)));
    reply(&mut core, &md, metadata("t", &[0, 0, 0, 0], 1), T0);
    let sync = one(&mut core, T0);
    let RequestBodyT::SyncGroupRequest(s) = &sync.1.header.body else {
        panic!("not a sync: {sync:?}")
    };
    assert_eq!(s.generation_id, 1);
    let given = s.assignments.clone().unwrap();
    assert_eq!(given.len(), 1);
    assert_eq!(given[0].member_id, "m1");
    let a = Assignment::decode(given[0].assignment.as_deref().unwrap()).unwrap();
    assert_eq!(a.partitions, tps(&[0, 1, 2, 3]));
    reply(&mut core, &sync, sync_response(&[0, 1, 2, 3]), T0);
    let fetch = one(&mut core, T0);
    reply(
        &mut core,
        &fetch,
        offset_fetch_response(&fetch.1, &[(0, 5)]),
        T0,
    );
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Assigned {
            generation: 1,
            added: tps(&[0, 1, 2, 3]),
            assignment: tps(&[0, 1, 2, 3]),
            start_offsets: vec![(tp(0), 5)],
        }]
    );
    assert!(core.is_stable());
    core
}

#[test]
fn leader_joins_assigns_starts_at_committed_offsets_and_heartbeats() {
    let mut core = stable_leader(Assignor::Range, None);
    assert!(requests(&core.poll_actions(T0 + 1)).is_empty());
    let hb_at = core.next_wakeup_ms(T0 + 1).unwrap();
    assert_eq!(hb_at, T0 + 3_000, "heartbeat_interval_ms after the sync");
    core.polled(hb_at);
    let hb = one(&mut core, hb_at);
    let RequestBodyT::HeartbeatRequest(h) = &hb.1.header.body else {
        panic!("not a heartbeat: {hb:?}")
    };
    assert_eq!((h.generation_id, h.member_id.as_deref()), (1, Some("m1")));
}

#[test]
fn eager_rebalance_commits_then_revokes_everything_before_rejoining() {
    let mut core = stable_leader(Assignor::Range, None);
    core.processed(&tp(1), 7);
    core.polled(T0 + 3_000);
    let hb = one(&mut core, T0 + 3_000);
    reply(
        &mut core,
        &hb,
        error_body(&hb.1, ErrorCode::RebalanceInProgress),
        T0 + 3_000,
    );
    let commit = one(&mut core, T0 + 3_001);
    let RequestBodyT::OffsetCommitRequest(c) = &commit.1.header.body else {
        panic!("the commit comes before the rejoin: {commit:?}")
    };
    assert_eq!((c.generation_id, c.member_id.as_deref()), (1, Some("m1")));
    assert!(
        core.take_events().is_empty(),
        "nothing revoked before the commit is answered"
    );
    reply(
        &mut core,
        &commit,
        error_body(&commit.1, ErrorCode::None),
        T0 + 3_002,
    );
    assert_eq!(
        core.take_events(),
        vec![
            GroupEvent::Committed {
                id: 1,
                kind: CommitKind::Revoke,
                offsets: vec![(tp(1), 7)]
            },
            GroupEvent::Revoked {
                generation: 1,
                partitions: tps(&[0, 1, 2, 3]),
                lost: false
            },
        ]
    );
    let join = one(&mut core, T0 + 3_003);
    let RequestBodyT::JoinGroupRequest(j) = &join.1.header.body else {
        panic!("rejoin expected: {join:?}")
    };
    assert_eq!(
        j.member_id.as_deref(),
        Some("m1"),
        "a rebalance keeps the member id"
    );
}

#[test]
fn cooperative_revokes_only_what_moves_then_rejoins_once_more() {
    let mut core = stable_leader(Assignor::CooperativeSticky, None);
    core.processed(&tp(3), 42);
    core.polled(T0 + 3_000);
    let hb = one(&mut core, T0 + 3_000);
    reply(
        &mut core,
        &hb,
        error_body(&hb.1, ErrorCode::RebalanceInProgress),
        T0 + 3_000,
    );
    let join = one(&mut core, T0 + 3_001);
    assert!(
        core.take_events().is_empty(),
        "cooperative: nothing revoked before the join"
    );
    let RequestBodyT::JoinGroupRequest(j) = &join.1.header.body else {
        panic!("rejoin expected: {join:?}")
    };
    let sub =
        Subscription::decode(j.protocols.clone().unwrap()[0].metadata.as_deref().unwrap()).unwrap();
    assert_eq!(sub.owned_partitions, tps(&[0, 1, 2, 3]));
    // Another member leads now and keeps 0 and 1 here; 2 and 3 move.
    reply(
        &mut core,
        &join,
        join_response("m1", "m2", 2, Assignor::CooperativeSticky, &[]),
        T0 + 3_002,
    );
    let sync = one(&mut core, T0 + 3_002);
    reply(&mut core, &sync, sync_response(&[0, 1]), T0 + 3_003);
    assert!(
        core.is_revoking(),
        "no records for the application until the revocation is done"
    );
    let commit = one(&mut core, T0 + 3_004);
    // A commit asked for during the revocation goes out after it: by then 2 and 3 are gone, and
    // a commit of them could overwrite their next owner's progress.
    let late = core.commit(CommitKind::Async, T0 + 3_004).unwrap();
    reply(
        &mut core,
        &commit,
        error_body(&commit.1, ErrorCode::None),
        T0 + 3_005,
    );
    assert!(!core.is_revoking());
    assert_eq!(
        core.take_events(),
        vec![
            GroupEvent::Committed {
                id: 1,
                kind: CommitKind::Revoke,
                offsets: vec![(tp(3), 42)]
            },
            GroupEvent::Revoked {
                generation: 2,
                partitions: tps(&[2, 3]),
                lost: false
            },
            GroupEvent::Assigned {
                generation: 2,
                added: vec![],
                assignment: tps(&[0, 1]),
                start_offsets: vec![]
            },
        ]
    );
    assert!(requests(&core.poll_actions(T0 + 3_006)).is_empty());
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Committed {
            id: late,
            kind: CommitKind::Async,
            offsets: vec![]
        }]
    );
    let again = one(&mut core, T0 + 3_006);
    let RequestBodyT::JoinGroupRequest(j) = &again.1.header.body else {
        panic!("a second join so the freed partitions can move: {again:?}")
    };
    let sub =
        Subscription::decode(j.protocols.clone().unwrap()[0].metadata.as_deref().unwrap()).unwrap();
    assert_eq!(sub.owned_partitions, tps(&[0, 1]));
}

#[test]
fn illegal_generation_and_unknown_member_lose_partitions_without_a_commit() {
    for (code, member_after) in [
        (ErrorCode::IllegalGeneration, "m1"),
        (ErrorCode::UnknownMemberId, ""),
    ] {
        let mut core = stable_leader(Assignor::Range, None);
        core.processed(&tp(0), 9);
        core.polled(T0 + 3_000);
        let hb = one(&mut core, T0 + 3_000);
        reply(&mut core, &hb, error_body(&hb.1, code), T0 + 3_000);
        assert_eq!(
            core.take_events(),
            vec![GroupEvent::Revoked {
                generation: 1,
                partitions: tps(&[0, 1, 2, 3]),
                lost: true
            }]
        );
        let join = one(&mut core, T0 + 3_001);
        let RequestBodyT::JoinGroupRequest(j) = &join.1.header.body else {
            panic!("{code}: rejoin expected without a commit: {join:?}")
        };
        assert_eq!(j.member_id.as_deref(), Some(member_after), "{code}");
    }
}

#[test]
fn member_id_required_rejoins_with_the_given_id() {
    let mut core = GroupCore::new(
        config(Assignor::Range, None),
        vec!["boot:1".into()],
        vec!["t".into()],
        T0,
    )
    .unwrap();
    found(&mut core);
    let join = one(&mut core, T0);
    reply(
        &mut core,
        &join,
        error_body(&join.1, ErrorCode::MemberIdRequired),
        T0,
    );
    let join = one(&mut core, T0);
    let RequestBodyT::JoinGroupRequest(j) = &join.1.header.body else {
        panic!("rejoin expected: {join:?}")
    };
    assert_eq!(j.member_id.as_deref(), Some("assigned-id"));
}

#[test]
fn not_polling_within_max_poll_interval_leaves_and_the_next_poll_rejoins() {
    let mut core = stable_leader(Assignor::Range, None);
    let late = T0 + 300_001;
    let actions = requests(&core.poll_actions(late));
    assert!(
        actions
            .iter()
            .any(|(_, r)| matches!(r.header.body, RequestBodyT::LeaveGroupRequest(_))),
        "LeaveGroup expected: {actions:?}"
    );
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Revoked {
            generation: 1,
            partitions: tps(&[0, 1, 2, 3]),
            lost: true
        }]
    );
    assert!(requests(&core.poll_actions(late + 1))
        .iter()
        .all(|(_, r)| !matches!(r.header.body, RequestBodyT::JoinGroupRequest(_))));
    core.polled(late + 2);
    let join = one(&mut core, late + 2);
    assert!(matches!(
        join.1.header.body,
        RequestBodyT::JoinGroupRequest(_)
    ));
}

#[test]
fn close_commits_revokes_and_leaves_unless_static() {
    for instance in [None, Some("i-1")] {
        let mut core = stable_leader(Assignor::Range, instance);
        core.processed(&tp(2), 11);
        core.close(T0 + 10);
        let commit = one(&mut core, T0 + 10);
        reply(
            &mut core,
            &commit,
            error_body(&commit.1, ErrorCode::None),
            T0 + 11,
        );
        let events = core.take_events();
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            matches!(&events[0], GroupEvent::Committed { kind: CommitKind::Close, offsets, .. } if offsets == &vec![(tp(2), 11)])
        );
        assert!(matches!(
            &events[1],
            GroupEvent::Revoked { lost: false, .. }
        ));
        let rest = requests(&core.poll_actions(T0 + 12));
        if instance.is_some() {
            assert!(
                rest.is_empty(),
                "a static member never sends LeaveGroup: {rest:?}"
            );
            assert!(core.is_closed());
        } else {
            assert_eq!(rest.len(), 1);
            let RequestBodyT::LeaveGroupRequest(l) = &rest[0].1.header.body else {
                panic!("LeaveGroup expected: {rest:?}")
            };
            assert_eq!(
                l.members.clone().unwrap()[0].member_id.as_deref(),
                Some("m1")
            );
            assert!(!core.is_closed());
            reply(
                &mut core,
                &rest[0],
                error_body(&rest[0].1, ErrorCode::None),
                T0 + 13,
            );
            assert!(core.is_closed());
        }
    }
}

#[test]
fn async_commits_are_never_retried_sync_commits_are() {
    let mut core = stable_leader(Assignor::Range, None);
    core.processed(&tp(0), 6);
    let id = core.commit(CommitKind::Async, T0).unwrap();
    let commit = one(&mut core, T0);
    reply(
        &mut core,
        &commit,
        error_body(&commit.1, ErrorCode::NotCoordinator),
        T0 + 1,
    );
    assert!(matches!(
        core.take_events().as_slice(),
        [GroupEvent::CommitFailed { id: i, kind: CommitKind::Async, .. }] if *i == id
    ));
    // The coordinator must be found again, after a backoff (the broker that said "not me" and
    // the one that named it may disagree for a while); no commit is resent.
    assert!(
        requests(&core.poll_actions(T0 + 2)).is_empty(),
        "no FindCoordinator at once"
    );
    let t = core.next_wakeup_ms(T0 + 2).unwrap();
    assert!(t > T0 + 2, "{t}");
    found_again(&mut core, t);
    let id = core.commit(CommitKind::Sync, t + 1).unwrap();
    let commit = one(&mut core, t + 1);
    reply(
        &mut core,
        &commit,
        error_body(&commit.1, ErrorCode::NotCoordinator),
        t + 2,
    );
    assert!(
        core.take_events().is_empty(),
        "a sync commit is retried, not failed"
    );
    let at = core.next_wakeup_ms(t + 2).unwrap();
    found_again(&mut core, at);
    let mut commits: Vec<_> = requests(&core.poll_actions(at))
        .into_iter()
        .filter(|(_, r)| matches!(r.header.body, RequestBodyT::OffsetCommitRequest(_)))
        .collect();
    assert_eq!(
        commits.len(),
        1,
        "the sync commit is resent to the coordinator found again"
    );
    let commit = commits.remove(0);
    assert!(matches!(
        commit.1.header.body,
        RequestBodyT::OffsetCommitRequest(_)
    ));
    reply(
        &mut core,
        &commit,
        error_body(&commit.1, ErrorCode::None),
        at,
    );
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Committed {
            id,
            kind: CommitKind::Sync,
            offsets: vec![(tp(0), 6)]
        }]
    );
    assert_eq!(
        core.commit(CommitKind::Sync, at),
        None,
        "nothing new to commit"
    );
}

fn found_again(core: &mut GroupCore, now_ms: u64) {
    let req = one(core, now_ms);
    assert!(
        matches!(req.1.header.body, RequestBodyT::FindCoordinatorRequest(_)),
        "{req:?}"
    );
    let mut r = FindCoordinatorResponseT::default();
    r.host = Some("c".into());
    r.port = 1;
    reply(
        core,
        &req,
        ResponseBodyT::FindCoordinatorResponse(Box::new(r)),
        now_ms,
    );
}

#[test]
fn a_static_member_with_nothing_to_commit_closes_without_leave_group() {
    for instance in [None, Some("i-1")] {
        let mut core = stable_leader(Assignor::Range, instance);
        core.close(T0 + 10);
        let sent = requests(&core.poll_actions(T0 + 10));
        assert_eq!(
            core.take_events(),
            vec![GroupEvent::Revoked {
                generation: 1,
                partitions: tps(&[0, 1, 2, 3]),
                lost: false
            }]
        );
        let leaves = sent
            .iter()
            .filter(|(_, r)| matches!(r.header.body, RequestBodyT::LeaveGroupRequest(_)))
            .count();
        assert_eq!(
            leaves,
            usize::from(instance.is_none()),
            "{instance:?}: {sent:?}"
        );
        assert_eq!(core.is_closed(), instance.is_some());
    }
}

fn find(sent: Vec<(String, Request)>, what: fn(&RequestBodyT) -> bool) -> (String, Request) {
    let all = format!("{sent:?}");
    sent.into_iter()
        .find(|(_, r)| what(&r.header.body))
        .unwrap_or_else(|| panic!("not among {all}"))
}

#[test]
fn the_leader_rejoins_when_its_topics_gain_partitions() {
    let mut core = stable_leader(Assignor::Range, None);
    let is_metadata = |b: &RequestBodyT| matches!(b, RequestBodyT::MetadataRequest(_));
    // Unchanged: nothing happens.
    let at = T0 + LEADER_METADATA_CHECK_MS;
    core.polled(at);
    let md = find(requests(&core.poll_actions(at)), is_metadata);
    reply(&mut core, &md, metadata("t", &[0, 0, 0, 0], 1), at);
    assert!(core.is_stable());
    // Two more partitions: an eager rejoin (revoke everything, then JoinGroup).
    let at = at + LEADER_METADATA_CHECK_MS;
    core.polled(at);
    let md = find(requests(&core.poll_actions(at)), is_metadata);
    reply(&mut core, &md, metadata("t", &[0; 6], 1), at);
    assert!(!core.is_stable());
    let _ = core.poll_actions(at);
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Revoked {
            generation: 1,
            partitions: tps(&[0, 1, 2, 3]),
            lost: false
        }]
    );
    find(requests(&core.poll_actions(at)), |b| {
        matches!(b, RequestBodyT::JoinGroupRequest(_))
    });
}

#[test]
fn eager_rebalance_revokes_even_an_empty_assignment_once() {
    let mut core = stable_leader(Assignor::Range, None);
    // Generation 2 gives this member nothing.
    core.polled(T0 + 3_000);
    let hb = one(&mut core, T0 + 3_000);
    reply(
        &mut core,
        &hb,
        error_body(&hb.1, ErrorCode::RebalanceInProgress),
        T0 + 3_000,
    );
    let _ = core.poll_actions(T0 + 3_001);
    assert_eq!(core.take_events().len(), 1, "everything revoked");
    let join = one(&mut core, T0 + 3_001);
    reply(
        &mut core,
        &join,
        join_response("m1", "m2", 2, Assignor::Range, &[]),
        T0 + 3_002,
    );
    let sync = one(&mut core, T0 + 3_002);
    reply(&mut core, &sync, sync_response(&[]), T0 + 3_003);
    let _ = core.take_events();
    // The next rebalance still starts with a (now empty) revocation, and only one.
    core.polled(T0 + 6_003);
    let hb = one(&mut core, T0 + 6_003);
    reply(
        &mut core,
        &hb,
        error_body(&hb.1, ErrorCode::RebalanceInProgress),
        T0 + 6_003,
    );
    let _ = core.poll_actions(T0 + 6_004);
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Revoked {
            generation: 2,
            partitions: vec![],
            lost: false
        }]
    );
    let join = one(&mut core, T0 + 6_004);
    reply(
        &mut core,
        &join,
        error_body(&join.1, ErrorCode::CoordinatorLoadInProgress),
        T0 + 6_005,
    );
    let at = core.next_wakeup_ms(T0 + 6_005).unwrap();
    let join = one(&mut core, at);
    assert!(matches!(
        join.1.header.body,
        RequestBodyT::JoinGroupRequest(_)
    ));
    assert!(
        core.take_events().is_empty(),
        "a retried join revokes nothing again"
    );
}
