//! A transaction larger than the producer's buffer, against a real broker, through the glommio
//! and the blocking producer: the sender waits for buffer room again and again inside one
//! transaction, and each wait must end on an answer from the broker — not on the wait's own
//! wake-up of the driver.
//!
//! The bug this pins down (found 2026-12-07 in `spool-loadgen --transactional --txn-messages
//! 34000`, a transaction over the default 32 MiB buffer, which ran at a fifth of the speed of
//! one just under it): the driver told waiting senders "progress" after every event of a
//! transactional producer that delivered nothing — meant for the coordinator's answers, but a
//! sender's own wake-up is such an event too. A sender with no room woke the driver, the driver
//! woke the sender, and the two kept the executor busy; glommio then looked at its ring only at
//! its preemption timer, so the broker's answers sat unread for about 100 ms at a time. The
//! blocking producer had the same rule; there the sender's and the driver's threads woke each
//! other, each turn a lock, a condition variable and a channel.
//! Counted here, not timed: every wait of the sender ends with a notification, and the only
//! notifications are deliveries (at most one per produce response) and the coordinator's
//! answers, so the waits are bounded by the requests the producer sent.

use std::cell::Cell;
use std::rc::Rc;

use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{blocking, glommio_io, ProducerRecords};
use spool_tests::client::create_topic;
use spool_tests::Broker;

const TOPIC: &str = "txn-over-buffer";
const PARTITIONS: i32 = 2;
const BUFFER_BYTES: usize = 128 * 1024;
const RECORD_BYTES: usize = 1024;
/// Records of the one transaction: 16 times the buffer.
const RECORDS: usize = 2048;
/// Records handed over per call, as spool-loadgen does.
const UNIT_RECORDS: usize = 16;
/// Coordinator requests a transaction of two partitions may need (FindCoordinator,
/// InitProducerId, AddPartitionsToTxn for each partition, EndTxn), with room for retries.
const TXN_ANSWERS_MAX: u64 = 32;

#[test]
fn a_transaction_larger_than_the_buffer_waits_only_for_answers() {
    let (_broker, bootstrap) = broker_with_topic();
    let glommio_bootstrap = bootstrap.clone();
    let glommio_run = on_glommio(move || async move { one_transaction(&glommio_bootstrap).await });
    check("glommio", glommio_run);
    check("blocking", one_blocking_transaction(&bootstrap));
}

/// What one producer's transaction came to: (records delivered, records failed, the sender's
/// waits for room, produce requests sent).
fn check(client: &str, (delivered, failed, waits, produce_requests): (usize, usize, u64, u64)) {
    eprintln!("{client}: {waits} waits for room, {produce_requests} produce requests");
    assert_eq!(failed, 0, "{client}: records failed");
    assert_eq!(delivered, RECORDS, "{client}: every record delivered");
    assert!(
        waits > 0,
        "{client}: the transaction is {}x the buffer: the sender must have waited",
        RECORDS * RECORD_BYTES / BUFFER_BYTES
    );
    assert!(
        waits <= produce_requests + TXN_ANSWERS_MAX,
        "{client}: {waits} waits for buffer room, but only {produce_requests} produce requests \
         and a few coordinator answers could end one: the sender woke itself"
    );
}

/// Sends one transaction of [`RECORDS`] records and commits it; returns (records delivered,
/// records failed, the sender's waits for room, produce requests sent).
async fn one_transaction(bootstrap: &str) -> (usize, usize, u64, u64) {
    let producer = glommio_io::Producer::new(&[bootstrap], config("glommio")).expect("a producer");
    producer
        .init_transactions(60_000)
        .await
        .expect("init_transactions");
    producer.begin_transaction().expect("begin_transaction");
    let delivered = Rc::new(Cell::new(0usize));
    let failed = Rc::new(Cell::new(0usize));
    let value = vec![7u8; RECORD_BYTES];
    for unit_index in 0..RECORDS / UNIT_RECORDS {
        let mut unit = ProducerRecords::new(TOPIC);
        unit.partition = Some(unit_index as i32 % PARTITIONS);
        for _ in 0..UNIT_RECORDS {
            unit.push(value.clone());
        }
        let (delivered, failed) = (Rc::clone(&delivered), Rc::clone(&failed));
        producer
            .send_records_with(unit, move |outcome| match outcome {
                Ok(_) => delivered.set(delivered.get() + UNIT_RECORDS),
                Err(_) => failed.set(failed.get() + UNIT_RECORDS),
            })
            .await
            .expect("send_records_with");
    }
    producer
        .commit_transaction(60_000)
        .await
        .expect("commit_transaction");
    let waits = producer.send_waits();
    let produce_requests = producer.stats().produce_requests;
    producer.close(30_000).await.expect("close");
    (delivered.get(), failed.get(), waits, produce_requests)
}

/// The same transaction through the blocking producer (its own transactional id).
fn one_blocking_transaction(bootstrap: &str) -> (usize, usize, u64, u64) {
    let producer = blocking::Producer::new(&[bootstrap], config("blocking")).expect("a producer");
    producer
        .init_transactions(60_000)
        .expect("init_transactions");
    producer.begin_transaction().expect("begin_transaction");
    let value = vec![7u8; RECORD_BYTES];
    let mut futures = Vec::new();
    for unit_index in 0..RECORDS / UNIT_RECORDS {
        let mut unit = ProducerRecords::new(TOPIC);
        unit.partition = Some(unit_index as i32 % PARTITIONS);
        for _ in 0..UNIT_RECORDS {
            unit.push(value.clone());
        }
        futures.push(producer.send_records(unit).expect("send_records"));
    }
    producer
        .commit_transaction(60_000)
        .expect("commit_transaction");
    let (mut delivered, mut failed) = (0, 0);
    for f in futures {
        match f.wait() {
            Ok(_) => delivered += UNIT_RECORDS,
            Err(_) => failed += UNIT_RECORDS,
        }
    }
    let waits = producer.send_waits();
    let produce_requests = producer.stats().produce_requests;
    producer.close(30_000).expect("close");
    (delivered, failed, waits, produce_requests)
}

/// Both producers' settings: a small buffer, small batches, each its own transactional id.
fn config(client: &str) -> ProducerConfig {
    ProducerConfig {
        acks: Acks::All,
        transactional_id: Some(format!("txn-over-buffer-{client}")),
        buffer_bytes: BUFFER_BYTES,
        batch_bytes: 16 * 1024,
        linger_ms: 5,
        ..ProducerConfig::default()
    }
}

/// A transaction that sent nothing ends at the client (it never began at the coordinator): its
/// commit's outcome is set by the driver's own poll, not by an answer, and the caller waiting
/// for it must still be told — through both producers, whose drivers notify their transaction
/// waiters after every turn. (With waiters told of answers only, each of these calls returned
/// Ok at its 20 s deadline, when its wait's timer fired and it looked again: 240 s for this
/// test instead of about 5. The delay alone does not fail it; a broken outcome would.)
#[test]
fn an_empty_transaction_commits_and_aborts() {
    let (_broker, bootstrap) = broker_with_topic();
    let glommio_bootstrap = bootstrap.clone();
    on_glommio(move || async move {
        let p = glommio_io::Producer::new(&[glommio_bootstrap.as_str()], config("empty-g"))
            .expect("a producer");
        p.init_transactions(EMPTY_TXN_TIMEOUT_MS)
            .await
            .expect("init_transactions");
        for round in 0..3 {
            p.begin_transaction().expect("begin_transaction");
            p.commit_transaction(EMPTY_TXN_TIMEOUT_MS)
                .await
                .unwrap_or_else(|e| panic!("glommio: empty commit {round}: {e}"));
            p.begin_transaction().expect("begin_transaction");
            p.abort_transaction(EMPTY_TXN_TIMEOUT_MS)
                .await
                .unwrap_or_else(|e| panic!("glommio: empty abort {round}: {e}"));
        }
        p.close(30_000).await.expect("close");
    });
    let p = blocking::Producer::new(&[bootstrap.as_str()], config("empty-b")).expect("a producer");
    p.init_transactions(EMPTY_TXN_TIMEOUT_MS)
        .expect("init_transactions");
    for round in 0..3 {
        p.begin_transaction().expect("begin_transaction");
        p.commit_transaction(EMPTY_TXN_TIMEOUT_MS)
            .unwrap_or_else(|e| panic!("blocking: empty commit {round}: {e}"));
        p.begin_transaction().expect("begin_transaction");
        p.abort_transaction(EMPTY_TXN_TIMEOUT_MS)
            .unwrap_or_else(|e| panic!("blocking: empty abort {round}: {e}"));
    }
    p.close(30_000).expect("close");
}

/// An empty transaction's calls: far more than a poll of the driver takes, far less than the
/// test's own bound; a caller told of its outcome by nothing times out here.
const EMPTY_TXN_TIMEOUT_MS: u64 = 20_000;

/// A broker with the tests' topic, and its native address.
fn broker_with_topic() -> (Broker, String) {
    let broker = Broker::start();
    create_topic(&broker, TOPIC, PARTITIONS);
    let bootstrap = broker.native_addr().to_string();
    (broker, bootstrap)
}

/// Runs `f`'s future on a glommio executor of its own and returns its output.
fn on_glommio<T, F, Fut>(f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(f)
        .expect("an executor")
        .join()
        .expect("the producer's executor")
}
