//! Tests of one partition's transaction state: each rule by hand, then random logs against a
//! brute-force model that recomputes everything from the list of appended batches and markers.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{AbortedTxn, OpenTxn, PartitionTxns};

const P1: i64 = 1;
const P2: i64 = 2;

fn aborted(producer_id: i64, first_offset: u64, last_offset: u64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
    }
}

fn open_txn(producer_id: i64, producer_epoch: i16, first_offset: u64) -> OpenTxn {
    OpenTxn {
        producer_id,
        producer_epoch,
        first_offset,
    }
}

#[test]
fn a_transactional_batch_opens_a_txn_that_a_commit_ends_and_an_abort_records() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 4, true, 0, 2);
    t.on_batch(P1, 4, true, 3, 5);
    assert_eq!(
        t.open_txn(P1),
        Some(open_txn(P1, 4, 0)),
        "opened at its first batch"
    );
    t.on_marker(P1, 4, true, 6);
    assert_eq!(t.open_txn(P1), None);
    assert_eq!(t.aborted_count(), 0, "a commit records nothing");

    t.on_batch(P1, 4, true, 7, 7);
    t.on_marker(P1, 4, false, 8);
    assert_eq!(t.open_txn(P1), None);
    assert_eq!(t.aborted(0, 100, 10), vec![aborted(P1, 7, 8)]);
}

#[test]
fn non_transactional_batches_and_producers_without_an_id_change_nothing() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, false, 0, 4);
    t.on_batch(-1, -1, true, 5, 5);
    t.on_batch(P1, 0, true, 9, 8);
    assert_eq!(t.open_txns().count(), 0);
    assert_eq!(t.last_stable_offset(10), 10);
}

#[test]
fn a_marker_of_a_producer_without_an_open_txn_changes_nothing() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, true, 0, 0);
    t.on_marker(P1, 0, false, 1);
    // The coordinator retries the marker: the second one finds no open txn.
    t.on_marker(P1, 0, false, 2);
    t.on_marker(P2, 0, true, 3);
    assert_eq!(t.aborted(0, 100, 10), vec![aborted(P1, 0, 1)]);
    assert_eq!(t.open_txns().count(), 0);
    t.on_high_watermark(4);
    assert_eq!(t.last_stable_offset(4), 4);
}

#[test]
fn the_lso_is_the_first_offset_of_the_earliest_unstable_txn_of_interleaved_producers() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, false, 0, 9); // not transactional: never holds the LSO
    t.on_batch(P1, 0, true, 10, 11);
    t.on_batch(P2, 0, true, 12, 13);
    t.on_batch(P1, 0, true, 14, 15);
    let firsts: Vec<u64> = t.open_txns().map(|o| o.first_offset).collect();
    assert_eq!(firsts, vec![10, 12], "ordered by first offset");
    t.on_high_watermark(16);
    assert_eq!(t.last_stable_offset(16), 10);
    assert_eq!(t.last_stable_offset(5), 5, "never above the hw");

    t.on_marker(P1, 0, true, 16);
    // P1's commit is not below the hw yet: its txn still holds the LSO.
    assert_eq!(t.last_stable_offset(16), 10);
    t.on_high_watermark(17);
    assert_eq!(
        t.last_stable_offset(17),
        12,
        "P2 is the earliest still open"
    );
    t.on_marker(P2, 0, false, 17);
    assert_eq!(
        t.last_stable_offset(17),
        12,
        "P2's abort is not replicated yet"
    );
    t.on_high_watermark(18);
    assert_eq!(t.last_stable_offset(18), 18);
}

#[test]
fn aborted_reports_txns_overlapping_the_fetch_range_earliest_first_at_most_max() {
    let mut t = PartitionTxns::new(100);
    // P1 aborts [0, 5], P2 aborts [2, 9] (interleaved), P1 aborts [10, 12].
    t.on_batch(P1, 0, true, 0, 1);
    t.on_batch(P2, 0, true, 2, 3);
    t.on_marker(P1, 0, false, 5);
    t.on_marker(P2, 0, false, 9);
    t.on_batch(P1, 0, true, 10, 11);
    t.on_marker(P1, 0, false, 12);
    let all = [aborted(P1, 0, 5), aborted(P2, 2, 9), aborted(P1, 10, 12)];
    assert_eq!(t.aborted(0, 13, 10), all);
    // last_offset >= from: a fetch from the marker still reports it, one past it does not.
    assert_eq!(t.aborted(5, 13, 10), all);
    assert_eq!(t.aborted(6, 13, 10), all[1..]);
    assert_eq!(t.aborted(12, 13, 10), all[2..]);
    assert_eq!(t.aborted(13, 100, 10), vec![]);
    // first_offset < to: a fetch ending at a txn's first offset does not report it.
    assert_eq!(t.aborted(0, 10, 10), all[..2]);
    assert_eq!(t.aborted(0, 11, 10), all);
    assert_eq!(t.aborted(0, 2, 10), all[..1]);
    assert_eq!(t.aborted(0, 0, 10), vec![]);
    // At most `max`, the earliest.
    assert_eq!(t.aborted(0, 13, 2), all[..2]);
    assert_eq!(t.aborted(0, 13, 0), vec![]);
}

#[test]
fn a_truncation_below_a_marker_opens_its_txn_again_and_forgets_its_abort() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 3, true, 0, 1);
    t.on_batch(P2, 0, true, 2, 2);
    t.on_marker(P1, 3, false, 3);
    t.on_marker(P2, 0, true, 4);
    t.on_batch(P1, 3, true, 5, 6);
    t.on_high_watermark(1);
    assert_eq!(t.aborted_count(), 1);
    // The follower's leader never had the markers: cut at 3.
    t.truncate_to(3);
    assert_eq!(t.aborted_count(), 0, "the abort marker is gone");
    let opened: Vec<OpenTxn> = t.open_txns().copied().collect();
    assert_eq!(opened, vec![open_txn(P1, 3, 0), open_txn(P2, 0, 2)]);
    assert_eq!(t.last_stable_offset(3), 0);
    // The txn ends again when the leader's marker comes.
    t.on_marker(P1, 3, true, 3);
    assert_eq!(t.aborted_count(), 0);
    assert_eq!(t.open_txn(P1), None);
}

#[test]
fn a_truncation_forgets_txns_begun_at_or_after_it() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, true, 0, 0);
    t.on_batch(P2, 0, true, 1, 1);
    t.on_marker(P1, 0, true, 2);
    t.on_batch(P1, 0, true, 3, 3);
    t.truncate_to(1);
    let opened: Vec<OpenTxn> = t.open_txns().copied().collect();
    assert_eq!(
        opened,
        vec![open_txn(P1, 0, 0)],
        "P2 and P1's second txn began at or after 1"
    );
    // A cut at the marker's offset exactly reopens it too; one past it does not.
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, true, 0, 0);
    t.on_marker(P1, 0, false, 1);
    t.truncate_to(2);
    assert_eq!((t.open_txn(P1), t.aborted_count()), (None, 1));
    t.truncate_to(1);
    assert_eq!(
        (t.open_txn(P1), t.aborted_count()),
        (Some(open_txn(P1, 0, 0)), 0)
    );
}

#[test]
fn a_completed_txn_below_the_hw_stays_completed_after_a_truncation_above_the_hw() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, true, 0, 0);
    t.on_marker(P1, 0, false, 1);
    t.on_high_watermark(2);
    t.truncate_to(2);
    assert_eq!(t.open_txn(P1), None);
    assert_eq!(t.aborted(0, 2, 10), vec![aborted(P1, 0, 1)]);
}

#[test]
fn trim_before_drops_only_aborted_txns_wholly_below_the_log_start() {
    let mut t = PartitionTxns::new(100);
    t.on_batch(P1, 0, true, 0, 0);
    t.on_marker(P1, 0, false, 1);
    t.on_batch(P1, 0, true, 2, 2);
    t.on_marker(P1, 0, false, 4);
    t.on_batch(P2, 0, true, 5, 5);
    t.on_high_watermark(6);
    t.trim_before(1);
    assert_eq!(t.aborted_count(), 2, "a marker at the log start is kept");
    t.trim_before(3);
    assert_eq!(t.aborted(0, 10, 10), vec![aborted(P1, 2, 4)]);
    t.trim_before(6);
    assert_eq!(t.aborted_count(), 0);
    assert_eq!(t.open_txn(P2), Some(open_txn(P2, 0, 5)), "open txns stay");
    assert_eq!(t.last_stable_offset(6), 5);
}

#[test]
fn past_aborted_max_the_oldest_abort_is_dropped_and_counted() {
    let mut t = PartitionTxns::new(2);
    for i in 0..5u64 {
        t.on_batch(P1, 0, true, 2 * i, 2 * i);
        t.on_marker(P1, 0, false, 2 * i + 1);
    }
    assert_eq!(t.aborted_count(), 2);
    assert_eq!(t.aborted_dropped(), 3);
    assert_eq!(
        t.aborted(0, 100, 10),
        vec![aborted(P1, 6, 7), aborted(P1, 8, 9)]
    );
    let mut none = PartitionTxns::new(0);
    none.on_batch(P1, 0, true, 0, 0);
    none.on_marker(P1, 0, false, 1);
    assert_eq!((none.aborted_count(), none.aborted_dropped()), (0, 1));
}

// ---- the model: every appended batch and marker, from which everything is recomputed ----

/// One appended data batch (`marker: None`; `txn`: transactional) or marker (`Some(commit)`).
#[derive(Debug, Clone, Copy)]
struct Event {
    pid: i64,
    epoch: i16,
    start: u64,
    txn: bool,
    marker: Option<bool>,
}

#[derive(Default)]
struct Model {
    events: Vec<Event>,
    log_end: u64,
    hw: u64,
    log_start: u64,
    aborted_max: usize,
    /// Aborts dropped past `aborted_max`, by (marker offset, producer id), and how many ever.
    dropped: BTreeSet<(u64, i64)>,
    dropped_count: u64,
}

impl Model {
    /// Replays the log: the open txns by first offset, and every completed txn with its marker
    /// offset and kind.
    fn replay(&self) -> (Vec<OpenTxn>, Vec<(OpenTxn, u64, bool)>) {
        let mut open: Vec<OpenTxn> = Vec::new();
        let mut done = Vec::new();
        for e in &self.events {
            let at = open.iter().position(|o| o.producer_id == e.pid);
            match (e.marker, at) {
                (None, None) if e.txn && e.pid >= 0 => open.push(open_txn(e.pid, e.epoch, e.start)),
                (Some(commit), Some(i)) => done.push((open.remove(i), e.start, commit)),
                _ => {}
            }
        }
        open.sort_by_key(|o| o.first_offset);
        (open, done)
    }

    fn lso(&self) -> u64 {
        let (open, done) = self.replay();
        let unstable = done.iter().filter(|d| d.1 >= self.hw);
        let firsts = open.iter().chain(unstable.map(|d| &d.0));
        firsts.map(|o| o.first_offset).fold(self.hw, u64::min)
    }

    /// Kept aborts, in marker order.
    fn kept_aborted(&self) -> Vec<AbortedTxn> {
        let (_, done) = self.replay();
        done.iter()
            .filter(|d| !d.2 && d.1 >= self.log_start)
            .filter(|d| !self.dropped.contains(&(d.1, d.0.producer_id)))
            .map(|d| aborted(d.0.producer_id, d.0.first_offset, d.1))
            .collect()
    }

    fn aborted(&self, from: u64, to: u64, max: usize) -> Vec<AbortedTxn> {
        let mut out: Vec<AbortedTxn> = (self.kept_aborted().into_iter())
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .collect();
        out.sort_by_key(|a| (a.first_offset, a.producer_id));
        out.truncate(max);
        out
    }

    fn append(&mut self, pid: i64, epoch: i16, txn: bool, marker: Option<bool>, len: u64) {
        let start = self.log_end;
        let event = Event {
            pid,
            epoch,
            start,
            txn,
            marker,
        };
        self.events.push(event);
        self.log_end += len;
        let kept = self.kept_aborted();
        if kept.len() > self.aborted_max {
            self.dropped
                .insert((kept[0].last_offset, kept[0].producer_id));
            self.dropped_count += 1;
        }
    }

    fn truncate_to(&mut self, end: u64) {
        self.events.retain(|e| e.start < end);
        self.dropped.retain(|d| d.0 < end);
        self.log_end = end;
    }
}

/// Everything observable agrees with the model.
fn agree(t: &PartitionTxns, m: &Model) -> Result<(), TestCaseError> {
    t.check_invariants();
    let lso = t.last_stable_offset(m.hw);
    prop_assert!(lso <= m.hw);
    prop_assert_eq!(lso, m.lso());
    prop_assert_eq!(t.open_txns().copied().collect::<Vec<_>>(), m.replay().0);
    let mut kept = m.kept_aborted();
    prop_assert_eq!(t.aborted_count(), kept.len());
    kept.sort_by_key(|a| (a.first_offset, a.producer_id));
    prop_assert_eq!(t.aborted(0, u64::MAX, usize::MAX), kept);
    prop_assert_eq!(t.aborted_dropped(), m.dropped_count);
    Ok(())
}

/// Random steps; the `u64` picks are reduced into the range the log's rules allow.
#[derive(Debug, Clone)]
enum Op {
    /// (producer 1-3, or 0 for one without an id; epoch; transactional; records).
    Batch(i64, i16, bool, u64),
    /// (producer, commit).
    Marker(i64, bool),
    Hw(u64),
    Truncate(u64),
    Trim(u64),
    /// (from, to, max).
    Query(u64, u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..4, 0i16..2, any::<bool>(), 1u64..4)
            .prop_map(|(who, epoch, txn, len)| Op::Batch(who, epoch, txn, len)),
        2 => (1i64..4, any::<bool>()).prop_map(|(who, commit)| Op::Marker(who, commit)),
        2 => any::<u64>().prop_map(Op::Hw),
        1 => any::<u64>().prop_map(Op::Truncate),
        1 => any::<u64>().prop_map(Op::Trim),
        2 => (any::<u64>(), any::<u64>(), 0usize..5).prop_map(|(f, t, max)| Op::Query(f, t, max)),
    ]
}

/// A value in [lo, hi] picked by `pick`.
fn within(pick: u64, lo: u64, hi: u64) -> u64 {
    lo + pick % (hi - lo + 1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random logs of up to three transactional producers (and one without an id), with the hw,
    /// truncations and log-start moves the log's rules allow: the LSO, open txns and aborted
    /// txns always equal the model's.
    #[test]
    fn agrees_with_a_brute_force_model(ops in proptest::collection::vec(op(), 1..80), aborted_max in 0usize..6) {
        let mut t = PartitionTxns::new(aborted_max);
        let mut m = Model { aborted_max, ..Model::default() };
        for op in ops {
            match op {
                Op::Batch(who, epoch, txn, len) => {
                    let pid = if who == 0 { -1 } else { who };
                    t.on_batch(pid, epoch, txn, m.log_end, m.log_end + len - 1);
                    m.append(pid, epoch, txn, None, len);
                }
                Op::Marker(who, commit) => {
                    t.on_marker(who, 0, commit, m.log_end);
                    m.append(who, 0, true, Some(commit), 1);
                }
                Op::Hw(pick) => {
                    m.hw = within(pick, m.hw, m.log_end);
                    t.on_high_watermark(m.hw);
                }
                Op::Truncate(pick) => {
                    // At a batch boundary at or above the hw.
                    let mut cuts: Vec<u64> = m.events.iter().map(|e| e.start).filter(|&s| s >= m.hw).collect();
                    cuts.push(m.log_end);
                    let end = cuts[(pick % cuts.len() as u64) as usize];
                    t.truncate_to(end);
                    m.truncate_to(end);
                }
                Op::Trim(pick) => {
                    m.log_start = within(pick, m.log_start, m.hw);
                    t.trim_before(m.log_start);
                }
                Op::Query(from, to, max) => {
                    let (from, to) = (from % (m.log_end + 2), to % (m.log_end + 2));
                    prop_assert_eq!(t.aborted(from, to, max), m.aborted(from, to, max), "[{}, {})", from, to);
                }
            }
            agree(&t, &m)?;
        }
    }

    /// Any calls at all, rules broken (offsets back, truncation below the hw, markers of
    /// unknown producers): no panic, invariants hold, the LSO is never above the hw asked.
    #[test]
    fn never_panics_on_any_calls(
        calls in proptest::collection::vec((0u8..7, -2i64..4, any::<i16>(), any::<bool>(), 0u64..40, 0u64..40), 0..100),
        aborted_max in 0usize..4,
    ) {
        let mut t = PartitionTxns::new(aborted_max);
        for (kind, pid, epoch, flag, a, b) in calls {
            match kind {
                0 => t.on_batch(pid, epoch, flag, a, b),
                1 => t.on_marker(pid, epoch, flag, a),
                2 => t.on_high_watermark(a),
                3 => t.truncate_to(a),
                4 => t.trim_before(a),
                5 => t.seed_open(pid, epoch, a),
                _ => { let _ = t.aborted(a, b, usize::from(flag) * 3); }
            }
            t.check_invariants();
            prop_assert!(t.last_stable_offset(a) <= a);
            prop_assert!(t.aborted_count() <= aborted_max);
        }
    }
}

/// The log's open transactions seed what a tail replay missed: a transaction whose first batch
/// precedes the replayed tail opens (or moves down) to the log's first offset and holds the LSO
/// there; one the replay saw begin earlier, or a producer without an id, is left alone.
#[test]
fn seeding_an_open_txn_from_the_log_holds_the_lso_at_its_first_offset() {
    let mut t = PartitionTxns::new(0);
    // The replay saw P1's later batch only, and nothing of P2.
    t.on_batch(P1, 3, true, 50, 51);
    assert_eq!(t.last_stable_offset(100), 50);
    t.seed_open(P1, 3, 10);
    t.seed_open(P2, 5, 20);
    t.seed_open(-1, 0, 0);
    t.check_invariants();
    assert_eq!(t.open_txn(P1), Some(open_txn(P1, 3, 10)));
    assert_eq!(t.open_txn(P2), Some(open_txn(P2, 5, 20)));
    assert_eq!(t.open_txns().count(), 2);
    assert_eq!(t.last_stable_offset(100), 10);
    t.seed_open(P1, 3, 30);
    assert_eq!(
        t.open_txn(P1),
        Some(open_txn(P1, 3, 10)),
        "an earlier start stays"
    );
    // The seeded transaction ends like any other.
    t.on_marker(P1, 3, true, 60);
    t.on_high_watermark(61);
    assert_eq!(t.last_stable_offset(61), 20);
}
