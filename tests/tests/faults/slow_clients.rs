//! Slow and silent clients on the client-facing ports (native and Kafka) cannot hold a
//! connection forever: a frame begun and not finished within `--request-read-timeout-ms` closes
//! its connection, and so does a connection idle for `--connections-max-idle-ms` — while a
//! producer on another connection keeps its acknowledgements, a connection that keeps sending
//! is kept, and so is one waiting on a long poll longer than the idle period. Each closure is
//! counted in `/metrics` and logged once with the peer.
//!
//! No timing assertions: every wait is for a condition (the socket's end of stream, an answer),
//! bounded only to fail a broken broker.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spool_tests::checker;
use spool_tests::client::{consume_until, create_topic};
use spool_tests::http;
use spool_tests::steady::SteadyProducer;
use spool_tests::wire::{api_versions_body, fetch_body, RawConn};
use spool_tests::{Broker, BrokerOptions};

/// `--request-read-timeout-ms` in the half-frame test.
const READ_TIMEOUT_MS: u64 = 500;
/// `--connections-max-idle-ms` in the idle test.
const IDLE_MS: u64 = 2_000;
/// Bound on the whole idle test's exchange (fails a broker that never closes).
const IDLE_TEST_BOUND: Duration = Duration::from_secs(60);
/// Bound on reading records back.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// A native ApiVersions v0 request, whole.
fn native_api_versions() -> Vec<u8> {
    let mut c = Vec::new();
    let limits = spool_protocol::frame::FrameLimits::default();
    let h = spool_protocol::codec::request(1, None, api_versions_body());
    spool_protocol::codec::encode_request(&h, Vec::new(), &limits)
        .expect("encoding ApiVersions")
        .write_to(&mut c)
        .expect("writing to memory");
    c
}

/// A Kafka ApiVersions v0 request, whole: size, api key 18, version 0, correlation id 1, a null
/// client id.
fn kafka_api_versions() -> Vec<u8> {
    let mut c = 10i32.to_be_bytes().to_vec();
    c.extend_from_slice(&18i16.to_be_bytes());
    c.extend_from_slice(&0i16.to_be_bytes());
    c.extend_from_slice(&1i32.to_be_bytes());
    c.extend_from_slice(&(-1i16).to_be_bytes());
    c
}

fn metric(broker: &Broker, name: &str) -> f64 {
    http::sum(&broker.metrics(), name, "")
}

#[test]
fn half_frames_are_closed_after_the_read_timeout() {
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--request-read-timeout-ms")
            .arg(READ_TIMEOUT_MS.to_string()),
    );
    broker.wait_kafka_ready();
    create_topic(&broker, "steady", 2);
    let steady = SteadyProducer::start(&broker, "steady");
    let mut acked = steady.wait_past(0, "start-up");

    // Opened first, sends nothing: the read timeout is not for it (only the idle one is).
    let mut silent = RawConn::connect(broker.native_addr()).expect("connecting");

    let native = native_api_versions();
    let kafka = kafka_api_versions();
    let cases: Vec<(&str, SocketAddr, Vec<u8>)> = vec![
        (
            "native: 2 bytes of a prefix",
            broker.native_addr(),
            native[..2].to_vec(),
        ),
        (
            "native: a prefix and part of a body",
            broker.native_addr(),
            native[..native.len() - 5].to_vec(),
        ),
        (
            "Kafka: 2 bytes of a prefix",
            broker.kafka_addr(),
            kafka[..2].to_vec(),
        ),
        (
            "Kafka: a prefix and part of a body",
            broker.kafka_addr(),
            kafka[..kafka.len() - 3].to_vec(),
        ),
    ];
    // All at once, so their timeouts run together; each connection stays open for writing (no
    // half-close): the broker must end it by itself.
    let mut conns: Vec<_> = cases
        .iter()
        .map(|(what, addr, bytes)| {
            let mut c = RawConn::connect(*addr).unwrap_or_else(|e| panic!("{what}: {e}"));
            c.send_raw(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
            c
        })
        .collect();
    for ((what, _, _), conn) in cases.iter().zip(&mut conns) {
        if let Err(e) = conn.expect_closed() {
            panic!(
                "{what}: the broker kept the connection: {e}\n{}",
                broker.log_tail()
            );
        }
        acked = steady.wait_past(acked, what);
    }

    // The silent connection has now been open longer than the read timeout, and still works.
    silent
        .api_versions()
        .expect("a connection that sent nothing is not under the read timeout");

    assert_eq!(
        metric(&broker, "spool_connections_closed_read_timeout_total"),
        cases.len() as f64,
        "read-timeout closures counted\n{}",
        broker.metrics()
    );
    assert_eq!(
        metric(&broker, "spool_connections_closed_idle_total"),
        0.0,
        "nothing was idle for the default 10 minutes"
    );
    // Logged once each, with the peer.
    let log = broker.log();
    for conn in &conns {
        let peer = conn.local_addr().expect("local address").to_string();
        let lines = log
            .lines()
            .filter(|l| l.contains(&peer) && l.contains("--request-read-timeout-ms"))
            .count();
        assert_eq!(
            lines,
            1,
            "log lines for {peer}'s closure\n{}",
            broker.log_tail()
        );
    }

    let acked = steady.stop();
    let read = consume_until(&broker, "steady", 2, CONSUME_TIMEOUT, |r| {
        r.len() >= acked.len()
    });
    checker::assert_none(
        "the steady producer's records",
        &checker::missing_acked(&acked, &read),
    );
    assert!(!broker.log().contains("panicked"), "{}", broker.log_tail());
}

#[test]
fn idle_connections_are_closed_busy_ones_are_not() {
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--connections-max-idle-ms")
            .arg(IDLE_MS.to_string()),
    );
    broker.wait_kafka_ready();
    create_topic(&broker, "polled", 1);

    let mut busy = RawConn::connect(broker.native_addr()).expect("connecting");
    let busy_peer = busy.local_addr().expect("local address").to_string();
    // A fetch at the end of an empty partition waits out its max_wait: longer than the idle
    // period, and the connection must not count as idle meanwhile.
    let mut polling = RawConn::connect(broker.native_addr()).expect("connecting");
    let polling_peer = polling.local_addr().expect("local address").to_string();
    let long_poll_ms = i32::try_from(IDLE_MS * 3).expect("fits");
    polling
        .send(fetch_body("polled", &[0], 0, long_poll_ms), 0, Vec::new())
        .expect("sending the long poll");
    let idle_native = RawConn::connect(broker.native_addr()).expect("connecting");
    let idle_kafka = RawConn::connect(broker.kafka_addr()).expect("connecting");
    let idle_peers: Vec<String> = [&idle_native, &idle_kafka]
        .iter()
        .map(|c| c.local_addr().expect("local address").to_string())
        .collect();

    let idle_done = Arc::new(AtomicBool::new(false));
    let idle_watch = {
        let done = Arc::clone(&idle_done);
        std::thread::spawn(move || {
            let results: Vec<_> = [idle_native, idle_kafka]
                .into_iter()
                .map(|mut c| c.expect_closed())
                .collect();
            done.store(true, Ordering::SeqCst);
            results
        })
    };
    let poll_done = Arc::new(AtomicBool::new(false));
    let poll_watch = {
        let done = Arc::clone(&poll_done);
        std::thread::spawn(move || {
            let answer = polling.read_response();
            // Closed at once by this end: it is not left to go idle.
            drop(polling);
            done.store(true, Ordering::SeqCst);
            answer
        })
    };

    // The busy connection keeps sending until both idle ones are closed and the long poll is
    // answered; it must be answered every time.
    let deadline = Instant::now() + IDLE_TEST_BOUND;
    let mut requests = 0u64;
    while !(idle_done.load(Ordering::SeqCst) && poll_done.load(Ordering::SeqCst)) {
        assert!(
            Instant::now() < deadline,
            "idle connections still open or the long poll unanswered after {IDLE_TEST_BOUND:?}\n{}",
            broker.log_tail()
        );
        busy.api_versions().unwrap_or_else(|e| {
            panic!(
                "the busy connection, request {requests}: {e}\n{}",
                broker.log_tail()
            )
        });
        requests += 1;
        // Pacing of the workload (a client sending now and then), far below the idle period.
        std::thread::sleep(Duration::from_millis(50));
    }
    for (peer, closed) in idle_peers.iter().zip(idle_watch.join().expect("watcher")) {
        closed.unwrap_or_else(|e| panic!("idle connection {peer}: {e}\n{}", broker.log_tail()));
    }
    let answer = poll_watch
        .join()
        .expect("poller")
        .unwrap_or_else(|e| panic!("the long poll: {e}\n{}", broker.log_tail()));
    assert!(
        matches!(
            answer.header.body,
            spool_protocol::wire::ResponseBodyT::FetchResponse(_)
        ),
        "the long poll's answer: {:?}",
        answer.header
    );
    busy.api_versions()
        .expect("the busy connection after all that");

    let closed_idle = metric(&broker, "spool_connections_closed_idle_total");
    assert!(
        closed_idle >= idle_peers.len() as f64,
        "idle closures counted: {closed_idle}\n{}",
        broker.metrics()
    );
    let log = broker.log();
    let idle_lines = |peer: &str| {
        log.lines()
            .filter(|l| l.contains(peer) && l.contains("--connections-max-idle-ms"))
            .count()
    };
    for peer in &idle_peers {
        assert_eq!(
            idle_lines(peer),
            1,
            "idle closure lines for {peer}\n{}",
            broker.log_tail()
        );
    }
    assert_eq!(
        idle_lines(&busy_peer),
        0,
        "the busy connection was closed as idle"
    );
    assert_eq!(
        idle_lines(&polling_peer),
        0,
        "the long-polling connection was closed as idle"
    );
    assert!(!log.contains("panicked"), "{}", broker.log_tail());
}

/// The client library's producer outlives the broker closing its idle connections: its next
/// send reconnects and is acknowledged.
#[test]
fn a_producer_whose_idle_connections_were_closed_still_delivers() {
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--connections-max-idle-ms")
            .arg(IDLE_MS.to_string()),
    );
    create_topic(&broker, "quiet", 1);
    let producer =
        spool_tests::client::producer(&broker, spool_protocol::client::producer::Acks::All);
    let send = |value: &'static str| {
        producer
            .send(spool_protocol::client::ProducerRecord::new(
                "quiet",
                bytes::Bytes::from_static(value.as_bytes()),
            ))
            .and_then(|d| d.wait())
            .unwrap_or_else(|e| panic!("sending {value}: {e}\n{}", broker.log_tail()))
    };
    let first = send("before");
    // The broker closes every client connection once idle: the producer's included.
    let deadline = Instant::now() + IDLE_TEST_BOUND;
    while http::sum(&broker.metrics(), "spool_connections", "") > 0.0 {
        assert!(
            Instant::now() < deadline,
            "client connections still open {IDLE_TEST_BOUND:?} into an idle period of {IDLE_MS} ms\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&broker, "spool_connections_closed_idle_total") >= 1.0);
    let second = send("after");
    assert_eq!(
        (first.offset, second.offset),
        (0, 1),
        "both records, in order"
    );
}
