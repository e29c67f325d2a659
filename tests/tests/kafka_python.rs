//! The Kafka port with kafka-python 2.x (issue #7, item 4c): `tests/kafka_python/clients.py`
//! creates a topic, produces keyed messages with `acks="all"`, consumes them all with a consumer
//! group (committing after each poll), describes the group, and reads its committed offsets back
//! from a second client. This test runs the script against a broker and checks its JSON lines.
//!
//! It also prints how long the new group took from `subscribe` to its first record, to compare
//! with Kafka's `group.initial.rebalance.delay.ms` (3 s) plus about a second; that figure is
//! reported, not asserted (timing assertions are flaky on a shared machine).
//!
//! A second run of the script drives the admin APIs: CreateTopics (with a config, and a second
//! time, which must fail), DescribeConfigs, Metadata (list topics) and DeleteTopics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spool_protocol::client::partitioner::partition_for_key;
use spool_tests::kafka_clients::{
    events_of, int_field, python_with_kafka, run_events, start_broker,
};
use spool_tests::{Broker, BrokerOptions};

const MESSAGES: usize = 1_000;
const PARTITIONS: i32 = 3;
const TOPIC: &str = "python-orders";
const GROUP: &str = "python-group";
/// The script's own bound on its waits, and this test's bound on the script (a little longer,
/// so the script's own timeout message wins when it can).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `clients.py <mode>` against `broker` with `args`; returns its events and a context
/// (its output and the broker's log) for failure messages. Insists on the closing `done` event.
fn run_script(broker: &Broker, mode: &str, args: &[&str]) -> (Vec<Value>, String) {
    let python = python_with_kafka();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka_python/clients.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(mode)
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--timeout-s", &SCRIPT_TIMEOUT.as_secs().to_string()])
        .args(args);
    run_events(&mut cmd, broker, RUN_TIMEOUT)
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events_of(events, kind)
}

#[test]
fn kafka_python_produces_and_a_group_consumes_and_commits_everything() {
    let broker = start_broker(BrokerOptions::default());
    let (partitions, messages) = (PARTITIONS.to_string(), MESSAGES.to_string());
    let (events, context) = run_script(
        &broker,
        "group",
        &[
            "--topic",
            TOPIC,
            "--group",
            GROUP,
            "--partitions",
            &partitions,
            "--messages",
            &messages,
        ],
    );
    let of = |kind: &str| of(&events, kind);

    // Produced: every key acknowledged once, in its murmur2 partition (kafka-python's default
    // partitioner is Kafka's), at offsets 0..n per partition.
    let mut acked: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in of("acked") {
        let key = e["key"].as_str().expect("key").to_string();
        let at = (int(e, "partition"), int(e, "offset"));
        let want = partition_for_key(key.as_bytes(), PARTITIONS as usize) as i64;
        assert_eq!(at.0, want, "{key}: acknowledged in partition {}", at.0);
        assert!(
            acked.insert(key.clone(), at).is_none(),
            "{key} acknowledged twice"
        );
    }
    assert_eq!(acked.len(), MESSAGES, "acknowledged messages\n{context}");
    let mut per_partition: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for &(p, o) in acked.values() {
        assert!(
            per_partition.entry(p).or_default().insert(o),
            "p{p} offset {o} twice"
        );
    }
    for (p, offsets) in &per_partition {
        let dense: BTreeSet<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, &dense, "partition {p}: offsets not 0..n");
    }

    // Consumed by the group: exactly what was acknowledged, where it was acknowledged.
    let mut consumed: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in of("consumed") {
        let key = e["key"].as_str().expect("key").to_string();
        let value = e["value"].as_str().expect("value");
        assert_eq!(
            value.strip_prefix("value-"),
            key.strip_prefix("key-"),
            "{e}"
        );
        let at = (int(e, "partition"), int(e, "offset"));
        assert!(
            consumed.insert(key.clone(), at).is_none(),
            "{key} consumed twice"
        );
    }
    assert_eq!(consumed, acked, "consumed vs acknowledged\n{context}");

    // The member had every partition, the group was listed and described while it was in it.
    let assignment = of("assignment");
    assert_eq!(
        assignment[0]["partitions"],
        serde_json::json!((0..PARTITIONS).collect::<Vec<_>>()),
        "{context}"
    );
    let listed = &of("groups")[0]["listed"];
    assert!(
        listed
            .as_array()
            .is_some_and(|l| l.contains(&Value::from(GROUP))),
        "ListGroups: {listed}"
    );
    let described = of("described");
    assert_eq!(described.len(), 1, "{context}");
    assert_eq!(described[0]["group"], GROUP);
    assert_eq!(described[0]["state"], "Stable", "{}", described[0]);
    assert_eq!(
        described[0]["protocol_type"], "consumer",
        "{}",
        described[0]
    );
    assert_eq!(described[0]["members"], 1, "{}", described[0]);

    // Committed offsets, read by another client: the end of every partition.
    for e in of("committed") {
        let p = int(e, "partition");
        let end = per_partition.get(&p).map_or(0, |o| o.len() as i64);
        assert_eq!(
            e["offset"], end,
            "committed offset of partition {p}\n{context}"
        );
    }
    assert_eq!(of("committed").len(), PARTITIONS as usize, "{context}");

    let first = of("first_record");
    println!(
        "kafka-python: {MESSAGES} messages produced and consumed; the new group's first record \
         came {} ms after subscribe (Kafka: group.initial.rebalance.delay.ms 3000 + about 1000)",
        first[0]["after_ms"]
    );
}

fn int(event: &Value, field: &str) -> i64 {
    int_field(event, field)
}

#[test]
fn kafka_python_admin_creates_describes_and_deletes_a_topic() {
    let broker = start_broker(BrokerOptions::default());
    let (events, context) = run_script(
        &broker,
        "admin",
        &["--topic", "python-admin", "--partitions", "2"],
    );
    assert_eq!(of(&events, "created").len(), 1, "{context}");
    assert_eq!(
        of(&events, "already_exists").len(),
        1,
        "creating the topic twice must fail with TOPIC_ALREADY_EXISTS\n{context}"
    );
    let configs = of(&events, "configs");
    assert_eq!(configs.len(), 1, "{context}");
    assert_eq!(configs[0]["error_code"], 0, "{}", configs[0]);
    assert_eq!(configs[0]["resource"], "python-admin", "{}", configs[0]);
    assert_eq!(
        configs[0]["entries"]["retention.ms"], "3600000",
        "the config given at creation: {}",
        configs[0]
    );
    let listed = &of(&events, "listed")[0]["topics"];
    assert!(
        listed
            .as_array()
            .is_some_and(|t| t.contains(&Value::from("python-admin"))),
        "ListTopics (Metadata) after CreateTopics: {listed}"
    );
    assert_eq!(of(&events, "gone").len(), 1, "{context}");
}
