//! The pipelines' rules, one at a time.

use super::*;
use bytes::Bytes;

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

fn batch(partition: i32, stamp: Option<(i64, i16, i32)>) -> ClosedBatch {
    ClosedBatch {
        tp: tp(partition),
        bytes: Bytes::new(),
        records: Vec::new(),
        reserved_bytes: 0,
        created_ms: 0,
        attempts: 1,
        retry_at_ms: 0,
        stale_metadata_version: None,
        sent_to: None,
        stamp,
        order: 0,
        restamp: false,
        sent_behind: false,
    }
}

/// Numbers and sends a batch of `partition` to leader 1 under producer (7, 0).
fn send(pipes: &mut Pipes, partition: i32) -> ClosedBatch {
    let mut b = batch(partition, Some((7, 0, 0)));
    pipes.number(&mut b);
    pipes.sent(&mut b, 1);
    b
}

#[test]
fn a_partition_pipelines_up_to_its_bound_to_one_leader_and_producer() {
    let mut pipes = Pipes::new(3);
    let producer = Some((7, 0));
    assert!(pipes.may_send_new(&tp(0), 1, producer));
    let first = send(&mut pipes, 0);
    send(&mut pipes, 0);
    assert!(pipes.may_send_new(&tp(0), 1, producer));
    assert!(!pipes.may_send_new(&tp(0), 2, producer), "another leader");
    assert!(
        !pipes.may_send_new(&tp(0), 1, Some((8, 0))),
        "another producer id"
    );
    assert!(
        !pipes.may_send_new(&tp(0), 1, Some((7, 1))),
        "another epoch"
    );
    send(&mut pipes, 0);
    assert!(!pipes.may_send_new(&tp(0), 1, producer), "three in flight");
    assert!(
        pipes.may_send_new(&tp(1), 1, producer),
        "partitions are apart"
    );
    pipes.resolved(&first);
    assert!(pipes.may_send_new(&tp(0), 1, producer));
}

#[test]
fn a_batch_sent_back_holds_new_ones_and_goes_alone_in_order() {
    let mut pipes = Pipes::new(5);
    let producer = Some((7, 0));
    let b0 = send(&mut pipes, 0);
    let b1 = send(&mut pipes, 0);
    let b2 = send(&mut pipes, 0);
    assert_eq!((b0.order, b1.order, b2.order), (0, 1, 2));
    assert!(!pipes.earlier_unresolved(&b0));
    assert!(pipes.earlier_unresolved(&b2));
    // The first fails retriably; the later ones come back behind it.
    pipes.requeue(b1);
    assert!(!pipes.may_send_new(&tp(0), 1, producer), "a batch waits");
    assert_eq!(pipes.resendable().count(), 0, "b0 and b2 still in flight");
    pipes.requeue(b2);
    pipes.resolved(&b0);
    let firsts: Vec<u64> = pipes.resendable().map(|b| b.order).collect();
    assert_eq!(firsts, vec![1], "the earliest waiting batch, alone");
    let mut again = pipes.take_resend(&tp(0)).expect("b1");
    pipes.sent(&mut again, 1);
    assert_eq!(pipes.resendable().count(), 0, "b2 waits for b1's answer");
    pipes.resolved(&again);
    let mut last = pipes.take_resend(&tp(0)).expect("b2");
    assert_eq!(last.order, 2);
    pipes.sent(&mut last, 1);
    // Nothing waits any more: new batches may follow the last resend.
    assert!(pipes.may_send_new(&tp(0), 1, producer), "pipelined again");
    pipes.resolved(&last);
    assert_eq!(pipes.by_tp.len(), 0, "nothing kept for a settled partition");
}

#[test]
fn expired_waiting_batches_leave_and_a_put_back_one_waits_again() {
    let mut pipes = Pipes::new(5);
    let mut b0 = send(&mut pipes, 0);
    b0.created_ms = 10;
    let mut b1 = send(&mut pipes, 0);
    b1.created_ms = 20;
    pipes.requeue(b0);
    pipes.requeue(b1);
    let expired = pipes.take_expired(15);
    assert_eq!(expired.iter().map(|b| b.order).collect::<Vec<_>>(), vec![0]);
    pipes.resolved_waiting(&expired[0]);
    let b1 = pipes.take_resend(&tp(0)).expect("b1");
    pipes.put_back(b1);
    assert_eq!(pipes.waiting().count(), 1);
    assert_eq!(
        pipes.resendable().map(|b| b.order).collect::<Vec<_>>(),
        vec![1]
    );
}
