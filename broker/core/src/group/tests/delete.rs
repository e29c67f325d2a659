//! Tests of DeleteGroups and OffsetDelete in the sans-IO coordinator: Kafka's errors, the
//! tombstones they write (a replay of the log shows the deletion), the Dead window while an
//! append is in flight, failed appends, and shutdown.

use super::*;
use crate::group::subscription::tests::encode as subscription;

fn delete_groups(h: &mut H, groups: &[&str]) -> Vec<(String, ErrorCode)> {
    let gs = groups.iter().map(|g| g.to_string()).collect();
    let id = h.send(|id| Input::DeleteGroups(id, gs));
    match h.answers.get(&id) {
        Some(Response::DeleteGroups(r)) => r.clone(),
        other => panic!("not a DeleteGroups answer: {other:?}"),
    }
}

fn delete_offsets(
    h: &mut H,
    group: &str,
    partitions: &[(&str, i32)],
) -> (ErrorCode, Vec<(String, i32, ErrorCode)>) {
    let a = DeleteOffsetsArgs {
        group_id: group.into(),
        partitions: partitions
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .collect(),
    };
    let id = h.send(|id| Input::DeleteOffsets(id, a));
    match h.answers.get(&id) {
        Some(Response::DeleteOffsets(top, r)) => (*top, r.clone()),
        other => panic!("not an OffsetDelete answer: {other:?}"),
    }
}

fn commit_at(h: &mut H, member: &str, generation: i32, topic: &str, p: i32, offset: i64) {
    let a = CommitArgs {
        group_id: GROUP.into(),
        generation,
        member_id: member.into(),
        group_instance_id: None,
        offsets: vec![(topic.into(), p, value(offset))],
        producer: None,
    };
    let id = h.send(|id| Input::Commit(id, a));
    assert_eq!(
        h.answers.get(&id),
        Some(&Response::Commit(vec![(topic.into(), p, ErrorCode::None)]))
    );
}

fn offset_of(c: &Coordinator, topic: &str, p: i32) -> Option<i64> {
    let got = c
        .fetch_offsets(GROUP, Some(vec![(topic.into(), vec![p])]))
        .unwrap();
    got[0].2.as_ref().map(|v| v.offset)
}

/// A fresh coordinator that replayed `h`'s log (a restart, or a failover).
fn replayed(h: &H) -> Coordinator {
    let mut c = Coordinator::new(config(0), 3);
    for p in 0..4 {
        c.begin_load(p);
    }
    for (p, k, v) in &h.log {
        c.load_record(*p, k, v.as_deref(), None).unwrap();
    }
    for p in 0..4 {
        c.finish_load(p, h.now);
    }
    c
}

/// One consumer member subscribed to `topics`, Stable; returns its id and generation.
fn consumer_member(h: &mut H, topics: &[&str]) -> (String, i32) {
    let a = h.join_args("", None, &subscription(1, topics, &[0, 0, 0, 0]));
    let j = h.send(|id| Input::Join(id, a));
    let r = h.joined(j).cloned().expect("join answered at once");
    let s = h.sync(&r.member_id, r.generation, vec![]);
    assert_eq!(h.synced(s).unwrap().error, ErrorCode::None);
    (r.member_id, r.generation)
}

fn leave(h: &mut H, member: &str) {
    let a = LeaveArgs {
        group_id: GROUP.into(),
        members: vec![(member.into(), None)],
    };
    h.send(|id| Input::Leave(id, a));
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn a_group_with_members_is_not_deleted_an_empty_one_is_and_stays_deleted() {
    let mut h = H::new(0);
    let (m, gen) = h.single_stable_member();
    commit_at(&mut h, &m, gen, "t", 0, 42);
    commit_at(&mut h, &m, gen, "u", 3, 7);
    assert_eq!(
        delete_groups(&mut h, &[GROUP, "unknown", ""]),
        vec![
            (GROUP.into(), ErrorCode::NonEmptyGroup),
            ("unknown".into(), ErrorCode::GroupIdNotFound),
            ("".into(), ErrorCode::GroupIdNotFound),
        ]
    );
    assert_eq!(h.committed(), Some(42));
    leave(&mut h, &m);
    assert_eq!(
        delete_groups(&mut h, &[GROUP, GROUP]),
        vec![
            (GROUP.into(), ErrorCode::None),
            (GROUP.into(), ErrorCode::None)
        ]
    );
    assert!(h.c.group(GROUP).is_none());
    assert_eq!((h.committed(), offset_of(&h.c, "u", 3)), (None, None));
    assert!(h.c.list().is_empty());
    assert_eq!(
        delete_groups(&mut h, &[GROUP]),
        vec![(GROUP.into(), ErrorCode::GroupIdNotFound)]
    );
    // A restart replays the tombstones: nothing comes back.
    let back = replayed(&h);
    assert!(back.group(GROUP).is_none(), "{:?}", back.group(GROUP));
    assert_eq!(
        (offset_of(&back, "t", 0), offset_of(&back, "u", 3)),
        (None, None)
    );
    // The same id is a new group: its first generation is 1 again.
    let (_, gen) = h.single_stable_member();
    assert_eq!(gen, 1);
}

#[test]
fn a_failed_delete_keeps_the_group_and_its_offsets() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    h.fail_appends = Some(ErrorCode::NotCoordinator);
    assert_eq!(
        delete_groups(&mut h, &[GROUP]),
        vec![(GROUP.into(), ErrorCode::NotCoordinator)]
    );
    assert_eq!((h.state(), h.committed()), (GroupState::Empty, Some(5)));
    h.fail_appends = None;
    assert_eq!(
        delete_groups(&mut h, &[GROUP]),
        vec![(GROUP.into(), ErrorCode::None)]
    );
    assert_eq!(h.committed(), None);
}

/// Runs `input` without completing its appends; returns them.
fn held(h: &mut H, make: impl FnOnce(RequestId) -> Input) -> (RequestId, Vec<Action>) {
    let id = h.next_id;
    h.next_id += 1;
    let actions = h.c.handle(make(id), h.now);
    assert!(
        actions.iter().all(|a| matches!(a, Action::Persist { .. })),
        "answered before its append: {actions:?}"
    );
    (id, actions)
}

#[test]
fn while_its_tombstones_are_in_flight_the_group_is_dead_and_a_commit_in_flight_goes_too() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    // A commit of a new partition whose append has not reported yet...
    let commit = CommitArgs {
        group_id: GROUP.into(),
        generation: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: vec![("t".into(), 1, value(9))],
        producer: None,
    };
    let (c_id, c_appends) = held(&mut h, |id| Input::Commit(id, commit));
    // ...then the deletion, appended after it.
    let (d_id, d_appends) = held(&mut h, |id| Input::DeleteGroups(id, vec![GROUP.into()]));
    assert_eq!(h.state(), GroupState::Dead);
    let j = h.join("");
    assert_eq!(
        h.joined(j).unwrap().error,
        ErrorCode::CoordinatorNotAvailable
    );
    assert_eq!(
        h.commit("", -1, 6),
        vec![ErrorCode::CoordinatorNotAvailable]
    );
    assert_eq!(
        delete_groups(&mut h, &[GROUP]),
        vec![(GROUP.into(), ErrorCode::GroupIdNotFound)]
    );
    assert_eq!(
        delete_offsets(&mut h, GROUP, &[("t", 0)]).0,
        ErrorCode::GroupIdNotFound
    );
    assert!(h.c.list().is_empty());
    h.apply(c_appends);
    h.apply(d_appends);
    assert!(matches!(h.answers.get(&c_id), Some(Response::Commit(_))));
    assert_eq!(
        h.answers.get(&d_id),
        Some(&Response::DeleteGroups(vec![(
            GROUP.into(),
            ErrorCode::None
        )]))
    );
    assert!(h.c.group(GROUP).is_none());
    let back = replayed(&h);
    assert_eq!(
        (offset_of(&back, "t", 0), offset_of(&back, "t", 1)),
        (None, None)
    );
    assert!(back.group(GROUP).is_none());
}

#[test]
fn offsets_of_topics_a_member_subscribes_to_stay_the_others_go() {
    let mut h = H::new(0);
    let (m, gen) = consumer_member(&mut h, &["t"]);
    commit_at(&mut h, &m, gen, "t", 0, 1);
    commit_at(&mut h, &m, gen, "u", 0, 2);
    let (top, per) = delete_offsets(&mut h, GROUP, &[("t", 0), ("u", 0), ("u", 1)]);
    assert_eq!(top, ErrorCode::None);
    assert_eq!(
        per,
        vec![
            ("t".into(), 0, ErrorCode::GroupSubscribedToTopic),
            ("u".into(), 0, ErrorCode::None),
            ("u".into(), 1, ErrorCode::None),
        ]
    );
    assert_eq!(
        (offset_of(&h.c, "t", 0), offset_of(&h.c, "u", 0)),
        (Some(1), None)
    );
    leave(&mut h, &m);
    let (top, per) = delete_offsets(&mut h, GROUP, &[("t", 0)]);
    assert_eq!(
        (top, per),
        (ErrorCode::None, vec![("t".into(), 0, ErrorCode::None)])
    );
    assert_eq!(offset_of(&h.c, "t", 0), None);
    let back = replayed(&h);
    assert_eq!(
        (offset_of(&back, "t", 0), offset_of(&back, "u", 0)),
        (None, None)
    );
    assert_eq!(
        delete_offsets(&mut h, "unknown", &[("t", 0)]),
        (ErrorCode::GroupIdNotFound, vec![])
    );
}

#[test]
fn unreadable_subscriptions_and_other_protocol_types_keep_their_offsets() {
    // A consumer member whose metadata does not parse counts as subscribed to everything.
    let mut h = H::new(0);
    let a = h.join_args("", None, b"not a subscription");
    let j = h.send(|id| Input::Join(id, a));
    assert_eq!(h.joined(j).unwrap().error, ErrorCode::None);
    let (_, per) = delete_offsets(&mut h, GROUP, &[("any", 0)]);
    assert_eq!(
        per,
        vec![("any".into(), 0, ErrorCode::GroupSubscribedToTopic)]
    );
    // A non-consumer group with members: NON_EMPTY_GROUP, as Kafka.
    let mut h = H::new(0);
    let mut a = h.join_args("", None, b"m");
    a.protocol_type = "connect".into();
    let j = h.send(|id| Input::Join(id, a));
    assert_eq!(h.joined(j).unwrap().error, ErrorCode::None);
    assert_eq!(
        delete_offsets(&mut h, GROUP, &[("t", 0)]),
        (ErrorCode::NonEmptyGroup, vec![])
    );
}

#[test]
fn a_failed_offset_delete_keeps_the_offset_and_a_later_commit_survives_the_tombstone() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    h.fail_appends = Some(ErrorCode::CoordinatorNotAvailable);
    assert_eq!(
        delete_offsets(&mut h, GROUP, &[("t", 0)]),
        (ErrorCode::CoordinatorNotAvailable, vec![])
    );
    assert_eq!(h.committed(), Some(5));
    h.fail_appends = None;
    // The tombstone in flight, then a commit of the same partition appended after it.
    let a = DeleteOffsetsArgs {
        group_id: GROUP.into(),
        partitions: vec![("t".into(), 0)],
    };
    let (_, d_appends) = held(&mut h, |id| Input::DeleteOffsets(id, a));
    let commit = CommitArgs {
        group_id: GROUP.into(),
        generation: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets: vec![("t".into(), 0, value(8))],
        producer: None,
    };
    let (_, c_appends) = held(&mut h, |id| Input::Commit(id, commit));
    h.apply(d_appends);
    h.apply(c_appends);
    assert_eq!(h.committed(), Some(8));
    assert_eq!(offset_of(&replayed(&h), "t", 0), Some(8));
}

#[test]
fn deletes_outside_this_cores_loaded_partitions_are_refused() {
    let mut c = Coordinator::new(config(0), 1);
    let p = coordinator_partition(GROUP, 4);
    let del = |c: &mut Coordinator, id| c.handle(Input::DeleteGroups(id, vec![GROUP.into()]), 0);
    let off = |c: &mut Coordinator, id| {
        let a = DeleteOffsetsArgs {
            group_id: GROUP.into(),
            partitions: vec![("t".into(), 0)],
        };
        c.handle(Input::DeleteOffsets(id, a), 0)
    };
    for (code, load) in [
        (ErrorCode::NotCoordinator, false),
        (ErrorCode::CoordinatorLoadInProgress, true),
    ] {
        if load {
            c.begin_load(p);
        }
        assert_eq!(
            del(&mut c, 1),
            vec![Action::Respond(
                1,
                Response::DeleteGroups(vec![(GROUP.into(), code)])
            )]
        );
        assert_eq!(
            off(&mut c, 2),
            vec![Action::Respond(2, Response::DeleteOffsets(code, vec![]))]
        );
    }
}

#[test]
fn shutdown_answers_deletes_in_flight() {
    let mut h = H::new(0);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    let a = DeleteOffsetsArgs {
        group_id: GROUP.into(),
        partitions: vec![("t".into(), 0)],
    };
    let (o_id, _) = held(&mut h, |id| Input::DeleteOffsets(id, a));
    let (d_id, _) = held(&mut h, |id| {
        Input::DeleteGroups(id, vec![GROUP.into(), "x".into()])
    });
    let actions = h.c.shutdown();
    h.apply(actions);
    assert_eq!(
        h.answers.get(&d_id),
        Some(&Response::DeleteGroups(vec![
            (GROUP.into(), ErrorCode::CoordinatorNotAvailable),
            ("x".into(), ErrorCode::GroupIdNotFound),
        ]))
    );
    assert_eq!(
        h.answers.get(&o_id),
        Some(&Response::DeleteOffsets(
            ErrorCode::CoordinatorNotAvailable,
            vec![]
        ))
    );
}
