//! One client connection on the native port: read frames (size checked before any allocation),
//! run up to `max_in_flight_per_connection` requests concurrently, write responses in request
//! order.
//!
//! A frame that cannot be parsed safely (over the size limit, or a header that fails the
//! flatbuffers verifier) closes the connection after logging why: its correlation id cannot be
//! trusted, so no response can be matched to it. Everything after a verified header is answered,
//! with an error code where needed. Requests beyond the in-flight bound wait in the socket.
//!
//! A connection that is idle too long, or sends the start of a frame and not the rest in time, is
//! closed ([`crate::conn_deadlines`]; counted in `/metrics`, logged once at info with the peer).
//! Each frame's buffer is charged to the core's request memory before it is allocated
//! ([`crate::request_memory`]): a connection whose frame does not fit stops being read.
//! A response the client takes no byte of for `--connections-max-idle-ms` (glommio's write
//! timeout: it runs while a write waits, and restarts at every byte taken) closes the connection
//! the same way, counted and logged once: the bytes a response holds (`crate::response_memory`)
//! cannot be held longer than an idle connection may live.
//!
//! Shared with the Kafka front (`crate::kafka`): the connection loop (`serve_front`), each front
//! passing in its own prefix check and decoder.

use std::future::Future;
use std::rc::Rc;

use bytes::Bytes;
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::Task;
use spool_protocol::codec;
use spool_protocol::frame::{self, FrameLimits, LENGTH_PREFIX_BYTES};

use crate::conn_deadlines::Activity;
use crate::frame_io::{read_frame_within, FrameReadError};
use crate::handlers::{self, Outgoing};
use crate::net_io::{self, Half};
use crate::shard::Shard;

/// What a protocol front (native here, Kafka in `crate::kafka`) does with a connection's bytes.
/// The loop around it — reading frames within their deadlines, shutdown, the in-flight bound,
/// responses in request order — is [`serve_front`], shared by both.
pub(crate) trait Front {
    type Request: 'static;
    /// Names the front in logs.
    const NAME: &'static str;
    /// The size of the frame (prefix included) a length prefix announces, or why it is refused;
    /// checked before anything is allocated.
    fn frame_bytes(
        &self,
        shard: &Shard,
        prefix: [u8; LENGTH_PREFIX_BYTES],
    ) -> Result<usize, String>;
    /// Decodes one whole frame (prefix included); an error closes the connection after it is
    /// logged.
    fn decode(&mut self, shard: &Shard, frame: Bytes) -> Result<Self::Request, String>;
    /// Answers one request; runs as its own task, so requests overlap up to the bound.
    fn handle(
        &self,
        shard: Rc<Shard>,
        request: Self::Request,
    ) -> impl Future<Output = Outgoing> + 'static;
}

/// Serves one connection with `front` until the client leaves, a frame is bad or late, the
/// connection is idle too long ([`crate::conn_deadlines`]), or the broker stops.
pub(crate) async fn serve_front<F: Front>(shard: Rc<Shard>, stream: TcpStream, mut front: F) {
    let _ = stream.set_nodelay(true);
    let idle_ms = shard.config.connections_max_idle_ms;
    // Kafka closes a connection with no progress either way for connections.max.idle.ms; a
    // write waiting on a client that reads nothing is no progress.
    let _ = stream.set_write_timeout(Some(std::time::Duration::from_millis(idle_ms)));
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    crate::metrics::CoreMetrics::add(&shard.metrics.connections, 1);
    let (mut reader, writer, socket_fd) = net_io::split(stream);
    let (tx, rx) =
        local_channel::new_bounded::<Task<Outgoing>>(shard.config.max_in_flight_per_connection);
    let activity = Rc::new(Activity::new(crate::clock::monotonic_ms()));
    let writer_task = spawn_writer(
        writer,
        socket_fd,
        rx,
        Rc::clone(&activity),
        WriterEnd {
            shard: Rc::clone(&shard),
            peer: peer.clone(),
            front: F::NAME,
        },
    );
    let read_timeout_ms = shard.config.request_read_timeout_ms;
    let budget = crate::request_memory::current();
    loop {
        let next = async {
            let frame = read_frame_within(
                &mut reader,
                activity.idle_for(idle_ms),
                read_timeout_ms,
                budget.as_deref(),
                |p| front.frame_bytes(&shard, p),
            )
            .await?;
            match frame {
                None => Ok(None),
                Some(f) => front
                    .decode(&shard, f)
                    .map(Some)
                    .map_err(FrameReadError::Bad),
            }
        };
        let request = match futures_lite::future::or(
            async { Some(next.await) },
            shard.stopped_signal(),
        )
        .await
        {
            None | Some(Ok(None)) => break,
            Some(Ok(Some(r))) => r,
            Some(Err(e)) => {
                let m = &shard.metrics;
                match &e {
                    FrameReadError::Idle => {
                        crate::metrics::CoreMetrics::add(&m.connections_closed_idle, 1);
                        tracing::info!(
                            %peer,
                            front = F::NAME,
                            "closing connection: idle for {idle_ms} ms (--connections-max-idle-ms)"
                        );
                    }
                    FrameReadError::Timeout { .. } => {
                        crate::metrics::CoreMetrics::add(&m.connections_closed_read_timeout, 1);
                        tracing::info!(%peer, front = F::NAME, "closing connection: {e}");
                    }
                    FrameReadError::Bad(_) => {
                        tracing::info!(%peer, front = F::NAME, "closing connection: {e}");
                    }
                }
                break;
            }
        };
        activity.request_started(crate::clock::monotonic_ms());
        let task = glommio::spawn_local(front.handle(Rc::clone(&shard), request));
        if tx.send(task).await.is_err() {
            break;
        }
    }
    drop(tx);
    writer_task.await;
    let c = &shard.metrics.connections;
    c.set(c.get().saturating_sub(1));
}

/// The native front: flatbuffers frames, verified before use.
struct Native {
    limits: FrameLimits,
    /// The host a group member joined from, as DescribeGroups reports it (Kafka's `/ip` form,
    /// the same the Kafka front records, so members of one group look alike whichever port
    /// they use).
    peer_host: Rc<str>,
}

impl Front for Native {
    /// The request and the size of its frame.
    type Request = (codec::Request, usize);
    const NAME: &'static str = "native";

    fn frame_bytes(
        &self,
        _shard: &Shard,
        prefix: [u8; LENGTH_PREFIX_BYTES],
    ) -> Result<usize, String> {
        frame::frame_bytes_from_prefix(prefix, &self.limits).map_err(|e| e.to_string())
    }

    fn decode(&mut self, _shard: &Shard, bytes: Bytes) -> Result<Self::Request, String> {
        let limits = &self.limits;
        let frame_bytes = bytes.len();
        let frame = frame::split_frame(bytes, limits).map_err(|e| e.to_string())?;
        codec::decode_request(&frame, limits)
            .map(|r| (r, frame_bytes))
            .map_err(|e| format!("an unverifiable frame: {e}"))
    }

    fn handle(
        &self,
        shard: Rc<Shard>,
        (request, frame_bytes): Self::Request,
    ) -> impl Future<Output = Outgoing> + 'static {
        let host = Rc::clone(&self.peer_host);
        async move { handlers::handle(&shard, request, frame_bytes, &host).await }
    }
}

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let peer_host: Rc<str> = stream
        .peer_addr()
        .map(|a| format!("/{}", a.ip()))
        .unwrap_or_default()
        .into();
    let front = Native {
        limits: FrameLimits {
            max_frame_bytes: shard.config.max_frame_bytes,
            ..FrameLimits::default()
        },
        peer_host,
    };
    serve_front(shard, stream, front).await;
}

/// Who a connection's writer reports a failed write to.
pub(crate) struct WriterEnd {
    shard: Rc<Shard>,
    peer: String,
    front: &'static str,
}

impl WriterEnd {
    /// A write failed: a client that took nothing for the write timeout is counted and logged;
    /// either way both directions of the socket are shut, so the reading half (which may be
    /// waiting on a client that sends nothing) ends too and the connection goes.
    fn failed(&self, socket_fd: std::os::fd::RawFd, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::TimedOut {
            let m = &self.shard.metrics;
            crate::metrics::CoreMetrics::add(&m.connections_closed_write_timeout, 1);
            tracing::info!(
                peer = %self.peer,
                front = self.front,
                "closing connection: no byte of a response taken for {} ms (--connections-max-idle-ms)",
                self.shard.config.connections_max_idle_ms
            );
        } else {
            tracing::debug!(peer = %self.peer, "writing a response: {e}");
        }
        // SAFETY: `socket_fd` is the stream's descriptor, open while either half lives, and
        // the caller's own half is alive across this call; shutdown(2) takes no pointers and
        // only changes the socket's state.
        unsafe {
            libc::shutdown(socket_fd, libc::SHUT_RDWR);
        }
    }
}

/// Writes each request's response in request order (the tasks are queued in the order their
/// requests arrived); splices file ranges. Ends when the channel closes or a write fails (then
/// `end` hears of it). Each answered request is reported to `activity` (the idle rule's view of
/// the connection).
pub(crate) fn spawn_writer(
    mut writer: Half,
    socket_fd: std::os::fd::RawFd,
    rx: local_channel::LocalReceiver<Task<Outgoing>>,
    activity: Rc<Activity>,
    end: WriterEnd,
) -> Task<()> {
    glommio::spawn_local(async move {
        let mut pipe = None;
        while let Some(task) = rx.recv().await {
            let written = match task.await {
                Outgoing::Nothing => Ok(()),
                Outgoing::Frame { head, chunks } => {
                    net_io::write_chunks(&mut writer, socket_fd, &mut pipe, &head, chunks).await
                }
            };
            activity.request_done(crate::clock::monotonic_ms());
            if let Err(e) = written {
                end.failed(socket_fd, &e);
                break;
            }
        }
    })
}
