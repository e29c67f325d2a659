//! One partition's transaction state (KIP-98), sans-IO: the open transaction of each producer id,
//! the transactions completed but not yet below the high watermark, the aborted transactions a
//! read_committed fetch must report, and the last stable offset (LSO) derived from them.
//!
//! Owns only offsets and producer ids: the partition feeds it every appended data batch and
//! control batch (marker), every high-watermark move, truncation and log-start move, in log order.
//! Promises:
//! - `last_stable_offset(hw)` is `min(hw, first offset of every open transaction, first offset of
//!   every completed transaction whose marker is at or above hw)`, never above `hw`, in
//!   O(log n) when `hw` is the high watermark last given to [`PartitionTxns::on_high_watermark`];
//! - aborted transactions are kept in marker order, at most `aborted_max` of them (the oldest are
//!   dropped past it and counted in [`PartitionTxns::aborted_dropped`]);
//! - no sequence of calls panics: inputs that break the log's rules (offsets going back, a
//!   truncation below the high watermark) give a defined, documented result instead.
//!
//! It never checks producer epochs or sequences (the producer-state table does), never reads or
//! writes the log, and has no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// One aborted transaction, as a read_committed fetch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: u64,
    /// The abort marker's offset.
    pub last_offset: u64,
}

/// A transaction of one producer that has data in this partition and no marker yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: u64,
}

/// See the module doc.
#[derive(Debug, Clone)]
pub struct PartitionTxns {
    /// Open transactions by producer id: at most one each.
    open: HashMap<i64, OpenTxn>,
    /// The same, ordered by (first_offset, producer_id), for the LSO.
    open_by_first: BTreeSet<(u64, i64)>,
    /// Completed transactions whose marker is at or above `hw`, by (marker offset, producer id):
    /// they still hold the LSO back, and a truncation below the marker opens them again.
    completing: BTreeMap<(u64, i64), OpenTxn>,
    /// The same, ordered by (first_offset, marker offset, producer_id), for the LSO.
    completing_by_first: BTreeSet<(u64, u64, i64)>,
    /// Aborted transactions, ordered by `last_offset` (markers are appended in log order).
    aborted: VecDeque<AbortedTxn>,
    aborted_max: usize,
    aborted_dropped: u64,
    /// The highest high watermark given to `on_high_watermark` (lowered only by a truncation
    /// below it, which the log's rules forbid).
    hw: u64,
}

impl PartitionTxns {
    /// Empty state keeping at most `aborted_max` aborted transactions.
    pub fn new(aborted_max: usize) -> Self {
        Self {
            open: HashMap::new(),
            open_by_first: BTreeSet::new(),
            completing: BTreeMap::new(),
            completing_by_first: BTreeSet::new(),
            aborted: VecDeque::new(),
            aborted_max,
            aborted_dropped: 0,
            hw: 0,
        }
    }

    /// A data batch was appended at [base_offset, last_offset]. Non-transactional batches and
    /// producer_id < 0 change nothing. A transactional batch of a producer with no open
    /// transaction opens one at base_offset. A batch with `last_offset < base_offset` is not a
    /// batch the log can hold, and changes nothing either.
    pub fn on_batch(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        transactional: bool,
        base_offset: u64,
        last_offset: u64,
    ) {
        if !transactional || producer_id < 0 || last_offset < base_offset {
            return;
        }
        if self.open.contains_key(&producer_id) {
            // Later batches of the same transaction: it began earlier, the LSO does not move.
            return;
        }
        self.insert_open(OpenTxn {
            producer_id,
            producer_epoch,
            first_offset: base_offset,
        });
    }

    /// A commit (commit=true) or abort marker (a control batch) of producer_id was appended at
    /// `offset`. It ends the producer's open transaction (whatever the epochs; the partition
    /// checks epochs elsewhere); an abort adds `AbortedTxn{first_offset, last_offset: offset}`.
    /// A marker for a producer with no open transaction changes nothing (markers are retried).
    pub fn on_marker(&mut self, producer_id: i64, producer_epoch: i16, commit: bool, offset: u64) {
        // The epoch was checked by the producer-state table before the marker was appended.
        let _ = producer_epoch;
        let Some(txn) = self.remove_open(producer_id) else {
            return;
        };
        if !commit {
            self.push_aborted(AbortedTxn {
                producer_id,
                first_offset: txn.first_offset,
                last_offset: offset,
            });
        }
        // A marker already below the high watermark (only if the caller appended below it)
        // holds nothing back, so it is not kept.
        if offset >= self.hw {
            self.insert_completing(offset, txn);
        }
    }

    /// The high watermark is `hw`: completed transactions whose marker is below it no longer
    /// hold the LSO back, and are forgotten. A lower `hw` than before changes nothing.
    pub fn on_high_watermark(&mut self, hw: u64) {
        self.hw = self.hw.max(hw);
        while let Some(entry) = self.completing.first_entry() {
            let (marker_offset, producer_id) = *entry.key();
            if marker_offset >= self.hw {
                break;
            }
            let done = entry.remove();
            self.completing_by_first
                .remove(&(done.first_offset, marker_offset, producer_id));
        }
        debug_assert_eq!(self.completing.len(), self.completing_by_first.len());
    }

    /// `min(hw, first offset of every open transaction, first offset of every completed
    /// transaction whose marker offset >= hw)`. Never above `hw`. Completed transactions whose
    /// marker was below a high watermark already given to `on_high_watermark` are forgotten, so
    /// `hw` should be at least that one (the high watermark never goes back).
    pub fn last_stable_offset(&self, hw: u64) -> u64 {
        let mut lso = hw;
        if let Some(&(first_offset, _)) = self.open_by_first.first() {
            lso = lso.min(first_offset);
        }
        // In first-offset order, the first one still unstable at `hw` decides; with `hw` equal
        // to the last `on_high_watermark`, that is the first entry.
        for &(first_offset, marker_offset, _) in &self.completing_by_first {
            if first_offset >= lso {
                break;
            }
            if marker_offset >= hw {
                lso = first_offset;
                break;
            }
        }
        debug_assert!(lso <= hw);
        lso
    }

    /// Aborted transactions a read_committed fetch of [from, to) must report: `last_offset >=
    /// from` and `first_offset < to`, ordered by first_offset (then producer id). At most `max`
    /// of them (the earliest).
    pub fn aborted(&self, from: u64, to: u64, max: usize) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        let mut out: Vec<AbortedTxn> = self
            .aborted
            .range(start..)
            .filter(|a| a.first_offset < to)
            .copied()
            .collect();
        out.sort_unstable_by_key(|a| (a.first_offset, a.producer_id));
        out.truncate(max);
        out
    }

    /// The log says `producer_id`'s transaction is open since `first_offset` (its first batch may
    /// lie before what the caller replayed): opens it there, or moves an open one's first offset
    /// down to it. An open transaction beginning at or before `first_offset` stays as it is.
    pub fn seed_open(&mut self, producer_id: i64, producer_epoch: i16, first_offset: u64) {
        if producer_id < 0 {
            return;
        }
        match self.open.get(&producer_id) {
            Some(open) if open.first_offset <= first_offset => {}
            Some(open) => {
                let producer_epoch = open.producer_epoch;
                self.remove_open(producer_id);
                self.insert_open(OpenTxn {
                    producer_id,
                    producer_epoch,
                    first_offset,
                });
            }
            None => self.insert_open(OpenTxn {
                producer_id,
                producer_epoch,
                first_offset,
            }),
        }
    }

    pub fn open_txn(&self, producer_id: i64) -> Option<OpenTxn> {
        self.open.get(&producer_id).copied()
    }

    /// Open transactions ordered by first_offset (then producer id).
    pub fn open_txns(&self) -> impl Iterator<Item = &OpenTxn> + '_ {
        self.open_by_first
            .iter()
            .filter_map(|(_, producer_id)| self.open.get(producer_id))
    }

    pub fn aborted_count(&self) -> usize {
        self.aborted.len()
    }

    /// Aborted transactions dropped because more than `aborted_max` were kept; a read_committed
    /// fetch below the oldest kept one may then return aborted records.
    pub fn aborted_dropped(&self) -> u64 {
        self.aborted_dropped
    }

    /// The log was truncated: offsets >= end are gone (a follower truncating to its leader, or
    /// recovery of a torn tail). Open transactions that began at or after `end` vanish; a
    /// transaction whose marker was at or after `end` is open again (if it began before `end`),
    /// and its AbortedTxn entry is removed. Truncation is never below the high watermark passed
    /// to on_high_watermark, so completed transactions already below it may be forgotten (if it
    /// is, those stay completed, and the high watermark kept here drops to `end`).
    pub fn truncate_to(&mut self, end: u64) {
        let gone: Vec<i64> = self
            .open_by_first
            .range((end, i64::MIN)..)
            .map(|&(_, producer_id)| producer_id)
            .collect();
        for producer_id in gone {
            self.remove_open(producer_id);
        }
        let cut: Vec<(u64, i64)> = self
            .completing
            .range((end, i64::MIN)..)
            .map(|(key, _)| *key)
            .collect();
        // Oldest marker first: with the log's rules at most one per producer reopens.
        for key in cut {
            let Some(done) = self.remove_completing(key) else {
                continue;
            };
            if done.first_offset < end && !self.open.contains_key(&done.producer_id) {
                self.insert_open(done);
            }
        }
        while self.aborted.back().is_some_and(|a| a.last_offset >= end) {
            self.aborted.pop_back();
        }
        self.hw = self.hw.min(end);
    }

    /// Retention or DeleteRecords moved the log start: aborted transactions wholly below it
    /// (last_offset < log_start) are dropped. Open transactions stay: they still hold the LSO.
    pub fn trim_before(&mut self, log_start: u64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }

    fn insert_open(&mut self, txn: OpenTxn) {
        let previous = self.open.insert(txn.producer_id, txn);
        debug_assert!(previous.is_none(), "one open transaction per producer");
        self.open_by_first
            .insert((txn.first_offset, txn.producer_id));
        debug_assert_eq!(self.open.len(), self.open_by_first.len());
    }

    fn remove_open(&mut self, producer_id: i64) -> Option<OpenTxn> {
        let txn = self.open.remove(&producer_id)?;
        let was_there = self.open_by_first.remove(&(txn.first_offset, producer_id));
        debug_assert!(was_there);
        debug_assert_eq!(self.open.len(), self.open_by_first.len());
        Some(txn)
    }

    fn insert_completing(&mut self, marker_offset: u64, done: OpenTxn) {
        let key = (marker_offset, done.producer_id);
        // Two markers of one producer at one offset only if the caller broke the log's rules:
        // the later one wins, and the index stays in step.
        self.remove_completing(key);
        self.completing_by_first
            .insert((done.first_offset, marker_offset, done.producer_id));
        self.completing.insert(key, done);
        debug_assert_eq!(self.completing.len(), self.completing_by_first.len());
    }

    fn remove_completing(&mut self, key: (u64, i64)) -> Option<OpenTxn> {
        let done = self.completing.remove(&key)?;
        self.completing_by_first
            .remove(&(done.first_offset, key.0, key.1));
        Some(done)
    }

    fn push_aborted(&mut self, entry: AbortedTxn) {
        // Markers come in log order, so this is the back; an out-of-order one is placed in order
        // so that range queries stay right.
        let at = self
            .aborted
            .partition_point(|a| a.last_offset <= entry.last_offset);
        self.aborted.insert(at, entry);
        while self.aborted.len() > self.aborted_max {
            self.aborted.pop_front();
            self.aborted_dropped += 1;
        }
    }

    /// Checks every invariant, in O(n): for tests.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        assert_eq!(self.open.len(), self.open_by_first.len());
        for &(first_offset, producer_id) in &self.open_by_first {
            let txn = self
                .open
                .get(&producer_id)
                .expect("indexed open txn exists");
            assert_eq!(
                (txn.first_offset, txn.producer_id),
                (first_offset, producer_id)
            );
        }
        assert_eq!(self.completing.len(), self.completing_by_first.len());
        for (&(marker_offset, producer_id), done) in &self.completing {
            assert!(
                marker_offset >= self.hw,
                "completed below the hw are forgotten"
            );
            assert!(self.completing_by_first.contains(&(
                done.first_offset,
                marker_offset,
                producer_id
            )));
        }
        assert!(self.aborted.len() <= self.aborted_max);
        assert!(self
            .aborted
            .iter()
            .zip(self.aborted.iter().skip(1))
            .all(|(a, b)| a.last_offset <= b.last_offset));
    }
}

#[cfg(test)]
#[path = "partition_txns_tests.rs"]
mod partition_txns_tests;
