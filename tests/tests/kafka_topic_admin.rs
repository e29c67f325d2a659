//! Topic administration on the Kafka port with kafka-python 2.x: `tests/kafka_topic_admin/
//! admin.py` grows a topic with CreatePartitions and produces to and fetches from a new
//! partition, alters configs (AlterConfigs, IncrementalAlterConfigs DELETE and APPEND) and reads
//! them back with DescribeConfigs, shows `max.message.bytes` acting on a live partition, and asks
//! for a preferred election. This test runs the script against one broker and checks its JSON
//! lines.
//!
//! On three brokers (`cluster_ops.py`, each request sent to a broker that is not the active
//! controller, which forwards it): after a leader's kill and return, a preferred election gives
//! it back the partitions it led; CreatePartitions grows the topic on every node; and
//! `min.insync.replicas` raised to 3 on the live topic makes acks=all fail with
//! NOT_ENOUGH_REPLICAS once a broker is down.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spool_protocol::client::blocking::Producer;
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ClientError, ProducerRecord};
use spool_protocol::ErrorCode;
use spool_tests::cluster::Cluster;
use spool_tests::kafka_clients::{events_of, python_with_kafka, run_events, start_broker};
use spool_tests::replicated::{cluster_with_topic_on, wait_re_led};
use spool_tests::BrokerOptions;

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn kafka_python_grows_a_topic_and_alters_its_configs() {
    let broker = start_broker(BrokerOptions::default());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka_topic_admin/admin.py");
    let mut cmd = Command::new(python_with_kafka());
    cmd.arg(&script)
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--topic", "grow"])
        .args(["--timeout-s", &SCRIPT_TIMEOUT.as_secs().to_string()]);
    let (events, context) = run_events(&mut cmd, &broker, RUN_TIMEOUT);
    let one = |kind: &str| -> &Value {
        let of = events_of(&events, kind);
        assert_eq!(of.len(), 1, "one {kind} event\n{context}");
        of[0]
    };

    assert_eq!(
        one("grown")["error_code"],
        0,
        "1 -> 3 partitions\n{context}"
    );
    let same = one("not_grown");
    assert_eq!(same["error_code"], 37, "INVALID_PARTITIONS\n{context}");
    assert!(
        same["error_message"]
            .as_str()
            .is_some_and(|m| m.contains('3')),
        "the message names the current count\n{context}"
    );
    assert_eq!(one("shrunk")["error_code"], 37, "{context}");
    assert_eq!(
        one("metadata")["partitions"],
        serde_json::json!([0, 1, 2]),
        "{context}"
    );
    assert_eq!(one("produced")["partition"], 2, "{context}");
    assert_eq!(one("produced")["offset"], 0, "{context}");
    assert_eq!(
        one("fetched")["values"],
        serde_json::json!(["in-new-partition"]),
        "{context}"
    );

    let before = one("before");
    assert_eq!(
        (&before["source"], &before["read_only"]),
        (&Value::from(5), &Value::from(false))
    );
    assert_eq!(one("altered")["error_code"], 0, "{context}");
    let after = one("after");
    assert_eq!(
        (&after["value"], &after["source"], &after["read_only"]),
        (&Value::from("1000"), &Value::from(1), &Value::from(false)),
        "DescribeConfigs shows the topic's value\n{context}"
    );
    let big = one("big_record");
    assert_eq!(
        big["refused"], true,
        "max.message.bytes=1000 acts at once\n{context}"
    );
    assert_eq!(big["error"], "MessageSizeTooLargeError", "{context}");
    assert_eq!(
        one("bad_value")["error_code"],
        40,
        "INVALID_CONFIG\n{context}"
    );
    let broker_resource = one("broker_resource");
    assert_eq!(broker_resource["error_code"], 42, "{context}");
    assert_eq!(
        broker_resource["error_message"], "broker configs are set by flags at start-up",
        "{context}"
    );
    assert_eq!(one("deleted")["error_code"], 0, "{context}");
    let restored = one("after_delete");
    assert_eq!(
        (&restored["value"], &restored["source"]),
        (&Value::from("1048588"), &Value::from(5)),
        "DELETE returns the default\n{context}"
    );
    assert_eq!(one("big_record_again")["offset"], 0, "{context}");
    assert_eq!(one("appended")["error_code"], 0, "{context}");
    // The default `delete` plus `compact`, as DescribeConfigs writes the policy.
    assert_eq!(one("after_append")["value"], "compact,delete", "{context}");
    assert_eq!(
        one("append_refused")["error_code"],
        40,
        "APPEND to a non-list\n{context}"
    );

    let elected = one("elected");
    assert_eq!(elected["error_code"], 0, "{context}");
    assert_eq!(
        elected["results"],
        serde_json::json!([[0, 84], [1, 84], [2, 84]]),
        "ELECTION_NOT_NEEDED on one node\n{context}"
    );
}

/// Runs `cluster_ops.py <op> <args>` against node `via` of `cluster`; returns its one answer.
fn cluster_op(cluster: &Cluster, via: i32, topic: &str, op: &str, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka_topic_admin/cluster_ops.py");
    let broker = cluster.node(via);
    let mut cmd = Command::new(python_with_kafka());
    cmd.arg(&script)
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--node", &via.to_string()])
        .args(["--topic", topic])
        .arg(op)
        .args(args);
    let (events, context) = run_events(&mut cmd, broker, RUN_TIMEOUT);
    let of = events_of(&events, op);
    assert_eq!(of.len(), 1, "one {op} answer\n{context}");
    of[0].clone()
}

#[test]
fn on_three_brokers_a_preferred_election_a_new_partition_and_min_isr_act_through_any_broker() {
    const TOPIC: &str = "admin3";
    let (mut cluster, controller, victim, led) =
        cluster_with_topic_on(Cluster::start(3), TOPIC, 3, &[]);
    cluster.node_mut(victim).kill9();
    wait_re_led(&cluster, controller, TOPIC, victim, &led);
    cluster.node_mut(victim).restart();
    cluster.wait_until("the victim back in every ISR", |c| {
        let rows = c.describe(controller, TOPIC);
        rows.iter().all(|r| r.isr.contains(&victim)).then_some(())
    });
    let rows = cluster.describe(controller, TOPIC);
    assert!(
        led.iter().all(|p| rows[*p as usize].leader != victim),
        "nothing moves leadership back on its own: {rows:?}"
    );

    // Sent to the victim, which is not the controller: forwarded.
    let elect = cluster_op(&cluster, victim, TOPIC, "elect", &[]);
    assert_eq!(elect["error_code"], 0, "{elect}");
    let mut elected: Vec<(String, i64, i64)> = elect["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let topic = r[0].as_str().expect("topic").to_string();
            (
                topic,
                r[1].as_i64().expect("partition"),
                r[2].as_i64().expect("code"),
            )
        })
        .collect();
    elected.sort();
    let want: Vec<(String, i64, i64)> = led
        .iter()
        .map(|p| (TOPIC.to_string(), i64::from(*p), 0))
        .collect();
    assert_eq!(
        elected, want,
        "only the moved partitions needed an election"
    );
    cluster.wait_until("every partition led by its preferred replica", |c| {
        let rows = c.describe(victim, TOPIC);
        (rows.len() == 3 && rows.iter().all(|r| r.leader == r.replicas[0])).then_some(())
    });

    let grow = cluster_op(&cluster, victim, TOPIC, "grow", &["4"]);
    assert_eq!(grow["error_code"], 0, "{grow}");
    cluster.wait_until("four partitions on every node", |c| {
        (1..=3)
            .all(|i| c.describe(i, TOPIC).len() == 4)
            .then_some(())
    });

    let alter = cluster_op(
        &cluster,
        victim,
        TOPIC,
        "alter",
        &["min.insync.replicas", "3"],
    );
    assert_eq!(alter["error_code"], 0, "{alter}");
    cluster.node_mut(victim).kill9();
    cluster.wait_until("the victim out of every ISR", |c| {
        let rows = c.describe(controller, TOPIC);
        rows.iter()
            .all(|r| !r.isr.contains(&victim) && r.leader >= 0)
            .then_some(())
    });
    let config = ProducerConfig {
        retries: 0,
        ..spool_tests::client::producer_config(Acks::All)
    };
    let producer =
        Producer::new(&[&cluster.node(controller).bootstrap()], config).expect("a producer");
    for p in 0..4 {
        let record = ProducerRecord::new(TOPIC, format!("v{p}").into_bytes()).with_partition(p);
        let outcome = producer.send(record).and_then(|d| d.wait());
        assert!(
            matches!(
                outcome,
                Err(ClientError::Broker {
                    code: ErrorCode::NotEnoughReplicas,
                    ..
                })
            ),
            "partition {p}: min.insync.replicas altered to 3, two in sync: {outcome:?}"
        );
    }
    let _ = producer.close(spool_tests::client::OPERATION_TIMEOUT_MS);
}
