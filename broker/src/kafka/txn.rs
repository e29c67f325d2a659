//! The transaction APIs on the Kafka front (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions, each translated into
//! `handlers::txn` (the same coordinator the native front uses) and the answer translated back.
//! FindCoordinator (key type 1) and InitProducerId with a transactional id are in `groups` and
//! `admin`, next to their non-transactional forms.
//!
//! Version notes: AddPartitionsToTxn is served at v0–3, the client's form (one transaction per
//! request); v4+ batch transactions for brokers' KIP-890 verification, which spool does not do
//! over this port. ListTransactions v1's duration filter is applied (-1: none).

use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response;
use kafka_protocol::messages::{
    add_partitions_to_txn_response, describe_transactions_response, list_transactions_response,
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use spool_protocol::wire;
use spool_protocol::ErrorCode;

use super::kstr;
use crate::front_rules::build;
use crate::handlers::txn;
use crate::requests::TopicPartition;
use crate::shard::Shard;
use crate::txn::TxnMetadata;

pub async fn add_partitions(
    shard: &Rc<Shard>,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.0.as_str().to_owned();
    let partitions: Vec<TopicPartition> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.0.as_str(), *p))
        })
        .collect();
    let results = txn::add_partitions(
        shard,
        &id,
        req.v3_and_below_producer_id.0,
        req.v3_and_below_producer_epoch,
        partitions,
    )
    .await;
    let topics = txn::by_topic(results)
        .into_iter()
        .map(|(name, ps)| {
            add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(kstr(name)))
                .with_results_by_partition(
                    ps.into_iter()
                        .map(|(p, code)| {
                            add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code as i16)
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
}

pub async fn add_offsets(
    shard: &Rc<Shard>,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let code = txn::add_offsets(
        shard,
        req.transactional_id.0.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.group_id.0.as_str(),
    )
    .await;
    AddOffsetsToTxnResponse::default().with_error_code(code as i16)
}

pub async fn end_txn(shard: &Rc<Shard>, req: EndTxnRequest) -> EndTxnResponse {
    let code = txn::end_txn(
        shard,
        req.transactional_id.0.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.committed,
    )
    .await;
    EndTxnResponse::default().with_error_code(code as i16)
}

/// The topics of a transaction, grouped as DescribeTransactions carries them.
fn topic_data(m: &TxnMetadata) -> Vec<describe_transactions_response::TopicData> {
    txn::topics_of(m)
        .into_iter()
        .map(|(topic, partitions)| {
            describe_transactions_response::TopicData::default()
                .with_topic(TopicName(kstr(topic)))
                .with_partitions(partitions)
        })
        .collect()
}

pub async fn describe(
    shard: &Rc<Shard>,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let ids = req
        .transactional_ids
        .iter()
        .map(|t| t.0.as_str().to_owned())
        .collect();
    let states = txn::describe(shard, ids)
        .await
        .into_iter()
        .map(|(id, r)| {
            let s = describe_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(kstr(id)));
            match r {
                Ok(m) => s
                    .with_transaction_state(kstr(m.state.name()))
                    .with_transaction_timeout_ms(txn::timeout_ms_i32(&m))
                    .with_transaction_start_time_ms(txn::start_time_ms(&m))
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_producer_epoch(m.producer_epoch)
                    .with_topics(topic_data(&m)),
                Err(code) => s
                    .with_error_code(code as i16)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1),
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

pub async fn list(shard: &Rc<Shard>, req: ListTransactionsRequest) -> ListTransactionsResponse {
    let filters = txn::ListFilters {
        states: req
            .state_filters
            .iter()
            .map(|f| f.as_str().to_owned())
            .collect(),
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_ms: req.duration_filter,
    };
    let listed = txn::list_filtered(shard, &filters).await;
    let states = listed
        .transactions
        .into_iter()
        .map(|m| {
            list_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(kstr(m.transactional_id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(kstr(m.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_error_code(ErrorCode::None as i16)
        .with_unknown_state_filters(listed.unknown_state_filters.into_iter().map(kstr).collect())
        .with_transaction_states(states)
}

/// TxnOffsetCommit: the offsets wait for the transaction's marker (the group coordinator
/// stages them, `spool_core::group::txn_offsets`).
pub async fn txn_offset_commit(
    shard: &Rc<Shard>,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let native = build!(wire::OffsetCommitRequestT {
        group_id: req.group_id.0.as_str().to_owned(),
        // v0–2 name no member: -1 and "" (Kafka's defaults).
        generation_id: req.generation_id,
        member_id: (!req.member_id.is_empty()).then(|| req.member_id.as_str().to_owned()),
        group_instance_id: req
            .group_instance_id
            .as_ref()
            .map(|i| i.as_str().to_owned()),
        retention_time_ms: -1,
        topics: Some(
            req.topics
                .iter()
                .map(|t| build!(wire::OffsetCommitRequestTopicT {
                    name: t.name.0.as_str().to_owned(),
                    partitions: Some(
                        t.partitions
                            .iter()
                            .map(|p| build!(wire::OffsetCommitRequestPartitionT {
                                partition_index: p.partition_index,
                                committed_offset: p.committed_offset,
                                committed_leader_epoch: p.committed_leader_epoch,
                                committed_metadata: p
                                    .committed_metadata
                                    .as_ref()
                                    .map(|m| m.as_str().to_owned()),
                            }))
                            .collect(),
                    ),
                }))
                .collect(),
        ),
    });
    let producer = Some((req.producer_id.0, req.producer_epoch));
    let r = crate::handlers::groups::commit_offsets(shard, native, producer).await;
    let topics = r
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(kstr(t.name)))
                .with_partitions(
                    t.partitions
                        .unwrap_or_default()
                        .into_iter()
                        .map(|p| {
                            txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(ErrorCode::from(p.error_code) as i16)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
