//! spool-protocol: spool's native wire protocol and its client library.
//!
//! - [`wire`] / [`metadata_records`] / [`internal_wire`]: the flatbuffers types generated from
//!   `schemas/` (committed; `schemas/generate.sh` regenerates them, `schemas/check-generated.sh`
//!   proves they are fresh).
//! - [`ErrorCode`]: Kafka's error numbers, shared by the native and Kafka fronts.
//! - [`frame`]: `u32 length | u32 header length | flatbuffers header | payload` — size limits checked
//!   before allocation, the header verified before use, every failure a typed [`FrameError`].
//! - [`codec`]: request/response headers to and from frames, with the cross-field checks the
//!   verifier cannot do (body matches API key, payload slices inside the payload).
//! - [`payload`]: placing record batches in a frame's payload and finding them again.
//! - [`internal`]: the broker-to-broker protocol on port 9094 (raft messages, registration,
//!   heartbeats, forwarded metadata changes) as plain Rust types, and its codec.
//! - [`client`]: producer, consumer and admin — sans-IO cores, a blocking API for plain
//!   `fn main()`, and an async API on glommio.
//!
//! Nothing here panics on input: decoders return errors, and `unwrap()` appears only on proven
//! local invariants.

// The generated object-API types (`wire::FooT`) are `#[non_exhaustive]`, so every crate but this one
// can only build them as `Default` plus field assignments; this crate builds them the same way, so
// its code reads like its users' and survives new schema fields unchanged.
#![allow(clippy::field_reassign_with_default)]

mod generated;

pub mod client;
pub mod codec;
pub mod error_code;
pub mod frame;
pub mod frame_pool;
pub mod internal;
pub mod kafka;
pub mod metadata_log;
pub mod payload;
pub mod recv_lowat;
pub mod versions;

pub use codec::{
    decode_request, decode_response, encode_request, encode_response, Request, Response,
};
pub use error_code::ErrorCode;
pub use frame::{EncodedFrame, FrameError, FrameLimits, RawFrame};
pub use generated::internal_wire;
pub use generated::metadata as metadata_records;
pub use generated::wire;

#[cfg(test)]
mod roundtrip_tests;
