//! The member against a coordinator that answers every request with a random outcome (success or
//! one of the errors Kafka's coordinator sends), lost connections and a clock moving in random
//! steps. Whatever happens, the member must not panic and must keep its promises:
//! - a commit names only partitions the member holds, in its current generation;
//! - it never sends JoinGroup while a revocation (commit, then `Revoked`) is under way;
//! - `Revoked` names only held partitions, and nothing is held after a revocation or loss;
//! - `Assigned` holds exactly its assignment;
//! - a static member never sends LeaveGroup; closing always ends, holding nothing.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::client::group::protocol::{Assignment, Subscription};
use crate::client::net::ClientCore;
use crate::client::test_util::{metadata, requests, respond};
use crate::wire::*;
use crate::ErrorCode;

const CODES: [ErrorCode; 8] = [
    ErrorCode::None,
    ErrorCode::None,
    ErrorCode::None,
    ErrorCode::RebalanceInProgress,
    ErrorCode::IllegalGeneration,
    ErrorCode::UnknownMemberId,
    ErrorCode::NotCoordinator,
    ErrorCode::CoordinatorLoadInProgress,
];

fn answer(req: &RequestBodyT, code: ErrorCode, generation: i32, pick: u8) -> ResponseBodyT {
    match req {
        RequestBodyT::FindCoordinatorRequest(_) => {
            let mut r = FindCoordinatorResponseT::default();
            if code.is_ok() {
                r.host = Some("c".into());
                r.port = 1;
            } else {
                r.error_code = ErrorCode::CoordinatorNotAvailable.into();
            }
            ResponseBodyT::FindCoordinatorResponse(Box::new(r))
        }
        RequestBodyT::JoinGroupRequest(j) => {
            let mut r = JoinGroupResponseT::default();
            r.error_code = code.into();
            r.member_id = Some("m1".into());
            r.generation_id = generation;
            r.protocol_name = Some(Assignor::CooperativeSticky.name().into());
            // Leader every other time; the leader sees itself and one other member.
            let leader = pick % 2 == 0;
            r.leader = Some(if leader { "m1" } else { "m2" }.into());
            if leader {
                let md = j.protocols.clone().unwrap_or_default()[0].metadata.clone();
                r.members = Some(vec![
                    JoinGroupResponseMemberT {
                        member_id: "m1".into(),
                        group_instance_id: None,
                        metadata: md,
                    },
                    JoinGroupResponseMemberT {
                        member_id: "m2".into(),
                        group_instance_id: None,
                        metadata: Some(
                            Subscription {
                                topics: vec!["t".into()],
                                ..Subscription::default()
                            }
                            .encode()
                            .unwrap()
                            .to_vec(),
                        ),
                    },
                ]);
            }
            ResponseBodyT::JoinGroupResponse(Box::new(r))
        }
        RequestBodyT::MetadataRequest(_) => metadata("t", &[0, 0, 0, 0], 1),
        RequestBodyT::SyncGroupRequest(_) => {
            let mut r = SyncGroupResponseT::default();
            r.error_code = code.into();
            let partitions = (0..4)
                .filter(|p| pick & (1 << p) != 0)
                .map(|p| TopicPartition::new("t", p))
                .collect();
            r.assignment = Some(
                Assignment {
                    partitions,
                    user_data: None,
                }
                .encode()
                .unwrap()
                .to_vec(),
            );
            ResponseBodyT::SyncGroupResponse(Box::new(r))
        }
        RequestBodyT::HeartbeatRequest(_) => {
            let mut r = HeartbeatResponseT::default();
            r.error_code = code.into();
            ResponseBodyT::HeartbeatResponse(Box::new(r))
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
        RequestBodyT::OffsetFetchRequest(_) => {
            let mut r = OffsetFetchResponseT::default();
            r.error_code = code.into();
            ResponseBodyT::OffsetFetchResponse(Box::new(r))
        }
        RequestBodyT::LeaveGroupRequest(_) => ResponseBodyT::LeaveGroupResponse(Box::default()),
        other => panic!("unexpected request {other:?}"),
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// Answer the oldest request in flight: (index into CODES, pick).
    Answer(usize, u8),
    Disconnect,
    Advance(u64),
    Poll,
    Process(i32, i64),
    CommitAsync,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        // Mostly successes, so the member gets far.
        12 => (0..CODES.len() * 4, any::<u8>())
            .prop_map(|(c, p)| Step::Answer(c.saturating_sub(CODES.len() * 3), p)),
        1 => Just(Step::Disconnect),
        2 => (0u64..4_000).prop_map(Step::Advance),
        2 => Just(Step::Poll),
        2 => (0i32..4, 0i64..1000).prop_map(|(p, o)| Step::Process(p, o)),
        1 => Just(Step::CommitAsync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_member_keeps_its_promises_whatever_the_coordinator_says(
        steps in proptest::collection::vec(step(), 1..300),
        instance in proptest::option::of(Just("i-1")),
    ) {
        let config = ConsumerConfig {
            group_id: Some("g".into()),
            group_instance_id: instance.map(str::to_owned),
            assignor: Assignor::CooperativeSticky,
            ..ConsumerConfig::default()
        };
        let mut now = 1_000_000u64;
        let mut core = GroupCore::new(config, vec!["boot:1".into()], vec!["t".into()], now).unwrap();
        let mut in_flight: std::collections::VecDeque<(String, crate::codec::Request)> = Default::default();
        let mut generation = 0;
        let mut held: BTreeSet<TopicPartition> = BTreeSet::new();
        for s in steps {
            match s {
                Step::Answer(c, pick) => {
                    if let Some((addr, req)) = in_flight.pop_front() {
                        if matches!(req.header.body, RequestBodyT::JoinGroupRequest(_)) {
                            generation += 1;
                        }
                        let body = answer(&req.header.body, CODES[c], generation, pick);
                        core.on_response(&addr, respond(&req, body, bytes::Bytes::new()), now);
                    }
                }
                Step::Disconnect => {
                    in_flight.retain(|(a, _)| a != "c:1");
                    core.on_disconnect("c:1", now);
                }
                Step::Advance(ms) => now += ms,
                Step::Poll => core.polled(now),
                Step::Process(p, o) => core.processed(&TopicPartition::new("t", p), o),
                Step::CommitAsync => { let _ = core.commit(CommitKind::Async, now); }
            }
            let revoking = core.is_revoking();
            for (addr, req) in requests(&core.poll_actions(now)) {
                match &req.header.body {
                    RequestBodyT::OffsetCommitRequest(c) => {
                        prop_assert_eq!(c.generation_id, core.generation());
                        for t in c.topics.iter().flatten() {
                            for p in t.partitions.iter().flatten() {
                                let tp = TopicPartition::new(t.name.clone(), p.partition_index);
                                prop_assert!(held.contains(&tp), "commit of {} not held ({:?})", tp, held);
                            }
                        }
                    }
                    RequestBodyT::LeaveGroupRequest(_) => {
                        prop_assert!(instance.is_none(), "a static member sent LeaveGroup");
                    }
                    RequestBodyT::JoinGroupRequest(_) => {
                        prop_assert!(!revoking && !core.is_revoking(), "JoinGroup during a revocation");
                    }
                    _ => {}
                }
                in_flight.push_back((addr, req));
            }
            for e in core.take_events() {
                match e {
                    GroupEvent::Revoked { partitions, .. } => {
                        for tp in &partitions {
                            prop_assert!(held.remove(tp), "revoked {} not held", tp);
                        }
                    }
                    GroupEvent::Assigned { assignment, .. } => {
                        held = assignment.into_iter().collect();
                    }
                    _ => {}
                }
            }
            prop_assert_eq!(&held, &core.assignment().into_iter().collect::<BTreeSet<_>>());
        }
        // Closing ends, with every request answered, in a bounded number of rounds.
        core.close(now);
        for _ in 0..20 {
            if core.is_closed() {
                break;
            }
            let sent = requests(&core.poll_actions(now));
            prop_assert!(
                instance.is_none()
                    || sent.iter().all(|(_, r)| !matches!(r.header.body, RequestBodyT::LeaveGroupRequest(_))),
                "a static member sent LeaveGroup on close"
            );
            in_flight.extend(sent);
            let _ = core.take_events();
            if let Some((addr, req)) = in_flight.pop_front() {
                let body = answer(&req.header.body, ErrorCode::None, generation, 0);
                core.on_response(&addr, respond(&req, body, bytes::Bytes::new()), now);
            } else {
                now = core.next_wakeup_ms(now).unwrap_or(now + 1_000);
            }
        }
        prop_assert!(core.is_closed(), "close did not finish");
        prop_assert!(core.assignment().is_empty());
    }
}
