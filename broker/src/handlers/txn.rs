//! Transaction APIs (FindCoordinator for a transactional id, InitProducerId with one,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions): the
//! contract the fronts call (DESIGN §9).
//!
//! Each request is routed over the mesh to the core owning the id's `__transaction_state`
//! partition (the topic is created through the controller on first use, compacted, at
//! RF = min(3, brokers in the cluster) and `min.insync.replicas` = min(2, RF)); the coordinator there
//! decides (`crate::txn`). An id's coordinator is the broker leading that partition: a request
//! reaching another broker gets NOT_COORDINATOR and the client finds the coordinator again. What
//! only the metadata image can say is checked here: a partition that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION, and the request's other partitions OPERATION_NOT_ATTEMPTED
//! (Kafka's rule: nothing of it is added).
//!
//! The shaping both fronts share lives here too: answers grouped by topic ([`by_topic`],
//! [`topics_of`]), DescribeTransactions' start time and timeout, and ListTransactions' filters
//! ([`list_filtered`]).

use std::rc::Rc;

use spool_protocol::ErrorCode;

use crate::front_rules::{ByTopic, ProducerIdentity};
use crate::group::{coordinator_partition as group_partition, OFFSETS_TOPIC};
use crate::requests::TopicPartition;
use crate::shard::Shard;
use crate::txn::calls::{TxnAnswer, TxnCall};
use crate::txn::{coordinator_partition, TxnMetadata, TRANSACTION_STATE_TOPIC};

/// `segment.bytes` of `__transaction_state` (Kafka's `transaction.state.log.segment.bytes`).
pub const TXN_STATE_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;
/// Longest transactional id accepted (the id is a key of every state record).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 1024;

/// Creates `__transaction_state` unless it exists; its partition count.
async fn txn_state_topic(shard: &Rc<Shard>) -> Result<i32, ErrorCode> {
    let rf = shard.brokers("native").len().clamp(1, 3);
    let configs = vec![
        ("cleanup.policy".into(), "compact".into()),
        ("segment.bytes".into(), TXN_STATE_SEGMENT_BYTES.to_string()),
        ("min.insync.replicas".into(), rf.min(2).to_string()),
    ];
    super::internal_topics::create(
        shard,
        TRANSACTION_STATE_TOPIC,
        shard.config.transaction_state_partitions,
        configs,
    )
    .await
}

/// Where `transactional_id` is coordinated: the broker leading its `__transaction_state`
/// partition and the core owning that partition on every broker.
pub async fn coordinator_of(
    shard: &Rc<Shard>,
    transactional_id: &str,
) -> Result<(i32, usize), ErrorCode> {
    if transactional_id.is_empty() || transactional_id.len() > TRANSACTIONAL_ID_BYTES_MAX {
        return Err(ErrorCode::InvalidRequest);
    }
    let partitions = txn_state_topic(shard).await?;
    let tp = TopicPartition::new(
        TRANSACTION_STATE_TOPIC,
        coordinator_partition(transactional_id, partitions),
    );
    super::internal_topics::leader_and_core(shard, &tp)
}

/// Routes `call` to the id's coordinator core.
async fn call(
    shard: &Rc<Shard>,
    transactional_id: &str,
    c: TxnCall,
) -> Result<TxnAnswer, ErrorCode> {
    let (node, core) = coordinator_of(shard, transactional_id).await?;
    if node != shard.config.node_id {
        return Err(ErrorCode::NotCoordinator);
    }
    match shard.call(core, c).await {
        Ok(TxnAnswer::Refused(code)) => Err(code),
        Ok(a) => Ok(a),
        Err(_) => Err(ErrorCode::CoordinatorNotAvailable),
    }
}

/// The InitProducerId rule, on both ports: an idempotent producer (no transactional id, or an
/// empty one) gets a fresh producer id at epoch 0 (`front_rules::idempotent_producer_id`); a
/// transactional id gets its coordinator's answer — the id's producer id, its epoch bumped, the
/// previous instance fenced. `current` is the request's producer id and epoch: KIP-360's
/// (id, epoch) the producer has, when both are set (-1 when it has none).
pub async fn init_producer(
    shard: &Rc<Shard>,
    transactional_id: Option<&str>,
    transaction_timeout_ms: i32,
    current: (i64, i16),
) -> Result<ProducerIdentity, ErrorCode> {
    let expected = (current.0 >= 0 && current.1 >= 0).then_some(current);
    let Some(t) = transactional_id.filter(|t| !t.is_empty()) else {
        return crate::front_rules::idempotent_producer_id(shard).await;
    };
    let (producer_id, producer_epoch) =
        init_producer_id(shard, t, transaction_timeout_ms, expected).await?;
    Ok(ProducerIdentity {
        producer_id,
        producer_epoch,
    })
}

/// InitProducerId with a transactional id: the id's producer id and its bumped epoch.
pub async fn init_producer_id(
    shard: &Rc<Shard>,
    transactional_id: &str,
    timeout_ms: i32,
    expected: Option<(i64, i16)>,
) -> Result<(i64, i16), ErrorCode> {
    let c = TxnCall::InitProducerId {
        transactional_id: transactional_id.to_string(),
        // A negative timeout reads as 0, which the coordinator refuses.
        timeout_ms: u32::try_from(timeout_ms).unwrap_or(0),
        expected,
        fresh_producer_id: None,
    };
    match call(shard, transactional_id, c).await? {
        TxnAnswer::Producer(r) => r,
        _ => Err(ErrorCode::UnknownServerError),
    }
}

/// AddPartitionsToTxn: each partition's code.
pub async fn add_partitions(
    shard: &Rc<Shard>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: Vec<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let unknown: Vec<bool> = partitions
        .iter()
        .map(|tp| {
            crate::ops::partition_count(shard, &tp.topic)
                .is_none_or(|n| tp.partition < 0 || tp.partition >= n)
        })
        .collect();
    if unknown.iter().any(|u| *u) {
        return partitions
            .into_iter()
            .zip(unknown)
            .map(|(tp, u)| {
                let code = if u {
                    ErrorCode::UnknownTopicOrPartition
                } else {
                    ErrorCode::OperationNotAttempted
                };
                (tp, code)
            })
            .collect();
    }
    let c = TxnCall::AddPartitions {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions: partitions.clone(),
    };
    let code = done(call(shard, transactional_id, c).await);
    partitions.into_iter().map(|tp| (tp, code)).collect()
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so its
/// transactional offset commits are decided with it.
pub async fn add_offsets(
    shard: &Rc<Shard>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    group_id: &str,
) -> ErrorCode {
    let n = match super::internal_topics::offsets_topic(shard).await {
        Ok(n) => n,
        Err(code) => return code,
    };
    let tp = TopicPartition::new(OFFSETS_TOPIC, group_partition(group_id, n));
    let c = TxnCall::AddPartitions {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions: vec![tp],
    };
    done(call(shard, transactional_id, c).await)
}

/// EndTxn.
pub async fn end_txn(
    shard: &Rc<Shard>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
) -> ErrorCode {
    let c = TxnCall::EndTxn {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        commit,
    };
    done(call(shard, transactional_id, c).await)
}

fn done(r: Result<TxnAnswer, ErrorCode>) -> ErrorCode {
    match r {
        Ok(TxnAnswer::Done(Ok(()))) => ErrorCode::None,
        Ok(TxnAnswer::Done(Err(code))) | Err(code) => code,
        Ok(_) => ErrorCode::UnknownServerError,
    }
}

/// DescribeTransactions: each id's metadata, or why not.
pub async fn describe(
    shard: &Rc<Shard>,
    ids: Vec<String>,
) -> Vec<(String, Result<TxnMetadata, ErrorCode>)> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let r = match call(shard, &id, TxnCall::Describe(vec![id.clone()])).await {
            Ok(TxnAnswer::Described(mut d)) if d.len() == 1 => d.remove(0).1,
            Ok(_) => Err(ErrorCode::UnknownServerError),
            Err(code) => Err(code),
        };
        out.push((id, r));
    }
    out
}

/// ListTransactions: the ids this broker coordinates, from every core.
pub async fn list(shard: &Rc<Shard>) -> Vec<TxnMetadata> {
    shard
        .broadcast(|| TxnCall::List)
        .await
        .into_iter()
        .filter_map(|r| match r {
            Ok(TxnAnswer::Listed(l)) => Some(l),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The answers of a request's partitions grouped by topic, in request order: the shape both
/// fronts' AddPartitionsToTxn responses and DescribeTransactions' topics have.
pub fn by_topic<T>(items: impl IntoIterator<Item = (TopicPartition, T)>) -> ByTopic<(i32, T)> {
    let mut out: ByTopic<(i32, T)> = Vec::new();
    for (tp, v) in items {
        match out.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, ps)) => ps.push((tp.partition, v)),
            None => out.push((tp.topic, vec![(tp.partition, v)])),
        }
    }
    out
}

/// A transaction's partitions by topic, as DescribeTransactions carries them.
pub fn topics_of(m: &TxnMetadata) -> ByTopic<i32> {
    by_topic(m.partitions.iter().map(|tp| (tp.clone(), ())))
        .into_iter()
        .map(|(t, ps)| (t, ps.into_iter().map(|(p, ())| p).collect()))
        .collect()
}

/// DescribeTransactions' start time: when the open transaction began, -1 when none is open.
pub fn start_time_ms(m: &TxnMetadata) -> i64 {
    if m.state.is_open() {
        i64::try_from(m.txn_start_ms).unwrap_or(i64::MAX)
    } else {
        -1
    }
}

/// DescribeTransactions' timeout, as the wire's int32 carries it.
pub fn timeout_ms_i32(m: &TxnMetadata) -> i32 {
    i32::try_from(m.timeout_ms).unwrap_or(i32::MAX)
}

/// ListTransactions' filters (Kafka's): each empty list or negative duration filters nothing.
pub struct ListFilters {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// Only transactions open longer than this (ListTransactions v1); -1: no filter.
    pub duration_ms: i64,
}

/// ListTransactions' answer.
pub struct Listed {
    /// The state filters naming no state Kafka knows.
    pub unknown_state_filters: Vec<String>,
    pub transactions: Vec<TxnMetadata>,
}

/// ListTransactions: the ids this broker coordinates that pass `filters`.
pub async fn list_filtered(shard: &Rc<Shard>, filters: &ListFilters) -> Listed {
    let now_ms = crate::clock::now_ms_u64();
    let transactions = list(shard)
        .await
        .into_iter()
        .filter(|m| passes(filters, m, now_ms))
        .collect();
    Listed {
        unknown_state_filters: unknown_states(&filters.states),
        transactions,
    }
}

fn unknown_states(states: &[String]) -> Vec<String> {
    let known = crate::txn::TxnState::ALL.map(|s| s.name());
    states
        .iter()
        .filter(|f| !known.contains(&f.as_str()))
        .cloned()
        .collect()
}

fn passes(f: &ListFilters, m: &TxnMetadata, now_ms: u64) -> bool {
    let state = f.states.is_empty() || f.states.iter().any(|s| s == m.state.name());
    let producer = f.producer_ids.is_empty() || f.producer_ids.contains(&m.producer_id);
    let open_ms = i64::try_from(now_ms.saturating_sub(m.txn_start_ms)).unwrap_or(i64::MAX);
    let duration = f.duration_ms < 0 || (m.state.is_open() && open_ms > f.duration_ms);
    state && producer && duration
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::TxnState;

    fn meta(state: TxnState, producer_id: i64, txn_start_ms: u64) -> TxnMetadata {
        let mut m = TxnMetadata::new("t", producer_id, 60_000, 0);
        m.state = state;
        m.txn_start_ms = txn_start_ms;
        m
    }

    #[test]
    fn answers_group_by_topic_in_request_order() {
        let items = vec![
            (TopicPartition::new("b", 1), 'x'),
            (TopicPartition::new("a", 0), 'y'),
            (TopicPartition::new("b", 0), 'z'),
        ];
        assert_eq!(
            by_topic(items),
            vec![
                ("b".to_string(), vec![(1, 'x'), (0, 'z')]),
                ("a".to_string(), vec![(0, 'y')]),
            ]
        );
    }

    #[test]
    fn start_time_is_minus_one_once_no_transaction_is_open() {
        assert_eq!(start_time_ms(&meta(TxnState::Ongoing, 1, 1_000)), 1_000);
        assert_eq!(start_time_ms(&meta(TxnState::CompleteAbort, 1, 1_000)), -1);
    }

    #[test]
    fn list_filters_are_kafkas() {
        let none = ListFilters {
            states: vec![],
            producer_ids: vec![],
            duration_ms: -1,
        };
        assert!(passes(&none, &meta(TxnState::Empty, 1, 0), 10_000));
        let ongoing = ListFilters {
            states: vec!["Ongoing".into()],
            ..none
        };
        assert!(passes(&ongoing, &meta(TxnState::Ongoing, 1, 0), 0));
        assert!(!passes(&ongoing, &meta(TxnState::Empty, 1, 0), 0));
        let producer = ListFilters {
            states: vec![],
            producer_ids: vec![7],
            duration_ms: -1,
        };
        assert!(passes(&producer, &meta(TxnState::Empty, 7, 0), 0));
        assert!(!passes(&producer, &meta(TxnState::Empty, 8, 0), 0));
        let long = ListFilters {
            states: vec![],
            producer_ids: vec![],
            duration_ms: 500,
        };
        assert!(passes(&long, &meta(TxnState::Ongoing, 1, 1_000), 2_000));
        assert!(!passes(&long, &meta(TxnState::Ongoing, 1, 1_000), 1_400));
        assert!(!passes(
            &long,
            &meta(TxnState::CompleteCommit, 1, 1_000),
            2_000
        ));
        assert_eq!(
            unknown_states(&["Ongoing".into(), "Nope".into()]),
            vec!["Nope".to_string()]
        );
    }
}
