//! Blocking producer: the caller's thread queues records; a background thread ("spool-producer")
//! drives the [`ProducerCore`] and the broker connections and completes each record's
//! [`DeliveryFuture`].
//!
//! The core sits behind one mutex shared by `send` and the driver; the driver never holds it
//! across I/O. `send` waits on a condition variable while the buffer is full (up to
//! `max_block_ms`), and the driver signals it whenever deliveries free room — backpressure without
//! polling.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::deliveries::Deliveries;
use crate::client::net::ClientCore;
use crate::client::oneshot;
use crate::client::producer::{ProducerConfig, ProducerCore, ProducerStats, Queueable, SendError};
use crate::client::{ClientError, ProducerRecord, ProducerRecords, RecordMetadata};

use super::net::{BlockingNet, Event};

mod txn;

type Delivery = Result<RecordMetadata, ClientError>;

/// One record's delivery result: `wait()` blocks for it; it is also a `Future`.
pub struct DeliveryFuture(oneshot::Receiver<Delivery>);

impl DeliveryFuture {
    pub(crate) fn from_receiver(rx: oneshot::Receiver<Delivery>) -> Self {
        Self(rx)
    }

    pub fn wait(self) -> Delivery {
        self.0.wait().unwrap_or(Err(ClientError::Closed))
    }

    /// Whether the result is ready (`wait` will not block).
    pub fn is_ready(&self) -> bool {
        self.0.is_ready()
    }
}

impl Future for DeliveryFuture {
    type Output = Delivery;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Delivery> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(ClientError::Closed)))
    }
}

struct State {
    core: ProducerCore,
    pending: Deliveries<oneshot::Sender<Delivery>>,
    shutdown: bool,
    send_waits: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when deliveries complete (buffer room, idleness).
    progress: Condvar,
    /// Signalled after every turn of the driver while transactional: a transaction call's
    /// outcome comes from an answer or from the driver's own poll (a transaction that sent
    /// nothing ends at the client). Apart from `progress`, so a sender waiting for buffer room
    /// is not woken by the driver's turns — its wake-up of the driver would make another.
    txn_progress: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays coherent even if a holder panicked; keep going rather than cascade.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct Producer {
    shared: Arc<Shared>,
    wake: SyncSender<Event>,
    driver: Option<JoinHandle<()>>,
    max_block_ms: u64,
    delivery_timeout_ms: u64,
}

fn deliver(state: &mut State) -> bool {
    let reports = state.core.take_reports();
    let any = !reports.is_empty();
    for r in reports {
        if let Some(tx) = state.pending.remove(r.id) {
            tx.send(r.result);
        }
    }
    any
}

impl Producer {
    /// Starts a producer against `bootstrap` (`host:port` of one or more brokers).
    pub fn new(bootstrap: &[&str], config: ProducerConfig) -> Result<Self, ClientError> {
        let max_block_ms = config.max_block_ms;
        let delivery_timeout_ms = config.delivery_timeout_ms;
        let mut net = BlockingNet::new(config.frame_limits, config.request_timeout_ms);
        let seed = super::now_ms() ^ u64::from(std::process::id());
        let core = ProducerCore::new(
            config,
            bootstrap.iter().map(|s| (*s).to_owned()).collect(),
            seed,
        )?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                core,
                pending: Deliveries::default(),
                shutdown: false,
                send_waits: 0,
            }),
            progress: Condvar::new(),
            txn_progress: Condvar::new(),
        });
        let wake = net.waker();
        let driver_shared = shared.clone();
        let driver = std::thread::Builder::new()
            .name("spool-producer".into())
            .spawn(move || drive(&driver_shared, &mut net))
            .map_err(|e| {
                ClientError::Connection(format!("could not start the producer thread: {e}"))
            })?;
        Ok(Self {
            shared,
            wake,
            driver: Some(driver),
            max_block_ms,
            delivery_timeout_ms,
        })
    }

    fn wake(&self) {
        // A full channel already holds a wake-up; dropping this one loses nothing.
        let _ = self.wake.try_send(Event::Wake);
    }

    /// Queues a record, waiting up to `max_block_ms` while the buffer is full.
    pub fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, ClientError> {
        self.queue(record)
    }

    /// Queues a unit of records ([`ProducerRecords`]: one partition, one batch, one delivery
    /// with the first record's offset), waiting up to `max_block_ms` while the buffer is full.
    pub fn send_records(&self, unit: ProducerRecords) -> Result<DeliveryFuture, ClientError> {
        self.queue(unit)
    }

    fn queue<T: Queueable>(&self, record: T) -> Result<DeliveryFuture, ClientError> {
        let deadline = Instant::now() + Duration::from_millis(self.max_block_ms);
        let mut record = record;
        let mut state = self.shared.lock();
        loop {
            match record.offer(&mut state.core, super::now_ms()) {
                Ok(id) => {
                    let (tx, rx) = oneshot::channel();
                    state.pending.insert(id, tx);
                    let wake = state.core.take_drive_needed();
                    drop(state);
                    if wake {
                        self.wake();
                    }
                    return Ok(DeliveryFuture(rx));
                }
                Err(SendError::Rejected(e)) => return Err(e),
                Err(SendError::BufferFull(r)) => {
                    record = *r;
                    state.send_waits += 1;
                    self.wake();
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(ClientError::BufferFull {
                            buffer_bytes: state.core.config().buffer_bytes,
                        });
                    }
                    state = self
                        .shared
                        .progress
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }

    /// Queues a record without waiting: `Err(BufferFull)` when there is no room.
    pub fn try_send(&self, record: ProducerRecord) -> Result<DeliveryFuture, ClientError> {
        let mut state = self.shared.lock();
        match state.core.send(record, super::now_ms()) {
            Ok(id) => {
                let (tx, rx) = oneshot::channel();
                state.pending.insert(id, tx);
                let wake = state.core.take_drive_needed();
                drop(state);
                if wake {
                    self.wake();
                }
                Ok(DeliveryFuture(rx))
            }
            Err(SendError::Rejected(e)) => Err(e),
            Err(SendError::BufferFull(_)) => Err(ClientError::BufferFull {
                buffer_bytes: state.core.config().buffer_bytes,
            }),
        }
    }

    /// Sends everything queued now and waits until every record has its result, at most
    /// `timeout_ms`.
    pub fn flush(&self, timeout_ms: u64) -> Result<(), ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut state = self.shared.lock();
        state.core.flush();
        self.wake();
        while !(state.core.is_idle() && state.pending.is_empty()) {
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: "flush".into(),
                    timeout_ms,
                });
            }
            state = self
                .shared
                .progress
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(())
    }

    /// Bytes of records not yet completed.
    pub fn buffered_bytes(&self) -> usize {
        self.shared.lock().core.buffered_bytes()
    }

    /// How many times `send` has had to wait for buffer room.
    pub fn send_waits(&self) -> u64 {
        self.shared.lock().send_waits
    }

    pub fn stats(&self) -> ProducerStats {
        self.shared.lock().core.stats()
    }

    /// Flushes (up to `timeout_ms`), then stops the driver thread. Records still unfinished
    /// complete with [`ClientError::Closed`].
    pub fn close(mut self, timeout_ms: u64) -> Result<(), ClientError> {
        let flushed = self.flush(timeout_ms);
        self.stop();
        flushed
    }

    fn stop(&mut self) {
        {
            let mut state = self.shared.lock();
            state.core.close();
            state.shutdown = true;
        }
        self.wake();
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
        // Anything left: the senders drop here and their futures resolve to `Closed`.
        drop(self.shared.lock().pending.drain());
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.driver.is_some() {
            let _ = self.flush(self.delivery_timeout_ms);
            self.stop();
        }
    }
}

fn drive(shared: &Shared, net: &mut BlockingNet) {
    loop {
        let (actions, wait) = {
            let mut state = shared.lock();
            if state.shutdown {
                return;
            }
            let now = super::now_ms();
            let actions = state.core.poll_actions(now);
            if deliver(&mut state) {
                shared.progress.notify_all();
            }
            if state.core.transaction_phase().is_some() {
                shared.txn_progress.notify_all();
            }
            let wait = super::wait_until_ms(state.core.next_wakeup_ms(now), Duration::from_secs(1));
            (actions, wait)
        };
        let failed = if actions.is_empty() {
            Vec::new()
        } else {
            net.execute(actions)
        };
        if !failed.is_empty() {
            let mut state = shared.lock();
            for addr in failed {
                state.core.on_disconnect(&addr, super::now_ms());
            }
            continue;
        }
        let Some(first) = net.recv(wait) else {
            continue;
        };
        let mut state = shared.lock();
        net.dispatch(first, &mut state.core, super::now_ms());
        while let Some(ev) = net.try_recv() {
            net.dispatch(ev, &mut state.core, super::now_ms());
        }
        // Senders waiting for room hear of deliveries only; transaction calls hear of every
        // turn (above, after the poll that follows this dispatch). Notified for any event of a
        // transactional producer, as before, a sender with no room and this driver woke each
        // other without end (tests/tests/txn_over_buffer.rs).
        if deliver(&mut state) {
            shared.progress.notify_all();
        }
    }
}
