//! Malformed input for the bad-input tests: seeded random bytes, frames whose lengths lie, and
//! headers that decode but ask for something no broker should do. Deterministic (one seed per
//! call site), so a failure replays exactly.

use bytes::{BufMut, Bytes, BytesMut};
use flatbuffers::FlatBufferBuilder;
use spool_protocol::codec;
use spool_protocol::frame::{self, FrameLimits};
use spool_protocol::wire::ApiKey;

use crate::wire::api_versions_body;

/// xorshift64*: small, seeded, good enough to make noise.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// A frame whose two length fields are as given, followed by `rest` (which need not match).
pub fn frame_with_lengths(length: u32, header_length: u32, rest: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(8 + rest.len());
    b.put_u32(length);
    b.put_u32(header_length);
    b.put_slice(rest);
    b.freeze()
}

/// A well-formed frame around `header` bytes that are not a valid flatbuffer (or any header).
pub fn frame_around_header(header: &[u8]) -> Bytes {
    frame::assemble(header, Vec::new(), &FrameLimits::default())
        .expect("a small header fits a frame")
        .to_bytes()
}

/// A verifiable request header whose `api_key` is `api_key` but whose body is ApiVersions — an
/// API this build does not know (or a body that contradicts the key). `codec::encode_request`
/// refuses to write such a thing, so it is packed by hand.
pub fn header_with_api_key(api_key: i16, correlation_id: i32) -> Bytes {
    let mut h = codec::request(correlation_id, Some("spool-tests"), api_versions_body());
    h.api_key = ApiKey(api_key);
    let mut fbb = FlatBufferBuilder::with_capacity(256);
    let root = h.pack(&mut fbb);
    fbb.finish_minimal(root);
    frame_around_header(fbb.finished_data())
}
