//! The idempotent producer's pipelines through the core: several batches of one partition in
//! flight, resends in order behind a failed batch, and renumbering only of a batch the broker
//! said it did not write.

use super::*;
use crate::codec::Request;

/// One record per batch (a batch takes one record past `batch_bytes`).
fn one_per_batch() -> ProducerConfig {
    ProducerConfig {
        linger_ms: 0,
        batch_bytes: 1,
        ..ProducerConfig::default()
    }
}

/// A producer with `records` records queued for t-0, its metadata and id (77) answered; the
/// produce requests it sends then.
fn started(records: usize) -> (ProducerCore, Vec<(String, Request)>) {
    let mut p = core(one_per_batch());
    for i in 0..records {
        p.send(
            ProducerRecord::new("t", format!("v{i}")).with_partition(0),
            0,
        )
        .unwrap();
    }
    let first = p.poll_actions(0);
    let mut reqs = requests(&first);
    reqs.extend(requests(&with_metadata(&mut p, &first, &[0], 0)));
    answer_pid(&mut p, &reqs, (77, 0), 0);
    let produce = requests(&p.poll_actions(0));
    (p, produce)
}

/// (producer id, base sequence) of the one batch `req` carries.
fn stamp(req: &Request) -> (i64, i32) {
    let h = spool_storage::batch::validate(&req.payload, 1 << 20).expect("one whole batch");
    assert_eq!(
        h.total_bytes(),
        req.payload.len(),
        "one batch per request here"
    );
    (h.producer_id, h.base_sequence)
}

fn answer(p: &mut ProducerCore, (addr, req): &(String, Request), code: ErrorCode, offset: i64) {
    p.on_response(
        addr,
        respond(req, produce_response(req, code, offset), Bytes::new()),
        0,
    );
}

fn delivered_offsets(p: &mut ProducerCore) -> Vec<(RecordId, i64)> {
    let mut out: Vec<(RecordId, i64)> = p
        .take_reports()
        .into_iter()
        .map(|r| (r.id, r.result.map_or(-1, |m| m.offset)))
        .collect();
    out.sort();
    out
}

#[test]
fn an_idempotent_producer_keeps_five_batches_of_a_partition_in_flight() {
    let (mut p, reqs) = started(7);
    let stamps: Vec<(i64, i32)> = reqs.iter().map(|(_, r)| stamp(r)).collect();
    assert_eq!(
        stamps,
        (0..5).map(|s| (77, s)).collect::<Vec<_>>(),
        "in sequence order"
    );
    assert!(
        requests(&p.poll_actions(0)).is_empty(),
        "five in flight at most"
    );
    answer(&mut p, &reqs[0], ErrorCode::None, 100);
    let next = requests(&p.poll_actions(0));
    assert_eq!(
        next.iter().map(|(_, r)| stamp(r)).collect::<Vec<_>>(),
        vec![(77, 5)]
    );
    assert_eq!(delivered_offsets(&mut p), vec![(0, 100)]);
}

#[test]
fn without_idempotence_a_partition_keeps_one_batch_in_flight() {
    let mut p = core(ProducerConfig {
        acks: Acks::Leader,
        enable_idempotence: false,
        ..one_per_batch()
    });
    for i in 0..3 {
        p.send(
            ProducerRecord::new("t", format!("v{i}")).with_partition(0),
            0,
        )
        .unwrap();
    }
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    assert_eq!(reqs.len(), 1, "{reqs:?}");
}

#[test]
fn batches_refused_behind_a_failed_one_go_again_in_order_with_their_stamps() {
    let (mut p, reqs) = started(3);
    assert_eq!(reqs.len(), 3);
    let sent: Vec<Bytes> = reqs.iter().map(|(_, r)| r.payload.clone()).collect();
    // The first times out at the broker (its outcome unknown); the next two were refused.
    answer(&mut p, &reqs[0], ErrorCode::RequestTimedOut, -1);
    answer(&mut p, &reqs[1], ErrorCode::OutOfOrderSequenceNumber, -1);
    answer(&mut p, &reqs[2], ErrorCode::OutOfOrderSequenceNumber, -1);
    assert!(p.take_reports().is_empty(), "nothing failed");
    let mut now_ms = 0;
    for (i, offset) in [(0, 10), (1, 11), (2, 12)] {
        let again = next_request(&mut p, &mut now_ms);
        assert_eq!(
            again.1.payload, sent[i],
            "batch {i} again, alone, the same bytes"
        );
        assert!(
            requests(&p.poll_actions(now_ms)).is_empty(),
            "one resend at a time"
        );
        answer(&mut p, &again, ErrorCode::None, offset);
    }
    assert_eq!(delivered_offsets(&mut p), vec![(0, 10), (1, 11), (2, 12)]);
    assert!(p.is_idle());
}

#[test]
fn only_a_batch_the_broker_did_not_write_is_renumbered_under_a_new_id() {
    let (mut p, reqs) = started(3);
    // The first fails for good: the producer takes a new id.
    answer(&mut p, &reqs[0], ErrorCode::MessageTooLarge, -1);
    // The second was refused under the old id (so not written): renumbered under the new one.
    answer(&mut p, &reqs[1], ErrorCode::OutOfOrderSequenceNumber, -1);
    // The third's outcome is unknown (its connection timed out): it keeps its old stamp, since
    // renumbering it could write it twice.
    answer(&mut p, &reqs[2], ErrorCode::RequestTimedOut, -1);
    let reports = p.take_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].id, 0);
    assert!(reports[0].result.is_err());
    let mut now_ms = 0;
    let pid_req = next_request(&mut p, &mut now_ms);
    assert!(matches!(
        pid_req.1.header.body,
        RequestBodyT::InitProducerIdRequest(_)
    ));
    answer_pid(&mut p, &[pid_req], (78, 0), now_ms);
    let second = next_request(&mut p, &mut now_ms);
    assert_eq!(
        stamp(&second.1),
        (78, 0),
        "renumbered from the new id's first sequence"
    );
    answer(&mut p, &second, ErrorCode::None, 20);
    let third = next_request(&mut p, &mut now_ms);
    assert_eq!(
        stamp(&third.1),
        (77, 2),
        "its old stamp: the broker may have it"
    );
    // The broker had not written it either: now it goes renumbered, after the second.
    answer(&mut p, &third, ErrorCode::OutOfOrderSequenceNumber, -1);
    let third = next_request(&mut p, &mut now_ms);
    assert_eq!(stamp(&third.1), (78, 1));
    answer(&mut p, &third, ErrorCode::None, 21);
    assert_eq!(delivered_offsets(&mut p), vec![(1, 20), (2, 21)]);
    // New batches continue the new id's sequence.
    p.send(ProducerRecord::new("t", "late").with_partition(0), now_ms)
        .unwrap();
    let late = next_request(&mut p, &mut now_ms);
    assert_eq!(stamp(&late.1), (78, 2));
}

#[test]
fn out_of_order_with_nothing_unresolved_before_it_fails_the_batch() {
    let (mut p, reqs) = started(1);
    answer(&mut p, &reqs[0], ErrorCode::OutOfOrderSequenceNumber, -1);
    let reports = p.take_reports();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].result.is_err(), "{reports:?}");
}

#[test]
fn a_batch_the_broker_took_before_its_predecessor_goes_again_once() {
    let (mut p, reqs) = started(2);
    let second_bytes = reqs[1].1.payload.clone();
    // The broker handled the second request first (refused: a gap), then the first.
    answer(&mut p, &reqs[0], ErrorCode::None, 30);
    answer(&mut p, &reqs[1], ErrorCode::OutOfOrderSequenceNumber, -1);
    assert_eq!(
        delivered_offsets(&mut p),
        vec![(0, 30)],
        "the second not failed"
    );
    let mut now_ms = 0;
    let again = next_request(&mut p, &mut now_ms);
    assert_eq!(again.1.payload, second_bytes);
    // Refused again, alone: the broker's state and ours disagree; it fails.
    answer(&mut p, &again, ErrorCode::OutOfOrderSequenceNumber, -1);
    let reports = p.take_reports();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].result.is_err(), "{reports:?}");
}
