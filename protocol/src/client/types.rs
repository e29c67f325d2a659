//! Value types shared by the producer, consumer and admin: topic-partitions, records, delivery
//! metadata and the client's error type.

use bytes::Bytes;
use spool_storage::records::RecordHeader;
use thiserror::Error;

use crate::ErrorCode;

/// A map keyed by topic names (or partitions) that a producer looks up several times for every
/// record it sends: hashed with FxHash, not std's SipHash, which was 5 % of a producer's CPU
/// (BENCHMARKS.md, 2026-12-07). The keys are the application's own topics and its brokers'
/// metadata, so there is no stranger to aim hash collisions at the client.
pub(crate) type TopicMap<K, V> = std::collections::HashMap<K, V, fxhash::FxBuildHasher>;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A record to produce. `partition: None` lets the partitioner choose (murmur2 of the key, or
/// sticky for keyless records); `timestamp_ms: None` uses the producer's clock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducerRecord {
    pub topic: String,
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp_ms: Option<i64>,
    /// Kafka record headers (key, optional value), delivered to consumers as they are.
    pub headers: Vec<RecordHeader>,
}

impl ProducerRecord {
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            value: Some(value.into()),
            ..Self::default()
        }
    }

    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn with_header(mut self, key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        self.headers.push(RecordHeader {
            key: key.into(),
            value,
        });
        self
    }

    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// Bytes the record occupies in a batch, roughly (Kafka's estimate: fields plus varint
    /// overhead), for the buffer and batch budgets.
    pub fn estimated_bytes(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
            + 21
    }
}

/// Records queued and reported as one unit: they go to one partition, in this order, inside
/// one record batch, with one timestamp, and their one delivery report names the first record's
/// offset (the others follow it, one offset each). The batch-level counterpart of
/// [`ProducerRecord`], for producers that already hold many records at once (Apache Iggy's
/// `send_messages` takes its messages this way): the producer then does its per-record work —
/// partitioning, buffer accounting, a delivery slot and a report — once per unit.
///
/// `partition: None` picks one with the sticky partitioner for the whole unit: keys are kept
/// on the records but do not choose their partition (send keyed records one by one, or name
/// the partition, to place them by key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducerRecords {
    pub topic: String,
    pub partition: Option<i32>,
    pub timestamp_ms: Option<i64>,
    /// (key, value) of each record.
    pub records: Vec<(Option<Bytes>, Option<Bytes>)>,
}

impl ProducerRecords {
    pub fn new(topic: impl Into<String>) -> Self {
        Self {
            topic: topic.into(),
            ..Self::default()
        }
    }

    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Appends a keyless record.
    pub fn push(&mut self, value: impl Into<Bytes>) {
        self.records.push((None, Some(value.into())));
    }

    /// Bytes the records occupy in a batch, as [`ProducerRecord::estimated_bytes`] counts each.
    pub fn estimated_bytes(&self) -> usize {
        self.records
            .iter()
            .map(|(k, v)| k.as_ref().map_or(0, Bytes::len) + v.as_ref().map_or(0, Bytes::len) + 21)
            .sum()
    }
}

/// Where an acknowledged record landed. `offset` is -1 with `acks = 0` (nobody said).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Shared by every record of the batch (one allocation per batch, not one per record).
    pub topic: std::sync::Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
}

/// A record read by the consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

/// Why a client operation failed. Cloneable so one failed batch can fail each of its records.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// The broker answered with an error that is not retriable, or retries ran out.
    #[error("{context}: {code}")]
    Broker { code: ErrorCode, context: String },
    /// The operation did not finish within its bound.
    #[error("{what} timed out after {timeout_ms} ms")]
    Timeout { what: String, timeout_ms: u64 },
    /// The producer's buffer is full (`send` waits for room; `try_send` returns this).
    #[error("producer buffer full ({buffer_bytes} bytes)")]
    BufferFull { buffer_bytes: usize },
    /// A record larger than a request or the whole buffer can hold.
    #[error("record of {record_bytes} bytes exceeds the limit of {max_bytes}")]
    RecordTooLarge {
        record_bytes: usize,
        max_bytes: usize,
    },
    /// A partition number outside the topic.
    #[error("{topic} has {partitions} partitions; partition {partition} does not exist")]
    InvalidPartition {
        topic: String,
        partition: i32,
        partitions: usize,
    },
    /// Partitions not assigned to this consumer.
    #[error("{0} is not assigned to this consumer")]
    NotAssigned(TopicPartition),
    /// Bytes from the broker that did not decode (a corrupt batch, a malformed frame).
    #[error("corrupt data from the broker: {0}")]
    Corrupt(String),
    /// Could not reach any broker, or the connection failed.
    #[error("connection: {0}")]
    Connection(String),
    /// Invalid configuration, reported at construction.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// A transactional producer asked for something its transaction's state does not allow
    /// (a send outside a transaction, a commit after a failed record: abort it).
    #[error("transaction: {0}")]
    Transaction(String),
    /// An argument the call cannot take (a unit of records with none in it).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl ClientError {
    pub fn broker(code: ErrorCode, context: impl Into<String>) -> Self {
        Self::Broker {
            code,
            context: context.into(),
        }
    }

    /// The protocol error code, when the broker sent one.
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            Self::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }
}
