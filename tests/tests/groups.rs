//! Consumer groups through real processes (issue #6 item 6): `spool consume --group` members
//! started, killed (`kill -9`), paused and restarted around one `spool serve`, and the group
//! protocol spoken by hand where a test must forge a generation or a member id.
//!
//! What is checked, per test: twelve partitions shared 4+4+4 with every record printed exactly
//! once; a killed member's partitions moved after its session timeout with the replay starting
//! exactly at its last commit; a static member's restart within its session causing no
//! rebalance; a cooperative rebalance revoking only the partitions that move while the others
//! keep being consumed; committed offsets surviving a clean and a `kill -9` broker restart; a
//! commit from an old generation or an unknown member refused; `group describe` lag and
//! `reset-offsets` (refused while the group has members).
//!
//! Every wait is for a condition with a generous deadline (the deadline only bounds failure).
//! Member output is the CLI contract's (see `spool_tests::group_consumer`).

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use spool_protocol::client::TopicPartition;
use spool_protocol::wire::ErrorCode;
use spool_tests::cli::{spool, spool_ok};
use spool_tests::client::create_topic;
use spool_tests::group_checks::{
    all_partitions, all_printed, history, missing, printed_by, printed_twice, refs, start_members,
    terminate_all, tp, tps, wait_balanced, SETTLE,
};
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{
    assert_well_formed, mark, wait_until, Event, GroupConsumer, MemberOptions, Output,
};
use spool_tests::group_wire::{self, join_body, read_join};
use spool_tests::paced::{produce_spread, PacedProducer};
use spool_tests::wire::RawConn;
use spool_tests::{Broker, BrokerOptions};

const PARTITIONS: i32 = 12;
/// No initial rebalance delay: Kafka's default waits 3 s for more members before a new group's
/// first generation.
const BROKER_FLAGS: [&str; 2] = ["--group-initial-rebalance-delay-ms", "0"];

fn broker() -> Broker {
    let mut options = BrokerOptions::default();
    options.extra_args.extend(BROKER_FLAGS.map(String::from));
    Broker::start_with(options)
}

/// Fails listing `violations` and the members' state (their rebalance and commit lines tell
/// where a duplicate came from).
fn assert_none(what: &str, violations: &[String], members: &[&GroupConsumer]) {
    if !violations.is_empty() {
        for m in members {
            eprintln!("{}", m.summary());
        }
    }
    spool_tests::checker::assert_none(what, violations);
}

#[test]
fn three_consumers_share_twelve_partitions() {
    let broker = broker();
    let (topic, group) = ("share", "share-group");
    create_topic(&broker, topic, PARTITIONS);
    let all = all_partitions(topic, PARTITIONS);
    let members = start_members(&broker, &["A", "B", "C"], topic, group, |_| {
        MemberOptions::default()
    });
    let m = refs(&members);
    let generation = wait_balanced("a 4+4+4 assignment", &m, &all);

    let acked = produce_spread(&broker, topic, PARTITIONS, 0, 3000);
    wait_until("every acknowledged record printed", SETTLE, &m, || {
        all_printed(topic, &acked, &m)
    });
    assert_well_formed(&m);

    let outs: Vec<Output> = m.iter().map(|c| c.snapshot()).collect();
    for (c, o) in m.iter().zip(&outs) {
        assert_eq!(
            o.generation(),
            Some(generation),
            "member {} saw a rebalance while consuming\n{}",
            c.label(),
            c.summary()
        );
        assert_eq!(o.owned().len(), 4, "member {}", c.label());
        let foreign: Vec<String> = o
            .records
            .iter()
            .filter(|r| !o.owned().contains(&r.tp))
            .map(|r| format!("{}@{}", r.tp, r.offset))
            .collect();
        assert!(
            foreign.is_empty(),
            "member {} printed records of partitions it does not own: {foreign:?}",
            c.label()
        );
    }
    let labelled: Vec<(&str, &Output)> = m.iter().map(|c| c.label()).zip(&outs).collect();
    let twice = printed_twice(&labelled);
    assert_none("records printed more than once", &twice, &m);
    let printed: usize = outs.iter().map(|o| o.records.len()).sum();
    assert_eq!(printed, acked.len(), "printed records that nobody produced");

    // A clean stop commits what was printed: the group ends caught up everywhere.
    terminate_all(&members);
    let d = describe(&broker, group);
    for o in &d.offsets {
        assert_eq!(
            (o.committed, o.lag_messages),
            (o.high_watermark, 0),
            "{} not caught up after every member stopped:\n{}",
            o.tp,
            d.raw
        );
    }
    assert_eq!(d.offsets.len(), PARTITIONS as usize, "{}", d.raw);
}

#[test]
fn kill9_moves_partitions_and_replay_is_bounded_by_last_commit() {
    let broker = broker();
    let (topic, group) = ("moves", "moves-group");
    create_topic(&broker, topic, PARTITIONS);
    let all = all_partitions(topic, PARTITIONS);
    let members = start_members(&broker, &["A", "B", "C"], topic, group, |_| {
        MemberOptions::default()
    });
    let m = refs(&members);
    let generation = wait_balanced("a 4+4+4 assignment", &m, &all);
    let (a, b, c) = (&members[0], &members[1], &members[2]);
    let a_owned = a.owned();

    let producer = PacedProducer::start(&broker, topic, PARTITIONS, 0);
    // Killed with something printed past its last commit (the producer keeps going, commits come
    // every 500 ms), so that there usually is a tail to replay.
    wait_until("A prints past a non-zero commit", SETTLE, &m, || {
        a.with(|o| {
            let printed = o.offsets_by_partition();
            o.last_committed().iter().any(|(t, &c)| {
                c > 0
                    && printed
                        .get(t)
                        .and_then(|p| p.last())
                        .is_some_and(|&l| l >= c)
            })
        })
    });
    a.kill9();
    let parts: Vec<i32> = a_owned.iter().map(|t| t.partition).collect();
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    // B and C cannot commit A's partitions before they own them (after A's session times out),
    // so this is A's last commit — whether or not A lived to print its `committed` line.
    let committed_at_kill = group_wire::fetch_offsets(&mut conn, group, topic, &parts)
        .unwrap_or_else(|e| panic!("OffsetFetch: {e}\n{}", broker.log_tail()));
    let a_out = a.snapshot();
    for (t, line) in a_out.last_committed() {
        if a_owned.contains(&t) {
            assert!(
                committed_at_kill
                    .get(&t.partition)
                    .is_some_and(|&c| c >= line),
                "A printed `committed {t}@{line}` but the group has {committed_at_kill:?}"
            );
        }
    }

    let survivors = [b, c];
    let new_generation = wait_balanced("B and C share all twelve partitions", &survivors, &all);
    assert!(
        new_generation > generation,
        "{new_generation} after {generation}"
    );
    let seen = producer.acked_count();
    producer.wait_past(seen + 2 * PARTITIONS as usize);
    let acked = producer.stop();
    wait_until(
        "every acknowledged record printed",
        SETTLE,
        &survivors,
        || {
            let outs = [a_out.clone(), b.snapshot(), c.snapshot()];
            missing(topic, &acked, &outs.iter().collect::<Vec<_>>()).is_empty()
        },
    );
    assert_well_formed(&m);

    let (b_out, c_out) = (b.snapshot(), c.snapshot());
    // The new owner of each of A's partitions starts exactly at A's last commit.
    for t in &a_owned {
        let owner = if b_out.owned().contains(t) {
            &b_out
        } else {
            &c_out
        };
        let first = owner
            .records
            .iter()
            .find(|r| &r.tp == t)
            .map(|r| r.offset)
            .unwrap_or_else(|| panic!("nobody printed {t} after A died"));
        let committed = committed_at_kill.get(&t.partition).copied().unwrap_or(-1);
        // No commit at all: the group starts at `--reset earliest`, offset 0.
        let expected = committed.max(0);
        assert_eq!(
            first, expected,
            "{t}: the new owner started at {first}, A's last commit was {committed}"
        );
    }
    // Records printed twice: only A's, only at or above A's last commit.
    let labelled = [("A", &a_out), ("B", &b_out), ("C", &c_out)];
    let mut replayed = 0;
    let bad: Vec<String> = printed_by(&labelled)
        .into_iter()
        .filter(|(_, by)| by.len() > 1)
        .filter_map(|((t, offset), by)| {
            replayed += 1;
            let bounded = a_owned.contains(&t)
                && by.len() == 2
                && by.contains(&"A".to_owned())
                && offset >= committed_at_kill.get(&t.partition).copied().unwrap_or(-1);
            (!bounded).then(|| {
                format!(
                    "{t}@{offset} printed by {by:?}{}",
                    history(&labelled, &t, offset)
                )
            })
        })
        .collect();
    assert_none(
        "records printed twice outside A's uncommitted tail",
        &bad,
        &m,
    );
    eprintln!(
        "A held {:?}, committed {committed_at_kill:?} at the kill; {replayed} records replayed",
        tps(&a_owned)
    );
    terminate_all(&members[1..]);
}

#[test]
fn static_member_restart_causes_no_rebalance() {
    let broker = broker();
    let (topic, group) = ("static", "static-group");
    create_topic(&broker, topic, PARTITIONS);
    let all = all_partitions(topic, PARTITIONS);
    let opts = |label: &str| MemberOptions {
        group_instance_id: Some(format!("instance-{label}")),
        session_timeout_ms: 30_000,
        ..MemberOptions::default()
    };
    let mut members = start_members(&broker, &["A", "B", "C"], topic, group, opts);
    let generation = wait_balanced("a 4+4+4 assignment", &refs(&members), &all);
    let first = produce_spread(&broker, topic, PARTITIONS, 0, 600);
    wait_until("the first records printed", SETTLE, &refs(&members), || {
        all_printed(topic, &first, &refs(&members))
    });
    // Rebalance callbacks only (commits go on).
    let events_of = |c: &GroupConsumer| {
        c.with(|o| {
            o.events
                .iter()
                .filter(|e| !matches!(e, Event::Committed { .. }))
                .count()
        })
    };
    let b_events = events_of(&members[1]);
    let c_events = events_of(&members[2]);
    let a_owned = members[0].owned();

    members[0].kill9();
    let old_a = members.remove(0);
    let parts: Vec<i32> = a_owned.iter().map(|t| t.partition).collect();
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    let committed_at_kill = group_wire::fetch_offsets(&mut conn, group, topic, &parts)
        .unwrap_or_else(|e| panic!("OffsetFetch: {e}\n{}", broker.log_tail()));
    let a2 = GroupConsumer::start(&broker, "A'", topic, group, &opts("A"));
    wait_until(
        "the restarted A is assigned",
        SETTLE,
        &[&a2, &members[0], &members[1]],
        || !a2.owned().is_empty(),
    );
    assert_eq!(
        a2.owned(),
        a_owned,
        "the restarted static member did not get its old partitions\n{}",
        a2.summary()
    );
    let second = produce_spread(&broker, topic, PARTITIONS, 600, 600);
    let now = [&a2, &members[0], &members[1]];
    wait_until("the second records printed", SETTLE, &now, || {
        let outs = [
            old_a.snapshot(),
            a2.snapshot(),
            members[0].snapshot(),
            members[1].snapshot(),
        ];
        missing(topic, &second, &outs.iter().collect::<Vec<_>>()).is_empty()
    });
    assert_well_formed(&now);
    for (c, before_events) in [(&members[0], b_events), (&members[1], c_events)] {
        assert_eq!(
            events_of(c),
            before_events,
            "member {} went through a rebalance when a static member restarted\n{}",
            c.label(),
            c.summary()
        );
    }
    // The group stayed in its generation: the restarted member was handed the current one
    // (`group describe` cannot tell: the native DescribeGroups carries no generation).
    assert_eq!(
        a2.with(|o| o.assigned().iter().map(|(g, _, _)| *g).collect::<Vec<_>>()),
        [generation],
        "the restarted static member was not assigned in the group's generation\n{}",
        a2.summary()
    );
    let after = describe(&broker, group);
    let mut ids: Vec<Option<String>> = after
        .members
        .iter()
        .map(|m| m.group_instance_id.clone())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["A", "B", "C"].map(|l| Some(format!("instance-{l}"))),
        "{}",
        after.raw
    );
    // The restarted member resumed exactly where the old process last committed.
    let a2_out = a2.snapshot();
    for t in &a_owned {
        let first = a2_out.records.iter().find(|r| &r.tp == t).map(|r| r.offset);
        let from = committed_at_kill
            .get(&t.partition)
            .copied()
            .unwrap_or(-1)
            .max(0);
        assert_eq!(
            first,
            Some(from),
            "{t}: the restarted member did not resume at the old process's commit"
        );
    }
    terminate_all(&members);
    let status = a2.terminate();
    assert!(status.success(), "A' exited with {status}");
    // Static members send no LeaveGroup on close: the group keeps them until their sessions end.
    let closed = describe(&broker, group);
    assert_eq!(
        closed.members.len(),
        3,
        "static members left the group on SIGTERM: {}",
        closed.raw
    );
}

#[test]
fn cooperative_rebalance_keeps_unmoved_partitions() {
    let broker = broker();
    let (topic, group) = ("coop", "coop-group");
    create_topic(&broker, topic, PARTITIONS);
    let all = all_partitions(topic, PARTITIONS);
    let opts = |_: &str| MemberOptions {
        assignor: Some("cooperative-sticky".into()),
        ..MemberOptions::default()
    };
    let mut members = start_members(&broker, &["A", "B"], topic, group, opts);
    wait_balanced("a 6+6 assignment", &refs(&members), &all);
    let before: Vec<BTreeSet<TopicPartition>> = members.iter().map(|c| c.owned()).collect();

    let producer = PacedProducer::start(&broker, topic, PARTITIONS, 0);
    wait_until("A and B print records", SETTLE, &refs(&members), || {
        members.iter().all(|c| c.with(|o| o.records.len() >= 24))
    });
    let start_mark = mark();
    members.push(GroupConsumer::start(&broker, "C", topic, group, &opts("C")));
    let m = refs(&members);
    wait_balanced("a 4+4+4 assignment", &m, &all);
    let c_assigned = members[2].with(|o| {
        o.assigned()
            .iter()
            .find(|(_, parts, _)| !parts.is_empty())
            .map(|(_, _, seq)| *seq)
            .expect("C owns partitions, so it printed a non-empty assignment")
    });
    // The kept partitions keep going after the rebalance, too.
    let after_mark = mark();
    let seen = producer.acked_count();
    producer.wait_past(seen + 2 * PARTITIONS as usize);
    wait_until(
        "A and B print kept partitions after the rebalance",
        SETTLE,
        &m,
        || {
            members[..2].iter().zip(&before).all(|(c, old)| {
                c.with(|o| {
                    let kept: BTreeSet<_> = o.owned().intersection(old).cloned().collect();
                    kept.iter()
                        .all(|t| o.records.iter().any(|r| &r.tp == t && r.seq > after_mark))
                })
            })
        },
    );
    let acked = producer.stop();
    wait_until("every acknowledged record printed", SETTLE, &m, || {
        all_printed(topic, &acked, &m)
    });
    assert_well_formed(&m);

    let c_owned = members[2].owned();
    let mut during_window = 0;
    for (c, old) in members[..2].iter().zip(&before) {
        let o = c.snapshot();
        let now = o.owned();
        let moved: BTreeSet<_> = old.difference(&now).cloned().collect();
        let kept: BTreeSet<_> = old.intersection(&now).cloned().collect();
        assert!(!kept.is_empty(), "member {} kept nothing", c.label());
        assert!(
            moved.is_subset(&c_owned),
            "member {}: {:?} moved but not to C ({:?})",
            c.label(),
            tps(&moved),
            tps(&c_owned)
        );
        for (generation, parts, _) in o.revoked().iter().filter(|(_, _, s)| *s > start_mark) {
            let parts: BTreeSet<_> = parts.iter().cloned().collect();
            assert!(
                parts.is_subset(&moved),
                "member {} revoked {:?} in generation {generation}; only {:?} moved\n{}",
                c.label(),
                tps(&parts),
                tps(&moved),
                c.summary()
            );
        }
        // Kept partitions stay consumed with no replay: their offsets only go up.
        for (t, offsets) in o.offsets_by_partition() {
            if kept.contains(&t) {
                assert!(
                    offsets.windows(2).all(|w| w[1] == w[0] + 1),
                    "member {}: {t} printed out of sequence: {offsets:?}",
                    c.label()
                );
            }
        }
        let printed_in_window = o
            .records
            .iter()
            .filter(|r| kept.contains(&r.tp) && r.seq > start_mark && r.seq < c_assigned)
            .count();
        eprintln!(
            "member {}: kept {:?}, moved {:?}, {printed_in_window} kept records printed while C \
             joined",
            c.label(),
            tps(&kept),
            tps(&moved)
        );
        during_window += printed_in_window;
    }
    assert!(
        during_window > 0,
        "A and B printed no record of their kept partitions between C's start and C's first \
         assignment: consumption stopped during the rebalance\n{}\n{}\n{}",
        members[0].summary(),
        members[1].summary(),
        members[2].summary()
    );
    let outs: Vec<Output> = m.iter().map(|c| c.snapshot()).collect();
    let labelled: Vec<(&str, &Output)> = m.iter().map(|c| c.label()).zip(&outs).collect();
    let twice = printed_twice(&labelled);
    assert_none(
        "records printed twice (moved partitions are committed on revoke)",
        &twice,
        &m,
    );
    terminate_all(&members);
}

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[test]
fn group_describe_shows_lag() {
    let broker = broker();
    let (topic, group) = ("lagging", "lagging-group");
    let partitions = 4;
    create_topic(&broker, topic, partitions);
    let before_ms = now_ms();
    let acked = produce_spread(&broker, topic, partitions, 0, 400);
    let part = GroupConsumer::start(
        &broker,
        "part",
        topic,
        group,
        &MemberOptions {
            num: Some(120),
            ..MemberOptions::default()
        },
    );
    assert!(part.wait_exit().success(), "{}", part.summary());
    let committed = part.with(Output::last_committed);
    let d = describe(&broker, group);
    let elapsed_s = (now_ms() - before_ms) as f64 / 1000.0;
    assert_eq!(d.group, group);
    assert!(d.members.is_empty(), "the -n member left: {}", d.raw);
    let ends = spool_tests::checker::last_acked_offsets(&acked);
    assert!(!committed.is_empty(), "{}", part.summary());
    for (t, &c) in &committed {
        let o = d
            .offsets
            .iter()
            .find(|o| &o.tp == t)
            .unwrap_or_else(|| panic!("{t} committed {c} but not described: {}", d.raw));
        let hw = ends[&t.partition] + 1;
        assert_eq!(
            (o.committed, o.high_watermark, o.lag_messages),
            (c, hw, hw - c),
            "{t}: {}",
            d.raw
        );
        // Seconds behind: the age of the first unconsumed record, 0 when caught up.
        let lag_ok = if c < hw {
            o.lag_seconds > 0.0 && o.lag_seconds <= elapsed_s + 1.0
        } else {
            o.lag_seconds == 0.0
        };
        assert!(
            lag_ok,
            "{t}: lag {} s with {} messages behind, records at most {elapsed_s} s old: {}",
            o.lag_seconds,
            hw - c,
            d.raw
        );
    }
    // Partitions the member never committed have no offset (or -1) to lag behind.
    for o in d.offsets.iter().filter(|o| !committed.contains_key(&o.tp)) {
        assert!(o.committed < 0, "{} committed by nobody: {}", o.tp, d.raw);
    }

    // A live group: a member catches up, is paused, and more records arrive.
    let live = GroupConsumer::start(
        &broker,
        "live",
        topic,
        group,
        &MemberOptions {
            session_timeout_ms: 30_000,
            ..MemberOptions::default()
        },
    );
    wait_until(
        "the live member catches up and commits",
        SETTLE,
        &[&live],
        || {
            // Everything the -n member left, each partition it printed committed to the end.
            live.with(|o| {
                let c = o.last_committed();
                o.records.len() == 400 - 120
                    && o.offsets_by_partition()
                        .keys()
                        .all(|t| c.get(t) == Some(&(ends[&t.partition] + 1)))
            })
        },
    );
    live.pause();
    let second_ms = now_ms();
    produce_spread(&broker, topic, partitions, 400, 100);
    let d = describe(&broker, group);
    // The first unconsumed records were produced after `second_ms`: they cannot be older.
    let second_s = (now_ms() - second_ms) as f64 / 1000.0;
    assert_eq!(d.members.len(), 1, "{}", d.raw);
    assert_eq!(
        d.members[0].assignment.len(),
        partitions as usize,
        "{}",
        d.raw
    );
    for o in &d.offsets {
        assert_eq!(o.lag_messages, 25, "{}: {}", o.tp, d.raw);
        assert!(
            o.lag_seconds > 0.0 && o.lag_seconds <= second_s + 0.01,
            "{}: lag {} s, but its first unconsumed record is at most {second_s} s old: {}",
            o.tp,
            o.lag_seconds,
            d.raw
        );
    }
    let listed = spool_ok(&broker, &["group", "list", "--format", "json"], "");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("group list JSON");
    assert!(
        listed.as_array().is_some_and(|l| l
            .iter()
            .any(|g| g["group"] == group && g["state"] == "Stable")),
        "group list: {listed}"
    );
    let table = spool_ok(&broker, &["group", "describe", group], "");
    eprintln!("spool group describe {group}:\n{table}");
    live.resume();
    let printed = |o: &Output| o.records.len();
    wait_until(
        "the live member prints the new records",
        SETTLE,
        &[&live],
        || live.with(printed) == 500 - 120,
    );
    assert!(live.terminate().success(), "{}", live.summary());
    let d = describe(&broker, group);
    assert!(
        d.offsets
            .iter()
            .all(|o| o.lag_messages == 0 && o.lag_seconds == 0.0),
        "caught up after the live member's last commit: {}",
        d.raw
    );
}

#[test]
fn reset_offsets_refused_while_group_has_members() {
    let broker = broker();
    let (topic, group) = ("resets", "resets-group");
    let partitions = 4;
    create_topic(&broker, topic, partitions);
    let acked = produce_spread(&broker, topic, partitions, 0, 200);
    let member = GroupConsumer::start(&broker, "M", topic, group, &MemberOptions::default());
    wait_until(
        "M prints everything and commits",
        SETTLE,
        &[&member],
        || member.with(|o| o.last_committed().values().sum::<i64>() == acked.len() as i64),
    );
    let caught_up = describe(&broker, group).committed();

    let refused = spool(
        &broker,
        &[
            "group",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
        ],
        "",
    );
    assert_eq!(
        refused.status.code(),
        Some(1),
        "reset-offsets with a live member: {}\n{}",
        refused.stdout,
        refused.stderr
    );
    assert!(
        refused.stderr.contains(group) || refused.stderr.to_lowercase().contains("member"),
        "unclear refusal: {:?}",
        refused.stderr
    );
    assert_eq!(
        describe(&broker, group).committed(),
        caught_up,
        "the refused reset moved offsets"
    );

    assert!(member.terminate().success(), "{}", member.summary());
    for (flag, value, expected) in [
        ("--to-earliest", None, 0),
        ("--to-offset", Some("7"), 7),
        ("--to-latest", None, 50),
    ] {
        let mut args = vec!["group", "reset-offsets", group, "--topic", topic, flag];
        args.extend(value);
        let out = spool_ok(&broker, &args, "");
        assert!(!out.trim().is_empty(), "{flag} printed nothing");
        let d = describe(&broker, group);
        let want: BTreeMap<TopicPartition, i64> =
            (0..partitions).map(|p| (tp(topic, p), expected)).collect();
        assert_eq!(d.committed(), want, "after {flag}: {}", d.raw);
    }
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
