//! The checker of a `txn` fault run: the transactions the producers ran ([`TxnAttempt`])
//! against the topic as a read_committed reader sees it once the cluster has healed and every
//! transaction is decided, and against the whole log (read_uncommitted).
//!
//! Promises checked, each violation its own readable line, mapped onto the run's [`Report`] so
//! a campaign counts them with the other workloads' (`lost`, `duplicated`, `inconsistent`,
//! `stalled`):
//! - lost: every record of a transaction whose commit returned Ok is read_committed-visible;
//! - duplicated: no value is visible twice;
//! - inconsistent:
//!   - no record of a transaction its producer aborted is visible (whether its
//!     abort_transaction returned Ok or not: commit was never asked for);
//!   - a transaction whose commit failed is visible whole or not at all, never in part;
//!   - nothing is visible that no transaction wrote;
//!   - whatever read_committed shows is in the whole log at the same offset.
//! - stalled (liveness): every producer committed at least one transaction.
//!
//! Counted, not judged: transactions committed, aborted and unknown, and the aborted
//! transactions' records the whole log holds (`aborted_in_log`) — the records read_committed
//! had to hide; a run where none exist proves less. Never panics on any input.

use std::collections::{BTreeMap, BTreeSet};

use super::check::Report;
use super::history::{parse_txn_value, FinalLog, History, Tp, TxnAttempt, TxnOutcome};

/// A partition and an offset in it.
type Place<'a> = (&'a Tp, i64);

/// Counts of one `txn` run (beside its [`Report`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnCounts {
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Records of aborted transactions in the whole (read_uncommitted) log.
    pub aborted_in_log: usize,
    /// Each producer's longest stretch without a commit (filled by the runner).
    pub longest_gap_ms_by_producer: Vec<u64>,
}

impl TxnCounts {
    pub fn summary(&self) -> String {
        format!(
            "txn_committed={} txn_aborted={} txn_unknown={} txn_aborted_records_in_log={} txn_longest_gap_ms_by_producer={:?}",
            self.committed,
            self.aborted,
            self.unknown,
            self.aborted_in_log,
            self.longest_gap_ms_by_producer
        )
    }
}

/// Checks a `txn` run (module docs): `visible` is the topic read with read_committed, `whole`
/// read with read_uncommitted; `producers` how many producers ran.
pub fn check_txns(
    txns: &[TxnAttempt],
    visible: &FinalLog,
    whole: &FinalLog,
    producers: u32,
) -> (Report, TxnCounts) {
    let mut report = Report::default();
    let mut counts = TxnCounts::default();
    // Where each value is visible.
    let mut seen: BTreeMap<&str, Vec<Place<'_>>> = BTreeMap::new();
    for (tp, records) in visible {
        for (offset, value) in records {
            seen.entry(value.as_str()).or_default().push((tp, *offset));
        }
    }
    report.read_back = seen.values().map(Vec::len).sum();
    let whole_at: BTreeMap<(&(String, i32), i64), &str> = whole
        .iter()
        .flat_map(|(tp, rs)| rs.iter().map(move |(o, v)| ((tp, *o), v.as_str())))
        .collect();
    for (value, places) in &seen {
        if places.len() > 1 {
            report.duplicated.push(format!(
                "{value} is visible {} times: {places:?}",
                places.len()
            ));
        }
        for &(tp, offset) in places {
            if whole_at.get(&(tp, offset)) != Some(value) {
                report.inconsistent.push(format!(
                    "{value} read_committed at {}/{offset}, where the whole log holds {:?}",
                    tp.1,
                    whole_at.get(&(tp, offset))
                ));
            }
        }
    }
    let attempts: BTreeMap<(u32, u64), &TxnAttempt> =
        txns.iter().map(|t| ((t.producer, t.txn), t)).collect();
    for value in seen.keys() {
        let known = parse_txn_value(value)
            .and_then(|(p, t, i)| attempts.get(&(p, t)).filter(|a| i < a.records));
        if known.is_none() {
            report
                .inconsistent
                .push(format!("{value} is visible but no transaction wrote it"));
        }
    }
    let aborted: BTreeSet<(u32, u64)> = txns
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Aborted)
        .map(|t| (t.producer, t.txn))
        .collect();
    counts.aborted_in_log = whole
        .values()
        .flatten()
        .filter_map(|(_, v)| parse_txn_value(v))
        .filter(|(p, t, _)| aborted.contains(&(*p, *t)))
        .count();
    let mut committing = BTreeSet::new();
    for t in txns {
        let visible_here = (0..t.records)
            .filter(|i| {
                seen.contains_key(super::history::txn_value(t.producer, t.txn, *i).as_str())
            })
            .count() as u64;
        let name = format!("producer {} transaction {}", t.producer, t.txn);
        match &t.outcome {
            TxnOutcome::Committed => {
                counts.committed += 1;
                report.acked_all += t.records as usize;
                committing.insert(t.producer);
                if visible_here < t.records {
                    report.lost.push(format!(
                        "{name} was committed at {} ms, but only {visible_here} of its {} records are visible",
                        t.done_ms, t.records
                    ));
                }
            }
            TxnOutcome::Aborted => {
                counts.aborted += 1;
                if visible_here > 0 {
                    report.inconsistent.push(format!(
                        "{name} was aborted at {} ms, but {visible_here} of its {} records are visible",
                        t.done_ms, t.records
                    ));
                }
            }
            TxnOutcome::Unknown { error } => {
                counts.unknown += 1;
                report.not_acked += t.records as usize;
                if visible_here > 0 && visible_here < t.records {
                    report.inconsistent.push(format!(
                        "{name} (commit failed: {error}) is visible in part: {visible_here} of {} records",
                        t.records
                    ));
                }
            }
        }
    }
    for p in 0..producers {
        if !committing.contains(&p) {
            report
                .stalled
                .push(format!("producer {p} committed no transaction"));
        }
    }
    (report, counts)
}

/// The longest stretch of the workload without a committed transaction (its availability), of
/// every producer together (`None`) or of one.
pub fn longest_gap_ms(history: &History, producer: Option<u32>) -> u64 {
    let mut times: Vec<u64> = history
        .txns
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Committed)
        .filter(|t| producer.is_none_or(|p| p == t.producer))
        .map(|t| t.done_ms)
        .collect();
    times.sort_unstable();
    let mut last = 0;
    let mut gap = 0;
    for t in times {
        gap = gap.max(t.saturating_sub(last));
        last = t;
    }
    gap
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::history::txn_value;

    fn attempt(producer: u32, txn: u64, records: u64, outcome: TxnOutcome) -> TxnAttempt {
        TxnAttempt {
            producer,
            txn,
            records,
            outcome,
            done_ms: 10 * txn,
        }
    }

    /// A whole log holding `txns`' records (every one, in order, round-robin over 2 partitions)
    /// and the read_committed view of it: the committed ones, and the unknown ones that
    /// `unknown_visible` says committed.
    fn logs(txns: &[TxnAttempt], unknown_visible: bool) -> (FinalLog, FinalLog) {
        let mut whole = FinalLog::new();
        let mut visible = FinalLog::new();
        for t in txns {
            for i in 0..t.records {
                let tp = ("q".to_string(), (i % 2) as i32);
                let at = whole.entry(tp.clone()).or_default();
                let offset = at.len() as i64;
                let v = txn_value(t.producer, t.txn, i);
                at.push((offset, v.clone()));
                let shows = match t.outcome {
                    TxnOutcome::Committed => true,
                    TxnOutcome::Aborted => false,
                    TxnOutcome::Unknown { .. } => unknown_visible,
                };
                if shows {
                    visible.entry(tp).or_default().push((offset, v));
                }
            }
        }
        (visible, whole)
    }

    fn unknown() -> TxnOutcome {
        TxnOutcome::Unknown {
            error: "timed out".into(),
        }
    }

    fn history() -> Vec<TxnAttempt> {
        vec![
            attempt(0, 0, 4, TxnOutcome::Committed),
            attempt(0, 1, 4, TxnOutcome::Aborted),
            attempt(1, 0, 3, TxnOutcome::Committed),
            attempt(1, 1, 3, unknown()),
        ]
    }

    #[test]
    fn a_clean_history_passes_either_way_an_unknown_commit_went() {
        let txns = history();
        for unknown_visible in [false, true] {
            let (visible, whole) = logs(&txns, unknown_visible);
            let (r, c) = check_txns(&txns, &visible, &whole, 2);
            assert_eq!(r.violations(), 0, "{r:?}");
            assert_eq!((c.committed, c.aborted, c.unknown), (2, 1, 1));
            assert_eq!(c.aborted_in_log, 4);
            assert_eq!(r.acked_all, 7);
        }
    }

    /// The negative control: the whole log read as if it were read_committed shows the aborted
    /// transaction, and the checker says so.
    #[test]
    fn aborted_records_visible_are_caught() {
        let txns = history();
        let (_, whole) = logs(&txns, false);
        let (r, _) = check_txns(&txns, &whole, &whole, 2);
        assert_eq!(r.inconsistent.len(), 1, "{r:?}");
        assert!(r.inconsistent[0].contains("producer 0 transaction 1 was aborted"));
        assert_eq!(r.violations(), 1);
    }

    #[test]
    fn a_committed_record_missing_is_lost() {
        let txns = history();
        let (mut visible, whole) = logs(&txns, false);
        visible.get_mut(&("q".to_string(), 1)).unwrap().remove(0);
        let (r, _) = check_txns(&txns, &visible, &whole, 2);
        assert_eq!(r.lost.len(), 1, "{r:?}");
        assert!(r.lost[0].contains("producer 0 transaction 0"), "{r:?}");
    }

    #[test]
    fn an_unknown_transaction_seen_in_part_is_caught() {
        let txns = history();
        let (mut visible, whole) = logs(&txns, true);
        // Hide one record of producer 1's unknown transaction.
        let p0 = visible.get_mut(&("q".to_string(), 0)).unwrap();
        let at = p0
            .iter()
            .position(|(_, v)| v == &txn_value(1, 1, 0))
            .unwrap();
        p0.remove(at);
        let (r, _) = check_txns(&txns, &visible, &whole, 2);
        assert_eq!(r.inconsistent.len(), 1, "{r:?}");
        assert!(r.inconsistent[0].contains("visible in part"), "{r:?}");
    }

    #[test]
    fn duplicates_strangers_and_disagreements_are_caught() {
        let txns = history();
        let (mut visible, mut whole) = logs(&txns, false);
        let p0 = ("q".to_string(), 0);
        let dup = txn_value(0, 0, 0);
        let stranger = txn_value(7, 0, 0);
        let next = whole[&p0].len() as i64 + 10;
        for log in [&mut visible, &mut whole] {
            let at = log.get_mut(&p0).unwrap();
            at.push((next, dup.clone()));
            at.push((next + 1, stranger.clone()));
        }
        // The whole log disagrees with what read_committed showed at one offset.
        whole.get_mut(&p0).unwrap()[0].1 = "something else".into();
        let (r, _) = check_txns(&txns, &visible, &whole, 2);
        assert_eq!(r.duplicated.len(), 1, "{r:?}");
        assert_eq!(
            r.inconsistent.len(),
            2,
            "a stranger and a disagreement: {r:?}"
        );
    }

    #[test]
    fn a_producer_without_a_commit_stalled() {
        let txns = vec![attempt(0, 0, 2, TxnOutcome::Committed)];
        let (visible, whole) = logs(&txns, false);
        let (r, _) = check_txns(&txns, &visible, &whole, 2);
        assert_eq!(
            r.stalled,
            vec!["producer 1 committed no transaction".to_string()]
        );
    }
}
