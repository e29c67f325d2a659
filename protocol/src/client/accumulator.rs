//! The producer's record accumulator: per-partition batches in a bounded buffer.
//!
//! Records append to the last open batch of their partition until it reaches `batch_bytes`; a
//! batch is ready to send when it is full, when `linger_ms` has passed since it opened, when the
//! producer flushes, or when the buffer is full (so a waiting `send` is never stuck behind linger).
//! Every record reserves its estimated bytes against `buffer_bytes` from `append` until its batch
//! completes ([`Accumulator::release`]), so the buffer bounds memory for records queued, in flight
//! and awaiting retry alike. Closing a batch encodes it once (RecordBatch v2 via `spool_storage`,
//! optionally zstd); retries resend the same bytes.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use spool_storage::batch::{BatchError, Compression};
use spool_storage::records::{BatchBuilder, Record, RecordHeader};

use crate::client::TopicPartition;

/// Identifies one record handed to `send`, for its delivery report.
pub type RecordId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccumulatorConfig {
    /// A batch closes once it holds this many (uncompressed, estimated) bytes. Kafka: `batch.size`.
    pub batch_bytes: usize,
    /// A batch closes this long after it opened even when not full. Kafka: `linger.ms`.
    pub linger_ms: u64,
    /// Upper bound on bytes reserved by records not yet completed. Kafka: `buffer.memory`.
    pub buffer_bytes: usize,
    pub compression: Compression,
    /// Batches carry the transactional attribute (a transactional producer's).
    pub transactional: bool,
}

/// A record inside a batch — or a unit of `records` consecutive records sent together
/// ([`crate::client::ProducerRecords`]) — with its id and timestamp. Its (first) offset is the
/// batch's base plus the records of the entries before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingRecord {
    pub id: RecordId,
    pub timestamp_ms: i64,
    /// Records this entry stands for: 1 for a record `send` took, more for a unit.
    pub records: u32,
}

#[derive(Debug)]
struct OpenBatch {
    builder: BatchBuilder,
    records: Vec<PendingRecord>,
    created_ms: u64,
    reserved_bytes: usize,
}

/// A batch taken out of the accumulator: encoded, and retried as these very bytes.
#[derive(Debug, Clone)]
pub struct ClosedBatch {
    pub tp: TopicPartition,
    pub bytes: Bytes,
    pub records: Vec<PendingRecord>,
    pub reserved_bytes: usize,
    pub created_ms: u64,
    /// Sends so far.
    pub attempts: u32,
    /// Not to be sent before this time (retry backoff).
    pub retry_at_ms: u64,
    /// Set when the last error said the metadata was stale: not to be resent until the metadata
    /// version exceeds this.
    pub stale_metadata_version: Option<u64>,
    /// The broker the last send went to: a retry goes as soon as the metadata names another
    /// leader, without waiting out its backoff (KIP-951's rule: the wait was for the leader to
    /// move, and it has).
    pub sent_to: Option<i32>,
    /// (producer id, epoch, base sequence) the bytes carry, for an idempotent producer.
    pub stamp: Option<(i64, i16, i32)>,
    /// The batch's place among its partition's batches, from 0 in closing order (set by the
    /// producer's pipelines): resends go in this order.
    pub order: u64,
    /// The broker answered OUT_OF_ORDER_SEQUENCE_NUMBER to a stamp the producer has since
    /// replaced: the batch was not written, and goes again under the current producer id.
    pub restamp: bool,
    /// An earlier batch of the partition was unresolved when this one was last sent: an
    /// OUT_OF_ORDER_SEQUENCE_NUMBER may then only mean the broker took the two out of order.
    pub sent_behind: bool,
}

impl ClosedBatch {
    /// Carries `stamp` from now on: the header's producer fields and CRC are written again (one
    /// copy of the batch; only after the broker said it did not write the old one).
    pub fn restamp_with(&mut self, stamp: (i64, i16, i32)) {
        let mut bytes = bytes::BytesMut::from(&self.bytes[..]);
        spool_storage::batch::set_producer(&mut bytes, stamp.0, stamp.1, stamp.2);
        self.bytes = bytes.freeze();
        self.stamp = Some(stamp);
        self.restamp = false;
    }
}

/// A batch that could not be encoded (zstd failure): its records fail.
#[derive(Debug)]
pub struct FailedBatch {
    pub tp: TopicPartition,
    pub records: Vec<PendingRecord>,
    pub reserved_bytes: usize,
    pub error: BatchError,
}

/// The buffer is full; the caller keeps the record and waits for [`Accumulator::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFull;

#[derive(Debug)]
pub struct Accumulator {
    config: AccumulatorConfig,
    open: BTreeMap<TopicPartition, VecDeque<OpenBatch>>,
    reserved_bytes: usize,
    /// Records in the batch closed last (any partition): a new batch's lists start with room
    /// for as many, so a steady stream fills them without regrowing (growing the lists was about
    /// 2 % of a producer's CPU at 1 KiB records).
    last_batch_records: usize,
    /// Its entries ([`PendingRecord`]s): fewer than its records when units filled it.
    last_batch_entries: usize,
}

impl Accumulator {
    pub fn new(config: AccumulatorConfig) -> Self {
        Self {
            config,
            open: BTreeMap::new(),
            reserved_bytes: 0,
            last_batch_records: 0,
            last_batch_entries: 0,
        }
    }

    pub fn config(&self) -> &AccumulatorConfig {
        &self.config
    }

    /// Bytes reserved by records not yet completed (queued, in flight, awaiting retry).
    pub fn reserved_bytes(&self) -> usize {
        self.reserved_bytes
    }

    /// Whether `bytes` more would fit the buffer.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.reserved_bytes + bytes <= self.config.buffer_bytes
    }

    /// Reserves `bytes` outside any batch (records waiting for metadata).
    pub fn reserve(&mut self, bytes: usize) -> Result<(), BufferFull> {
        if !self.has_room(bytes) {
            return Err(BufferFull);
        }
        self.reserved_bytes += bytes;
        Ok(())
    }

    /// Returns reserved bytes once their records completed (delivered or failed).
    pub fn release(&mut self, bytes: usize) {
        debug_assert!(bytes <= self.reserved_bytes, "released more than reserved");
        self.reserved_bytes = self.reserved_bytes.saturating_sub(bytes);
    }

    /// Appends a record whose `record_bytes` were already reserved (see [`Self::reserve`]).
    /// Returns whether the append can have changed what is ready to send or when: it opened a
    /// batch (a new linger deadline; the batch before it, if any, is full), filled its batch, or
    /// filled the buffer. Only these appends need the driver of the core woken; the others
    /// change nothing it would act on before the deadline it already waits for.
    #[allow(clippy::too_many_arguments)]
    pub fn append_reserved(
        &mut self,
        tp: &TopicPartition,
        id: RecordId,
        timestamp_ms: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
        headers: Vec<RecordHeader>,
        record_bytes: usize,
        now_ms: u64,
    ) -> bool {
        let last = (self.last_batch_records, self.last_batch_entries);
        // One lookup for a partition with batches open; the key is cloned only for a partition
        // seen for the first time, not once per record.
        let queue = match self.open.get_mut(tp) {
            Some(q) => q,
            None => self.open.entry(tp.clone()).or_default(),
        };
        let (batch, opened) = batch_with_room(
            queue,
            &self.config,
            last,
            (record_bytes, 1),
            timestamp_ms,
            now_ms,
        );
        let base_timestamp_ms = batch.builder.base_timestamp;
        batch.builder.push_record(Record {
            offset_delta: batch.builder.len() as i32,
            timestamp_delta: timestamp_ms.saturating_sub(base_timestamp_ms),
            key,
            value,
            headers,
        });
        batch.records.push(PendingRecord {
            id,
            timestamp_ms,
            records: 1,
        });
        batch.reserved_bytes += record_bytes;
        let now_full = batch.builder.estimated_bytes() >= self.config.batch_bytes;
        self.changes_readiness(opened, now_full)
    }

    /// Appends a unit of records (key, value) whose `unit_bytes` were already reserved, all
    /// into one batch: the open batch of `tp` if they fit, else a new one (a unit larger than
    /// `batch_bytes` fills a batch of its own, as one large record does). One entry, `id`,
    /// stands for them all. Returns what [`Self::append_reserved`] returns.
    pub fn append_unit_reserved(
        &mut self,
        tp: &TopicPartition,
        id: RecordId,
        timestamp_ms: i64,
        records: Vec<(Option<Bytes>, Option<Bytes>)>,
        unit_bytes: usize,
        now_ms: u64,
    ) -> bool {
        assert!(!records.is_empty(), "a unit holds at least one record");
        let count = u32::try_from(records.len()).expect("a unit's records fit a batch's i32 count");
        let last = (self.last_batch_records, self.last_batch_entries);
        // One lookup for a partition with batches open; the key is cloned only for a partition
        // seen for the first time, not once per record.
        let queue = match self.open.get_mut(tp) {
            Some(q) => q,
            None => self.open.entry(tp.clone()).or_default(),
        };
        let size = (unit_bytes, records.len());
        let (batch, opened) =
            batch_with_room(queue, &self.config, last, size, timestamp_ms, now_ms);
        let timestamp_delta = timestamp_ms.saturating_sub(batch.builder.base_timestamp);
        let first = batch.builder.len();
        batch.builder.reserve_records(records.len());
        for (key, value) in records {
            batch.builder.push_record(Record {
                offset_delta: batch.builder.len() as i32,
                timestamp_delta,
                key,
                value,
                headers: Vec::new(),
            });
        }
        debug_assert_eq!(batch.builder.len(), first + count as usize);
        batch.records.push(PendingRecord {
            id,
            timestamp_ms,
            records: count,
        });
        batch.reserved_bytes += unit_bytes;
        let now_full = batch.builder.estimated_bytes() >= self.config.batch_bytes;
        self.changes_readiness(opened, now_full)
    }

    /// Whether an append that `opened` a batch or left it `now_full` can have changed what is
    /// ready to send (see [`Self::append_reserved`]): every condition of `first_ready` an append
    /// can change.
    fn changes_readiness(&self, opened: bool, now_full: bool) -> bool {
        opened || now_full || self.reserved_bytes >= self.config.buffer_bytes
    }

    /// Reserves and appends in one step.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        tp: &TopicPartition,
        id: RecordId,
        timestamp_ms: i64,
        key: Option<Bytes>,
        value: Option<Bytes>,
        record_bytes: usize,
        now_ms: u64,
    ) -> Result<(), BufferFull> {
        self.reserve(record_bytes)?;
        let _changed = self.append_reserved(
            tp,
            id,
            timestamp_ms,
            key,
            value,
            Vec::new(),
            record_bytes,
            now_ms,
        );
        Ok(())
    }

    fn first_ready(&self, batches: &VecDeque<OpenBatch>, now_ms: u64, flush: bool) -> bool {
        let Some(first) = batches.front() else {
            return false;
        };
        flush
            || batches.len() > 1
            || first.builder.estimated_bytes() >= self.config.batch_bytes
            || now_ms >= first.created_ms + self.config.linger_ms
            || self.reserved_bytes >= self.config.buffer_bytes
    }

    /// Partitions whose first batch may be sent now.
    pub fn ready_partitions(&self, now_ms: u64, flush: bool) -> Vec<TopicPartition> {
        self.open
            .iter()
            .filter(|(_, q)| self.first_ready(q, now_ms, flush))
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Whether any record is queued (not yet closed into a batch).
    pub fn has_open_batches(&self) -> bool {
        self.open.values().any(|q| !q.is_empty())
    }

    /// The partitions with records queued (open batches).
    pub fn queued_partitions(&self) -> impl Iterator<Item = &TopicPartition> + '_ {
        self.open
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(tp, _)| tp)
    }

    /// When the earliest open batch's linger runs out.
    pub fn next_linger_deadline_ms(&self) -> Option<u64> {
        self.open
            .values()
            .filter_map(|q| q.front())
            .map(|b| b.created_ms + self.config.linger_ms)
            .min()
    }

    /// Records in the first batch of `tp` (to assign its sequence before closing it).
    pub fn first_batch_records(&self, tp: &TopicPartition) -> usize {
        self.open
            .get(tp)
            .and_then(|q| q.front())
            .map_or(0, |b| b.builder.len())
    }

    /// Takes the first batch of `tp` and encodes it. `producer` = (id, epoch, base sequence) for
    /// idempotent producers.
    pub fn close_first(
        &mut self,
        tp: &TopicPartition,
        producer: Option<(i64, i16, i32)>,
    ) -> Option<Result<ClosedBatch, FailedBatch>> {
        let queue = self.open.get_mut(tp)?;
        let mut batch = queue.pop_front()?;
        if queue.is_empty() {
            self.open.remove(tp);
        }
        self.last_batch_records = batch.builder.len();
        self.last_batch_entries = batch.records.len();
        if let Some((producer_id, producer_epoch, base_sequence)) = producer {
            batch.builder.producer_id = producer_id;
            batch.builder.producer_epoch = producer_epoch;
            batch.builder.base_sequence = base_sequence;
        }
        Some(match batch.builder.build() {
            Ok(bytes) => Ok(ClosedBatch {
                tp: tp.clone(),
                bytes: bytes.freeze(),
                records: batch.records,
                reserved_bytes: batch.reserved_bytes,
                created_ms: batch.created_ms,
                attempts: 0,
                retry_at_ms: 0,
                stale_metadata_version: None,
                sent_to: None,
                stamp: producer,
                order: 0,
                restamp: false,
                sent_behind: false,
            }),
            Err(error) => Err(FailedBatch {
                tp: tp.clone(),
                records: batch.records,
                reserved_bytes: batch.reserved_bytes,
                error,
            }),
        })
    }

    /// Removes open batches created before `created_before_ms` (delivery timeout), returning their
    /// records and reserved bytes (still reserved: the caller fails them and releases).
    pub fn expire(
        &mut self,
        created_before_ms: u64,
    ) -> Vec<(TopicPartition, Vec<PendingRecord>, usize)> {
        let mut out = Vec::new();
        for (tp, q) in self.open.iter_mut() {
            while q.front().is_some_and(|b| b.created_ms < created_before_ms) {
                if let Some(b) = q.pop_front() {
                    out.push((tp.clone(), b.records, b.reserved_bytes));
                }
            }
        }
        self.open.retain(|_, q| !q.is_empty());
        out
    }
}

/// Makes the last batch of `queue` one that `bytes` more — `records` records, one entry — fit
/// (an empty batch takes anything), opening one if none does; returns the batch and whether it
/// was opened. `last` = (records, entries) of the batch closed last.
fn batch_with_room<'a>(
    queue: &'a mut VecDeque<OpenBatch>,
    config: &AccumulatorConfig,
    last: (usize, usize),
    (bytes, records): (usize, usize),
    timestamp_ms: i64,
    now_ms: u64,
) -> (&'a mut OpenBatch, bool) {
    let fits = queue.back().is_some_and(|b| {
        b.builder.is_empty() || b.builder.estimated_bytes() + bytes <= config.batch_bytes
    });
    if !fits {
        // Room for as many records (and entries) as the last batch held, but never more than
        // this batch can take of records (and entries) this size (a hint, not a bound: the
        // lists still grow). A unit's records are its bytes over its count each.
        let record_bytes = bytes / records.max(1);
        let room = last.0.min(config.batch_bytes / record_bytes.max(1) + 1);
        let entries = last.1.min(config.batch_bytes / bytes.max(1) + 1);
        queue.push_back(OpenBatch {
            builder: {
                let mut b = BatchBuilder::new(timestamp_ms).compression(config.compression);
                b.transactional = config.transactional;
                b.reserve_records(room);
                b
            },
            records: Vec::with_capacity(entries),
            created_ms: now_ms,
            reserved_bytes: 0,
        });
    }
    // A batch was pushed just above when none fit.
    let batch = queue
        .back_mut()
        .expect("a batch was pushed just above when none fit");
    (batch, !fits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(batch_bytes: usize, buffer_bytes: usize) -> Accumulator {
        Accumulator::new(AccumulatorConfig {
            batch_bytes,
            linger_ms: 5,
            buffer_bytes,
            compression: Compression::None,
            transactional: false,
        })
    }

    fn v(n: usize) -> Option<Bytes> {
        Some(Bytes::from(vec![b'x'; n]))
    }

    #[test]
    fn batch_closes_at_batch_bytes() {
        let mut a = acc(300, 10_000);
        let tp = TopicPartition::new("t", 0);
        for id in 0..3 {
            a.append(&tp, id, 0, None, v(100), 121, 0).unwrap();
        }
        // 61 + 3 records of ~105 > 300: the third opened a second batch, so the first is ready.
        assert_eq!(a.ready_partitions(0, false), vec![tp.clone()]);
        let b = a.close_first(&tp, None).unwrap().unwrap();
        assert_eq!(b.records.len(), 2);
        let (h, records) = spool_storage::records::read_batch(&b.bytes, 1 << 20).unwrap();
        assert_eq!(h.record_count, 2);
        assert_eq!(records.len(), 2);
        assert!(
            a.ready_partitions(0, false).is_empty(),
            "the second batch lingers"
        );
        assert_eq!(a.ready_partitions(5, false), vec![tp]);
    }

    #[test]
    fn a_new_batch_has_room_for_as_many_records_as_the_last_but_no_more_than_fit() {
        let mut a = acc(64 * 1024, 1 << 20);
        let tp = TopicPartition::new("t", 0);
        for id in 0..300 {
            a.append(&tp, id, 0, None, v(10), 31, 0).unwrap();
        }
        let closed = a.close_first(&tp, None).unwrap().unwrap();
        assert_eq!(closed.records.len(), 300);
        // Small records: the next batch starts with room for the last one's 300.
        a.append(&tp, 300, 0, None, v(10), 31, 0).unwrap();
        let room = a.open[&tp].front().map(|b| b.records.capacity()).unwrap();
        assert!((300..600).contains(&room), "room for {room} records");
        // Another partition's batch of 300 closed; large records now: bounded by what a
        // 64 KiB batch can take of them, not by the 300.
        let other = TopicPartition::new("t", 1);
        for id in 301..304 {
            a.append(&other, id, 0, None, v(20_000), 20_021, 0).unwrap();
        }
        let room = a.open[&other]
            .front()
            .map(|b| b.records.capacity())
            .unwrap();
        assert!(
            room <= 4,
            "room for {room} records of 20 KB in a 64 KiB batch"
        );
        let b = a.close_first(&other, None).unwrap().unwrap();
        let (_, records) = spool_storage::records::read_batch(&b.bytes, 1 << 20).unwrap();
        assert_eq!(
            records.len(),
            3,
            "the hint never changes what a batch holds"
        );
        // A batch of 3 closed last: the next starts with room for 3 (and grows past it).
        for id in 304..310 {
            a.append(&other, id, 0, None, v(10), 31, 0).unwrap();
        }
        let batch = a.open[&other].front().unwrap();
        assert_eq!(batch.records.len(), 6);
    }

    #[test]
    fn after_a_batch_of_units_a_new_batch_has_room_for_its_records_and_its_entries() {
        let mut a = acc(64 * 1024, 1 << 20);
        let tp = TopicPartition::new("t", 0);
        let unit = |n: usize| (0..n).map(|_| (None, v(10))).collect::<Vec<_>>();
        // Ten units of 30 records (31 bytes each): one batch of 300 records in 10 entries.
        for id in 0..10 {
            a.reserve(930).unwrap();
            a.append_unit_reserved(&tp, id, 0, unit(30), 930, 0);
        }
        let closed = a.close_first(&tp, None).unwrap().unwrap();
        assert_eq!(closed.records.len(), 10);
        a.reserve(930).unwrap();
        a.append_unit_reserved(&tp, 10, 0, unit(30), 930, 0);
        let batch = a.open[&tp].front().unwrap();
        let records = batch.builder.records_capacity();
        assert!((300..600).contains(&records), "room for {records} records");
        let entries = batch.records.capacity();
        assert!((10..20).contains(&entries), "room for {entries} entries");
    }

    #[test]
    fn linger_and_flush() {
        let mut a = acc(64 * 1024, 10_000);
        let tp = TopicPartition::new("t", 1);
        a.append(&tp, 0, 0, None, v(10), 31, 100).unwrap();
        assert!(a.ready_partitions(104, false).is_empty());
        assert_eq!(a.next_linger_deadline_ms(), Some(105));
        assert_eq!(a.ready_partitions(105, false).len(), 1);
        assert_eq!(a.ready_partitions(100, true).len(), 1);
    }

    #[test]
    fn buffer_bounds_reservations_until_release() {
        let mut a = acc(64 * 1024, 100);
        let tp = TopicPartition::new("t", 0);
        a.append(&tp, 0, 0, None, v(10), 60, 0).unwrap();
        assert_eq!(a.append(&tp, 1, 0, None, v(10), 60, 0), Err(BufferFull));
        // A full buffer makes batches ready regardless of linger.
        assert_eq!(a.reserved_bytes(), 60);
        let b = a.close_first(&tp, Some((7, 1, 0))).unwrap().unwrap();
        let h = spool_storage::batch::validate(&b.bytes, 1 << 20).unwrap();
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 1, 0)
        );
        assert!(!a.has_room(60), "still reserved while in flight");
        a.release(b.reserved_bytes);
        a.append(&tp, 1, 0, None, v(10), 60, 0).unwrap();
    }

    #[test]
    fn zstd_batches_decode() {
        let mut a = Accumulator::new(AccumulatorConfig {
            batch_bytes: 64 * 1024,
            linger_ms: 0,
            buffer_bytes: 1 << 20,
            compression: Compression::Zstd,
            transactional: false,
        });
        let tp = TopicPartition::new("t", 0);
        for id in 0..50 {
            a.append(
                &tp,
                id,
                1000 + id as i64,
                Some(Bytes::from("k")),
                v(200),
                230,
                0,
            )
            .unwrap();
        }
        let b = a.close_first(&tp, None).unwrap().unwrap();
        assert!(b.bytes.len() < 50 * 200, "compressed");
        let (h, records) = spool_storage::records::read_batch(&b.bytes, 1 << 20).unwrap();
        assert_eq!(h.compression().unwrap(), Compression::Zstd);
        assert_eq!(records.len(), 50);
    }
}
