//! One loadgen producer task on a client executor: waits until the consumers are positioned,
//! then sends on its schedule (open loop with `--rate`, closed loop otherwise), stamping each
//! payload with (producer id, sequence, intended send time). Ahead of its schedule it sleeps at
//! least [`MIN_RATE_WAIT_NS`], then sends every record due: up to `--records-per-send` at a
//! time as one unit (`send_records_with`), or one by one (`send_with`) when that is 1 or the
//! records are keyed. Each delivery report runs a callback that records every record's
//! acknowledgement latency from its own intended send time ([`crate::delivered`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spool_protocol::client::glommio_io::Producer;
use spool_protocol::client::producer::ProducerConfig;
use spool_protocol::client::{ClientError, ProducerRecord, ProducerRecords};

use crate::cli::{Bound, Kind};
use crate::core_state::CoreState;
use crate::delivered::{Delivered, Intended};
use crate::keys::{KeyGen, Rng};
use crate::payload::{Filler, Header, PayloadBuilder};
use crate::rate::{share, Schedule};
use crate::shared::Shared;
use crate::stats::{record, Live};

/// Longest wait for outstanding deliveries after `close` returned.
const DELIVERY_WAIT_MS: u64 = 5_000;

/// Shortest sleep of a producer ahead of its schedule. Sleeping until the very next record was
/// due woke the executor once or twice per record at high rates (at 250,000 msg/s per producer,
/// one wake per 4 µs), and each wake costs glommio a timer armed and an `io_uring_enter`: at
/// 500,000 msg/s the load generator spent 1.9 CPU-s per GB against 0.84 at full speed, and its
/// own CPU queue showed in the latencies it measured. The records that fall due meanwhile go
/// together, each still charged from its own intended time, so a latency includes at most this
/// much of the load generator's own waiting.
const MIN_RATE_WAIT_NS: u64 = 100_000;

pub async fn run(
    id: usize,
    sh: Arc<Shared>,
    st: Rc<RefCell<CoreState>>,
    live: Arc<Live>,
) -> Result<(), String> {
    let s = &sh.settings;
    let o = &s.opts;
    let config = ProducerConfig {
        client_id: format!("loadgen-p{id}"),
        acks: s.acks,
        batch_bytes: o.batch_bytes,
        linger_ms: o.linger_ms,
        buffer_bytes: o.buffer_bytes,
        compression: s.compression,
        transactional_id: o
            .transactional
            .then(|| format!("loadgen-{:08x}-p{id}", sh.run_id)),
        ..ProducerConfig::default()
    };
    let producer =
        Producer::new(&s.brokers(), config).map_err(|e| format!("producer {id}: {e}"))?;
    let txn = Txn::start(&producer, o.transactional.then_some(o.txn_messages.max(1)))
        .await
        .map_err(|e| format!("producer {id}: {e}"))?;
    let consumers = if s.kind.consumes() { o.consumers } else { 0 };
    while sh.consumers_ready.load(Ordering::Acquire) < consumers {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    let start = sh.start();
    let measure_from = sh.measure_from();
    let (limit, deadline) = match s.bound {
        Bound::Messages(n) => (Some(share(n, o.producers, id)), None),
        Bound::Duration(d) => (None, Some(measure_from + d)),
    };
    let schedule = Schedule::new(o.rate, o.producers);
    let keygen = KeyGen::new(&o.keys);
    let mut rng = Rng::new(o.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut payloads = PayloadBuilder::new(o.message_bytes, o.seed.wrapping_add(id as u64));
    // Only e2e reads the header back (`payload` module docs).
    let filler =
        (s.kind != Kind::E2e).then(|| Filler::new(o.message_bytes, o.seed.wrapping_add(id as u64)));
    let outstanding = Rc::new(Cell::new(0u64));
    let ctx = Rc::new(Delivered {
        producer_id: id as u32,
        st: Rc::clone(&st),
        live: Arc::clone(&live),
        outstanding: Rc::clone(&outstanding),
        measure_from,
        start,
        schedule,
        message_bytes: o.message_bytes as u64,
        verify: o.verify,
    });
    // Let the driver task run between sends, about four times per batch.
    let yield_every = (o.batch_bytes / o.message_bytes / 4).max(1) as u64;
    // Records per send: a unit never spans more than a yield's worth (so never more than a
    // batch); keyed records go one by one, each key choosing its partition.
    let unit_max = match keygen {
        KeyGen::None => (o.records_per_send as u64).clamp(1, yield_every),
        _ => 1,
    };
    let mut seq = 0u64;
    let mut clock = SendClock::new(producer.send_waits());
    loop {
        let now = Instant::now();
        clock.refresh(now);
        if deadline.is_some_and(|d| now >= d) || limit.is_some_and(|n| seq >= n) {
            break;
        }
        let elapsed_ns = now.saturating_duration_since(start).as_nanos() as u64;
        let due = schedule.due_by(elapsed_ns).unwrap_or(seq + yield_every);
        if due <= seq {
            let next = schedule.intended_offset_ns(seq).unwrap_or(0);
            let wait_ns = next.saturating_sub(elapsed_ns).max(MIN_RATE_WAIT_NS);
            glommio::timer::sleep(Duration::from_nanos(wait_ns)).await;
            continue;
        }
        let due = limit.map_or(due, |n| due.min(n));
        while seq < due {
            // A unit ends where a transaction does, so each commits exactly its records.
            let n = unit_max.min(due - seq).min(txn.room(seq));
            let intended = match schedule {
                Schedule::Unlimited => Intended::At(clock.now()),
                Schedule::Fixed { .. } => Intended::Scheduled,
            };
            let mut value = |seq: u64| match &filler {
                Some(f) => f.value(seq),
                None => payloads.build(&Header {
                    run_id: sh.run_id,
                    producer_id: id as u32,
                    seq,
                    send_time_us: sh.epoch_us(ctx.intended_at(seq, intended)),
                }),
            };
            outstanding.set(outstanding.get() + n);
            let first = seq;
            let sent = if n == 1 {
                let mut rec = ProducerRecord::new(o.topic.clone(), value(seq));
                if let Some(k) = keygen.next_index(&mut rng) {
                    rec = rec.with_key(KeyGen::key_bytes(k));
                }
                let ctx = Rc::clone(&ctx);
                // A callback, not a task awaiting a future: nothing spawned or locked per
                // record, and one `Rc` (no atomic count) carries everything it shares.
                let on_delivery =
                    move |r: Result<_, ClientError>| ctx.report(first, 1, intended, r.map(drop));
                producer.send_with(rec, on_delivery).await
            } else {
                let mut unit = ProducerRecords::new(o.topic.clone());
                unit.records.reserve(n as usize);
                for s in seq..seq + n {
                    unit.push(value(s));
                }
                let ctx = Rc::clone(&ctx);
                let on_delivery =
                    move |r: Result<_, ClientError>| ctx.report(first, n, intended, r.map(drop));
                producer.send_records_with(unit, on_delivery).await
            };
            if let Err(e) = sent {
                // The callback was dropped unrun: the records were never queued.
                outstanding.set(outstanding.get() - n);
                let mut st = st.borrow_mut();
                st.totals.failed_sends += n;
                st.acks.failed_sends += n;
                st.error(format!("producer {id} send seq {seq}: {e}"));
            }
            clock.after_send(producer.send_waits());
            seq += n;
            if let Err(e) = txn.after_send(&producer, seq, n, measure_from, &st).await {
                st.borrow_mut()
                    .error(format!("producer {id} seq {seq}: {e}"));
            }
            if txn.committed_just_now() {
                clock.stale();
            }
            if seq / yield_every != (seq - n) / yield_every {
                clock.stale();
                futures_lite::future::yield_now().await;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
        }
    }
    if let Err(e) = txn.finish(&producer, measure_from, &st).await {
        st.borrow_mut()
            .error(format!("producer {id} last commit: {e}"));
    }
    let close_ms = sh.settings.drain_timeout.as_millis() as u64;
    if let Err(e) = producer.close(close_ms.max(1)).await {
        st.borrow_mut().error(format!("producer {id} close: {e}"));
    }
    let wait_until = Instant::now() + Duration::from_millis(DELIVERY_WAIT_MS);
    while outstanding.get() > 0 && Instant::now() < wait_until {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    if outstanding.get() > 0 {
        st.borrow_mut().error(format!(
            "producer {id}: {} deliveries never completed",
            outstanding.get()
        ));
    }
    Ok(())
}

/// Reads of the clock a closed-loop record's send time reuses (every [`SendClock::REUSE`]th
/// record reads it): a clock read per record was about 2 % of the load generator's samples.
/// A send that waited for buffer room, a yield or a commit makes the next record read it again,
/// so a reused time is never older than a few records' own enqueueing (microseconds).
struct SendClock {
    at: Instant,
    left: u32,
    waits: u64,
}

impl SendClock {
    const REUSE: u32 = 8;

    fn new(waits: u64) -> Self {
        Self {
            at: Instant::now(),
            left: 0,
            waits,
        }
    }

    /// A time just read elsewhere, good for the next records.
    fn refresh(&mut self, now: Instant) {
        self.at = now;
        self.left = Self::REUSE;
    }

    fn now(&mut self) -> Instant {
        if self.left == 0 {
            self.refresh(Instant::now());
        }
        self.left -= 1;
        self.at
    }

    /// After a send: if it waited (the producer's wait count moved), the time is stale.
    fn after_send(&mut self, waits: u64) {
        if waits != self.waits {
            self.waits = waits;
            self.stale();
        }
    }

    fn stale(&mut self) {
        self.left = 0;
    }
}

/// How long one commit may take.
const COMMIT_TIMEOUT_MS: u64 = 60_000;

/// `--transactional`: a transaction every `per_txn` records (None: not transactional).
struct Txn {
    per_txn: Option<u64>,
    /// Records sent since the last commit.
    open: Cell<u64>,
}

impl Txn {
    async fn start(producer: &Producer, per_txn: Option<u64>) -> Result<Self, String> {
        if per_txn.is_some() {
            producer
                .init_transactions(COMMIT_TIMEOUT_MS)
                .await
                .map_err(|e| format!("init_transactions: {e}"))?;
            producer
                .begin_transaction()
                .map_err(|e| format!("begin_transaction: {e}"))?;
        }
        Ok(Self {
            per_txn,
            open: Cell::new(0),
        })
    }

    /// Records that may still join the transaction open at record `seq` (unbounded when not
    /// transactional).
    fn room(&self, seq: u64) -> u64 {
        self.per_txn
            .map_or(u64::MAX, |per_txn| per_txn - seq % per_txn)
    }

    /// After each send of `sent` records (never past [`Self::room`]), `seq` the next record's:
    /// commits once the transaction holds `per_txn` records, then begins the next. A failed
    /// commit is aborted (its records then fail their sends).
    async fn after_send(
        &self,
        producer: &Producer,
        seq: u64,
        sent: u64,
        measure_from: Instant,
        st: &Rc<RefCell<CoreState>>,
    ) -> Result<(), String> {
        let Some(per_txn) = self.per_txn else {
            return Ok(());
        };
        self.open.set(self.open.get() + sent);
        if seq % per_txn != 0 {
            return Ok(());
        }
        self.commit(producer, measure_from, st).await?;
        producer
            .begin_transaction()
            .map_err(|e| format!("begin_transaction: {e}"))
    }

    /// Whether the last [`Self::after_send`] committed (and so waited).
    fn committed_just_now(&self) -> bool {
        self.per_txn.is_some() && self.open.get() == 0
    }

    /// Commits what the last transaction holds.
    async fn finish(
        &self,
        producer: &Producer,
        measure_from: Instant,
        st: &Rc<RefCell<CoreState>>,
    ) -> Result<(), String> {
        if self.per_txn.is_none() || self.open.get() == 0 {
            return Ok(());
        }
        self.commit(producer, measure_from, st).await
    }

    async fn commit(
        &self,
        producer: &Producer,
        measure_from: Instant,
        st: &Rc<RefCell<CoreState>>,
    ) -> Result<(), String> {
        self.open.set(0);
        let started = Instant::now();
        match producer.commit_transaction(COMMIT_TIMEOUT_MS).await {
            Ok(()) => {
                if started >= measure_from {
                    let us = started.elapsed().as_micros() as u64;
                    record(&mut st.borrow_mut().totals.latencies.commit_us, us);
                }
                Ok(())
            }
            Err(e) => {
                let aborted = producer.abort_transaction(COMMIT_TIMEOUT_MS).await;
                Err(format!("commit_transaction: {e} (abort: {aborted:?})"))
            }
        }
    }
}
