//! The Kafka wire-protocol front (DESIGN §6) on `--kafka-port`: one listener per core
//! (SO_REUSEPORT, like the native one), a connection loop with the native bounds, and the
//! translation of each Kafka API into the broker's internal requests — the same
//! [`crate::ops`] and group functions the native front calls.
//!
//! - [`serve`]: one connection: frames read with the size checked from the prefix before any
//!   allocation, up to `max_in_flight_per_connection` requests handled concurrently, responses
//!   written in request order (Kafka clients match responses by order as well as correlation id).
//! - `dispatch`: API key → handler; versions outside `spool_protocol::kafka::versions` get
//!   UNSUPPORTED_VERSION in the API's shape.
//! - `data`: Produce, Fetch (records spliced straight from the log), ListOffsets.
//! - `admin`: ApiVersions, Metadata (with auto-create), CreateTopics, DeleteTopics,
//!   DescribeConfigs, InitProducerId.
//! - `groups`: the consumer-group APIs, translated to and from `handlers::groups`.
//!
//! Bad input: a frame over `--max-frame-bytes`, one too short for a header, an API key the codec
//! does not know, a version of an API outside what the codec can decode (there is no shape to
//! answer in), or a body that does not decode is logged and closes only its connection — as
//! Kafka does. Everything that decodes gets an answer, with an error code where needed.

/// Builds a generated (non-exhaustive) flatbuffers object-API struct from its default.
macro_rules! native {
    ($t:ty { $($f:ident : $v:expr),* $(,)? }) => {{
        let mut value = <$t>::default();
        $(value.$f = $v;)*
        value
    }};
}

mod admin;
mod data;
mod dispatch;
mod groups;
#[cfg(test)]
mod tests;

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures_lite::AsyncReadExt;
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::Task;
use kafka_protocol::protocol::StrBytes;
use spool_protocol::kafka::codec::{self, LENGTH_PREFIX_BYTES};

use crate::handlers::Outgoing;
use crate::net_io::{self, Half};
use crate::shard::Shard;

/// Who is on the other end of a connection (for JoinGroup's member info and logs).
#[derive(Debug, Clone)]
pub struct Peer {
    /// Kafka's form: `/` and the IP address.
    pub host: String,
    pub addr: String,
}

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (addr, host) = match stream.peer_addr() {
        Ok(a) => (a.to_string(), format!("/{}", a.ip())),
        Err(_) => (String::new(), String::new()),
    };
    let peer = Rc::new(Peer { host, addr });
    crate::metrics::CoreMetrics::add(&shard.metrics.connections, 1);
    let (mut reader, writer, socket_fd) = net_io::split(stream);
    let (tx, rx) =
        local_channel::new_bounded::<Task<Outgoing>>(shard.config.max_in_flight_per_connection);
    let writer_task = crate::connection::spawn_writer(writer, socket_fd, rx);
    loop {
        let read = read_frame(&mut reader, shard.config.max_frame_bytes);
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
                tracing::info!(peer = %peer.addr, "closing Kafka connection: {e}");
                break;
            }
        };
        let request = match codec::decode_request(frame) {
            Ok(r) => r,
            Err(e) => {
                crate::metrics::CoreMetrics::add(&shard.metrics.request_errors, 1);
                tracing::info!(peer = %peer.addr, code = ?e.error_code(), "closing Kafka connection: {e}");
                break;
            }
        };
        let me = Rc::clone(&shard);
        let who = Rc::clone(&peer);
        let task = glommio::spawn_local(async move { dispatch::handle(&me, request, &who).await });
        if tx.send(task).await.is_err() {
            break;
        }
    }
    drop(tx);
    writer_task.await;
    let c = &shard.metrics.connections;
    c.set(c.get().saturating_sub(1));
}

/// Reads one frame's bytes after the prefix; `Ok(None)` on a clean end of stream between frames.
async fn read_frame(r: &mut Half, max_frame_bytes: usize) -> Result<Option<Bytes>, String> {
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
    let frame_bytes =
        codec::frame_bytes_from_prefix(prefix, max_frame_bytes).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::zeroed(frame_bytes);
    r.read_exact(&mut buf[..])
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(Some(buf.freeze()))
}

/// An owned string as the codec's string type.
fn kstr(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
