//! The Kafka port with kafkajs 2.2.4 (issue 17, item 5: a client family nobody here wrote,
//! Node.js, its own protocol code): `tests/kafkajs/clients.js` drives it, this test checks its
//! JSON lines.
//!
//! - `group`: keyed, gzip-compressed, acks=-1 produce (idempotent: a send retried after a client
//!   timeout is not written twice); a group of two members sharing the
//!   partitions reads everything once, where it was acknowledged, committing as it goes; a fresh
//!   member of the group then reads exactly what was produced after the first two stopped (it
//!   resumed from their commits).
//! - `times`: `fetchTopicOffsetsByTimestamp` answers the first record at or after the asked time,
//!   and past the last record kafkajs's stand-in for Kafka's -1 (the high watermark).
//! - `admin`: a created topic is listed, DescribeConfigs reports `min.insync.replicas` as it acts
//!   (1 on a one-broker cluster); partitions added show in the metadata (the same count again is
//!   INVALID_PARTITIONS); an altered config is described from the topic and writable (a bad value
//!   is INVALID_CONFIG); records deleted before 4 move the low watermark to 4; a deleted topic
//!   leaves `listTopics`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spool_tests::kafka_clients::{events_of, int_field, run_events, start_broker};
use spool_tests::node_clients::{kafkajs_dir, node_with_kafkajs};
use spool_tests::{Broker, BrokerOptions};

const MESSAGES: i64 = 400;
const PARTITIONS: i64 = 4;
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
const RUN_TIMEOUT: Duration = Duration::from_secs(150);

/// Runs `clients.js <mode>`; returns its events and a context for failure messages. Insists on
/// the closing `done` event.
fn run_script(broker: &Broker, mode: &str, args: &[&str]) -> (Vec<Value>, String) {
    let mut cmd = Command::new(node_with_kafkajs());
    cmd.current_dir(kafkajs_dir())
        .arg(kafkajs_dir().join("clients.js"))
        .arg(mode)
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--timeout-s", &SCRIPT_TIMEOUT.as_secs().to_string()])
        .args(args);
    run_events(&mut cmd, broker, RUN_TIMEOUT)
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events_of(events, kind)
}

fn int(event: &Value, field: &str) -> i64 {
    int_field(event, field)
}

/// `value-N` → N.
fn seq_of(event: &Value) -> i64 {
    event["value"]
        .as_str()
        .and_then(|v| v.strip_prefix("value-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no value-N in {event}"))
}

/// seq → (partition, offset) of every acknowledgement; panics on a seq acknowledged twice.
fn acknowledged(events: &[Value]) -> BTreeMap<i64, (i64, i64)> {
    let mut acked = BTreeMap::new();
    for e in of(events, "acked") {
        let at = (int(e, "partition"), int(e, "offset"));
        assert!(
            acked.insert(int(e, "seq"), at).is_none(),
            "{e}: acknowledged twice"
        );
    }
    acked
}

/// Each read event's seq, checked to sit where it was acknowledged; panics on a second read.
fn reads(events: &[&Value], acked: &BTreeMap<i64, (i64, i64)>) -> BTreeSet<i64> {
    let mut seen = BTreeSet::new();
    for e in events {
        let seq = seq_of(e);
        let at = (int(e, "partition"), int(e, "offset"));
        assert_eq!(
            acked.get(&seq),
            Some(&at),
            "value-{seq} read at {at:?}: {e}"
        );
        assert!(seen.insert(seq), "value-{seq} read twice");
    }
    seen
}

#[test]
fn kafkajs_group_of_two_shares_partitions_and_a_new_member_resumes_from_commits() {
    let broker = start_broker(BrokerOptions::default());
    let (partitions, messages) = (PARTITIONS.to_string(), MESSAGES.to_string());
    let (events, context) = run_script(
        &broker,
        "group",
        &[
            "--topic",
            "kafkajs-orders",
            "--group",
            "kafkajs-group",
            "--partitions",
            &partitions,
            "--messages",
            &messages,
        ],
    );
    let more = MESSAGES / 4;
    let acked = acknowledged(&events);
    assert_eq!(
        acked.keys().copied().collect::<Vec<_>>(),
        (0..MESSAGES + more).collect::<Vec<_>>(),
        "acknowledged\n{context}"
    );
    // Offsets per partition are 0, 1, 2, ... in acknowledgement order: one record per send.
    let mut next: BTreeMap<i64, i64> = BTreeMap::new();
    for (seq, &(p, offset)) in &acked {
        let expected = next.entry(p).or_insert(0);
        assert_eq!(
            offset, *expected,
            "value-{seq} acknowledged at {p}/{offset}\n{context}"
        );
        *expected += 1;
    }
    // Keys spread over every partition (17 keys, Kafka's murmur2 partitioner).
    let used: BTreeSet<i64> = acked.values().map(|&(p, _)| p).collect();
    assert_eq!(used, (0..PARTITIONS).collect(), "{context}");

    let assigned = of(&events, "assigned");
    assert_eq!(assigned.len(), 1, "{context}");
    let part = |m: &str| -> BTreeSet<i64> {
        assigned[0][m]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default()
    };
    let (a, b) = (part("a"), part("b"));
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both members hold partitions: {}",
        assigned[0]
    );
    assert!(a.is_disjoint(&b), "{}", assigned[0]);
    assert_eq!(
        a.union(&b).copied().collect::<BTreeSet<_>>(),
        (0..PARTITIONS).collect(),
        "{}",
        assigned[0]
    );

    let first = of(&events, "read");
    assert_eq!(
        reads(&first, &acked),
        (0..MESSAGES).collect(),
        "the pair's reads\n{context}"
    );
    let members: BTreeSet<i64> = first.iter().map(|e| int(e, "member")).collect();
    assert_eq!(
        members,
        BTreeSet::from([0, 1]),
        "both members read\n{context}"
    );
    // Each member read only its own partitions.
    for e in &first {
        let mine = if int(e, "member") == 0 { &a } else { &b };
        assert!(
            mine.contains(&int(e, "partition")),
            "read outside the assignment: {e}"
        );
    }

    let resumed = reads(&of(&events, "resumed_read"), &acked);
    assert_eq!(
        resumed,
        (MESSAGES..MESSAGES + more).collect(),
        "the new member reads only what came after the commits\n{context}"
    );
}

#[test]
fn kafkajs_offsets_by_timestamp_finds_the_first_record_at_or_after_the_time() {
    let broker = start_broker(BrokerOptions::default());
    let (events, context) = run_script(&broker, "times", &["--topic", "kafkajs-times"]);
    let acked = acknowledged(&events);
    assert_eq!(
        acked.into_iter().collect::<Vec<_>>(),
        (0..10).map(|i| (i, (0, i))).collect::<Vec<_>>(),
        "{context}"
    );
    let answers: Vec<(i64, Value, Value)> = of(&events, "offset_for_time")
        .iter()
        .map(|e| {
            (
                int(e, "asked"),
                e["partitions"].clone(),
                e["offset"].clone(),
            )
        })
        .collect();
    let only_0 = Value::from(vec![0]);
    assert_eq!(
        answers,
        vec![
            // Records are stamped T0 + 1000 * i; T0 + 3500 finds record 4, T0 record 0.
            (3_500, only_0.clone(), Value::from(4)),
            (0, only_0.clone(), Value::from(0)),
            // Past the last record Kafka answers -1, which kafkajs replaces by the high watermark.
            (60_000, only_0, Value::from(10)),
        ],
        "{context}"
    );
}

#[test]
fn kafkajs_admin_round_trip_adds_partitions_alters_a_config_deletes_records_and_the_topic() {
    let broker = start_broker(BrokerOptions::default());
    let topic = "kafkajs-admin";
    let (events, context) = run_script(&broker, "admin", &["--topic", topic, "--partitions", "3"]);
    let created = of(&events, "created");
    assert_eq!(created.len(), 1, "{context}");
    assert_eq!(
        created[0]["created"], true,
        "createTopics created it\n{context}"
    );
    let listed = of(&events, "listed");
    assert_eq!(listed.len(), 1, "{context}");
    assert_eq!(
        listed[0]["present"], true,
        "listed after creation\n{context}"
    );

    let configs = of(&events, "configs");
    assert_eq!(configs.len(), 1, "one resource described\n{context}");
    let c = configs[0];
    assert_eq!(c["resource"], topic, "{context}");
    assert_eq!(c["error_code"], 0, "{context}");
    let names: BTreeSet<&str> = c["names"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        names.len() as i64,
        int(c, "entries"),
        "no config listed twice: {c}"
    );
    for name in [
        "cleanup.policy",
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "max.message.bytes",
        "min.insync.replicas",
    ] {
        assert!(names.contains(name), "{name} is described: {c}");
    }
    // One broker, replication factor 1: acks=all is taken from the leader alone, and the
    // reported value says so. Not set on the topic, so its source is a default (Kafka's
    // DEFAULT_CONFIG 5, or STATIC_BROKER_CONFIG 4 where a broker flag differs), never 1 (topic).
    let min = &c["min_insync_replicas"];
    assert_eq!(min["value"], "1", "{c}");
    let source = int(min, "source");
    assert!(
        [4, 5].contains(&source),
        "min.insync.replicas source {source}: {c}"
    );

    // The operator's round trip (issue 17, item 5): add partitions, alter a config, delete
    // records — each seen acting, and each refusal with Kafka's code.
    let added = of(&events, "partitions_added");
    assert_eq!(added.len(), 1, "{context}");
    assert_eq!(int(added[0], "count"), 5, "3 + 2 partitions\n{context}");
    let not_grown = of(&events, "partitions_not_grown");
    assert_eq!(
        not_grown[0]["error_code"], 37,
        "INVALID_PARTITIONS for the same count\n{context}"
    );
    let altered = of(&events, "config_altered");
    assert_eq!(altered.len(), 1, "{context}");
    assert_eq!(altered[0]["value"], "3600000", "{context}");
    assert_eq!(
        int(altered[0], "source"),
        1,
        "a topic config now\n{context}"
    );
    assert_eq!(altered[0]["read_only"], false, "{context}");
    assert_eq!(
        altered[0]["bad_value_error_code"], 40,
        "INVALID_CONFIG for retention.ms=soon\n{context}"
    );
    let records = of(&events, "records_deleted");
    assert_eq!(records.len(), 1, "{context}");
    assert_eq!(
        (int(records[0], "low"), int(records[0], "high")),
        (4, 10),
        "the log starts at 4 after deleting before 4\n{context}"
    );

    let deleted = of(&events, "deleted");
    assert_eq!(deleted.len(), 1, "the topic left listTopics\n{context}");
    assert!(int(deleted[0], "polls") >= 1, "{context}");
}
