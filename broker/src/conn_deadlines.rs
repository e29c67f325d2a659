//! When a client connection (native or Kafka port) counts as idle, and the defaults of the two
//! deadlines a client connection lives under (the reading itself is [`crate::frame_io`]):
//!
//! - `--request-read-timeout-ms` ([`REQUEST_READ_TIMEOUT_MS_DEFAULT`]): once a frame's first
//!   byte has arrived, the whole frame must arrive within it.
//! - `--connections-max-idle-ms` ([`CONNECTIONS_MAX_IDLE_MS_DEFAULT`], Kafka's
//!   `connections.max.idle.ms`): a connection is idle while nothing is read from it, nothing is
//!   written to it *and no request of it is in flight*; idle that long, it is closed. A request
//!   in flight (a long-poll fetch, an acks=all produce waiting for its replicas) keeps its
//!   connection alive however long it waits: its own timeout bounds it, not this one.
//!
//! The internal port has neither: a peer broker's replication fetch sessions long-poll, and a
//! peer is not a stranger.
//!
//! The decision is [`idle_wait_ms`], a pure function; [`Activity`] is the per-connection state
//! the reader and the writer of one connection update (one core, `Cell`s, no borrow held across
//! an await).

use std::cell::Cell;
use std::time::Duration;

/// Default `--request-read-timeout-ms`: 30 s.
pub const REQUEST_READ_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Default `--connections-max-idle-ms`: Kafka's 10 minutes.
pub const CONNECTIONS_MAX_IDLE_MS_DEFAULT: u64 = 600_000;

/// How long to wait before looking again, or `None` when the connection has been idle for
/// `idle_ms`: nothing in flight and the last activity at least `idle_ms` ago. With requests in
/// flight the answer is a whole `idle_ms` (the idle period cannot begin before they finish, and
/// their finishing moves `last_active_ms`).
pub fn idle_wait_ms(
    in_flight: usize,
    last_active_ms: u64,
    now_ms: u64,
    idle_ms: u64,
) -> Option<u64> {
    if in_flight > 0 {
        return Some(idle_ms);
    }
    let due_ms = last_active_ms.saturating_add(idle_ms);
    (now_ms < due_ms).then(|| due_ms - now_ms)
}

/// One connection's activity: requests in flight (read, not yet answered) and when anything
/// last happened on it (a frame read, a response written).
pub struct Activity {
    in_flight: Cell<usize>,
    last_active_ms: Cell<u64>,
}

impl Activity {
    pub fn new(now_ms: u64) -> Self {
        Self {
            in_flight: Cell::new(0),
            last_active_ms: Cell::new(now_ms),
        }
    }

    /// A frame was read and its request is on its way.
    pub fn request_started(&self, now_ms: u64) {
        self.in_flight.set(self.in_flight.get() + 1);
        self.touch(now_ms);
    }

    /// A request's response was written (or it needed none).
    pub fn request_done(&self, now_ms: u64) {
        debug_assert!(self.in_flight.get() > 0, "a response without its request");
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
        self.touch(now_ms);
    }

    fn touch(&self, now_ms: u64) {
        self.last_active_ms
            .set(self.last_active_ms.get().max(now_ms));
    }

    /// Resolves once the connection has been idle for `idle_ms` (see [`idle_wait_ms`]). Meant to
    /// be raced against the read of the next frame's first byte.
    pub async fn idle_for(&self, idle_ms: u64) {
        loop {
            let now_ms = crate::clock::monotonic_ms();
            let Some(wait_ms) = idle_wait_ms(
                self.in_flight.get(),
                self.last_active_ms.get(),
                now_ms,
                idle_ms,
            ) else {
                return;
            };
            glommio::timer::sleep(Duration::from_millis(wait_ms.max(1))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_with_nothing_in_flight_and_quiet_long_enough() {
        // Quiet for exactly the period: idle.
        assert_eq!(idle_wait_ms(0, 1_000, 2_000, 1_000), None);
        // Quiet for longer: idle.
        assert_eq!(idle_wait_ms(0, 1_000, 9_000, 1_000), None);
        // Not yet: wait the rest.
        assert_eq!(idle_wait_ms(0, 1_000, 1_400, 1_000), Some(600));
        // A request in flight, however old the last activity: never idle.
        assert_eq!(idle_wait_ms(1, 0, 1_000_000, 1_000), Some(1_000));
        // Near the end of the clock the deadline saturates instead of wrapping to the past.
        assert_eq!(idle_wait_ms(0, u64::MAX - 5, u64::MAX - 1, 1_000), Some(1));
    }

    #[test]
    fn activity_counts_requests_and_moves_forward_only() {
        let a = Activity::new(100);
        a.request_started(200);
        assert_eq!(a.in_flight.get(), 1);
        a.request_done(150); // a clock read earlier elsewhere never moves activity back
        assert_eq!(a.in_flight.get(), 0);
        assert_eq!(a.last_active_ms.get(), 200);
    }
}
