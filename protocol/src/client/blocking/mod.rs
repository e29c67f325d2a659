//! The blocking client API: std threads and `TcpStream`, for a plain `fn main()`.
//!
//! - [`Producer`]: `send` returns a [`DeliveryFuture`] at once (or waits while the buffer is full,
//!   up to `max_block_ms`); a background thread drives the [`crate::client::producer::ProducerCore`]
//!   and the connections. `DeliveryFuture::wait()` blocks for the record's partition and offset
//!   (it is also a `Future`, so async code may `.await` it on any runtime).
//! - [`Consumer`] and [`Admin`] drive their cores on the caller's thread inside `poll`,
//!   `create_topics`, …; a subscribed consumer also has a heartbeat thread that takes turns with
//!   the caller (`turns.rs`).
//!
//! Each connection has one reader thread feeding a bounded event channel; writes happen on the
//! driving thread. The wall clock (ms since the Unix epoch) is the cores' `now_ms`.

mod admin;
mod consumer;
mod net;
mod producer;
mod turns;

pub use admin::Admin;
pub use consumer::Consumer;
pub use producer::{DeliveryFuture, Producer};

/// Wall-clock milliseconds since the Unix epoch: the cores' `now_ms` (and the default record
/// timestamp). Never decreases within the process: if the wall clock steps back, time stands still
/// until it catches up, so the cores' deadlines and backoffs never run backwards.
pub(crate) fn now_ms() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LATEST_MS: AtomicU64 = AtomicU64::new(0);
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    LATEST_MS.fetch_max(wall_ms, Ordering::Relaxed).max(wall_ms)
}

/// How long a driver sleeps for a core's next wake-up at `deadline_ms` (on [`now_ms`]'s clock),
/// at most `max`: until that millisecond begins, measured from the precise wall clock. The
/// whole-millisecond difference `deadline_ms - now_ms()` is too long by however far the clock
/// already is into its millisecond — up to one more whole millisecond, so a producer's 1 ms
/// linger held a batch up to 2 ms (issue 19's half-load p99). After the wall clock stepped
/// back, [`now_ms`] stands still until it catches up, so no deadline can pass sooner than this
/// wait (capped at `max`) says; events still end a wait early.
pub(crate) fn wait_until_ms(
    deadline_ms: Option<u64>,
    max: std::time::Duration,
) -> std::time::Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    deadline_ms.map_or(max, |t| until(t, now).min(max))
}

/// [`wait_until_ms`]'s arithmetic: from `now` (since the epoch) to the start of `deadline_ms`.
fn until(deadline_ms: u64, now: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_millis(deadline_ms).saturating_sub(now)
}

#[cfg(test)]
mod wait_tests {
    use super::until;
    use std::time::Duration;

    #[test]
    fn a_wait_ends_where_its_millisecond_begins() {
        // 0.7 ms into millisecond 10, a deadline at 11 is 0.3 ms away, not a whole 1 ms.
        let now = Duration::from_micros(10_700);
        assert_eq!(until(11, now), Duration::from_micros(300));
        assert_eq!(
            until(10, now),
            Duration::ZERO,
            "a deadline passed waits for nothing"
        );
        assert_eq!(
            until(15, Duration::from_millis(10)),
            Duration::from_millis(5)
        );
    }
}
