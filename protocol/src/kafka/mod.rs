//! The Kafka wire protocol (DESIGN §6) for the broker's Kafka port: an adapter over the
//! `kafka-protocol` crate, which generates request and response structs from Kafka's own message
//! definitions — spool does not hand-write that codec.
//!
//! - [`versions`]: what an API table of the server may list (the versions the codec carries) and
//!   its ApiVersions list; the table itself is the broker's, passed to the codec;
//! - [`codec`]: size-prefixed frames, request headers, decoding requests, encoding responses with
//!   the right header version (ApiVersions: always v0, KIP-511), UNSUPPORTED_VERSION answers;
//! - [`fetch`]: the Fetch response framed by hand around record bytes that stay in the log;
//! - [`unsupported`]: an empty response of any API's shape.
//!
//! Nothing here does I/O or panics on input; the broker's `kafka` module drives it.

pub mod codec;
pub mod fetch;
pub mod unsupported;
pub mod versions;

pub use codec::{
    decode_request, encode_response, frame_bytes_from_prefix, unsupported_response,
    KafkaCodecError, KafkaRequest, RequestBody,
};

#[cfg(test)]
mod tests;
