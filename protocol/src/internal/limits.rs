//! The internal codec's limits and checks: every named bound on a count or a length, the
//! [`InternalError`] a frame that breaks one (or fails verification) gets, and the small helpers
//! both directions of every message share — count and length checks, names, and the "-1 means
//! absent" integers of the replica-fetch messages.
//!
//! Owns: the numbers a peer's frame is held to. Never does: encode or decode a message (that is
//! [`super::codec`] and [`super::replica_fetch_codec`]).

use flatbuffers::{FlatBufferBuilder, VerifierOptions, WIPOffset};
use thiserror::Error;

use crate::frame::FrameError;
use crate::ErrorCode;

/// The flatbuffers builder every encoder writes into.
pub(super) type Fbb<'b> = FlatBufferBuilder<'b>;

/// Raft messages in one frame. raft-rs sends a handful per ready (one per peer and kind); the
/// cap only bounds a hostile count.
pub const RAFT_MESSAGES_PER_FRAME_MAX: usize = 4096;

/// Bytes in one raft message (`eraftpb::Message`). The raft driver must keep `max_size_per_msg`
/// and snapshot chunks below it; all of a frame's raft bytes must also fit the header limit
/// ([`crate::frame::DEFAULT_MAX_HEADER_BYTES`], 16 MiB).
pub const RAFT_MESSAGE_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Listeners one broker registers (`native`, `kafka`, `internal`, with room for more).
pub const LISTENERS_PER_REGISTRATION_MAX: usize = 16;

/// Topics in one forwarded create or delete (and outcomes in its answer).
pub const TOPICS_PER_FORWARD_MAX: usize = 10_000;

/// Configs on one forwarded topic.
pub const CONFIGS_PER_TOPIC_MAX: usize = 256;

/// Bytes in a name: topic, config name, listener name, host, rack, cluster id. 255 is DNS's host
/// limit and above Kafka's topic limit (249), so no valid name is refused here; a broker
/// forwarding a longer topic name answers INVALID_TOPIC_EXCEPTION itself.
pub const NAME_BYTES_MAX: usize = 255;

/// Bytes in one config value.
pub const CONFIG_VALUE_BYTES_MAX: usize = 64 * 1024;

/// Bytes in an error message of an answer.
pub const ERROR_MESSAGE_BYTES_MAX: usize = 16 * 1024;

/// Partitions in one replica fetch (and in its answer). A follower fetches every partition it
/// follows from one leader on one core in one session; 10 000 is far past any real broker pair
/// and bounds a hostile count.
pub const REPLICA_FETCH_PARTITIONS_MAX: usize = 10_000;

/// Replicas of one partition (and members of its ISR) in an AlterPartition and its answer. One
/// replica per broker, so this is far past any real replication factor; it bounds a hostile
/// count.
pub const REPLICAS_PER_PARTITION_MAX: usize = 1024;

/// Verifier nesting limit. The deepest path (frame → Forward → CreateTopics → topics →
/// ForwardTopic → configs → TopicConfig → string) is 8 levels; twice that leaves room for growth.
pub const VERIFIER_DEPTH_MAX: usize = 16;

/// Why an internal frame could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum InternalError {
    /// The envelope: sizes, prefix, header length (see [`FrameError`]).
    #[error("internal frame: {0}")]
    Frame(#[from] FrameError),
    #[error("internal frame header failed flatbuffers verification: {0}")]
    Verify(#[from] flatbuffers::InvalidFlatbuffer),
    #[error("internal frame header has no body")]
    MissingBody,
    /// A field the codec requires but the schema cannot mark required (a union inside a body).
    #[error("internal frame: {field} is missing")]
    MissingField { field: &'static str },
    /// A union member this build does not know (a newer peer, or corruption).
    #[error("internal frame: {union} member {type_id} is unknown to this build")]
    UnknownUnionType { union: &'static str, type_id: u8 },
    #[error("internal frame: {what} holds {count} items, over the limit of {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("internal frame: {what} is {bytes} bytes, over the limit of {max}")]
    TooLong {
        what: &'static str,
        bytes: usize,
        max: usize,
    },
    /// A payload on a message that has none (anything but a replica-fetch answer), or given to
    /// [`encode`] / [`decode`], which carry none: refused rather than silently dropped.
    #[error("internal frame carries a {payload_bytes}-byte payload; its message has none")]
    UnexpectedPayload { payload_bytes: usize },
    /// A replica-fetch answer whose partitions' `records_bytes` do not add up to its payload.
    #[error(
        "replica fetch answer: partitions' records_bytes add up to {records_bytes}, but the \
         payload is {payload_bytes} bytes"
    )]
    RecordsBytesMismatch {
        records_bytes: u64,
        payload_bytes: usize,
    },
    /// A number outside its field's range: a negative offset, a negative epoch other than -1
    /// (absent), a negative id, or an offset over `i64::MAX`.
    #[error("internal frame: {field} = {value} is out of range")]
    OutOfRange { field: &'static str, value: i128 },
    /// `ForwardAnswer::ProducerIds(Err(ErrorCode::None))`: on the wire error 0 means success, so
    /// this value has no encoding.
    #[error("ProducerIds answer is an error with code NONE")]
    ErrorCodeIsNone,
}

impl InternalError {
    /// The protocol error this failure stands for (for logs and metrics; the internal protocol
    /// closes the connection on a bad frame rather than answering it).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Frame(e) => e.error_code(),
            Self::TooLong { .. } | Self::TooMany { .. } => ErrorCode::MessageTooLarge,
            Self::ErrorCodeIsNone => ErrorCode::UnknownServerError,
            Self::RecordsBytesMismatch { .. } => ErrorCode::CorruptMessage,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

/// Verifier limits for a header of `header_bytes`, scaled as [`crate::codec`] scales its own: at
/// most one table per 4 bytes and an apparent size of 16 times the buffer, so offsets shared
/// between fields cannot make decoding copy out much more than arrived.
pub fn verifier_options(header_bytes: usize) -> VerifierOptions {
    VerifierOptions {
        max_depth: VERIFIER_DEPTH_MAX,
        max_tables: header_bytes / 4 + 8,
        max_apparent_size: header_bytes.saturating_mul(16).saturating_add(4096),
        ignore_missing_null_terminator: false,
    }
}

pub(super) fn check_count(
    what: &'static str,
    count: usize,
    max: usize,
) -> Result<(), InternalError> {
    if count > max {
        return Err(InternalError::TooMany { what, count, max });
    }
    Ok(())
}

pub(super) fn check_len(what: &'static str, bytes: usize, max: usize) -> Result<(), InternalError> {
    if bytes > max {
        return Err(InternalError::TooLong { what, bytes, max });
    }
    Ok(())
}

pub(super) fn encode_name<'b>(
    fbb: &mut Fbb<'b>,
    what: &'static str,
    name: &str,
) -> Result<WIPOffset<&'b str>, InternalError> {
    check_len(what, name.len(), NAME_BYTES_MAX)?;
    Ok(fbb.create_string(name))
}

pub(super) fn decode_name(what: &'static str, name: &str) -> Result<String, InternalError> {
    check_len(what, name.len(), NAME_BYTES_MAX)?;
    Ok(name.to_owned())
}

pub(super) fn opt_i32_to_wire(
    field: &'static str,
    value: Option<i32>,
) -> Result<i32, InternalError> {
    match value {
        None => Ok(-1),
        Some(v) if v >= 0 => Ok(v),
        Some(v) => Err(InternalError::OutOfRange {
            field,
            value: v.into(),
        }),
    }
}

pub(super) fn opt_i64_to_wire(
    field: &'static str,
    value: Option<i64>,
) -> Result<i64, InternalError> {
    match value {
        None => Ok(-1),
        Some(v) if v >= 0 => Ok(v),
        Some(v) => Err(InternalError::OutOfRange {
            field,
            value: v.into(),
        }),
    }
}

pub(super) fn u64_to_wire(field: &'static str, value: u64) -> Result<i64, InternalError> {
    i64::try_from(value).map_err(|_| InternalError::OutOfRange {
        field,
        value: value.into(),
    })
}

pub(super) fn opt_u64_to_wire(
    field: &'static str,
    value: Option<u64>,
) -> Result<i64, InternalError> {
    value.map_or(Ok(-1), |v| u64_to_wire(field, v))
}

pub(super) fn opt_i32_from_wire(
    field: &'static str,
    value: i32,
) -> Result<Option<i32>, InternalError> {
    match value {
        -1 => Ok(None),
        v if v >= 0 => Ok(Some(v)),
        v => Err(InternalError::OutOfRange {
            field,
            value: v.into(),
        }),
    }
}

pub(super) fn opt_i64_from_wire(
    field: &'static str,
    value: i64,
) -> Result<Option<i64>, InternalError> {
    match value {
        -1 => Ok(None),
        v if v >= 0 => Ok(Some(v)),
        v => Err(InternalError::OutOfRange {
            field,
            value: v.into(),
        }),
    }
}

pub(super) fn u64_from_wire(field: &'static str, value: i64) -> Result<u64, InternalError> {
    u64::try_from(value).map_err(|_| InternalError::OutOfRange {
        field,
        value: value.into(),
    })
}

pub(super) fn opt_u64_from_wire(
    field: &'static str,
    value: i64,
) -> Result<Option<u64>, InternalError> {
    Ok(opt_i64_from_wire(field, value)?.map(|v| v.unsigned_abs()))
}

/// `value` unless it is below `min`: the same check on both sides of the wire, so a peer never
/// sends what it would refuse. `min` is 0 for ids and epochs, -1 where -1 means unknown.
pub(super) fn at_least<T: Copy + Into<i128>>(
    field: &'static str,
    value: T,
    min: i128,
) -> Result<T, InternalError> {
    let wide: i128 = value.into();
    if wide < min {
        return Err(InternalError::OutOfRange { field, value: wide });
    }
    Ok(value)
}
