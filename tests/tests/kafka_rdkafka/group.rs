//! Steps 2–4 of the scenario: groups of librdkafka consumers, each member on its own thread,
//! committing synchronously what it processed; and OffsetFetch from a client outside the group.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use spool_tests::Broker;

use crate::{GROUP, GROUP_SIZE, PARTITIONS, POLL_INTERVAL, TOPIC};

/// Bound on one group's run, from subscribing to its last commit.
const GROUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on a member's close (LeaveGroup) after its run, beyond [`GROUP_TIMEOUT`].
const CLOSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on one librdkafka call that talks to the broker (OffsetFetch).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A member commits after this many records, or sooner when a poll comes back empty.
const COMMIT_EVERY: usize = 1_000;

/// A record a member processed and committed.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub seq: u64,
    pub key: String,
    pub partition: i32,
    pub offset: i64,
}

/// What one member of a group did.
pub struct MemberReport {
    pub name: String,
    pub committed: Vec<Consumed>,
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
pub fn run_group(broker: &Broker, phase: &str, target: usize, already: usize) -> Vec<MemberReport> {
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
pub fn commit_points(committed: &[&Consumed]) -> BTreeMap<i32, Offset> {
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
pub fn fetch_committed(broker: &Broker) -> BTreeMap<i32, Offset> {
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
        .unwrap_or_else(|e| panic!("OffsetFetch: {e}\n{}", broker.log_tail()));
    fetched
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

pub fn summary(reports: &[MemberReport]) -> String {
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
