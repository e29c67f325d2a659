//! Units of records through the core ([`ProducerCore::send_records`]): one batch, one report
//! with the first record's offset, counted per record, refused or failed as a whole.

use super::*;
use crate::client::ProducerRecords;

fn unit(partition: Option<i32>, values: &[&'static str]) -> ProducerRecords {
    let mut u = ProducerRecords::new("t");
    u.partition = partition;
    for v in values {
        u.push(Bytes::from_static(v.as_bytes()));
    }
    u
}

#[test]
fn a_unit_shares_a_batch_with_single_records_in_order_and_its_report_names_its_first_offset() {
    let mut p = core(plain());
    let one = p
        .send(ProducerRecord::new("t", "a").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    assert!(requests(&with_metadata(&mut p, &first, &[0], 0)).is_empty());
    let u = p.send_records(unit(Some(0), &["b", "c", "d"]), 1).unwrap();
    let last = p
        .send(ProducerRecord::new("t", "e").with_partition(0), 1)
        .unwrap();
    let reqs = requests(&p.poll_actions(6));
    assert_eq!(reqs.len(), 1, "one batch, one request");
    let (header, records) =
        spool_storage::records::read_batch(&reqs[0].1.payload, 1 << 20).expect("one valid batch");
    assert_eq!(header.record_count, 5);
    let values: Vec<&[u8]> = records
        .iter()
        .map(|r| r.value.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(values, [b"a", b"b", b"c", b"d", b"e"].map(|v| &v[..]));
    let deltas: Vec<i32> = records.iter().map(|r| r.offset_delta).collect();
    assert_eq!(deltas, [0, 1, 2, 3, 4]);
    let (addr, req) = &reqs[0];
    let body = produce_response(req, ErrorCode::None, 100);
    p.on_response(addr, respond(req, body, Bytes::new()), 7);
    let reports = p.take_reports();
    let offsets: Vec<(RecordId, i64)> = reports
        .iter()
        .map(|r| (r.id, r.result.as_ref().unwrap().offset))
        .collect();
    assert_eq!(offsets, vec![(one, 100), (u, 101), (last, 104)]);
    assert_eq!(
        p.stats().records_delivered,
        5,
        "counted per record, not per unit"
    );
    assert!(p.is_idle());
}

#[test]
fn a_unit_that_does_not_fit_the_open_batch_opens_the_next_and_a_big_one_gets_its_own() {
    let config = ProducerConfig {
        batch_bytes: 200,
        ..plain()
    };
    let mut p = core(config);
    let first = p.poll_actions(0);
    p.send(ProducerRecord::new("t", "a").with_partition(0), 0)
        .unwrap();
    assert!(requests(&with_metadata(&mut p, &first, &[0], 0)).is_empty());
    // 61 + 22 so far; a unit of 6 × 22 = 132 does not fit 200: a second batch.
    p.send_records(unit(Some(0), &["1", "2", "3", "4", "5", "6"]), 0)
        .unwrap();
    // A unit of 12 × 22 = 264 > 200 bytes on its own: a third batch, which it fills.
    let big: Vec<&'static str> = vec!["x"; 12];
    p.send_records(unit(Some(0), &big), 0).unwrap();
    p.flush();
    let mut counts = Vec::new();
    let mut now_ms = 1;
    while counts.len() < 3 && now_ms < 10 {
        let actions = p.poll_actions(now_ms);
        for (_, req) in requests(&actions) {
            if let RequestBodyT::ProduceRequest(_) = req.header.body {
                let h = spool_storage::batch::validate(&req.payload, 1 << 20).unwrap();
                counts.push(h.record_count);
                let body = produce_response(&req, ErrorCode::None, 0);
                let addr = "b0:1";
                p.on_response(addr, respond(&req, body, Bytes::new()), now_ms);
            }
        }
        now_ms += 1;
    }
    assert_eq!(
        counts,
        vec![1, 6, 12],
        "one batch each, in order, none split"
    );
}

#[test]
fn units_are_refused_whole_when_empty_too_large_or_the_buffer_is_full() {
    let config = ProducerConfig {
        buffer_bytes: 1000,
        max_request_bytes: 1000,
        ..plain()
    };
    let mut p = core(config);
    assert!(matches!(
        p.send_records(unit(Some(0), &[]), 0),
        Err(SendError::Rejected(ClientError::InvalidArgument(_)))
    ));
    let huge = unit(Some(0), &vec!["0123456789"; 40]);
    assert!(matches!(
        p.send_records(huge, 0),
        Err(SendError::Rejected(ClientError::RecordTooLarge { .. }))
    ));
    // 20 × 31 = 620 bytes fit; the same again does not: the unit comes back whole.
    let twenty = unit(Some(0), &vec!["0123456789"; 20]);
    p.send_records(twenty.clone(), 0).unwrap();
    match p.send_records(twenty.clone(), 0) {
        Err(SendError::BufferFull(back)) => assert_eq!(*back, twenty),
        other => panic!("expected the unit back, got {other:?}"),
    }
    assert_eq!(p.buffered_bytes(), 620);
}

#[test]
fn a_unit_waits_for_metadata_and_fails_whole_on_a_partition_outside_the_topic() {
    let mut p = core(ProducerConfig {
        linger_ms: 0,
        ..plain()
    });
    let bad = p.send_records(unit(Some(9), &["a", "b", "c"]), 0).unwrap();
    let sticky = p.send_records(unit(None, &["d", "e"]), 0).unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0, 1], 0));
    let failed: Vec<RecordId> = p
        .take_reports()
        .iter()
        .filter(|r| matches!(r.result, Err(ClientError::InvalidPartition { .. })))
        .map(|r| r.id)
        .collect();
    assert_eq!(failed, vec![bad]);
    assert_eq!(p.stats().records_failed, 3);
    // The sticky one went to one partition, whole.
    let produce: Vec<_> = reqs
        .iter()
        .filter(|(_, r)| matches!(r.header.body, RequestBodyT::ProduceRequest(_)))
        .collect();
    assert_eq!(produce.len(), 1);
    let h = spool_storage::batch::validate(&produce[0].1.payload, 1 << 20).unwrap();
    assert_eq!(h.record_count, 2);
    let (addr, req) = produce[0];
    let body = produce_response(req, ErrorCode::None, 7);
    p.on_response(addr, respond(req, body, Bytes::new()), 1);
    let reports = p.take_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].id, sticky);
    assert_eq!(reports[0].result.as_ref().unwrap().offset, 7);
}
