//! The internal protocol on `--internal-port` (9094): what brokers say to each other (DESIGN §7) —
//! raft messages between controller voters, and the brokers' calls to the active controller
//! (registration, heartbeats, forwarded metadata changes and partition leaders' ISR changes), and
//! followers' replica fetches from partition leaders, and transaction coordinators' markers for
//! partitions other brokers lead.
//!
//! Frames are the native envelope (`u32 length | u32 header length | flatbuffers header |
//! payload`, [`crate::frame`]), with the header an `InternalFrame` of `schemas/internal.fbs`,
//! verified before use. Payloads now carry replica-fetch batches: a `ReplicaFetchAnswer`'s
//! partitions' records, concatenated after the header in answer order (each partition's
//! `records_bytes` long), so the leader writes them without copying; every other message's payload
//! is empty. [`types`] holds the plain Rust forms the broker works with; [`codec`]
//! turns them into frames and back, with every size checked before allocating and every failure a
//! typed error: a peer's bytes are input like any other.

mod alter_partition_codec;
pub mod codec;
mod limits;
mod replica_fetch_codec;
mod topic_admin_codec;
mod txn_markers_codec;
pub mod types;

pub use codec::{
    decode, decode_with_payload, encode, encode_with_limits, encode_with_payload, InternalError,
};
pub use limits::REPLICA_FETCH_PARTITIONS_MAX;
pub use types::*;
