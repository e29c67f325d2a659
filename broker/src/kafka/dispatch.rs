//! Kafka API key → handler, and encoding the answer. A request the codec marked unsupported (an
//! API spool does not implement, or a version outside its table) gets UNSUPPORTED_VERSION in that
//! API's shape; ApiVersions answers as v0 (KIP-511) so the client retries with a version we list.

use std::rc::Rc;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use spool_protocol::kafka::codec::{self, KafkaRequest, RequestBody};
use spool_protocol::kafka::unsupported;
use spool_protocol::ErrorCode;

use super::{admin, data, groups, Peer};
use crate::handlers::Outgoing;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: KafkaRequest, peer: &Peer) -> Outgoing {
    let (api_key, version, cid) = (req.api_key, req.version, req.correlation_id);
    let kind = match req.body {
        RequestBody::Decoded(k) => *k,
        RequestBody::Unsupported => return unsupported_version(shard, api_key, version, cid),
    };
    let client_id = req.client_id.unwrap_or_default();
    let body = match kind {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(codec::api_versions_body(ErrorCode::None))
        }
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(admin::metadata(shard, r, version).await)
        }
        RequestKind::Produce(r) => match data::produce(shard, r, version).await {
            Some(r) => ResponseKind::Produce(r),
            None => return Outgoing::Nothing,
        },
        RequestKind::Fetch(r) => return data::fetch(shard, r, version, cid).await,
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(data::list_offsets(shard, r, version).await)
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(admin::create_topics(shard, r, version).await)
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(admin::delete_topics(shard, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(admin::describe_configs(shard, r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(admin::init_producer_id(shard, r).await)
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(shard, r).await)
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(groups::join_group(shard, r, version, client_id, peer).await)
        }
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(groups::sync_group(shard, r).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(shard, r).await),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(groups::leave_group(shard, r, version).await)
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(groups::offset_commit(shard, r).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(groups::offset_fetch(shard, r, version).await)
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(groups::describe_groups(shard, r, version).await)
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list_groups(shard, r).await),
        _ => return unsupported_version(shard, api_key, version, cid),
    };
    encode(api_key, version, cid, &body)
}

fn unsupported_version(shard: &Shard, api_key: ApiKey, version: i16, cid: i32) -> Outgoing {
    crate::metrics::CoreMetrics::add(&shard.metrics.request_errors, 1);
    match codec::unsupported_response(api_key, version, cid) {
        Ok(head) => Outgoing::Frame {
            head,
            chunks: Vec::new(),
        },
        Err(e) => {
            tracing::error!("answering UNSUPPORTED_VERSION: {e}");
            Outgoing::Nothing
        }
    }
}

/// Encodes a response; one the codec refuses (a bug: a field set that the version lacks) is
/// logged and answered with an empty response carrying UNKNOWN_SERVER_ERROR where it can.
pub(super) fn encode(api_key: ApiKey, version: i16, cid: i32, body: &ResponseKind) -> Outgoing {
    let head = codec::encode_response(api_key, version, cid, body).or_else(|e| {
        tracing::error!("encoding a Kafka response: {e}");
        let empty = unsupported::empty_response(api_key, ErrorCode::UnknownServerError as i16);
        codec::encode_response(api_key, version, cid, &empty)
    });
    match head {
        Ok(head) => Outgoing::Frame {
            head,
            chunks: Vec::new(),
        },
        Err(e) => {
            tracing::error!("encoding an empty Kafka response: {e}");
            Outgoing::Nothing
        }
    }
}
