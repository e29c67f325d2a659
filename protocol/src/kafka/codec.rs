//! Kafka frames and headers: the size prefix (checked before anything is allocated), the request
//! header (v1 or v2, as the `kafka-protocol` crate knows per API and version), decoding the
//! request body with the crate, and encoding a response with its header (v0 or v1).
//!
//! What it promises:
//! - a frame's size is judged from its 4-byte prefix alone against `max_frame_bytes`;
//! - every malformed input is a typed [`KafkaCodecError`], never a panic;
//! - a request for a version the server's API table (passed in: see [`super::versions`]) does
//!   not list decodes to [`RequestBody::Unsupported`] whenever there is a shape to answer in: always for ApiVersions (KIP-511: the answer is a v0
//!   response, whatever version was asked), and for other APIs when the crate knows that version;
//! - ApiVersions responses carry response header v0 at every version (no tagged-field byte even
//!   for the flexible v3): librdkafka reads the v3 body right after the correlation id, and one
//!   extra byte there is the "read underflow" an older Kafka-compatible broker hit.
//!
//! An API key the crate does not know, or a version of another API outside what the crate can
//! decode, has no response shape: [`decode_request`] returns an error and the connection closes
//! after logging it (Kafka does the same). Clients only send what ApiVersions advertised, so this
//! is the defensive path.
//!
//! Known limit: the crate pre-allocates each array by its claimed element count, so the count is
//! not bounded by the frame's size: a 30-byte frame can ask for hundreds of gigabytes before
//! decoding fails. The broker's global allocator (`spool_broker::alloc`) turns such requests into
//! address-space reservations so the decode fails cleanly; other users of this module need the
//! same guard (or strict frame limits) until the crate bounds counts by the bytes remaining.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

use super::versions::{self, KafkaApiRange};
use crate::ErrorCode;

/// The `i32 length` prefix of every Kafka frame.
pub const LENGTH_PREFIX_BYTES: usize = 4;
/// api key (i16), api version (i16), correlation id (i32): the fixed start of every request.
pub const REQUEST_FIXED_BYTES: usize = 8;

#[derive(Debug, Error)]
pub enum KafkaCodecError {
    #[error("frame of {frame_bytes} bytes exceeds the limit of {max_frame_bytes}")]
    FrameTooLarge {
        frame_bytes: u64,
        max_frame_bytes: usize,
    },
    #[error("frame length {length} is shorter than a request header")]
    FrameTooShort { length: i64 },
    #[error("unknown api key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error(
        "{api_key:?} v{version} is outside what the codec knows (correlation id {correlation_id})"
    )]
    VersionOutsideCodec {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    #[error(
        "malformed {api_key:?} v{version} request (correlation id {correlation_id}): {reason}"
    )]
    Malformed {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        reason: String,
    },
    #[error("cannot encode {api_key:?} v{version} response: {reason}")]
    Encode {
        api_key: ApiKey,
        version: i16,
        reason: String,
    },
}

impl KafkaCodecError {
    /// The protocol error this failure stands for (logged; the connection closes).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::FrameTooLarge { .. } => ErrorCode::MessageTooLarge,
            Self::VersionOutsideCodec { .. } => ErrorCode::UnsupportedVersion,
            Self::Encode { .. } => ErrorCode::UnknownServerError,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

/// Bytes that follow the prefix, checked against `max_frame_bytes` (a whole frame, prefix
/// included) before the caller allocates anything.
pub fn frame_bytes_from_prefix(
    prefix: [u8; LENGTH_PREFIX_BYTES],
    max_frame_bytes: usize,
) -> Result<usize, KafkaCodecError> {
    let length = i32::from_be_bytes(prefix);
    if length < REQUEST_FIXED_BYTES as i32 {
        return Err(KafkaCodecError::FrameTooShort {
            length: i64::from(length),
        });
    }
    let frame_bytes = length as u64 + LENGTH_PREFIX_BYTES as u64;
    if frame_bytes > max_frame_bytes as u64 {
        return Err(KafkaCodecError::FrameTooLarge {
            frame_bytes,
            max_frame_bytes,
        });
    }
    Ok(length as usize)
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaRequest {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub body: RequestBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RequestBody {
    Decoded(Box<RequestKind>),
    /// An API or version spool does not implement; answer with [`unsupported_response`].
    Unsupported,
}

/// Decodes one request frame (the bytes after the length prefix). `table` is what the server
/// implements: a body is decoded only for a version it lists.
pub fn decode_request(
    mut frame: Bytes,
    table: &[KafkaApiRange],
) -> Result<KafkaRequest, KafkaCodecError> {
    if frame.len() < REQUEST_FIXED_BYTES {
        return Err(KafkaCodecError::FrameTooShort {
            length: frame.len() as i64,
        });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api_key = ApiKey::try_from(key).map_err(|_| KafkaCodecError::UnknownApiKey {
        api_key: key,
        correlation_id,
    })?;
    let supported = versions::is_supported(table, api_key, version);
    if !supported && api_key == ApiKey::ApiVersions {
        // KIP-511: the header of a newer ApiVersions may not parse; the answer needs only the
        // correlation id.
        return Ok(KafkaRequest {
            api_key,
            version,
            correlation_id,
            client_id: None,
            body: RequestBody::Unsupported,
        });
    }
    let known = api_key.valid_versions();
    if version < known.min || version > known.max {
        return Err(KafkaCodecError::VersionOutsideCodec {
            api_key,
            version,
            correlation_id,
        });
    }
    let malformed = |reason: String| KafkaCodecError::Malformed {
        api_key,
        version,
        correlation_id,
        reason,
    };
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(version))
        .map_err(|e| malformed(format!("header: {e}")))?;
    let client_id = header.client_id.map(|c| c.as_str().to_owned());
    let body = if supported {
        let kind = RequestKind::decode(api_key, &mut frame, version)
            .map_err(|e| malformed(format!("body: {e}")))?;
        RequestBody::Decoded(Box::new(kind))
    } else {
        RequestBody::Unsupported
    };
    Ok(KafkaRequest {
        api_key,
        version,
        correlation_id,
        client_id,
        body,
    })
}

/// The response header version for `api_key` at `version` (ApiVersions: always 0, KIP-511).
pub fn response_header_version(api_key: ApiKey, version: i16) -> i16 {
    if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(version)
    }
}

/// Appends the response header to `out`.
pub fn put_response_header(
    out: &mut BytesMut,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<(), KafkaCodecError> {
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(out, response_header_version(api_key, version))
        .map_err(|e| KafkaCodecError::Encode {
            api_key,
            version,
            reason: format!("header: {e}"),
        })
}

/// A whole response frame: length prefix, header, body.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, KafkaCodecError> {
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    put_response_header(&mut out, api_key, version, correlation_id)?;
    body.encode(&mut out, version)
        .map_err(|e| KafkaCodecError::Encode {
            api_key,
            version,
            reason: e.to_string(),
        })?;
    let length = out.len() - LENGTH_PREFIX_BYTES;
    let length = i32::try_from(length).map_err(|_| KafkaCodecError::Encode {
        api_key,
        version,
        reason: format!("response of {length} bytes"),
    })?;
    out[..LENGTH_PREFIX_BYTES].copy_from_slice(&length.to_be_bytes());
    Ok(out.freeze())
}

/// The ApiVersions body of a server whose API table is `table`, with `error_code`.
pub fn api_versions_body(error_code: ErrorCode, table: &[KafkaApiRange]) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code as i16)
        .with_api_keys(versions::api_version_list(table))
}

/// The answer to a [`RequestBody::Unsupported`] request: UNSUPPORTED_VERSION in the shape of the
/// API asked for. ApiVersions answers as v0 with `table`, the server's list (KIP-511).
pub fn unsupported_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    table: &[KafkaApiRange],
) -> Result<Bytes, KafkaCodecError> {
    let code = ErrorCode::UnsupportedVersion as i16;
    if api_key == ApiKey::ApiVersions {
        let body =
            ResponseKind::ApiVersions(api_versions_body(ErrorCode::UnsupportedVersion, table));
        return encode_response(api_key, 0, correlation_id, &body);
    }
    // Some versions lack the top-level error field (the crate refuses to encode a set field that
    // a version does not carry): those get the empty response alone.
    let body = super::unsupported::empty_response(api_key, code);
    encode_response(api_key, version, correlation_id, &body).or_else(|_| {
        let body = super::unsupported::empty_response(api_key, 0);
        encode_response(api_key, version, correlation_id, &body)
    })
}

/// Splits a response frame into its correlation id and body (tests and clients): checks the
/// length prefix and skips a header of `header_version`.
pub fn split_response(
    mut frame: Bytes,
    header_version: i16,
) -> Result<(i32, Bytes), KafkaCodecError> {
    let bad = |reason: String| KafkaCodecError::Malformed {
        api_key: ApiKey::ApiVersions,
        version: 0,
        correlation_id: -1,
        reason,
    };
    if frame.len() < LENGTH_PREFIX_BYTES {
        return Err(bad("no length prefix".into()));
    }
    let length = frame.get_i32();
    if length < 0 || length as usize != frame.len() {
        return Err(bad(format!(
            "length prefix {length}, {} bytes follow",
            frame.len()
        )));
    }
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| bad(format!("header: {e}")))?;
    Ok((header.correlation_id, frame))
}
