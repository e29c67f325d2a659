//! The transaction APIs on the native front: each request translated into `txn`'s handlers
//! (the ones the Kafka front calls too, `crate::kafka::txn`) and the answer back into the schema
//! (`schemas/txn.fbs`).

use std::rc::Rc;

use spool_protocol::wire::{self, ErrorCode as WireCode};

use super::txn;
use crate::front_rules::build;
use crate::requests::TopicPartition;
use crate::shard::Shard;

pub async fn add_partitions(
    shard: &Rc<Shard>,
    req: wire::AddPartitionsToTxnRequestT,
) -> wire::AddPartitionsToTxnResponseT {
    let partitions: Vec<TopicPartition> = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .flat_map(|t| {
            let name = t.name;
            t.partitions
                .unwrap_or_default()
                .into_iter()
                .map(move |p| TopicPartition::new(name.as_str(), p))
        })
        .collect();
    let (id, pid, epoch) = (&req.transactional_id, req.producer_id, req.producer_epoch);
    let results = txn::add_partitions(shard, id, pid, epoch, partitions).await;
    let topics = txn::by_topic(results)
        .into_iter()
        .map(|(name, ps)| {
            build!(wire::AddPartitionsToTxnTopicResultT {
                name: name,
                results_by_partition: Some(
                    ps.into_iter()
                        .map(
                            |(p, code)| build!(wire::AddPartitionsToTxnPartitionResultT {
                                partition_index: p,
                                partition_error_code: WireCode::from(code),
                            })
                        )
                        .collect(),
                ),
            })
        })
        .collect();
    build!(wire::AddPartitionsToTxnResponseT {
        results_by_topic: Some(topics)
    })
}

pub async fn add_offsets(
    shard: &Rc<Shard>,
    req: wire::AddOffsetsToTxnRequestT,
) -> wire::AddOffsetsToTxnResponseT {
    let (id, pid, epoch) = (&req.transactional_id, req.producer_id, req.producer_epoch);
    let code = txn::add_offsets(shard, id, pid, epoch, &req.group_id).await;
    build!(wire::AddOffsetsToTxnResponseT {
        error_code: WireCode::from(code)
    })
}

pub async fn end_txn(shard: &Rc<Shard>, req: wire::EndTxnRequestT) -> wire::EndTxnResponseT {
    let (id, pid, epoch) = (&req.transactional_id, req.producer_id, req.producer_epoch);
    let code = txn::end_txn(shard, id, pid, epoch, req.committed).await;
    build!(wire::EndTxnResponseT {
        error_code: WireCode::from(code)
    })
}

pub async fn txn_offset_commit(
    shard: &Rc<Shard>,
    req: wire::TxnOffsetCommitRequestT,
) -> wire::TxnOffsetCommitResponseT {
    // OffsetCommit's form; Kafka's TxnOffsetCommit has no retention (-1: the broker's).
    let commit = build!(wire::OffsetCommitRequestT {
        group_id: req.group_id,
        retention_time_ms: -1,
        generation_id: req.generation_id,
        member_id: req.member_id.filter(|m| !m.is_empty()),
        group_instance_id: req.group_instance_id,
        topics: req.topics,
    });
    let producer = Some((req.producer_id, req.producer_epoch));
    let r = super::groups::commit_offsets(shard, commit, producer).await;
    build!(wire::TxnOffsetCommitResponseT { topics: r.topics })
}

pub async fn describe(
    shard: &Rc<Shard>,
    req: wire::DescribeTransactionsRequestT,
) -> wire::DescribeTransactionsResponseT {
    let ids = req.transactional_ids.unwrap_or_default();
    let states = txn::describe(shard, ids)
        .await
        .into_iter()
        .map(|(id, r)| match r {
            Ok(m) => build!(wire::DescribedTransactionT {
                transactional_id: id,
                transaction_state: Some(m.state.name().to_string()),
                transaction_timeout_ms: txn::timeout_ms_i32(&m),
                transaction_start_time_ms: txn::start_time_ms(&m),
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                topics: Some(
                    txn::topics_of(&m)
                        .into_iter()
                        .map(|(topic, ps)| build!(wire::DescribedTransactionTopicT {
                            topic: topic,
                            partitions: Some(ps),
                        }))
                        .collect(),
                ),
            }),
            Err(code) => build!(wire::DescribedTransactionT {
                error_code: WireCode::from(code),
                transactional_id: id,
            }),
        })
        .collect();
    build!(wire::DescribeTransactionsResponseT {
        transaction_states: Some(states)
    })
}

pub async fn list(
    shard: &Rc<Shard>,
    req: wire::ListTransactionsRequestT,
) -> wire::ListTransactionsResponseT {
    let filters = txn::ListFilters {
        states: req.state_filters.unwrap_or_default(),
        producer_ids: req.producer_id_filters.unwrap_or_default(),
        duration_ms: req.duration_filter,
    };
    let listed = txn::list_filtered(shard, &filters).await;
    let states = listed
        .transactions
        .into_iter()
        .map(|m| {
            build!(wire::ListedTransactionT {
                transactional_id: m.transactional_id,
                producer_id: m.producer_id,
                transaction_state: Some(m.state.name().to_string()),
                producer_epoch: m.producer_epoch,
            })
        })
        .collect();
    build!(wire::ListTransactionsResponseT {
        unknown_state_filters: Some(listed.unknown_state_filters),
        transaction_states: Some(states),
    })
}
