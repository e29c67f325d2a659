//! The completing write with the next transaction's AddPartitionsToTxn folded in
//! ([`TxnCoordinator::complete_then_add`]): both records take effect together, replay to the
//! same state, and only the id's current producer is folded.

use super::tests::next_offset;
use super::*;
use crate::topic_partition::TopicPartition;
use spool_error_code::ErrorCode;

const T: &str = "txn-fold";

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t".to_string(), p)
}

/// Writes a step's record durably; the answer.
fn write(c: &mut TxnCoordinator, step: Step) -> (Result<(), ErrorCode>, Vec<TxnAction>) {
    match step {
        Step::Answer(a) => (a, Vec::new()),
        Step::Write { record, answer } => {
            let actions = c.on_written(&record.transactional_id, Some(next_offset()));
            (answer, actions)
        }
    }
}

/// A coordinator whose producer has prepared a transaction over partitions 0 and 1 (commit or
/// abort): the coordinator, the producer, and the Prepare record's offset.
fn prepared(commit: bool) -> (TxnCoordinator, (i64, i16), i64) {
    let mut c = TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS);
    let mut pid = Some(7000);
    let step = c.init_producer_id(T, 60_000, None, 1, &mut || pid.take());
    let Step::Write { record, .. } = step else {
        panic!("{step:?}")
    };
    let producer = (record.producer_id, record.producer_epoch);
    c.on_written(T, Some(next_offset()));
    let step = c.add_partitions(T, producer.0, producer.1, &[tp(0), tp(1)], 2);
    assert_eq!(write(&mut c, step).0, Ok(()));
    let step = c.end_txn(T, producer.0, producer.1, commit, 3);
    let (answer, actions) = write(&mut c, step);
    assert_eq!(answer, Ok(()));
    let decision = match actions.as_slice() {
        [TxnAction::WriteMarkers {
            decision_offset, ..
        }] => *decision_offset,
        other => panic!("{other:?}"),
    };
    (c, producer, decision)
}

#[test]
fn the_next_add_rides_on_the_completing_write() {
    for commit in [true, false] {
        let (mut c, (pid, epoch), decision) = prepared(commit);
        // The producer's next transaction asks while the markers are written.
        assert_eq!(
            c.add_partitions(T, pid, epoch, &[tp(2)], 4),
            Step::Answer(Err(ErrorCode::ConcurrentTransactions))
        );
        let next = NextAdd {
            producer_id: pid,
            producer_epoch: epoch,
            partitions: vec![tp(2)],
        };
        let records = c.complete_then_add(T, 5, Some(&next));
        let states: Vec<TxnState> = records.iter().map(|r| r.state).collect();
        let done = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        assert_eq!(states, vec![done, TxnState::Ongoing]);
        assert!(records[0].partitions.is_empty());
        assert_eq!(
            records[1].partitions.iter().cloned().collect::<Vec<_>>(),
            vec![tp(2)]
        );
        assert_eq!(records[1].txn_start_ms, 5);
        // Pending: nothing else for the id until the write is durable.
        assert_eq!(
            c.add_partitions(T, pid, epoch, &[tp(2)], 5),
            Step::Answer(Err(ErrorCode::ConcurrentTransactions))
        );
        // The write: two records, the last one's offset reported.
        let first = next_offset();
        let last = next_offset();
        assert!(c.on_written(T, Some(last)).is_empty());
        assert_eq!(c.describe(T).map(|m| m.state), Some(TxnState::Ongoing));
        // The waiting request, decided again, is answered at once.
        assert_eq!(
            c.add_partitions(T, pid, epoch, &[tp(2)], 6),
            Step::Answer(Ok(()))
        );
        // The folded transaction commits with markers for exactly its partition, under a
        // decision offset past both records.
        let step = c.end_txn(T, pid, epoch, true, 7);
        let (answer, actions) = write(&mut c, step);
        assert_eq!(answer, Ok(()));
        match actions.as_slice() {
            [TxnAction::WriteMarkers {
                partitions,
                decision_offset,
                ..
            }] => {
                assert_eq!(partitions, &vec![tp(2)]);
                assert!(*decision_offset > last as i64 && last > first);
                assert!(*decision_offset > decision);
            }
            other => panic!("{other:?}"),
        }

        // Replaying the log's records gives the state the live coordinator had.
        let mut replayed = TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS);
        replayed.replay(T, Some(records[0].clone()), first);
        replayed.replay(T, Some(records[1].clone()), last);
        let m = replayed.describe(T).expect("replayed");
        assert_eq!((m.state, m.producer_epoch), (TxnState::Ongoing, epoch));
        assert_eq!(m.partitions, records[1].partitions);
        assert!(replayed.resume().is_empty(), "nothing prepared to resume");
    }
}

#[test]
fn another_producer_or_epoch_is_not_folded() {
    let (mut c, (pid, epoch), _) = prepared(true);
    for next in [
        NextAdd {
            producer_id: pid,
            producer_epoch: epoch - 1,
            partitions: vec![tp(2)],
        },
        NextAdd {
            producer_id: pid + 1,
            producer_epoch: epoch,
            partitions: vec![tp(2)],
        },
        NextAdd {
            producer_id: pid,
            producer_epoch: epoch,
            partitions: Vec::new(),
        },
    ] {
        let (mut c2, _, _) = prepared(true);
        let records = c2.complete_then_add(T, 5, Some(&next));
        assert_eq!(records.len(), 1, "{next:?}");
        assert_eq!(records[0].state, TxnState::CompleteCommit);
    }
    let records = c.complete_then_add(T, 5, None);
    assert_eq!(records.len(), 1);
    c.on_written(T, Some(next_offset()));
    assert_eq!(
        c.describe(T).map(|m| m.state),
        Some(TxnState::CompleteCommit)
    );
}

#[test]
fn a_failed_folded_write_changes_nothing_and_is_tried_again() {
    let (mut c, (pid, epoch), _) = prepared(true);
    let next = NextAdd {
        producer_id: pid,
        producer_epoch: epoch,
        partitions: vec![tp(3)],
    };
    assert_eq!(c.complete_then_add(T, 5, Some(&next)).len(), 2);
    assert!(c.on_written(T, None).is_empty());
    assert_eq!(
        c.describe(T).map(|m| m.state),
        Some(TxnState::PrepareCommit),
        "neither record took effect"
    );
    assert_eq!(
        c.complete_then_add(T, 6, Some(&next)).len(),
        2,
        "tried again"
    );
    c.on_written(T, Some(next_offset()));
    let m = c.describe(T).expect("known");
    assert_eq!(m.state, TxnState::Ongoing);
    assert!(m.partitions.contains(&tp(3)));
}
