//! Reading one length-prefixed frame off a connection, shared by every port (native, Kafka,
//! internal): the 4-byte prefix, the caller's size check (done before any allocation), then
//! exactly the announced bytes. At the bottom of the broker: it knows sockets, not services.

use bytes::{Bytes, BytesMut};
use futures_lite::AsyncReadExt;
use spool_protocol::frame::LENGTH_PREFIX_BYTES;

use crate::net_io::Half;

/// Reads one whole frame (prefix included); `frame_bytes` turns the prefix into the frame's size
/// or refuses it. `Ok(None)` on a clean end of stream between frames.
pub async fn read_frame<E: std::fmt::Display>(
    r: &mut Half,
    frame_bytes: impl FnOnce([u8; LENGTH_PREFIX_BYTES]) -> Result<usize, E>,
) -> Result<Option<Bytes>, String> {
    let Some(prefix) = read_prefix(r).await? else {
        return Ok(None);
    };
    let frame_bytes = frame_bytes(prefix).map_err(|e| e.to_string())?;
    if frame_bytes < LENGTH_PREFIX_BYTES {
        return Err(format!(
            "a frame of {frame_bytes} bytes is shorter than its prefix"
        ));
    }
    let mut buf = BytesMut::zeroed(frame_bytes);
    buf[..LENGTH_PREFIX_BYTES].copy_from_slice(&prefix);
    r.read_exact(&mut buf[LENGTH_PREFIX_BYTES..])
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(Some(buf.freeze()))
}

/// Reads a frame's 4-byte length prefix (every protocol starts frames with one); `Ok(None)` on a
/// clean end of stream before its first byte.
async fn read_prefix(r: &mut Half) -> Result<Option<[u8; LENGTH_PREFIX_BYTES]>, String> {
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
    Ok(Some(prefix))
}
