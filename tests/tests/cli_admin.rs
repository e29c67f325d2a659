//! The topic changes past create and delete, run for real through the CLI (issue 17, item 3):
//! `spool topic add-partitions` (the new partitions take records at once; keys move, and the
//! command says so), `spool topic alter-config` (a bad value is refused with INVALID_CONFIG and
//! nothing changes), `spool topic delete-records` (a consumer from the earliest offset then
//! starts at the cut; a cut past the high watermark is refused) and `spool topic elect-leaders`
//! (one broker: nothing to elect). Each refusal is one line on stderr and exit 1.

use spool_tests::cli::{spool, spool_ok};
use spool_tests::Broker;

/// Runs `args`, which must fail with one line on stderr saying each of `says`.
fn refused(broker: &Broker, args: &[&str], says: &[&str]) {
    let f = spool(broker, args, "");
    assert_eq!(
        f.status.code(),
        Some(1),
        "spool {args:?}: {}\n{}",
        f.stdout,
        f.stderr
    );
    let err = f.stderr.trim();
    assert_eq!(err.lines().count(), 1, "spool {args:?}: {err:?}");
    for s in says {
        assert!(
            err.contains(s),
            "spool {args:?}: {err:?} does not say {s:?}"
        );
    }
}

/// The offsets `spool consume` prints for `partition` from the earliest offset, reading `n`.
fn offsets_from_earliest(broker: &Broker, topic: &str, partition: i32, n: usize) -> Vec<i64> {
    let out = spool_ok(
        broker,
        &[
            "consume",
            topic,
            "--partition",
            &partition.to_string(),
            "-n",
            &n.to_string(),
            "--format",
            "json",
        ],
        "",
    );
    out.lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
            v["offset"].as_i64().expect("an offset")
        })
        .collect()
}

#[test]
fn topic_changes_through_the_cli() {
    let broker = Broker::start();
    spool_ok(&broker, &["topic", "create", "changes", "-p", "2"], "");

    // Add partitions: described at once, and a record can go to the new one.
    let out = spool_ok(
        &broker,
        &["topic", "add-partitions", "changes", "--to", "4"],
        "",
    );
    assert!(out.contains("now has 4 partitions (had 2)"), "{out}");
    assert!(out.contains("key"), "the CLI warns that keys move: {out}");
    let described = spool_ok(&broker, &["topic", "describe", "changes"], "");
    assert!(described.contains("(4 partitions)"), "{described}");
    let produced = spool_ok(
        &broker,
        &["produce", "changes", "--partition", "3", "-v"],
        "on-the-new-partition\n",
    );
    assert!(produced.contains("changes/3 offset 0"), "{produced}");
    refused(
        &broker,
        &["topic", "add-partitions", "changes", "--to", "3"],
        &["INVALID_PARTITIONS"],
    );
    refused(
        &broker,
        &["topic", "add-partitions", "no-such-topic", "--to", "3"],
        &["no-such-topic", "does not exist"],
    );

    // Alter configs: set, a bad value refused, delete back to the default.
    let out = spool_ok(
        &broker,
        &[
            "topic",
            "alter-config",
            "changes",
            "--set",
            "retention.ms=3600000",
        ],
        "",
    );
    assert!(out.contains("altered 1 config"), "{out}");
    refused(
        &broker,
        &[
            "topic",
            "alter-config",
            "changes",
            "--set",
            "retention.ms=soon",
        ],
        &["INVALID_CONFIG", "retention.ms"],
    );
    refused(
        &broker,
        &[
            "topic",
            "alter-config",
            "changes",
            "--set",
            "no.such.config=1",
        ],
        &["INVALID_CONFIG", "no.such.config"],
    );
    spool_ok(
        &broker,
        &[
            "topic",
            "alter-config",
            "changes",
            "--delete",
            "retention.ms",
        ],
        "",
    );

    // Delete records: the earliest offset moves to the cut.
    let lines: String = (0..10).map(|i| format!("r{i}\n")).collect();
    spool_ok(&broker, &["produce", "changes", "--partition", "0"], &lines);
    assert_eq!(
        offsets_from_earliest(&broker, "changes", 0, 10),
        (0..10).collect::<Vec<_>>()
    );
    let out = spool_ok(
        &broker,
        &[
            "topic",
            "delete-records",
            "changes",
            "--partition",
            "0",
            "--before",
            "6",
        ],
        "",
    );
    assert!(out.contains("log start 6"), "{out}");
    assert_eq!(
        offsets_from_earliest(&broker, "changes", 0, 4),
        (6..10).collect::<Vec<_>>()
    );
    refused(
        &broker,
        &[
            "topic",
            "delete-records",
            "changes",
            "--partition",
            "0",
            "--before",
            "99",
        ],
        &["high watermark"],
    );

    // Kafka's rule: a compacted-only log keeps keys' histories, so it refuses; compact,delete
    // deletes.
    for (topic, policy) in [("keyed", "compact"), ("keyed-and-aged", "compact,delete")] {
        let config = format!("cleanup.policy={policy}");
        spool_ok(&broker, &["topic", "create", topic, "-c", &config], "");
        spool_ok(
            &broker,
            &["produce", topic, "--key-separator", ":"],
            "k:v\nk:w\n",
        );
    }
    let delete = |topic: &'static str| -> Vec<&'static str> {
        vec![
            "topic",
            "delete-records",
            topic,
            "--partition",
            "0",
            "--before",
            "1",
        ]
    };
    refused(&broker, &delete("keyed"), &["POLICY_VIOLATION"]);
    let out = spool_ok(&broker, &delete("keyed-and-aged"), "");
    assert!(out.contains("log start 1"), "{out}");

    // One broker leads everything already: nothing to elect, and that is not a failure.
    let out = spool_ok(&broker, &["topic", "elect-leaders", "changes"], "");
    assert_eq!(out.lines().count(), 4, "one line per partition: {out}");
    assert!(out.contains("ELECTION_NOT_NEEDED"), "{out}");
}

/// A config change acts on the running broker's open partitions, not only on those opened
/// after it: retention.bytes lowered on a topic whose segments already exist deletes the oldest
/// ones at the next retention pass, with no restart.
#[test]
fn an_altered_retention_acts_on_the_live_partition() {
    let mut options = spool_tests::BrokerOptions::default();
    options
        .extra_args
        .extend(["--log-retention-check-interval-ms", "100"].map(String::from));
    let broker = Broker::start_with(options);
    spool_ok(
        &broker,
        &["topic", "create", "shrinking", "-c", "segment.bytes=4096"],
        "",
    );
    // Ten produce runs of 20 records (about 2 KB each, one batch a run): several segments.
    for run in 0..10 {
        let lines: String = (0..20)
            .map(|i| format!("record-{run}-{i:02}-{}\n", "x".repeat(80)))
            .collect();
        spool_ok(&broker, &["produce", "shrinking"], &lines);
    }
    assert_eq!(offsets_from_earliest(&broker, "shrinking", 0, 1), [0]);

    spool_ok(
        &broker,
        &[
            "topic",
            "alter-config",
            "shrinking",
            "--set",
            "retention.bytes=8192",
        ],
        "",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let earliest = loop {
        let first = offsets_from_earliest(&broker, "shrinking", 0, 1)[0];
        if first > 0 || std::time::Instant::now() > deadline {
            break first;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        earliest > 100,
        "retention.bytes=8192 over ~20 KB in 4 KiB segments keeps at most the last few segments; \
         the log still starts at {earliest}"
    );
}
