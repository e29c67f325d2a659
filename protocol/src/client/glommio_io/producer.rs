//! Async producer on glommio: `send(..).await` queues into the [`ProducerCore`]; a local task
//! (spawned on the current executor) drives the core and the connections.
//!
//! Backpressure: when the buffer is full, `send` parks on [`Progress`] — woken by the driver
//! whenever deliveries complete — instead of polling, up to `max_block_ms`. No `RefCell` borrow is
//! ever held across an `.await`.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use glommio::channels::local_channel::LocalSender;
use glommio::Task;

use crate::client::blocking::DeliveryFuture;
use crate::client::deliveries::Deliveries;
use crate::client::net::ClientCore;
use crate::client::oneshot;
use crate::client::producer::{ProducerConfig, ProducerCore, ProducerStats, Queueable, SendError};
use crate::client::{ClientError, ProducerRecord, ProducerRecords, RecordMetadata};

use super::net::{now_ms, AsyncNet, Event};

mod txn;

type Delivery = Result<RecordMetadata, ClientError>;

/// Wakes tasks waiting for deliveries to make progress (single-threaded).
#[derive(Default)]
struct Progress {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

impl Progress {
    fn notify(&self) {
        self.generation.set(self.generation.get() + 1);
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves at the next `notify` after this call.
    async fn changed(&self) {
        let start = self.generation.get();
        poll_fn(|cx| {
            if self.generation.get() != start {
                Poll::Ready(())
            } else {
                self.waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }
}

/// Where a record's result goes: the future `send` returned, or `send_with`'s callback.
enum Slot {
    Future(oneshot::Sender<Delivery>),
    Callback(Box<dyn FnOnce(Delivery)>),
}

impl Slot {
    fn fill(self, result: Delivery) {
        match self {
            Self::Future(tx) => tx.send(result),
            Self::Callback(f) => f(result),
        }
    }
}

struct State {
    core: ProducerCore,
    pending: Deliveries<Slot>,
    shutdown: bool,
    send_waits: u64,
}

struct Inner {
    state: RefCell<State>,
    /// Deliveries (buffer room, idleness).
    progress: Progress,
    /// Every turn of the driver while transactional: a transaction call's outcome comes from an
    /// answer or from the driver's own poll (a transaction that sent nothing ends at the
    /// client). Apart from `progress`, so a sender waiting for buffer room is not woken by the
    /// driver's turns — its wake-up of the driver would make another.
    txn_progress: Progress,
}

pub struct Producer {
    inner: Rc<Inner>,
    wake: Rc<LocalSender<Event>>,
    driver: Option<Task<()>>,
    max_block_ms: u64,
}

/// The reports the core has, matched with their slots. The caller fills them after letting go
/// of the state: a callback may call `send` again.
fn take_deliveries(state: &mut State) -> Vec<(Slot, Delivery)> {
    let reports = state.core.take_reports();
    reports
        .into_iter()
        .filter_map(|r| state.pending.remove(r.id).map(|slot| (slot, r.result)))
        .collect()
}

/// Fills the slots (no borrow of the state held) and wakes waiting senders if any were.
fn fill(inner: &Inner, delivered: Vec<(Slot, Delivery)>) {
    if delivered.is_empty() {
        return;
    }
    for (slot, result) in delivered {
        slot.fill(result);
    }
    inner.progress.notify();
}

impl Producer {
    /// Starts a producer; must be called inside a glommio executor (the driver task runs there).
    pub fn new(bootstrap: &[&str], config: ProducerConfig) -> Result<Self, ClientError> {
        let max_block_ms = config.max_block_ms;
        let net = AsyncNet::new(config.frame_limits, config.request_timeout_ms);
        let seed = now_ms() ^ u64::from(std::process::id());
        let core = ProducerCore::new(
            config,
            bootstrap.iter().map(|s| (*s).to_owned()).collect(),
            seed,
        )?;
        let inner = Rc::new(Inner {
            state: RefCell::new(State {
                core,
                pending: Deliveries::default(),
                shutdown: false,
                send_waits: 0,
            }),
            progress: Progress::default(),
            txn_progress: Progress::default(),
        });
        let wake = net.waker();
        let driver = glommio::spawn_local(drive(inner.clone(), net));
        Ok(Self {
            inner,
            wake,
            driver: Some(driver),
            max_block_ms,
        })
    }

    fn wake(&self) {
        // A full channel already holds a wake-up; dropping this one loses nothing.
        let _ = self.wake.try_send(Event::Wake);
    }

    /// Queues a record, waiting up to `max_block_ms` for buffer room.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, ClientError> {
        let (tx, rx) = oneshot::channel();
        self.queue(record, Slot::Future(tx)).await?;
        Ok(DeliveryFuture::from_receiver(rx))
    }

    /// [`Self::send`] with the result handed to `on_delivery` (on this executor, from the
    /// producer's driver task) instead of a future: no task, channel or lock per record, as
    /// Kafka's `send(record, callback)`. It may call `send` again. If the producer is closed
    /// first, it gets [`ClientError::Closed`].
    pub async fn send_with(
        &self,
        record: ProducerRecord,
        on_delivery: impl FnOnce(Delivery) + 'static,
    ) -> Result<(), ClientError> {
        self.queue(record, Slot::Callback(Box::new(on_delivery)))
            .await
    }

    /// [`Self::send_with`] for a unit of records ([`ProducerRecords`]): one callback for them
    /// all, with the first record's offset. Units spare the producer its per-record work
    /// (partitioning, buffer accounting, a slot and a report per record); spool-loadgen sends
    /// this way by default.
    pub async fn send_records_with(
        &self,
        unit: ProducerRecords,
        on_delivery: impl FnOnce(Delivery) + 'static,
    ) -> Result<(), ClientError> {
        self.queue(unit, Slot::Callback(Box::new(on_delivery)))
            .await
    }

    async fn queue<T: Queueable>(&self, record: T, slot: Slot) -> Result<(), ClientError> {
        // The bound starts at the first wait: a record that fits at once reads no clock here.
        let mut deadline = None;
        let mut record = record;
        loop {
            {
                let mut state = self.inner.state.borrow_mut();
                match record.offer(&mut state.core, now_ms()) {
                    Ok(id) => {
                        state.pending.insert(id, slot);
                        // Once per batch, not per record (`take_drive_needed`).
                        let wake = state.core.take_drive_needed();
                        drop(state);
                        if wake {
                            self.wake();
                        }
                        return Ok(());
                    }
                    Err(SendError::Rejected(e)) => return Err(e),
                    Err(SendError::BufferFull(r)) => {
                        record = *r;
                        state.send_waits += 1;
                    }
                }
            }
            self.wake();
            let now = Instant::now();
            let deadline =
                *deadline.get_or_insert_with(|| now + Duration::from_millis(self.max_block_ms));
            if now >= deadline {
                let buffer_bytes = self.inner.state.borrow().core.config().buffer_bytes;
                return Err(ClientError::BufferFull { buffer_bytes });
            }
            futures_lite::future::or(
                self.inner.progress.changed(),
                glommio::timer::sleep(deadline - now),
            )
            .await;
        }
    }

    /// Sends everything queued now and waits until every record has its result.
    pub async fn flush(&self, timeout_ms: u64) -> Result<(), ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        self.inner.state.borrow_mut().core.flush();
        self.wake();
        loop {
            {
                let state = self.inner.state.borrow();
                if state.core.is_idle() && state.pending.is_empty() {
                    return Ok(());
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: "flush".into(),
                    timeout_ms,
                });
            }
            futures_lite::future::or(
                self.inner.progress.changed(),
                glommio::timer::sleep(deadline - now),
            )
            .await;
        }
    }

    pub fn buffered_bytes(&self) -> usize {
        self.inner.state.borrow().core.buffered_bytes()
    }

    pub fn send_waits(&self) -> u64 {
        self.inner.state.borrow().send_waits
    }

    pub fn stats(&self) -> ProducerStats {
        self.inner.state.borrow().core.stats()
    }

    /// Flushes (up to `timeout_ms`), then stops the driver. Unfinished records complete with
    /// [`ClientError::Closed`].
    pub async fn close(mut self, timeout_ms: u64) -> Result<(), ClientError> {
        let flushed = self.flush(timeout_ms).await;
        {
            let mut state = self.inner.state.borrow_mut();
            state.core.close();
            state.shutdown = true;
        }
        self.wake();
        if let Some(d) = self.driver.take() {
            d.await;
        }
        let unfinished = self.inner.state.borrow_mut().pending.drain();
        for slot in unfinished {
            slot.fill(Err(ClientError::Closed));
        }
        flushed
    }
}

async fn drive(inner: Rc<Inner>, mut net: AsyncNet) {
    loop {
        let (actions, wait) = {
            let mut state = inner.state.borrow_mut();
            if state.shutdown {
                return;
            }
            let now = now_ms();
            let actions = state.core.poll_actions(now);
            if state.core.transaction_phase().is_some() {
                inner.txn_progress.notify();
            }
            let delivered = take_deliveries(&mut state);
            let wait = crate::client::blocking::wait_until_ms(
                state.core.next_wakeup_ms(now),
                Duration::from_secs(1),
            );
            drop(state);
            fill(&inner, delivered);
            (actions, wait)
        };
        let failed = if actions.is_empty() {
            Vec::new()
        } else {
            net.execute(actions).await
        };
        if !failed.is_empty() {
            let mut state = inner.state.borrow_mut();
            for addr in failed {
                state.core.on_disconnect(&addr, now_ms());
            }
            continue;
        }
        let Some(event) = net.recv(wait).await else {
            continue;
        };
        let delivered = {
            let mut state = inner.state.borrow_mut();
            net.dispatch(event, &mut state.core, now_ms());
            take_deliveries(&mut state)
        };
        // Senders waiting for room hear of deliveries only; transaction calls hear of every
        // turn (above, after the poll that follows this dispatch). Notified for any event of a
        // transactional producer, its own wake-up included, a sender with no room and this
        // driver woke each other without end, the executor never idled, and glommio read the
        // socket only at its preemption timer, about every 100 ms (a transaction larger than
        // the buffer ran at a fifth of its speed; tests/tests/txn_over_buffer.rs).
        fill(&inner, delivered);
    }
}
