//! One client connection on the native port: read frames (size checked before any allocation),
//! run up to `max_in_flight_per_connection` requests concurrently, write responses in request
//! order.
//!
//! A frame that cannot be parsed safely (over the size limit, or a header that fails the
//! flatbuffers verifier) closes the connection after logging why: its correlation id cannot be
//! trusted, so no response can be matched to it. Everything after a verified header is answered,
//! with an error code where needed. Requests beyond the in-flight bound wait in the socket.

use std::rc::Rc;

use bytes::BytesMut;
use futures_lite::AsyncReadExt;
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::Task;
use spool_protocol::codec;
use spool_protocol::frame::{self, FrameLimits, FRAME_PREFIX_BYTES, LENGTH_PREFIX_BYTES};

use crate::handlers::{self, Outgoing};
use crate::net_io::{self, Half};
use crate::shard::Shard;

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let peer_addr = stream.peer_addr().ok();
    let peer = peer_addr.map(|a| a.to_string()).unwrap_or_default();
    // The host a group member joined from, as DescribeGroups reports it (Kafka's `/ip` form, the
    // same the Kafka front records, so members of one group look alike whichever port they use).
    let peer_host: Rc<str> = peer_addr
        .map(|a| format!("/{}", a.ip()))
        .unwrap_or_default()
        .into();
    crate::metrics::CoreMetrics::add(&shard.metrics.connections, 1);
    let (mut reader, writer, socket_fd) = net_io::split(stream);
    let (tx, rx) =
        local_channel::new_bounded::<Task<Outgoing>>(shard.config.max_in_flight_per_connection);
    let writer_task = spawn_writer(writer, socket_fd, rx);
    let limits = FrameLimits {
        max_frame_bytes: shard.config.max_frame_bytes,
        ..FrameLimits::default()
    };
    loop {
        let read = read_frame(&mut reader, &limits);
        let frame = match futures_lite::future::or(
            async { Some(read.await) },
            shard.stopped_signal(),
        )
        .await
        {
            None => break,
            Some(Ok(Some(f))) => f,
            Some(Ok(None)) => break,
            Some(Err(e)) => {
                tracing::info!(%peer, "closing connection: {e}");
                break;
            }
        };
        let request = match codec::decode_request(&frame, &limits) {
            Ok(r) => r,
            Err(e) => {
                tracing::info!(%peer, "closing connection after an unverifiable frame: {e}");
                break;
            }
        };
        let me = Rc::clone(&shard);
        let host = Rc::clone(&peer_host);
        let task = glommio::spawn_local(async move { handlers::handle(&me, request, &host).await });
        if tx.send(task).await.is_err() {
            break;
        }
    }
    drop(tx);
    writer_task.await;
    let c = &shard.metrics.connections;
    c.set(c.get().saturating_sub(1));
}

/// Writes each request's response in request order (the tasks are queued in the order their
/// requests arrived); splices file ranges. Ends when the channel closes or a write fails.
pub(crate) fn spawn_writer(
    mut writer: Half,
    socket_fd: std::os::fd::RawFd,
    rx: local_channel::LocalReceiver<Task<Outgoing>>,
) -> Task<()> {
    glommio::spawn_local(async move {
        let mut pipe = None;
        while let Some(task) = rx.recv().await {
            match task.await {
                Outgoing::Nothing => {}
                Outgoing::Frame { head, chunks } => {
                    if let Err(e) =
                        net_io::write_chunks(&mut writer, socket_fd, &mut pipe, &head, chunks).await
                    {
                        tracing::debug!("writing a response: {e}");
                        break;
                    }
                }
            }
        }
    })
}

/// Reads one frame: the 4-byte prefix, the limit check, then exactly the announced bytes.
/// `Ok(None)` on a clean end of stream between frames.
async fn read_frame(r: &mut Half, limits: &FrameLimits) -> Result<Option<frame::RawFrame>, String> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    let mut got = 0;
    while got < prefix.len() {
        match r.read(&mut prefix[got..]).await {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("connection closed inside a frame prefix".into()),
            Ok(n) => got += n,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let frame_bytes = frame::frame_bytes_from_prefix(prefix, limits).map_err(|e| e.to_string())?;
    debug_assert!(frame_bytes >= FRAME_PREFIX_BYTES);
    let mut buf = BytesMut::zeroed(frame_bytes);
    buf[..LENGTH_PREFIX_BYTES].copy_from_slice(&prefix);
    r.read_exact(&mut buf[LENGTH_PREFIX_BYTES..])
        .await
        .map_err(|e| format!("read: {e}"))?;
    frame::split_frame(buf.freeze(), limits)
        .map(Some)
        .map_err(|e| e.to_string())
}
