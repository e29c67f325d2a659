//! A member paused (`SIGSTOP`) past its session timeout is a zombie: the group moves on without
//! it, and when it wakes up its heartbeats and commits from the old generation are refused, it
//! gives up its partitions and rejoins — and nothing it does as a zombie moves the group's
//! committed offsets backwards, which would make a later owner replay records.

use std::collections::BTreeSet;

use spool_protocol::client::TopicPartition;
use spool_tests::client::create_topic;
use spool_tests::group_checks::{
    all_partitions, balanced, history, missing, printed_by, refs, start_members, terminate_all,
    wait_balanced, SETTLE,
};
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{
    assert_well_formed, mark, wait_until, GroupConsumer, MemberOptions, Output,
};
use spool_tests::group_wire;
use spool_tests::paced::PacedProducer;
use spool_tests::wire::RawConn;

use crate::{assert_none, broker, PARTITIONS};

#[test]
fn member_paused_past_its_session_is_fenced_and_rejoins() {
    let broker = broker();
    let (topic, group) = ("zombie", "zombie-group");
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
    wait_until("A commits a non-zero offset", SETTLE, &m, || {
        a.with(|o| o.last_committed().values().any(|&off| off > 0))
    });
    a.pause();
    let parts: Vec<i32> = a_owned.iter().map(|t| t.partition).collect();
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    let committed_at_pause = group_wire::fetch_offsets(&mut conn, group, topic, &parts)
        .unwrap_or_else(|e| panic!("OffsetFetch: {e}\n{}", broker.log_tail()));

    let survivors = [b, c];
    let without_a = wait_balanced("B and C share all twelve partitions", &survivors, &all);
    assert!(without_a > generation, "{without_a} after {generation}");
    let resumed = mark();
    a.resume();
    wait_until("A back in a 4+4+4 assignment", SETTLE, &m, || {
        balanced_with_a(&m, &all, without_a)
    });
    let rejoined = a.with(|o| {
        o.assigned()
            .iter()
            .find(|(g, parts, seq)| *seq > resumed && *g > without_a && !parts.is_empty())
            .map(|(_, _, seq)| *seq)
            .expect("A's assignment after it rejoined")
    });
    let seen = producer.acked_count();
    producer.wait_past(seen + 2 * PARTITIONS as usize);
    let acked = producer.stop();
    wait_until("every acknowledged record printed", SETTLE, &m, || {
        let outs: Vec<Output> = m.iter().map(|c| c.snapshot()).collect();
        missing(topic, &acked, &outs.iter().collect::<Vec<_>>()).is_empty()
    });
    assert_well_formed(&m);

    // A before it rejoined (its uncommitted tail, and what it printed as a zombie) may be
    // replayed by others, at or above its last commit; nothing else is printed twice: a zombie
    // commit that was taken would show as a later owner replaying someone else's records.
    let a_out = a.snapshot();
    let mut zombie = a_out.clone();
    zombie.records.retain(|r| r.seq < rejoined);
    let mut rejoined_a = a_out;
    rejoined_a.records.retain(|r| r.seq > rejoined);
    let (b_out, c_out) = (b.snapshot(), c.snapshot());
    let labelled = [
        ("A", &zombie),
        ("A-rejoined", &rejoined_a),
        ("B", &b_out),
        ("C", &c_out),
    ];
    let mut replayed = 0;
    let bad: Vec<String> = printed_by(&labelled)
        .into_iter()
        .filter(|(_, by)| by.len() > 1)
        .filter_map(|((t, offset), by)| {
            replayed += 1;
            let from = committed_at_pause.get(&t.partition).copied().unwrap_or(-1);
            let bounded = a_owned.contains(&t)
                && by.len() == 2
                && by.contains(&"A".to_owned())
                && offset >= from;
            (!bounded).then(|| {
                format!(
                    "{t}@{offset} printed by {by:?}{}",
                    history(&labelled, &t, offset)
                )
            })
        })
        .collect();
    assert_none(
        "records printed twice other than A's tail before it was fenced",
        &bad,
        &m,
    );
    eprintln!("A committed {committed_at_pause:?} when paused; {replayed} records printed twice");

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
}

/// Whether all three members hold four partitions each, all of them, at one generation newer
/// than `after`.
fn balanced_with_a(members: &[&GroupConsumer], all: &BTreeSet<TopicPartition>, after: i32) -> bool {
    balanced(members, all).is_some_and(|g| g > after)
}
