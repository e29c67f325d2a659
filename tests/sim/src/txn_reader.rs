//! [`TxnReader`]: a read_committed consumer of every data partition.
//!
//! Owns: its position in each partition, and filtering a fetch the way Kafka's consumer does
//! (`CompletedFetch` under READ_COMMITTED): the fetch's aborted transactions (producer id, first
//! offset) in first-offset order; before each batch, every aborted transaction starting at or
//! before the batch's last offset marks its producer aborted; an abort marker of a producer
//! unmarks it; data batches of a marked producer are skipped; control batches are never
//! returned.
//! Promises: returns each record at most once, in offset order per partition.
//! Never does: check what it returns (the world hands it to [`crate::check_txn`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::txn_net::RecordTag;
use crate::txn_partition::{Entry, Fetched};

#[derive(Debug, Default)]
pub struct TxnReader {
    positions: BTreeMap<i32, u64>,
}

impl TxnReader {
    pub fn position(&self, partition: i32) -> u64 {
        self.positions.get(&partition).copied().unwrap_or(0)
    }

    /// The records of `fetched` (a fetch of `partition` from [`TxnReader::position`]) a
    /// read_committed consumer returns, with their offsets.
    pub fn consume(&mut self, partition: i32, fetched: Fetched) -> Vec<(u64, RecordTag)> {
        let mut aborted: Vec<_> = fetched.aborted;
        aborted.sort_by_key(|a| (a.first_offset, a.producer_id));
        let mut queue: VecDeque<_> = aborted.into();
        let mut aborted_producers = BTreeSet::new();
        let mut out = Vec::new();
        for e in &fetched.entries {
            while queue
                .front()
                .is_some_and(|a| a.first_offset <= e.last_offset())
            {
                let a = queue.pop_front().expect("checked");
                aborted_producers.insert(a.producer_id);
            }
            match e {
                Entry::Marker {
                    producer_id,
                    commit,
                    ..
                } => {
                    if !commit {
                        aborted_producers.remove(producer_id);
                    }
                }
                Entry::Data { base_offset, batch } => {
                    if aborted_producers.contains(&batch.producer_id) {
                        continue;
                    }
                    out.extend(
                        batch
                            .records
                            .iter()
                            .enumerate()
                            .map(|(i, tag)| (base_offset + i as u64, tag.clone())),
                    );
                }
            }
        }
        self.positions.insert(partition, fetched.next_offset);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn_net::DataBatch;
    use crate::txn_partition::TxnPartition;
    use spool_protocol::ErrorCode;

    fn batch(pid: i64, seq: i32, txn_no: u64) -> DataBatch {
        DataBatch {
            producer_id: pid,
            producer_epoch: 0,
            first_seq: seq,
            records: vec![RecordTag {
                transactional_id: format!("t{pid}"),
                txn_no,
            }],
        }
    }

    #[test]
    fn aborted_transactions_are_skipped_and_open_ones_wait_below_the_lso() {
        let mut p = TxnPartition::new(0);
        let ok = |_, _| ErrorCode::None;
        p.produce(batch(1, 0, 1), ok).0.unwrap(); // 0: t1 txn 1 (aborted)
        p.produce(batch(2, 0, 1), ok).0.unwrap(); // 1: t2 txn 1 (committed)
        p.produce(batch(1, 1, 1), ok).0.unwrap(); // 2: t1 txn 1
        assert_eq!(p.write_marker(1, 0, false, 0, 10).0, ErrorCode::None); // 3
        p.produce(batch(3, 0, 1), ok).0.unwrap(); // 4: t3 txn 1 (open)
        assert_eq!(p.write_marker(2, 0, true, 0, 11).0, ErrorCode::None); // 5
        assert_eq!(p.last_stable_offset(), 4, "t3 is open");
        let mut r = TxnReader::default();
        let got = r.consume(0, p.fetch(0));
        let offsets: Vec<u64> = got.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [1], "t1's aborted records are skipped");
        assert_eq!(r.position(0), 4);
        // After a crash the rebuilt leader says the same.
        p.crash();
        p.restart();
        assert_eq!(p.last_stable_offset(), 4);
        assert!(r.consume(0, p.fetch(4)).is_empty());
        assert_eq!(p.write_marker(3, 0, true, 0, 12).0, ErrorCode::None);
        let got = r.consume(0, p.fetch(4));
        let offsets: Vec<u64> = got.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [4]);
        // A rebuilt leader still fences a deposed coordinator's marker.
        p.crash();
        p.restart();
        assert_eq!(p.write_marker(3, 0, true, 1, 13).0, ErrorCode::None);
        assert_eq!(
            p.write_marker(3, 0, false, 0, 14).0,
            ErrorCode::TransactionCoordinatorFenced
        );
    }
}
