//! The README's five-minute tour, run for real: `spool topic create|list|describe|delete`,
//! `spool produce` from stdin with `--key-separator`, `spool consume -n N --format json`, and a
//! failing command's one-line error and non-zero exit.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use spool_tests::cli::{spool, spool_ok};
use spool_tests::Broker;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `spool produce -v` lines: `<topic>/<partition> offset <offset>`.
fn parse_delivery(line: &str) -> (String, i64, i64) {
    let (tp, offset) = line
        .split_once(" offset ")
        .unwrap_or_else(|| panic!("not a delivery line: {line:?}"));
    let (topic, partition) = tp
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("not a delivery line: {line:?}"));
    (
        topic.to_owned(),
        partition.parse().expect("a partition number"),
        offset.parse().expect("an offset"),
    )
}

#[test]
fn cli_tour() {
    let broker = Broker::start();

    let out = spool_ok(&broker, &["topic", "create", "tour", "-p", "3"], "");
    assert!(out.contains("created topic tour"), "create said: {out}");
    spool_ok(&broker, &["topic", "create", "scratch"], "");

    let listed = spool_ok(&broker, &["topic", "list"], "");
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort_unstable();
    assert_eq!(names, ["scratch", "tour"], "topic list printed: {listed}");

    let described = spool_ok(&broker, &["topic", "describe", "tour"], "");
    assert!(
        described.contains("topic tour (3 partitions)"),
        "describe printed: {described}"
    );
    for p in 0..3 {
        assert!(
            described
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&p.to_string())),
            "no row for partition {p} in: {described}"
        );
    }

    let input = "alice:hello\nbob:world\ncarol:a:b:c\nno separator here\n";
    let start_ms = now_ms();
    let produced = spool_ok(
        &broker,
        &["produce", "tour", "--key-separator", ":", "-v"],
        input,
    );
    let deliveries: Vec<(String, i64, i64)> = produced.lines().map(parse_delivery).collect();
    assert_eq!(
        deliveries.len(),
        4,
        "one delivery line per input line: {produced}"
    );

    let consumed = spool_ok(
        &broker,
        &["consume", "tour", "-n", "4", "--format", "json"],
        "",
    );
    let end_ms = now_ms();
    let mut by_value: BTreeMap<String, Value> = BTreeMap::new();
    for line in consumed.lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        let obj = v.as_object().expect("one JSON object per line");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["key", "offset", "partition", "timestamp", "topic", "value"],
            "fields of {line}"
        );
        assert_eq!(v["topic"], "tour");
        let ts = v["timestamp"].as_i64().expect("a numeric timestamp");
        assert!(
            (start_ms - 60_000..=end_ms + 60_000).contains(&ts),
            "timestamp {ts} is not around the produce time {start_ms}..{end_ms}"
        );
        let value = v["value"].as_str().expect("a string value").to_owned();
        by_value.insert(value, v);
    }
    assert_eq!(by_value.len(), 4, "consume printed: {consumed}");
    let expected = [
        ("hello", Value::from("alice")),
        ("world", Value::from("bob")),
        ("a:b:c", Value::from("carol")),
        ("no separator here", Value::Null),
    ];
    for (i, (value, key)) in expected.iter().enumerate() {
        let v = by_value
            .get(*value)
            .unwrap_or_else(|| panic!("{value:?} not consumed: {consumed}"));
        assert_eq!(&v["key"], key, "key of {value:?}");
        let (topic, partition, offset) = &deliveries[i];
        assert_eq!(topic, "tour");
        assert_eq!(
            (v["partition"].as_i64(), v["offset"].as_i64()),
            (Some(*partition), Some(*offset)),
            "{value:?} was delivered to {partition}/{offset}"
        );
    }

    let out = spool_ok(&broker, &["topic", "delete", "scratch"], "");
    assert!(out.contains("deleted topic scratch"), "delete said: {out}");
    assert_eq!(spool_ok(&broker, &["topic", "list"], "").trim(), "tour");

    let missing = spool(&broker, &["topic", "describe", "no-such-topic"], "");
    assert!(
        !missing.status.success(),
        "describing a missing topic succeeded: {}",
        missing.stdout
    );
    let err = missing.stderr.trim();
    assert!(
        err.starts_with("spool: ") && err.lines().count() == 1 && err.contains("no-such-topic"),
        "want one human line naming the topic, got: {err:?}"
    );
}

/// The one line a failing command printed, which must name its cause.
fn one_line_error(f: &spool_tests::process::Finished, args: &[&str], cause: &[&str]) -> String {
    assert!(
        !f.status.success(),
        "spool {args:?} succeeded:\nstdout:\n{}\nstderr:\n{}",
        f.stdout,
        f.stderr
    );
    let err = f.stderr.trim();
    assert!(
        err.starts_with("spool: ") && err.lines().count() == 1,
        "spool {args:?}: want one line on stderr, got: {err:?}"
    );
    for c in cause {
        assert!(
            err.contains(c),
            "spool {args:?}: {err:?} does not say {c:?}"
        );
    }
    err.to_owned()
}

/// A newcomer's typo and a dead broker: every command ends (each run is bounded by
/// `spool_tests::cli::CLI_TIMEOUT`, far above the commands' own --timeout-ms) with a non-zero
/// exit and one line naming the cause — never a hang.
#[test]
fn cli_errors_name_the_missing_topic_and_the_unreachable_broker() {
    let mut broker = Broker::start();
    spool_ok(&broker, &["topic", "create", "present"], "");
    let missing = ["does not exist", "spool topic create no-such-topic"];
    let commands: [(&[&str], &str); 5] = [
        (&["produce", "no-such-topic"], "a line\n"),
        (&["consume", "no-such-topic", "-n", "1"], ""),
        (&["consume", "no-such-topic", "--group", "g", "-n", "1"], ""),
        (&["topic", "describe", "no-such-topic"], ""),
        (
            &[
                "group",
                "reset-offsets",
                "g",
                "--topic",
                "no-such-topic",
                "--to-earliest",
            ],
            "",
        ),
    ];
    for (args, stdin) in commands {
        let f = spool(&broker, args, stdin);
        one_line_error(&f, args, &missing);
    }

    let address = broker.bootstrap();
    broker.kill9();
    let unreachable = ["broker unreachable at", address.as_str()];
    let commands: [(&[&str], &str); 4] = [
        (&["topic", "list"], ""),
        (&["produce", "present"], "a line\n"),
        (&["consume", "present", "-n", "1"], ""),
        (&["group", "list"], ""),
    ];
    for (args, stdin) in commands {
        let f = spool(&broker, args, stdin);
        one_line_error(&f, args, &unreachable);
    }
}
