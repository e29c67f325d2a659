//! A broker's life around other processes: a second broker on a data directory or port that is
//! taken must fail with a clear error, and a broker must start again on its own port right after
//! it stopped or died, whatever its old connections are still doing.

use spool_protocol::wire::ResponseBodyT;
use spool_tests::client::create_topic;
use spool_tests::process::run_to_end;
use spool_tests::wire::{fetch_body, RawConn};
use spool_tests::{addr, Broker};

/// Runs a rival `spool serve` with `args` and returns its stderr; it must fail.
fn rival_fails(broker: &Broker, what: &str, args: &[String]) -> String {
    let scratch = broker
        .scratch()
        .join(format!("rival-{}", what.replace(' ', "-")));
    std::fs::create_dir_all(&scratch).expect("creating a scratch directory");
    let mut cmd = std::process::Command::new(spool_tests::binary::spool_binary());
    cmd.arg("serve").args(args);
    spool_tests::broker::clear_spool_env(&mut cmd);
    let f = run_to_end(&mut cmd, b"", &scratch, spool_tests::broker::START_TIMEOUT);
    assert!(
        !f.status.success() && f.status.code().is_some(),
        "a second broker on {what} did not fail with an exit code ({})\n{}",
        f.status,
        f.stderr
    );
    f.stderr
}

#[test]
fn second_broker_on_a_taken_data_dir_or_port_is_refused() {
    let mut broker = Broker::start();
    let serve_args = |data_dir: &str, host: String, native: u16, admin: u16| -> Vec<String> {
        vec![
            "--data-dir".into(),
            data_dir.into(),
            "--host".into(),
            host,
            "--native-port".into(),
            native.to_string(),
            "--admin-port".into(),
            admin.to_string(),
            "--cores".into(),
            "1".into(),
        ]
    };
    let own_dir = |name: &str| broker.scratch().join(name).display().to_string();
    let data_dir = broker.data_dir().display().to_string();

    let ip = addr::next_address();
    let ports = addr::free_ports(ip, 2);
    let err = rival_fails(
        &broker,
        "the same data dir",
        &serve_args(&data_dir, ip.to_string(), ports[0], ports[1]),
    );
    assert!(
        err.contains("in use by another spool broker"),
        "unclear error: {err}"
    );

    let err = rival_fails(
        &broker,
        "the same native port",
        &serve_args(
            &own_dir("rival-a"),
            broker.ip().to_string(),
            broker.native_port(),
            ports[1],
        ),
    );
    let where_ = format!("cannot listen on {}:{}", broker.ip(), broker.native_port());
    assert!(
        err.contains(&where_),
        "unclear error (want {where_:?}): {err}"
    );

    let err = rival_fails(
        &broker,
        "the same admin port",
        &serve_args(
            &own_dir("rival-b"),
            broker.ip().to_string(),
            ports[0],
            broker.admin_port(),
        ),
    );
    let where_ = format!("cannot listen on {}:{}", broker.ip(), broker.admin_port());
    assert!(
        err.contains(&where_),
        "unclear error (want {where_:?}): {err}"
    );

    // The first broker never noticed.
    assert!(
        broker.is_running(),
        "the first broker died\n{}",
        broker.log_tail()
    );
    RawConn::connect(broker.native_addr())
        .and_then(|mut c| c.api_versions())
        .expect("the first broker still answers");
    create_topic(&broker, "still-mine", 1);
    broker.terminate();
}

// Restarting on the same port right after the broker hung up on a connected client. The dead
// broker's side of such a connection lingers (FIN_WAIT, TIME_WAIT) for up to a minute; a start-up
// port check that binds the port trips over it and refuses a legitimate restart with "Address
// already in use — is another broker running?" (seen with the bind probe before 2b18a11).

/// Leaves the broker's side of one connection in TIME_WAIT: the broker hangs up first (it dies
/// or shuts down), then the client closes.
fn client_connected_while(broker: &mut Broker, stop: impl FnOnce(&mut Broker)) {
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    conn.api_versions().expect("ApiVersions");
    stop(broker);
    conn.expect_closed().expect("the stopped broker hung up");
    drop(conn);
}

#[test]
fn restart_on_the_same_port_after_kill_9_with_a_client_connected() {
    let mut broker = Broker::start();
    client_connected_while(&mut broker, Broker::kill9);
    broker.restart();
    RawConn::connect(broker.native_addr())
        .and_then(|mut c| c.api_versions())
        .expect("the restarted broker answers");
}

#[test]
fn restart_on_the_same_port_after_sigterm_with_a_client_connected() {
    let mut broker = Broker::start();
    client_connected_while(&mut broker, Broker::terminate);
    broker.restart();
    RawConn::connect(broker.native_addr())
        .and_then(|mut c| c.api_versions())
        .expect("the restarted broker answers");
}

/// A supervisor that restarts a crashed broker at once. For a few milliseconds after the killed
/// broker is reaped the kernel still holds its listening socket (io_uring teardown is
/// asynchronous); a start-up port probe that takes one accepted connection as "another broker is
/// listening" refuses the restart (it did before 9767c99: "something is already listening there
/// — is another broker running?"). Ten tries make a pass by luck unlikely (about half of single
/// tries hit the window here).
#[test]
fn restart_at_once_after_kill_9() {
    let mut broker = Broker::start();
    for _ in 0..10 {
        broker.kill9_reap_only();
        broker.restart();
    }
    broker.terminate();
}

/// SIGTERM "finishes in-flight requests" (issue 4, item 5): a consumer's long poll that is waiting
/// for data when the broker is told to stop gets its (empty) answer before the broker exits.
/// (Regression test: the poll used to be left waiting until the 10 s drain timeout, then the
/// connection closed unanswered.)
#[test]
fn sigterm_answers_a_long_poll_in_flight() {
    let mut broker = Broker::start();
    create_topic(&broker, "quiet", 1);
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
    // A round trip first, so the connection is being served before the fetch goes out.
    conn.api_versions().expect("ApiVersions");
    let cid = conn
        .send(fetch_body("quiet", &[0], 0, 25_000), 0, Vec::new())
        .expect("sending a long-poll fetch");
    broker.terminate();
    let response = conn
        .read_response()
        .unwrap_or_else(|e| panic!("the long poll in flight at SIGTERM got no answer: {e}"));
    assert_eq!(response.header.correlation_id, cid);
    assert!(
        matches!(response.header.body, ResponseBodyT::FetchResponse(_)),
        "not a fetch response: {:?}",
        response.header
    );
}

/// SIGTERM with a short poll in flight across cores: the connection's core asks the partitions'
/// owners — here both cores — for data. (Regression test: one core used to finish shutting down
/// while the other still waited on it for an answer that never came, so every one of 8 SIGTERMs
/// with a polling consumer on a two-core broker took 10.3–10.6 s; on one core, 0.1 s. Cores now
/// pass two shutdown barriers together.)
#[test]
fn sigterm_answers_a_short_poll_across_cores_in_flight() {
    let mut broker = Broker::start();
    create_topic(&broker, "quiet", 2);
    // The race is lost about two times in three here; five rounds make a pass by luck unlikely.
    for round in 0..5 {
        if round > 0 {
            broker.restart();
        }
        let mut conn = RawConn::connect(broker.native_addr()).expect("connecting");
        conn.api_versions().expect("ApiVersions");
        let cid = conn
            .send(fetch_body("quiet", &[0, 1], 0, 300), 0, Vec::new())
            .expect("sending a fetch");
        broker.terminate();
        let response = conn.read_response().unwrap_or_else(|e| {
            panic!("round {round}: the fetch in flight at SIGTERM got no answer: {e}")
        });
        assert_eq!(response.header.correlation_id, cid);
    }
}

/// Start-up never hangs. Now and then a starting broker stops before its first log line with
/// every executor parked in io_uring wait and the main thread joining them: stuck in the
/// executors' first await, `mesh.join()` in `broker/src/runtime.rs` `run_core`, so it never
/// listens. Seen 3 times in a few hundred starts, mostly with other test binaries running at the
/// same time; fifty starts catch it only sometimes (run it in a loop, or next to the suite).
#[test]
#[ignore = "broker bug: start-up occasionally hangs before the first log line (executors parked; runtime.rs run_core mesh.join)"]
fn starts_every_time() {
    let mut broker = Broker::start();
    for _ in 0..50 {
        broker.terminate();
        broker.restart();
    }
    broker.terminate();
}
