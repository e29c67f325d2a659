//! What compaction knows of transactions: for each transactional batch of the segments being
//! cleaned, whether its transaction committed, aborted, or is not decided yet.
//!
//! Pure. Built by the log (`log::maintenance`) from what it already keeps: the transactions open
//! at the log end (`txn_tracker`) and the aborted transactions of its per-segment index
//! (`txn_index`), taken after the segments to clean were chosen, so every batch in them was
//! appended before that view. A transaction's batches precede its marker, and a marker in the log
//! is a decision the coordinator made durable before writing it (a truncated marker is written
//! again with the same outcome), so a batch of producer P at offset o is:
//! - [`TxnFate::Undecided`] when P has an open transaction whose first offset is at or below o;
//! - [`TxnFate::Aborted`] when an aborted transaction of P spans o (first offset ≤ o ≤ marker);
//! - [`TxnFate::Committed`] otherwise.
//!
//! When the view is incomplete — the log stopped tracking some open transactions
//! (`OPEN_TXNS_MAX`), or there were more aborted transactions than the view may hold — every
//! transactional batch is [`TxnFate::Unknown`], and compaction keeps it whole, as it did before
//! it knew anything of transactions.

use std::collections::HashMap;

use crate::txn_index::AbortedTxnEntry;
use crate::txn_tracker::OpenTxnEntry;

/// What became of one transactional batch's transaction (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnFate {
    Committed,
    Aborted,
    Undecided,
    Unknown,
}

/// See the module doc.
#[derive(Debug, Clone, Default)]
pub struct TxnOutcomes {
    /// False: nothing is known (every transactional batch is [`TxnFate::Unknown`]).
    known: bool,
    /// First offset of each producer's open transaction.
    open_from: HashMap<i64, u64>,
    /// Each producer's aborted transactions as (first offset, marker offset), sorted.
    aborted: HashMap<i64, Vec<(u64, u64)>>,
}

impl TxnOutcomes {
    /// Knows nothing: transactional batches are kept whole.
    pub fn unknown() -> Self {
        Self::default()
    }

    /// The view from the log's open transactions and aborted transactions (module docs);
    /// `complete` is false when either list may be missing some (then nothing is known).
    pub fn new(open: &[OpenTxnEntry], aborted: &[AbortedTxnEntry], complete: bool) -> Self {
        if !complete {
            return Self::unknown();
        }
        let open_from = open
            .iter()
            .map(|o| (o.producer_id, o.first_offset))
            .collect();
        let mut by_producer: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for a in aborted {
            by_producer
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        for ranges in by_producer.values_mut() {
            ranges.sort_unstable();
        }
        Self {
            known: true,
            open_from,
            aborted: by_producer,
        }
    }

    /// The fate of a transactional batch of `producer_id` starting at `base_offset`.
    pub fn fate(&self, producer_id: i64, base_offset: u64) -> TxnFate {
        if !self.known {
            return TxnFate::Unknown;
        }
        if self
            .open_from
            .get(&producer_id)
            .is_some_and(|&first| first <= base_offset)
        {
            return TxnFate::Undecided;
        }
        let Some(ranges) = self.aborted.get(&producer_id) else {
            return TxnFate::Committed;
        };
        // The last range starting at or below the batch is the only one that can span it (a
        // producer's transactions do not overlap).
        let i = ranges.partition_point(|&(first, _)| first <= base_offset);
        match i.checked_sub(1).map(|j| ranges[j]) {
            Some((_, marker)) if base_offset <= marker => TxnFate::Aborted,
            _ => TxnFate::Committed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aborted(producer_id: i64, first_offset: u64, last_offset: u64) -> AbortedTxnEntry {
        AbortedTxnEntry {
            producer_id,
            first_offset,
            last_offset,
        }
    }

    #[test]
    fn fates_follow_the_open_and_aborted_transactions() {
        let open = [OpenTxnEntry {
            producer_id: 1,
            producer_epoch: 0,
            first_offset: 50,
        }];
        let view = TxnOutcomes::new(&open, &[aborted(1, 10, 20), aborted(2, 5, 7)], true);
        assert_eq!(
            view.fate(1, 9),
            TxnFate::Committed,
            "before the aborted one"
        );
        assert_eq!(view.fate(1, 10), TxnFate::Aborted);
        assert_eq!(view.fate(1, 15), TxnFate::Aborted);
        assert_eq!(
            view.fate(1, 30),
            TxnFate::Committed,
            "between abort and open"
        );
        assert_eq!(view.fate(1, 50), TxnFate::Undecided);
        assert_eq!(view.fate(1, 70), TxnFate::Undecided);
        assert_eq!(view.fate(2, 6), TxnFate::Aborted);
        assert_eq!(view.fate(2, 8), TxnFate::Committed);
        assert_eq!(
            view.fate(3, 6),
            TxnFate::Committed,
            "no abort, nothing open"
        );
    }

    #[test]
    fn an_incomplete_view_knows_nothing() {
        let view = TxnOutcomes::new(&[], &[aborted(1, 10, 20)], false);
        assert_eq!(view.fate(1, 15), TxnFate::Unknown);
        assert_eq!(view.fate(2, 15), TxnFate::Unknown);
        assert_eq!(TxnOutcomes::unknown().fate(1, 0), TxnFate::Unknown);
    }
}
