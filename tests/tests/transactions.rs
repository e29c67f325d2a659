//! Transactions (issue 18) with real processes: three brokers (`spool serve` on 127.0.0.x) and
//! kafka-python's transactional producer and read_committed consumer
//! (`tests/kafka_python/transactions.py`); librdkafka's transactional producer against one
//! broker. Every wait is bounded; nothing here asserts a duration.
//!
//! - committed transactions over three partitions are seen whole by read_committed, an aborted
//!   one never, though read_uncommitted sees its records (and no control records: the counts are
//!   exact), by kafka-python and by `spool consume --isolation-level`; a second producer with
//!   the same transactional id fences the first, whose commit fails and whose records stay
//!   hidden;
//! - a producer killed with `kill -9` mid-transaction holds the LSO at its first record until
//!   the coordinator aborts the transaction at its timeout; then the LSO reaches the high
//!   watermark and read_committed sees none of its records;
//! - the coordinator's broker killed with `kill -9` while librdkafka's producer commits
//!   transaction after transaction: the kill lands at an arbitrary point (between prepare and complete among
//!   them), and no transaction is ever half visible — each is all or nothing, and every one
//!   whose commit returned is there whole;
//! - consume-transform-produce with send_offsets_to_transaction, the processor killed with
//!   `kill -9` three times mid-stream and restarted: the output read with read_committed holds
//!   every input record exactly once;
//! - spool's own transactional producer (the client library, native port) commits and aborts
//!   over three partitions of three brokers, and a second instance of its transactional id
//!   fences it; `spool consume --isolation-level` reads the outcome; offsets it sends to a
//!   transaction count for the group only when the transaction commits.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use spool_protocol::client::blocking::Producer;
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ProducerRecord, TopicPartition};
use spool_tests::cli::spool_ok;
use spool_tests::client::{create_topic_rf, producer_config};
use spool_tests::cluster::Cluster;
use spool_tests::kafka_clients::{events_of, python_with_kafka, run_events, start_broker};
use spool_tests::{Broker, BrokerOptions};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
const RUN_TIMEOUT: Duration = Duration::from_secs(150);
/// Small internal topics and no initial rebalance delay: a three-node cluster of one-core
/// brokers starts them quickly.
const CLUSTER_ARGS: [&str; 6] = [
    "--offsets-topic-partitions",
    "3",
    "--transaction-state-partitions",
    "3",
    "--group-initial-rebalance-delay-ms",
    "0",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka_python/transactions.py")
}

fn command(broker: &Broker, mode: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python_with_kafka());
    cmd.arg(script())
        .arg(mode)
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--timeout-s", &SCRIPT_TIMEOUT.as_secs().to_string()])
        .args(args);
    cmd
}

/// Runs the script to its `done` event.
fn run(broker: &Broker, mode: &str, args: &[&str]) -> (Vec<Value>, String) {
    run_events(&mut command(broker, mode, args), broker, RUN_TIMEOUT)
}

/// A script running in the background; its events arrive on a channel.
struct Running {
    child: Child,
    events: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Running {
    fn start(broker: &Broker, mode: &str, args: &[&str]) -> Self {
        let mut child = command(broker, mode, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the script");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Self {
            child,
            events,
            seen: Vec::new(),
        }
    }

    /// Waits (bounded) until `count` events of `kind` have arrived.
    fn wait_for(&mut self, kind: &str, count: usize, context: impl Fn() -> String) {
        let deadline = Instant::now() + RUN_TIMEOUT;
        while events_of(&self.seen, kind).len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!(
                    "waited for {count} {kind:?} events, saw {:?}\n{}",
                    self.seen,
                    context()
                ),
            }
        }
    }

    /// SIGKILL, then every event it printed.
    fn kill9(mut self) -> Vec<Value> {
        spool_tests::process::kill_and_reap(&mut self.child);
        self.seen.extend(self.events.try_iter());
        self.seen
    }

    /// Waits (bounded) for the script to end by itself; every event it printed.
    fn finish(mut self, context: impl Fn() -> String) -> Vec<Value> {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    spool_tests::process::kill_and_reap(&mut self.child);
                    panic!("the script did not finish: {:?}\n{}", self.seen, context());
                }
            }
        }
        let _ = self.child.wait();
        self.seen
    }
}

fn values(events: &[Value], isolation: &str) -> Vec<String> {
    events_of(events, "read")
        .into_iter()
        .find(|e| e["isolation"] == isolation)
        .and_then(|e| e["values"].as_array())
        .unwrap_or_else(|| panic!("no {isolation} read in {events:?}"))
        .iter()
        .map(|v| v.as_str().expect("a string value").to_string())
        .collect()
}

fn sorted(v: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = v.into_iter().collect();
    v.sort();
    v
}

/// Every node's log tail, for failure messages.
fn logs(cluster: &Cluster) -> String {
    cluster.nodes.iter().map(Broker::log_tail).collect()
}

/// Every value of `topic` as `spool consume --isolation-level ISOLATION` reads it from the
/// start (every record is already written: it stops once nothing came for 3 s).
fn spool_consume(broker: &Broker, topic: &str, isolation: &str) -> Vec<String> {
    let out = spool_ok(
        broker,
        &[
            "consume",
            topic,
            "--isolation-level",
            isolation,
            "--format",
            "json",
            "--idle-timeout-ms",
            "3000",
        ],
        "",
    );
    out.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            v["value"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// A transactional producer of spool's client library for `id`, its id's producer taken.
fn spool_txn_producer(broker: &Broker, id: &str) -> Producer {
    let config = ProducerConfig {
        transactional_id: Some(id.into()),
        ..producer_config(Acks::All)
    };
    let p = Producer::new(&[&broker.bootstrap()], config).expect("a producer");
    p.init_transactions(60_000).expect("init_transactions");
    p
}

/// One transaction of `values` (round-robin over `partitions`), committed or aborted.
fn spool_txn(p: &Producer, topic: &str, partitions: i32, values: &[String], commit: bool) {
    p.begin_transaction().expect("begin_transaction");
    let futures: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let r = ProducerRecord::new(topic, v.clone().into_bytes())
                .with_partition(i as i32 % partitions);
            p.send(r).expect("send")
        })
        .collect();
    if commit {
        p.commit_transaction(60_000).expect("commit_transaction");
        for f in futures {
            f.wait().expect("a committed record was written");
        }
    } else {
        // Written first, so the abort has records to hide.
        p.flush(60_000).expect("flush");
        p.abort_transaction(60_000).expect("abort_transaction");
    }
}

#[test]
fn spools_own_transactional_producer_commits_aborts_and_is_fenced() {
    let cluster = Cluster::start_with_args(3, &CLUSTER_ARGS);
    cluster.wait_healthy();
    let node = cluster.node(1);
    let topic = "txn-spool";
    create_topic_rf(node, topic, 3, 3);
    let p = spool_txn_producer(node, "spool-producer");
    spool_txn(&p, topic, 3, &named("c", 30), true);
    spool_txn(&p, topic, 3, &named("a", 30), false);
    spool_txn(&p, topic, 3, &named("d", 30), true);

    // A second instance fences the first: its next transaction cannot commit.
    let successor = spool_txn_producer(node, "spool-producer");
    p.begin_transaction().expect("begin_transaction");
    let zombie = p.send(ProducerRecord::new(topic, "zombie").with_partition(0));
    let refused = match zombie {
        Err(e) => Err(e),
        Ok(f) => p
            .commit_transaction(60_000)
            .and_then(|()| f.wait().map(|_| ())),
    };
    assert!(refused.is_err(), "the fenced producer committed");
    spool_txn(&successor, topic, 3, &["successor".to_string()], true);

    // Offsets inside transactions: an aborted transaction's never count, a committed one's do.
    let group = "txn-spool-group";
    let tp0 = TopicPartition::new(topic, 0);
    let mut admin = spool_tests::client::admin(node);
    let committed = |admin: &mut spool_protocol::client::blocking::Admin, want: i64| {
        cluster.wait_until("the group's committed offset", |_| {
            let got = admin.fetch_offsets(group, Some(vec![tp0.clone()])).ok()?;
            (got == vec![(tp0.clone(), want)]).then_some(())
        })
    };
    successor.begin_transaction().expect("begin_transaction");
    successor
        .send_offsets_to_transaction(group, vec![(tp0.clone(), 7)], 60_000)
        .expect("send_offsets_to_transaction");
    successor
        .abort_transaction(60_000)
        .expect("abort_transaction");
    committed(&mut admin, -1);
    successor.begin_transaction().expect("begin_transaction");
    successor
        .send_offsets_to_transaction(group, vec![(tp0.clone(), 42)], 60_000)
        .expect("send_offsets_to_transaction");
    successor
        .commit_transaction(60_000)
        .expect("commit_transaction");
    committed(&mut admin, 42);

    let mut want_committed = named("c", 30);
    want_committed.extend(named("d", 30));
    want_committed.push("successor".into());
    let context = || logs(&cluster);
    assert_eq!(
        sorted(spool_consume(node, topic, "read_committed")),
        sorted(want_committed.clone()),
        "read_committed\n{}",
        context()
    );
    let uncommitted = spool_consume(node, topic, "read_uncommitted");
    let mut want_all = want_committed;
    want_all.extend(named("a", 30));
    let zombie_written = uncommitted.iter().filter(|v| *v == "zombie").count();
    assert!(zombie_written <= 1, "{uncommitted:?}");
    let without_zombie: Vec<String> = uncommitted.into_iter().filter(|v| v != "zombie").collect();
    assert_eq!(
        sorted(without_zombie),
        sorted(want_all),
        "read_uncommitted: every record once, no control record\n{}",
        context()
    );
}

fn named(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn committed_transactions_are_seen_whole_aborted_and_fenced_ones_never() {
    let cluster = Cluster::start_with_args(3, &CLUSTER_ARGS);
    cluster.wait_healthy();
    let node = cluster.node(1);
    let context = || logs(&cluster);
    let (events, ctx) = run(node, "basic", &["--topic", "txn-basic", "--messages", "30"]);
    assert_eq!(
        events_of(&events, "zombie_refused").len(),
        1,
        "the fenced producer committed\n{ctx}"
    );
    let mut want_committed = named("c", 30);
    want_committed.extend(named("d", 30));
    want_committed.push("successor".into());
    assert_eq!(
        sorted(values(&events, "read_committed")),
        sorted(want_committed.clone()),
        "read_committed\n{ctx}"
    );
    let mut want_all = want_committed.clone();
    want_all.extend(named("a", 30));
    want_all.push("zombie".into());
    assert_eq!(
        sorted(values(&events, "read_uncommitted")),
        sorted(want_all.clone()),
        "read_uncommitted: every data record once, no control record\n{ctx}"
    );
    // spool's own consumer (`spool consume --isolation-level`) reads the same.
    assert_eq!(
        sorted(spool_consume(node, "txn-basic", "read_committed")),
        sorted(want_committed),
        "spool consume, read_committed\n{ctx}"
    );
    assert_eq!(
        sorted(spool_consume(node, "txn-basic", "read_uncommitted")),
        sorted(want_all),
        "spool consume, read_uncommitted\n{ctx}"
    );

    // A producer killed mid-transaction: the LSO waits for the coordinator's timeout abort.
    let mut hung = Running::start(
        node,
        "hang",
        &[
            "--topic",
            "txn-hang",
            "--messages",
            "12",
            "--txn-timeout-ms",
            "4000",
        ],
    );
    hung.wait_for("sent", 1, context);
    let seen = hung.kill9();
    let sent = events_of(&seen, "sent")[0].clone();
    for p in ["0", "1", "2"] {
        let (lso, hw) = (sent["lso"][p].as_i64(), sent["hw"][p].as_i64());
        assert_eq!(
            lso,
            Some(0),
            "partition {p}: the open transaction holds the LSO: {sent}"
        );
        assert_eq!(
            hw,
            Some(4),
            "partition {p}: its records are below the high watermark: {sent}"
        );
    }
    let (events, ctx) = run(node, "stable", &["--topic", "txn-hang"]);
    assert!(
        values(&events, "read_committed").is_empty(),
        "the aborted transaction's records were seen\n{ctx}"
    );
}

/// librdkafka's transactional producer, committing transaction after transaction (one record
/// per partition of `topic`, values `<i>-<partition>`) until `stop` is set or `max` are done;
/// sends `Ok(i)` for each commit that returned, `Err(i)` for each that failed (then aborted,
/// or the producer made anew when the error is fatal).
fn rdkafka_commit_loop(
    bootstrap: String,
    topic: &'static str,
    txn_id: &'static str,
    max: usize,
    report: mpsc::Sender<Result<usize, usize>>,
) {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    let t = Duration::from_secs(30);
    let make = || -> ThreadedProducer<DefaultProducerContext> {
        let p: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("transactional.id", txn_id)
            .set("transaction.timeout.ms", "20000")
            .create()
            .expect("a transactional producer");
        p.init_transactions(t).expect("init_transactions");
        p
    };
    let mut producer = make();
    for i in 0..max {
        let attempt = (|| -> Result<(), rdkafka::error::KafkaError> {
            producer.begin_transaction()?;
            for part in 0..3 {
                let value = format!("{i}-{part}");
                producer
                    .send(
                        BaseRecord::<(), str>::to(topic)
                            .payload(&value)
                            .partition(part),
                    )
                    .map_err(|(e, _)| e)?;
            }
            producer.commit_transaction(t)
        })();
        match attempt {
            Ok(()) => {
                if report.send(Ok(i)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = report.send(Err(i));
                let fatal =
                    e.rdkafka_error_code().is_some() && producer.abort_transaction(t).is_err();
                if fatal {
                    producer = make();
                }
            }
        }
    }
}

#[test]
fn a_transaction_is_never_half_visible_when_its_coordinator_is_killed() {
    let mut cluster = Cluster::start_with_args(3, &CLUSTER_ARGS);
    cluster.wait_healthy();
    let (txn_id, topic, transactions) = ("txn-coordinator-kill", "txn-loop", 60);
    let context = logs;
    spool_tests::client::create_topic_rf(cluster.node(1), topic, 3, 3);
    let bootstrap = cluster
        .nodes
        .iter()
        .map(Broker::kafka_bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    let (tx, rx) = mpsc::channel();
    let producer =
        std::thread::spawn(move || rdkafka_commit_loop(bootstrap, topic, txn_id, transactions, tx));
    let mut outcomes: Vec<Result<usize, usize>> = Vec::new();
    let deadline = Instant::now() + RUN_TIMEOUT;
    while outcomes.iter().filter(|o| o.is_ok()).count() < 5 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(o) => outcomes.push(o),
            Err(_) => panic!("fewer than 5 commits: {outcomes:?}\n{}", context(&cluster)),
        }
    }
    // The coordinator: the leader of the id's __transaction_state partition.
    let p = spool_broker::txn::coordinator_partition(txn_id, 3);
    let coordinator = cluster
        .describe(1, "__transaction_state")
        .iter()
        .find(|r| r.partition == p)
        .map(|r| r.leader)
        .expect("the transaction state partition has a leader");
    cluster.node_mut(coordinator).kill9();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(o) => outcomes.push(o),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "the producer did not finish: {outcomes:?}\n{}",
                    context(&cluster)
                )
            }
        }
    }
    producer.join().expect("the producer thread");
    let reader = if coordinator == 1 { 2 } else { 1 };
    let (events, ctx) = run(cluster.node(reader), "read", &["--topic", topic]);
    let read = values(&events, "read_committed");
    let mut by_txn: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for v in &read {
        let txn: usize = v
            .split('-')
            .next()
            .and_then(|t| t.parse().ok())
            .expect("i-p");
        assert!(
            by_txn.entry(txn).or_default().insert(v.clone()),
            "{v} twice\n{ctx}"
        );
    }
    let half: Vec<_> = by_txn.iter().filter(|(_, vs)| vs.len() != 3).collect();
    assert!(
        half.is_empty(),
        "transactions seen in part: {half:?}\n{ctx}"
    );
    let committed: Vec<usize> = outcomes.iter().filter_map(|o| o.ok()).collect();
    let missing: Vec<_> = committed
        .iter()
        .filter(|t| !by_txn.contains_key(t))
        .collect();
    assert!(
        missing.is_empty(),
        "committed but not visible: {missing:?}\n{ctx}"
    );
    assert!(
        committed.len() > 5,
        "no transaction committed after the coordinator's loss: {outcomes:?}\n{ctx}"
    );
    println!(
        "coordinator node {coordinator} killed with kill -9 after 5 commits; {} of {transactions} \
         transactions committed, {} failed, {} visible whole, none in part",
        committed.len(),
        outcomes.iter().filter(|o| o.is_err()).count(),
        by_txn.len()
    );
}

#[test]
fn consume_transform_produce_keeps_exactly_once_across_processor_kills() {
    let cluster = Cluster::start_with_args(3, &CLUSTER_ARGS);
    cluster.wait_healthy();
    let node = cluster.node(1);
    let context = || logs(&cluster);
    let messages = 600;
    let n = messages.to_string();
    let base = [
        "--topic",
        "ctp-in",
        "--out",
        "ctp-out",
        "--group",
        "ctp",
        "--txn-id",
        "ctp-processor",
        "--messages",
        &n,
        "--txn-timeout-ms",
        "10000",
    ];
    run(node, "seed", &base);
    let mut kills = 0;
    let mut committed_before_kills = 0;
    for _ in 0..3 {
        let mut p = Running::start(node, "process", &base);
        p.wait_for("committed", 3, context);
        let seen = p.kill9();
        committed_before_kills += events_of(&seen, "committed").len();
        kills += 1;
    }
    let last = Running::start(node, "process", &base).finish(context);
    assert!(
        events_of(&last, "done").len() == 1,
        "the last processor did not finish: {last:?}"
    );
    let (events, ctx) = run(node, "read", &["--topic", "ctp-out"]);
    let out = values(&events, "read_committed");
    let want: Vec<String> = (0..messages).map(|i| format!("{i}!")).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &out {
        *counts.entry(v.as_str()).or_default() += 1;
    }
    let dups: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    let missing: Vec<_> = want
        .iter()
        .filter(|w| !counts.contains_key(w.as_str()))
        .collect();
    assert!(dups.is_empty(), "duplicated outputs: {dups:?}\n{ctx}");
    assert!(missing.is_empty(), "missing outputs: {missing:?}\n{ctx}");
    assert_eq!(out.len(), messages, "output records\n{ctx}");
    println!(
        "consume-transform-produce: {messages} inputs, {kills} processors killed with kill -9 \
         after {committed_before_kills} transactions, {} by the last one; output {} records, \
         {} distinct, 0 duplicated, 0 missing",
        events_of(&last, "committed").len(),
        out.len(),
        counts.len()
    );
}

#[test]
fn librdkafka_transactions_commit_and_abort() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

    let broker = start_broker(BrokerOptions::default());
    let topic = "rdkafka-txn";
    spool_tests::client::create_topic(&broker, topic, 2);
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.kafka_bootstrap())
        .set("transactional.id", "rdkafka-txn")
        .set("transaction.timeout.ms", "30000")
        .create()
        .expect("a transactional producer");
    let t = Duration::from_secs(60);
    producer.init_transactions(t).expect("init_transactions");
    for (name, commit) in [("c", true), ("a", false), ("d", true)] {
        producer.begin_transaction().expect("begin");
        for i in 0..10 {
            let value = format!("{name}{i}");
            producer
                .send(
                    BaseRecord::<(), str>::to(topic)
                        .payload(&value)
                        .partition(i % 2),
                )
                .expect("queued");
        }
        producer.flush(t).expect("flush");
        if commit {
            producer.commit_transaction(t).expect("commit");
        } else {
            producer.abort_transaction(t).expect("abort");
        }
    }
    let (events, ctx) = run(&broker, "read", &["--topic", topic]);
    let mut want = named("c", 10);
    want.extend(named("d", 10));
    assert_eq!(
        sorted(values(&events, "read_committed")),
        sorted(want),
        "{ctx}"
    );
}
