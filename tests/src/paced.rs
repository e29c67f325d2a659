//! Producing for consumer-group tests: every partition of a topic gets records, each one's
//! acknowledgement (acks=all) recorded as an [`Acked`] with the value `g-<seq>`.
//!
//! - [`produce_spread`]: `count` records at once, record `seq` to partition `seq % partitions`;
//! - [`PacedProducer`]: a thread that keeps sending one record to every partition per round, a
//!   round every [`ROUND_INTERVAL`], until stopped — so consumers have something to print while a
//!   test kills or adds members. The interval sets a rate, it synchronizes nothing: tests wait for
//!   conditions ([`PacedProducer::wait_past`]), never for time.
//!
//! A failed delivery fails the test: the broker is meant to stay healthy throughout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use spool_protocol::client::producer::Acks;
use spool_protocol::client::ProducerRecord;

use crate::checker::Acked;
use crate::client;
use crate::Broker;

/// Pause between two rounds of the paced producer (its rate, not a synchronization).
pub const ROUND_INTERVAL: Duration = Duration::from_millis(20);
/// Bound on the paced producer's next acknowledgement.
pub const PROGRESS_TIMEOUT: Duration = Duration::from_secs(30);

/// The value of record `seq`.
pub fn value(seq: u64) -> Bytes {
    Bytes::from(format!("g-{seq}"))
}

/// The sequence number in a value `g-<seq>` (`u64::MAX` for any other value).
pub fn seq_of(value: &Bytes) -> u64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.strip_prefix("g-"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Sends `count` records (`first_seq..`) to `topic`, record `seq` to partition
/// `seq % partitions`, all in flight together; returns their acknowledgements.
pub fn produce_spread(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    first_seq: u64,
    count: u64,
) -> Vec<Acked> {
    let producer = client::producer(broker, Acks::All);
    let pending: Vec<_> = (first_seq..first_seq + count)
        .map(|seq| {
            let partition = (seq % partitions as u64) as i32;
            let record = ProducerRecord::new(topic, value(seq))
                .with_key(format!("k-{seq}"))
                .with_partition(partition);
            (seq, producer.send(record).expect("queueing a record"))
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

#[derive(Default)]
struct State {
    acked: Vec<Acked>,
    failure: Option<String>,
}

/// See the module docs.
pub struct PacedProducer {
    stop: Arc<AtomicBool>,
    state: Arc<(Mutex<State>, Condvar)>,
    thread: JoinHandle<()>,
}

impl PacedProducer {
    /// Starts producing to every partition of `topic`, sequence numbers from `first_seq`.
    pub fn start(broker: &Broker, topic: &str, partitions: i32, first_seq: u64) -> Self {
        let producer = client::producer(broker, Acks::All);
        let topic = topic.to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let (stop2, state2) = (stop.clone(), state.clone());
        let thread = std::thread::spawn(move || {
            let (state, progress) = &*state2;
            let mut seq = first_seq;
            while !stop2.load(Ordering::SeqCst) {
                let round: Vec<_> = (0..partitions)
                    .map(|p| {
                        let s = seq + p as u64;
                        let record = ProducerRecord::new(topic.clone(), value(s))
                            .with_key(format!("k-{s}"))
                            .with_partition(p);
                        (s, producer.send(record))
                    })
                    .collect();
                // All of a round in flight together, then every acknowledgement.
                let round: Vec<_> = round
                    .into_iter()
                    .map(|(s, sent)| (s, sent.and_then(|d| d.wait())))
                    .collect();
                seq += partitions as u64;
                let mut st = state.lock().expect("paced state");
                for (s, r) in round {
                    match r {
                        Ok(md) => st.acked.push(Acked {
                            partition: md.partition,
                            offset: md.offset,
                            value: value(s),
                        }),
                        Err(e) => st.failure = Some(format!("record {s}: {e}")),
                    }
                }
                progress.notify_all();
                if st.failure.is_some() {
                    break;
                }
                drop(st);
                std::thread::sleep(ROUND_INTERVAL);
            }
            let _ = producer.close(client::OPERATION_TIMEOUT_MS);
        });
        Self {
            stop,
            state,
            thread,
        }
    }

    /// How many records are acknowledged so far.
    pub fn acked_count(&self) -> usize {
        self.state.0.lock().expect("paced state").acked.len()
    }

    /// Waits until more than `count` records are acknowledged; returns how many are.
    pub fn wait_past(&self, count: usize) -> usize {
        let (state, progress) = &*self.state;
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        let mut s = state.lock().expect("paced state");
        loop {
            if let Some(f) = &s.failure {
                panic!("the paced producer failed: {f}");
            }
            if s.acked.len() > count {
                return s.acked.len();
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "the paced producer got no acknowledgement for {PROGRESS_TIMEOUT:?}"
            );
            s = progress
                .wait_timeout(s, deadline - now)
                .expect("paced state")
                .0;
        }
    }

    /// Stops the producer and returns every acknowledged record.
    pub fn stop(self) -> Vec<Acked> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the paced producer thread");
        let mut s = self.state.0.lock().expect("paced state");
        if let Some(f) = &s.failure {
            panic!("the paced producer failed: {f}");
        }
        std::mem::take(&mut s.acked)
    }
}
