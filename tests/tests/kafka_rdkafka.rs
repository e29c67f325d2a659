//! The Kafka port with librdkafka (the `rdkafka` crate, librdkafka 2.12 built from its bundled
//! sources), a client nobody here wrote (issue #7, item 4a).
//!
//! One scenario, run twice (the broker stopped with SIGTERM, and with `kill -9`):
//! 1. an idempotent producer (`acks=all`, `partitioner=murmur2_random`) sends 100,000 keyed
//!    messages; every delivery report must name the partition Kafka's murmur2 picks for the key,
//!    and each partition's offsets must be exactly 0..n with each key's messages in send order;
//! 2. a group of three consumers (`enable.auto.commit=false`) reads about half of them, each
//!    committing synchronously what it processed (records polled but not committed before a
//!    revocation are forgotten: the partition's next owner reads them from the committed offset);
//! 3. the broker is stopped and restarted on the same data; OffsetFetch must answer the offsets
//!    committed before;
//! 4. a new group of three (same group id) resumes from the committed offsets: what was committed
//!    before and after must be every produced message exactly once, each at its acknowledged
//!    partition and offset. The checker lists the offenders.
//!
//! Every wait has a deadline that fails the test with what was seen so far.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use spool_protocol::client::partitioner::{murmur2, partition_for_key};
use spool_tests::checker::assert_none;
use spool_tests::client::create_topic;
use spool_tests::kafka_clients::start_broker;
use spool_tests::{Broker, BrokerOptions};

const MESSAGES: u64 = 100_000;
const PARTITIONS: i32 = 6;
const GROUP_SIZE: usize = 3;
/// Distinct keys: each key carries about ten messages, so per-key order is checked too.
const KEYS: u64 = 10_007;
/// Bound on producing and flushing every message (a debug-build broker on a busy machine).
const PRODUCE_TIMEOUT: Duration = Duration::from_secs(180);
/// Bound on one group's run, from subscribing to its last commit.
const GROUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on a member's close (LeaveGroup) after its run, beyond [`GROUP_TIMEOUT`].
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on one librdkafka call that talks to the broker (OffsetFetch).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A member commits after this many records, or sooner when a poll comes back empty.
const COMMIT_EVERY: usize = 1_000;
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const TOPIC: &str = "rdkafka-orders";
const GROUP: &str = "rdkafka-group";

fn key_of(seq: u64) -> String {
    format!("key-{}", seq % KEYS)
}

/// Kafka's own murmur2 vectors (DESIGN §6), checked here too: every partition assertion below
/// rests on this function.
#[test]
fn murmur2_matches_kafkas_vectors() {
    for (input, expected) in [
        ("21", -973_932_308),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        ("abc", 479_470_107),
    ] {
        assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
    }
    // (murmur2 & 0x7fffffff) % n, with a negative hash: "21" → 1173551340.
    assert_eq!(partition_for_key(b"21", 6), 1_173_551_340 % 6);
}

#[test]
fn hundred_thousand_keyed_messages_resume_exactly_once_after_sigterm() {
    scenario(Stop::Sigterm);
}

#[test]
fn hundred_thousand_keyed_messages_resume_exactly_once_after_kill9() {
    scenario(Stop::Kill9);
}

#[derive(Debug, Clone, Copy)]
enum Stop {
    Sigterm,
    Kill9,
}

fn scenario(stop: Stop) {
    let mut broker = start_broker(BrokerOptions::default());
    create_topic(&broker, TOPIC, PARTITIONS);

    let started = Instant::now();
    let acked = produce_all(&broker);
    println!(
        "{stop:?}: produced {MESSAGES} keyed messages in {:?}",
        started.elapsed()
    );

    let first = run_group(&broker, "before", MESSAGES as usize / 2, 0);
    let committed_before: Vec<&Consumed> = first.iter().flat_map(|m| &m.committed).collect();
    for m in &first {
        assert!(
            !m.committed.is_empty(),
            "{} committed nothing before the restart: the group of {GROUP_SIZE} did not share \
             the {PARTITIONS} partitions\n{}",
            m.name,
            summary(&first)
        );
    }
    let commit_points = commit_points(&committed_before);
    println!("{stop:?}: {}", summary(&first));

    match stop {
        Stop::Sigterm => broker.terminate(),
        Stop::Kill9 => broker.kill9(),
    }
    broker.restart();
    broker.wait_kafka_ready();

    assert_eq!(
        fetch_committed(&broker),
        commit_points,
        "OffsetFetch after the restart (left) vs the offsets committed before it (right)\n{}",
        broker.log_tail()
    );

    let second = run_group(&broker, "after", MESSAGES as usize, committed_before.len());
    println!("{stop:?}: {}", summary(&second));

    let all: Vec<(&str, &Consumed)> = first
        .iter()
        .chain(&second)
        .flat_map(|m| m.committed.iter().map(move |c| (m.name.as_str(), c)))
        .collect();
    check_exactly_once(&acked, &all);
}

/// Delivery reports, as librdkafka hands them to the producer's context.
#[derive(Default)]
struct Deliveries {
    reports: Mutex<Vec<(u64, Result<(i32, i64), String>)>>,
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
fn produce_all(broker: &Broker) -> Vec<(i32, i64)> {
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

fn check_deliveries(reports: Vec<(u64, Result<(i32, i64), String>)>) -> Vec<(i32, i64)> {
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

/// A record a member processed and committed.
#[derive(Debug, Clone)]
struct Consumed {
    seq: u64,
    key: String,
    partition: i32,
    offset: i64,
}

/// What one member of a group did.
struct MemberReport {
    name: String,
    committed: Vec<Consumed>,
    commit_errors: Vec<String>,
    client_errors: Vec<String>,
    /// From `subscribe` to the first record.
    first_record_after: Option<Duration>,
    /// Records it polled but dropped, uncommitted, when its partitions were revoked.
    forgotten_on_revoke: usize,
    timed_out: bool,
}

/// Counts partition revocations, which librdkafka reports inside `poll` on the member's thread.
#[derive(Default)]
struct RevocationCounter(AtomicU64);

impl ClientContext for RevocationCounter {}

impl ConsumerContext for RevocationCounter {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Revoke(_)) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// What the members of one group share: the count committed (by this group and, for the
/// second one, the first) and the flag that ends the run once it reaches the target.
struct Shared {
    committed: AtomicUsize,
    target: usize,
    stop: AtomicBool,
    deadline: Instant,
}

/// Runs a group of [`GROUP_SIZE`] members until `target` records are committed in all (counting
/// `already` from before), then closes them. Panics if a member does not report back in time.
fn run_group(broker: &Broker, phase: &str, target: usize, already: usize) -> Vec<MemberReport> {
    let shared = Arc::new(Shared {
        committed: AtomicUsize::new(already),
        target,
        stop: AtomicBool::new(already >= target),
        deadline: Instant::now() + GROUP_TIMEOUT,
    });
    let (tx, rx) = mpsc::channel();
    for i in 0..GROUP_SIZE {
        let name = format!("{phase}-{i}");
        let (tx, shared, bootstrap) = (tx.clone(), shared.clone(), broker.kafka_bootstrap());
        std::thread::spawn(move || {
            let _ = tx.send(member(&bootstrap, name, &shared));
        });
    }
    let wait_until = Instant::now() + GROUP_TIMEOUT + CLOSE_TIMEOUT;
    let mut reports = Vec::new();
    for _ in 0..GROUP_SIZE {
        let left = wait_until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => reports.push(r),
            Err(_) => panic!(
                "{phase}: {} of {GROUP_SIZE} members finished within {:?} (the others hang \
                 in poll or close)\n{}\n{}",
                reports.len(),
                GROUP_TIMEOUT + CLOSE_TIMEOUT,
                summary(&reports),
                broker.log_tail()
            ),
        }
    }
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    let timed_out: Vec<String> = reports
        .iter()
        .filter(|r| r.timed_out)
        .map(|r| r.name.clone())
        .collect();
    assert!(
        timed_out.is_empty(),
        "{phase}: the group committed {} of the {target} records wanted within {GROUP_TIMEOUT:?}\n{}\n{}",
        shared.committed.load(Ordering::SeqCst),
        summary(&reports),
        broker.log_tail()
    );
    reports
}

/// One group member on its own thread: subscribe, poll, commit what it processed.
fn member(bootstrap: &str, name: String, shared: &Shared) -> MemberReport {
    let mut report = MemberReport {
        name,
        committed: Vec::new(),
        commit_errors: Vec::new(),
        client_errors: Vec::new(),
        first_record_after: None,
        forgotten_on_revoke: 0,
        timed_out: false,
    };
    let consumer: BaseConsumer<RevocationCounter> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("client.id", &report.name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create_with_context(RevocationCounter::default())
        .expect("an rdkafka consumer");
    consumer.subscribe(&[TOPIC]).expect("subscribing");
    let subscribed = Instant::now();
    let mut pending: Vec<Consumed> = Vec::new();
    let mut revocations_seen = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        if Instant::now() >= shared.deadline {
            report.timed_out = true;
            break;
        }
        let polled = consumer.poll(POLL_INTERVAL);
        let revocations = consumer.context().0.load(Ordering::SeqCst);
        if revocations != revocations_seen {
            revocations_seen = revocations;
            report.forgotten_on_revoke += pending.len();
            pending.clear();
        }
        match polled {
            Some(Ok(m)) => {
                report
                    .first_record_after
                    .get_or_insert(subscribed.elapsed());
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default());
                let Ok(seq) = value.parse() else {
                    panic!("{}: a value nobody produced: {value:?}", report.name);
                };
                pending.push(Consumed {
                    seq,
                    key,
                    partition: m.partition(),
                    offset: m.offset(),
                });
                if pending.len() >= COMMIT_EVERY {
                    commit(&consumer, &mut pending, &mut report, shared);
                }
            }
            Some(Err(e)) => report.client_errors.push(e.to_string()),
            None => commit(&consumer, &mut pending, &mut report, shared),
        }
    }
    commit(&consumer, &mut pending, &mut report, shared);
    drop(consumer); // close: LeaveGroup
    report
}

/// Commits `pending` synchronously (per partition, the offset after its last record); on success
/// they count as processed, on failure they are dropped and will be read again by whoever owns
/// their partition next.
fn commit(
    consumer: &BaseConsumer<RevocationCounter>,
    pending: &mut Vec<Consumed>,
    report: &mut MemberReport,
    shared: &Shared,
) {
    if pending.is_empty() {
        return;
    }
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for c in pending.iter() {
        let e = next.entry(c.partition).or_insert(c.offset + 1);
        *e = (*e).max(c.offset + 1);
    }
    let mut tpl = TopicPartitionList::new();
    for (&p, &o) in &next {
        tpl.add_partition_offset(TOPIC, p, Offset::Offset(o))
            .expect("a valid offset");
    }
    match consumer.commit(&tpl, CommitMode::Sync) {
        Ok(()) => {
            let total = shared.committed.fetch_add(pending.len(), Ordering::SeqCst) + pending.len();
            if total >= shared.target {
                shared.stop.store(true, Ordering::SeqCst);
            }
            report.committed.append(pending);
        }
        Err(e) => {
            report
                .commit_errors
                .push(format!("{e} ({} records, to {next:?})", pending.len()));
            pending.clear();
        }
    }
}

/// Per partition, the offset after the last committed record (what OffsetFetch should answer).
fn commit_points(committed: &[&Consumed]) -> BTreeMap<i32, Offset> {
    let mut out: BTreeMap<i32, Offset> = (0..PARTITIONS).map(|p| (p, Offset::Invalid)).collect();
    for c in committed {
        let e = out.entry(c.partition).or_insert(Offset::Invalid);
        let next = c.offset + 1;
        if !matches!(*e, Offset::Offset(o) if o >= next) {
            *e = Offset::Offset(next);
        }
    }
    out
}

/// The group's committed offsets, asked by a consumer that does not join the group.
fn fetch_committed(broker: &Broker) -> BTreeMap<i32, Offset> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.kafka_bootstrap())
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .create()
        .expect("an rdkafka consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(TOPIC, p);
    }
    let fetched = consumer
        .committed_offsets(tpl, CALL_TIMEOUT)
        .unwrap_or_else(|e| panic!("OffsetFetch after the restart: {e}\n{}", broker.log_tail()));
    fetched
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

/// Every produced message committed exactly once over both groups, each read at the partition
/// and offset its delivery report named, in the partition murmur2 picks for its key.
fn check_exactly_once(acked: &[(i32, i64)], all: &[(&str, &Consumed)]) {
    let mut by: Vec<Vec<&str>> = vec![Vec::new(); acked.len()];
    let mut wrong = Vec::new();
    for &(member, c) in all {
        let Some(&(p, o)) = acked.get(c.seq as usize) else {
            wrong.push(format!("{member}: message {} was never produced", c.seq));
            continue;
        };
        if (c.partition, c.offset) != (p, o) || c.key != key_of(c.seq) {
            wrong.push(format!(
                "{member}: message {} read as key {:?} at partition {} offset {}; produced as \
                 key {:?} at partition {p} offset {o}",
                c.seq,
                c.key,
                c.partition,
                c.offset,
                key_of(c.seq)
            ));
        }
        by[c.seq as usize].push(member);
    }
    let repeated: Vec<String> = by
        .iter()
        .enumerate()
        .filter(|(_, m)| m.len() > 1)
        .map(|(seq, m)| {
            let (p, o) = acked[seq];
            format!("message {seq} (partition {p} offset {o}) committed by {m:?}")
        })
        .collect();
    let lost: Vec<String> = by
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_empty())
        .map(|(seq, _)| {
            let (p, o) = acked[seq];
            format!("message {seq} (partition {p} offset {o}) never committed")
        })
        .collect();
    assert_none("records read back wrong", &wrong);
    assert_none("records repeated across the restart", &repeated);
    assert_none("records lost across the restart", &lost);
}

fn summary(reports: &[MemberReport]) -> String {
    let lines: Vec<String> = reports
        .iter()
        .map(|r| {
            let mut partitions: Vec<i32> = r.committed.iter().map(|c| c.partition).collect();
            partitions.sort_unstable();
            partitions.dedup();
            format!(
                "{}: committed {} records from partitions {partitions:?}, first record {:?} \
                 after subscribing, {} forgotten on revocation, commit errors {:?}, client \
                 errors {:?}",
                r.name,
                r.committed.len(),
                r.first_record_after,
                r.forgotten_on_revoke,
                r.commit_errors,
                r.client_errors.iter().take(5).collect::<Vec<_>>()
            )
        })
        .collect();
    lines.join("\n")
}
