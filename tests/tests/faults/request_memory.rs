//! Many connections each sending most of a large frame and then nothing cannot make the broker
//! allocate for all of them: request frames are charged to a per-core budget
//! (`--request-memory-bytes`) before their buffers exist, and a connection whose frame does not
//! fit stops being read (TCP pushes back on its client). The broker's peak RSS stays under the
//! budget plus a fixed overhead, a frame larger than a core's share is refused at once, and a
//! producer on another connection keeps its acknowledgements throughout.
//!
//! No timing assertions: the attack's writes end by themselves (all sent, or the socket's write
//! timeout once the broker stops reading; a slow broker only makes the attack smaller), and the
//! peak is the kernel's high-water mark.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use spool_tests::checker;
use spool_tests::client::{consume_until, create_topic};
use spool_tests::http;
use spool_tests::proc_memory::status_bytes;
use spool_tests::steady::SteadyProducer;
use spool_tests::wire::RawConn;
use spool_tests::{Broker, BrokerOptions};

const MIB: usize = 1 << 20;
/// `--request-memory-bytes`: 32 MiB for each of the test broker's two cores.
const BUDGET_BYTES: usize = 64 * MIB;
/// Each attacker's frame, and how much of it it sends before stopping.
const FRAME_BYTES: usize = 20 * MIB;
const SENT_BYTES: usize = 15 * MIB;
const ATTACKERS: usize = 24;
/// What the broker may hold beyond the budget at its peak: its own start-up memory growth,
/// decoding, the steady producer's traffic, glommio's buffers. The attack without the budget
/// would add about ATTACKERS × SENT_BYTES (360 MiB).
const OVERHEAD_BYTES: usize = 64 * MIB;
/// How long an attacker's write may make no progress before it stops: how the attack ends once
/// the broker stops reading a connection (it ends sooner for a connection read to the end).
const ATTACK_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const CONSUME_TIMEOUT: Duration = Duration::from_secs(30);

/// The 4-byte native prefix of a `frame_bytes`-byte frame.
fn prefix(frame_bytes: usize) -> [u8; 4] {
    u32::try_from(frame_bytes - 4).expect("fits").to_be_bytes()
}

#[test]
fn unfinished_large_frames_stay_within_the_request_memory() {
    let broker = Broker::start_with(
        BrokerOptions {
            cores: 2,
            ..BrokerOptions::default()
        }
        .arg("--request-memory-bytes")
        .arg(BUDGET_BYTES.to_string())
        // Long enough that the frames holding memory keep it for the whole test.
        .arg("--request-read-timeout-ms")
        .arg("600000"),
    );
    let pid = broker.pid().expect("running");
    create_topic(&broker, "steady", 2);
    let steady = SteadyProducer::start(&broker, "steady");
    let mut acked = steady.wait_past(0, "start-up");
    let baseline_rss = status_bytes(pid, "VmRSS");

    // Larger than a core's share: refused at once, with the reason logged.
    let mut too_large = RawConn::connect(broker.native_addr()).expect("connecting");
    too_large
        .send_raw(&prefix(BUDGET_BYTES / 2 + MIB))
        .expect("sending a prefix");
    too_large
        .expect_closed()
        .unwrap_or_else(|e| panic!("a frame over a core's share: {e}\n{}", broker.log_tail()));
    assert!(
        broker
            .log()
            .contains("larger than this core's request memory"),
        "{}",
        broker.log_tail()
    );

    let chunk = vec![0x5a_u8; MIB];
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|_| {
            let addr = broker.native_addr();
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut c =
                    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connecting");
                c.set_write_timeout(Some(ATTACK_WRITE_TIMEOUT))
                    .expect("a write timeout");
                let mut sent = 0;
                // Ends when all is sent, or when the broker has stopped reading for the write
                // timeout.
                if c.write_all(&prefix(FRAME_BYTES)).is_ok() {
                    while sent < SENT_BYTES - 4 && c.write_all(&chunk).is_ok() {
                        sent += chunk.len();
                    }
                }
                (c, sent)
            })
        })
        .collect();
    let attackers: Vec<(TcpStream, usize)> = attackers
        .into_iter()
        .map(|t| t.join().expect("an attacker thread"))
        .collect();
    let fully_sent = attackers
        .iter()
        .filter(|(_, sent)| *sent >= SENT_BYTES - 4)
        .count();

    // A normal client is still served: the producer's acknowledgements, a fresh connection.
    acked = steady.wait_past(acked, "the attack");
    RawConn::connect(broker.native_addr())
        .and_then(|mut c| c.api_versions())
        .expect("a fresh connection during the attack");

    let peak = status_bytes(pid, "VmHWM");
    let metrics = broker.metrics();
    let held = http::sum(&metrics, "spool_request_memory_bytes", "");
    let waiting = http::sum(&metrics, "spool_request_memory_waiting_connections", "");
    eprintln!(
        "request memory: baseline RSS {} MiB, peak {} MiB, growth {} MiB (bound {} MiB); {fully_sent} of {ATTACKERS} attackers sent all {} MiB; held {} MiB, {waiting} connections waiting",
        baseline_rss / MIB,
        peak / MIB,
        peak.saturating_sub(baseline_rss) / MIB,
        (BUDGET_BYTES + OVERHEAD_BYTES) / MIB,
        SENT_BYTES / MIB,
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

    // The attack ends: its memory comes back (the broker sees each connection's end).
    drop(attackers);
    acked = steady.wait_past(acked, "the attackers leaving");
    let acked_records = steady.stop();
    assert!(acked_records.len() >= acked);
    let read = consume_until(&broker, "steady", 2, CONSUME_TIMEOUT, |r| {
        r.len() >= acked_records.len()
    });
    checker::assert_none(
        "the steady producer's records",
        &checker::missing_acked(&acked_records, &read),
    );
    assert!(!broker.log().contains("panicked"), "{}", broker.log_tail());
}
