//! Step 1 of the scenario: librdkafka's idempotent producer sends every message, and its delivery
//! reports are checked: each in the partition murmur2 picks for its key, each partition's offsets
//! exactly 0..n, each key's messages at increasing offsets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use spool_protocol::client::partitioner::partition_for_key;
use spool_tests::checker::assert_none;
use spool_tests::Broker;

use crate::{key_of, KEYS, MESSAGES, PARTITIONS, POLL_INTERVAL, TOPIC};

/// Bound on producing and flushing every message (a debug-build broker on a busy machine).
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(180);

/// One delivery report: the message's sequence number, and where it landed or why it did not.
type Report = (u64, Result<(i32, i64), String>);

/// Delivery reports, as librdkafka hands them to the producer's context.
#[derive(Default)]
struct Deliveries {
    reports: Mutex<Vec<Report>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let outcome = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        // Poisoned only if another delivery callback panicked; that panic is the story then.
        self.reports
            .lock()
            .expect("delivery reports lock")
            .push((seq as u64, outcome));
    }
}

/// Sends every message and waits for every delivery report; returns `(partition, offset)` per
/// sequence number after checking partitions, offsets and per-key order.
pub fn produce_all(broker: &Broker) -> Vec<(i32, i64)> {
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", broker.kafka_bootstrap())
        .set("client.id", "spool-tests-rdkafka-producer")
        .set("partitioner", "murmur2_random")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        .create_with_context(Deliveries::default())
        .expect("an rdkafka producer");
    let deadline = Instant::now() + PRODUCE_TIMEOUT;
    for seq in 0..MESSAGES {
        let key = key_of(seq);
        let value = seq.to_string();
        let mut record = BaseRecord::with_opaque_to(TOPIC, seq as usize)
            .key(&key)
            .payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    assert!(
                        Instant::now() < deadline,
                        "librdkafka's queue still full {PRODUCE_TIMEOUT:?} in, at message {seq}\n{}",
                        broker.log_tail()
                    );
                    record = back;
                    producer.poll(POLL_INTERVAL);
                }
                Err((e, _)) => panic!("queueing message {seq}: {e}"),
            }
        }
        if seq % 1_000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if let Err(e) = producer.flush(left) {
        panic!(
            "flush: {e}; {} of {MESSAGES} delivery reports after {PRODUCE_TIMEOUT:?}\n{}",
            producer
                .context()
                .reports
                .lock()
                .expect("reports lock")
                .len(),
            broker.log_tail()
        );
    }
    let reports = std::mem::take(&mut *producer.context().reports.lock().expect("reports lock"));
    check_deliveries(reports)
}

fn check_deliveries(reports: Vec<Report>) -> Vec<(i32, i64)> {
    assert_eq!(reports.len() as u64, MESSAGES, "delivery reports");
    let mut at: Vec<Option<(i32, i64)>> = vec![None; MESSAGES as usize];
    let mut failed = Vec::new();
    let mut misplaced = Vec::new();
    for (seq, outcome) in reports {
        match outcome {
            Err(e) => failed.push(format!("message {seq}: {e}")),
            Ok((p, o)) => {
                let want = partition_for_key(key_of(seq).as_bytes(), PARTITIONS as usize);
                if p != want {
                    misplaced.push(format!(
                        "message {seq} key {:?}: partition {p}, murmur2 picks {want}",
                        key_of(seq)
                    ));
                }
                assert!(at[seq as usize].is_none(), "two reports for message {seq}");
                at[seq as usize] = Some((p, o));
            }
        }
    }
    assert_none("delivery failures", &failed);
    assert_none("keys in the wrong partition", &misplaced);
    let at: Vec<(i32, i64)> = at
        .into_iter()
        .map(|a| a.expect("every message reported once (counted above)"))
        .collect();

    // Each partition holds exactly offsets 0..n: no gaps, no offset given twice (the idempotent
    // producer's retries must not duplicate).
    let mut offsets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for &(p, o) in &at {
        offsets.entry(p).or_default().push(o);
    }
    let mut holes = Vec::new();
    for (p, os) in &mut offsets {
        os.sort_unstable();
        if let Some(i) = (0..os.len()).find(|&i| os[i] != i as i64) {
            holes.push(format!(
                "partition {p}: {} offsets, the {i}th is {} (dense 0..n expected)",
                os.len(),
                os[i]
            ));
        }
    }
    assert_none("partition offsets", &holes);

    // Per key, later messages sit at higher offsets (send order kept).
    let mut last: HashMap<u64, (u64, i64)> = HashMap::new();
    let mut reordered = Vec::new();
    for (seq, &(_, o)) in at.iter().enumerate() {
        let seq = seq as u64;
        if let Some(&(prev_seq, prev_o)) = last.get(&(seq % KEYS)) {
            if o <= prev_o {
                reordered.push(format!(
                    "key {:?}: message {seq} at offset {o}, message {prev_seq} at {prev_o}",
                    key_of(seq)
                ));
            }
        }
        last.insert(seq % KEYS, (seq, o));
    }
    assert_none("per-key order", &reordered);
    at
}
