//! Data integrity through real brokers: what was acknowledged is read back — once, in order per
//! partition — across every core, across a clean restart, and across `kill -9`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use spool_protocol::client::blocking::{DeliveryFuture, Producer};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ConsumerRecord, ProducerRecord};
use spool_tests::checker::{self, Acked};
use spool_tests::client::{self, consume_until, create_topic};
use spool_tests::{http, Broker, BrokerOptions};

/// Bound on reading a test's records back.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// `value-<seq>`: the send order is in the value, so order checks need no side table.
fn value(seq: u64) -> Bytes {
    Bytes::from(format!("value-{seq:08}"))
}

fn seq_of(value: &Bytes) -> u64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.strip_prefix("value-"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a value this test did not write: {value:?}"))
}

/// Sends `count` keyed records (sequence numbers from `first_seq`) with `acks`, all in flight
/// together, and returns what the broker acknowledged for each.
fn produce_keyed(
    broker: &Broker,
    topic: &str,
    first_seq: u64,
    count: u64,
    acks: Acks,
) -> Vec<Acked> {
    let producer = client::producer(broker, acks);
    let pending: Vec<_> = (first_seq..first_seq + count)
        .map(|seq| {
            let record =
                ProducerRecord::new(topic, value(seq)).with_key(format!("key-{}", seq % 97));
            let delivery = producer.send(record).expect("queueing a record");
            (seq, delivery)
        })
        .collect();
    let acked = pending
        .into_iter()
        .map(|(seq, d)| {
            let md = d.wait().unwrap_or_else(|e| {
                panic!("record {seq} not acknowledged: {e}\n{}", broker.log_tail())
            });
            Acked {
                partition: md.partition,
                offset: md.offset,
                value: value(seq),
            }
        })
        .collect();
    producer
        .close(client::OPERATION_TIMEOUT_MS)
        .expect("closing the producer");
    acked
}

/// Reads the whole topic (which held nothing but `acked`) back and runs every check: each
/// acknowledged record at its offset, nothing twice, order per partition, and the partitions'
/// end offsets add up to exactly the acknowledged count — no record nobody acknowledged.
fn read_back_exactly(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    acked: &[Acked],
) -> Vec<ConsumerRecord> {
    let expected = acked.len();
    let read = consume_until(broker, topic, partitions, CONSUME_TIMEOUT, |r| {
        r.len() >= expected
    });
    checker::assert_none(
        "acknowledged records",
        &checker::missing_acked(acked, &read),
    );
    checker::assert_none("duplicates", &checker::duplicates(&read));
    checker::assert_none("order per partition", &checker::out_of_order(&read, seq_of));
    assert_eq!(read.len(), expected, "read more records than were produced");
    let ends = client::end_offsets(broker, topic, partitions);
    assert_eq!(
        ends.iter().sum::<i64>(),
        expected as i64,
        "end offsets {ends:?} of {topic} do not add up to the {expected} acknowledged records"
    );
    read
}

#[test]
fn round_trip_through_16_partitions_on_every_core() {
    let broker = Broker::start();
    create_topic(&broker, "orders", 16);
    let acked = produce_keyed(&broker, "orders", 0, 4000, Acks::All);
    let read = read_back_exactly(&broker, "orders", 16, &acked);

    let partitions_used: std::collections::BTreeSet<i32> =
        read.iter().map(|r| r.partition).collect();
    assert_eq!(
        partitions_used.len(),
        16,
        "keys spread over every partition: {partitions_used:?}"
    );
    let metrics = broker.metrics();
    let cores = spool_tests::broker::available_cores().min(2);
    let mut total = 0.0;
    for core in 0..cores {
        let owned = http::sample(&metrics, &format!("spool_partitions{{core=\"{core}\"}}"))
            .unwrap_or_else(|| panic!("no spool_partitions for core {core} in:\n{metrics}"));
        assert!(owned > 0.0, "core {core} owns no partition:\n{metrics}");
        total += owned;
    }
    assert!(
        total >= 16.0,
        "the topic's 16 partitions are not all owned:\n{metrics}"
    );
}

/// The broker's kept produce frames, summed over its cores (`/metrics`).
#[derive(Debug)]
struct KeptFrames {
    bytes: f64,
    bound: f64,
    copied: f64,
}

impl KeptFrames {
    fn of(broker: &Broker) -> Self {
        let m = broker.metrics();
        Self {
            bytes: http::sum(&m, "spool_request_memory_kept_bytes", ""),
            bound: http::sum(&m, "spool_request_memory_kept_bound_bytes", ""),
            copied: http::sum(&m, "spool_produce_frames_copied_total", ""),
        }
    }
}

/// A leader appends a client's batches without copying them: its tail caches keep slices of the
/// request frames (`spool_request_memory_kept_bytes`), and what consumers read back — from those
/// tails, and after a restart from the segment files — is exactly what was acknowledged.
#[test]
fn batches_kept_from_request_frames_read_back_exactly_from_memory_and_disk() {
    let mut broker = Broker::start();
    create_topic(&broker, "kept", 4);
    // In rounds, so that most batches land past offset 0 and their stamped offsets matter.
    let mut acked = Vec::new();
    for round in 0..4 {
        acked.extend(produce_keyed(&broker, "kept", round * 500, 500, Acks::All));
    }
    let kept = KeptFrames::of(&broker);
    assert!(kept.bytes > 0.0, "the tails keep their frames: {kept:?}");
    assert_eq!(kept.copied, 0.0, "nothing copied below the bound: {kept:?}");
    read_back_exactly(&broker, "kept", 4, &acked);
    broker.terminate();
    broker.restart();
    read_back_exactly(&broker, "kept", 4, &acked);
}

/// With no room for kept frames (each core's request memory, 32 MiB, is below the largest frame,
/// 100 MiB), every frame's batches are copied out instead: counted, none kept, all read back.
#[test]
fn frames_past_the_kept_bound_are_copied_out_and_read_back_exactly() {
    let broker = Broker::start_with(
        BrokerOptions {
            cores: 2,
            ..BrokerOptions::default()
        }
        .arg("--request-memory-bytes")
        .arg((64u64 << 20).to_string()),
    );
    create_topic(&broker, "copied", 4);
    let acked = produce_keyed(&broker, "copied", 0, 2000, Acks::All);
    let kept = KeptFrames::of(&broker);
    assert_eq!((kept.bound, kept.bytes), (0.0, 0.0), "{kept:?}");
    assert!(
        kept.copied > 0.0,
        "frames past the bound are copied out: {kept:?}"
    );
    read_back_exactly(&broker, "copied", 4, &acked);
}

#[test]
fn clean_restart_keeps_topics_and_records() {
    let mut broker = Broker::start();
    create_topic(&broker, "ledger", 8);
    create_topic(&broker, "audit", 1);
    let mut ledger = produce_keyed(&broker, "ledger", 0, 1000, Acks::All);
    let audit = produce_keyed(&broker, "audit", 0, 10, Acks::All);

    broker.terminate();
    broker.restart();

    let mut topics = client::admin(&broker)
        .list_topics()
        .expect("listing topics");
    topics.sort();
    assert_eq!(topics, ["audit", "ledger"], "topics after a restart");
    let described = client::admin(&broker)
        .describe_topics(vec!["ledger".into()])
        .expect("describing ledger");
    let partitions = described[0]
        .1
        .as_ref()
        .expect("ledger exists")
        .partitions
        .len();
    assert_eq!(partitions, 8, "ledger's partitions after a restart");
    read_back_exactly(&broker, "ledger", 8, &ledger);
    read_back_exactly(&broker, "audit", 1, &audit);

    // The logs go on where they stopped: new offsets follow the old ones.
    let before = checker::last_acked_offsets(&ledger);
    let more = produce_keyed(&broker, "ledger", 1000, 200, Acks::All);
    for a in &more {
        let last = before.get(&a.partition).copied().unwrap_or(-1);
        assert!(
            a.offset > last,
            "partition {} reused offset {} (last before the restart: {last})",
            a.partition,
            a.offset
        );
    }
    ledger.extend(more);
    read_back_exactly(&broker, "ledger", 8, &ledger);
}

/// What the producer thread of the kill -9 test saw.
#[derive(Default)]
struct AckLog {
    acked: Vec<Acked>,
    failed: u64,
}

/// Produces `value(0), value(1), …` round-robin over `partitions` with acks=1, up to 256 in
/// flight, until `stop`; every acknowledgement goes into `log` (and wakes `progress`).
fn produce_until_stopped(
    broker: &Broker,
    topic: &'static str,
    partitions: i32,
    stop: Arc<AtomicBool>,
    log: Arc<(Mutex<AckLog>, Condvar)>,
) -> std::thread::JoinHandle<()> {
    // Short timeouts: once the broker is killed, what is still in flight fails within seconds
    // (a record that times out earlier is merely not counted as acknowledged).
    let config = ProducerConfig {
        request_timeout_ms: 2000,
        delivery_timeout_ms: 3000,
        ..client::producer_config(Acks::Leader)
    };
    let producer = Producer::new(&[&broker.bootstrap()], config).expect("a producer");
    std::thread::spawn(move || {
        let record = |d: (u64, i32, DeliveryFuture)| {
            let (seq, partition, delivery) = d;
            let (state, progress) = &*log;
            let mut state = state.lock().expect("ack log");
            match delivery.wait() {
                Ok(md) => {
                    assert_eq!(md.partition, partition, "record {seq} landed elsewhere");
                    state.acked.push(Acked {
                        partition,
                        offset: md.offset,
                        value: value(seq),
                    });
                }
                Err(_) => state.failed += 1,
            }
            progress.notify_all();
        };
        let mut in_flight = VecDeque::new();
        let mut seq = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let partition = (seq % partitions as u64) as i32;
            let r = ProducerRecord::new(topic, value(seq)).with_partition(partition);
            match producer.send(r) {
                Ok(d) => in_flight.push_back((seq, partition, d)),
                Err(_) => break,
            }
            seq += 1;
            while in_flight.len() > 256 || in_flight.front().is_some_and(|d| d.2.is_ready()) {
                if let Some(d) = in_flight.pop_front() {
                    record(d);
                }
            }
        }
        // The broker is gone: give up on what is left (it resolves as failed, or as acknowledged
        // if the answer arrived before the kill).
        let _ = producer.close(1000);
        for d in in_flight {
            record(d);
        }
    })
}

#[test]
fn kill_9_loses_no_acknowledged_record() {
    const PARTITIONS: i32 = 4;
    const ACKS_BEFORE_KILL: usize = 3000;
    let mut broker = Broker::start();
    create_topic(&broker, "events", PARTITIONS);
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new((Mutex::new(AckLog::default()), Condvar::new()));
    let producer = produce_until_stopped(&broker, "events", PARTITIONS, stop.clone(), log.clone());

    // Kill while the producer is still going: some batches are mid-write, mid-fsync, in flight.
    {
        let (state, progress) = &*log;
        let deadline = Instant::now() + CONSUME_TIMEOUT;
        let mut s = state.lock().expect("ack log");
        while s.acked.len() < ACKS_BEFORE_KILL {
            let now = Instant::now();
            assert!(
                now < deadline,
                "only {} acks after {CONSUME_TIMEOUT:?}",
                s.acked.len()
            );
            s = progress.wait_timeout(s, deadline - now).expect("ack log").0;
        }
    }
    broker.kill9();
    stop.store(true, Ordering::SeqCst);
    producer.join().expect("the producer thread");
    let acked = std::mem::take(&mut log.0.lock().expect("ack log").acked);
    assert!(acked.len() >= ACKS_BEFORE_KILL);

    broker.restart();
    let last = checker::last_acked_offsets(&acked);
    let read = consume_until(&broker, "events", PARTITIONS, CONSUME_TIMEOUT, |r| {
        checker::reached(r, &last)
    });
    checker::assert_none(
        "acknowledged with acks=1 before kill -9",
        &checker::missing_acked(&acked, &read),
    );
    // The broker takes writes again, after everything that survived.
    let more = produce_keyed(&broker, "events", 1_000_000, 8, Acks::All);
    for a in &more {
        assert!(
            a.offset > last.get(&a.partition).copied().unwrap_or(-1),
            "partition {} reused offset {} after recovery",
            a.partition,
            a.offset
        );
    }
}
