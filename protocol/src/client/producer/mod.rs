//! The producer's sans-IO core: records in, produce requests out, delivery reports back.
//!
//! Flow: [`ProducerCore::send`] reserves the record's bytes in the bounded buffer (or returns it
//! with [`SendError::BufferFull`] so the caller can wait), picks a partition (explicit, murmur2 of
//! the key, or sticky) and appends it to the [`Accumulator`]. [`ProducerCore::poll_actions`] closes
//! ready batches and groups them by partition leader into Produce requests, at most
//! `max_in_flight_per_broker` (≤ 5) outstanding per broker, each at most `max_request_bytes`.
//! Responses complete records with partition and offset; retriable errors re-queue the batch with
//! exponential backoff (refreshing metadata first when the error says the leader moved), until
//! `retries` or `delivery_timeout_ms` runs out.
//!
//! Ordering ([`pipes`]): with idempotence (the default under `acks = all`, as in Kafka) each
//! batch carries producer id, epoch and sequence from InitProducerId, so the broker discards the
//! duplicate a retry may create and refuses a batch that would overtake an earlier one
//! (OUT_OF_ORDER_SEQUENCE_NUMBER, retried behind it); a partition then keeps up to
//! `max_in_flight_per_broker` batches in flight. Without idempotence a partition has one batch in
//! flight or awaiting retry at a time, so a retry can never overtake — or be overtaken by — a
//! later batch of the same partition, whatever the broker does.
//!
//! A batch is renumbered only when the broker said it did not write it (OUT_OF_ORDER_SEQUENCE_
//! NUMBER to a producer id the producer has since replaced): renumbering a batch whose outcome
//! is unknown would let a broker append it twice (librdkafka's epoch-bump duplicates, README
//! fault-harness item 14).
//!
//! Time: `now_ms` is wall-clock milliseconds since the Unix epoch (records without a timestamp get
//! it). The core never reads a clock.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tracing::warn;

mod config;
mod outcomes;
mod pipes;
mod plans;
mod send;
mod txn;

pub use config::{Acks, ProducerConfig};
pub use txn::TxnPhase;

use crate::client::accumulator::{Accumulator, AccumulatorConfig, ClosedBatch, RecordId};
use crate::client::metadata::MetadataCache;
use crate::client::net::{backoff_ms, earliest, Addr, ClientCore, InFlight, NetAction};
use crate::client::partitioner::StickyPartitioner;
use crate::client::{ClientError, ProducerRecord, RecordMetadata, TopicPartition};
use crate::codec::{self, encode_request, Response};
use crate::payload::PayloadBuilder;
use crate::wire::{
    InitProducerIdRequestT, PartitionProduceDataT, ProduceRequestT, RequestBodyT, ResponseBodyT,
    TopicProduceDataT,
};
use crate::ErrorCode;
use pipes::Pipes;
use plans::Plans;
pub(crate) use send::Queueable;
use send::Queued;

/// Why `send` did not take a record (or `send_records` a unit: `T = ProducerRecords`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError<T = ProducerRecord> {
    /// The buffer is full: here is the record back; try again once deliveries free room.
    BufferFull(Box<T>),
    /// The record can never be sent (too large, producer closed or fenced).
    Rejected(ClientError),
}

/// One record's outcome (or one unit's, [`ProducerCore::send_records`]: the first record's offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    pub id: RecordId,
    pub result: Result<RecordMetadata, ClientError>,
}

/// Counters, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStats {
    pub produce_requests: u64,
    pub batches_sent: u64,
    pub batch_retries: u64,
    pub metadata_requests: u64,
    pub records_delivered: u64,
    pub records_failed: u64,
}

#[derive(Debug)]
enum Pending {
    Metadata,
    InitProducerId,
    Produce(Vec<ClosedBatch>),
    /// A transactional producer's request to its coordinator ([`txn`]).
    Txn(txn::TxnPending),
}

#[derive(Debug)]
struct Waiting {
    id: RecordId,
    record: Queued,
    record_bytes: usize,
    enqueued_ms: u64,
}

#[derive(Debug)]
pub struct ProducerCore {
    config: ProducerConfig,
    metadata: MetadataCache,
    acc: Accumulator,
    sticky: StickyPartitioner,
    inflight: InFlight<Pending>,
    /// Records whose topic has no metadata yet (their bytes are reserved).
    waiting: VecDeque<Waiting>,
    /// Each partition's batches in flight and waiting to be sent again.
    pipes: Pipes,
    producer: Option<(i64, i16)>,
    pid_in_flight: bool,
    pid_attempts: u32,
    pid_retry_at_ms: u64,
    fatal: Option<ClientError>,
    sequences: HashMap<TopicPartition, i32>,
    reports: Vec<DeliveryReport>,
    next_id: RecordId,
    flush_requested: bool,
    closed: bool,
    /// See [`Self::take_drive_needed`].
    drive_needed: bool,
    stats: ProducerStats,
    /// Set for a transactional producer ([`txn`]).
    txn: Option<txn::TxnManager>,
}

impl ProducerCore {
    pub fn new(
        config: ProducerConfig,
        bootstrap: Vec<Addr>,
        seed: u64,
    ) -> Result<Self, ClientError> {
        config.validate()?;
        if bootstrap.is_empty() {
            return Err(ClientError::InvalidConfig("bootstrap list is empty".into()));
        }
        let acc = Accumulator::new(AccumulatorConfig {
            // A batch never outgrows a request.
            batch_bytes: config.batch_bytes.min(config.max_request_bytes),
            linger_ms: config.linger_ms,
            buffer_bytes: config.buffer_bytes,
            compression: config.compression,
            transactional: config.transactional_id.is_some(),
        });
        // Without idempotence nothing keeps a retry from overtaking a later batch but having none.
        let pipes = Pipes::new(if config.idempotent() {
            config.max_in_flight_per_broker
        } else {
            1
        });
        let txn = config
            .transactional_id
            .clone()
            .map(|id| txn::TxnManager::new(id, config.transaction_timeout_ms));
        Ok(Self {
            metadata: MetadataCache::new(
                bootstrap,
                config.retry_backoff_ms,
                config.metadata_max_age_ms,
            ),
            sticky: StickyPartitioner::new(config.batch_bytes, seed),
            acc,
            config,
            inflight: InFlight::default(),
            waiting: VecDeque::new(),
            pipes,
            producer: None,
            pid_in_flight: false,
            pid_attempts: 0,
            pid_retry_at_ms: 0,
            fatal: None,
            sequences: HashMap::new(),
            reports: Vec::new(),
            next_id: 0,
            flush_requested: false,
            closed: false,
            drive_needed: true,
            stats: ProducerStats::default(),
            txn,
        })
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    pub fn stats(&self) -> ProducerStats {
        self.stats
    }

    pub fn metadata(&self) -> &MetadataCache {
        &self.metadata
    }

    /// Bytes reserved by records not yet completed.
    pub fn buffered_bytes(&self) -> usize {
        self.acc.reserved_bytes()
    }

    /// Nothing queued, in flight or awaiting retry: every record sent has its report.
    pub fn is_idle(&self) -> bool {
        self.acc.reserved_bytes() == 0 && self.waiting.is_empty()
    }

    /// Sends every queued batch without waiting for `linger_ms`, until the buffer drains.
    pub fn flush(&mut self) {
        self.flush_requested = true;
    }

    /// Refuses further records; queued ones are still sent (call `flush`, then drive to idle).
    pub fn close(&mut self) {
        self.closed = true;
        self.flush_requested = true;
    }

    /// Takes the delivery reports produced so far.
    pub fn take_reports(&mut self) -> Vec<DeliveryReport> {
        std::mem::take(&mut self.reports)
    }

    /// Whether anything since the last call needs the driver to run before the time
    /// [`ClientCore::next_wakeup_ms`] last gave it: a batch opened, filled or made ready by a
    /// full buffer, a record waiting for metadata, a record failed. A `send` that only adds a
    /// record to an open batch needs none, so a driver runs once per batch, not once per
    /// record. Clears the flag. The first call after `new` says yes.
    pub fn take_drive_needed(&mut self) -> bool {
        std::mem::take(&mut self.drive_needed)
    }

    /// How long a record waits for its topic's metadata: Kafka's producer blocks `send` at most
    /// `max.block.ms` for it, and never longer than the record may take in all.
    fn metadata_wait_ms(&self) -> u64 {
        self.config
            .max_block_ms
            .min(self.config.delivery_timeout_ms)
    }

    fn expire(&mut self, now_ms: u64) {
        let wait_ms = self.metadata_wait_ms();
        while self
            .waiting
            .front()
            .is_some_and(|w| now_ms >= w.enqueued_ms + wait_ms)
        {
            if let Some(w) = self.waiting.pop_front() {
                self.acc.release(w.record_bytes);
                let topic = w.record.topic();
                // The broker's last word on the topic names the cause (it does not exist, or
                // may not be written); without one, nothing answered in time.
                let e = match self.metadata.topic_error(topic) {
                    Some(code) => ClientError::broker(
                        code,
                        format!("topic {topic} not present in metadata after {wait_ms} ms"),
                    ),
                    None => ClientError::Timeout {
                        what: format!("metadata for topic {topic}"),
                        timeout_ms: wait_ms,
                    },
                };
                self.fail_one(w.id, w.record.records(), e);
            }
        }
        let timeout_ms = self.config.delivery_timeout_ms;
        let timeout = |what: String| ClientError::Timeout { what, timeout_ms };
        for (tp, records, reserved) in self.acc.expire(now_ms.saturating_sub(timeout_ms)) {
            self.fail_records(&records, reserved, &timeout(format!("delivery to {tp}")));
        }
        // Strictly older than the timeout, as `created_ms + timeout_ms <= now_ms` was.
        let expired = match now_ms.checked_sub(timeout_ms) {
            Some(cut) => self.pipes.take_expired(cut + 1),
            None => Vec::new(),
        };
        for b in expired {
            self.pipes.resolved_waiting(&b);
            let what = format!("delivery to {}", b.tp);
            self.fail_resolved(b, timeout(what));
        }
    }

    fn place_waiting(&mut self, now_ms: u64) {
        if self
            .waiting
            .iter()
            .all(|w| self.metadata.partition_count(w.record.topic()).is_none())
        {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting);
        for w in waiting {
            // In send order, so each topic's records keep theirs.
            if self.metadata.partition_count(w.record.topic()).is_some() {
                self.place(w.id, w.record, w.record_bytes, now_ms);
            } else {
                self.waiting.push_back(w);
            }
        }
    }

    fn request(
        &mut self,
        addr: &str,
        body: RequestBodyT,
        pending: Pending,
        now_ms: u64,
    ) -> Option<NetAction> {
        let correlation_id =
            self.inflight
                .start(addr, now_ms + self.config.request_timeout_ms, pending);
        let header = codec::request(correlation_id, Some(&self.config.client_id), body);
        match encode_request(&header, Vec::new(), &self.config.frame_limits) {
            Ok(frame) => Some(NetAction::Send {
                addr: addr.to_owned(),
                frame,
                expects_response: true,
            }),
            Err(e) => {
                // Only an oversize header can fail here; drop the request and let retries recover.
                warn!(error = %e, "could not encode request");
                let _ = self.inflight.complete(addr, correlation_id);
                None
            }
        }
    }

    fn init_producer_id(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if !self.config.idempotent()
            || self.txn.is_some()
            || self.producer.is_some()
            || self.pid_in_flight
            || now_ms < self.pid_retry_at_ms
        {
            return;
        }
        let Some(addr) = self.metadata.any_broker() else {
            return;
        };
        let mut body = InitProducerIdRequestT::default();
        body.transactional_id = None;
        body.producer_id = -1;
        body.producer_epoch = -1;
        let body = RequestBodyT::InitProducerIdRequest(Box::new(body));
        if let Some(a) = self.request(&addr, body, Pending::InitProducerId, now_ms) {
            self.pid_in_flight = true;
            self.pid_attempts += 1;
            out.push(a);
        }
    }

    fn next_sequence(&mut self, tp: &TopicPartition, records: usize) -> i32 {
        let seq = self.sequences.entry(tp.clone()).or_insert(0);
        let base = *seq;
        // Kafka's sequences wrap from i32::MAX to 0.
        *seq = ((i64::from(*seq) + records as i64) % (i64::from(i32::MAX) + 1)) as i32;
        base
    }

    /// Closes ready batches and groups them into produce requests per leader: resends first
    /// (they are older than anything still queued), then new batches, round after round while
    /// partitions have ready batches and their pipelines room.
    fn drain(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        let mut plans = Plans::new(
            self.config.max_in_flight_per_broker,
            self.config.max_request_bytes,
        );
        self.plan_resends(now_ms, &mut plans);
        let flush = self.flush_requested;
        let producer = match self.producer {
            Some(p) if self.config.idempotent() => Some(p),
            _ => None,
        };
        // A batch is at most batch_bytes plus one record, itself at most max_request_bytes.
        let batch_bytes_max = self.config.batch_bytes.min(self.config.max_request_bytes);
        loop {
            let mut progressed = false;
            for tp in self.acc.ready_partitions(now_ms, flush) {
                // A transaction's partition only once its coordinator added it.
                if self.txn.as_ref().is_some_and(|t| !t.may_send(&tp)) {
                    continue;
                }
                let Some((leader, addr)) = self.metadata.leader(&tp.topic, tp.partition) else {
                    self.metadata.request_refresh();
                    continue;
                };
                if !self.pipes.may_send_new(&tp, leader, producer) {
                    continue;
                }
                let in_flight = self.inflight.count_to(&addr);
                let Some(slot) = plans.slot(&addr, &tp, batch_bytes_max, in_flight) else {
                    continue;
                };
                let stamp = producer.map(|(pid, epoch)| {
                    let records = self.acc.first_batch_records(&tp);
                    (pid, epoch, self.next_sequence(&tp, records))
                });
                match self.acc.close_first(&tp, stamp) {
                    Some(Ok(mut batch)) => {
                        self.pipes.number(&mut batch);
                        self.pipes.sent(&mut batch, leader);
                        plans.put(slot, batch);
                        progressed = true;
                    }
                    Some(Err(failed)) => {
                        let e = ClientError::Corrupt(format!(
                            "could not encode batch for {}: {}",
                            failed.tp, failed.error
                        ));
                        self.fail_records(&failed.records, failed.reserved_bytes, &e);
                        progressed = true;
                    }
                    None => {}
                }
            }
            if !progressed {
                break;
            }
        }
        if flush && !self.acc.has_open_batches() && self.waiting.is_empty() {
            self.flush_requested = self.closed;
        }
        for (addr, batches) in plans.into_requests() {
            self.send_produce(&addr, batches, now_ms, out);
        }
    }

    /// Plans the resends that are due: each partition's first waiting batch, once nothing of
    /// the partition is in flight, its backoff is over (or its leader moved, KIP-951) and the
    /// metadata is fresher than the error that sent it back.
    fn plan_resends(&mut self, now_ms: u64, plans: &mut Plans) {
        let version = self.metadata.version();
        let metadata = &self.metadata;
        let due: Vec<TopicPartition> = self
            .pipes
            .resendable()
            .filter(|b| {
                let moved = b.sent_to.is_some()
                    && metadata
                        .leader(&b.tp.topic, b.tp.partition)
                        .map(|(id, _)| id)
                        != b.sent_to;
                (b.retry_at_ms <= now_ms || moved)
                    && b.stale_metadata_version.is_none_or(|v| version > v)
            })
            .map(|b| b.tp.clone())
            .collect();
        for tp in due {
            if self.txn.as_ref().is_some_and(|t| !t.may_send(&tp)) {
                continue;
            }
            let Some((leader, addr)) = self.metadata.leader(&tp.topic, tp.partition) else {
                self.metadata.request_refresh();
                continue;
            };
            let Some(mut batch) = self.pipes.take_resend(&tp) else {
                continue;
            };
            let in_flight = self.inflight.count_to(&addr);
            let slot = plans.slot(&addr, &tp, batch.bytes.len(), in_flight);
            let producer = self.producer.filter(|_| self.config.idempotent());
            let Some(slot) = slot else {
                self.pipes.put_back(batch);
                continue;
            };
            if batch.restamp {
                // Not written under its old stamp (the broker said so): the current id's next
                // sequence, or wait for an id.
                let Some((pid, epoch)) = producer else {
                    self.pipes.put_back(batch);
                    continue;
                };
                let seq = self.next_sequence(&tp, batch.records.len());
                batch.restamp_with((pid, epoch, seq));
            }
            self.pipes.sent(&mut batch, leader);
            plans.put(slot, batch);
        }
    }

    fn send_produce(
        &mut self,
        addr: &str,
        mut batches: Vec<ClosedBatch>,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) {
        let mut payload = PayloadBuilder::new();
        let mut topics: BTreeMap<String, Vec<PartitionProduceDataT>> = BTreeMap::new();
        let mut overflow = None;
        for b in &mut batches {
            b.attempts += 1;
            match payload.push(b.bytes.clone()) {
                Ok(records) => {
                    topics
                        .entry(b.tp.topic.clone())
                        .or_default()
                        .push(PartitionProduceDataT {
                            index: b.tp.partition,
                            records,
                        })
                }
                // Cannot happen: requests stay under max_request_bytes, far below u32::MAX.
                Err(e) => overflow = Some(e),
            }
        }
        if let Some(e) = overflow {
            for b in batches {
                self.fail_batch(b, ClientError::Corrupt(e.to_string()));
            }
            return;
        }
        let mut body = ProduceRequestT::default();
        // The broker checks a transaction's first batch with its coordinator (KIP-890).
        body.transactional_id = self.config.transactional_id.clone();
        body.acks = self.config.acks.wire();
        body.timeout_ms = i32::try_from(self.config.request_timeout_ms).unwrap_or(i32::MAX);
        body.topics = Some(
            topics
                .into_iter()
                .map(|(name, partitions)| TopicProduceDataT {
                    name,
                    partitions: Some(partitions),
                })
                .collect(),
        );
        let body = RequestBodyT::ProduceRequest(Box::new(body));
        self.stats.produce_requests += 1;
        self.stats.batches_sent += batches.len() as u64;
        let expects_response = self.config.acks != Acks::None;
        if !expects_response {
            let header = codec::request(0, Some(&self.config.client_id), body);
            match encode_request(&header, payload.finish(), &self.config.frame_limits) {
                Ok(frame) => {
                    out.push(NetAction::Send {
                        addr: addr.to_owned(),
                        frame,
                        expects_response: false,
                    });
                    for b in batches {
                        self.complete_batch(b, -1, -1);
                    }
                }
                Err(e) => {
                    for b in batches {
                        self.fail_batch(b, ClientError::Corrupt(e.to_string()));
                    }
                }
            }
            return;
        }
        let deadline_ms = now_ms + self.config.request_timeout_ms;
        let correlation_id = self
            .inflight
            .start(addr, deadline_ms, Pending::Produce(Vec::new()));
        let header = codec::request(correlation_id, Some(&self.config.client_id), body);
        match encode_request(&header, payload.finish(), &self.config.frame_limits) {
            Ok(frame) => {
                if let Some(Pending::Produce(slot)) = self.inflight.context_mut(correlation_id) {
                    *slot = batches;
                }
                out.push(NetAction::Send {
                    addr: addr.to_owned(),
                    frame,
                    expects_response: true,
                });
            }
            Err(e) => {
                let _ = self.inflight.complete(addr, correlation_id);
                for b in batches {
                    self.fail_batch(b, ClientError::Corrupt(e.to_string()));
                }
            }
        }
    }

    fn lost(&mut self, pending: Pending, now_ms: u64) {
        match pending {
            Pending::Metadata => self.metadata.refresh_failed(),
            Pending::InitProducerId => {
                self.pid_in_flight = false;
                self.pid_retry_at_ms = now_ms
                    + backoff_ms(
                        self.pid_attempts,
                        self.config.retry_backoff_ms,
                        self.config.retry_backoff_max_ms,
                    );
            }
            Pending::Produce(batches) => {
                for b in batches {
                    self.batch_error(b, ErrorCode::NetworkException, now_ms);
                }
            }
            Pending::Txn(_) => self.txn_lost(now_ms),
        }
    }
}

impl ClientCore for ProducerCore {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let mut out = Vec::new();
        for addr in self.inflight.expired_addrs(now_ms) {
            warn!(%addr, "request timed out; closing the connection");
            out.push(NetAction::Close { addr: addr.clone() });
            self.on_disconnect(&addr, now_ms);
        }
        self.expire(now_ms);
        // A retry whose error said the leader is gone or moved keeps the metadata fresh (every
        // refresh backoff) while the metadata still names that leader, so it goes to the new
        // one as soon as one is elected.
        if self.pipes.waiting().any(|b| {
            b.stale_metadata_version.is_some()
                && b.sent_to.is_some()
                && self
                    .metadata
                    .leader(&b.tp.topic, b.tp.partition)
                    .map(|(id, _)| id)
                    == b.sent_to
        }) {
            self.metadata.request_refresh();
        }
        if self.metadata.refresh_due(now_ms) {
            if let Some(addr) = self.metadata.any_broker() {
                let req = self.metadata.begin_refresh(now_ms, false);
                self.stats.metadata_requests += 1;
                match self.request(
                    &addr,
                    RequestBodyT::MetadataRequest(Box::new(req)),
                    Pending::Metadata,
                    now_ms,
                ) {
                    Some(a) => out.push(a),
                    None => self.metadata.refresh_failed(),
                }
            }
        }
        self.place_waiting(now_ms);
        self.init_producer_id(now_ms, &mut out);
        self.txn_poll(now_ms, &mut out);
        if !self.config.idempotent() || self.producer.is_some() {
            self.drain(now_ms, &mut out);
        }
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        let Some(pending) = self.inflight.complete(addr, response.header.correlation_id) else {
            warn!(%addr, correlation_id = response.header.correlation_id, "response matches no request");
            return;
        };
        match pending {
            Pending::Metadata => match response.header.body {
                ResponseBodyT::MetadataResponse(m) => self.metadata.update(&m, now_ms),
                _ => self.metadata.refresh_failed(),
            },
            Pending::InitProducerId => {
                self.pid_in_flight = false;
                let ResponseBodyT::InitProducerIdResponse(r) = response.header.body else {
                    self.lost(Pending::InitProducerId, now_ms);
                    return;
                };
                let code = ErrorCode::from(r.error_code);
                if code.is_ok() {
                    self.producer = Some((r.producer_id, r.producer_epoch));
                    self.pid_attempts = 0;
                    self.sequences.clear();
                } else if code.is_retriable() {
                    self.lost(Pending::InitProducerId, now_ms);
                } else {
                    // Fatal (e.g. CLUSTER_AUTHORIZATION_FAILED): fail everything queued.
                    let e = ClientError::broker(code, "InitProducerId");
                    self.fatal = Some(e.clone());
                    let waiting: Vec<Waiting> = self.waiting.drain(..).collect();
                    for w in waiting {
                        self.acc.release(w.record_bytes);
                        self.fail_one(w.id, w.record.records(), e.clone());
                    }
                    for (_, records, reserved) in self.acc.expire(u64::MAX) {
                        self.fail_records(&records, reserved, &e);
                    }
                }
            }
            Pending::Produce(batches) => self.on_produce_response(batches, response, now_ms),
            Pending::Txn(p) => self.txn_response(p, response, now_ms),
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        let lost = self.inflight.drain_addr(addr);
        if !lost.is_empty() {
            self.metadata.request_refresh();
        }
        for p in lost {
            self.lost(p, now_ms);
        }
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let linger = if self.flush_requested && self.acc.has_open_batches() {
            Some(now_ms)
        } else {
            self.acc.next_linger_deadline_ms()
        };
        let retry = self.pipes.resendable().map(|b| b.retry_at_ms).min();
        let pid = if self.config.idempotent()
            && self.txn.is_none()
            && self.producer.is_none()
            && !self.pid_in_flight
        {
            Some(self.pid_retry_at_ms)
        } else {
            None
        };
        let delivery = earliest([
            self.waiting
                .front()
                .map(|w| w.enqueued_ms + self.metadata_wait_ms()),
            self.pipes
                .waiting()
                .map(|b| b.created_ms + self.config.delivery_timeout_ms)
                .min(),
        ]);
        // Only future times: work that is due now but blocked (no leader, no in-flight room) is
        // unblocked by an input (metadata, a response), which triggers a poll anyway.
        [
            linger,
            retry,
            pid,
            self.txn.as_ref().and_then(|t| t.next_wakeup_ms()),
            delivery,
            self.inflight.earliest_deadline_ms(),
            self.metadata.next_refresh_ms(),
        ]
        .into_iter()
        .flatten()
        .filter(|t| *t > now_ms)
        .min()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
