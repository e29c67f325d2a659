//! Bad input is harmless (DESIGN §1): malformed requests on one connection get their specific
//! error codes — or, where nothing in a frame can be trusted, a hang-up — while a producer on
//! another connection keeps getting every acknowledgement, and loses nothing.

use std::time::Duration;

use bytes::Bytes;
use spool_protocol::wire::{self, ErrorCode, RequestBodyT};
use spool_storage::records::BatchBuilder;
use spool_tests::checker;
use spool_tests::client::{self, consume_until, create_topic};
use spool_tests::garbage::{self, Rng};
use spool_tests::steady::SteadyProducer;
use spool_tests::wire::{api_versions_body, produce_body, produce_outcome, RawConn};
use spool_tests::{Broker, BrokerOptions};

/// The broker's `--max-message-bytes` in the bad-input test.
const MAX_MESSAGE_BYTES: usize = 4096;
/// Bound on reading records back.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// One valid batch of `records` records with `value_bytes`-byte values.
fn batch(records: usize, value_bytes: usize) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for i in 0..records {
        b.push(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(vec![b'x'; value_bytes])),
        );
    }
    b.build().expect("building a batch").freeze()
}

/// Sends a produce for `topic`/`partition` with `records` and returns its per-partition error.
fn produce_error(
    conn: &mut RawConn,
    topic: &str,
    partition: i32,
    acks: i16,
    records: Bytes,
) -> ErrorCode {
    let (body, payload) = produce_body(topic, partition, acks, records);
    let r = conn.request(body, 0, payload).expect("a produce response");
    produce_outcome(&r).expect("a produce outcome").0
}

/// Requests answered with an error code on a connection that stays open.
fn answered_with_errors(broker: &Broker, steady: &SteadyProducer, mut acked: usize) -> usize {
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    let step = |what: &str, got: ErrorCode, want: ErrorCode, acked: &mut usize| {
        assert_eq!(got, want, "{what}");
        *acked = steady.wait_past(*acked, what);
    };

    let r = conn
        .request(api_versions_body(), 9, Vec::new())
        .expect("a response");
    step(
        "ApiVersions v9",
        r.header.error_code,
        ErrorCode::UNSUPPORTED_VERSION,
        &mut acked,
    );

    let (body, payload) = produce_body("target", 0, -1, batch(1, 10));
    let r = conn.request(body, 3, payload).expect("a response");
    step(
        "Produce v3",
        r.header.error_code,
        ErrorCode::UNSUPPORTED_VERSION,
        &mut acked,
    );

    let find = RequestBodyT::FindCoordinatorRequest(Box::default());
    let r = conn.request(find, 7, Vec::new()).expect("a response");
    step(
        "FindCoordinator v7 (an unsupported version)",
        r.header.error_code,
        ErrorCode::UNSUPPORTED_VERSION,
        &mut acked,
    );

    let mut corrupt = batch(3, 100).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55; // inside the records, which the CRC covers
    let got = produce_error(&mut conn, "target", 0, -1, corrupt.into());
    step(
        "batch with a bad CRC",
        got,
        ErrorCode::CORRUPT_MESSAGE,
        &mut acked,
    );

    let half = batch(3, 100).slice(..120);
    let got = produce_error(&mut conn, "target", 0, -1, half);
    step(
        "truncated batch",
        got,
        ErrorCode::CORRUPT_MESSAGE,
        &mut acked,
    );

    let got = produce_error(&mut conn, "target", 0, -1, Bytes::new());
    step("empty records", got, ErrorCode::CORRUPT_MESSAGE, &mut acked);

    // Random bytes behind a length field that fits: bad magic or bad CRC.
    let mut noise = Rng::new(7).bytes(300);
    noise[8..12].copy_from_slice(&(300u32 - 12).to_be_bytes());
    let got = produce_error(&mut conn, "target", 0, -1, Bytes::from(noise));
    step(
        "random records",
        got,
        ErrorCode::CORRUPT_MESSAGE,
        &mut acked,
    );

    // A batch length past the limit is refused from the length alone.
    let mut huge = batch(1, 10).to_vec();
    huge[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    let got = produce_error(&mut conn, "target", 0, -1, Bytes::from(huge));
    step(
        "batch length of 2 GiB",
        got,
        ErrorCode::MESSAGE_TOO_LARGE,
        &mut acked,
    );

    let big = batch(1, 2 * MAX_MESSAGE_BYTES);
    let got = produce_error(&mut conn, "target", 0, -1, big);
    step(
        "batch over --max-message-bytes",
        got,
        ErrorCode::MESSAGE_TOO_LARGE,
        &mut acked,
    );

    let got = produce_error(&mut conn, "no-such-topic", 0, -1, batch(1, 10));
    step(
        "unknown topic",
        got,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        &mut acked,
    );

    for partition in [2, -1, i32::MAX] {
        let got = produce_error(&mut conn, "target", partition, -1, batch(1, 10));
        step(
            &format!("partition {partition} of a 2-partition topic"),
            got,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            &mut acked,
        );
    }

    let got = produce_error(&mut conn, "target", 0, 7, batch(1, 10));
    step("acks=7", got, ErrorCode::INVALID_REQUIRED_ACKS, &mut acked);

    // After all that, the same connection still works, and nothing bad was appended.
    let (body, payload) = produce_body("target", 1, -1, batch(2, 10));
    let r = conn.request(body, 0, payload).expect("a response");
    let (code, offset) = produce_outcome(&r).expect("a produce outcome");
    assert_eq!(
        (code, offset),
        (ErrorCode::NONE, 0),
        "a valid produce after the bad ones"
    );
    let got = produce_error(&mut conn, "target", 0, -1, batch(1, 10));
    assert_eq!(
        got,
        ErrorCode::NONE,
        "partition 0 after the refused batches"
    );
    conn.api_versions()
        .expect("ApiVersions on the same connection");
    acked
}

/// Input after which the broker can only hang up: nothing in it can be trusted to answer.
fn closed_connections(broker: &Broker, steady: &SteadyProducer, mut acked: usize) -> usize {
    let mut rng = Rng::new(0x5eed);
    let valid = {
        let mut c = Vec::new();
        let limits = spool_protocol::frame::FrameLimits::default();
        let h = spool_protocol::codec::request(1, None, api_versions_body());
        spool_protocol::codec::encode_request(&h, Vec::new(), &limits)
            .expect("encoding ApiVersions")
            .write_to(&mut c)
            .expect("writing to memory");
        c
    };
    let mut cases: Vec<(String, Vec<u8>, bool)> = Vec::new();
    for len in [1, 3, 7, 64, 4096, 65_536] {
        cases.push((format!("{len} random bytes"), rng.bytes(len), true));
    }
    cases.push((
        "a frame cut short".into(),
        valid[..valid.len() - 5].to_vec(),
        true,
    ));
    cases.push(("a frame prefix cut short".into(), valid[..2].to_vec(), true));
    cases.push((
        "a 4 GiB length prefix".into(),
        u32::MAX.to_be_bytes().to_vec(),
        false,
    ));
    cases.push((
        "a length prefix just over 100 MiB".into(),
        (100u32 * 1024 * 1024 - 3).to_be_bytes().to_vec(),
        false,
    ));
    cases.push((
        "a 3-byte frame".into(),
        garbage::frame_with_lengths(3, 0, &[]).to_vec(),
        false,
    ));
    cases.push((
        "a header length past the frame".into(),
        garbage::frame_with_lengths(20, 1000, &[0; 16]).to_vec(),
        false,
    ));
    cases.push((
        "a random header".into(),
        garbage::frame_around_header(&rng.bytes(200)).to_vec(),
        false,
    ));
    cases.push((
        "an empty header".into(),
        garbage::frame_around_header(&[]).to_vec(),
        false,
    ));
    cases.push((
        "unknown API key 999".into(),
        garbage::header_with_api_key(999, 5).to_vec(),
        false,
    ));
    cases.push((
        "api key Produce on an ApiVersions body".into(),
        garbage::header_with_api_key(wire::ApiKey::Produce.0, 6).to_vec(),
        false,
    ));
    cases.push((
        "valid frames then random bytes".into(),
        [valid.clone(), valid.clone(), rng.bytes(100)].concat(),
        true,
    ));
    for (what, bytes, half_close) in cases {
        let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
        // The peer may hang up before taking every byte; that is an answer too.
        let _ = conn.send_raw(&bytes);
        if half_close {
            let _ = conn.finish_sending();
        }
        if let Err(e) = conn.expect_closed() {
            panic!("after {what}: the broker kept the connection: {e}");
        }
        acked = steady.wait_past(acked, &what);
    }
    acked
}

#[test]
fn bad_input_on_one_connection_harms_no_producer() {
    let mut broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--max-message-bytes")
            .arg(MAX_MESSAGE_BYTES.to_string()),
    );
    create_topic(&broker, "steady", 4);
    create_topic(&broker, "target", 2);
    let steady = SteadyProducer::start(&broker, "steady");
    let acked = steady.wait_past(0, "start-up");

    let acked = answered_with_errors(&broker, &steady, acked);
    closed_connections(&broker, &steady, acked);

    assert!(
        broker.is_running(),
        "the broker died\n{}",
        broker.log_tail()
    );
    RawConn::connect(broker.native_addr())
        .and_then(|mut c| c.api_versions())
        .expect("a fresh connection after the bad input");
    let acked = steady.stop();
    let read = consume_until(&broker, "steady", 4, CONSUME_TIMEOUT, |r| {
        r.len() >= acked.len()
    });
    checker::assert_none(
        "the steady producer's records",
        &checker::missing_acked(&acked, &read),
    );
    checker::assert_none("duplicates", &checker::duplicates(&read));
    assert_eq!(
        read.len(),
        acked.len(),
        "records nobody acknowledged were read"
    );
    // Exactly the two valid batches (3 records) reached the abused topic.
    let target = consume_until(&broker, "target", 2, CONSUME_TIMEOUT, |r| r.len() >= 3);
    assert_eq!(target.len(), 3, "records in the abused topic: {target:?}");
    let ends = client::end_offsets(&broker, "target", 2);
    assert_eq!(
        ends,
        [1, 2],
        "end offsets of the abused topic (1 + 2 valid records)"
    );
    assert!(
        !broker.log().contains("panicked"),
        "the broker panicked on input\n{}",
        broker.log_tail()
    );
    broker.terminate();
}
