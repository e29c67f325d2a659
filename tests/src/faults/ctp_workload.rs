//! The fault runs' consume-transform-produce workload (`--workload ctp`): exactly once through
//! a processor, under the nemeses. Before the nemeses start, [`INPUTS`] records `c<i>` are
//! written (acks=all) to the input topic [`INPUT_TOPIC`]; one processor of spool's client then
//! reads them and, `INPUTS_PER_TXN` inputs per transaction at most `TXNS_PER_S`
//! transactions a second, writes `c<i>!` to the run's topic and commits its consumer group's
//! input offsets with `send_offsets_to_transaction`.
//!
//! Whenever anything fails — a poll, a send, the offsets, the commit (then in doubt) — and on
//! purpose twice every `CRASH_EVERY` transactions, the processor starts over as a crashed one
//! would: a new producer under the same transactional id (its InitProducerId fences the old
//! one and settles its transaction), the group's stable
//! committed offsets fetched again (KIP-447: pending transactional offsets are waited for),
//! and reading resumes there. It stops once its committed offsets reach the input's end, or at
//! the run's consumer deadline. [`super::ctp_check`]'s verdict: every input's output visible to
//! read_committed exactly once.
//!
//! Bounded: each call has its own timeout; the processor stops on the run's flags.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spool_protocol::client::admin::AdminConfig;
use spool_protocol::client::blocking::{Admin, Consumer, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ConsumerRecord, ProducerRecord, TopicPartition};

use super::history::{CtpProgress, History};
use super::workload::Shared;

/// The processor's input topic (the run's topic is its output).
pub const INPUT_TOPIC: &str = "ctp-in";
/// The processor's consumer group.
pub const GROUP: &str = "faults-ctp";
/// Input records written before the run.
pub const INPUTS: u64 = 1_000;
/// Inputs one transaction carries at most.
const INPUTS_PER_TXN: usize = 5;
/// Transactions per second at most: paced so that the inputs last about the run's length, and
/// the nemeses find the processor mid-stream.
const TXNS_PER_S: u64 = 12;
/// Every this-many transactions the processor crashes on purpose, once just before a commit
/// (its successor fences it and aborts the transaction, whose outputs are then written again)
/// and once just after one: restarts happen in every run, nemesis or not.
const CRASH_EVERY: u64 = 40;
/// Bound of each call.
const CALL_TIMEOUT_MS: u64 = 15_000;

/// The value of input `i`, and of its output.
pub fn input_value(i: u64) -> String {
    format!("c{i}")
}

pub fn output_of(input: &str) -> String {
    format!("{input}!")
}

/// Writes the [`INPUTS`] inputs, round-robin over `partitions`, and waits for every one.
pub fn seed(native: &[String], partitions: i32) -> Result<(), String> {
    let config = ProducerConfig {
        client_id: "faults-ctp-seed".into(),
        acks: Acks::All,
        ..ProducerConfig::default()
    };
    let bootstrap: Vec<&str> = native.iter().map(String::as_str).collect();
    let p = Producer::new(&bootstrap, config).map_err(|e| format!("seed producer: {e}"))?;
    let futures: Vec<_> = (0..INPUTS)
        .map(|i| {
            let r = ProducerRecord::new(INPUT_TOPIC, input_value(i).into_bytes())
                .with_partition((i % partitions as u64) as i32);
            p.send(r).map_err(|e| format!("seeding c{i}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    for f in futures {
        f.wait().map_err(|e| format!("seeding: {e}"))?;
    }
    Ok(())
}

/// Starts the processor (module docs); it stops at `shared.stop_consumers`.
pub fn processor(
    native: &[String],
    output: &str,
    partitions: i32,
    shared: &Shared,
) -> JoinHandle<Result<(), String>> {
    let (native, output, shared) = (native.to_vec(), output.to_string(), shared.clone());
    std::thread::spawn(move || {
        let tps: Vec<TopicPartition> = (0..partitions)
            .map(|p| TopicPartition::new(INPUT_TOPIC, p))
            .collect();
        let ends = input_ends(&native, &tps)?;
        while !shared.stop_consumers.load(Ordering::SeqCst) {
            match run_once(&native, &output, &tps, &ends, &shared) {
                Ok(true) => {
                    note(&shared, |p| p.finished = true);
                    return Ok(());
                }
                Ok(false) => {}
                Err(why) => {
                    note(&shared, |p| {
                        p.restarts += 1;
                        p.last_restart = why.clone();
                    });
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        Ok(())
    })
}

fn note(shared: &Shared, f: impl FnOnce(&mut CtpProgress)) {
    if let Ok(mut h) = shared.history.lock() {
        let h: &mut History = &mut h;
        f(&mut h.ctp);
    }
}

fn bootstrap(native: &[String]) -> Vec<&str> {
    native.iter().map(String::as_str).collect()
}

/// Each input partition's end (the records are all written before the processor starts).
fn input_ends(native: &[String], tps: &[TopicPartition]) -> Result<Vec<i64>, String> {
    let mut c = Consumer::new(&bootstrap(native), ConsumerConfig::default())
        .map_err(|e| format!("a consumer: {e}"))?;
    c.assign(tps.to_vec());
    tps.iter()
        .map(|tp| {
            c.seek(tp, SeekTo::Latest)
                .map_err(|e| format!("seeking {tp}: {e}"))?;
            c.position(tp, CALL_TIMEOUT_MS)
                .map_err(|e| format!("end of {tp}: {e}"))
        })
        .collect()
}

/// One processor's life: Ok(true) once every input is committed, Ok(false) when the run
/// stopped first, Err when it must start over.
fn run_once(
    native: &[String],
    output: &str,
    tps: &[TopicPartition],
    ends: &[i64],
    shared: &Shared,
) -> Result<bool, String> {
    let config = super::txn_workload::transactional_config("faults-ctp");
    let producer =
        Producer::new(&bootstrap(native), config).map_err(|e| format!("producer: {e}"))?;
    let result = process(&producer, native, output, tps, ends, shared);
    let _ = producer.close(1_000);
    result
}

fn process(
    producer: &Producer,
    native: &[String],
    output: &str,
    tps: &[TopicPartition],
    ends: &[i64],
    shared: &Shared,
) -> Result<bool, String> {
    // Settles the previous instance's transaction before the offsets are read.
    producer
        .init_transactions(CALL_TIMEOUT_MS)
        .map_err(|e| format!("init_transactions: {e}"))?;
    let mut admin = Admin::new(
        &bootstrap(native),
        AdminConfig {
            request_timeout_ms: 5_000,
            operation_timeout_ms: CALL_TIMEOUT_MS,
            ..AdminConfig::default()
        },
    )
    .map_err(|e| format!("admin: {e}"))?;
    let committed = admin
        .fetch_offsets(GROUP, Some(tps.to_vec()))
        .map_err(|e| format!("fetching {GROUP}'s offsets: {e}"))?;
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        fetch_max_wait_ms: 100,
        ..ConsumerConfig::default()
    };
    let mut consumer =
        Consumer::new(&bootstrap(native), config).map_err(|e| format!("consumer: {e}"))?;
    consumer.assign(tps.to_vec());
    let mut next: Vec<i64> = tps
        .iter()
        .map(|tp| {
            committed
                .iter()
                .find(|(c, _)| c == tp)
                .map_or(0, |(_, o)| (*o).max(0))
        })
        .collect();
    for (tp, at) in tps.iter().zip(&next) {
        consumer
            .seek(tp, SeekTo::Offset(*at))
            .map_err(|e| format!("seeking {tp}: {e}"))?;
    }
    // Polled but not yet processed, in the order polled (each partition's in offset order).
    let mut polled: VecDeque<ConsumerRecord> = VecDeque::new();
    let start = Instant::now();
    let mut txns = 0u64;
    loop {
        if next.iter().zip(ends).all(|(n, e)| n >= e) {
            return Ok(true);
        }
        if shared.stop_consumers.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if polled.is_empty() {
            polled.extend(consumer.poll(200).map_err(|e| format!("poll: {e}"))?);
            continue;
        }
        let due = start + Duration::from_micros(txns * 1_000_000 / TXNS_PER_S);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        txns += 1;
        let records: Vec<ConsumerRecord> =
            polled.drain(..INPUTS_PER_TXN.min(polled.len())).collect();
        producer
            .begin_transaction()
            .map_err(|e| format!("begin_transaction: {e}"))?;
        let mut offsets = next.clone();
        for r in &records {
            let input = r
                .value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            let out = ProducerRecord::new(output, output_of(&input).into_bytes())
                .with_partition(r.partition);
            producer.send(out).map_err(|e| format!("send: {e}"))?;
            let at = tps
                .iter()
                .position(|tp| tp.partition == r.partition)
                .ok_or("a record of a partition not assigned")?;
            offsets[at] = offsets[at].max(r.offset + 1);
        }
        let commit = tps
            .iter()
            .cloned()
            .zip(offsets.iter().copied())
            .collect::<Vec<_>>();
        producer
            .send_offsets_to_transaction(GROUP, commit, CALL_TIMEOUT_MS)
            .map_err(|e| format!("send_offsets_to_transaction: {e}"))?;
        let mut attempt = 0;
        note(shared, |p| {
            p.attempted_txns += 1;
            attempt = p.attempted_txns;
        });
        let crash = attempt % CRASH_EVERY;
        if crash == CRASH_EVERY / 3 {
            producer
                .flush(CALL_TIMEOUT_MS)
                .map_err(|e| format!("flush: {e}"))?;
            return Err("crashed on purpose before a commit".into());
        }
        match producer.commit_transaction(CALL_TIMEOUT_MS) {
            Ok(()) => {
                next = offsets;
                note(shared, |p| {
                    p.committed_txns += 1;
                    p.committed_inputs += records.len() as u64;
                });
                if crash == 2 * CRASH_EVERY / 3 {
                    return Err("crashed on purpose after a commit".into());
                }
            }
            Err(e) => {
                note(shared, |p| p.in_doubt += 1);
                return Err(format!("commit_transaction (in doubt): {e}"));
            }
        }
    }
}
