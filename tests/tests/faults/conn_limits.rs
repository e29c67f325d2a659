//! Connections past `--max-connections` (the whole broker, native and Kafka ports together) or
//! `--max-connections-per-ip` (one client address, both ports) are closed as soon as they are
//! accepted — the client sees the end of the stream — while clients already connected keep being
//! served, other addresses are not held back, a place given back can be taken again, and every
//! refusal is counted in `/metrics`.
//!
//! No timing assertions: every wait is for a condition, bounded only to fail a broken broker.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use spool_tests::http;
use spool_tests::wire::RawConn;
use spool_tests::{Broker, BrokerOptions};

/// Bound on the broker noticing that connections closed (its gauge back down).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Two client addresses (any 127.x.y.z is local).
const CLIENT_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const CLIENT_B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

fn refused(broker: &Broker, reason: &str) -> f64 {
    http::sum(
        &broker.metrics(),
        "spool_connections_refused_total",
        &format!("reason=\"{reason}\""),
    )
}

fn open_connections(broker: &Broker) -> f64 {
    http::sum(&broker.metrics(), "spool_connections", "")
}

/// Waits until the broker counts `n` open client connections (start-up's probes, or
/// connections a test just closed, are released once the broker reads their end).
fn wait_open_connections(broker: &Broker, n: f64) {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let open = open_connections(broker);
        if open == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the broker still counts {open} open connections, not {n}, after {SETTLE_TIMEOUT:?}\n{}",
            broker.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection from `from` to `addr` that the broker serves (ApiVersions answered).
fn served(from: Ipv4Addr, addr: std::net::SocketAddr, what: &str) -> RawConn {
    let mut c = RawConn::connect_from(from, addr).unwrap_or_else(|e| panic!("{what}: {e}"));
    c.api_versions()
        .unwrap_or_else(|e| panic!("{what}: not served: {e}"));
    c
}

/// A connection from `from` to `addr` that the broker closes at once.
fn refused_at_once(broker: &Broker, from: Ipv4Addr, addr: std::net::SocketAddr, what: &str) {
    // The kernel completes the handshake before the broker's accept, so connecting succeeds;
    // the refusal is the end of stream that follows.
    let mut c = RawConn::connect_from(from, addr).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = c.expect_closed() {
        panic!(
            "{what}: the broker kept the connection: {e}\n{}",
            broker.log_tail()
        );
    }
}

#[test]
fn connections_past_max_connections_are_refused() {
    const MAX: usize = 3;
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--max-connections")
            .arg(MAX.to_string()),
    );
    broker.wait_kafka_ready();
    wait_open_connections(&broker, 0.0);

    // Within the limit, on both ports (they share it).
    let mut held = vec![
        served(CLIENT_A, broker.native_addr(), "native 1"),
        served(CLIENT_B, broker.native_addr(), "native 2"),
    ];
    let kafka_held = RawConn::connect_from(CLIENT_A, broker.kafka_addr()).expect("Kafka 3");
    wait_open_connections(&broker, MAX as f64);

    refused_at_once(
        &broker,
        CLIENT_A,
        broker.native_addr(),
        "native past the limit",
    );
    refused_at_once(
        &broker,
        CLIENT_B,
        broker.kafka_addr(),
        "Kafka past the limit",
    );
    held[0]
        .api_versions()
        .expect("an existing client keeps being served");
    assert_eq!(
        refused(&broker, "max_connections"),
        2.0,
        "{}",
        broker.metrics()
    );
    assert_eq!(refused(&broker, "max_connections_per_ip"), 0.0);
    assert_eq!(open_connections(&broker), MAX as f64, "the gauge");

    // A place given back is taken again.
    drop(held.pop());
    wait_open_connections(&broker, (MAX - 1) as f64);
    held.push(served(
        CLIENT_B,
        broker.native_addr(),
        "after a place was given back",
    ));
    drop(kafka_held);
    let log = broker.log();
    assert!(
        log.contains("refusing connections past --max-connections"),
        "the refusal is logged\n{}",
        broker.log_tail()
    );
    assert!(!log.contains("panicked"), "{}", broker.log_tail());
}

#[test]
fn connections_past_max_connections_per_ip_are_refused() {
    const PER_IP: usize = 2;
    let broker = Broker::start_with(
        BrokerOptions::default()
            .arg("--max-connections-per-ip")
            .arg(PER_IP.to_string()),
    );
    broker.wait_kafka_ready();
    wait_open_connections(&broker, 0.0);

    let mut a = vec![
        served(CLIENT_A, broker.native_addr(), "A 1"),
        served(CLIENT_A, broker.native_addr(), "A 2"),
    ];
    // Past the bound for A, on either port.
    refused_at_once(&broker, CLIENT_A, broker.native_addr(), "A 3 (native)");
    refused_at_once(&broker, CLIENT_A, broker.kafka_addr(), "A 3 (Kafka)");
    // Another address is not held back.
    let mut b = served(CLIENT_B, broker.native_addr(), "B 1");
    a[0].api_versions()
        .expect("A's existing connection keeps being served");
    b.api_versions().expect("B keeps being served");
    assert_eq!(
        refused(&broker, "max_connections_per_ip"),
        2.0,
        "{}",
        broker.metrics()
    );
    assert_eq!(refused(&broker, "max_connections"), 0.0);

    // A place given back to A is A's again.
    drop(a.pop());
    wait_open_connections(&broker, PER_IP as f64);
    a.push(served(
        CLIENT_A,
        broker.native_addr(),
        "A after a place was given back",
    ));
    assert!(!broker.log().contains("panicked"), "{}", broker.log_tail());
}
