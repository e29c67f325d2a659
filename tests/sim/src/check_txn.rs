//! [`TxnChecks`]: the transaction world's four invariants, checked as the world's history
//! comes in (every durable coordinator record, every partition append, every LSO, every record
//! a read_committed reader returns).
//!
//! - [`TXN_COMMIT_MARKER_IN_EVERY_PARTITION`]: when a CompleteCommit record is durable, every
//!   partition of the transaction's PrepareCommit record holds a commit marker of its producer
//!   id and epoch appended since that PrepareCommit;
//! - [`TXN_READ_COMMITTED_SEES_NO_ABORTED`]: no record a read_committed reader returns belongs
//!   to a transaction the coordinator decided to abort (decided before or after the read);
//! - [`TXN_LSO_NEVER_DECREASES`]: a partition's last stable offset never goes down, crashes and
//!   rebuilds included;
//! - [`TXN_FENCED_EPOCH_NEVER_WRITES`]: once a partition appended a batch or marker of producer
//!   epoch E, it never appends a data batch of that producer id at an epoch below E.
//!
//! Ground truth: each record carries its [`RecordTag`] (transactional id and transaction number),
//! and the coordinator's decision on transaction number n of an id is its durable PrepareCommit
//! or PrepareAbort record (the host numbers them, [`crate::txn_coord`]).
//! Promises: each method returns the first violation it sees; nothing here changes the world.
//! Never does: look at spool-core's structs (only at what the world reports).

use std::collections::{BTreeMap, BTreeSet};

use spool_core::txn::{TxnMetadata, TxnState};

use crate::txn_net::RecordTag;
use crate::txn_partition::Appended;
use crate::violation::{
    Violation, TXN_COMMIT_MARKER_IN_EVERY_PARTITION, TXN_FENCED_EPOCH_NEVER_WRITES,
    TXN_LSO_NEVER_DECREASES, TXN_READ_COMMITTED_SEES_NO_ABORTED,
};

/// What the world's transactions did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnStats {
    pub committed: u64,
    pub aborted: u64,
    pub data_batches: u64,
    pub markers: u64,
    pub records_read: u64,
    /// Late copies of a marker (from the current coordinator, for a transaction older than the
    /// one its partition last marked or opened since) that a partition refused.
    pub late_markers_refused: u64,
}

impl TxnStats {
    pub fn add(&mut self, o: &TxnStats) {
        self.committed += o.committed;
        self.aborted += o.aborted;
        self.data_batches += o.data_batches;
        self.markers += o.markers;
        self.records_read += o.records_read;
        self.late_markers_refused += o.late_markers_refused;
    }
}

#[derive(Debug)]
struct Prepared {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    partitions: BTreeSet<i32>,
    /// Partitions holding this transaction's marker since it was prepared.
    marked: BTreeSet<i32>,
}

#[derive(Debug, Default)]
pub struct TxnChecks {
    /// (id, transaction number) → committed.
    decided: BTreeMap<(String, u64), bool>,
    prepared: BTreeMap<String, Prepared>,
    /// Records read before their transaction was decided.
    read_undecided: BTreeSet<(String, u64)>,
    lso: BTreeMap<i32, u64>,
    /// (partition, producer id) → the highest epoch appended.
    epochs: BTreeMap<(i32, i64), i16>,
    pub stats: TxnStats,
}

impl TxnChecks {
    /// A coordinator record became durable; `txn_no` is its id's transaction number.
    /// `partition_of` names a data partition from the record's topic-partitions.
    pub fn on_durable(&mut self, m: &TxnMetadata, txn_no: u64) -> Result<(), Violation> {
        let id = &m.transactional_id;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                let commit = m.state == TxnState::PrepareCommit;
                self.decided.insert((id.clone(), txn_no), commit);
                self.prepared.insert(
                    id.clone(),
                    Prepared {
                        producer_id: m.producer_id,
                        producer_epoch: m.producer_epoch,
                        commit,
                        partitions: m.partitions.iter().map(|tp| tp.partition).collect(),
                        marked: BTreeSet::new(),
                    },
                );
                if !commit && self.read_undecided.contains(&(id.clone(), txn_no)) {
                    return Err(Violation::new(
                        TXN_READ_COMMITTED_SEES_NO_ABORTED,
                        format!("{id} transaction {txn_no} was read, then aborted"),
                    ));
                }
            }
            TxnState::CompleteCommit => {
                self.stats.committed += 1;
                let Some(p) = self.prepared.remove(id) else {
                    return Err(Violation::new(
                        TXN_COMMIT_MARKER_IN_EVERY_PARTITION,
                        format!("{id} completed a commit it never prepared"),
                    ));
                };
                let missing: Vec<i32> = p.partitions.difference(&p.marked).copied().collect();
                if !p.commit || !missing.is_empty() {
                    return Err(Violation::new(
                        TXN_COMMIT_MARKER_IN_EVERY_PARTITION,
                        format!(
                            "{id} transaction {txn_no} (producer {} epoch {}) committed over \
                             partitions {:?} without a commit marker in {missing:?}",
                            p.producer_id, p.producer_epoch, p.partitions
                        ),
                    ));
                }
            }
            TxnState::CompleteAbort => {
                self.stats.aborted += 1;
                self.prepared.remove(id);
            }
            _ => {}
        }
        Ok(())
    }

    /// Partition `partition` appended `a`.
    pub fn on_append(&mut self, partition: i32, a: &Appended) -> Result<(), Violation> {
        match a {
            Appended::Data {
                producer_id,
                producer_epoch,
                base_offset,
                ..
            } => {
                self.stats.data_batches += 1;
                let highest = self.epochs.entry((partition, *producer_id)).or_insert(-1);
                if *producer_epoch < *highest {
                    return Err(Violation::new(
                        TXN_FENCED_EPOCH_NEVER_WRITES,
                        format!(
                            "p{partition} appended producer {producer_id} epoch {producer_epoch} \
                             at {base_offset} after epoch {highest}"
                        ),
                    ));
                }
                *highest = *producer_epoch;
            }
            Appended::Marker {
                producer_id,
                producer_epoch,
                commit,
                ..
            } => {
                self.stats.markers += 1;
                let highest = self.epochs.entry((partition, *producer_id)).or_insert(-1);
                *highest = (*highest).max(*producer_epoch);
                for p in self.prepared.values_mut() {
                    if (p.producer_id, p.producer_epoch, p.commit)
                        == (*producer_id, *producer_epoch, *commit)
                    {
                        p.marked.insert(partition);
                    }
                }
            }
        }
        Ok(())
    }

    /// Partition `partition`'s last stable offset is `lso`.
    pub fn on_lso(&mut self, partition: i32, lso: u64) -> Result<(), Violation> {
        let last = self.lso.entry(partition).or_insert(0);
        if lso < *last {
            return Err(Violation::new(
                TXN_LSO_NEVER_DECREASES,
                format!("p{partition} LSO {lso} after {last}"),
            ));
        }
        *last = lso;
        Ok(())
    }

    /// A read_committed reader returned the record at `offset` of `partition`.
    pub fn on_read(
        &mut self,
        partition: i32,
        offset: u64,
        tag: &RecordTag,
    ) -> Result<(), Violation> {
        self.stats.records_read += 1;
        let key = (tag.transactional_id.clone(), tag.txn_no);
        match self.decided.get(&key) {
            Some(false) => Err(Violation::new(
                TXN_READ_COMMITTED_SEES_NO_ABORTED,
                format!(
                    "p{partition} offset {offset}: {} transaction {} was aborted",
                    tag.transactional_id, tag.txn_no
                ),
            )),
            Some(true) => Ok(()),
            None => {
                self.read_undecided.insert(key);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_core::TopicPartition;

    fn record(state: TxnState, partitions: &[i32]) -> TxnMetadata {
        let mut m = TxnMetadata::new("t", 7, 1000, 0);
        m.producer_epoch = 2;
        m.state = state;
        m.partitions = partitions
            .iter()
            .map(|&p| TopicPartition::new("data", p))
            .collect();
        m
    }

    fn marker(commit: bool, epoch: i16) -> Appended {
        Appended::Marker {
            producer_id: 7,
            producer_epoch: epoch,
            commit,
            offset: 9,
        }
    }

    fn data(epoch: i16) -> Appended {
        Appended::Data {
            producer_id: 7,
            producer_epoch: epoch,
            base_offset: 3,
            records: Vec::new(),
        }
    }

    #[test]
    fn a_commit_missing_a_partitions_marker_is_caught() {
        let mut c = TxnChecks::default();
        c.on_durable(&record(TxnState::PrepareCommit, &[0, 2]), 1)
            .unwrap();
        c.on_append(0, &marker(true, 2)).unwrap();
        c.on_append(2, &marker(false, 2)).unwrap();
        let v = c
            .on_durable(&record(TxnState::CompleteCommit, &[]), 1)
            .unwrap_err();
        assert_eq!(v.invariant, TXN_COMMIT_MARKER_IN_EVERY_PARTITION, "{v}");
        assert!(v.detail.contains("[2]"), "{v}");

        let mut c = TxnChecks::default();
        c.on_durable(&record(TxnState::PrepareCommit, &[0, 2]), 1)
            .unwrap();
        c.on_append(2, &marker(true, 2)).unwrap();
        c.on_append(0, &marker(true, 2)).unwrap();
        c.on_durable(&record(TxnState::CompleteCommit, &[]), 1)
            .unwrap();
        assert_eq!(c.stats.committed, 1);
    }

    #[test]
    fn a_marker_written_before_the_prepare_does_not_count() {
        let mut c = TxnChecks::default();
        c.on_append(1, &marker(true, 2)).unwrap();
        c.on_durable(&record(TxnState::PrepareCommit, &[1]), 4)
            .unwrap();
        let v = c
            .on_durable(&record(TxnState::CompleteCommit, &[]), 4)
            .unwrap_err();
        assert_eq!(v.invariant, TXN_COMMIT_MARKER_IN_EVERY_PARTITION);
    }

    #[test]
    fn a_reader_seeing_an_aborted_record_is_caught_before_or_after_the_decision() {
        let tag = |n| RecordTag {
            transactional_id: "t".into(),
            txn_no: n,
        };
        let mut c = TxnChecks::default();
        c.on_durable(&record(TxnState::PrepareAbort, &[0]), 3)
            .unwrap();
        let v = c.on_read(0, 5, &tag(3)).unwrap_err();
        assert_eq!(v.invariant, TXN_READ_COMMITTED_SEES_NO_ABORTED, "{v}");

        let mut c = TxnChecks::default();
        c.on_read(0, 5, &tag(3)).unwrap();
        let v = c
            .on_durable(&record(TxnState::PrepareAbort, &[0]), 3)
            .unwrap_err();
        assert_eq!(v.invariant, TXN_READ_COMMITTED_SEES_NO_ABORTED, "{v}");

        let mut c = TxnChecks::default();
        c.on_read(0, 5, &tag(4)).unwrap();
        c.on_durable(&record(TxnState::PrepareCommit, &[0]), 4)
            .unwrap();
        c.on_read(0, 6, &tag(4)).unwrap();
        c.on_durable(&record(TxnState::PrepareAbort, &[0]), 5)
            .unwrap();
    }

    #[test]
    fn a_decreasing_lso_is_caught() {
        let mut c = TxnChecks::default();
        c.on_lso(1, 5).unwrap();
        c.on_lso(1, 5).unwrap();
        c.on_lso(0, 2).unwrap();
        let v = c.on_lso(1, 3).unwrap_err();
        assert_eq!(v.invariant, TXN_LSO_NEVER_DECREASES, "{v}");
    }

    #[test]
    fn an_old_epoch_appended_after_a_newer_one_is_caught() {
        let mut c = TxnChecks::default();
        c.on_append(0, &data(2)).unwrap();
        c.on_append(1, &data(1)).unwrap();
        c.on_append(0, &marker(false, 3)).unwrap();
        c.on_append(1, &data(1)).unwrap();
        let v = c.on_append(0, &data(2)).unwrap_err();
        assert_eq!(v.invariant, TXN_FENCED_EPOCH_NEVER_WRITES, "{v}");
        let v = c.on_append(1, &data(0)).unwrap_err();
        assert_eq!(v.invariant, TXN_FENCED_EPOCH_NEVER_WRITES, "{v}");
    }
}
