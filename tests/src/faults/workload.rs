//! The fault runs' workload: producers and group consumers on their own threads, each recording
//! what it saw into the run's shared [`History`] until the run's stop flag is set.
//!
//! - [`spool_producer`]: spool's own client (native port), keyed records, a bounded window of
//!   deliveries outstanding;
//! - [`rdkafka_producer`]: librdkafka through the `rdkafka` crate (Kafka port), the same records;
//! - [`group_consumer`]: spool's group consumer, subscribed to the topic, committing
//!   synchronously after every poll that returned records; the offsets it records as committed
//!   are the ones the coordinator acknowledged (`RebalanceListener::on_commit`).
//!
//! Idempotent producers use acks=all; acks=1 producers send each record once (no retries), since
//! without idempotence a retry may legitimately duplicate and the checker counts duplicates.
//! Every producer paces itself to `rate_per_s`: the pace shapes the load, it synchronizes
//! nothing. A client that cannot be built records nothing and reports why (the run then fails
//! on its own figures rather than hanging).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use rdkafka::ClientContext;
use spool_protocol::client::blocking::{Consumer, DeliveryFuture, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset};
use spool_protocol::client::group::{CommitKind, RebalanceListener};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ClientError, ProducerRecord, RecordMetadata, TopicPartition};

use super::history::{value_of, Commit, History, Outcome, Read, Write, WriteAcks};

/// Keys per producer: records of one key go to one partition, in order.
const KEYS_PER_PRODUCER: u64 = 16;
/// Deliveries one producer leaves outstanding before it waits for the oldest.
const WINDOW: usize = 64;
/// A record not acknowledged this long after its send is given up (recorded as not acked).
pub const DELIVERY_TIMEOUT_MS: u64 = 30_000;
/// How long the producers may take to hear about what they sent once the run stops.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(DELIVERY_TIMEOUT_MS + 5_000);

/// What every workload thread shares: the history, the run's clock and its stop flag.
#[derive(Clone)]
pub struct Shared {
    pub history: Arc<Mutex<History>>,
    pub started: Instant,
    pub stop: Arc<AtomicBool>,
    /// The consumers stop on this one: after the producers, once the group has caught up
    /// with the healed cluster (or could not).
    pub stop_consumers: Arc<AtomicBool>,
    /// The consumers' failed polls and commits, by error (they keep going; the run's JSON
    /// shows what they met).
    pub consumer_errors: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Shared {
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn consumers_stopped(&self) -> bool {
        self.stop_consumers.load(Ordering::SeqCst)
    }

    fn count_consumer_error(&self, consumer: u32, error: String) {
        if let Ok(mut e) = self.consumer_errors.lock() {
            *e.entry(format!("consumer {consumer}: {error}"))
                .or_default() += 1;
        }
    }

    fn record_write(&self, w: Write) {
        if let Ok(mut h) = self.history.lock() {
            h.writes.push(w);
        }
    }
}

/// One producer's settings.
#[derive(Debug, Clone)]
pub struct ProducerSpec {
    pub id: u32,
    pub topic: String,
    pub acks: WriteAcks,
    pub rate_per_s: u64,
    /// Every broker's address for this client's protocol (native or Kafka port).
    pub bootstrap: Vec<String>,
}

fn key_of(spec: &ProducerSpec, seq: u64) -> String {
    format!("k{}-{}", spec.id, seq % KEYS_PER_PRODUCER)
}

/// Paces `seq`: the instant it is due at `rate_per_s` from `start`.
fn due(start: Instant, rate_per_s: u64, seq: u64) -> Instant {
    start + Duration::from_micros(seq * 1_000_000 / rate_per_s.max(1))
}

/// spool's producer (module docs).
pub fn spool_producer(spec: ProducerSpec, shared: Shared) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let idempotent = spec.acks == WriteAcks::All;
        let config = ProducerConfig {
            client_id: format!("faults-spool-{}", spec.id),
            acks: if idempotent { Acks::All } else { Acks::Leader },
            enable_idempotence: idempotent,
            retries: if idempotent { u32::MAX } else { 0 },
            linger_ms: 2,
            request_timeout_ms: 5_000,
            delivery_timeout_ms: DELIVERY_TIMEOUT_MS,
            max_block_ms: 5_000,
            ..ProducerConfig::default()
        };
        let bootstrap: Vec<&str> = spec.bootstrap.iter().map(String::as_str).collect();
        let producer =
            Producer::new(&bootstrap, config).map_err(|e| format!("spool producer: {e}"))?;
        let mut pending: std::collections::VecDeque<(u64, DeliveryFuture)> = Default::default();
        let start = Instant::now();
        let mut seq = 0u64;
        let finish = |seq: u64, outcome: Outcome| {
            shared.record_write(Write {
                producer: spec.id,
                seq,
                value: value_of(spec.id, seq),
                acks: spec.acks,
                outcome,
                done_ms: shared.now_ms(),
            });
        };
        let settle = |d: Result<RecordMetadata, ClientError>| match d {
            Ok(m) => Outcome::Acked {
                tp: (m.topic.to_string(), m.partition),
                offset: m.offset,
            },
            Err(e) => Outcome::NotAcked {
                error: e.to_string(),
            },
        };
        while !shared.stopped() {
            while pending.front().is_some_and(|(_, f)| f.is_ready()) {
                let (s, f) = pending.pop_front().expect("a front");
                finish(s, settle(f.wait()));
            }
            if pending.len() >= WINDOW {
                let (s, f) = pending.pop_front().expect("a full window");
                finish(s, settle(f.wait()));
                continue;
            }
            let next_due = due(start, spec.rate_per_s, seq);
            if Instant::now() < next_due {
                std::thread::sleep(Duration::from_millis(1).min(next_due - Instant::now()));
                continue;
            }
            let record = ProducerRecord {
                topic: spec.topic.clone(),
                partition: None,
                key: Some(Bytes::from(key_of(&spec, seq))),
                value: Some(Bytes::from(value_of(spec.id, seq))),
                timestamp_ms: None,
                headers: Vec::new(),
            };
            match producer.send(record) {
                Ok(f) => pending.push_back((seq, f)),
                Err(e) => finish(
                    seq,
                    Outcome::NotAcked {
                        error: format!("send: {e}"),
                    },
                ),
            }
            seq += 1;
        }
        // Every delivery resolves within the delivery timeout: hear all of them.
        let _ = producer.flush(DRAIN_TIMEOUT.as_millis() as u64);
        for (s, f) in pending {
            finish(s, settle(f.wait()));
        }
        Ok(())
    })
}

/// librdkafka's delivery reports: (seq, outcome).
#[derive(Default)]
struct Reports(Mutex<Vec<(u64, Outcome, Instant)>>);

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let outcome = match result {
            Ok(m) => Outcome::Acked {
                tp: (m.topic().to_owned(), m.partition()),
                offset: m.offset(),
            },
            Err((e, _)) => Outcome::NotAcked {
                error: e.to_string(),
            },
        };
        if let Ok(mut r) = self.0.lock() {
            r.push((seq as u64, outcome, Instant::now()));
        }
    }
}

/// librdkafka's producer (module docs).
pub fn rdkafka_producer(spec: ProducerSpec, shared: Shared) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let idempotent = spec.acks == WriteAcks::All;
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", spec.bootstrap.join(","))
            .set("client.id", format!("faults-rdkafka-{}", spec.id))
            .set("acks", if idempotent { "all" } else { "1" })
            .set(
                "enable.idempotence",
                if idempotent { "true" } else { "false" },
            )
            .set("linger.ms", "2")
            .set("message.timeout.ms", DELIVERY_TIMEOUT_MS.to_string())
            .set("request.timeout.ms", "5000")
            .set("topic.metadata.refresh.interval.ms", "1000");
        if !idempotent {
            config.set("message.send.max.retries", "0");
        } else {
            // Its idempotence decisions (producer ids, epoch bumps, sequence resets, retries with
            // their persisted status) and each batch's outcome (`msg`: the error and the actions
            // librdkafka took on it) go to clients.log: what a duplicate's explanation needs.
            config
                .set("debug", "eos,msg")
                .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
        }
        let producer: BaseProducer<Reports> = config
            .create_with_context(Reports::default())
            .map_err(|e| format!("rdkafka producer: {e}"))?;
        let start = Instant::now();
        let mut seq = 0u64;
        let harvest = |producer: &BaseProducer<Reports>| {
            let reports: Vec<(u64, Outcome, Instant)> = producer
                .context()
                .0
                .lock()
                .map(|mut r| std::mem::take(&mut *r))
                .unwrap_or_default();
            for (s, outcome, at) in reports {
                shared.record_write(Write {
                    producer: spec.id,
                    seq: s,
                    value: value_of(spec.id, s),
                    acks: spec.acks,
                    outcome,
                    done_ms: at.saturating_duration_since(shared.started).as_millis() as u64,
                });
            }
        };
        while !shared.stopped() {
            producer.poll(Duration::from_millis(1));
            harvest(&producer);
            let next_due = due(start, spec.rate_per_s, seq);
            if Instant::now() < next_due {
                continue;
            }
            let (key, value) = (key_of(&spec, seq), value_of(spec.id, seq));
            let record = BaseRecord::with_opaque_to(&spec.topic, seq as usize)
                .key(&key)
                .payload(&value);
            match producer.send(record) {
                Ok(()) => seq += 1,
                // A full local queue: poll (above) and send this one again.
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::QueueFull,
                    ),
                    _,
                )) => {}
                Err((e, _)) => {
                    shared.record_write(Write {
                        producer: spec.id,
                        seq,
                        value,
                        acks: spec.acks,
                        outcome: Outcome::NotAcked {
                            error: format!("send: {e}"),
                        },
                        done_ms: shared.now_ms(),
                    });
                    seq += 1;
                }
            }
        }
        // Every message gets its report within message.timeout.ms.
        let _ = producer.flush(DRAIN_TIMEOUT);
        harvest(&producer);
        Ok(())
    })
}

/// Records the coordinator's acknowledged commits of one member.
struct CommitRecorder {
    group: String,
    consumer: u32,
    shared: Shared,
}

impl RebalanceListener for CommitRecorder {
    fn on_commit(
        &mut self,
        _kind: CommitKind,
        result: Result<&[(TopicPartition, i64)], &ClientError>,
    ) {
        let Ok(committed) = result else {
            return;
        };
        let at_ms = self.shared.now_ms();
        if let Ok(mut h) = self.shared.history.lock() {
            for (tp, offset) in committed {
                h.commits.push(Commit {
                    group: self.group.clone(),
                    consumer: self.consumer,
                    tp: (tp.topic.clone(), tp.partition),
                    offset: *offset,
                    at_ms,
                });
            }
        }
    }
}

/// spool's group consumer (module docs). `bootstrap` is every broker's native address.
pub fn group_consumer(
    id: u32,
    group: String,
    topic: String,
    bootstrap: Vec<String>,
    shared: Shared,
) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let config = ConsumerConfig {
            client_id: format!("faults-consumer-{id}"),
            group_id: Some(group.clone()),
            auto_commit: false,
            auto_offset_reset: OffsetReset::Earliest,
            fetch_max_wait_ms: 200,
            request_timeout_ms: 5_000,
            session_timeout_ms: 6_000,
            heartbeat_interval_ms: 1_000,
            ..ConsumerConfig::default()
        };
        let addrs: Vec<&str> = bootstrap.iter().map(String::as_str).collect();
        let mut consumer =
            Consumer::new(&addrs, config).map_err(|e| format!("consumer {id}: {e}"))?;
        let recorder = CommitRecorder {
            group,
            consumer: id,
            shared: shared.clone(),
        };
        consumer
            .subscribe(&[&topic], recorder)
            .map_err(|e| format!("consumer {id} subscribe: {e}"))?;
        while !shared.consumers_stopped() {
            let records = match consumer.poll(200) {
                Ok(r) => r,
                // Faults make polls fail (a coordinator gone, a leader moving): the member keeps
                // going, as an application would.
                Err(e) => {
                    shared.count_consumer_error(id, e.to_string());
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if records.is_empty() {
                continue;
            }
            let at_ms = shared.now_ms();
            if let Ok(mut h) = shared.history.lock() {
                for r in &records {
                    h.reads.push(Read {
                        consumer: id,
                        tp: (r.topic.clone(), r.partition),
                        offset: r.offset,
                        value: r
                            .value
                            .as_ref()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .unwrap_or_default(),
                        at_ms,
                    });
                }
            }
            if let Err(e) = consumer.commit_sync() {
                shared.count_consumer_error(id, format!("commit: {e}"));
            }
        }
        let _ = consumer.close();
        Ok(())
    })
}
