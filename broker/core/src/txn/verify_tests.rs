//! KIP-890 verification: each answer by hand, over one transaction's life.

use super::*;
use crate::topic_partition::TopicPartition;
use spool_error_code::ErrorCode;

const T: &str = "txn-v";

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t".to_string(), p)
}

/// Applies a request durably, expecting it to write.
fn durable(c: &mut TxnCoordinator, step: Step) -> Vec<TxnAction> {
    match step {
        Step::Write { record, answer } => {
            assert_eq!(answer, Ok(()));
            c.on_written(&record.transactional_id, Some(super::tests::next_offset()))
        }
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn only_an_ongoing_transaction_holding_the_partition_is_verified() {
    let mut c = TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS);
    assert_eq!(
        c.verify(T, 7, 0, &tp(0)),
        ErrorCode::InvalidProducerIdMapping,
        "unknown id"
    );
    let step = c.init_producer_id(T, 60_000, None, 0, &mut || Some(7));
    durable(&mut c, step);
    assert_eq!(
        c.verify(T, 7, 0, &tp(0)),
        ErrorCode::InvalidTxnState,
        "no transaction yet: a batch would hang"
    );
    let step = c.add_partitions(T, 7, 0, &[tp(0)], 1);
    let Step::Write { record, .. } = &step else {
        panic!("{step:?}")
    };
    let record = record.clone();
    assert_eq!(
        c.verify(T, 7, 0, &tp(0)),
        ErrorCode::InvalidTxnState,
        "the add is not durable yet"
    );
    c.on_written(&record.transactional_id, Some(super::tests::next_offset()));
    assert_eq!(c.verify(T, 7, 0, &tp(0)), ErrorCode::None);
    assert_eq!(
        c.verify(T, 7, 0, &tp(1)),
        ErrorCode::InvalidTxnState,
        "a partition never added"
    );
    assert_eq!(
        c.verify(T, 8, 0, &tp(0)),
        ErrorCode::InvalidProducerIdMapping
    );
    assert_eq!(c.verify(T, 7, 1, &tp(0)), ErrorCode::InvalidProducerEpoch);
    let step = c.end_txn(T, 7, 0, true, 2);
    let actions = durable(&mut c, step);
    assert_eq!(actions.len(), 1, "markers asked for");
    assert_eq!(
        c.verify(T, 7, 0, &tp(0)),
        ErrorCode::InvalidTxnState,
        "being committed: a late batch must not join"
    );
    let done = c.on_markers_written(T, 3).expect("complete record");
    c.on_written(&done.transactional_id, Some(super::tests::next_offset()));
    assert_eq!(
        c.verify(T, 7, 0, &tp(0)),
        ErrorCode::InvalidTxnState,
        "committed: a late batch must not open a new transaction"
    );
}

#[test]
fn a_fenced_instance_is_told_so() {
    let mut c = TxnCoordinator::new(TRANSACTION_MAX_TIMEOUT_MS);
    let step = c.init_producer_id(T, 60_000, None, 0, &mut || Some(7));
    durable(&mut c, step);
    let step = c.add_partitions(T, 7, 0, &[tp(0)], 1);
    durable(&mut c, step);
    // A new instance: the open transaction is aborted with the epoch bumped.
    let mut step = c.init_producer_id(T, 60_000, None, 2, &mut || Some(8));
    for _ in 0..4 {
        match step {
            Step::Write { record, .. } => {
                for a in c.on_written(&record.transactional_id, Some(super::tests::next_offset())) {
                    let TxnAction::WriteMarkers { .. } = a;
                    if let Some(r) = c.on_markers_written(T, 3) {
                        c.on_written(&r.transactional_id, Some(super::tests::next_offset()));
                    }
                }
            }
            Step::Answer(_) => break,
        }
        step = c.init_producer_id(T, 60_000, None, 4, &mut || Some(8));
    }
    let m = c.describe(T).expect("id").clone();
    assert!(m.producer_epoch > 0, "{m:?}");
    assert_eq!(c.verify(T, 7, 0, &tp(0)), ErrorCode::ProducerFenced);
}
