//! The Kafka port with Debian's `kcat` (built on librdkafka 2.0.2, which negotiates ApiVersions
//! v3 and chokes on a response it cannot read): metadata as text and as JSON, keyed produce,
//! consume to the end, a consumer group that commits and resumes, auto-created topics, the
//! advertised address, and offsets by timestamp (issue #7, items 3 and 4b).
//!
//! kcat is installed by `scripts/test.sh`; without it these tests fail saying so. Each kcat run
//! is bounded, and its output is shown when it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use spool_protocol::client::partitioner::partition_for_key;
use spool_tests::client::create_topic;
use spool_tests::kafka_clients::{kcat, run_client, start_broker};
use spool_tests::{Broker, BrokerOptions};

/// Bound on one kcat run; a group consume includes the 3 s initial rebalance delay.
const KCAT_TIMEOUT: Duration = Duration::from_secs(60);
const PARTITIONS: i32 = 3;
const LINES: usize = 1_000;

/// `kcat -b <broker's Kafka address>` plus `args`, with its scratch directory for output files.
fn kcat_cmd(broker: &Broker, args: &[&str]) -> (Command, PathBuf) {
    let mut cmd = Command::new(kcat());
    cmd.arg("-b").arg(broker.kafka_bootstrap()).args(args);
    let scratch = tempfile::Builder::new()
        .prefix("kcat-")
        .tempdir_in(broker.scratch())
        .expect("a scratch directory for kcat")
        .keep();
    (cmd, scratch)
}

fn run_kcat(broker: &Broker, args: &[&str], stdin: &[u8]) -> String {
    let (mut cmd, scratch) = kcat_cmd(broker, args);
    run_client(&mut cmd, stdin, &scratch, KCAT_TIMEOUT).stdout
}

/// `key-i:value-i` lines, as `kcat -P -K :` reads them.
fn keyed_lines(seqs: std::ops::Range<usize>) -> String {
    seqs.map(|i| format!("key-{i}:value-{i}\n")).collect()
}

/// `partition offset key value` lines (kcat `-f '%p %o %k %s\n'`), checked: every key in the
/// partition murmur2 picks, each value with its own key, no offset twice. Returns key → value.
fn parse_consumed(out: &str) -> BTreeMap<String, String> {
    let mut records = BTreeMap::new();
    let mut offsets = BTreeSet::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let [p, o, k, v] = fields[..] else {
            panic!("unexpected kcat output line {line:?}");
        };
        let (p, o): (i32, i64) = (p.parse().expect("partition"), o.parse().expect("offset"));
        let want = partition_for_key(k.as_bytes(), PARTITIONS as usize);
        assert_eq!(p, want, "{line:?}: key {k:?} belongs in partition {want}");
        assert_eq!(v.strip_prefix("value-"), k.strip_prefix("key-"), "{line:?}");
        assert!(
            offsets.insert((p, o)),
            "{line:?}: partition {p} offset {o} read twice"
        );
        assert!(
            records.insert(k.to_string(), v.to_string()).is_none(),
            "{line:?}: key {k:?} read twice"
        );
    }
    records
}

fn produce_lines(broker: &Broker, topic: &str, seqs: std::ops::Range<usize>) {
    run_kcat(
        broker,
        &[
            "-P",
            "-t",
            topic,
            "-K",
            ":",
            "-X",
            "partitioner=murmur2_random",
        ],
        keyed_lines(seqs).as_bytes(),
    );
}

#[test]
fn metadata_lists_the_broker_and_the_topics() {
    let broker = start_broker(BrokerOptions::default());
    create_topic(&broker, "kcat-listed", PARTITIONS);
    create_topic(&broker, "kcat-other", 1);
    let addr = broker.kafka_bootstrap();

    let text = run_kcat(&broker, &["-L"], b"");
    for want in [
        " 1 brokers:".to_string(),
        format!("broker 0 at {addr}"),
        "topic \"kcat-listed\" with 3 partitions:".to_string(),
        "topic \"kcat-other\" with 1 partitions:".to_string(),
    ] {
        assert!(text.contains(&want), "kcat -L lacks {want:?}:\n{text}");
    }

    let json = run_kcat(&broker, &["-L", "-J"], b"");
    let md: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("kcat -L -J printed no JSON ({e}):\n{json}"));
    let brokers = md["brokers"].as_array().expect("a brokers array");
    assert_eq!(brokers.len(), 1, "{md}");
    assert_eq!(brokers[0]["id"], 0, "{md}");
    assert_eq!(brokers[0]["name"], addr.as_str(), "{md}");
    assert_eq!(md["controllerid"], 0, "{md}");
    let topics = md["topics"].as_array().expect("a topics array");
    let listed = topics
        .iter()
        .find(|t| t["topic"] == "kcat-listed")
        .unwrap_or_else(|| panic!("kcat-listed missing from {md}"));
    let partitions = listed["partitions"].as_array().expect("partitions");
    let ids: Vec<i64> = partitions
        .iter()
        .map(|p| p["partition"].as_i64().expect("a partition id"))
        .collect();
    assert_eq!(ids, [0, 1, 2], "{listed}");
    for p in partitions {
        assert_eq!(p["leader"], 0, "{p}");
        assert_eq!(p["replicas"], serde_json::json!([{"id": 0}]), "{p}");
        assert_eq!(p["isrs"], serde_json::json!([{"id": 0}]), "{p}");
    }
    assert!(
        listed.get("error").is_none(),
        "kcat-listed reported an error: {listed}"
    );
}

#[test]
fn keyed_lines_produced_are_consumed_back_in_their_murmur2_partitions() {
    let broker = start_broker(BrokerOptions::default());
    create_topic(&broker, "kcat-lines", PARTITIONS);
    produce_lines(&broker, "kcat-lines", 0..LINES);

    let out = run_kcat(
        &broker,
        &[
            "-C",
            "-t",
            "kcat-lines",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%p %o %k %s\n",
        ],
        b"",
    );
    let records = parse_consumed(&out);
    assert_eq!(records.len(), LINES, "records read back by kcat -C -e");

    // Offsets are dense per partition: nothing stored twice by the producer's retries.
    let mut per_partition = [0usize; PARTITIONS as usize];
    for k in records.keys() {
        per_partition[partition_for_key(k.as_bytes(), PARTITIONS as usize) as usize] += 1;
    }
    for line in out.lines() {
        let mut f = line.split(' ');
        let p: usize = f.next().and_then(|p| p.parse().ok()).expect("partition");
        let o: usize = f.next().and_then(|o| o.parse().ok()).expect("offset");
        assert!(
            o < per_partition[p],
            "{line:?}: offset past the records produced"
        );
    }
}

#[test]
fn a_group_consumes_everything_commits_and_the_next_member_resumes_at_the_end() {
    let broker = start_broker(BrokerOptions::default());
    create_topic(&broker, "kcat-group", PARTITIONS);
    produce_lines(&broker, "kcat-group", 0..LINES);

    let count = LINES.to_string();
    let started = Instant::now();
    let out = run_kcat(
        &broker,
        &[
            "-G",
            "kcat-readers",
            "kcat-group",
            "-X",
            "auto.offset.reset=earliest",
            "-c",
            &count,
            "-f",
            "%p %o %k %s\n",
        ],
        b"",
    );
    println!(
        "kcat -G read {LINES} records in {:?} (join, sync, fetch, commit on close)",
        started.elapsed()
    );
    assert_eq!(parse_consumed(&out).len(), LINES, "records read by kcat -G");

    // kcat commits on close (auto-commit). Ten more lines, then the next member of the group
    // starts where the first one ended: it reads exactly those ten, and exits on -e.
    produce_lines(&broker, "kcat-group", LINES..LINES + 10);
    let out = run_kcat(
        &broker,
        &[
            "-G",
            "kcat-readers",
            "kcat-group",
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-f",
            "%p %o %k %s\n",
        ],
        b"",
    );
    let resumed: Vec<String> = parse_consumed(&out).into_keys().collect();
    let late: Vec<String> = keys(LINES..LINES + 10);
    assert_eq!(
        sorted(resumed),
        sorted(late),
        "the second member of the group read other records than the ten after the commit"
    );
}

fn keys(seqs: std::ops::Range<usize>) -> Vec<String> {
    seqs.map(|i| format!("key-{i}")).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn producing_to_an_unknown_topic_creates_it_with_the_default_partitions() {
    let broker = start_broker(
        BrokerOptions::default()
            .arg("--default-partitions")
            .arg("2"),
    );
    produce_lines(&broker, "kcat-auto", 0..10);
    let text = run_kcat(&broker, &["-L", "-t", "kcat-auto"], b"");
    assert!(
        text.contains("topic \"kcat-auto\" with 2 partitions:"),
        "kcat -L -t kcat-auto:\n{text}"
    );
}

/// Milliseconds since the epoch, as librdkafka stamps records (CreateTime).
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit an i64")
}

/// `kcat -Q -t topic:partition:timestamp`: the offset ListOffsets answers.
fn query_offset(broker: &Broker, topic: &str, timestamp: i64) -> i64 {
    let spec = format!("{topic}:0:{timestamp}");
    let out = run_kcat(broker, &["-Q", "-t", &spec], b"");
    out.lines()
        .find_map(|l| l.split_once(" offset ").map(|(_, o)| o.trim()))
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("kcat -Q -t {spec} printed no offset:\n{out}"))
}

#[test]
fn list_offsets_by_timestamp_finds_the_first_record_at_or_after_it() {
    let broker = start_broker(BrokerOptions::default());
    create_topic(&broker, "kcat-times", 1);
    produce_lines(&broker, "kcat-times", 0..5);
    // Every record of the first batch is stamped at or before `between`; wait until the clock
    // has passed it (a bounded spin on the clock, not a guess), so the second batch's records
    // are all stamped after it.
    let between = now_ms();
    let deadline = Instant::now() + Duration::from_secs(5);
    while now_ms() <= between {
        assert!(Instant::now() < deadline, "the wall clock stands still");
        std::thread::sleep(Duration::from_millis(1));
    }
    produce_lines(&broker, "kcat-times", 5..8);

    assert_eq!(
        query_offset(&broker, "kcat-times", between + 1),
        5,
        "first record after the gap"
    );
    assert_eq!(
        query_offset(&broker, "kcat-times", 0),
        0,
        "a time before every record"
    );
    assert_eq!(query_offset(&broker, "kcat-times", -2), 0, "earliest (-2)");
    assert_eq!(query_offset(&broker, "kcat-times", -1), 8, "latest (-1)");
}

#[test]
fn metadata_advertises_the_configured_address() {
    // Nothing listens on localhost:9 here: clients told to go there fail fast, and the test only
    // reads what the bootstrap connection's Metadata answer says.
    let broker = start_broker(
        BrokerOptions::default()
            .arg("--advertised-host")
            .arg("localhost")
            .arg("--advertised-kafka-port")
            .arg("9"),
    );
    create_topic(&broker, "kcat-advertised", 1);
    let json = run_kcat(&broker, &["-L", "-J", "-t", "kcat-advertised"], b"");
    let md: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("kcat -L -J printed no JSON ({e}):\n{json}"));
    assert_eq!(
        md["brokers"],
        serde_json::json!([{"id": 0, "name": "localhost:9"}]),
        "{md}"
    );
}

#[test]
fn with_auto_create_off_an_unknown_topic_stays_unknown() {
    let broker = start_broker(
        BrokerOptions::default()
            .arg("--auto-create-topics")
            .arg("false"),
    );
    let text = run_kcat(&broker, &["-L", "-t", "kcat-nope"], b"");
    assert!(
        text.contains("topic \"kcat-nope\" with 0 partitions: Broker: Unknown topic or partition"),
        "kcat -L -t kcat-nope:\n{text}"
    );
    let all = run_kcat(&broker, &["-L"], b"");
    assert!(!all.contains("kcat-nope"), "kcat -L:\n{all}");
}
