//! The Kafka port with aiokafka 0.x (issue 17, item 5: a client family nobody here wrote, asyncio,
//! its own protocol code): `tests/aiokafka/clients.py` drives it, this test checks its JSON lines.
//!
//! - `group`: keyed, gzip-compressed, acks=all produce; a group of two members sharing the
//!   partitions reads everything once, where it was acknowledged, committing as it goes; a fresh
//!   member of the group then reads exactly what was produced after the first two stopped (it
//!   resumed from their commits).
//! - `times`: `offsets_for_times` answers the first record at or after the asked time with that
//!   record's own timestamp (not the asked one), and nothing past the last record.
//! - `admin`: an operator's round trip — partitions added (the same count again is
//!   INVALID_PARTITIONS), a config altered and described (a bad value is INVALID_CONFIG), records
//!   deleted before offset 4 (the low watermark and a consumer's beginning move there), the topic
//!   deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spool_tests::kafka_clients::{
    events_of, int_field, python_with_aiokafka, run_events, start_broker,
};
use spool_tests::{Broker, BrokerOptions};

const MESSAGES: i64 = 400;
const PARTITIONS: i64 = 4;
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `clients.py <mode>`; returns its events and a context for failure messages. Insists on
/// the closing `done` event.
fn run_script(broker: &Broker, mode: &str, args: &[&str]) -> (Vec<Value>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("aiokafka/clients.py");
    let mut cmd = Command::new(python_with_aiokafka());
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
fn aiokafka_group_of_two_shares_partitions_and_a_new_member_resumes_from_commits() {
    let broker = start_broker(BrokerOptions::default());
    let (partitions, messages) = (PARTITIONS.to_string(), MESSAGES.to_string());
    let (events, context) = run_script(
        &broker,
        "group",
        &[
            "--topic",
            "aiokafka-orders",
            "--group",
            "aiokafka-group",
            "--partitions",
            &partitions,
            "--messages",
            &messages,
        ],
    );
    let more = MESSAGES / 4;
    let mut acked = BTreeMap::new();
    for e in of(&events, "acked") {
        let at = (int(e, "partition"), int(e, "offset"));
        assert!(
            acked.insert(int(e, "seq"), at).is_none(),
            "{e}: acknowledged twice"
        );
    }
    assert_eq!(
        acked.keys().copied().collect::<Vec<_>>(),
        (0..MESSAGES + more).collect::<Vec<_>>(),
        "acknowledged\n{context}"
    );
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
    assert_eq!(a.union(&b).count() as i64, PARTITIONS, "{}", assigned[0]);

    let first = reads(&of(&events, "read"), &acked);
    assert_eq!(
        first,
        (0..MESSAGES).collect(),
        "the pair's reads\n{context}"
    );
    let members: BTreeSet<i64> = of(&events, "read")
        .iter()
        .map(|e| int(e, "member"))
        .collect();
    assert_eq!(
        members,
        BTreeSet::from([0, 1]),
        "both members read\n{context}"
    );

    let resumed = reads(&of(&events, "resumed_read"), &acked);
    assert_eq!(
        resumed,
        (MESSAGES..MESSAGES + more).collect(),
        "the new member reads only what came after the commits\n{context}"
    );
}

#[test]
fn aiokafka_offsets_for_times_answers_the_found_records_own_timestamp() {
    let broker = start_broker(BrokerOptions::default());
    let (events, context) = run_script(&broker, "times", &["--topic", "aiokafka-times"]);
    let answers: Vec<(i64, Value, Value)> = of(&events, "offset_for_time")
        .iter()
        .map(|e| (int(e, "asked"), e["offset"].clone(), e["timestamp"].clone()))
        .collect();
    assert_eq!(
        answers,
        vec![
            // Records are stamped T0 + 1000 * i; T0 + 3500 finds record 4, stamped T0 + 4000.
            (3_500, Value::from(4), Value::from(4_000)),
            (0, Value::from(0), Value::from(0)),
            // Past the last record: no answer (Kafka's -1/-1, which aiokafka shows as None).
            (60_000, Value::Null, Value::Null),
        ],
        "{context}"
    );
}

#[test]
fn aiokafka_admin_round_trip_adds_partitions_alters_a_config_and_deletes_records() {
    let broker = start_broker(BrokerOptions::default());
    let (events, context) = run_script(
        &broker,
        "admin",
        &["--topic", "aiokafka-admin", "--partitions", "3"],
    );
    let added = of(&events, "partitions_added");
    assert_eq!(added.len(), 1, "{context}");
    assert_eq!(int(added[0], "count"), 5, "3 + 2 partitions\n{context}");
    assert_eq!(
        of(&events, "partitions_not_grown")[0]["error_code"],
        37,
        "INVALID_PARTITIONS for the same count\n{context}"
    );
    let altered = of(&events, "config_altered");
    assert_eq!(altered.len(), 1, "{context}");
    let a = altered[0];
    assert_eq!(a["error_codes"], serde_json::json!([0]), "{context}");
    assert_eq!(
        a["bad_value_error_codes"],
        serde_json::json!([40]),
        "INVALID_CONFIG for retention.ms=soon\n{context}"
    );
    assert_eq!(
        a["value"], "3600000",
        "the altered value is described\n{context}"
    );
    assert_eq!(a["read_only"], false, "{context}");
    assert_eq!(
        int(of(&events, "records_deleted")[0], "low"),
        4,
        "the low watermark after deleting before 4\n{context}"
    );
    assert_eq!(
        int(of(&events, "beginning")[0], "offset"),
        4,
        "a consumer's beginning is the new log start\n{context}"
    );
    assert_eq!(of(&events, "deleted").len(), 1, "{context}");
}
