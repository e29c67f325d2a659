//! The fault runs' transactional workload (`--workload txn`): two transactional producers —
//! spool's client on the native port (here) and librdkafka on the Kafka port
//! ([`super::txn_rdkafka`]) — each on its own thread, running short transactions over every
//! partition of the topic (most committed, one in `ABORT_EVERY` aborted on purpose) and
//! recording each one's outcome ([`TxnAttempt`]) in the run's history until the stop flag;
//! then the topic read back twice once the cluster has healed: with read_committed (after every
//! transaction is decided) and whole. [`super::txn_check`] judges them. A transaction aborted
//! on purpose is flushed first, so its records are in the log for read_committed to hide.
//!
//! A producer whose commit fails (its coordinator moved, a broker died) cannot tell what became
//! of the transaction: it records it as unknown and aborts if it still can; a producer that
//! cannot abort is dropped and a new one built under the same transactional id, whose
//! InitProducerId fences the old instance and settles its transaction. A transaction it leaves
//! open is aborted by the coordinator after [`TXN_TIMEOUT_MS`]. Bounded: every call has its own
//! timeout, and the producers stop at the run's stop flag.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spool_protocol::client::blocking::{Consumer, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ProducerRecord, TopicPartition};
use spool_protocol::wire::IsolationLevel;

use super::history::{txn_value, FinalLog, TxnAttempt, TxnOutcome};
use super::workload::Shared;

/// Transactional producers in a `txn` run: 0 is spool's, 1 librdkafka's (the runner starts
/// them).
pub const PRODUCERS: u32 = 2;
/// Records per transaction, round-robin over the topic's partitions.
const RECORDS_PER_TXN: u64 = 6;
/// Every this-many-th transaction of a producer is aborted on purpose.
const ABORT_EVERY: u64 = 4;
/// Transactions each producer starts per second, at most.
const TXNS_PER_S: u64 = 10;
/// The coordinator aborts a transaction left open this long (`transaction.timeout.ms`).
pub const TXN_TIMEOUT_MS: u32 = 10_000;
/// Bound of each producer call (init, commit, abort).
pub(super) const CALL_TIMEOUT_MS: u64 = 15_000;

/// Starts spool's producer `id` (transactional id `faults-txn-<id>`) on the brokers' native
/// addresses (librdkafka's is [`super::txn_rdkafka::producer`]).
pub fn spool_producer(
    id: u32,
    native: &[String],
    topic: &str,
    partitions: i32,
    shared: &Shared,
) -> JoinHandle<Result<(), String>> {
    let (bootstrap, topic, shared) = (native.to_vec(), topic.to_string(), shared.clone());
    std::thread::spawn(move || {
        run_txns(id, &topic, partitions, &shared, || connect(id, &bootstrap));
        Ok(())
    })
}

fn stopped(shared: &Shared) -> bool {
    shared.stop.load(Ordering::SeqCst)
}

/// A producer's step (connect and init, begin, send, flush, commit, abort) slower than this is
/// logged to the run's `clients.log`, so a long stretch without a commit can be explained
/// afterwards: which call waited, and how it ended.
const SLOW_STEP_MS: u64 = 1_000;

/// Runs `f`, one `step` of producer `id`'s transaction `txn`; logs it when slow.
fn timed<T>(id: u32, txn: u64, step: &str, f: impl FnOnce() -> T, ok: impl Fn(&T) -> bool) -> T {
    let started = Instant::now();
    let out = f();
    let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if took_ms >= SLOW_STEP_MS {
        tracing::warn!(
            producer = id,
            txn,
            step,
            took_ms,
            ok = ok(&out),
            "slow transactional step"
        );
    }
    out
}

fn record(shared: &Shared, attempt: TxnAttempt) {
    if let Ok(mut h) = shared.history.lock() {
        h.txns.push(attempt);
    }
}

/// What the workload asks of a transactional producer (spool's client here, librdkafka's in
/// [`super::txn_rdkafka`]); each call bounded by [`CALL_TIMEOUT_MS`].
pub(super) trait TxnClient {
    fn begin(&self) -> bool;
    /// Whether the record was queued.
    fn send(&self, topic: &str, partition: i32, value: String) -> bool;
    fn flush(&self);
    fn commit(&self) -> Result<(), String>;
    fn abort(&self) -> bool;
    /// Gives the producer up, within a second (what it still holds is in doubt anyway).
    fn close(self);
}

impl TxnClient for Producer {
    fn begin(&self) -> bool {
        self.begin_transaction().is_ok()
    }

    fn send(&self, topic: &str, partition: i32, value: String) -> bool {
        let r = ProducerRecord::new(topic, value.into_bytes()).with_partition(partition);
        Producer::send(self, r).is_ok()
    }

    fn flush(&self) {
        let _ = Producer::flush(self, CALL_TIMEOUT_MS);
    }

    fn commit(&self) -> Result<(), String> {
        self.commit_transaction(CALL_TIMEOUT_MS)
            .map_err(|e| e.to_string())
    }

    fn abort(&self) -> bool {
        self.abort_transaction(CALL_TIMEOUT_MS).is_ok()
    }

    fn close(self) {
        let _ = Producer::close(self, 1_000);
    }
}

/// The settings of the fault runs' transactional producers of spool's client (this workload's
/// and `super::ctp_workload`'s processor): transactional id `id`, client id the same.
pub(super) fn transactional_config(id: &str) -> ProducerConfig {
    ProducerConfig {
        client_id: id.to_string(),
        acks: Acks::All,
        transactional_id: Some(id.to_string()),
        transaction_timeout_ms: TXN_TIMEOUT_MS,
        linger_ms: 2,
        request_timeout_ms: 5_000,
        delivery_timeout_ms: CALL_TIMEOUT_MS,
        max_block_ms: 5_000,
        ..ProducerConfig::default()
    }
}

/// spool's producer of transactional id `faults-txn-<id>`, its transactions initialised.
fn connect(id: u32, bootstrap: &[String]) -> Result<Producer, String> {
    let config = transactional_config(&format!("faults-txn-{id}"));
    let bootstrap: Vec<&str> = bootstrap.iter().map(String::as_str).collect();
    let p = Producer::new(&bootstrap, config).map_err(|e| format!("producer: {e}"))?;
    p.init_transactions(CALL_TIMEOUT_MS)
        .map_err(|e| format!("init_transactions: {e}"))?;
    Ok(p)
}

/// Producer `id`'s transactions (module docs) until the run stops: a producer from `connect`
/// runs them until one ends in doubt (a failed commit it could not abort, or a failed abort),
/// then a new one takes over under the same transactional id.
pub(super) fn run_txns<C: TxnClient>(
    id: u32,
    topic: &str,
    partitions: i32,
    shared: &Shared,
    connect: impl Fn() -> Result<C, String>,
) {
    let start = Instant::now();
    let mut txn = 0u64;
    while !stopped(shared) {
        let Ok(producer) = timed(id, txn, "connect", &connect, Result::is_ok) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        while !stopped(shared) {
            let due = start + Duration::from_micros(txn * 1_000_000 / TXNS_PER_S);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if !timed(id, txn, "begin", || producer.begin(), |ok| *ok) {
                break;
            }
            let mut queued = 0u64;
            for i in 0..RECORDS_PER_TXN {
                let partition = (i % partitions.max(1) as u64) as i32;
                let value = txn_value(id, txn, i);
                if !timed(
                    id,
                    txn,
                    "send",
                    || producer.send(topic, partition, value),
                    |ok| *ok,
                ) {
                    break;
                }
                queued += 1;
            }
            let abort = queued < RECORDS_PER_TXN || txn % ABORT_EVERY == ABORT_EVERY - 1;
            let (outcome, remake) = if abort {
                // Written first, so that the log holds the aborted records read_committed must
                // hide (an abort drops what is still unsent, as Kafka's producers do).
                timed(id, txn, "flush", || producer.flush(), |_| true);
                let aborted = timed(id, txn, "abort", || producer.abort(), |ok| *ok);
                (TxnOutcome::Aborted, !aborted)
            } else {
                match timed(id, txn, "commit", || producer.commit(), Result::is_ok) {
                    Ok(()) => (TxnOutcome::Committed, false),
                    // It may have been prepared before the error: in doubt.
                    Err(error) => {
                        let aborted = timed(id, txn, "abort", || producer.abort(), |ok| *ok);
                        (TxnOutcome::Unknown { error }, !aborted)
                    }
                }
            };
            record(
                shared,
                TxnAttempt {
                    producer: id,
                    txn,
                    records: queued,
                    outcome,
                    done_ms: shared.now_ms(),
                },
            );
            txn += 1;
            if remake {
                break;
            }
        }
        producer.close();
    }
}

/// A consumer of every partition of `topic` through `bootstrap`, from the start.
fn consumer(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: IsolationLevel,
) -> Result<Consumer, String> {
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 200,
        isolation_level: isolation,
        ..ConsumerConfig::default()
    };
    let mut c = Consumer::new(&[bootstrap], config).map_err(|e| format!("a consumer: {e}"))?;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    c.assign(tps.clone());
    for tp in &tps {
        c.seek(tp, SeekTo::Earliest)
            .map_err(|e| format!("seeking {tp}: {e}"))?;
    }
    Ok(c)
}

/// Each partition's end offset as `isolation` sees it: the high watermark, or with
/// read_committed the last stable offset.
fn ends(c: &mut Consumer, topic: &str, partitions: i32) -> Result<Vec<i64>, String> {
    (0..partitions)
        .map(|p| {
            let tp = TopicPartition::new(topic, p);
            c.seek(&tp, SeekTo::Latest)
                .map_err(|e| format!("seeking {tp}: {e}"))?;
            c.position(&tp, 5_000)
                .map_err(|e| format!("end of {tp}: {e}"))
        })
        .collect()
}

/// The topic read back through `bootstrap` with read_committed and whole, once every
/// transaction is decided (each partition's last stable offset at its high watermark: the
/// coordinators finished or timed out every transaction) — waiting at most `timeout`.
pub fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<(FinalLog, FinalLog), String> {
    let until = Instant::now() + timeout;
    let mut committed_view = consumer(bootstrap, topic, partitions, IsolationLevel::ReadCommitted)?;
    let mut whole_view = consumer(
        bootstrap,
        topic,
        partitions,
        IsolationLevel::ReadUncommitted,
    )?;
    let high = loop {
        let high = ends(&mut whole_view, topic, partitions)?;
        let stable = ends(&mut committed_view, topic, partitions)?;
        if stable == high {
            break high;
        }
        if Instant::now() >= until {
            return Err(format!(
                "transactions still undecided after {timeout:?}: last stable offsets {stable:?}, high watermarks {high:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let committed = read_to(&mut committed_view, topic, partitions, &high, until)?;
    let whole = read_to(&mut whole_view, topic, partitions, &high, until)?;
    Ok((committed, whole))
}

/// Everything `c` returns from each partition's start until its position reaches `ends`.
fn read_to(
    c: &mut Consumer,
    topic: &str,
    partitions: i32,
    ends: &[i64],
    until: Instant,
) -> Result<FinalLog, String> {
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    for tp in &tps {
        c.seek(tp, SeekTo::Earliest)
            .map_err(|e| format!("seeking {tp}: {e}"))?;
    }
    let mut log: FinalLog = tps
        .iter()
        .map(|tp| ((tp.topic.clone(), tp.partition), Vec::new()))
        .collect();
    let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
    loop {
        for tp in &tps {
            let at = c
                .position(tp, 5_000)
                .map_err(|e| format!("position of {tp}: {e}"))?;
            positions.insert(tp.partition, at);
        }
        if positions.iter().all(|(p, at)| *at >= ends[*p as usize]) {
            return Ok(log);
        }
        if Instant::now() >= until {
            return Err(format!("reading back: at {positions:?} of {ends:?}"));
        }
        for r in c.poll(500).map_err(|e| format!("reading back: {e}"))? {
            let value = r
                .value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            if let Some(records) = log.get_mut(&(r.topic.clone(), r.partition)) {
                records.push((r.offset, value));
            }
        }
    }
}
