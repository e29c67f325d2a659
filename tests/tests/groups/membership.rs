//! Who consumes what: twelve partitions shared by three members with every record printed
//! once; a `kill -9`ed member's partitions moved after its session timeout, replaying only its
//! uncommitted tail; a static member restarted within its session without a rebalance, and kept
//! by the group when it closes; a cooperative rebalance revoking only what moves while the rest
//! keeps being consumed.

use std::collections::BTreeSet;

use spool_protocol::client::TopicPartition;
use spool_tests::client::create_topic;
use spool_tests::group_checks::{
    all_partitions, all_printed, history, missing, printed_by, printed_twice, refs, start_members,
    terminate_all, tps, wait_balanced, SETTLE,
};
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{
    assert_well_formed, mark, wait_until, Event, GroupConsumer, MemberOptions, Output,
};
use spool_tests::group_wire;
use spool_tests::paced::{produce_spread, PacedProducer};
use spool_tests::wire::RawConn;

use crate::{assert_none, broker, PARTITIONS};

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

    let d = describe(&broker, group);
    assert_eq!(
        (d.state.as_str(), d.generation, d.members.len()),
        ("Stable", i64::from(generation), 3),
        "{}",
        d.raw
    );
    let mut described: Vec<TopicPartition> = d
        .members
        .iter()
        .flat_map(|m| m.assignment.clone())
        .collect();
    described.sort();
    assert_eq!(
        described,
        all.iter().cloned().collect::<Vec<_>>(),
        "{}",
        d.raw
    );

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
    let before = describe(&broker, group);
    assert_eq!(before.generation, i64::from(generation), "{}", before.raw);
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
    // The group stayed in its generation, and the restarted member was handed that one.
    assert_eq!(
        a2.with(|o| o.assigned().iter().map(|(g, _, _)| *g).collect::<Vec<_>>()),
        [generation],
        "the restarted static member was not assigned in the group's generation\n{}",
        a2.summary()
    );
    let after = describe(&broker, group);
    assert_eq!(after.generation, before.generation, "{}", after.raw);
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
}

#[test]
fn static_member_closed_with_sigterm_stays_in_the_group() {
    let broker = broker();
    let (topic, group) = ("static-close", "static-close-group");
    create_topic(&broker, topic, PARTITIONS);
    let all = all_partitions(topic, PARTITIONS);
    let opts = |label: &str| MemberOptions {
        group_instance_id: Some(format!("instance-{label}")),
        session_timeout_ms: 30_000,
        ..MemberOptions::default()
    };
    let members = start_members(&broker, &["A", "B"], topic, group, opts);
    wait_balanced("a 6+6 assignment", &refs(&members), &all);
    let status = members[1].terminate();
    assert!(status.success(), "B exited with {status}");
    // B has exited, so a LeaveGroup it sent has been answered: the group would show it gone.
    let d = describe(&broker, group);
    let mut ids: Vec<Option<&str>> = d
        .members
        .iter()
        .map(|m| m.group_instance_id.as_deref())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [Some("instance-A"), Some("instance-B")],
        "a static member left the group on SIGTERM (Kafka keeps it until its session ends): {}",
        d.raw
    );
    assert!(members[0].terminate().success(), "{}", members[0].summary());
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
