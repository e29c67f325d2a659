//! Records in: what `send` and `send_records` do before a record (or a unit of records)
//! waits in a batch — admission, the buffer's reservation, an id, a wait for the topic's
//! metadata when it is unknown, and the partition.
//!
//! Units of records ([`ProducerRecords`]) are many records queued, placed and reported as one.
//! A unit takes the path of one record — the same admission checks, one reservation of its
//! bytes, one id, one wait for metadata, one partition choice — and the accumulator appends its
//! records to one batch under one [`crate::client::accumulator::PendingRecord`]. Its report
//! names the first record's offset; the others follow it. What the producer promises a record
//! (ordering, retries, idempotence, transactions) it promises the unit's records alike, since
//! they travel inside the batches that carry single records.

use super::{ProducerCore, SendError, Waiting};
use crate::client::accumulator::RecordId;
use crate::client::partitioner::partition_for_key;
use crate::client::{ClientError, ProducerRecord, ProducerRecords, TopicPartition};

/// What waits for its topic's metadata: one record, or a unit.
#[derive(Debug)]
pub(super) enum Queued {
    One(ProducerRecord),
    Unit(ProducerRecords),
}

impl Queued {
    pub(super) fn topic(&self) -> &str {
        match self {
            Self::One(r) => &r.topic,
            Self::Unit(u) => &u.topic,
        }
    }

    /// Records it stands for.
    pub(super) fn records(&self) -> u32 {
        match self {
            Self::One(_) => 1,
            Self::Unit(u) => unit_records(u),
        }
    }
}

/// What the producers' `send` loops hand the core: a record, or a unit of records (each comes
/// back whole when the buffer is full).
pub(crate) trait Queueable: Sized {
    fn offer(self, core: &mut ProducerCore, now_ms: u64) -> Result<RecordId, SendError<Self>>;
}

impl Queueable for ProducerRecord {
    fn offer(self, core: &mut ProducerCore, now_ms: u64) -> Result<RecordId, SendError<Self>> {
        core.send(self, now_ms)
    }
}

impl Queueable for ProducerRecords {
    fn offer(self, core: &mut ProducerCore, now_ms: u64) -> Result<RecordId, SendError<Self>> {
        core.send_records(self, now_ms)
    }
}

/// Records in a unit `send_records` admitted: at least 21 estimated bytes each within one
/// request's bytes, so the count fits a batch's (an i32) and a `u32`.
fn unit_records(unit: &ProducerRecords) -> u32 {
    u32::try_from(unit.records.len()).unwrap_or(u32::MAX)
}

impl ProducerCore {
    /// Queues one record. See the module docs for what happens next.
    pub fn send(&mut self, record: ProducerRecord, now_ms: u64) -> Result<RecordId, SendError> {
        let record_bytes = record.estimated_bytes();
        if let Err(e) = self.admits(record_bytes) {
            return Err(SendError::Rejected(e));
        }
        if self.acc.reserve(record_bytes).is_err() {
            return Err(SendError::BufferFull(Box::new(record)));
        }
        Ok(self.queue(Queued::One(record), record_bytes, now_ms))
    }

    /// Whether a record (or unit) of `record_bytes` may be queued at all: the producer is open
    /// and not failed, a transaction is open if it is transactional, and a request can carry it.
    fn admits(&self, record_bytes: usize) -> Result<(), ClientError> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if let Some(e) = self.txn_refuses_send() {
            return Err(e);
        }
        let max_bytes = self.config.max_request_bytes.min(self.config.buffer_bytes);
        if record_bytes + spool_storage::batch::HEADER_BYTES > max_bytes {
            return Err(ClientError::RecordTooLarge {
                record_bytes,
                max_bytes,
            });
        }
        Ok(())
    }

    /// Gives a record (or unit) whose bytes are reserved its id and places it, or parks it until
    /// its topic's metadata arrives.
    fn queue(&mut self, record: Queued, record_bytes: usize, now_ms: u64) -> RecordId {
        let id = self.next_id;
        self.next_id += 1;
        let topic = record.topic();
        self.metadata.want_topic(topic);
        // Per-topic order: a record waits while an earlier one of its topic waits for metadata;
        // other topics are not held up.
        let topic_waiting = self.waiting.iter().any(|w| w.record.topic() == topic);
        if self.metadata.partition_count(topic).is_some() && !topic_waiting {
            self.place(id, record, record_bytes, now_ms);
        } else {
            // The driver asks for the metadata and starts the record's wait.
            self.drive_needed = true;
            self.waiting.push_back(Waiting {
                id,
                record,
                record_bytes,
                enqueued_ms: now_ms,
            });
        }
        id
    }

    /// Queues a unit of records (see [`ProducerRecords`]): one id, one delivery report. A unit
    /// with no records is refused; one larger than a request or the buffer is refused as a
    /// record that large is.
    pub fn send_records(
        &mut self,
        unit: ProducerRecords,
        now_ms: u64,
    ) -> Result<RecordId, SendError<ProducerRecords>> {
        if unit.records.is_empty() {
            return Err(SendError::Rejected(ClientError::InvalidArgument(format!(
                "a unit of records for topic {} holds none",
                unit.topic
            ))));
        }
        let unit_bytes = unit.estimated_bytes();
        if let Err(e) = self.admits(unit_bytes) {
            return Err(SendError::Rejected(e));
        }
        if self.acc.reserve(unit_bytes).is_err() {
            return Err(SendError::BufferFull(Box::new(unit)));
        }
        Ok(self.queue(Queued::Unit(unit), unit_bytes, now_ms))
    }

    /// Partitions and appends a unit whose bytes are reserved and whose topic is known: the
    /// named partition, else the sticky partitioner's choice for the unit's bytes.
    pub(super) fn place_unit(
        &mut self,
        id: RecordId,
        unit: ProducerRecords,
        unit_bytes: usize,
        now_ms: u64,
    ) {
        let partitions = self.metadata.partition_count(&unit.topic).unwrap_or(0);
        let partition = match unit.partition {
            Some(p) => p,
            None => {
                let available = self.metadata.available_partitions(&unit.topic);
                self.sticky
                    .partition(&unit.topic, available, partitions, unit_bytes)
            }
        };
        let count = unit_records(&unit);
        let timestamp_ms = unit.timestamp_ms.unwrap_or(now_ms as i64);
        let Some(tp) = self.checked(id, unit.topic, partition, partitions, unit_bytes, count)
        else {
            return;
        };
        self.drive_needed |=
            self.acc
                .append_unit_reserved(&tp, id, timestamp_ms, unit.records, unit_bytes, now_ms);
    }

    /// Partitions and appends a record or unit whose bytes are reserved and whose topic is known.
    pub(super) fn place(&mut self, id: RecordId, record: Queued, record_bytes: usize, now_ms: u64) {
        match record {
            Queued::One(r) => self.place_one(id, r, record_bytes, now_ms),
            Queued::Unit(u) => self.place_unit(id, u, record_bytes, now_ms),
        }
    }

    fn place_one(
        &mut self,
        id: RecordId,
        record: ProducerRecord,
        record_bytes: usize,
        now_ms: u64,
    ) {
        let partitions = self.metadata.partition_count(&record.topic).unwrap_or(0);
        let partition = match (record.partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, partitions),
            (None, None) => {
                let available = self.metadata.available_partitions(&record.topic);
                self.sticky
                    .partition(&record.topic, available, partitions, record_bytes)
            }
        };
        let timestamp_ms = record.timestamp_ms.unwrap_or(now_ms as i64);
        let Some(tp) = self.checked(id, record.topic, partition, partitions, record_bytes, 1)
        else {
            return;
        };
        self.drive_needed |= self.acc.append_reserved(
            &tp,
            id,
            timestamp_ms,
            record.key,
            record.value,
            record.headers,
            record_bytes,
            now_ms,
        );
    }

    /// `partition` of `topic` when the topic has it (`partitions`); else fails `id` — `records`
    /// records holding `bytes` of the buffer — as Kafka's producer does a partition it lacks.
    fn checked(
        &mut self,
        id: RecordId,
        topic: String,
        partition: i32,
        partitions: usize,
        bytes: usize,
        records: u32,
    ) -> Option<TopicPartition> {
        if partition < 0 || partition as usize >= partitions {
            self.acc.release(bytes);
            let e = ClientError::InvalidPartition {
                topic,
                partition,
                partitions,
            };
            self.fail_one(id, records, e);
            return None;
        }
        Some(TopicPartition { topic, partition })
    }
}
