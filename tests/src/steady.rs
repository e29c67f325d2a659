//! A steady producer for fault tests: one record at a time (acks=all), each acknowledgement
//! checked and recorded, on its own connection and thread, until stopped. A test does something
//! nasty to the broker and then [`SteadyProducer::wait_past`] proves the producer still gets
//! acknowledgements — a condition to wait for, not a pause to hope through — and at the end
//! [`SteadyProducer::stop`] hands over every acknowledged record for the checker.
//!
//! Any failed delivery is a test failure: the broker under test is supposed to stay healthy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use spool_protocol::client::blocking::Producer;
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::ProducerRecord;

use crate::checker::Acked;
use crate::client;
use crate::Broker;

/// Bound on the producer's next acknowledgement.
pub const PROGRESS_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct State {
    acked: Vec<Acked>,
    failure: Option<String>,
}

pub struct SteadyProducer {
    stop: Arc<AtomicBool>,
    state: Arc<(Mutex<State>, Condvar)>,
    thread: JoinHandle<()>,
}

impl SteadyProducer {
    /// Starts producing `steady-0`, `steady-1`, … (keyless) to `topic`.
    pub fn start(broker: &Broker, topic: &'static str) -> Self {
        let config = ProducerConfig {
            // One record per batch anyway (each waits for its ack); keep batches small so a
            // broker with a low --max-message-bytes takes them.
            batch_bytes: 1024,
            ..client::producer_config(Acks::All)
        };
        let producer = Producer::new(&[&broker.bootstrap()], config).expect("a producer");
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let (stop2, state2) = (stop.clone(), state.clone());
        let thread = std::thread::spawn(move || {
            let (state, progress) = &*state2;
            let mut seq = 0u64;
            while !stop2.load(Ordering::SeqCst) {
                let value = Bytes::from(format!("steady-{seq}"));
                let result = producer
                    .send(ProducerRecord::new(topic, value.clone()))
                    .and_then(|d| d.wait());
                let mut s = state.lock().expect("steady state");
                match result {
                    Ok(md) => s.acked.push(Acked {
                        partition: md.partition,
                        offset: md.offset,
                        value,
                    }),
                    Err(e) => s.failure = Some(format!("record {seq}: {e}")),
                }
                progress.notify_all();
                if s.failure.is_some() {
                    break;
                }
                seq += 1;
            }
            let _ = producer.close(client::OPERATION_TIMEOUT_MS);
        });
        Self {
            stop,
            state,
            thread,
        }
    }

    /// Waits until more than `count` records are acknowledged and returns how many are; `after`
    /// names what just happened, for the failure message.
    pub fn wait_past(&self, count: usize, after: &str) -> usize {
        let (state, progress) = &*self.state;
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        let mut s = state.lock().expect("steady state");
        loop {
            if let Some(f) = &s.failure {
                panic!("after {after}: the producer failed: {f}");
            }
            if s.acked.len() > count {
                return s.acked.len();
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "after {after}: no acknowledgement for {PROGRESS_TIMEOUT:?}"
            );
            s = progress
                .wait_timeout(s, deadline - now)
                .expect("steady state")
                .0;
        }
    }

    /// Stops the producer and returns every acknowledged record.
    pub fn stop(self) -> Vec<Acked> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the producer thread");
        let mut s = self.state.0.lock().expect("steady state");
        if let Some(f) = &s.failure {
            panic!("the producer failed: {f}");
        }
        std::mem::take(&mut s.acked)
    }
}
