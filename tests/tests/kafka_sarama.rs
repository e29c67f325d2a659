//! The Kafka port with sarama 1.22 (Debian's `golang-github-shopify-sarama-dev`, built here with
//! Debian's Go in GOPATH mode; issue 17): with sarama's **default** config (Kafka 0.8.2) a group's
//! commit goes out as OffsetCommit v1 and a fresh client reads it back with OffsetFetch v1 — spool
//! used to close the connection on v1, so sarama's commits were lost and it started over — and
//! DescribeConfigs v0 answers `min.insync.replicas` as it acts (1 on a one-broker topic), default
//! and alterable; then ClusterAdmin's round trip: partitions added (the same count again is
//! INVALID_PARTITIONS), a config altered and described (a bad value refused), records deleted
//! before offset 4 (the oldest offset moves there), the topic deleted. `tests/sarama/main.go`
//! drives it and prints JSON lines.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spool_tests::kafka_clients::{on_path, run_client, start_broker, tail, INSTALL_HINT};
use spool_tests::BrokerOptions;

/// Where Debian installs sarama's sources (and its dependencies') for GOPATH builds.
const DEBIAN_GOCODE: &str = "/usr/share/gocode";
const BUILD_TIMEOUT: Duration = Duration::from_secs(300);
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn sarama_with_its_default_config_commits_and_a_new_client_resumes_from_the_commit() {
    let go = on_path("go")
        .unwrap_or_else(|| panic!("go is not on PATH (sarama needs it): {INSTALL_HINT}"));
    let sarama = Path::new(DEBIAN_GOCODE).join("src/github.com/Shopify/sarama");
    assert!(
        sarama.is_dir(),
        "{} is missing (Debian's golang-github-shopify-sarama-dev): {INSTALL_HINT}",
        sarama.display()
    );
    let broker = start_broker(BrokerOptions::default());

    // A GOPATH of its own holding the program, Debian's beside it for sarama and its deps.
    let gopath = broker.scratch().join("gopath");
    let package = gopath.join("src/sarcheck");
    std::fs::create_dir_all(&package).expect("a GOPATH in the scratch directory");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("sarama/main.go");
    std::fs::copy(&source, package.join("main.go")).expect("copying tests/sarama/main.go");
    let binary = gopath.join("sarcheck");
    let mut build = Command::new(&go);
    build
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&package)
        .env("GOPATH", format!("{}:{DEBIAN_GOCODE}", gopath.display()))
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOCACHE", gopath.join("cache"));
    run_client(&mut build, b"", broker.scratch(), BUILD_TIMEOUT);

    let mut cmd = Command::new(&binary);
    cmd.arg(broker.kafka_bootstrap());
    let finished = run_client(&mut cmd, b"", broker.scratch(), RUN_TIMEOUT);
    let context = format!(
        "--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}\n{}",
        tail(&finished.stdout),
        tail(&finished.stderr),
        broker.log_tail()
    );
    let events: Vec<Value> = finished
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let one = |kind: &str| -> &Value {
        let found: Vec<&Value> = events.iter().filter(|e| e["event"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind} event\n{context}");
        found[0]
    };
    assert_eq!(one("produced")["offset"], 9, "{context}");
    assert_eq!(one("default_version")["version"], "0.8.2.0", "{context}");
    assert_eq!(
        one("first_start")["next_offset"],
        -1,
        "no commit yet\n{context}"
    );
    assert!(
        events.iter().all(|e| e["event"] != "commit_error"),
        "the commit failed\n{context}"
    );
    assert_eq!(
        one("resumed")["next_offset"],
        7,
        "a fresh default-config client resumes from the commit\n{context}"
    );
    let config = one("config");
    assert_eq!(
        (
            &config["name"],
            &config["value"],
            &config["read_only"],
            &config["default"]
        ),
        (
            &Value::from("min.insync.replicas"),
            &Value::from("1"),
            // A topic config: alterable.
            &Value::from(false),
            &Value::from(true)
        ),
        "DescribeConfigs v0\n{context}"
    );
    // The operator's round trip with ClusterAdmin.
    assert!(
        events.iter().all(|e| e["event"] != "admin_error"),
        "an admin step failed\n{context}"
    );
    assert_eq!(
        one("partitions_added")["count"],
        4,
        "2 + 2 partitions\n{context}"
    );
    assert_eq!(
        one("partitions_not_grown")["error_code"],
        37,
        "INVALID_PARTITIONS for the same count\n{context}"
    );
    let altered = one("config_altered");
    assert_eq!(altered["value"], "3600000", "{context}");
    assert_eq!(altered["read_only"], false, "{context}");
    assert_eq!(
        altered["bad_value_refused"], true,
        "retention.ms=soon refused\n{context}"
    );
    assert_eq!(
        one("records_deleted")["oldest"],
        4,
        "the oldest offset after deleting before 4\n{context}"
    );
    assert_eq!(one("topic_deleted")["event"], "topic_deleted");
    assert_eq!(
        events.last().map(|e| &e["event"]),
        Some(&Value::from("done"))
    );
}
