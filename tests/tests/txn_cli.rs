//! `spool txn list|describe` (issue 18) against a real broker, with transactions left open on
//! both ports:
//!
//! - kafka-python's transactional producer (`tests/kafka_python/transactions.py hang`) opens a
//!   transaction over three partitions and stops: `txn list` shows the id Ongoing with its
//!   producer id, epoch and coordinator, `txn describe` its partitions and start time; once the
//!   coordinator aborts it at its timeout, `describe` shows CompleteAbort and no start time;
//! - a transaction driven by hand over the native port (FindCoordinator for a transactional id,
//!   InitProducerId with it, AddPartitionsToTxn, EndTxn): `describe` shows it Ongoing with its
//!   partition, then CompleteCommit after the commit; meanwhile the Kafka port's
//!   ListTransactions (state filter Ongoing) and DescribeTransactions agree;
//! - an id no producer used is an error that says so.
//!
//! Every wait is a poll with a deadline; nothing here asserts a duration.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;
use spool_protocol::wire::{
    self, AddPartitionsToTxnRequestT, AddPartitionsToTxnTopicT, CoordinatorType, EndTxnRequestT,
    FindCoordinatorRequestT, InitProducerIdRequestT, RequestBodyT, ResponseBodyT,
};
use spool_tests::cli::{spool, spool_ok};
use spool_tests::kafka_call::kafka_call;
use spool_tests::kafka_clients::{python_with_kafka, start_broker};
use spool_tests::wire::RawConn;
use spool_tests::{Broker, BrokerOptions};

/// How long any one wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(120);
const TOPIC: &str = "txn-cli";
/// Long enough that the CLI sees the hung transaction open; short enough that the
/// coordinator's timeout abort comes within [`WAIT`].
const HANG_TXN_TIMEOUT_MS: &str = "15000";

/// The kafka-python script left holding an open transaction; killed on drop.
struct Hung {
    child: Child,
}

impl Drop for Hung {
    fn drop(&mut self) {
        spool_tests::process::kill_and_reap(&mut self.child);
    }
}

/// Starts `transactions.py hang` with transactional id `txn_id` and waits (bounded) for its
/// `sent` event: the transaction is open and its records are flushed.
fn hang(broker: &Broker, txn_id: &str) -> Hung {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka_python/transactions.py");
    let mut child = Command::new(python_with_kafka())
        .arg(script)
        .arg("hang")
        .args(["--bootstrap", &broker.kafka_bootstrap()])
        .args(["--timeout-s", &WAIT.as_secs().to_string()])
        .args(["--topic", TOPIC, "--partitions", "3", "--replication", "1"])
        .args(["--messages", "6", "--txn-id", txn_id])
        .args(["--txn-timeout-ms", HANG_TXN_TIMEOUT_MS])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting transactions.py");
    let stdout = child.stdout.take().expect("piped stdout");
    let hung = Hung { child };
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
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(v) if v["event"] == "sent" => return hung,
            Ok(v) => seen.push(v),
            Err(_) => panic!(
                "transactions.py hang never sent: {seen:?}\n{}",
                broker.log_tail()
            ),
        }
    }
}

/// `spool txn describe ID --format json`.
fn describe(broker: &Broker, txn_id: &str) -> Value {
    let out = spool_ok(broker, &["txn", "describe", txn_id, "--format", "json"], "");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{out}: {e}"))
}

/// Polls `describe` until the id is in `state`; its last answer.
fn describe_until(broker: &Broker, txn_id: &str, state: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let d = describe(broker, txn_id);
        if d["state"] == state {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "{txn_id} never reached {state}: {d}\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn partitions(d: &Value) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = d["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("no partitions in {d}"))
        .iter()
        .map(|p| {
            (
                p["topic"].as_str().unwrap_or_default().to_string(),
                p["partition"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    v.sort();
    v
}

/// One native request, retried (bounded) while the coordinator is still being set up.
fn native(
    broker: &Broker,
    body: impl Fn() -> RequestBodyT,
    code_of: fn(&ResponseBodyT) -> wire::ErrorCode,
) -> ResponseBodyT {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut conn =
            RawConn::connect(broker.native_addr()).expect("connecting to the native port");
        let r = conn
            .request(body(), 0, Vec::new())
            .expect("a native response");
        let code = code_of(&r.header.body);
        let retriable = matches!(
            code,
            wire::ErrorCode::COORDINATOR_NOT_AVAILABLE
                | wire::ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | wire::ErrorCode::NOT_COORDINATOR
                | wire::ErrorCode::CONCURRENT_TRANSACTIONS
        );
        if !retriable {
            assert_eq!(r.header.error_code, wire::ErrorCode::NONE, "{:?}", r.header);
            return r.header.body;
        }
        assert!(
            Instant::now() < deadline,
            "{code:?} until the deadline\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The Kafka port answers from the same handlers: `ongoing` is listed under the Ongoing filter
/// and the aborted `txn-cli-hang` is not; an unknown filter is reported; DescribeTransactions
/// agrees with `spool txn describe`.
fn kafka_port_agrees(broker: &Broker, ongoing: &str) {
    let addr = broker.kafka_bootstrap().parse().expect("a socket address");
    let req = ListTransactionsRequest::default().with_state_filters(vec![
        StrBytes::from_static_str("Ongoing"),
        StrBytes::from_static_str("Nope"),
    ]);
    let r: ListTransactionsResponse = kafka_call(addr, ApiKey::ListTransactions, 0, &req);
    let ids: Vec<&str> = r
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.0.as_str())
        .collect();
    assert_eq!(ids, vec![ongoing], "{r:?}");
    let unknown: Vec<&str> = r.unknown_state_filters.iter().map(|f| f.as_str()).collect();
    assert_eq!(unknown, vec!["Nope"], "{r:?}");
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
        StrBytes::from_static_str("txn-cli-hang"),
    )]);
    let r: DescribeTransactionsResponse = kafka_call(addr, ApiKey::DescribeTransactions, 0, &req);
    let t = &r.transaction_states[0];
    assert_eq!(
        (
            t.error_code,
            t.transaction_state.as_str(),
            t.transaction_start_time_ms
        ),
        (0, "CompleteAbort", -1),
        "{r:?}"
    );
}

#[test]
fn txn_list_and_describe_show_open_and_completed_transactions() {
    let broker = start_broker(
        BrokerOptions::default()
            .arg("--transaction-state-partitions")
            .arg("3")
            .arg("--offsets-topic-partitions")
            .arg("3"),
    );
    spool_ok(
        &broker,
        &["topic", "create", TOPIC, "--partitions", "3"],
        "",
    );

    // An id nobody used.
    let f = spool(&broker, &["txn", "describe", "nobody-used-this"], "");
    assert!(!f.status.success(), "{}", f.stdout);
    assert!(
        f.stderr
            .contains("transactional id nobody-used-this does not exist"),
        "{}",
        f.stderr
    );

    // kafka-python's transaction, left open.
    let hung = hang(&broker, "txn-cli-hang");
    let list = spool_ok(&broker, &["txn", "list"], "");
    println!("$ spool txn list\n{list}");
    let line = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some("txn-cli-hang"))
        .unwrap_or_else(|| panic!("txn-cli-hang not listed:\n{list}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[1], "Ongoing", "{line}");
    assert!(
        cols[2].parse::<i64>().is_ok_and(|p| p >= 0),
        "producer id: {line}"
    );
    assert_eq!(cols[3], "0", "the first epoch: {line}");
    assert_eq!(cols[4], "0", "the coordinator is node 0: {line}");
    let text = spool_ok(&broker, &["txn", "describe", "txn-cli-hang"], "");
    println!("$ spool txn describe txn-cli-hang\n{text}");
    assert!(
        text.contains("partitions       txn-cli-0,txn-cli-1,txn-cli-2"),
        "{text}"
    );
    let d = describe(&broker, "txn-cli-hang");
    assert_eq!(d["state"], "Ongoing", "{d}");
    assert_eq!(d["timeout_ms"], 15_000, "{d}");
    assert!(d["start_time_ms"].as_i64().is_some_and(|t| t > 0), "{d}");
    let want: Vec<(String, i64)> = (0..3).map(|p| (TOPIC.to_string(), p)).collect();
    assert_eq!(partitions(&d), want, "{d}");
    drop(hung);

    // The coordinator aborts it at its timeout.
    describe_until(&broker, "txn-cli-hang", "CompleteAbort");
    let text = spool_ok(&broker, &["txn", "describe", "txn-cli-hang"], "");
    println!("$ spool txn describe txn-cli-hang   (after the timeout)\n{text}");
    let d = describe(&broker, "txn-cli-hang");
    assert!(d["start_time_ms"].is_null(), "no transaction is open: {d}");

    // A transaction over the native port.
    let id = "txn-cli-native";
    let found = native(
        &broker,
        || {
            let mut r = FindCoordinatorRequestT::default();
            r.key = id.into();
            r.key_type = CoordinatorType::Transaction;
            RequestBodyT::FindCoordinatorRequest(Box::new(r))
        },
        |b| match b {
            ResponseBodyT::FindCoordinatorResponse(r) => r.error_code,
            _ => wire::ErrorCode::UNKNOWN_SERVER_ERROR,
        },
    );
    let ResponseBodyT::FindCoordinatorResponse(found) = found else {
        unreachable!()
    };
    assert_eq!(
        found.port,
        i32::from(broker.native_addr().port()),
        "{found:?}"
    );
    let init = native(
        &broker,
        || {
            let mut r = InitProducerIdRequestT::default();
            r.transactional_id = Some(id.into());
            r.transaction_timeout_ms = 60_000;
            RequestBodyT::InitProducerIdRequest(Box::new(r))
        },
        |b| match b {
            ResponseBodyT::InitProducerIdResponse(r) => r.error_code,
            _ => wire::ErrorCode::UNKNOWN_SERVER_ERROR,
        },
    );
    let ResponseBodyT::InitProducerIdResponse(init) = init else {
        unreachable!()
    };
    assert!(
        init.producer_id >= 0 && init.producer_epoch >= 0,
        "{init:?}"
    );
    let (pid, epoch) = (init.producer_id, init.producer_epoch);
    let added = native(
        &broker,
        || {
            let mut t = AddPartitionsToTxnTopicT::default();
            t.name = TOPIC.into();
            t.partitions = Some(vec![1]);
            let mut r = AddPartitionsToTxnRequestT::default();
            r.transactional_id = id.into();
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.topics = Some(vec![t]);
            RequestBodyT::AddPartitionsToTxnRequest(Box::new(r))
        },
        |b| match b {
            ResponseBodyT::AddPartitionsToTxnResponse(r) => r
                .results_by_topic
                .iter()
                .flatten()
                .flat_map(|t| t.results_by_partition.iter().flatten())
                .map(|p| p.partition_error_code)
                .find(|c| *c != wire::ErrorCode::NONE)
                .unwrap_or(wire::ErrorCode::NONE),
            _ => wire::ErrorCode::UNKNOWN_SERVER_ERROR,
        },
    );
    assert!(matches!(
        added,
        ResponseBodyT::AddPartitionsToTxnResponse(_)
    ));
    let d = describe(&broker, id);
    assert_eq!(d["state"], "Ongoing", "{d}");
    assert_eq!(
        (d["producer_id"].as_i64(), d["producer_epoch"].as_i64()),
        (Some(pid), Some(i64::from(epoch))),
        "{d}"
    );
    assert_eq!(partitions(&d), vec![(TOPIC.to_string(), 1)], "{d}");
    let list = spool_ok(&broker, &["txn", "list"], "");
    println!("$ spool txn list\n{list}");
    assert!(
        list.lines()
            .any(|l| l.split_whitespace().take(2).eq([id, "Ongoing"])),
        "{list}"
    );
    kafka_port_agrees(&broker, id);
    native(
        &broker,
        || {
            let mut r = EndTxnRequestT::default();
            r.transactional_id = id.into();
            r.producer_id = pid;
            r.producer_epoch = epoch;
            r.committed = true;
            RequestBodyT::EndTxnRequest(Box::new(r))
        },
        |b| match b {
            ResponseBodyT::EndTxnResponse(r) => r.error_code,
            _ => wire::ErrorCode::UNKNOWN_SERVER_ERROR,
        },
    );
    describe_until(&broker, id, "CompleteCommit");
    let text = spool_ok(&broker, &["txn", "describe", id], "");
    println!("$ spool txn describe {id}   (after EndTxn commit)\n{text}");
}
