//! Native frames: `u32 length | u32 header length | flatbuffers header | payload` (DESIGN §6).
//!
//! Both `u32`s are big-endian (network order, as Kafka's length prefix). `length` counts every
//! byte after itself, so a whole frame is `4 + length` bytes; the header is `header length` bytes
//! of flatbuffers, and the payload is the rest — raw RecordBatch v2 bytes located by the header.
//!
//! This module owns only the byte layout and its limits. It promises:
//! - the frame size is checked against [`FrameLimits::max_frame_bytes`] (default 100 MiB) from the
//!   4-byte prefix alone, before any buffer for the frame is allocated;
//! - the header length is checked against the frame and [`FrameLimits::max_header_bytes`];
//! - every failure is a [`FrameError`], never a panic.
//!
//! It never interprets the header: verifying the flatbuffer and the cross-field checks live in
//! [`crate::codec`].

use std::io::{Read, Write};

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

use crate::frame_pool::FrameBuf;
use crate::ErrorCode;

/// The `u32 length` prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;
/// `u32 length` + `u32 header length`: the fixed bytes before the header.
pub const FRAME_PREFIX_BYTES: usize = 8;
/// Default cap on a whole frame (prefix included): 100 MiB, Kafka's `socket.request.max.bytes`.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;
/// Default cap on the flatbuffers header. Record bytes never sit in it, so it stays small even for
/// a metadata response over thousands of partitions; the cap bounds what unpacking may allocate.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 16 * 1024 * 1024;

/// Size limits every decoder and encoder enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest whole frame, length prefix included.
    pub max_frame_bytes: usize,
    /// Largest flatbuffers header.
    pub max_header_bytes: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        Self {
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// Why a frame was refused. Each maps to one protocol [`ErrorCode`] via [`FrameError::error_code`].
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame of {frame_bytes} bytes exceeds the limit of {max_frame_bytes}")]
    FrameTooLarge {
        frame_bytes: u64,
        max_frame_bytes: usize,
    },
    #[error("frame length {length} is shorter than the 4-byte header-length field")]
    FrameTooShort { length: u32 },
    #[error("frame truncated: need {needed} bytes, have {have}")]
    Truncated { needed: usize, have: usize },
    #[error("header length {header_bytes} does not fit a frame of {frame_bytes} bytes")]
    BadHeaderLength {
        header_bytes: u32,
        frame_bytes: usize,
    },
    #[error("header of {header_bytes} bytes exceeds the limit of {max_header_bytes}")]
    HeaderTooLarge {
        header_bytes: usize,
        max_header_bytes: usize,
    },
    #[error("header failed flatbuffers verification: {0}")]
    InvalidHeader(#[from] flatbuffers::InvalidFlatbuffer),
    #[error("header has no body (absent, or a union member this build does not know)")]
    MissingBody,
    #[error("header says api key {api_key} but carries a {body} body")]
    BodyMismatch { api_key: i16, body: &'static str },
    #[error(
        "payload slice for {topic}/{partition} ({offset}+{length}) lies outside the \
         {payload_bytes}-byte payload"
    )]
    SliceOutOfBounds {
        topic: String,
        partition: i32,
        offset: u32,
        length: u32,
        payload_bytes: usize,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameError {
    /// The protocol error a broker answers with (when the connection survives at all).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::FrameTooLarge { .. } | Self::HeaderTooLarge { .. } => ErrorCode::MessageTooLarge,
            Self::SliceOutOfBounds { .. } => ErrorCode::CorruptMessage,
            Self::Io(_) => ErrorCode::NetworkException,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

/// A frame split into its two parts; nothing in it has been interpreted yet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawFrame {
    /// The flatbuffers header bytes (unverified).
    pub header: Bytes,
    /// The payload: raw record-batch bytes the header locates.
    pub payload: Bytes,
}

/// An encoded frame ready to write: `head` is the two length fields and the header; the payload
/// stays in the chunks it was built from (batches are never copied into the header).
#[derive(Debug, Clone, Default)]
pub struct EncodedFrame {
    pub head: Bytes,
    pub payload: Vec<Bytes>,
}

impl EncodedFrame {
    /// Whole frame size in bytes, prefix included.
    pub fn len(&self) -> usize {
        self.head.len() + self.payload.iter().map(Bytes::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as one contiguous buffer (copies the payload; tests and small frames).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len());
        out.extend_from_slice(&self.head);
        for chunk in &self.payload {
            out.extend_from_slice(chunk);
        }
        out.freeze()
    }

    /// Writes the frame to a blocking writer, chunk by chunk.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        w.write_all(&self.head)?;
        for chunk in &self.payload {
            w.write_all(chunk)?;
        }
        Ok(())
    }

    /// Writes the frame to an async writer (any runtime implementing `futures_io::AsyncWrite`).
    pub async fn write_to_async<W>(&self, w: &mut W) -> std::io::Result<()>
    where
        W: futures_lite::AsyncWrite + Unpin,
    {
        use futures_lite::AsyncWriteExt;
        w.write_all(&self.head).await?;
        for chunk in &self.payload {
            w.write_all(chunk).await?;
        }
        Ok(())
    }
}

/// Builds a frame around an already encoded header and payload chunks, checking the limits.
pub fn assemble(
    header: &[u8],
    payload: Vec<Bytes>,
    limits: &FrameLimits,
) -> Result<EncodedFrame, FrameError> {
    if header.len() > limits.max_header_bytes {
        return Err(FrameError::HeaderTooLarge {
            header_bytes: header.len(),
            max_header_bytes: limits.max_header_bytes,
        });
    }
    let payload_bytes: usize = payload.iter().map(Bytes::len).sum();
    let frame_bytes = FRAME_PREFIX_BYTES as u64 + header.len() as u64 + payload_bytes as u64;
    if frame_bytes > limits.max_frame_bytes as u64 || frame_bytes > u64::from(u32::MAX) {
        return Err(FrameError::FrameTooLarge {
            frame_bytes,
            max_frame_bytes: limits.max_frame_bytes,
        });
    }
    // Both fit a u32: checked just above.
    let length = (frame_bytes - LENGTH_PREFIX_BYTES as u64) as u32;
    let header_length = header.len() as u32;
    let mut head = BytesMut::with_capacity(FRAME_PREFIX_BYTES + header.len());
    head.extend_from_slice(&length.to_be_bytes());
    head.extend_from_slice(&header_length.to_be_bytes());
    head.extend_from_slice(header);
    Ok(EncodedFrame {
        head: head.freeze(),
        payload,
    })
}

/// The whole frame size (prefix included) announced by a 4-byte length prefix, checked against
/// the limit. Call this before allocating anything for the frame.
pub fn frame_bytes_from_prefix(prefix: [u8; 4], limits: &FrameLimits) -> Result<usize, FrameError> {
    let length = u32::from_be_bytes(prefix);
    let frame_bytes = u64::from(length) + LENGTH_PREFIX_BYTES as u64;
    if frame_bytes > limits.max_frame_bytes as u64 {
        return Err(FrameError::FrameTooLarge {
            frame_bytes,
            max_frame_bytes: limits.max_frame_bytes,
        });
    }
    if (length as usize) < FRAME_PREFIX_BYTES - LENGTH_PREFIX_BYTES {
        return Err(FrameError::FrameTooShort { length });
    }
    // Bounded by max_frame_bytes, a usize.
    Ok(frame_bytes as usize)
}

/// Splits one complete frame (prefix included, exactly its announced size) into header and
/// payload without copying.
pub fn split_frame(mut frame: Bytes, limits: &FrameLimits) -> Result<RawFrame, FrameError> {
    if frame.len() < FRAME_PREFIX_BYTES {
        return Err(FrameError::Truncated {
            needed: FRAME_PREFIX_BYTES,
            have: frame.len(),
        });
    }
    let prefix = [frame[0], frame[1], frame[2], frame[3]];
    let frame_bytes = frame_bytes_from_prefix(prefix, limits)?;
    if frame.len() != frame_bytes {
        return Err(FrameError::Truncated {
            needed: frame_bytes,
            have: frame.len(),
        });
    }
    frame.advance(LENGTH_PREFIX_BYTES);
    let header_bytes = frame.get_u32();
    let rest = frame.len();
    if header_bytes as usize > rest {
        return Err(FrameError::BadHeaderLength {
            header_bytes,
            frame_bytes,
        });
    }
    if header_bytes as usize > limits.max_header_bytes {
        return Err(FrameError::HeaderTooLarge {
            header_bytes: header_bytes as usize,
            max_header_bytes: limits.max_header_bytes,
        });
    }
    let header = frame.split_to(header_bytes as usize);
    Ok(RawFrame {
        header,
        payload: frame,
    })
}

/// Reads one frame from a blocking reader: the prefix first, the limit checked, then exactly the
/// announced bytes. `Ok(None)` on a clean end of stream before any byte of a frame.
pub fn read_frame(r: &mut impl Read, limits: &FrameLimits) -> Result<Option<RawFrame>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < prefix.len() {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(FrameError::Truncated {
                    needed: LENGTH_PREFIX_BYTES,
                    have: got,
                })
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let frame_bytes = frame_bytes_from_prefix(prefix, limits)?;
    // Pooled, so a large frame is read over an earlier one's bytes rather than zeroed first;
    // every byte up to `frame_bytes` is written before the frame is used.
    let mut buf = FrameBuf::take(frame_bytes);
    let slot = &mut buf.as_mut_slice()[..frame_bytes];
    slot[..LENGTH_PREFIX_BYTES].copy_from_slice(&prefix);
    r.read_exact(&mut slot[LENGTH_PREFIX_BYTES..])?;
    split_frame(buf.into_frame_bytes(frame_bytes), limits).map(Some)
}

/// Reads one frame from an async reader (glommio's `TcpStream`, or any `futures_io::AsyncRead`).
/// Same checks and order as [`read_frame`].
pub async fn read_frame_async<R>(
    r: &mut R,
    limits: &FrameLimits,
) -> Result<Option<RawFrame>, FrameError>
where
    R: futures_lite::AsyncRead + Unpin,
{
    read_frame_async_with(r, limits, |_, _| {}).await
}

/// [`read_frame_async`], calling `before_body_read(r, remaining_bytes)` before each read of the
/// body with the bytes of the frame still to come, and once with 0 when the frame is whole (a
/// socket's receive mark follows it: [`crate::recv_lowat`]).
pub async fn read_frame_async_with<R, F>(
    r: &mut R,
    limits: &FrameLimits,
    mut before_body_read: F,
) -> Result<Option<RawFrame>, FrameError>
where
    R: futures_lite::AsyncRead + Unpin,
    F: FnMut(&R, usize),
{
    use futures_lite::AsyncReadExt;
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < prefix.len() {
        match r.read(&mut prefix[got..]).await {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(FrameError::Truncated {
                    needed: LENGTH_PREFIX_BYTES,
                    have: got,
                })
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let frame_bytes = frame_bytes_from_prefix(prefix, limits)?;
    // Pooled, as in `read_frame`.
    let mut buf = FrameBuf::take(frame_bytes);
    let slot = &mut buf.as_mut_slice()[..frame_bytes];
    slot[..LENGTH_PREFIX_BYTES].copy_from_slice(&prefix);
    let mut got = LENGTH_PREFIX_BYTES;
    while got < frame_bytes {
        before_body_read(r, frame_bytes - got);
        match r.read(&mut slot[got..]).await {
            Ok(0) => {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    before_body_read(r, 0);
    split_frame(buf.into_frame_bytes(frame_bytes), limits).map(Some)
}

/// Incremental decoder for bytes arriving in arbitrary pieces (a non-blocking socket, a fuzzer).
/// Buffers at most one frame: the announced size is checked as soon as its 4 bytes arrive, so an
/// oversize frame fails before its bytes are accepted.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: BytesMut,
    limits: FrameLimits,
    /// The current frame's size once its prefix has been checked.
    frame_bytes: Option<usize>,
}

impl FrameDecoder {
    pub fn new(limits: FrameLimits) -> Self {
        Self {
            buf: BytesMut::new(),
            limits,
            frame_bytes: None,
        }
    }

    /// Bytes held that do not yet form a whole frame.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Offers bytes; returns how many were taken (at most up to the end of the current frame, so
    /// the buffer never holds more than one frame). Call [`Self::next_frame`] when it returns less
    /// than offered, then offer the rest.
    pub fn push(&mut self, bytes: &[u8]) -> Result<usize, FrameError> {
        let mut taken = 0;
        if self.frame_bytes.is_none() {
            let want = LENGTH_PREFIX_BYTES
                .saturating_sub(self.buf.len())
                .min(bytes.len());
            self.buf.extend_from_slice(&bytes[..want]);
            taken = want;
            if self.buf.len() < LENGTH_PREFIX_BYTES {
                return Ok(taken);
            }
            let prefix = [self.buf[0], self.buf[1], self.buf[2], self.buf[3]];
            let frame_bytes = frame_bytes_from_prefix(prefix, &self.limits)?;
            self.buf.reserve(frame_bytes - self.buf.len());
            self.frame_bytes = Some(frame_bytes);
        }
        let Some(frame_bytes) = self.frame_bytes else {
            return Ok(taken);
        };
        let want = (frame_bytes - self.buf.len()).min(bytes.len() - taken);
        self.buf.extend_from_slice(&bytes[taken..taken + want]);
        Ok(taken + want)
    }

    /// The next complete frame, if one has been pushed.
    pub fn next_frame(&mut self) -> Result<Option<RawFrame>, FrameError> {
        match self.frame_bytes {
            Some(n) if self.buf.len() == n => {
                self.frame_bytes = None;
                let frame = self.buf.split_to(n).freeze();
                split_frame(frame, &self.limits).map(Some)
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> FrameLimits {
        FrameLimits {
            max_frame_bytes: 1024,
            max_header_bytes: 256,
        }
    }

    #[test]
    fn assemble_then_split_round_trips() {
        let payload = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
        let frame = assemble(b"HEADER", payload, &limits()).unwrap();
        assert_eq!(frame.len(), 8 + 6 + 7);
        let raw = split_frame(frame.to_bytes(), &limits()).unwrap();
        assert_eq!(&raw.header[..], b"HEADER");
        assert_eq!(&raw.payload[..], b"abcdefg");
    }

    #[test]
    fn oversize_prefix_fails_before_allocation() {
        let prefix = (u32::MAX).to_be_bytes();
        let err = frame_bytes_from_prefix(prefix, &FrameLimits::default()).unwrap_err();
        assert!(matches!(err, FrameError::FrameTooLarge { .. }));
        // The default limit is 100 MiB, whole frame.
        let ok = ((100 * 1024 * 1024 - 4) as u32).to_be_bytes();
        assert_eq!(
            frame_bytes_from_prefix(ok, &FrameLimits::default()).unwrap(),
            100 * 1024 * 1024
        );
        let over = ((100 * 1024 * 1024 - 3) as u32).to_be_bytes();
        assert!(frame_bytes_from_prefix(over, &FrameLimits::default()).is_err());
    }

    #[test]
    fn read_frame_refuses_oversize_without_reading_the_body() {
        let mut input: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        let err = read_frame(&mut input, &FrameLimits::default()).unwrap_err();
        assert!(matches!(err, FrameError::FrameTooLarge { .. }));
    }

    #[test]
    fn header_length_beyond_frame_is_refused() {
        let mut f = BytesMut::new();
        f.extend_from_slice(&8u32.to_be_bytes());
        f.extend_from_slice(&100u32.to_be_bytes());
        f.extend_from_slice(b"abcd");
        let err = split_frame(f.freeze(), &limits()).unwrap_err();
        assert!(matches!(err, FrameError::BadHeaderLength { .. }));
    }

    #[test]
    fn decoder_takes_bytes_one_at_a_time() {
        let a = assemble(b"H1", vec![Bytes::from_static(b"p1")], &limits())
            .unwrap()
            .to_bytes();
        let b = assemble(b"H22", vec![], &limits()).unwrap().to_bytes();
        let stream: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
        let mut dec = FrameDecoder::new(limits());
        let mut frames = Vec::new();
        for byte in &stream {
            assert_eq!(dec.push(std::slice::from_ref(byte)).unwrap(), 1);
            if let Some(f) = dec.next_frame().unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(&frames[0].header[..], b"H1");
        assert_eq!(&frames[0].payload[..], b"p1");
        assert_eq!(&frames[1].header[..], b"H22");
        assert_eq!(dec.buffered_bytes(), 0);
    }

    #[test]
    fn read_frame_eof_and_truncation() {
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty, &limits()).unwrap().is_none());
        let mut short: &[u8] = &[0, 0];
        assert!(matches!(
            read_frame(&mut short, &limits()),
            Err(FrameError::Truncated { .. })
        ));
        let mut body_short: &[u8] = &[0, 0, 0, 10, 0, 0, 0, 1];
        assert!(matches!(
            read_frame(&mut body_short, &limits()),
            Err(FrameError::Io(_))
        ));
    }

    /// An async reader that hands out at most `piece` bytes per read.
    struct Pieces<'a> {
        data: &'a [u8],
        piece: usize,
    }

    impl futures_lite::AsyncRead for Pieces<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.piece).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            std::task::Poll::Ready(Ok(n))
        }
    }

    #[test]
    fn the_async_read_tells_what_is_still_to_come_before_each_body_read_and_0_at_the_end() {
        let frame = assemble(b"H", vec![Bytes::from(vec![5u8; 600])], &limits())
            .unwrap()
            .to_bytes();
        let mut r = Pieces {
            data: &frame,
            piece: 250,
        };
        let mut seen = Vec::new();
        let raw = futures_lite::future::block_on(read_frame_async_with(
            &mut r,
            &limits(),
            |_, remaining| seen.push(remaining),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(&raw.payload[..], &[5u8; 600][..]);
        // The prefix's 4 bytes came in the first read; the body then in pieces of 250.
        let body = frame.len() - 4;
        assert_eq!(seen, vec![body, body - 250, body - 500, 0]);
        // A body cut short is an error, not a frame.
        let mut cut = Pieces {
            data: &frame[..frame.len() - 1],
            piece: 250,
        };
        let r = futures_lite::future::block_on(read_frame_async(&mut cut, &limits()));
        assert!(matches!(r, Err(FrameError::Io(_))));
    }
}
