//! The checker of a `ctp` fault run ([`super::ctp_workload`]): the run's topic (the processor's
//! output) read with read_committed once every transaction is decided, and whole, against the
//! inputs.
//!
//! Promises checked, mapped onto the run's [`Report`]:
//! - lost: every input `c<i>` has its output `c<i>!` visible (once the processor finished;
//!   one that did not is `stalled`);
//! - duplicated: no output is visible twice — the point of committing the input offsets in the
//!   output's transaction: what a processor that started over wrote again was in a transaction
//!   that aborted, or its offsets had not moved;
//! - inconsistent: nothing visible is the output of no input; whatever read_committed shows is
//!   in the whole log at the same offset.
//!
//! Counted, not judged: outputs in the whole log beyond one per input (`rewritten`: written
//! again after a restart, hidden by their abort). Never panics on any input.

use std::collections::BTreeMap;

use super::check::Report;
use super::ctp_workload::{input_value, output_of, INPUTS};
use super::history::{CtpProgress, FinalLog};

/// Checks a `ctp` run (module docs); also returns how many outputs the whole log holds beyond
/// one per input.
pub fn check_ctp(visible: &FinalLog, whole: &FinalLog, progress: &CtpProgress) -> (Report, usize) {
    let mut report = Report::default();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let whole_at: BTreeMap<(&(String, i32), i64), &str> = whole
        .iter()
        .flat_map(|(tp, rs)| rs.iter().map(move |(o, v)| ((tp, *o), v.as_str())))
        .collect();
    for (tp, records) in visible {
        for (offset, value) in records {
            *seen.entry(value.as_str()).or_default() += 1;
            if whole_at.get(&(tp, *offset)) != Some(&value.as_str()) {
                report.inconsistent.push(format!(
                    "{value} read_committed at {}/{offset}, where the whole log holds {:?}",
                    tp.1,
                    whole_at.get(&(tp, *offset))
                ));
            }
        }
    }
    report.read_back = seen.values().sum();
    let outputs: BTreeMap<String, u64> = (0..INPUTS)
        .map(|i| (output_of(&input_value(i)), i))
        .collect();
    for (value, n) in &seen {
        if !outputs.contains_key(*value) {
            report
                .inconsistent
                .push(format!("{value} is visible but is the output of no input"));
        }
        if *n > 1 {
            report
                .duplicated
                .push(format!("{value} is visible {n} times"));
        }
    }
    report.acked_all = progress.committed_inputs as usize;
    if progress.finished {
        for value in outputs.keys() {
            if !seen.contains_key(value.as_str()) {
                report.lost.push(format!("{value} is not visible"));
            }
        }
    } else {
        report.stalled.push(format!(
            "the processor did not finish: {} transactions committed, {} restarts (last: {})",
            progress.committed_txns, progress.restarts, progress.last_restart
        ));
    }
    let in_whole = whole
        .values()
        .flatten()
        .filter(|(_, v)| outputs.contains_key(v))
        .count();
    (report, in_whole.saturating_sub(outputs.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> (String, i32) {
        ("out".to_string(), 0)
    }

    /// Every output once (and, in the whole log, `rewritten` more hidden copies).
    fn logs(rewritten: u64) -> (FinalLog, FinalLog) {
        let mut visible = Vec::new();
        let mut whole = Vec::new();
        let mut offset = 0i64;
        for i in 0..INPUTS {
            if i < rewritten {
                whole.push((offset, output_of(&input_value(i))));
                offset += 1;
            }
            whole.push((offset, output_of(&input_value(i))));
            visible.push((offset, output_of(&input_value(i))));
            offset += 1;
        }
        (
            FinalLog::from([(tp(), visible)]),
            FinalLog::from([(tp(), whole)]),
        )
    }

    fn finished() -> CtpProgress {
        CtpProgress {
            finished: true,
            ..CtpProgress::default()
        }
    }

    #[test]
    fn every_output_once_passes_and_hidden_rewrites_are_counted() {
        let (visible, whole) = logs(7);
        let (r, rewritten) = check_ctp(&visible, &whole, &finished());
        assert_eq!(r.violations(), 0, "{r:?}");
        assert_eq!(rewritten, 7);
    }

    /// The planted bug: the whole log read as if it were read_committed shows the rewrites.
    #[test]
    fn rewrites_visible_are_duplicates() {
        let (_, whole) = logs(3);
        let (r, _) = check_ctp(&whole, &whole, &finished());
        assert_eq!(r.duplicated.len(), 3, "{r:?}");
        assert_eq!(r.violations(), 3);
    }

    #[test]
    fn a_missing_output_is_lost_and_an_unfinished_processor_stalled() {
        let (mut visible, whole) = logs(0);
        visible.get_mut(&tp()).unwrap().remove(5);
        let (r, _) = check_ctp(&visible, &whole, &finished());
        assert_eq!(
            r.lost,
            vec![format!("{} is not visible", output_of(&input_value(5)))]
        );
        let (r, _) = check_ctp(&visible, &whole, &CtpProgress::default());
        assert!(r.lost.is_empty() && r.stalled.len() == 1, "{r:?}");
    }

    #[test]
    fn strangers_and_disagreements_are_inconsistent() {
        let (mut visible, mut whole) = logs(0);
        let next = INPUTS as i64;
        for log in [&mut visible, &mut whole] {
            log.get_mut(&tp()).unwrap().push((next, "c99999!".into()));
        }
        whole.get_mut(&tp()).unwrap()[0].1 = "other".into();
        let (r, _) = check_ctp(&visible, &whole, &finished());
        assert_eq!(r.inconsistent.len(), 2, "{r:?}");
    }
}
