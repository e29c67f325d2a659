//! The transaction coordinator: each flow by hand, then random interleavings of two producer
//! instances sharing one transactional id against the promises in the coordinator's docs.

use proptest::prelude::*;

use super::*;
use crate::topic_partition::TopicPartition;
use spool_error_code::ErrorCode;

const T: &str = "txn-1";

/// A new offset in `__transaction_state` for a durable record: tests share one counter, so
/// every id's records are at growing offsets, as in a log.
pub(super) fn next_offset() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn at() -> Option<u64> {
    Some(next_offset())
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t".to_string(), p)
}

/// A coordinator and a producer-id allocator counting from 1000.
fn coordinator() -> (TxnCoordinator, impl FnMut() -> Option<i64>) {
    let mut next = 1000;
    (TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS), move || {
        next += 1;
        Some(next)
    })
}

/// Applies a Write step durably; returns its answer and actions.
fn durable(
    c: &mut TxnCoordinator,
    request: impl FnOnce(&mut TxnCoordinator) -> Step,
) -> (Result<(), ErrorCode>, Vec<TxnAction>) {
    match request(c) {
        Step::Answer(a) => (a, Vec::new()),
        Step::Write { record, answer } => {
            let actions = c.on_written(&record.transactional_id, at());
            (answer, actions)
        }
    }
}

/// [`durable`], answered Ok.
fn ok(c: &mut TxnCoordinator, request: impl FnOnce(&mut TxnCoordinator) -> Step) -> Vec<TxnAction> {
    let (answer, actions) = durable(c, request);
    assert_eq!(answer, Ok(()));
    actions
}

/// (producer id, epoch) after a successful InitProducerId.
fn init(c: &mut TxnCoordinator, alloc: &mut dyn FnMut() -> Option<i64>, now_ms: u64) -> (i64, i16) {
    let step = c.init_producer_id(T, 60_000, None, now_ms, alloc);
    let (answer, _) = durable(c, |_| step);
    assert_eq!(answer, Ok(()));
    let m = c.describe(T).expect("durable");
    (m.producer_id, m.producer_epoch)
}

#[test]
fn a_committed_transaction_marks_exactly_its_partitions_then_completes() {
    let (mut c, mut alloc) = coordinator();
    let step = c.init_producer_id(T, 60_000, None, 0, &mut alloc);
    let Step::Write { record, .. } = &step else {
        panic!("{step:?}")
    };
    assert_eq!(
        (record.producer_id, record.producer_epoch, record.state),
        (1001, 0, TxnState::Empty)
    );
    assert_eq!(
        c.add_partitions(T, 1001, 0, &[tp(0)], 1),
        Step::Answer(Err(ErrorCode::InvalidProducerIdMapping)),
        "nothing counts before it is durable"
    );
    ok(&mut c, |_| step);
    let (pid, epoch) = (1001, 0);
    ok(&mut c, |c| {
        c.add_partitions(T, pid, epoch, &[tp(0), tp(1)], 10)
    });
    assert_eq!(
        c.add_partitions(T, pid, epoch, &[tp(1)], 11),
        Step::Answer(Ok(())),
        "already added: nothing to write"
    );
    ok(&mut c, |c| c.add_partitions(T, pid, epoch, &[tp(2)], 12));
    assert_eq!(c.describe(T).unwrap().txn_start_ms, 10);
    let (answer, actions) = durable(&mut c, |c| c.end_txn(T, pid, epoch, true, 20));
    assert_eq!(answer, Ok(()));
    let decision_offset = match actions.as_slice() {
        [TxnAction::WriteMarkers {
            decision_offset, ..
        }] => *decision_offset,
        other => panic!("{other:?}"),
    };
    assert!(decision_offset >= 0, "the Prepare record's offset");
    assert_eq!(
        actions,
        vec![TxnAction::WriteMarkers {
            transactional_id: T.into(),
            producer_id: pid,
            producer_epoch: epoch,
            commit: true,
            partitions: vec![tp(0), tp(1), tp(2)],
            decision_offset,
        }]
    );
    assert_eq!(
        c.end_txn(T, pid, epoch, true, 21),
        Step::Answer(Err(ErrorCode::ConcurrentTransactions)),
        "markers not written yet"
    );
    let record = c.on_markers_written(T, 22).expect("the completing record");
    assert_eq!(record.state, TxnState::CompleteCommit);
    assert!(record.partitions.is_empty());
    c.on_written(T, at());
    assert_eq!(
        c.end_txn(T, pid, epoch, true, 23),
        Step::Answer(Ok(())),
        "a retry"
    );
    assert_eq!(
        c.end_txn(T, pid, epoch, false, 23),
        Step::Answer(Err(ErrorCode::InvalidTxnState))
    );
}

#[test]
fn a_new_instance_fences_the_open_transaction_and_aborts_it() {
    let (mut c, mut alloc) = coordinator();
    let (pid, epoch) = init(&mut c, &mut alloc, 0);
    ok(&mut c, |c| c.add_partitions(T, pid, epoch, &[tp(0)], 1));
    let step = c.init_producer_id(T, 60_000, None, 2, &mut alloc);
    let (answer, actions) = durable(&mut c, |_| step);
    assert_eq!(
        answer,
        Err(ErrorCode::ConcurrentTransactions),
        "retry later"
    );
    assert!(
        matches!(
            &actions[..],
            [TxnAction::WriteMarkers {
                commit: false,
                producer_epoch: 1,
                ..
            }]
        ),
        "{actions:?}"
    );
    assert_eq!(
        c.end_txn(T, pid, epoch, true, 3),
        Step::Answer(Err(ErrorCode::ProducerFenced)),
        "the old instance can no longer commit"
    );
    c.on_markers_written(T, 4).expect("abort completes");
    c.on_written(T, at());
    assert_eq!(c.describe(T).unwrap().state, TxnState::CompleteAbort);
    assert_eq!(
        init(&mut c, &mut alloc, 5),
        (pid, 2),
        "the new instance's epoch"
    );
}

#[test]
fn an_open_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let (mut c, mut alloc) = coordinator();
    let (pid, epoch) = init(&mut c, &mut alloc, 0);
    ok(&mut c, |c| c.add_partitions(T, pid, epoch, &[tp(0)], 100));
    assert!(c.expire(60_099).is_empty());
    let records = c.expire(60_100);
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].state, records[0].producer_epoch),
        (TxnState::PrepareAbort, 1)
    );
    let actions = c.on_written(T, at());
    assert!(matches!(
        &actions[..],
        [TxnAction::WriteMarkers { commit: false, .. }]
    ));
    assert_eq!(
        c.end_txn(T, pid, epoch, true, 60_200),
        Step::Answer(Err(ErrorCode::ProducerFenced))
    );
}

#[test]
fn a_failed_write_changes_nothing_and_a_pending_one_holds_others_off() {
    let (mut c, mut alloc) = coordinator();
    let (pid, epoch) = init(&mut c, &mut alloc, 0);
    ok(&mut c, |c| c.add_partitions(T, pid, epoch, &[tp(0)], 1));
    let step = c.end_txn(T, pid, epoch, true, 2);
    assert!(matches!(step, Step::Write { .. }));
    assert_eq!(
        c.add_partitions(T, pid, epoch, &[tp(1)], 3),
        Step::Answer(Err(ErrorCode::ConcurrentTransactions))
    );
    assert!(c.on_written(T, None).is_empty());
    assert_eq!(c.describe(T).unwrap().state, TxnState::Ongoing);
    let (answer, actions) = durable(&mut c, |c| c.end_txn(T, pid, epoch, false, 4));
    assert_eq!(answer, Ok(()));
    assert!(matches!(
        &actions[..],
        [TxnAction::WriteMarkers { commit: false, .. }]
    ));
    // The completing record's write fails: asked for again.
    let record = c.on_markers_written(T, 5).expect("record");
    assert_eq!(c.on_markers_written(T, 5), None, "one pending at a time");
    c.on_written(&record.transactional_id, None);
    assert!(c.on_markers_written(T, 6).is_some());
}

#[test]
fn bad_requests_are_refused_with_kafkas_codes() {
    let (mut c, mut alloc) = coordinator();
    let refused = |s: Step| match s {
        Step::Answer(Err(code)) => code,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refused(c.init_producer_id("", 1000, None, 0, &mut alloc)),
        ErrorCode::InvalidRequest
    );
    for timeout_ms in [0, TRANSACTION_MAX_TIMEOUT_MS + 1] {
        assert_eq!(
            refused(c.init_producer_id(T, timeout_ms, None, 0, &mut alloc)),
            ErrorCode::InvalidTransactionTimeout
        );
    }
    let mut none = || None;
    assert_eq!(
        refused(c.init_producer_id(T, 1000, None, 0, &mut none)),
        ErrorCode::CoordinatorLoadInProgress
    );
    let (pid, epoch) = init(&mut c, &mut alloc, 0);
    assert_eq!(
        refused(c.init_producer_id(T, 1000, Some((pid, epoch + 1)), 0, &mut alloc)),
        ErrorCode::ProducerFenced,
        "KIP-360: not the current producer"
    );
    assert_eq!(
        refused(c.add_partitions(T, pid + 1, epoch, &[tp(0)], 0)),
        ErrorCode::InvalidProducerIdMapping
    );
    assert_eq!(
        refused(c.add_partitions("other", pid, epoch, &[tp(0)], 0)),
        ErrorCode::InvalidProducerIdMapping
    );
    assert_eq!(
        refused(c.end_txn(T, pid, epoch, true, 0)),
        ErrorCode::InvalidTxnState,
        "nothing open"
    );
}

#[test]
fn kafkas_transitions_and_only_those_are_allowed() {
    use TxnState::*;
    let all = TxnState::ALL;
    let allowed: Vec<(TxnState, TxnState)> = all
        .iter()
        .flat_map(|to| all.iter().map(move |from| (*from, *to)))
        .filter(|(from, to)| to.may_follow(*from))
        .collect();
    assert_eq!(allowed.len(), 16, "{allowed:?}");
    assert!(!PrepareCommit.may_follow(Empty) && !CompleteCommit.may_follow(PrepareAbort));
    let ids: Vec<i8> = all.iter().map(|s| s.id()).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(all.iter().all(|s| TxnState::from_id(s.id()) == Some(*s)));
    assert_eq!(TxnState::from_id(8), None);
}

/// One step of two producer instances (0 and 1) sharing the id, and of the driver.
#[derive(Debug, Clone)]
enum Op {
    Init(usize),
    Add(usize, i32),
    End(usize, bool),
    /// The pending record's write ends (durable or not).
    Written(bool),
    Markers,
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..2usize).prop_map(Op::Init),
        (0..2usize, 0..4i32).prop_map(|(i, p)| Op::Add(i, p)),
        (0..2usize, any::<bool>()).prop_map(|(i, c)| Op::End(i, c)),
        any::<bool>().prop_map(Op::Written),
        Just(Op::Markers),
        (1..40_000u64).prop_map(Op::Tick),
    ]
}

proptest! {
    /// Promises under any interleaving: epochs never go back; only the current producer's
    /// requests succeed; markers name exactly the partitions durably added to the transaction;
    /// a transaction completes only after its markers.
    #[test]
    fn two_instances_and_a_timeout_never_break_the_promises(ops in prop::collection::vec(op(), 1..80)) {
        let (mut c, mut alloc) = coordinator();
        let mut now_ms = 0u64;
        let mut instances: [Option<(i64, i16)>; 2] = [None, None];
        // The pending write: its record, answer and who asked (an instance, or the driver).
        let mut pending: Option<(TxnMetadata, Result<(), ErrorCode>, Option<usize>)> = None;
        let mut added: std::collections::BTreeSet<TopicPartition> = Default::default();
        let mut marked: Option<bool> = None;
        let mut last_epoch: Option<(i64, i16)> = None;
        for op in ops {
            let current = c.describe(T).filter(|m| m.producer_epoch >= 0).map(|m| (m.producer_id, m.producer_epoch));
            let mut asked = None;
            let step = match op {
                Op::Init(i) => { asked = Some(i); Some(c.init_producer_id(T, 30_000, None, now_ms, &mut alloc)) }
                Op::Add(i, p) => {
                    asked = Some(i);
                    instances[i].map(|(pid, e)| c.add_partitions(T, pid, e, &[tp(p)], now_ms))
                }
                Op::End(i, commit) => {
                    asked = Some(i);
                    instances[i].map(|(pid, e)| c.end_txn(T, pid, e, commit, now_ms))
                }
                Op::Written(ok) => {
                    if let Some((record, answer, who)) = pending.take() {
                        let actions = c.on_written(T, ok.then(next_offset));
                        if ok {
                            match record.state {
                                TxnState::Ongoing => added = record.partitions.clone(),
                                TxnState::Empty => added.clear(),
                                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                                    prop_assert_eq!(marked.take(), Some(record.state == TxnState::CompleteCommit), "completed without its markers");
                                    added.clear();
                                }
                                _ => {}
                            }
                            for a in &actions {
                                let TxnAction::WriteMarkers { partitions, commit, .. } = a;
                                prop_assert_eq!(&partitions.iter().cloned().collect::<std::collections::BTreeSet<_>>(), &added);
                                marked = Some(*commit);
                            }
                            let m = c.describe(T).unwrap();
                            if let Some((pid, e)) = last_epoch {
                                prop_assert!(pid != m.producer_id || m.producer_epoch >= e, "epoch went back");
                            }
                            last_epoch = Some((m.producer_id, m.producer_epoch));
                            if let (Some(i), Ok(()), TxnState::Empty) = (who, answer, record.state) {
                                instances[i] = Some((m.producer_id, m.producer_epoch));
                            }
                        }
                    }
                    None
                }
                Op::Markers => {
                    if pending.is_none() && marked.is_some() {
                        if let Some(record) = c.on_markers_written(T, now_ms) {
                            pending = Some((record, Ok(()), None));
                        }
                    }
                    None
                }
                Op::Tick(ms) => {
                    now_ms += ms;
                    if pending.is_none() {
                        let mut records = c.expire(now_ms);
                        prop_assert!(records.len() <= 1);
                        if let Some(record) = records.pop() {
                            prop_assert_eq!(record.state, TxnState::PrepareAbort);
                            pending = Some((record, Ok(()), None));
                        }
                    }
                    None
                }
            };
            match step {
                Some(Step::Write { record, answer }) => {
                    prop_assert!(pending.is_none(), "two records pending");
                    if matches!(op, Op::Add(..) | Op::End(..)) {
                        prop_assert_eq!(instances[asked.unwrap()], current, "a write for a fenced producer");
                    }
                    pending = Some((record, answer, asked));
                }
                Some(Step::Answer(Ok(()))) => {
                    prop_assert!(matches!(op, Op::Add(..) | Op::End(..)), "{:?}", op);
                    prop_assert_eq!(instances[asked.unwrap()], current, "a success for a fenced producer");
                }
                _ => {}
            }
        }
    }
}

#[test]
fn a_new_coordinator_replays_the_records_and_resumes_a_prepared_commit() {
    let (mut c, mut alloc) = coordinator();
    let mut log: Vec<(bytes::Bytes, bytes::Bytes, u64)> = Vec::new();
    let write = |c: &mut TxnCoordinator, step: Step, log: &mut Vec<_>| {
        let Step::Write { record, .. } = step else {
            panic!("{step:?}")
        };
        let offset = next_offset();
        log.push((
            records::encode_key(&record.transactional_id),
            records::encode_value(&record),
            offset,
        ));
        c.on_written(&record.transactional_id, Some(offset))
    };
    let step = c.init_producer_id(T, 60_000, None, 0, &mut alloc);
    write(&mut c, step, &mut log);
    let step = c.add_partitions(T, 1001, 0, &[tp(0), tp(3)], 1);
    write(&mut c, step, &mut log);
    let step = c.end_txn(T, 1001, 0, true, 2);
    let markers = write(&mut c, step, &mut log);
    // The coordinator dies before the markers are written; its successor reads the log.
    let mut next = TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS);
    for (key, value, offset) in &log {
        let (id, metadata) = records::decode(key, Some(value)).expect("decodes");
        next.replay(&id, metadata, *offset);
    }
    assert_eq!(next.describe(T), c.describe(T));
    assert_eq!(next.resume(), markers, "the same markers, written again");
    let [TxnAction::WriteMarkers {
        decision_offset, ..
    }] = markers.as_slice()
    else {
        panic!("{markers:?}")
    };
    assert_eq!(
        *decision_offset,
        log.last().map(|l| l.2 as i64).unwrap(),
        "the markers name their Prepare record"
    );
    next.unload(|id| id == T);
    assert!(next.describe(T).is_none());
}

#[test]
fn each_transactions_markers_carry_a_greater_decision_offset() {
    let (mut c, mut alloc) = coordinator();
    ok(&mut c, |c| {
        c.init_producer_id(T, 60_000, None, 0, &mut alloc)
    });
    let mut decisions = Vec::new();
    for (round, commit) in [(0, true), (1, false), (2, true)] {
        ok(&mut c, |c| c.add_partitions(T, 1001, 0, &[tp(round)], 1));
        let Step::Write { record, .. } = c.end_txn(T, 1001, 0, commit, 2) else {
            panic!("EndTxn writes its Prepare record")
        };
        let prepare_at = next_offset();
        let actions = c.on_written(&record.transactional_id, Some(prepare_at));
        let [TxnAction::WriteMarkers {
            decision_offset,
            commit: marked,
            ..
        }] = actions.as_slice()
        else {
            panic!("{actions:?}")
        };
        assert_eq!((*decision_offset, *marked), (prepare_at as i64, commit));
        decisions.push(*decision_offset);
        let complete = c.on_markers_written(T, 3).expect("Complete follows");
        c.on_written(&complete.transactional_id, at());
    }
    assert!(decisions.windows(2).all(|w| w[0] < w[1]), "{decisions:?}");
}

#[test]
#[should_panic(expected = "record at")]
fn a_record_offset_going_back_is_a_driver_bug() {
    let (mut c, mut alloc) = coordinator();
    let Step::Write { record, .. } = c.init_producer_id(T, 60_000, None, 0, &mut alloc) else {
        panic!("a new id writes")
    };
    c.on_written(&record.transactional_id, Some(10));
    let Step::Write { record, .. } = c.add_partitions(T, 1001, 0, &[tp(0)], 1) else {
        panic!("AddPartitionsToTxn writes")
    };
    c.on_written(&record.transactional_id, Some(9));
}
