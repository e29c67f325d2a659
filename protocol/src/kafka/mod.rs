//! The Kafka wire protocol (DESIGN §6) for the broker's Kafka port: an adapter over the
//! `kafka-protocol` crate, which generates request and response structs from Kafka's own message
//! definitions — spool hand-writes only what the crate no longer carries ([`legacy`]).
//!
//! - [`versions`]: what an API table of the server may list (the versions the codec carries) and
//!   its ApiVersions list; the table itself is the broker's, passed to the codec;
//! - [`codec`]: size-prefixed frames, request headers, decoding requests, encoding responses with
//!   the right header version (ApiVersions: always v0, KIP-511), UNSUPPORTED_VERSION answers;
//! - [`fetch`]: the Fetch response framed by hand around record bytes that stay in the log;
//! - [`unsupported`]: an empty response of any API's shape; [`echo`]: an UNSUPPORTED_VERSION
//!   response naming each item of the request;
//! - [`legacy`]: the versions Kafka 3.9 serves that the crate (Kafka 4.0) dropped, and what the
//!   codec does with each; [`legacy_requests`] / [`legacy_responses`] decode and encode them by
//!   hand over [`primitives`], Kafka's non-flexible types.
//!
//! Nothing here does I/O or panics on input; the broker's `kafka` module drives it.

pub mod codec;
pub mod echo;
pub mod fetch;
pub mod legacy;
pub mod legacy_requests;
pub mod legacy_responses;
pub mod primitives;
pub mod unsupported;
pub mod versions;

pub use codec::{
    decode_request, encode_response, frame_bytes_from_prefix, unsupported_response,
    KafkaCodecError, KafkaRequest, Refused, RequestBody,
};

#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod tests;
