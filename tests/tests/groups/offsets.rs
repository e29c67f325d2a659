//! Where members start: committed offsets surviving a clean and a `kill -9` broker restart and
//! resumed exactly; a commit from an old generation or an unknown member refused (the protocol
//! by hand); a new group starting at `--reset earliest|latest` on every subscribed topic; a
//! deleted topic's offsets removed, through a crash and a re-creation of the topic.

use std::collections::BTreeMap;
use std::thread;

use spool_protocol::client::TopicPartition;
use spool_protocol::wire::ErrorCode;
use spool_tests::cli::spool;
use spool_tests::client::create_topic;
use spool_tests::group_checks::{missing, printed_twice, SETTLE};
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{assert_well_formed, wait_until, GroupConsumer, MemberOptions};
use spool_tests::group_wire::{self, join_body, read_join};
use spool_tests::paced::{produce_spread, PacedProducer};
use spool_tests::wire::RawConn;
use spool_tests::Broker;

use crate::{assert_none, broker};

#[test]
fn committed_offsets_survive_broker_restart() {
    let mut broker = broker();
    let (topic, group) = ("durable", "durable-group");
    let partitions = 4;
    create_topic(&broker, topic, partitions);
    let acked = produce_spread(&broker, topic, partitions, 0, 400);

    let first = GroupConsumer::start(
        &broker,
        "first",
        topic,
        group,
        &MemberOptions {
            num: Some(150),
            ..MemberOptions::default()
        },
    );
    let status = first.wait_exit();
    assert!(
        status.success(),
        "-n 150 exited with {status}\n{}",
        first.summary()
    );
    assert_well_formed(&[&first]);
    let out = first.snapshot();
    assert_eq!(out.records.len(), 150, "{}", first.summary());
    // What it printed, per partition, is what it must have committed.
    let mut expected: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    for r in &out.records {
        let e = expected.entry(r.tp.clone()).or_insert(0);
        *e = (*e).max(r.offset + 1);
    }
    let printed_commits = out.last_committed();
    for (t, o) in &expected {
        assert_eq!(
            printed_commits.get(t),
            Some(o),
            "{t}: printed up to {o}, last `committed` line says {:?}",
            printed_commits.get(t)
        );
    }
    let committed_of = |broker: &Broker| -> BTreeMap<TopicPartition, i64> {
        describe(broker, group)
            .committed()
            .into_iter()
            // 0 and -1 both mean "from the start" here: only real progress is compared.
            .filter(|(_, o)| *o > 0)
            .collect()
    };
    assert_eq!(committed_of(&broker), expected, "before any restart");

    broker.terminate();
    broker.restart();
    assert_eq!(committed_of(&broker), expected, "after a clean restart");
    broker.kill9();
    broker.restart();
    assert_eq!(
        committed_of(&broker),
        expected,
        "after kill -9 and a restart"
    );

    let second = GroupConsumer::start(
        &broker,
        "second",
        topic,
        group,
        &MemberOptions {
            num: Some(250),
            ..MemberOptions::default()
        },
    );
    let status = second.wait_exit();
    assert!(
        status.success(),
        "-n 250 exited with {status}\n{}",
        second.summary()
    );
    assert_well_formed(&[&second]);
    let out2 = second.snapshot();
    for (t, offsets) in out2.offsets_by_partition() {
        let from = expected.get(&t).copied().unwrap_or(0);
        assert_eq!(
            offsets.first().copied(),
            Some(from),
            "{t}: the new member did not resume at the committed offset {from}"
        );
    }
    let outs = [out, out2];
    assert_none(
        "acknowledged records across both members",
        &missing(topic, &acked, &outs.iter().collect::<Vec<_>>()),
        &[&first, &second],
    );
    let labelled = [("first", &outs[0]), ("second", &outs[1])];
    let twice = printed_twice(&labelled);
    assert_none(
        "records printed by both members",
        &twice,
        &[&first, &second],
    );
}

#[test]
fn commit_from_old_generation_is_rejected() {
    let broker = broker();
    let (topic, group) = ("fenced", "fenced-group");
    create_topic(&broker, topic, 2);
    let session_timeout_ms = 30_000;
    let connect = || RawConn::connect(broker.native_addr()).expect("connecting");
    let mut a = connect();
    assert_eq!(
        group_wire::find_coordinator(&mut a, group),
        Ok(ErrorCode::NONE)
    );
    let ja = group_wire::join_new(&mut a, group, topic, session_timeout_ms)
        .unwrap_or_else(|e| panic!("A joins: {e}\n{}", broker.log_tail()));
    assert_eq!(ja.leader, ja.member_id, "the only member leads");
    let g = ja.generation;
    let sync_a = group_wire::sync(
        &mut a,
        group,
        g,
        &ja.member_id,
        vec![(ja.member_id.clone(), group_wire::assignment(topic, &[0, 1]))],
    )
    .expect("A syncs");
    assert_eq!(sync_a.error_code, ErrorCode::NONE);
    let commit = |conn: &mut RawConn, generation, member: &str, offset| {
        group_wire::commit(conn, group, generation, member, topic, 0, offset)
            .unwrap_or_else(|e| panic!("OffsetCommit: {e}\n{}", broker.log_tail()))
    };
    let committed = |conn: &mut RawConn| {
        group_wire::fetch_offsets(conn, group, topic, &[0])
            .unwrap_or_else(|e| panic!("OffsetFetch: {e}"))[&0]
    };
    assert_eq!(commit(&mut a, g, &ja.member_id, 5), ErrorCode::NONE);
    assert_eq!(committed(&mut a), 5);

    // B joins: the group rebalances; A learns it from its heartbeat and rejoins.
    let mut b = connect();
    let b_join = thread::spawn(move || {
        let joined = group_wire::join_new(&mut b, group, topic, session_timeout_ms);
        (b, joined)
    });
    let mut last = ErrorCode::NONE;
    spool_tests::group_consumer::wait_until(
        "A's heartbeat reports the rebalance",
        SETTLE,
        &[],
        || {
            last = group_wire::heartbeat(&mut a, group, g, &ja.member_id).expect("heartbeat");
            last != ErrorCode::NONE
        },
    );
    assert_eq!(last, ErrorCode::REBALANCE_IN_PROGRESS);
    a.send(
        join_body(group, &ja.member_id, topic, session_timeout_ms),
        0,
        Vec::new(),
    )
    .expect("A rejoins");
    let ja2 =
        group_wire::joined(read_join(&mut a).expect("A's JoinGroup answer")).expect("A rejoins");
    let (mut b, jb) = b_join.join().expect("B's join thread");
    let jb = jb.unwrap_or_else(|e| panic!("B joins: {e}"));
    assert_eq!(ja2.generation, jb.generation);
    assert!(
        ja2.generation > g,
        "generation {} after {g}",
        ja2.generation
    );
    let g2 = ja2.generation;
    let leader = if ja2.leader == ja2.member_id {
        &mut a
    } else {
        &mut b
    };
    let leader_id = ja2.leader.clone();
    let follower_id = if leader_id == ja2.member_id {
        &jb.member_id
    } else {
        &ja2.member_id
    };
    let s = group_wire::sync(
        leader,
        group,
        g2,
        &leader_id,
        vec![
            (leader_id.clone(), group_wire::assignment(topic, &[0])),
            (follower_id.clone(), group_wire::assignment(topic, &[1])),
        ],
    )
    .expect("the leader syncs");
    assert_eq!(s.error_code, ErrorCode::NONE);

    assert_eq!(
        commit(&mut a, g, &ja.member_id, 10),
        ErrorCode::ILLEGAL_GENERATION,
        "a commit from generation {g} in generation {g2}"
    );
    assert_eq!(
        commit(&mut a, g2, "no-such-member", 10),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    assert_eq!(committed(&mut a), 5, "a refused commit moved the offset");
    // The same commit from the current generation is taken: the refusals were about identity.
    assert_eq!(commit(&mut a, g2, &ja.member_id, 10), ErrorCode::NONE);
    assert_eq!(committed(&mut a), 10);
}

#[test]
fn new_groups_start_where_reset_says_on_every_subscribed_topic() {
    let broker = broker();
    let partitions = 2;
    for topic in ["early", "late"] {
        create_topic(&broker, topic, partitions);
    }
    let acked: Vec<_> = ["early", "late"]
        .map(|t| produce_spread(&broker, t, partitions, 0, 40))
        .into();
    let both = "early,late";

    for conflicting in [["--from", "5"], ["--partition", "0"]] {
        let mut args = vec!["consume", "early", "--group", "g"];
        args.extend(conflicting);
        let f = spool(&broker, &args, "");
        assert!(
            !f.status.success() && !f.stderr.trim().is_empty(),
            "{conflicting:?} with --group was accepted ({}): {}",
            f.status,
            f.stdout
        );
    }

    // No committed offsets, default `--reset earliest`: everything, from offset 0.
    let earliest = GroupConsumer::start(
        &broker,
        "earliest",
        both,
        "earliest-group",
        &MemberOptions {
            num: Some(80),
            ..MemberOptions::default()
        },
    );
    assert!(earliest.wait_exit().success(), "{}", earliest.summary());
    assert_well_formed(&[&earliest]);
    let out = earliest.snapshot();
    for (topic, acked) in ["early", "late"].iter().zip(&acked) {
        assert_none(
            &format!("{topic} read by the earliest member"),
            &missing(topic, acked, &[&out]),
            &[&earliest],
        );
    }
    assert_eq!(
        out.offsets_by_partition().len(),
        4,
        "{}",
        earliest.summary()
    );

    // `--reset latest`: only what arrives after the member joined.
    let late = GroupConsumer::start(
        &broker,
        "latest",
        both,
        "latest-group",
        &MemberOptions {
            extra_args: vec!["--reset".into(), "latest".into()],
            ..MemberOptions::default()
        },
    );
    wait_until(
        "the latest member owns four partitions",
        SETTLE,
        &[&late],
        || late.owned().len() == 4,
    );
    let producers = ["early", "late"].map(|t| PacedProducer::start(&broker, t, partitions, 1000));
    wait_until(
        "the latest member prints every partition",
        SETTLE,
        &[&late],
        || late.with(|o| o.offsets_by_partition().len() == 4),
    );
    for p in producers {
        p.stop();
    }
    let out = late.snapshot();
    for (t, offsets) in out.offsets_by_partition() {
        // Each partition held offsets 0..20 before the member started.
        assert!(
            offsets[0] >= 20,
            "{t}: a --reset latest member started at {}, before the end",
            offsets[0]
        );
        assert!(
            offsets.windows(2).all(|w| w[1] == w[0] + 1),
            "{t}: {offsets:?}"
        );
    }
    assert!(late.terminate().success(), "{}", late.summary());
}

#[test]
fn offsets_of_a_deleted_topic_go_away() {
    let mut broker = broker();
    let (doomed, kept, group) = ("doomed", "kept", "deletes");
    create_topic(&broker, doomed, 2);
    create_topic(&broker, kept, 1);
    produce_spread(&broker, doomed, 2, 0, 60);
    produce_spread(&broker, kept, 1, 1_000, 30);

    let member = GroupConsumer::start(
        &broker,
        "reader",
        &format!("{doomed},{kept}"),
        group,
        &MemberOptions {
            num: Some(90),
            ..MemberOptions::default()
        },
    );
    let status = member.wait_exit();
    assert!(
        status.success(),
        "-n 90 exited with {status}\n{}",
        member.summary()
    );
    let topics_of = |broker: &Broker| -> BTreeMap<String, i64> {
        describe(broker, group)
            .committed()
            .into_iter()
            .map(|(tp, o)| (tp.to_string(), o))
            .collect()
    };
    let before = topics_of(&broker);
    let expected_before: BTreeMap<String, i64> =
        [("doomed-0", 30), ("doomed-1", 30), ("kept-0", 30)]
            .into_iter()
            .map(|(t, o)| (t.to_string(), o))
            .collect();
    assert_eq!(before, expected_before, "committed before the delete");

    spool_tests::cli::spool_ok(&broker, &["topic", "delete", doomed], "");
    let only_kept: BTreeMap<String, i64> = [("kept-0".to_string(), 30)].into_iter().collect();
    assert_eq!(topics_of(&broker), only_kept, "right after the delete");

    // The tombstones are in __consumer_offsets: a replay after a crash must not bring them back.
    broker.kill9();
    broker.restart();
    assert_eq!(topics_of(&broker), only_kept, "after kill -9 and a restart");

    // A new topic of the same name starts with no committed offsets.
    create_topic(&broker, doomed, 2);
    assert_eq!(topics_of(&broker), only_kept, "after re-creating the topic");
}
