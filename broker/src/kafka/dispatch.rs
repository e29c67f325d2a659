//! The Kafka front's API table ([`KAFKA_APIS`]: each API, its versions, its handler) and the
//! answer to everything else. A request the codec marked unsupported (an API the table does not
//! list, or a version outside its range: the codec hands bodies to handlers only for what the
//! table lists) gets UNSUPPORTED_VERSION in that API's shape, each item it named echoed with
//! the error where the shape has no top-level error code (`spool_protocol::kafka::echo`), and
//! nothing for an acks=0 Produce; ApiVersions answers as v0 (KIP-511) so the client retries with
//! a version we list.

use std::rc::Rc;

use bytes::Bytes;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use spool_protocol::kafka::codec::{self, KafkaCodecError, KafkaRequest, Refused, RequestBody};
use spool_protocol::kafka::unsupported;
use spool_protocol::ErrorCode;

use super::delete_records;
use super::{admin, cluster, data, groups, topic_admin, txn, Peer};
use crate::apis::api_table;
use crate::handlers::Outgoing;
use crate::shard::Shard;

/// One Kafka request as the table's handlers see it.
pub(super) struct Call<'a> {
    pub shard: &'a Rc<Shard>,
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: String,
    pub peer: &'a Peer,
    /// The size of the request's frame (produce batches are slices of it).
    pub frame_bytes: usize,
}

impl Call<'_> {
    /// The response frame carrying `body`, encoded at the request's version.
    fn reply(&self, body: impl Into<ResponseKind>) -> Outgoing {
        encode(
            self.api_key,
            self.version,
            self.correlation_id,
            &body.into(),
        )
    }
}

api_table! {
    /// The Kafka port's APIs, in api-key order: each with its versions and its handler. The codec
    /// decodes only what this lists, ApiVersions answers it, README.md's compatibility table is
    /// rendered from it (`crate::apis`).
    ///
    /// Every range lies inside what the codec carries (`spool_protocol::kafka::versions::
    /// codec_range`, checked by a test): the `kafka-protocol` crate's versions (Kafka 4.0's) and
    /// the older ones Kafka 3.9 still serves that the codec decodes by hand
    /// (`spool_protocol::kafka::legacy`: OffsetCommit 0–1, sarama's default, OffsetFetch 0 and
    /// DescribeConfigs 0). The other versions Kafka 3.9 serves below the crate's range
    /// (Produce 0–2, Fetch 0–3, ListOffsets 0, CreateTopics 0–1, DeleteTopics 0,
    /// OffsetForLeaderEpoch 0–1) are refused, each item named with UNSUPPORTED_VERSION.
    ///
    /// The ranges are chosen so that librdkafka 2.x, kafka-python 2.x, sarama and the Java
    /// clients 3.x negotiate a version spool handles: clients take the highest version both
    /// sides list. Caps below Kafka's own maxima, and why:
    /// - Fetch ≤ 11: v12+ are flexible (tagged fields around records) and v13+ name topics by
    ///   id; the Fetch response is framed by hand so records can be spliced from segment files
    ///   (`spool_protocol::kafka::fetch`), and 4–11 share one layout.
    /// - Produce ≤ 9, ListOffsets ≤ 7, Metadata ≤ 9, DeleteTopics ≤ 5: later versions identify
    ///   topics by id, which spool's metadata does not assign yet.
    /// - FindCoordinator ≤ 3 and OffsetFetch ≤ 7: later versions batch several keys or groups
    ///   per request; clients fall back to one request per key.
    /// - OffsetCommit ≤ 8: v9+ belong to the KIP-848 consumer protocol.
    /// - AddPartitionsToTxn ≤ 3: v4+ batch transactions for KIP-890's broker-side
    ///   verification; clients send v0–3.
    /// - ApiVersions ≤ 3: a client asking for more gets the KIP-511 fallback (a v0 response with
    ///   UNSUPPORTED_VERSION and this table) and retries with v3.
    pub const KAFKA_APIS: [ApiKey];
    /// Calls the handler of the row matching `api_key` and `body`.
    async fn route(cx: &Call<'_>, kind: RequestKind) -> Outgoing;
    Produce 3..=9 Produce(r) => match data::produce(cx.shard, r, cx.version, cx.frame_bytes).await {
        Some(p) => cx.reply(p),
        None => Outgoing::Nothing,
    },
    Fetch 4..=11 Fetch(r) => data::fetch(cx.shard, r, cx.version, cx.correlation_id).await,
    ListOffsets 1..=7 ListOffsets(r) => {
        cx.reply(data::list_offsets(cx.shard, r, cx.version).await)
    },
    Metadata 0..=9 Metadata(r) => cx.reply(admin::metadata(cx.shard, r, cx.version).await),
    OffsetCommit 0..=8 OffsetCommit(r) => cx.reply(groups::offset_commit(cx.shard, r).await),
    OffsetFetch 0..=7 OffsetFetch(r) => {
        cx.reply(groups::offset_fetch(cx.shard, r, cx.version).await)
    },
    FindCoordinator 0..=3 FindCoordinator(r) => {
        cx.reply(groups::find_coordinator(cx.shard, r).await)
    },
    JoinGroup 0..=9 JoinGroup(r) => cx.reply(
        groups::join_group(cx.shard, r, cx.version, cx.client_id.clone(), cx.peer).await,
    ),
    Heartbeat 0..=4 Heartbeat(r) => cx.reply(groups::heartbeat(cx.shard, r).await),
    LeaveGroup 0..=5 LeaveGroup(r) => {
        cx.reply(groups::leave_group(cx.shard, r, cx.version).await)
    },
    SyncGroup 0..=5 SyncGroup(r) => cx.reply(groups::sync_group(cx.shard, r).await),
    DescribeGroups 0..=5 DescribeGroups(r) => {
        cx.reply(groups::describe_groups(cx.shard, r, cx.version).await)
    },
    ListGroups 0..=4 ListGroups(r) => cx.reply(groups::list_groups(cx.shard, r).await),
    ApiVersions 0..=3 ApiVersions(_) => {
        cx.reply(codec::api_versions_body(ErrorCode::None, KAFKA_APIS))
    },
    CreateTopics 2..=7 CreateTopics(r) => {
        cx.reply(admin::create_topics(cx.shard, r, cx.version).await)
    },
    DeleteTopics 1..=5 DeleteTopics(r) => cx.reply(admin::delete_topics(cx.shard, r).await),
    DeleteRecords 0..=2 DeleteRecords(r) => {
        cx.reply(delete_records::delete_records(cx.shard, r).await)
    },
    InitProducerId 0..=4 InitProducerId(r) => {
        cx.reply(admin::init_producer_id(cx.shard, r).await)
    },
    OffsetForLeaderEpoch 2..=4 OffsetForLeaderEpoch(r) => {
        cx.reply(data::offset_for_leader_epoch(cx.shard, r).await)
    },
    AddPartitionsToTxn 0..=3 AddPartitionsToTxn(r) => {
        cx.reply(txn::add_partitions(cx.shard, r).await)
    },
    AddOffsetsToTxn 0..=3 AddOffsetsToTxn(r) => cx.reply(txn::add_offsets(cx.shard, r).await),
    EndTxn 0..=3 EndTxn(r) => cx.reply(txn::end_txn(cx.shard, r).await),
    TxnOffsetCommit 0..=3 TxnOffsetCommit(r) => {
        cx.reply(txn::txn_offset_commit(cx.shard, r).await)
    },
    DescribeConfigs 0..=4 DescribeConfigs(r) => {
        cx.reply(admin::describe_configs(cx.shard, r))
    },
    AlterConfigs 0..=2 AlterConfigs(r) => {
        cx.reply(topic_admin::alter_configs(cx.shard, r).await)
    },
    CreatePartitions 0..=3 CreatePartitions(r) => {
        cx.reply(topic_admin::create_partitions(cx.shard, r).await)
    },
    DeleteGroups 0..=2 DeleteGroups(r) => {
        cx.reply(super::group_admin::delete_groups(cx.shard, r).await)
    },
    ElectLeaders 0..=2 ElectLeaders(r) => {
        cx.reply(topic_admin::elect_leaders(cx.shard, r, cx.version).await)
    },
    IncrementalAlterConfigs 0..=1 IncrementalAlterConfigs(r) => {
        cx.reply(topic_admin::incremental_alter_configs(cx.shard, r).await)
    },
    OffsetDelete 0..=0 OffsetDelete(r) => {
        cx.reply(super::group_admin::offset_delete(cx.shard, r).await)
    },
    DescribeCluster 0..=2 DescribeCluster(r) => {
        cx.reply(cluster::describe_cluster(cx.shard, r, cx.version))
    },
    DescribeTransactions 0..=0 DescribeTransactions(r) => {
        cx.reply(txn::describe(cx.shard, r).await)
    },
    ListTransactions 0..=1 ListTransactions(r) => cx.reply(txn::list(cx.shard, r).await),
}

/// Answers one request: UNSUPPORTED_VERSION for what the codec marked unsupported, otherwise the
/// row's handler.
/// `frame_bytes` is the size of the request's frame.
pub async fn handle(
    shard: &Rc<Shard>,
    req: KafkaRequest,
    frame_bytes: usize,
    peer: &Peer,
) -> Outgoing {
    let (api_key, version, cid) = (req.api_key, req.version, req.correlation_id);
    let kind = match req.body {
        RequestBody::Decoded(k) => *k,
        RequestBody::Unsupported(refused) => {
            return unsupported_version(shard, api_key, version, cid, &refused)
        }
    };
    let cx = Call {
        shard,
        api_key,
        version,
        correlation_id: cid,
        client_id: req.client_id.unwrap_or_default(),
        peer,
        frame_bytes,
    };
    match route(&cx, api_key, kind).await {
        Some(out) => out,
        // The codec decodes only bodies the table lists, under their own key.
        None => unsupported_version(shard, api_key, version, cid, &Refused::Whole),
    }
}

fn unsupported_version(
    shard: &Shard,
    api_key: ApiKey,
    version: i16,
    cid: i32,
    refused: &Refused,
) -> Outgoing {
    crate::front_rules::record_refused(shard);
    match codec::unsupported_response(api_key, version, cid, refused, KAFKA_APIS).transpose() {
        // An acks=0 Produce: the client reads no response.
        None => Outgoing::Nothing,
        Some(head) => frame_or_nothing(head, "answering UNSUPPORTED_VERSION"),
    }
}

/// Encodes a response; one the codec refuses (a bug: a field set that the version lacks) is
/// logged and answered with an empty response carrying UNKNOWN_SERVER_ERROR where it can.
fn encode(api_key: ApiKey, version: i16, cid: i32, body: &ResponseKind) -> Outgoing {
    let head = codec::encode_response(api_key, version, cid, body).or_else(|e| {
        tracing::error!("encoding a Kafka response: {e}");
        let empty = unsupported::empty_response(api_key, ErrorCode::UnknownServerError as i16);
        codec::encode_response(api_key, version, cid, &empty)
    });
    frame_or_nothing(head, "encoding an empty Kafka response")
}

/// The encoded frame, or nothing (logged as `what`) when even that could not be encoded.
fn frame_or_nothing(head: Result<Bytes, KafkaCodecError>, what: &str) -> Outgoing {
    match head {
        Ok(head) => Outgoing::Frame {
            head,
            chunks: Vec::new(),
        },
        Err(e) => {
            tracing::error!("{what}: {e}");
            Outgoing::Nothing
        }
    }
}
