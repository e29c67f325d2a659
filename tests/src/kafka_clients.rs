//! The Kafka clients nobody here wrote, as the Kafka-port tests find them: Debian's `kcat`,
//! `kafka-python` and `aiokafka` (the rdkafka crate is a dev-dependency, built with the tests).
//!
//! Promises: a missing client fails the test that needs it with a message saying how to get it
//! (`scripts/test.sh` installs both), never a silent pass; a client's run is bounded
//! ([`run_client`]) and its output kept for the failure message.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::broker::{Broker, BrokerOptions};
use crate::process::{self, Finished};

/// The command that installs every client these tests use.
pub const INSTALL_HINT: &str = "run scripts/test.sh (the README's test command), which installs \
     Debian's kcat, Go and sarama with apt-get, kafka-python and aiokafka with pip, and kafkajs \
     with npm when they are missing";

/// A broker whose Kafka port accepts connections.
pub fn start_broker(options: BrokerOptions) -> Broker {
    let broker = Broker::start_with(options);
    broker.wait_kafka_ready();
    broker
}

/// `name` on `PATH`, if it is there as a file.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Debian's `kcat` binary; panics with [`INSTALL_HINT`] when it is not installed.
pub fn kcat() -> PathBuf {
    on_path("kcat").unwrap_or_else(|| panic!("kcat is not on PATH: {INSTALL_HINT}"))
}

/// `python3` with kafka-python 2.x importable; panics with [`INSTALL_HINT`] otherwise.
pub fn python_with_kafka() -> PathBuf {
    python_with("kafka", "kafka-python", "2.")
}

/// `python3` with aiokafka 0.x importable; panics with [`INSTALL_HINT`] otherwise.
pub fn python_with_aiokafka() -> PathBuf {
    python_with("aiokafka", "aiokafka", "0.")
}

/// `python3` with `module` importable at a version starting with `major`.
fn python_with(module: &str, package: &str, major: &str) -> PathBuf {
    let python = on_path("python3")
        .unwrap_or_else(|| panic!("python3 is not on PATH ({package} needs it): {INSTALL_HINT}"));
    let probe = Command::new(&python)
        .args([
            "-c",
            &format!("import {module}, sys; sys.stdout.write({module}.__version__)"),
        ])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        probe.status.success(),
        "{package} is not importable by {}: {INSTALL_HINT}\n{}",
        python.display(),
        String::from_utf8_lossy(&probe.stderr)
    );
    let version = String::from_utf8_lossy(&probe.stdout).to_string();
    assert!(
        version.starts_with(major),
        "{package} {version} found; these tests are written for {major}x: {INSTALL_HINT}"
    );
    python
}

/// Runs a script client that prints one JSON object per line (`{"event": ...}`) to its end (at
/// most `timeout`); returns its events and a context (its output and `broker`'s log) for failure
/// messages. Insists on the closing `done` event.
pub fn run_events(
    cmd: &mut Command,
    broker: &Broker,
    timeout: Duration,
) -> (Vec<serde_json::Value>, String) {
    let finished = run_client(cmd, b"", broker.scratch(), timeout);
    let events: Vec<serde_json::Value> = finished
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let context = format!(
        "--- script stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}\n{}",
        tail(&finished.stdout),
        tail(&finished.stderr),
        broker.log_tail()
    );
    assert!(
        events.last().is_some_and(|e| e["event"] == "done"),
        "the script did not finish\n{context}"
    );
    (events, context)
}

/// The events of one kind.
pub fn events_of<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// An event's integer field; panics naming the event when it is not one.
pub fn int_field(event: &serde_json::Value, field: &str) -> i64 {
    event[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} is not an integer in {event}"))
}

/// Runs a client to its end (at most `timeout`, then it is killed and the test fails) with
/// `stdin` fed to it, and insists on exit code 0, showing its output otherwise.
pub fn run_client(cmd: &mut Command, stdin: &[u8], scratch: &Path, timeout: Duration) -> Finished {
    let finished = process::run_to_end(cmd, stdin, scratch, timeout);
    assert!(
        finished.status.success(),
        "{cmd:?} failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
        finished.status,
        tail(&finished.stdout),
        tail(&finished.stderr)
    );
    finished
}

/// The last lines of a client's output, enough to see why it failed.
pub fn tail(text: &str) -> String {
    const LINES: usize = 40;
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_a_program_every_machine_has_and_not_a_made_up_one() {
        assert!(super::on_path("sh").is_some());
        assert!(super::on_path("no-such-program-spool-k2").is_none());
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = super::tail(&text);
        assert!(t.starts_with("line 60") && t.ends_with("line 99"), "{t}");
    }
}
