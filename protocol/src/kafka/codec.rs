//! Kafka frames and headers: the size prefix (checked before anything is allocated), the request
//! header (v1 or v2, as the `kafka-protocol` crate knows per API and version), decoding the
//! request body with the crate (or by hand for the legacy versions, [`super::legacy`]), and
//! encoding a response with its header (v0 or v1).
//!
//! What it promises:
//! - a frame's size is judged from its 4-byte prefix alone against `max_frame_bytes`;
//! - every malformed input is a typed [`KafkaCodecError`], never a panic;
//! - a request for a version the server's API table (passed in: see [`super::versions`]) does
//!   not list decodes to [`RequestBody::Unsupported`] whenever there is a shape to answer in:
//!   always for ApiVersions (KIP-511: the answer is a v0 response, whatever version was asked),
//!   for other APIs when the crate knows that version or [`super::legacy`] lists it. The body is
//!   decoded too where it can be ([`Refused`]), so [`unsupported_response`] can name each item
//!   with UNSUPPORTED_VERSION ([`super::echo`]) for responses without a top-level error code;
//! - the legacy versions served by hand (OffsetCommit v0–1, OffsetFetch v0, DescribeConfigs v0)
//!   decode into the crate's request structs and their responses encode from the crate's
//!   response structs, so handlers never see the difference;
//! - ApiVersions responses carry response header v0 at every version (no tagged-field byte even
//!   for the flexible v3): librdkafka reads the v3 body right after the correlation id, and one
//!   extra byte there is the "read underflow" an older Kafka-compatible broker hit.
//!
//! An API key the crate does not know, a version of another API neither the crate nor
//! [`super::legacy`] knows (above the crate's range: its header may not even parse), a header
//! that does not parse, or the body of a refused legacy version that does not decode has no
//! response shape: [`decode_request`] returns an error and the connection closes after logging
//! it (Kafka does the same). Clients only send what ApiVersions advertised, so this is the
//! defensive path.
//!
//! Known limit: the crate pre-allocates each array by its claimed element count, so the count is
//! not bounded by the frame's size: a 30-byte frame can ask for hundreds of gigabytes before
//! decoding fails. The broker's global allocator (`spool_broker::alloc`) turns such requests into
//! address-space reservations so the decode fails cleanly; other users of this module need the
//! same guard (or strict frame limits) until the crate bounds counts by the bytes remaining. (The
//! hand decoders of [`super::legacy_requests`] bound every count by the bytes left.)

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

use super::legacy::{self, Legacy};
use super::legacy_requests::{self, Refusal};
use super::versions::{self, KafkaApiRange};
use super::{echo, legacy_responses, unsupported};
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
    Unsupported(Refused),
}

/// What an unsupported request's answer can be built from.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// The body was not decoded (ApiVersions, or a body the crate cannot read): the answer is the
    /// API's empty response with its top-level error code, where it has one.
    Whole,
    /// The body, decoded by the crate (or by hand into the crate's struct): the answer echoes
    /// its items.
    Request(Box<RequestKind>),
    /// A refused legacy version's items, decoded by hand.
    Legacy(Refusal),
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
            body: RequestBody::Unsupported(Refused::Whole),
        });
    }
    let old = legacy::legacy(api_key, version);
    let known = api_key.valid_versions();
    if old.is_none() && (version < known.min || version > known.max) {
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
    // Every legacy version predates flexible versions: request header v1.
    let header_version = match old {
        None => api_key.request_header_version(version),
        Some(Legacy::SameAs(v)) => api_key.request_header_version(v),
        Some(_) => 1,
    };
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| malformed(format!("header: {e}")))?;
    let client_id = header.client_id.map(|c| c.as_str().to_owned());
    let body = match old {
        None if supported => {
            let kind = RequestKind::decode(api_key, &mut frame, version)
                .map_err(|e| malformed(format!("body: {e}")))?;
            RequestBody::Decoded(Box::new(kind))
        }
        // Only to name its items in the refusal: a body that does not decode is still answered.
        None => RequestBody::Unsupported(refused_by_crate(api_key, frame, version)),
        Some(Legacy::SameAs(v)) => RequestBody::Unsupported(refused_by_crate(api_key, frame, v)),
        Some(Legacy::Served) => {
            let kind = legacy_requests::decode_served(api_key, version, frame)
                .map_err(|e| malformed(format!("body: {e}")))?;
            if supported {
                RequestBody::Decoded(Box::new(kind))
            } else {
                RequestBody::Unsupported(Refused::Request(Box::new(kind)))
            }
        }
        // Produce's acks decide whether there is an answer at all: a body that does not decode
        // has none.
        Some(Legacy::Refused) => {
            let refusal = legacy_requests::decode_refused(api_key, version, frame)
                .map_err(|e| malformed(format!("body: {e}")))?;
            RequestBody::Unsupported(Refused::Legacy(refusal))
        }
    };
    Ok(KafkaRequest {
        api_key,
        version,
        correlation_id,
        client_id,
        body,
    })
}

/// An unsupported request's body decoded by the crate at `version`, or [`Refused::Whole`].
fn refused_by_crate(api_key: ApiKey, mut body: Bytes, version: i16) -> Refused {
    match RequestKind::decode(api_key, &mut body, version) {
        Ok(kind) => Refused::Request(Box::new(kind)),
        Err(_) => Refused::Whole,
    }
}

/// The response header version for `api_key` at `version` (ApiVersions: always 0, KIP-511).
pub fn response_header_version(api_key: ApiKey, version: i16) -> i16 {
    match legacy::legacy(api_key, version) {
        _ if api_key == ApiKey::ApiVersions => 0,
        None => api_key.response_header_version(version),
        Some(Legacy::SameAs(v)) => api_key.response_header_version(v),
        // Every legacy version predates flexible versions.
        Some(_) => 0,
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
    frame(
        api_key,
        version,
        correlation_id,
        |out| match legacy::legacy(api_key, version) {
            None => body.encode(out, version).map_err(|e| e.to_string()),
            Some(Legacy::SameAs(v)) => body.encode(out, v).map_err(|e| e.to_string()),
            Some(_) => legacy_responses::encode_served(api_key, version, body, out),
        },
    )
}

/// A frame of `api_key`'s response header and the body `put_body` appends.
fn frame(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    put_body: impl FnOnce(&mut BytesMut) -> Result<(), String>,
) -> Result<Bytes, KafkaCodecError> {
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    put_response_header(&mut out, api_key, version, correlation_id)?;
    put_body(&mut out).map_err(|reason| KafkaCodecError::Encode {
        api_key,
        version,
        reason,
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

/// Decodes a response body of `api_key` at `version` as a client would, legacy versions
/// included (tests and tools; the broker never reads responses): `ResponseKind::decode` with the
/// versions the crate no longer carries. What follows the body stays in `body`.
pub fn decode_response_body(
    api_key: ApiKey,
    version: i16,
    body: &mut Bytes,
) -> Result<ResponseKind, KafkaCodecError> {
    let bad = |reason: String| KafkaCodecError::Malformed {
        api_key,
        version,
        correlation_id: -1,
        reason,
    };
    match legacy::legacy(api_key, version) {
        None => ResponseKind::decode(api_key, body, version).map_err(|e| bad(e.to_string())),
        Some(Legacy::SameAs(v)) => {
            ResponseKind::decode(api_key, body, v).map_err(|e| bad(e.to_string()))
        }
        Some(_) => legacy_responses::decode_served(api_key, version, body).map_err(bad),
    }
}

/// The ApiVersions body of a server whose API table is `table`, with `error_code`.
pub fn api_versions_body(error_code: ErrorCode, table: &[KafkaApiRange]) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code as i16)
        .with_api_keys(versions::api_version_list(table))
}

/// The answer to a [`RequestBody::Unsupported`] request: UNSUPPORTED_VERSION in the shape of the
/// API asked for, naming each item `refused` names ([`super::echo`]); `None` where the client
/// expects no answer (an acks=0 Produce). ApiVersions answers as v0 with `table`, the server's
/// list (KIP-511).
pub fn unsupported_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    refused: &Refused,
    table: &[KafkaApiRange],
) -> Result<Option<Bytes>, KafkaCodecError> {
    let code = ErrorCode::UnsupportedVersion as i16;
    if api_key == ApiKey::ApiVersions {
        let body =
            ResponseKind::ApiVersions(api_versions_body(ErrorCode::UnsupportedVersion, table));
        return encode_response(api_key, 0, correlation_id, &body).map(Some);
    }
    let request = match refused {
        Refused::Legacy(r) if !r.answer => return Ok(None),
        Refused::Legacy(r) => {
            return frame(api_key, version, correlation_id, |out| {
                legacy_responses::encode_refusal(api_key, version, &r.items, code, out)
            })
            .map(Some);
        }
        Refused::Request(kind) => Some(&**kind),
        Refused::Whole => None,
    };
    if let Some(RequestKind::Produce(p)) = request {
        if p.acks == 0 {
            return Ok(None);
        }
    }
    let items = request.and_then(|r| echo::echo(r, code));
    let mut body = items
        .clone()
        .unwrap_or_else(|| unsupported::empty_response(api_key, 0));
    // Some versions lack the top-level error field (the crate refuses to encode a set field that
    // a version does not carry): those get the items alone, or the empty response alone.
    unsupported::set_error_code(&mut body, code);
    encode_response(api_key, version, correlation_id, &body)
        .or_else(|_| {
            let body = items.unwrap_or_else(|| unsupported::empty_response(api_key, 0));
            encode_response(api_key, version, correlation_id, &body)
        })
        .or_else(|_| {
            let body = unsupported::empty_response(api_key, 0);
            encode_response(api_key, version, correlation_id, &body)
        })
        .map(Some)
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
