//! The internal protocol on `--internal-port` (9094): what brokers say to each other (DESIGN §7) —
//! raft messages between controller voters, and the brokers' calls to the active controller
//! (registration, heartbeats, forwarded metadata changes). Replica fetches join it with the
//! replication milestone.
//!
//! Frames are the native envelope (`u32 length | u32 header length | flatbuffers header |
//! payload`, [`crate::frame`]), with the header an `InternalFrame` of `schemas/internal.fbs`,
//! verified before use. [`types`] holds the plain Rust forms the broker works with; [`codec`]
//! turns them into frames and back, with every size checked before allocating and every failure a
//! typed error: a peer's bytes are input like any other.

pub mod codec;
pub mod types;

pub use codec::{decode, encode, encode_with_limits, InternalError};
pub use types::*;
