//! The producer's settings, with Kafka's names in the docs and units in the field names, and their
//! validation at construction.

use spool_storage::batch::Compression;

use crate::client::ClientError;
use crate::frame::FrameLimits;

/// Kafka's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Fire and forget: no response; offsets are reported as -1.
    None,
    /// The leader appended the batch.
    Leader,
    /// Every in-sync replica has the batch (spool's default, as Kafka's since 3.0).
    All,
}

impl Acks {
    pub fn wire(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Leader => 1,
            Self::All => -1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub client_id: String,
    pub acks: Acks,
    /// Kafka `batch.size`: a partition's batch closes at this many bytes. Default 64 KiB.
    pub batch_bytes: usize,
    /// Kafka `linger.ms`: a batch closes this long after its first record. Default 5.
    pub linger_ms: u64,
    /// Kafka `buffer.memory`: bytes of records not yet completed; `send` waits beyond it.
    pub buffer_bytes: usize,
    /// Kafka `max.request.size`: the largest produce request (and so the largest record).
    pub max_request_bytes: usize,
    pub compression: Compression,
    /// Produce requests outstanding per broker, 1 to 5 (Kafka's
    /// `max.in.flight.requests.per.connection`); with idempotence also the batches of one
    /// partition in flight at once (without it, one).
    pub max_in_flight_per_broker: usize,
    /// Sends after the first, per batch, for retriable errors.
    pub retries: u32,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// A request without a response after this long is abandoned and its connection closed.
    pub request_timeout_ms: u64,
    /// A record not acknowledged this long after `send` fails with a timeout.
    pub delivery_timeout_ms: u64,
    /// How long the blocking and async `send` wait for buffer room (Kafka `max.block.ms`).
    pub max_block_ms: u64,
    /// Producer id + sequence numbers so retries cannot duplicate. Only with `acks = All` (as in
    /// Kafka, it is silently off otherwise).
    pub enable_idempotence: bool,
    pub metadata_max_age_ms: u64,
    pub frame_limits: FrameLimits,
    /// Kafka's `transactional.id`: set, the producer is transactional (`super::txn`); it needs
    /// idempotence (acks = all).
    pub transactional_id: Option<String>,
    /// Kafka's `transaction.timeout.ms`: the coordinator aborts a transaction open longer.
    pub transaction_timeout_ms: u32,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            client_id: "spool-producer".into(),
            acks: Acks::All,
            batch_bytes: 64 * 1024,
            linger_ms: 5,
            buffer_bytes: 32 * 1024 * 1024,
            max_request_bytes: 1024 * 1024,
            compression: Compression::None,
            max_in_flight_per_broker: 5,
            retries: u32::MAX,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            request_timeout_ms: 30_000,
            delivery_timeout_ms: 120_000,
            max_block_ms: 60_000,
            enable_idempotence: true,
            metadata_max_age_ms: 300_000,
            frame_limits: FrameLimits::default(),
            transactional_id: None,
            transaction_timeout_ms: 60_000,
        }
    }
}

impl ProducerConfig {
    /// Checks the values at construction, with a message naming the setting.
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidConfig(m.to_owned()));
        if self.batch_bytes == 0 {
            return bad("batch_bytes must be > 0");
        }
        if !(1..=5).contains(&self.max_in_flight_per_broker) {
            return bad("max_in_flight_per_broker must be 1 to 5");
        }
        if self.buffer_bytes == 0 {
            return bad("buffer_bytes must be > 0");
        }
        if self.max_request_bytes + 1024 > self.frame_limits.max_frame_bytes {
            return bad("max_request_bytes must leave room for the header within the frame limit");
        }
        if !matches!(self.compression, Compression::None | Compression::Zstd) {
            return bad("compression must be none or zstd");
        }
        if self.request_timeout_ms == 0 || self.delivery_timeout_ms == 0 {
            return bad("request_timeout_ms and delivery_timeout_ms must be > 0");
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return bad("transactional_id must not be empty");
            }
            if !self.idempotent() {
                return bad("a transactional producer needs enable_idempotence and acks = all");
            }
            if self.transaction_timeout_ms == 0 {
                return bad("transaction_timeout_ms must be > 0");
            }
        }
        Ok(())
    }

    pub(crate) fn idempotent(&self) -> bool {
        self.enable_idempotence && self.acks == Acks::All
    }
}
