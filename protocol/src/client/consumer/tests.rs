//! Unit tests of the consumer core: hand-made fetch and list-offsets responses, no sockets.

use super::*;
use crate::client::test_util::*;
use crate::codec::Request;
use crate::payload::PayloadBuilder;
use crate::wire::{
    AbortedTransactionT, FetchResponseT, FetchableTopicResponseT, ListOffsetsPartitionResponseT,
    ListOffsetsResponseT, ListOffsetsTopicResponseT,
};
use spool_storage::records::BatchBuilder;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// One encoded batch at `base_offset`.
fn batch(
    base_offset: i64,
    producer_id: i64,
    transactional: bool,
    control: Option<i16>,
    values: &[&str],
) -> Bytes {
    let mut b = BatchBuilder::new(1000);
    b.producer_id = producer_id;
    b.producer_epoch = 0;
    b.base_sequence = 0;
    b.transactional = transactional;
    if let Some(marker) = control {
        b.control = true;
        let mut key = Vec::new();
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&marker.to_be_bytes());
        b.push(
            1000,
            Some(Bytes::from(key)),
            Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0])),
        );
    }
    for v in values {
        b.push(1000, None, Some(Bytes::from(v.to_string())));
    }
    let mut bytes = b.build().unwrap();
    spool_storage::batch::set_base_offset(&mut bytes, base_offset);
    bytes.freeze()
}

fn fetch_response(
    req: &Request,
    batches: &[Bytes],
    high_watermark: i64,
    aborted: Vec<(i64, i64)>,
    code: ErrorCode,
) -> Response {
    let mut payload = PayloadBuilder::new();
    let mut d = FetchPartitionDataT::default();
    d.partition_index = 0;
    d.error_code = code.into();
    d.high_watermark = high_watermark;
    d.aborted_transactions = Some(
        aborted
            .into_iter()
            .map(|(producer_id, first_offset)| AbortedTransactionT {
                producer_id,
                first_offset,
            })
            .collect(),
    );
    if !batches.is_empty() {
        d.records = Some(payload.push(Bytes::from(batches.concat())).unwrap());
    }
    let mut t = FetchableTopicResponseT::default();
    t.topic = "t".into();
    t.partitions = Some(vec![d]);
    let mut r = FetchResponseT::default();
    r.responses = Some(vec![t]);
    let chunks = payload.finish();
    respond(
        req,
        ResponseBodyT::FetchResponse(Box::new(r)),
        Bytes::from(chunks.concat()),
    )
}

fn list_offsets_response(req: &Request, offset: i64) -> Response {
    let mut p = ListOffsetsPartitionResponseT::default();
    p.partition_index = 0;
    p.offset = offset;
    let mut t = ListOffsetsTopicResponseT::default();
    t.name = "t".into();
    t.partitions = Some(vec![p]);
    let mut r = ListOffsetsResponseT::default();
    r.topics = Some(vec![t]);
    respond(
        req,
        ResponseBodyT::ListOffsetsResponse(Box::new(r)),
        Bytes::new(),
    )
}

/// A consumer assigned t-0, with metadata answered and its position resolved to `start`.
fn ready_consumer(config: ConsumerConfig, start: i64) -> ConsumerCore {
    let mut c = ConsumerCore::new(config, vec!["boot:1".into()]).unwrap();
    c.assign([tp()]);
    let reqs = requests(&c.poll_actions(0));
    let (addr, req) = &reqs[0];
    c.on_response(addr, respond(req, metadata("t", &[0], 1), Bytes::new()), 0);
    let reqs = requests(&c.poll_actions(0));
    let (addr, req) = &reqs[0];
    assert!(matches!(
        req.header.body,
        RequestBodyT::ListOffsetsRequest(_)
    ));
    c.on_response(addr, list_offsets_response(req, start), 0);
    assert_eq!(c.position(&tp()), Some(start));
    c
}

fn next_fetch(c: &mut ConsumerCore, now_ms: u64) -> (String, Request) {
    let mut reqs = requests(&c.poll_actions(now_ms));
    assert_eq!(reqs.len(), 1);
    let (addr, req) = reqs.remove(0);
    assert!(
        matches!(req.header.body, RequestBodyT::FetchRequest(_)),
        "{:?}",
        req.header.api_key
    );
    (addr, req)
}

fn earliest() -> ConsumerConfig {
    ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    }
}

#[test]
fn fetch_decodes_batches_and_tracks_position() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    let RequestBodyT::FetchRequest(f) = &req.header.body else {
        unreachable!()
    };
    assert_eq!(f.max_wait_ms, 500);
    assert_eq!(
        f.topics.as_ref().unwrap()[0].partitions.as_ref().unwrap()[0].fetch_offset,
        0
    );
    let batches = [
        batch(0, -1, false, None, &["a", "b"]),
        batch(2, -1, false, None, &["c"]),
    ];
    c.on_response(
        &addr,
        fetch_response(&req, &batches, 3, vec![], ErrorCode::None),
        1,
    );
    assert_eq!(
        c.position(&tp()),
        Some(0),
        "position moves as records are taken"
    );
    let got = c.take_records(2);
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(c.position(&tp()), Some(2));
    let got = c.take_records(10);
    assert_eq!(got[0].value.as_deref(), Some(&b"c"[..]));
    assert_eq!(c.position(&tp()), Some(3));
    assert_eq!(c.high_watermark(&tp()), Some(3));
    let (_, req) = next_fetch(&mut c, 2);
    let RequestBodyT::FetchRequest(f) = &req.header.body else {
        unreachable!()
    };
    assert_eq!(
        f.topics.as_ref().unwrap()[0].partitions.as_ref().unwrap()[0].fetch_offset,
        3
    );
}

#[test]
fn read_committed_drops_aborted_transactions_and_markers() {
    let config = ConsumerConfig {
        isolation_level: IsolationLevel::ReadCommitted,
        ..earliest()
    };
    let mut c = ready_consumer(config, 0);
    let (addr, req) = next_fetch(&mut c, 0);
    let batches = [
        batch(0, 7, true, None, &["aborted-1", "aborted-2"]),
        batch(2, -1, false, None, &["plain"]),
        batch(3, 7, true, Some(0), &[]), // abort marker for pid 7
        batch(4, 8, true, None, &["committed"]),
        batch(5, 8, true, Some(1), &[]), // commit marker for pid 8
    ];
    c.on_response(
        &addr,
        fetch_response(&req, &batches, 6, vec![(7, 0)], ErrorCode::None),
        1,
    );
    let got: Vec<(i64, String)> = c
        .take_records(100)
        .into_iter()
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(2, "plain".to_owned()), (4, "committed".to_owned())]
    );
    assert_eq!(
        c.position(&tp()),
        Some(6),
        "markers and aborted records count as consumed"
    );
}

#[test]
fn read_uncommitted_returns_everything_but_markers() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    let batches = [
        batch(0, 7, true, None, &["x"]),
        batch(1, 7, true, Some(0), &[]),
    ];
    c.on_response(
        &addr,
        fetch_response(&req, &batches, 2, vec![(7, 0)], ErrorCode::None),
        1,
    );
    assert_eq!(c.take_records(10).len(), 1);
    assert_eq!(c.position(&tp()), Some(2));
}

#[test]
fn a_fetch_answered_after_a_seek_is_dropped() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    c.seek(&tp(), SeekTo::Offset(100)).unwrap();
    c.on_response(
        &addr,
        fetch_response(
            &req,
            &[batch(0, -1, false, None, &["old"])],
            1,
            vec![],
            ErrorCode::None,
        ),
        1,
    );
    assert!(!c.has_records());
    assert_eq!(c.position(&tp()), Some(100));
    let (_, req) = next_fetch(&mut c, 1);
    let RequestBodyT::FetchRequest(f) = &req.header.body else {
        unreachable!()
    };
    assert_eq!(
        f.topics.as_ref().unwrap()[0].partitions.as_ref().unwrap()[0].fetch_offset,
        100
    );
}

#[test]
fn offset_out_of_range_resets_or_reports() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    c.on_response(
        &addr,
        fetch_response(&req, &[], 0, vec![], ErrorCode::OffsetOutOfRange),
        1,
    );
    let reqs = requests(&c.poll_actions(1));
    assert!(
        matches!(reqs[0].1.header.body, RequestBodyT::ListOffsetsRequest(_)),
        "reset to earliest"
    );

    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::None,
        ..ConsumerConfig::default()
    };
    let mut c = ConsumerCore::new(config, vec!["boot:1".into()]).unwrap();
    c.assign([tp()]);
    c.seek(&tp(), SeekTo::Offset(50)).unwrap();
    let reqs = requests(&c.poll_actions(0));
    let (addr, req) = &reqs[0];
    c.on_response(addr, respond(req, metadata("t", &[0], 1), Bytes::new()), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    c.on_response(
        &addr,
        fetch_response(&req, &[], 10, vec![], ErrorCode::OffsetOutOfRange),
        1,
    );
    assert_eq!(
        c.take_error().and_then(|e| e.error_code()),
        Some(ErrorCode::OffsetOutOfRange)
    );
    assert!(
        requests(&c.poll_actions(2)).is_empty(),
        "no fetching until the application seeks"
    );
}

#[test]
fn fetching_stops_while_the_buffer_is_full() {
    let config = ConsumerConfig {
        max_buffered_bytes: 100,
        ..earliest()
    };
    let mut c = ready_consumer(config, 0);
    let (addr, req) = next_fetch(&mut c, 0);
    let batches = [batch(0, -1, false, None, &["a", "b", "c"])];
    c.on_response(
        &addr,
        fetch_response(&req, &batches, 3, vec![], ErrorCode::None),
        1,
    );
    assert!(c.buffered_bytes() >= 100);
    assert!(
        requests(&c.poll_actions(2)).is_empty(),
        "over max_buffered_bytes: no fetch"
    );
    let _ = c.take_records(100);
    assert_eq!(c.buffered_bytes(), 0);
    let _ = next_fetch(&mut c, 3);
}

#[test]
fn corrupt_batch_is_reported_with_its_partition() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    let mut bad = batch(0, -1, false, None, &["a"]).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    c.on_response(
        &addr,
        fetch_response(&req, &[Bytes::from(bad)], 1, vec![], ErrorCode::None),
        1,
    );
    let err = c.take_error().expect("an error");
    assert!(
        matches!(&err, ClientError::Corrupt(m) if m.contains("t-0")),
        "{err}"
    );
    assert!(!c.has_records());
}

#[test]
fn paused_partitions_are_not_fetched() {
    let mut c = ready_consumer(earliest(), 0);
    c.pause(&tp()).unwrap();
    assert_eq!(c.paused(), vec![tp()]);
    assert!(requests(&c.poll_actions(0)).is_empty());
    c.resume(&tp()).unwrap();
    let _ = next_fetch(&mut c, 0);
    assert!(matches!(
        c.pause(&TopicPartition::new("other", 0)),
        Err(ClientError::NotAssigned(_))
    ));
}

#[test]
fn not_leader_refreshes_metadata() {
    let mut c = ready_consumer(earliest(), 0);
    let (addr, req) = next_fetch(&mut c, 0);
    c.on_response(
        &addr,
        fetch_response(&req, &[], -1, vec![], ErrorCode::NotLeaderOrFollower),
        1,
    );
    let reqs = requests(&c.poll_actions(1000));
    assert!(reqs
        .iter()
        .any(|(_, r)| matches!(r.header.body, RequestBodyT::MetadataRequest(_))));
    assert!(!c.has_error(), "retriable: not reported");
}

proptest::proptest! {
    /// Whatever bytes and offsets a broker sends, decoding returns records or an error, never a
    /// panic (base offsets are outside the CRC, so even a "valid" batch can carry any of them).
    #[test]
    fn decode_fetched_never_panics(
        noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        base_offset in proptest::prelude::any::<i64>(),
        fetch_offset in proptest::prelude::any::<i64>(),
        aborted in proptest::collection::vec((proptest::prelude::any::<i64>(), proptest::prelude::any::<i64>()), 0..4),
        read_committed in proptest::prelude::any::<bool>(),
    ) {
        let _ = decode_fetched(&tp(), &Bytes::from(noise.clone()), fetch_offset, &aborted, read_committed, 1 << 20);
        let mut bytes = batch(0, 7, true, None, &["a", "b"]).to_vec();
        spool_storage::batch::set_base_offset(&mut bytes, base_offset);
        bytes.extend_from_slice(&noise);
        let d = decode_fetched(&tp(), &Bytes::from(bytes), fetch_offset, &aborted, read_committed, 1 << 20);
        for r in &d.records {
            proptest::prop_assert!(r.offset >= fetch_offset);
        }
    }
}
