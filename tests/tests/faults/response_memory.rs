//! Clients that ask for large fetches and never read the answers cannot make the broker hold a
//! copy for each of them: the response bytes the broker allocates (here `--fetch-copy` copies,
//! the mode where every fetched byte is one) are charged to a per-core response budget
//! (`--response-memory-bytes`) before they exist, and a copy that does not fit is not made. The
//! broker's peak RSS stays under the budget plus a fixed overhead; a producer on another
//! connection keeps its acknowledgements throughout; a response the client takes nothing of
//! for `--connections-max-idle-ms` closes its connection, counted, and its memory comes back;
//! then a consumer reads the whole topic.
//!
//! No timing assertions: the attackers' requests are all handled while their connections wait
//! (each connection's writer is stuck on its first answer, the rest are queued behind it), the
//! peak is the kernel's high-water mark, and the closing is waited for through `/metrics`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use spool_protocol::wire::{ErrorCode, RequestBodyT};
use spool_storage::records::BatchBuilder;
use spool_tests::client::{consume_until, create_topic};
use spool_tests::http;
use spool_tests::proc_memory::status_bytes;
use spool_tests::steady::SteadyProducer;
use spool_tests::wire::{fetch_body, produce_body, produce_outcome, RawConn};
use spool_tests::{Broker, BrokerOptions};

const MIB: usize = 1 << 20;
/// `--response-memory-bytes` for the test broker's one core.
const BUDGET_BYTES: usize = 16 * MIB;
/// The topic's data: this many batches of `BATCH_VALUES` values of `VALUE_BYTES`.
const BATCHES: usize = 8;
const BATCH_VALUES: usize = 4;
const VALUE_BYTES: usize = 128 * 1024;
/// Each attacker's fetches (as many as a connection may have in flight), each asking for the
/// whole topic.
const ATTACKERS: usize = 24;
const FETCHES_PER_ATTACKER: usize = 16;
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// What the broker may hold beyond the budget at its peak: decoding, the steady producer's
/// traffic, glommio's buffers. Without the budget the attack would add about ATTACKERS ×
/// FETCHES_PER_ATTACKER × the topic's 4 MiB (1.5 GiB), less what the sockets' buffers take.
const OVERHEAD_BYTES: usize = 96 * MIB;
/// `--connections-max-idle-ms`: how long a response may take no byte before its connection goes.
const IDLE_MS: u64 = 3000;
const WAIT: Duration = Duration::from_secs(60);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// A fetch of partition 0 of `topic` from offset 0 for up to `max_bytes`, answered at once.
fn large_fetch(topic: &str, max_bytes: i32) -> RequestBodyT {
    let mut body = fetch_body(topic, &[0], 0, 0);
    if let RequestBodyT::FetchRequest(r) = &mut body {
        r.max_bytes = max_bytes;
        for t in r.topics.iter_mut().flatten() {
            for p in t.partitions.iter_mut().flatten() {
                p.partition_max_bytes = max_bytes;
            }
        }
    }
    body
}

/// Polls `/metrics` until `name` summed over cores satisfies `done`, at most [`WAIT`].
fn wait_for_metric(broker: &Broker, name: &str, done: impl Fn(f64) -> bool) -> f64 {
    let started = Instant::now();
    loop {
        let v = http::sum(&broker.metrics(), name, "");
        if done(v) {
            return v;
        }
        assert!(
            started.elapsed() < WAIT,
            "{name} stayed at {v}\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Opens a connection to `addr` that sends its fetches and never reads.
fn attacker(addr: SocketAddr) -> RawConn {
    let mut c = RawConn::connect(addr).expect("connecting");
    for _ in 0..FETCHES_PER_ATTACKER {
        c.send(large_fetch("big", FETCH_MAX_BYTES), 0, Vec::new())
            .expect("sending a fetch");
    }
    c
}

/// Produces the test topic `big`: [`BATCHES`] batches of [`BATCH_VALUES`] × [`VALUE_BYTES`].
fn produce_big(broker: &Broker) {
    create_topic(broker, "big", 1);
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    for b in 0..BATCHES {
        let mut batch = BatchBuilder::new(1_700_000_000_000);
        for i in 0..BATCH_VALUES {
            batch.push(
                1_700_000_000_000 + i as i64,
                Some(Bytes::from(format!("b{b}-{i}"))),
                Some(Bytes::from(vec![b'v'; VALUE_BYTES])),
            );
        }
        let (body, payload) = produce_body("big", 0, -1, batch.build().expect("a batch").freeze());
        let r = conn.request(body, 0, payload).expect("a produce response");
        let (error, _) = produce_outcome(&r).expect("a produce outcome");
        assert_eq!(error, ErrorCode::NONE, "producing batch {b}");
    }
}

/// `--fetch-max-bytes` (Kafka's fetch.max.bytes) caps an answer whatever the request asks:
/// whole batches up to the cap, and never less than one batch.
#[test]
fn a_fetch_answers_at_most_the_brokers_fetch_max_bytes() {
    const CAP_BYTES: usize = MIB;
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--fetch-max-bytes")
            .arg(CAP_BYTES.to_string()),
    );
    produce_big(&broker);
    let batch_bytes = BATCH_VALUES * VALUE_BYTES;
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    let r = conn
        .request(large_fetch("big", FETCH_MAX_BYTES), 0, Vec::new())
        .expect("a fetch response");
    let got = r.payload.len();
    assert!(
        got >= batch_bytes && got <= CAP_BYTES + batch_bytes,
        "a fetch for {FETCH_MAX_BYTES} bytes under a {CAP_BYTES}-byte cap answered {got} bytes"
    );
    // Under the cap the request's own max_bytes still rules.
    let r = conn
        .request(large_fetch("big", 1), 0, Vec::new())
        .expect("a fetch response");
    let one = r.payload.len();
    assert!(
        one >= batch_bytes && one < 2 * batch_bytes,
        "one whole batch for max_bytes 1: {one} bytes"
    );
}

#[test]
fn unread_large_fetches_stay_within_the_response_memory() {
    let broker = Broker::start_with(
        BrokerOptions {
            cores: 1,
            ..BrokerOptions::default()
        }
        .arg("--fetch-copy")
        .arg("--response-memory-bytes")
        .arg(BUDGET_BYTES.to_string())
        .arg("--connections-max-idle-ms")
        .arg(IDLE_MS.to_string()),
    );
    let pid = broker.pid().expect("running");
    produce_big(&broker);
    create_topic(&broker, "steady", 1);
    let steady = SteadyProducer::start(&broker, "steady");
    let mut acked = steady.wait_past(0, "start-up");
    let fetches_before = http::sum(&broker.metrics(), "spool_fetch_requests_total", "");
    let baseline_rss = status_bytes(pid, "VmRSS");
    let connections_before = http::sum(&broker.metrics(), "spool_connections", "");

    let attackers: Vec<RawConn> = (0..ATTACKERS)
        .map(|_| attacker(broker.native_addr()))
        .collect();
    // Every attacking fetch handled (copied or refused its copy); none of them read.
    let wanted = fetches_before + (ATTACKERS * FETCHES_PER_ATTACKER) as f64;
    wait_for_metric(&broker, "spool_fetch_requests_total", |v| v >= wanted);
    acked = steady.wait_past(acked, "the attack");
    let peak = status_bytes(pid, "VmHWM");
    let metrics = broker.metrics();
    let held = http::sum(&metrics, "spool_response_memory_bytes", "");
    eprintln!(
        "response memory: baseline RSS {} MiB, peak {} MiB, growth {} MiB (bound {} MiB); held {} MiB",
        baseline_rss / MIB,
        peak / MIB,
        peak.saturating_sub(baseline_rss) / MIB,
        (BUDGET_BYTES + OVERHEAD_BYTES) / MIB,
        held as usize / MIB
    );
    assert!(
        peak.saturating_sub(baseline_rss) <= BUDGET_BYTES + OVERHEAD_BYTES,
        "peak RSS grew by {} MiB under the attack: more than the {} MiB budget plus {} MiB\n{metrics}",
        peak.saturating_sub(baseline_rss) / MIB,
        BUDGET_BYTES / MIB,
        OVERHEAD_BYTES / MIB
    );
    assert!(held as usize <= BUDGET_BYTES, "held {held} bytes");
    assert!(
        held > 0.0,
        "the attackers' first answers hold their copies\n{metrics}"
    );

    // Responses nobody takes close their connections after the idle time and give their memory
    // back, while the attackers keep their sockets open. (An attacker whose fetches found no
    // memory got empty answers, which fit in its socket: it is closed as idle instead.)
    let closed = |m: &str| {
        http::sum(m, "spool_connections_closed_write_timeout_total", "")
            + http::sum(m, "spool_connections_closed_idle_total", "")
    };
    let started = Instant::now();
    while closed(&broker.metrics()) < ATTACKERS as f64 {
        assert!(
            started.elapsed() < WAIT,
            "attackers still connected\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stuck = http::sum(
        &broker.metrics(),
        "spool_connections_closed_write_timeout_total",
        "",
    );
    assert!(
        stuck >= 1.0,
        "a response held by an attacker closed its connection"
    );
    wait_for_metric(&broker, "spool_response_memory_bytes", |v| v == 0.0);
    // Closed for real: the broker's side of each is gone, not only its writer.
    wait_for_metric(&broker, "spool_connections", |v| v <= connections_before);
    assert!(
        broker
            .log()
            .contains("no byte of a response taken for 3000 ms"),
        "{}",
        broker.log_tail()
    );
    acked = steady.wait_past(acked, "the attackers' connections closing");
    drop(attackers);

    // Everything is still there for a consumer that reads.
    let want = BATCHES * BATCH_VALUES;
    let read = consume_until(&broker, "big", 1, CONSUME_TIMEOUT, |r| r.len() >= want);
    assert_eq!(read.len(), want, "the whole topic read back");
    let acked_records = steady.stop();
    assert!(acked_records.len() >= acked);
    assert!(!broker.log().contains("panicked"), "{}", broker.log_tail());
}
