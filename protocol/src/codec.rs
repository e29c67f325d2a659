//! Requests and responses to and from native frames.
//!
//! A request frame's header is a flatbuffers `RequestHeader` (api key, version, correlation id,
//! client id, body); a response frame's is a `ResponseHeader`. This module promises that a decoded
//! header has
//! 1. passed the flatbuffers verifier, with limits scaled to the header's size (so a small header
//!    cannot make unpacking allocate gigabytes through shared sub-objects);
//! 2. a body whose union member agrees with `api_key`;
//! 3. every `PayloadSlice` (produce request records, fetch response records) inside the payload.
//!
//! The broker can stop after [`verify_request_header`] and read the flatbuffer in place; clients
//! and tests use [`decode_request`] / [`decode_response`], which also unpack into the owned
//! object-API types (`wire::RequestHeaderT`, ...).

use bytes::Bytes;
use flatbuffers::{FlatBufferBuilder, VerifierOptions};

use crate::frame::{self, EncodedFrame, FrameError, FrameLimits, RawFrame};
use crate::wire::{self, ApiKey, RequestBody, ResponseBody};

/// A decoded request: its header (verified, unpacked) and the payload its slices point into.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub header: wire::RequestHeaderT,
    pub payload: Bytes,
}

/// A decoded response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub header: wire::ResponseHeaderT,
    pub payload: Bytes,
}

/// Verifier limits for a header of `header_bytes`: at most one table per 4 bytes and an apparent
/// size of 16 times the buffer (a real header's apparent size is close to its length; the slack
/// covers shared vtables). Depth 64 is far beyond the deepest schema (5).
fn verifier_options(header_bytes: usize) -> VerifierOptions {
    VerifierOptions {
        max_depth: 64,
        max_tables: header_bytes / 4 + 8,
        max_apparent_size: header_bytes.saturating_mul(16).saturating_add(4096),
        ignore_missing_null_terminator: false,
    }
}

/// The API key a request body belongs to; `None` for `NONE` or a member this build does not know.
pub fn request_body_api_key(body: RequestBody) -> Option<ApiKey> {
    Some(match body {
        RequestBody::ApiVersionsRequest => ApiKey::ApiVersions,
        RequestBody::MetadataRequest => ApiKey::Metadata,
        RequestBody::CreateTopicsRequest => ApiKey::CreateTopics,
        RequestBody::DeleteTopicsRequest => ApiKey::DeleteTopics,
        RequestBody::ProduceRequest => ApiKey::Produce,
        RequestBody::FetchRequest => ApiKey::Fetch,
        RequestBody::ListOffsetsRequest => ApiKey::ListOffsets,
        RequestBody::FindCoordinatorRequest => ApiKey::FindCoordinator,
        RequestBody::JoinGroupRequest => ApiKey::JoinGroup,
        RequestBody::SyncGroupRequest => ApiKey::SyncGroup,
        RequestBody::HeartbeatRequest => ApiKey::Heartbeat,
        RequestBody::LeaveGroupRequest => ApiKey::LeaveGroup,
        RequestBody::OffsetCommitRequest => ApiKey::OffsetCommit,
        RequestBody::OffsetFetchRequest => ApiKey::OffsetFetch,
        RequestBody::DescribeGroupsRequest => ApiKey::DescribeGroups,
        RequestBody::ListGroupsRequest => ApiKey::ListGroups,
        RequestBody::InitProducerIdRequest => ApiKey::InitProducerId,
        RequestBody::DeleteRecordsRequest => ApiKey::DeleteRecords,
        RequestBody::CreatePartitionsRequest => ApiKey::CreatePartitions,
        RequestBody::DeleteGroupsRequest => ApiKey::DeleteGroups,
        RequestBody::ElectLeadersRequest => ApiKey::ElectLeaders,
        RequestBody::IncrementalAlterConfigsRequest => ApiKey::IncrementalAlterConfigs,
        RequestBody::OffsetDeleteRequest => ApiKey::OffsetDelete,
        RequestBody::AddPartitionsToTxnRequest => ApiKey::AddPartitionsToTxn,
        RequestBody::AddOffsetsToTxnRequest => ApiKey::AddOffsetsToTxn,
        RequestBody::EndTxnRequest => ApiKey::EndTxn,
        RequestBody::TxnOffsetCommitRequest => ApiKey::TxnOffsetCommit,
        RequestBody::DescribeTransactionsRequest => ApiKey::DescribeTransactions,
        RequestBody::ListTransactionsRequest => ApiKey::ListTransactions,
        _ => return None,
    })
}

/// The API key a response body belongs to.
pub fn response_body_api_key(body: ResponseBody) -> Option<ApiKey> {
    Some(match body {
        ResponseBody::ApiVersionsResponse => ApiKey::ApiVersions,
        ResponseBody::MetadataResponse => ApiKey::Metadata,
        ResponseBody::CreateTopicsResponse => ApiKey::CreateTopics,
        ResponseBody::DeleteTopicsResponse => ApiKey::DeleteTopics,
        ResponseBody::ProduceResponse => ApiKey::Produce,
        ResponseBody::FetchResponse => ApiKey::Fetch,
        ResponseBody::ListOffsetsResponse => ApiKey::ListOffsets,
        ResponseBody::FindCoordinatorResponse => ApiKey::FindCoordinator,
        ResponseBody::JoinGroupResponse => ApiKey::JoinGroup,
        ResponseBody::SyncGroupResponse => ApiKey::SyncGroup,
        ResponseBody::HeartbeatResponse => ApiKey::Heartbeat,
        ResponseBody::LeaveGroupResponse => ApiKey::LeaveGroup,
        ResponseBody::OffsetCommitResponse => ApiKey::OffsetCommit,
        ResponseBody::OffsetFetchResponse => ApiKey::OffsetFetch,
        ResponseBody::DescribeGroupsResponse => ApiKey::DescribeGroups,
        ResponseBody::ListGroupsResponse => ApiKey::ListGroups,
        ResponseBody::InitProducerIdResponse => ApiKey::InitProducerId,
        ResponseBody::DeleteRecordsResponse => ApiKey::DeleteRecords,
        ResponseBody::CreatePartitionsResponse => ApiKey::CreatePartitions,
        ResponseBody::DeleteGroupsResponse => ApiKey::DeleteGroups,
        ResponseBody::ElectLeadersResponse => ApiKey::ElectLeaders,
        ResponseBody::IncrementalAlterConfigsResponse => ApiKey::IncrementalAlterConfigs,
        ResponseBody::OffsetDeleteResponse => ApiKey::OffsetDelete,
        ResponseBody::AddPartitionsToTxnResponse => ApiKey::AddPartitionsToTxn,
        ResponseBody::AddOffsetsToTxnResponse => ApiKey::AddOffsetsToTxn,
        ResponseBody::EndTxnResponse => ApiKey::EndTxn,
        ResponseBody::TxnOffsetCommitResponse => ApiKey::TxnOffsetCommit,
        ResponseBody::DescribeTransactionsResponse => ApiKey::DescribeTransactions,
        ResponseBody::ListTransactionsResponse => ApiKey::ListTransactions,
        _ => return None,
    })
}

fn slice_in_bounds(
    slice: &wire::PayloadSlice,
    payload_bytes: usize,
    topic: &str,
    partition: i32,
) -> Result<(), FrameError> {
    let end = u64::from(slice.offset()) + u64::from(slice.length());
    if end > payload_bytes as u64 {
        return Err(FrameError::SliceOutOfBounds {
            topic: topic.to_owned(),
            partition,
            offset: slice.offset(),
            length: slice.length(),
            payload_bytes,
        });
    }
    Ok(())
}

/// Verifies a request header in place and checks it against the payload length: the broker's
/// zero-copy entry point.
pub fn verify_request_header<'a>(
    header: &'a [u8],
    payload_bytes: usize,
    limits: &FrameLimits,
) -> Result<wire::RequestHeader<'a>, FrameError> {
    if header.len() > limits.max_header_bytes {
        return Err(FrameError::HeaderTooLarge {
            header_bytes: header.len(),
            max_header_bytes: limits.max_header_bytes,
        });
    }
    let h = wire::root_as_request_header_with_opts(&verifier_options(header.len()), header)?;
    let body = h.body_type();
    let Some(body_key) = request_body_api_key(body) else {
        return Err(FrameError::MissingBody);
    };
    if body_key != h.api_key() {
        return Err(FrameError::BodyMismatch {
            api_key: h.api_key().0,
            body: body.variant_name().unwrap_or("unknown"),
        });
    }
    if let Some(produce) = h.body_as_produce_request() {
        for topic in produce.topics().iter().flatten() {
            for p in topic.partitions().iter().flatten() {
                slice_in_bounds(p.records(), payload_bytes, topic.name(), p.index())?;
            }
        }
    }
    Ok(h)
}

/// Verifies a response header in place and checks it against the payload length.
pub fn verify_response_header<'a>(
    header: &'a [u8],
    payload_bytes: usize,
    limits: &FrameLimits,
) -> Result<wire::ResponseHeader<'a>, FrameError> {
    if header.len() > limits.max_header_bytes {
        return Err(FrameError::HeaderTooLarge {
            header_bytes: header.len(),
            max_header_bytes: limits.max_header_bytes,
        });
    }
    let h = flatbuffers::root_with_opts::<wire::ResponseHeader>(
        &verifier_options(header.len()),
        header,
    )?;
    let body = h.body_type();
    // A response may carry no body when `error_code` reports a frame-level failure.
    if body != ResponseBody::NONE {
        let Some(body_key) = response_body_api_key(body) else {
            return Err(FrameError::MissingBody);
        };
        if body_key != h.api_key() {
            return Err(FrameError::BodyMismatch {
                api_key: h.api_key().0,
                body: body.variant_name().unwrap_or("unknown"),
            });
        }
    }
    if let Some(fetch) = h.body_as_fetch_response() {
        for topic in fetch.responses().iter().flatten() {
            for p in topic.partitions().iter().flatten() {
                if let Some(slice) = p.records() {
                    slice_in_bounds(slice, payload_bytes, topic.topic(), p.partition_index())?;
                }
            }
        }
    }
    Ok(h)
}

/// Decodes a request frame: verify, check, unpack.
pub fn decode_request(frame: &RawFrame, limits: &FrameLimits) -> Result<Request, FrameError> {
    let h = verify_request_header(&frame.header, frame.payload.len(), limits)?;
    Ok(Request {
        header: h.unpack(),
        payload: frame.payload.clone(),
    })
}

/// Decodes a response frame: verify, check, unpack.
pub fn decode_response(frame: &RawFrame, limits: &FrameLimits) -> Result<Response, FrameError> {
    let h = verify_response_header(&frame.header, frame.payload.len(), limits)?;
    Ok(Response {
        header: h.unpack(),
        payload: frame.payload.clone(),
    })
}

/// Encodes a request. The body must not be `NONE`; `api_key` is taken from the body, so the two
/// cannot disagree on frames this crate writes.
pub fn encode_request(
    header: &wire::RequestHeaderT,
    payload: Vec<Bytes>,
    limits: &FrameLimits,
) -> Result<EncodedFrame, FrameError> {
    let Some(api_key) = request_body_api_key(header.body.request_body_type()) else {
        return Err(FrameError::MissingBody);
    };
    let mut fbb = FlatBufferBuilder::with_capacity(256);
    let mut h = header.clone();
    h.api_key = api_key;
    let root = h.pack(&mut fbb);
    fbb.finish_minimal(root);
    frame::assemble(fbb.finished_data(), payload, limits)
}

/// Encodes a response. A `NONE` body is allowed (frame-level errors); otherwise `api_key` is taken
/// from the body.
pub fn encode_response(
    header: &wire::ResponseHeaderT,
    payload: Vec<Bytes>,
    limits: &FrameLimits,
) -> Result<EncodedFrame, FrameError> {
    let mut fbb = FlatBufferBuilder::with_capacity(256);
    let mut h = header.clone();
    if let Some(api_key) = response_body_api_key(h.body.response_body_type()) {
        h.api_key = api_key;
    }
    let root = h.pack(&mut fbb);
    fbb.finish_minimal(root);
    frame::assemble(fbb.finished_data(), payload, limits)
}

/// Builds a request header around a body.
pub fn request(
    correlation_id: i32,
    client_id: Option<&str>,
    body: wire::RequestBodyT,
) -> wire::RequestHeaderT {
    let mut h = wire::RequestHeaderT::default();
    h.api_key = request_body_api_key(body.request_body_type()).unwrap_or_default();
    h.api_version = 0;
    h.correlation_id = correlation_id;
    h.client_id = client_id.map(str::to_owned);
    h.body = body;
    h
}

/// Builds a response header around a body, echoing a request's correlation id and version.
pub fn response(
    correlation_id: i32,
    api_version: i16,
    body: wire::ResponseBodyT,
) -> wire::ResponseHeaderT {
    let mut h = wire::ResponseHeaderT::default();
    h.api_key = response_body_api_key(body.response_body_type()).unwrap_or_default();
    h.api_version = api_version;
    h.correlation_id = correlation_id;
    h.body = body;
    h
}
