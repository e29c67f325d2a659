//! Request handlers of the native front: each turns a decoded request into the broker's internal
//! requests (`crate::requests`), routes them to the owning cores through the shard, and builds the
//! response. The Kafka front (a later issue) translates into the same internal requests.

/// Builds a generated (non-exhaustive) flatbuffers object-API struct from its default.
macro_rules! build {
    ($t:ty { $($f:ident : $v:expr),* $(,)? }) => {{
        let mut value = <$t>::default();
        $(value.$f = $v;)*
        value
    }};
}

mod fetch;
pub(crate) mod groups;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod produce;
mod topics;

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use spool_protocol::codec::{self, Request};
use spool_protocol::frame::FrameLimits;
use spool_protocol::versions;
use spool_protocol::wire::{self, ApiKey, RequestBodyT, ResponseBodyT};
use spool_protocol::ErrorCode;

use crate::requests::FetchChunk;
use crate::shard::Shard;

/// What the connection writes back for one request.
pub enum Outgoing {
    /// acks=0 produce: no response at all.
    Nothing,
    /// The encoded head (prefix + header) and the payload chunks it locates.
    Frame {
        head: Bytes,
        chunks: Vec<FetchChunk>,
    },
}

/// The APIs this broker answers today; the others get UNSUPPORTED_VERSION.
pub const IMPLEMENTED: [ApiKey; 17] = [
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::InitProducerId,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
];

/// `peer_host` is the client's address, kept per group member for DescribeGroups.
pub async fn handle(shard: &Rc<Shard>, request: Request, peer_host: &str) -> Outgoing {
    let h = request.header;
    let (cid, version) = (h.correlation_id, h.api_version);
    if !IMPLEMENTED.contains(&h.api_key) || !versions::is_supported(h.api_key, version) {
        crate::metrics::CoreMetrics::add(&shard.metrics.request_errors, 1);
        return error_frame(cid, version, h.api_key, ErrorCode::UnsupportedVersion);
    }
    let (body, chunks) = match h.body {
        RequestBodyT::ApiVersionsRequest(_) => {
            let mut r = versions::api_versions_response();
            if let Some(keys) = r.api_keys.as_mut() {
                keys.retain(|k| IMPLEMENTED.contains(&k.api_key));
            }
            (ResponseBodyT::ApiVersionsResponse(Box::new(r)), Vec::new())
        }
        RequestBodyT::MetadataRequest(m) => (
            ResponseBodyT::MetadataResponse(Box::new(metadata::handle(shard, &m))),
            Vec::new(),
        ),
        RequestBodyT::CreateTopicsRequest(c) => (
            ResponseBodyT::CreateTopicsResponse(Box::new(topics::create(shard, *c).await)),
            Vec::new(),
        ),
        RequestBodyT::DeleteTopicsRequest(d) => (
            ResponseBodyT::DeleteTopicsResponse(Box::new(topics::delete(shard, *d).await)),
            Vec::new(),
        ),
        RequestBodyT::ProduceRequest(p) => match produce::handle(shard, *p, &request.payload).await
        {
            Some(r) => (ResponseBodyT::ProduceResponse(Box::new(r)), Vec::new()),
            None => return Outgoing::Nothing,
        },
        RequestBodyT::FetchRequest(f) => {
            let (r, chunks) = fetch::handle(shard, *f).await;
            (ResponseBodyT::FetchResponse(Box::new(r)), chunks)
        }
        RequestBodyT::ListOffsetsRequest(l) => (
            ResponseBodyT::ListOffsetsResponse(Box::new(list_offsets::handle(shard, *l).await)),
            Vec::new(),
        ),
        RequestBodyT::InitProducerIdRequest(r) => (
            ResponseBodyT::InitProducerIdResponse(Box::new(
                init_producer_id::handle(shard, *r).await,
            )),
            Vec::new(),
        ),
        RequestBodyT::FindCoordinatorRequest(r) => (
            ResponseBodyT::FindCoordinatorResponse(Box::new(
                groups::find_coordinator(shard, *r).await,
            )),
            Vec::new(),
        ),
        RequestBodyT::JoinGroupRequest(r) => {
            let client = groups::ClientInfo {
                client_id: h.client_id.clone().unwrap_or_default(),
                client_host: peer_host.to_string(),
            };
            (
                ResponseBodyT::JoinGroupResponse(Box::new(
                    groups::join_group(shard, *r, client).await,
                )),
                Vec::new(),
            )
        }
        RequestBodyT::SyncGroupRequest(r) => (
            ResponseBodyT::SyncGroupResponse(Box::new(groups::sync_group(shard, *r).await)),
            Vec::new(),
        ),
        RequestBodyT::HeartbeatRequest(r) => (
            ResponseBodyT::HeartbeatResponse(Box::new(groups::heartbeat(shard, *r).await)),
            Vec::new(),
        ),
        RequestBodyT::LeaveGroupRequest(r) => (
            ResponseBodyT::LeaveGroupResponse(Box::new(groups::leave_group(shard, *r).await)),
            Vec::new(),
        ),
        RequestBodyT::OffsetCommitRequest(r) => (
            ResponseBodyT::OffsetCommitResponse(Box::new(groups::offset_commit(shard, *r).await)),
            Vec::new(),
        ),
        RequestBodyT::OffsetFetchRequest(r) => (
            ResponseBodyT::OffsetFetchResponse(Box::new(groups::offset_fetch(shard, *r).await)),
            Vec::new(),
        ),
        RequestBodyT::DescribeGroupsRequest(r) => (
            ResponseBodyT::DescribeGroupsResponse(Box::new(
                groups::describe_groups(shard, *r).await,
            )),
            Vec::new(),
        ),
        RequestBodyT::ListGroupsRequest(r) => (
            ResponseBodyT::ListGroupsResponse(Box::new(groups::list_groups(shard, *r).await)),
            Vec::new(),
        ),
        _ => return error_frame(cid, version, h.api_key, ErrorCode::UnsupportedVersion),
    };
    frame(codec::response(cid, version, body), chunks)
}

fn error_frame(correlation_id: i32, version: i16, api_key: ApiKey, code: ErrorCode) -> Outgoing {
    let mut header = codec::response(correlation_id, version, ResponseBodyT::NONE);
    header.api_key = api_key;
    header.error_code = wire::ErrorCode::from(code);
    frame(header, Vec::new())
}

/// Encodes the header and fixes the length prefix to cover the payload chunks too (which may be
/// file ranges the codec never sees).
fn frame(header: wire::ResponseHeaderT, chunks: Vec<FetchChunk>) -> Outgoing {
    let limits = FrameLimits {
        max_frame_bytes: u32::MAX as usize,
        max_header_bytes: u32::MAX as usize,
    };
    let encoded = match codec::encode_response(&header, Vec::new(), &limits) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("encoding a response header: {e}");
            return Outgoing::Nothing;
        }
    };
    let payload_bytes: u64 = chunks.iter().map(FetchChunk::len).sum();
    let mut head = BytesMut::from(&encoded.head[..]);
    let length = (head.len() as u64 - 4 + payload_bytes).min(u64::from(u32::MAX)) as u32;
    head[..4].copy_from_slice(&length.to_be_bytes());
    Outgoing::Frame {
        head: head.freeze(),
        chunks,
    }
}
