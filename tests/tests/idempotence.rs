//! Idempotent producers across restarts (DESIGN §9): a batch retried after a `kill -9` or a clean
//! restart — the ack lost in the crash — is answered with its original offset and not written
//! twice; the next sequence appends; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
//!
//! The produce requests are built by hand (raw frames, a chosen producer id, epoch and sequence),
//! so the test decides exactly which batch is a retry.

use std::time::Duration;

use bytes::Bytes;
use spool_protocol::wire::{ErrorCode, InitProducerIdRequestT, RequestBodyT, ResponseBodyT};
use spool_storage::records::BatchBuilder;
use spool_tests::client::{consume_until, create_topic, end_offsets};
use spool_tests::wire::{produce_body, produce_outcome, RawConn};
use spool_tests::Broker;

const TOPIC: &str = "idem";
/// Records per batch: a batch's sequences are `seq..seq + RECORDS_PER_BATCH`.
const RECORDS_PER_BATCH: i32 = 2;
/// Bound on reading the topic back.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// The producer id and epoch the broker hands out.
fn init_producer_id(conn: &mut RawConn) -> (i64, i16) {
    let mut body = InitProducerIdRequestT::default();
    body.transactional_id = None;
    body.producer_id = -1;
    body.producer_epoch = -1;
    let r = conn
        .request(
            RequestBodyT::InitProducerIdRequest(Box::new(body)),
            0,
            Vec::new(),
        )
        .expect("an InitProducerId response");
    let ResponseBodyT::InitProducerIdResponse(b) = r.header.body else {
        panic!("not an InitProducerId response: {:?}", r.header);
    };
    assert_eq!(b.error_code, ErrorCode::NONE, "InitProducerId");
    assert!(b.producer_id >= 0, "a producer id: {}", b.producer_id);
    (b.producer_id, b.producer_epoch)
}

/// The values of the batch with first sequence `seq`.
fn values(seq: i32) -> Vec<String> {
    (0..RECORDS_PER_BATCH)
        .map(|i| format!("seq-{:06}", seq + i))
        .collect()
}

fn batch(pid: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.producer_id = pid;
    b.producer_epoch = epoch;
    b.base_sequence = seq;
    for v in values(seq) {
        b.push(1_700_000_000_000, None, Some(Bytes::from(v)));
    }
    b.build().expect("building a batch").freeze()
}

/// Sends the batch (pid, epoch, seq) with acks=all; (error, base offset).
fn produce(conn: &mut RawConn, pid: i64, epoch: i16, seq: i32) -> (ErrorCode, i64) {
    let (body, payload) = produce_body(TOPIC, 0, -1, batch(pid, epoch, seq));
    let r = conn.request(body, 0, payload).expect("a produce response");
    produce_outcome(&r).expect("a produce outcome")
}

/// After the topic held exactly the batches `seqs` (in this order from offset 0): the end offset
/// is theirs and a fetch reads each record once, at its offset.
fn assert_log_holds(broker: &Broker, seqs: &[i32]) {
    let want: Vec<String> = seqs.iter().flat_map(|&s| values(s)).collect();
    assert_eq!(
        end_offsets(broker, TOPIC, 1),
        vec![want.len() as i64],
        "the log end offset"
    );
    let read = consume_until(broker, TOPIC, 1, CONSUME_TIMEOUT, |r| r.len() >= want.len());
    let got: Vec<(i64, String)> = read
        .iter()
        .map(|r| {
            let v = r.value.as_ref().expect("a value");
            (r.offset, String::from_utf8_lossy(v).into_owned())
        })
        .collect();
    let want: Vec<(i64, String)> = want
        .into_iter()
        .enumerate()
        .map(|(o, v)| (o as i64, v))
        .collect();
    assert_eq!(got, want, "every record once, at its offset");
}

/// Stops the broker (`kill -9` or SIGTERM) and starts it again on the same data.
fn restart(broker: &mut Broker, kill9: bool) {
    if kill9 {
        broker.kill9();
    } else {
        broker.terminate();
    }
    broker.restart();
}

fn retried_batches_survive_a_restart(kill9: bool) {
    let mut broker = Broker::start();
    create_topic(&broker, TOPIC, 1);
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    let (pid, epoch) = init_producer_id(&mut conn);

    let mut seqs = Vec::new();
    for i in 0..5 {
        let seq = i * RECORDS_PER_BATCH;
        let offset = i64::from(seq);
        assert_eq!(
            produce(&mut conn, pid, epoch, seq),
            (ErrorCode::NONE, offset),
            "batch {seq}"
        );
        seqs.push(seq);
    }
    let last = *seqs.last().expect("batches");
    // A retry before the restart is deduplicated too (the live table).
    assert_eq!(
        produce(&mut conn, pid, epoch, last),
        (ErrorCode::NONE, i64::from(last))
    );
    drop(conn);

    restart(&mut broker, kill9);
    // The end offset first: it also waits until the partition is open again.
    assert_log_holds(&broker, &seqs);
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting after restart");

    // The last batch again, as a producer whose ack was lost in the crash sends it: its original
    // offset, nothing appended.
    assert_eq!(
        produce(&mut conn, pid, epoch, last),
        (ErrorCode::NONE, i64::from(last)),
        "the retried last batch after the restart\n{}",
        broker.log_tail()
    );
    // An older one of the last five as well.
    assert_eq!(
        produce(&mut conn, pid, epoch, 2 * RECORDS_PER_BATCH),
        (ErrorCode::NONE, i64::from(2 * RECORDS_PER_BATCH)),
        "an older retried batch"
    );
    assert_log_holds(&broker, &seqs);

    // A gap is refused; the next sequence appends.
    let next = last + RECORDS_PER_BATCH;
    assert_eq!(
        produce(&mut conn, pid, epoch, next + 3 * RECORDS_PER_BATCH).0,
        ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a gap after the restart"
    );
    assert_eq!(
        produce(&mut conn, pid, epoch, next),
        (ErrorCode::NONE, i64::from(next)),
        "the next sequence"
    );
    seqs.push(next);
    // The rebuilt table holds exactly the last five batches: the first batch is now older than
    // all of them (Kafka answers DUPLICATE_SEQUENCE_NUMBER and appends nothing).
    assert_eq!(
        produce(&mut conn, pid, epoch, 0).0,
        ErrorCode::DUPLICATE_SEQUENCE_NUMBER,
        "a batch older than the cached five"
    );
    // An older epoch is fenced: the table knows the producer's epoch after the restart.
    if epoch > i16::MIN {
        assert_eq!(
            produce(&mut conn, pid, epoch - 1, next + RECORDS_PER_BATCH).0,
            ErrorCode::PRODUCER_FENCED,
            "an older epoch after the restart"
        );
    }
    assert_log_holds(&broker, &seqs);
}

#[test]
fn a_retry_after_kill9_gets_its_original_offset_and_is_not_written_twice() {
    retried_batches_survive_a_restart(true);
}

#[test]
fn a_retry_after_a_clean_restart_gets_its_original_offset_and_is_not_written_twice() {
    retried_batches_survive_a_restart(false);
}
