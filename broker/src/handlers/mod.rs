//! The native front's API table ([`NATIVE_APIS`]: each API, its versions, its handler) and the
//! handlers: each turns a decoded request into the broker's internal requests
//! (`crate::requests`, `crate::ops`), routes them to the owning cores through the shard, and
//! builds the response. The Kafka front (`crate::kafka`) translates into the same internal
//! requests.

mod admin;
mod fetch;
pub(crate) mod groups;
mod init_producer_id;
mod internal_topics;
mod list_offsets;
mod metadata;
mod produce;
mod topics;
pub(crate) mod txn;
mod txn_front;

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use spool_protocol::codec::{self, Request};
use spool_protocol::frame::FrameLimits;
use spool_protocol::versions;
use spool_protocol::wire::{self, ApiKey, RequestBodyT, ResponseBodyT};
// Short, for the table's rows.
use spool_protocol::wire::ResponseBodyT as R;
use spool_protocol::ErrorCode;

use crate::apis::api_table;
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

/// One native request as the table's handlers see it.
pub(crate) struct Call<'a> {
    pub shard: &'a Rc<Shard>,
    pub correlation_id: i32,
    pub version: i16,
    pub client_id: Option<String>,
    /// The client's address, kept per group member for DescribeGroups.
    pub peer_host: &'a str,
    /// The frame's payload, where produce batches travel.
    pub payload: &'a Bytes,
    /// The whole frame's size (the payload is a slice of it).
    pub frame_bytes: usize,
}

impl Call<'_> {
    /// The response frame carrying `body` in the response-body `variant`.
    fn reply<T>(&self, variant: impl FnOnce(Box<T>) -> ResponseBodyT, body: T) -> Outgoing {
        self.reply_with(variant, body, Vec::new())
    }

    /// [`Self::reply`], followed by payload `chunks` that the body locates.
    fn reply_with<T>(
        &self,
        variant: impl FnOnce(Box<T>) -> ResponseBodyT,
        body: T,
        chunks: Vec<FetchChunk>,
    ) -> Outgoing {
        let header = codec::response(self.correlation_id, self.version, variant(Box::new(body)));
        frame(header, chunks)
    }

    /// Who sent a JoinGroup, kept per member.
    fn client(&self) -> groups::ClientInfo {
        groups::ClientInfo {
            client_id: self.client_id.clone().unwrap_or_default(),
            client_host: self.peer_host.to_string(),
        }
    }
}

api_table! {
    /// The native port's APIs: each with its versions (the native rule: 0, see
    /// `spool_protocol::versions`) and its handler. ApiVersions answers this list; every other
    /// API or version gets UNSUPPORTED_VERSION. README.md's native table is rendered from it
    /// (`crate::apis`).
    pub const NATIVE_APIS: [ApiKey];
    /// Calls the handler of the row matching `api_key` and `body`.
    async fn route(cx: &Call<'_>, body: RequestBodyT) -> Outgoing;
    ApiVersions 0..=0 ApiVersionsRequest(_) => cx.reply(
        R::ApiVersionsResponse,
        versions::api_versions_response(NATIVE_APIS),
    ),
    Metadata 0..=0 MetadataRequest(r) => {
        cx.reply(R::MetadataResponse, metadata::handle(cx.shard, &r).await)
    },
    CreateTopics 0..=0 CreateTopicsRequest(r) => {
        cx.reply(R::CreateTopicsResponse, topics::create(cx.shard, *r).await)
    },
    DeleteTopics 0..=0 DeleteTopicsRequest(r) => {
        cx.reply(R::DeleteTopicsResponse, topics::delete(cx.shard, *r).await)
    },
    Produce 0..=0 ProduceRequest(r) => match produce::handle(cx.shard, *r, cx.payload, cx.frame_bytes).await {
        Some(p) => cx.reply(R::ProduceResponse, p),
        None => Outgoing::Nothing,
    },
    Fetch 0..=0 FetchRequest(r) => {
        let (f, chunks) = fetch::handle(cx.shard, *r).await;
        cx.reply_with(R::FetchResponse, f, chunks)
    },
    ListOffsets 0..=0 ListOffsetsRequest(r) => {
        cx.reply(R::ListOffsetsResponse, list_offsets::handle(cx.shard, *r).await)
    },
    InitProducerId 0..=0 InitProducerIdRequest(r) => {
        cx.reply(R::InitProducerIdResponse, init_producer_id::handle(cx.shard, *r).await)
    },
    FindCoordinator 0..=0 FindCoordinatorRequest(r) => {
        cx.reply(R::FindCoordinatorResponse, groups::find_coordinator(cx.shard, *r, "native").await)
    },
    JoinGroup 0..=0 JoinGroupRequest(r) => {
        cx.reply(R::JoinGroupResponse, groups::join_group(cx.shard, *r, cx.client()).await)
    },
    SyncGroup 0..=0 SyncGroupRequest(r) => {
        cx.reply(R::SyncGroupResponse, groups::sync_group(cx.shard, *r).await)
    },
    Heartbeat 0..=0 HeartbeatRequest(r) => {
        cx.reply(R::HeartbeatResponse, groups::heartbeat(cx.shard, *r).await)
    },
    LeaveGroup 0..=0 LeaveGroupRequest(r) => {
        cx.reply(R::LeaveGroupResponse, groups::leave_group(cx.shard, *r).await)
    },
    OffsetCommit 0..=0 OffsetCommitRequest(r) => {
        cx.reply(R::OffsetCommitResponse, groups::offset_commit(cx.shard, *r).await)
    },
    OffsetFetch 0..=0 OffsetFetchRequest(r) => {
        cx.reply(R::OffsetFetchResponse, groups::offset_fetch(cx.shard, *r).await)
    },
    DescribeGroups 0..=0 DescribeGroupsRequest(r) => {
        cx.reply(R::DescribeGroupsResponse, groups::describe_groups(cx.shard, *r).await)
    },
    ListGroups 0..=0 ListGroupsRequest(r) => {
        cx.reply(R::ListGroupsResponse, groups::list_groups(cx.shard, *r).await)
    },
    DeleteRecords 0..=0 DeleteRecordsRequest(r) => {
        cx.reply(R::DeleteRecordsResponse, admin::delete_records(cx.shard, *r).await)
    },
    CreatePartitions 0..=0 CreatePartitionsRequest(r) => {
        cx.reply(R::CreatePartitionsResponse, admin::create_partitions(cx.shard, *r).await)
    },
    DeleteGroups 0..=0 DeleteGroupsRequest(r) => {
        cx.reply(R::DeleteGroupsResponse, admin::delete_groups(cx.shard, *r).await)
    },
    ElectLeaders 0..=0 ElectLeadersRequest(r) => {
        cx.reply(R::ElectLeadersResponse, admin::elect_leaders(cx.shard, *r).await)
    },
    IncrementalAlterConfigs 0..=0 IncrementalAlterConfigsRequest(r) => cx.reply(
        R::IncrementalAlterConfigsResponse,
        admin::incremental_alter_configs(cx.shard, *r).await,
    ),
    OffsetDelete 0..=0 OffsetDeleteRequest(r) => {
        cx.reply(R::OffsetDeleteResponse, admin::offset_delete(cx.shard, *r).await)
    },
    AddPartitionsToTxn 0..=0 AddPartitionsToTxnRequest(r) => {
        cx.reply(R::AddPartitionsToTxnResponse, txn_front::add_partitions(cx.shard, *r).await)
    },
    AddOffsetsToTxn 0..=0 AddOffsetsToTxnRequest(r) => {
        cx.reply(R::AddOffsetsToTxnResponse, txn_front::add_offsets(cx.shard, *r).await)
    },
    EndTxn 0..=0 EndTxnRequest(r) => {
        cx.reply(R::EndTxnResponse, txn_front::end_txn(cx.shard, *r).await)
    },
    TxnOffsetCommit 0..=0 TxnOffsetCommitRequest(r) => {
        cx.reply(R::TxnOffsetCommitResponse, txn_front::txn_offset_commit(cx.shard, *r).await)
    },
    DescribeTransactions 0..=0 DescribeTransactionsRequest(r) => {
        cx.reply(R::DescribeTransactionsResponse, txn_front::describe(cx.shard, *r).await)
    },
    ListTransactions 0..=0 ListTransactionsRequest(r) => {
        cx.reply(R::ListTransactionsResponse, txn_front::list(cx.shard, *r).await)
    },
}

/// Answers one request: UNSUPPORTED_VERSION unless [`NATIVE_APIS`] lists its API and version,
/// otherwise the row's handler. `peer_host` is the client's address.
pub async fn handle(
    shard: &Rc<Shard>,
    request: Request,
    frame_bytes: usize,
    peer_host: &str,
) -> Outgoing {
    let h = request.header;
    let (cid, version, api_key) = (h.correlation_id, h.api_version, h.api_key);
    if !versions::is_supported(NATIVE_APIS, api_key, version) {
        crate::front_rules::record_refused(shard);
        return error_frame(cid, version, api_key, ErrorCode::UnsupportedVersion);
    }
    let cx = Call {
        shard,
        correlation_id: cid,
        version,
        client_id: h.client_id,
        peer_host,
        payload: &request.payload,
        frame_bytes,
    };
    match route(&cx, api_key, h.body).await {
        Some(out) => out,
        // The codec pairs every key with its own body, so only a row's mistake ends here.
        None => error_frame(cid, version, api_key, ErrorCode::UnsupportedVersion),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_native_api_is_listed_once_at_the_native_version() {
        for a in NATIVE_APIS {
            let rows = NATIVE_APIS
                .iter()
                .filter(|b| b.api_key == a.api_key)
                .count();
            assert_eq!(rows, 1, "{a:?}");
            assert_eq!((a.min_version, a.max_version), (0, 0), "{a:?}");
        }
        // Today the native port implements every API its schema defines.
        assert_eq!(NATIVE_APIS.len(), ApiKey::ENUM_VALUES.len());
        assert!(!versions::is_supported(NATIVE_APIS, ApiKey::Produce, 1));
    }

    #[test]
    fn api_versions_answers_the_table() {
        let keys = versions::api_versions_response(NATIVE_APIS)
            .api_keys
            .unwrap_or_default();
        let listed: Vec<ApiKey> = keys.iter().map(|k| k.api_key).collect();
        let table: Vec<ApiKey> = NATIVE_APIS.iter().map(|a| a.api_key).collect();
        assert_eq!(listed, table);
    }
}
