//! Reading one length-prefixed frame off a connection, shared by every port (native, Kafka,
//! internal): the 4-byte prefix, the caller's size check (done before any allocation), then
//! exactly the announced bytes. At the bottom of the broker: it knows sockets, not services.
//!
//! The client-facing ports read with [`read_frame_within`]: waiting for a frame's first byte
//! ends when the caller's idle future resolves, and once that byte has arrived the whole frame
//! must follow within `frame_timeout_ms` (`--request-read-timeout-ms`), so a client that sends
//! half a frame and stops cannot hold a connection (and the frame's buffer) forever. The
//! internal port reads with [`read_frame`], without either bound: a peer broker is not a
//! stranger, and its fetch sessions long-poll.
//!
//! With a budget ([`crate::request_memory`]), the frame's buffer is charged before it is
//! allocated, and the returned `Bytes` give the charge back when the last of them drops.
//!
//! While a large body arrives the socket's receive mark follows what is still to come of it,
//! so the core wakes a few times per frame rather than once per TCP burst
//! ([`spool_protocol::recv_lowat`]); it is 1 again before the next frame's prefix is read.
//!
//! Cost on the fast path: when the frame is already in the socket, no timer is created (the
//! timers are `async` sleeps, registered only if polled, and they are polled only once the read
//! would wait).

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures_lite::AsyncReadExt;
use spool_protocol::frame::LENGTH_PREFIX_BYTES;

use crate::net_io::Half;
use crate::request_memory::CoreBudget;
use spool_protocol::frame_pool::FrameBuf;
use spool_protocol::recv_lowat::RecvLowat;

/// Why [`read_frame_within`] gave up on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameReadError {
    /// Nothing arrived before the caller's idle future resolved.
    Idle,
    /// A frame began but did not complete within its timeout.
    Timeout {
        timeout_ms: u64,
        /// Bytes of the frame (prefix included) that did arrive.
        received_bytes: usize,
        /// The frame's announced size, once its prefix was complete.
        frame_bytes: Option<usize>,
    },
    /// Anything else: a refused prefix, a connection cut inside a frame, a socket error.
    Bad(String),
}

impl std::fmt::Display for FrameReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Idle => write!(f, "idle"),
            Self::Timeout {
                timeout_ms,
                received_bytes,
                frame_bytes,
            } => {
                let of = frame_bytes.map_or_else(|| "a prefix".to_string(), |n| format!("{n}"));
                write!(
                    f,
                    "a frame not complete {timeout_ms} ms after its first byte ({received_bytes} of {of} bytes arrived; --request-read-timeout-ms)"
                )
            }
            Self::Bad(e) => write!(f, "{e}"),
        }
    }
}

/// Reads one whole frame (prefix included); `frame_bytes` turns the prefix into the frame's size
/// or refuses it. `Ok(None)` on a clean end of stream between frames. No timeouts: for the
/// internal port.
pub async fn read_frame<E: std::fmt::Display>(
    r: &mut Half,
    frame_bytes: impl FnOnce([u8; LENGTH_PREFIX_BYTES]) -> Result<usize, E>,
) -> Result<Option<Bytes>, String> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    let first = match r.read(&mut prefix).await {
        Ok(0) => return Ok(None),
        Ok(n) => n,
        Err(e) => return Err(format!("read: {e}")),
    };
    let progress = Progress::new(first);
    read_rest(r, prefix, &progress, frame_bytes)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

/// [`read_frame`] with the client-facing ports' bounds: `idle` resolving before the frame's
/// first byte ends the read with [`FrameReadError::Idle`]; the rest of the frame not arriving
/// within `frame_timeout_ms` of its first byte ends it with [`FrameReadError::Timeout`]; with a
/// `budget`, the frame's buffer is charged to it before it is allocated
/// ([`crate::request_memory`]: waiting, without reading, until it fits). Time spent waiting for
/// memory is the broker's, not the client's: it does not count against the timeout.
pub async fn read_frame_within<E: std::fmt::Display>(
    r: &mut Half,
    idle: impl Future<Output = ()>,
    frame_timeout_ms: u64,
    budget: Option<&CoreBudget>,
    frame_bytes: impl FnOnce([u8; LENGTH_PREFIX_BYTES]) -> Result<usize, E>,
) -> Result<Option<Bytes>, FrameReadError> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    let first = futures_lite::future::or(async { Some(r.read(&mut prefix).await) }, async {
        idle.await;
        None
    })
    .await;
    let first = match first {
        None => return Err(FrameReadError::Idle),
        Some(Ok(0)) => return Ok(None),
        Some(Ok(n)) => n,
        Some(Err(e)) => return Err(FrameReadError::Bad(format!("read: {e}"))),
    };
    let started = std::time::Instant::now();
    let progress = Progress::new(first);
    let timed_out = |progress: &Progress| FrameReadError::Timeout {
        timeout_ms: frame_timeout_ms,
        received_bytes: progress.received.get(),
        frame_bytes: progress.frame_bytes.get(),
    };
    let prefix_read = read_prefix_rest(r, &mut prefix, &progress);
    within(frame_timeout_ms, prefix_read)
        .await
        .ok_or_else(|| timed_out(&progress))??;
    let size = checked_size(prefix, frame_bytes)?;
    progress.frame_bytes.set(Some(size));
    let charge = match budget {
        None => None,
        Some(b) => Some(b.charge(size).await.map_err(FrameReadError::Bad)?),
    };
    let spent_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let body = read_body(r, prefix, size, &progress);
    let buf = within(frame_timeout_ms.saturating_sub(spent_ms), body)
        .await
        .ok_or_else(|| timed_out(&progress))??;
    Ok(Some(crate::request_memory::pooled_into_bytes(
        buf, size, charge,
    )))
}

/// `f`'s output, or `None` if it takes longer than `timeout_ms`.
async fn within<T>(timeout_ms: u64, f: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(f.await) }, async {
        glommio::timer::sleep(Duration::from_millis(timeout_ms)).await;
        None
    })
    .await
}

/// How far a frame has come, for the timeout's message.
struct Progress {
    received: Cell<usize>,
    frame_bytes: Cell<Option<usize>>,
}

impl Progress {
    fn new(received: usize) -> Self {
        Self {
            received: Cell::new(received),
            frame_bytes: Cell::new(None),
        }
    }
}

/// The rest of a frame whose first `progress.received` bytes are in `prefix`.
async fn read_rest<E: std::fmt::Display>(
    r: &mut Half,
    mut prefix: [u8; LENGTH_PREFIX_BYTES],
    progress: &Progress,
    frame_bytes: impl FnOnce([u8; LENGTH_PREFIX_BYTES]) -> Result<usize, E>,
) -> Result<Bytes, FrameReadError> {
    read_prefix_rest(r, &mut prefix, progress).await?;
    let size = checked_size(prefix, frame_bytes)?;
    progress.frame_bytes.set(Some(size));
    let buf = read_body(r, prefix, size, progress).await?;
    Ok(crate::request_memory::pooled_into_bytes(buf, size, None))
}

/// Completes a prefix whose first `progress.received` bytes are in `prefix`.
async fn read_prefix_rest(
    r: &mut Half,
    prefix: &mut [u8; LENGTH_PREFIX_BYTES],
    progress: &Progress,
) -> Result<(), FrameReadError> {
    let mut got = progress.received.get();
    while got < prefix.len() {
        match r.read(&mut prefix[got..]).await {
            Ok(0) => {
                return Err(FrameReadError::Bad(
                    "connection closed inside a frame prefix".into(),
                ))
            }
            Ok(n) => got += n,
            Err(e) => return Err(FrameReadError::Bad(format!("read: {e}"))),
        }
        progress.received.set(got);
    }
    Ok(())
}

/// The caller's size check on a whole prefix, then spool's own: a frame holds its prefix.
fn checked_size<E: std::fmt::Display>(
    prefix: [u8; LENGTH_PREFIX_BYTES],
    frame_bytes: impl FnOnce([u8; LENGTH_PREFIX_BYTES]) -> Result<usize, E>,
) -> Result<usize, FrameReadError> {
    let size = frame_bytes(prefix).map_err(|e| FrameReadError::Bad(e.to_string()))?;
    if size < LENGTH_PREFIX_BYTES {
        return Err(FrameReadError::Bad(format!(
            "a frame of {size} bytes is shorter than its prefix"
        )));
    }
    Ok(size)
}

/// The frame's bytes after its (whole) prefix, into the first `size` bytes of one buffer
/// (pooled for large frames, so not zero-filled first: [`spool_protocol::frame_pool`]). Every one of
/// those bytes is written before this returns `Ok`.
async fn read_body(
    r: &mut Half,
    prefix: [u8; LENGTH_PREFIX_BYTES],
    size: usize,
    progress: &Progress,
) -> Result<FrameBuf, FrameReadError> {
    let mut pooled = FrameBuf::take(size);
    let buf = &mut pooled.as_mut_slice()[..size];
    buf[..LENGTH_PREFIX_BYTES].copy_from_slice(&prefix);
    let mut got = LENGTH_PREFIX_BYTES;
    let mut mark = RecvLowat::new(r.raw_fd());
    while got < size {
        mark.expect(size - got);
        match r.read(&mut buf[got..]).await {
            Ok(0) => {
                return Err(FrameReadError::Bad(format!(
                    "read: connection closed inside a frame ({got} of {size} bytes)"
                )))
            }
            Ok(n) => got += n,
            Err(e) => return Err(FrameReadError::Bad(format!("read: {e}"))),
        }
        progress.received.set(got);
    }
    // The socket's default mark back before the next frame's prefix is read.
    drop(mark);
    Ok(pooled)
}

#[cfg(test)]
#[path = "frame_io_tests.rs"]
mod tests;
