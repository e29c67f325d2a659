//! `spool group delete` and `spool group delete-offsets` (issue 17, item 3): refused with the
//! cause while a member is in the group (NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC), carried out
//! once it left — the committed offsets are gone (`group describe` shows none), the group is no
//! longer listed, and a deleted group stays deleted across a `kill -9` and restart (the offsets topic's
//! tombstones replay) — and a second delete says the group does not exist.

use spool_tests::cli::{spool, spool_ok};
use spool_tests::client::create_topic;
use spool_tests::group_checks::SETTLE;
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{wait_until, GroupConsumer, MemberOptions};
use spool_tests::paced::produce_spread;

use crate::broker;

/// Runs `args`, which must fail with exit 1 and say each of `says` on stderr.
fn refused(broker: &spool_tests::Broker, args: &[&str], says: &[&str]) {
    let f = spool(broker, args, "");
    assert_eq!(
        f.status.code(),
        Some(1),
        "spool {args:?}: {}\n{}",
        f.stdout,
        f.stderr
    );
    for s in says {
        assert!(
            f.stderr.contains(s),
            "spool {args:?}: {:?} does not say {s:?}",
            f.stderr
        );
    }
}

#[test]
fn group_delete_and_delete_offsets_are_refused_while_members_are_in_and_done_after() {
    let mut broker = broker();
    let (topic, other, group) = ("deletes", "deletes-other", "deletes-group");
    let partitions = 3;
    create_topic(&broker, topic, partitions);
    create_topic(&broker, other, 1);
    let acked = produce_spread(&broker, topic, partitions, 0, 60);
    let member = GroupConsumer::start(&broker, "M", topic, group, &MemberOptions::default());
    wait_until(
        "M prints everything and commits",
        SETTLE,
        &[&member],
        || member.with(|o| o.last_committed().values().sum::<i64>() == acked.len() as i64),
    );

    refused(
        &broker,
        &["group", "delete", group],
        &[group, "active members"],
    );
    refused(
        &broker,
        &["group", "delete-offsets", group, "--topic", topic],
        &[group, "subscribed", "GROUP_SUBSCRIBED_TO_TOPIC"],
    );
    // A topic no member subscribes to: nothing committed there, deleted all the same (NONE).
    let out = spool_ok(
        &broker,
        &["group", "delete-offsets", group, "--topic", other],
        "",
    );
    assert!(out.contains("deleted"), "delete-offsets said: {out}");
    assert_eq!(
        describe(&broker, group).committed().values().sum::<i64>(),
        acked.len() as i64,
        "refusals moved nothing"
    );

    assert!(member.terminate().success(), "{}", member.summary());
    let out = spool_ok(
        &broker,
        &["group", "delete-offsets", group, "--topic", topic],
        "",
    );
    assert_eq!(
        out.lines().filter(|l| l.contains("deleted")).count(),
        partitions as usize,
        "one line per partition: {out}"
    );
    assert!(
        describe(&broker, group).committed().is_empty(),
        "offsets left after delete-offsets: {}",
        describe(&broker, group).raw
    );

    let out = spool_ok(&broker, &["group", "delete", group], "");
    assert!(out.contains(&format!("deleted group {group}")), "{out}");
    let listed = spool_ok(&broker, &["group", "list"], "");
    assert!(!listed.contains(group), "still listed: {listed}");
    refused(&broker, &["group", "delete", group], &["does not exist"]);

    broker.kill9();
    broker.restart();
    let listed = spool_ok(&broker, &["group", "list"], "");
    assert!(
        !listed.contains(group),
        "listed again after a restart: {listed}"
    );
    refused(&broker, &["group", "delete", group], &["does not exist"]);
}
