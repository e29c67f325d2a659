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
