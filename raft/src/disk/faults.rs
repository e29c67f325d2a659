//! Crash injection for the `__raft/` files, for tests and the simulator (STYLE: "fault injection
//! is part of the storage layer").
//!
//! Owns: a per-thread countdown of durable I/O steps (a write, an fdatasync, a truncate, a
//! rename, a directory fsync). When it runs out, that step is where "the process dies": a write
//! lands only its first half (a torn write), any other step does nothing, and that step and
//! every later one on the thread fail with an injected error. The test then drops the controller
//! and reopens the directory with injection off. Or ([`fail_once_after`]) only that one step
//! fails and the process lives on, as through a full disk that frees up.
//! Promises: off unless [`crash_after`] was called on this thread; when off, a step costs one
//! thread-local read. Never does: anything else in production code paths.

use std::cell::Cell;
use std::io;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Off,
    /// This many more steps succeed.
    Left(u64),
    /// The injected crash happened.
    Dead,
    /// This many more steps succeed, then one fails (a write landing half) and injection is
    /// off again: a transient failure, such as a full disk that frees up.
    FailOnce(u64),
}

thread_local! {
    static STATE: Cell<State> = const { Cell::new(State::Off) };
}

/// Lets `steps` more durable I/O steps succeed on this thread, then "crashes".
pub fn crash_after(steps: u64) {
    STATE.with(|s| s.set(State::Left(steps)));
}

/// Lets `steps` more durable I/O steps succeed on this thread, fails the next one (a write lands
/// only its first half), and then lets everything succeed again: not a crash, an error the
/// process lives through (ENOSPC until space is freed).
pub fn fail_once_after(steps: u64) {
    STATE.with(|s| s.set(State::FailOnce(steps)));
}

/// Turns injection off on this thread.
pub fn disarm() {
    STATE.with(|s| s.set(State::Off));
}

/// Whether the injected crash has happened on this thread.
pub fn crashed() -> bool {
    STATE.with(|s| s.get() == State::Dead)
}

fn injected(what: &'static str) -> io::Error {
    io::Error::other(format!("injected crash at {what}"))
}

/// Called before each durable step that is not a write; `Err`: the process died here.
pub fn step(what: &'static str) -> io::Result<()> {
    write_step(what, 0).map(|_| ()).map_err(|(_, e)| e)
}

/// Called before a write of `len` bytes: `Ok(len)` to write it all, or `Err((k, e))` to write
/// only the first `k` bytes and then fail.
pub fn write_step(what: &'static str, len: usize) -> Result<usize, (usize, io::Error)> {
    STATE.with(|s| match s.get() {
        State::Off => Ok(len),
        State::Left(0) => {
            s.set(State::Dead);
            Err((len / 2, injected(what)))
        }
        State::Left(n) => {
            s.set(State::Left(n - 1));
            Ok(len)
        }
        State::Dead => Err((0, injected(what))),
        State::FailOnce(0) => {
            s.set(State::Off);
            Err((len / 2, injected(what)))
        }
        State::FailOnce(n) => {
            s.set(State::FailOnce(n - 1));
            Ok(len)
        }
    })
}

/// `write_all` through the injector: a torn write lands the first half, then fails.
pub fn write_all(out: &mut impl io::Write, bytes: &[u8], what: &'static str) -> io::Result<()> {
    match write_step(what, bytes.len()) {
        Ok(_) => out.write_all(bytes),
        Err((landed, e)) => {
            // Best effort: the point is to leave the torn bytes behind.
            let _ = out.write_all(&bytes[..landed.min(bytes.len())]);
            Err(e)
        }
    }
}
