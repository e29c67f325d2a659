//! The idempotent-producer table of one partition (DESIGN §9): for each producer id, its epoch
//! and the last five batches it wrote, so a retried batch gets its original offset instead of
//! being written twice.
//!
//! Pure. Rules: a batch without a producer id is always appended; an unknown producer id is
//! accepted at any sequence (its history was not kept — see the restart note below); an older
//! epoch is PRODUCER_FENCED; a newer epoch must start at sequence 0; within an epoch a batch
//! matching a cached one is a duplicate (answered with the original offset), the next sequence is
//! appended, anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (a gap) or DUPLICATE_SEQUENCE_NUMBER
//! (older than the cached five). Bounded by `producers_max`: past it, the producer idle longest is
//! forgotten.
//!
//! Transactions: a marker (control batch) carries the coordinator's epoch for the producer;
//! one from an epoch older than the producer's is INVALID_PRODUCER_EPOCH, and a newer one (the
//! coordinator fenced the producer when it aborted on a timeout or a new instance) becomes the
//! producer's epoch, so the fenced instance's late batches are PRODUCER_FENCED. The table also
//! keeps the producer's last marker here — its coordinator epoch, and its decision offset and
//! log offset when it carried one — for [`crate::txn::marker_verdict`].
//!
//! Restarts: [`ProducerStateTable::rebuild`] replays the batch headers of the log's tail (the
//! partition reads them, bounded by `PRODUCER_STATE_REBUILD_BYTES_MAX` in `partition.rs`), so a
//! table rebuilt from the batches appended answers every `check` as the live one did. What the
//! bound loses: a producer whose last batch lies before the scanned tail is unknown after a
//! restart, and an unknown producer is accepted at any sequence (Kafka's behaviour for expired
//! producers) — a retry of such a batch would be appended again. No snapshot is written yet.

use std::collections::{HashMap, VecDeque};

use spool_error_code::ErrorCode;

/// Batches remembered per producer (Kafka's max.in.flight for idempotence).
pub const BATCHES_PER_PRODUCER: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    base_offset: u64,
}

#[derive(Debug, Clone)]
struct Producer {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    last_offset: u64,
    /// The newest coordinator epoch of this producer's markers here (-1: none seen).
    coordinator_epoch: i32,
    /// The last marker here that said which transaction it ended.
    last_marker: Option<LastMarker>,
}

/// A producer's last marker in this partition that carried a decision offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastMarker {
    /// The offset of the coordinator's Prepare record that decided its transaction.
    pub decision_offset: i64,
    /// Where the marker is in this partition's log.
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Append,
    /// A retry of a batch already in the log at this base offset.
    Duplicate {
        base_offset: u64,
    },
    Reject(ErrorCode),
}

/// What the table needs of one batch in the log (all of it is in the batch header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
    /// Transaction markers carry the producer id but no sequence; they do not enter the table.
    pub is_control: bool,
}

#[derive(Debug)]
pub struct ProducerStateTable {
    producers: HashMap<i64, Producer>,
    producers_max: usize,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

impl ProducerStateTable {
    pub fn new(producers_max: usize) -> Self {
        Self {
            producers: HashMap::new(),
            producers_max: producers_max.max(1),
        }
    }

    /// The table the live one would be after appending `batches`, in log order. Batches without
    /// a producer id and control batches are skipped; each other batch is recorded as appended
    /// (the log holds only batches the live table accepted, so nothing is checked again).
    pub fn rebuild(producers_max: usize, batches: impl IntoIterator<Item = BatchInfo>) -> Self {
        let mut t = Self::new(producers_max);
        for b in batches {
            t.replay(&b);
        }
        t
    }

    /// Records one batch read back from the log (see [`ProducerStateTable::rebuild`]).
    pub fn replay(&mut self, b: &BatchInfo) {
        if b.producer_id < 0 {
            return;
        }
        if b.is_control {
            self.on_marker(b.producer_id, b.producer_epoch, b.last_offset);
            return;
        }
        self.on_append(
            b.producer_id,
            b.producer_epoch,
            b.first_seq,
            b.last_seq,
            b.base_offset,
            b.last_offset,
        );
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> Check {
        if producer_id < 0 {
            return Check::Append;
        }
        let Some(p) = self.producers.get(&producer_id) else {
            return Check::Append;
        };
        if epoch < p.epoch {
            return Check::Reject(ErrorCode::ProducerFenced);
        }
        if epoch > p.epoch {
            return if first_seq == 0 {
                Check::Append
            } else {
                Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
            };
        }
        if let Some(b) = p
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return Check::Duplicate {
                base_offset: b.base_offset,
            };
        }
        let Some(last) = p.batches.back() else {
            return Check::Append;
        };
        if first_seq == next_seq(last.last_seq) {
            return Check::Append;
        }
        let oldest = p.batches.front().map_or(last.first_seq, |b| b.first_seq);
        if first_seq < oldest {
            Check::Reject(ErrorCode::DuplicateSequenceNumber)
        } else {
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        }
    }

    /// Whether a transaction marker of `producer_id` at `epoch` may be written: a marker from an
    /// epoch older than the producer's is a deposed coordinator's or a fenced producer's
    /// (INVALID_PRODUCER_EPOCH, Kafka's rule for markers).
    pub fn check_marker(&self, producer_id: i64, epoch: i16) -> Result<(), ErrorCode> {
        match self.producers.get(&producer_id) {
            Some(p) if epoch < p.epoch => Err(ErrorCode::InvalidProducerEpoch),
            _ => Ok(()),
        }
    }

    /// [`ProducerStateTable::check_marker`], and the coordinator's own fence: a marker from a
    /// coordinator epoch older than the newest this producer's markers here carried comes from
    /// a deposed coordinator (TRANSACTION_COORDINATOR_FENCED, Kafka's rule).
    pub fn check_marker_from(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ErrorCode> {
        self.check_marker(producer_id, epoch)?;
        match self.producers.get(&producer_id) {
            Some(p) if coordinator_epoch < p.coordinator_epoch => {
                Err(ErrorCode::TransactionCoordinatorFenced)
            }
            _ => Ok(()),
        }
    }

    /// Records the coordinator epoch and decision offset (negative: none) of a marker of
    /// `producer_id` appended (or replayed) at `offset`, after [`ProducerStateTable::on_marker`].
    /// Decision offsets only grow: an older one never replaces a newer.
    pub fn note_marker(
        &mut self,
        producer_id: i64,
        coordinator_epoch: i32,
        decision_offset: i64,
        offset: u64,
    ) {
        let Some(p) = self.producers.get_mut(&producer_id) else {
            return;
        };
        p.coordinator_epoch = p.coordinator_epoch.max(coordinator_epoch);
        if decision_offset >= 0
            && p.last_marker
                .is_none_or(|m| m.decision_offset <= decision_offset)
        {
            p.last_marker = Some(LastMarker {
                decision_offset,
                offset,
            });
        }
    }

    /// The producer's last marker here that carried a decision offset, if the table knows one.
    pub fn last_marker(&self, producer_id: i64) -> Option<LastMarker> {
        self.producers.get(&producer_id)?.last_marker
    }

    /// Records an appended transaction marker: a newer epoch (a coordinator's fencing abort)
    /// becomes the producer's, so batches of the fenced epoch are PRODUCER_FENCED from now on.
    pub fn on_marker(&mut self, producer_id: i64, epoch: i16, offset: u64) {
        if producer_id < 0 {
            return;
        }
        match self.producers.get_mut(&producer_id) {
            Some(p) => {
                if epoch > p.epoch {
                    p.epoch = epoch;
                    p.batches.clear();
                }
                p.last_offset = p.last_offset.max(offset);
            }
            None => {
                self.make_room();
                self.producers.insert(
                    producer_id,
                    Producer {
                        epoch,
                        batches: VecDeque::new(),
                        last_offset: offset,
                        coordinator_epoch: -1,
                        last_marker: None,
                    },
                );
            }
        }
    }

    /// Past the bound, forgets the producer idle longest.
    fn make_room(&mut self) {
        if self.producers.len() < self.producers_max {
            return;
        }
        if let Some(idle) = self
            .producers
            .iter()
            .min_by_key(|(_, p)| p.last_offset)
            .map(|(id, _)| *id)
        {
            self.producers.remove(&idle);
        }
    }

    /// Records an appended batch (call only after [`ProducerStateTable::check`] said `Append`).
    pub fn on_append(
        &mut self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        base_offset: u64,
        last_offset: u64,
    ) {
        if producer_id < 0 {
            return;
        }
        if !self.producers.contains_key(&producer_id) {
            self.make_room();
        }
        let p = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| Producer {
                epoch,
                batches: VecDeque::new(),
                last_offset,
                coordinator_epoch: -1,
                last_marker: None,
            });
        if epoch != p.epoch {
            p.epoch = epoch;
            p.batches.clear();
        }
        p.batches.push_back(BatchMeta {
            first_seq,
            last_seq,
            base_offset,
        });
        if p.batches.len() > BATCHES_PER_PRODUCER {
            p.batches.pop_front();
        }
        p.last_offset = last_offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_idlest_producer_is_forgotten_past_the_bound() {
        let mut t = ProducerStateTable::new(2);
        t.on_append(1, 0, 0, 0, 10, 10);
        t.on_append(2, 0, 0, 0, 11, 11);
        t.on_append(3, 0, 0, 0, 12, 12);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.check(1, 0, 0, 0),
            Check::Append,
            "producer 1 was forgotten"
        );
        assert_eq!(t.check(3, 0, 0, 0), Check::Duplicate { base_offset: 12 });
    }

    #[test]
    fn a_deposed_coordinators_marker_is_fenced() {
        let mut t = ProducerStateTable::new(100);
        t.on_append(7, 0, 0, 4, 10, 14);
        assert_eq!(t.check_marker_from(7, 0, 3), Ok(()), "no marker seen yet");
        t.on_marker(7, 0, 15);
        t.note_marker(7, 5, -1, 15);
        assert_eq!(
            t.check_marker_from(7, 0, 5),
            Ok(()),
            "the same coordinator again"
        );
        assert_eq!(t.check_marker_from(7, 0, 6), Ok(()), "a newer one");
        assert_eq!(
            t.check_marker_from(7, 0, 4),
            Err(ErrorCode::TransactionCoordinatorFenced)
        );
        t.note_marker(7, 2, -1, 16);
        assert_eq!(
            t.check_marker_from(7, 0, 4),
            Err(ErrorCode::TransactionCoordinatorFenced),
            "the newest epoch is kept"
        );
        assert_eq!(t.last_marker(7), None, "no marker said its decision");
        assert_eq!(
            t.check_marker_from(7, -1, 9),
            Err(ErrorCode::InvalidProducerEpoch),
            "the producer epoch is checked first"
        );
    }

    #[test]
    fn a_marker_of_a_newer_epoch_fences_the_old_one() {
        let mut t = ProducerStateTable::new(100);
        t.on_append(7, 3, 0, 4, 10, 14);
        assert_eq!(t.check_marker(7, 3), Ok(()));
        assert_eq!(t.check_marker(7, 2), Err(ErrorCode::InvalidProducerEpoch));
        // A same-epoch commit keeps the sequence going.
        t.on_marker(7, 3, 15);
        assert_eq!(t.check(7, 3, 5, 9), Check::Append);
        // The coordinator's fencing abort at epoch 4: epoch 3 can write no more.
        t.on_marker(7, 4, 16);
        assert_eq!(
            t.check(7, 3, 5, 9),
            Check::Reject(ErrorCode::ProducerFenced)
        );
        assert_eq!(t.check_marker(7, 3), Err(ErrorCode::InvalidProducerEpoch));
        assert_eq!(t.check(7, 5, 0, 0), Check::Append);
        // Rebuilt from the log, the table says the same.
        let r = ProducerStateTable::rebuild(
            100,
            [
                info(7, 3, 0, 4, 10),
                BatchInfo {
                    producer_id: 7,
                    producer_epoch: 4,
                    first_seq: -1,
                    last_seq: -1,
                    base_offset: 16,
                    last_offset: 16,
                    is_control: true,
                },
            ],
        );
        assert_eq!(
            r.check(7, 3, 5, 9),
            Check::Reject(ErrorCode::ProducerFenced)
        );
    }

    #[test]
    fn retries_fences_and_gaps() {
        let mut t = ProducerStateTable::new(100);
        assert_eq!(t.check(7, 0, 0, 9), Check::Append);
        t.on_append(7, 0, 0, 9, 100, 109);
        assert_eq!(t.check(7, 0, 0, 9), Check::Duplicate { base_offset: 100 });
        assert_eq!(t.check(7, 0, 10, 19), Check::Append);
        assert_eq!(
            t.check(7, 0, 12, 19),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            t.check(7, 0, 20, 29),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber),
            "a gap"
        );
        assert_eq!(
            t.check(7, 1, 5, 9),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(t.check(7, 1, 0, 9), Check::Append);
        t.on_append(7, 1, 0, 9, 200, 209);
        assert_eq!(
            t.check(7, 0, 10, 19),
            Check::Reject(ErrorCode::ProducerFenced)
        );
        assert_eq!(t.check(-1, -1, -1, -1), Check::Append);
    }

    fn info(pid: i64, epoch: i16, first_seq: i32, last_seq: i32, base: u64) -> BatchInfo {
        BatchInfo {
            producer_id: pid,
            producer_epoch: epoch,
            first_seq,
            last_seq,
            base_offset: base,
            last_offset: base + (last_seq - first_seq) as u64,
            is_control: false,
        }
    }

    #[test]
    fn a_rebuilt_table_deduplicates_skips_plain_batches_and_keeps_markers_epochs() {
        let t = ProducerStateTable::rebuild(
            100,
            [
                info(-1, -1, -1, 4, 0),
                info(7, 0, 0, 9, 5),
                BatchInfo {
                    is_control: true,
                    ..info(8, 0, -1, -1, 15)
                },
                info(7, 0, 10, 19, 16),
            ],
        );
        assert_eq!(t.len(), 2, "producer 7, and 8 from its marker");
        assert_eq!(t.check_marker(8, -1), Err(ErrorCode::InvalidProducerEpoch));
        assert_eq!(t.check(7, 0, 0, 9), Check::Duplicate { base_offset: 5 });
        assert_eq!(t.check(7, 0, 10, 19), Check::Duplicate { base_offset: 16 });
        assert_eq!(t.check(7, 0, 20, 29), Check::Append);
        assert_eq!(
            t.check(7, 0, 25, 29),
            Check::Reject(ErrorCode::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            t.check(7, -1, 20, 29),
            Check::Reject(ErrorCode::ProducerFenced)
        );
        assert_eq!(
            t.check(8, 0, 3, 3),
            Check::Append,
            "no batch yet: any sequence"
        );
    }

    /// One produce attempt in the model: which producer, and what it sends relative to its state.
    #[derive(Debug, Clone, Copy)]
    enum Send {
        Next(i32),
        Retry(usize),
        Gap(i32),
        Stale(i32),
        NewEpoch(i32),
        Fenced,
    }

    fn send_strategy() -> impl Strategy<Value = (i64, Send)> {
        let send = prop_oneof![
            4 => (1i32..4).prop_map(Send::Next),
            2 => (0usize..7).prop_map(Send::Retry),
            1 => (2i32..5).prop_map(Send::Gap),
            1 => (1i32..4).prop_map(Send::Stale),
            1 => (1i32..4).prop_map(Send::NewEpoch),
            1 => Just(Send::Fenced),
        ];
        (prop_oneof![Just(-1i64), 0i64..4], send)
    }

    /// A batch as the model sends it: (epoch, first sequence, last sequence).
    type Sent = (i16, i32, i32);

    /// The batch a model producer sends.
    fn batch_for(s: Send, epoch: i16, next: i32, sent: &[Sent]) -> Sent {
        match s {
            Send::Next(n) => (epoch, next, next + n - 1),
            Send::Retry(k) => sent
                .iter()
                .rev()
                .nth(k)
                .copied()
                .unwrap_or((epoch, next, next)),
            Send::Gap(g) => (epoch, next + g, next + g),
            Send::Stale(n) => (epoch, (next - n).max(0), (next - n).max(0)),
            Send::NewEpoch(n) => (epoch + 1, 0, n - 1),
            Send::Fenced => (epoch - 1, 0, 0),
        }
    }

    proptest! {
        /// A table rebuilt from the batches the live table let into the log answers every next
        /// batch exactly as the live table does (including the eviction past `producers_max`).
        #[test]
        fn a_rebuilt_table_answers_like_the_live_one(
            sends in proptest::collection::vec(send_strategy(), 1..80),
            probes in proptest::collection::vec(send_strategy(), 1..20),
            producers_max in 1usize..5,
        ) {
            let mut live = ProducerStateTable::new(producers_max);
            let mut log = Vec::new();
            // Per producer: epoch, next sequence, batches sent in this epoch.
            let mut model: HashMap<i64, (i16, i32, Vec<Sent>)> = HashMap::new();
            let mut offset = 0u64;
            for (pid, s) in sends {
                let (epoch, next, sent) = model.entry(pid).or_insert((0, 0, Vec::new()));
                let (e, f, l) = batch_for(s, *epoch, *next, sent);
                if live.check(pid, e, f, l) == Check::Append {
                    let count = (l - f) as u64 + 1;
                    live.on_append(pid, e, f, l, offset, offset + count - 1);
                    log.push(info(pid, e, f, l, offset));
                    offset += count;
                    if e != *epoch {
                        sent.clear();
                    }
                    *epoch = e;
                    *next = l + 1;
                    sent.push((e, f, l));
                }
            }
            let rebuilt = ProducerStateTable::rebuild(producers_max, log);
            prop_assert_eq!(rebuilt.len(), live.len());
            for (pid, s) in probes {
                let (epoch, next, sent) = model.get(&pid).cloned().unwrap_or((0, 0, Vec::new()));
                let (e, f, l) = batch_for(s, epoch, next, &sent);
                prop_assert_eq!(rebuilt.check(pid, e, f, l), live.check(pid, e, f, l), "{} {:?}", pid, s);
            }
        }
    }

    proptest! {
        /// Any retry of any of the last five batches is recognised with its original offset; the
        /// table never grows past its bound.
        #[test]
        fn the_last_five_batches_are_deduplicated(sizes in proptest::collection::vec(1i32..20, 1..30), retry in 0usize..5, producers in 1usize..3) {
            let mut t = ProducerStateTable::new(2);
            let mut seq = 0;
            let mut offset = 0u64;
            let mut log = Vec::new();
            for (i, n) in sizes.iter().enumerate() {
                let pid = (i % producers) as i64;
                if pid != 0 { t.on_append(pid + 100, 0, 0, 0, offset, offset); offset += 1; continue; }
                prop_assert_eq!(t.check(0, 0, seq, seq + n - 1), Check::Append);
                t.on_append(0, 0, seq, seq + n - 1, offset, offset + *n as u64 - 1);
                log.push((seq, seq + n - 1, offset));
                offset += *n as u64;
                seq += n;
                prop_assert!(t.len() <= 2);
            }
            if let Some(&(f, l, o)) = log.iter().rev().nth(retry) {
                if t.producers.contains_key(&0) {
                    prop_assert_eq!(t.check(0, 0, f, l), Check::Duplicate { base_offset: o });
                }
            }
        }
    }
}
