//! `spool group describe` and `reset-offsets`: lag in messages and seconds for a finished and a
//! live (paused) member, `group list`, and resets refused while the group has members.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use spool_protocol::client::TopicPartition;
use spool_tests::cli::{spool, spool_ok};
use spool_tests::client::create_topic;
use spool_tests::group_checks::{tp, SETTLE};
use spool_tests::group_cli::describe;
use spool_tests::group_consumer::{wait_until, GroupConsumer, MemberOptions, Output};
use spool_tests::paced::produce_spread;

use crate::broker;

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
