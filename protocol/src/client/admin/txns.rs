//! The admin client's transaction operations: list the transactional ids a broker coordinates
//! (ListTransactions) and describe one id (DescribeTransactions).
//!
//! DescribeTransactions goes to the id's transaction coordinator, found with FindCoordinator (key
//! type Transaction) and cached per id; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
//! COORDINATOR_LOAD_IN_PROGRESS drop the cached coordinator and retry within the operation's
//! timeout, as the group operations do. ListTransactions answers only the ids the broker asked
//! coordinates, so it names the broker to ask; a cluster-wide list asks each broker
//! (`blocking::Admin::list_transactions`).

use crate::client::net::Addr;
use crate::client::{ClientError, TopicPartition};
use crate::wire::{
    CoordinatorType, DescribeTransactionsRequestT, FindCoordinatorRequestT, RequestBodyT,
    ResponseBodyT,
};
use crate::ErrorCode;

use super::{AdminOp, AdminOutcome};

/// A transactional id as ListTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    pub transactional_id: String,
    /// Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
    /// CompleteAbort, Dead, PrepareEpochFence.
    pub state: String,
    pub producer_id: i64,
    /// -1 when the broker does not say (Kafka's ListTransactions carries no epoch).
    pub producer_epoch: i16,
    /// The coordinator's node id: the broker that listed it (-1 when not known).
    pub coordinator: i32,
}

/// A transactional id as DescribeTransactions reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    pub transactional_id: String,
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// When the open transaction began (ms since the Unix epoch); `None` when none is open.
    pub start_time_ms: Option<i64>,
    /// The open (or just completed) transaction's partitions, `__consumer_offsets` ones
    /// included, sorted.
    pub partitions: Vec<TopicPartition>,
}

/// The transactional id an operation is about, when it must go to the id's coordinator.
pub(crate) fn coordinator_key(op: &AdminOp) -> Option<&str> {
    match op {
        AdminOp::DescribeTransaction { transactional_id } => Some(transactional_id),
        _ => None,
    }
}

/// The broker an operation must be sent to, when it names one.
pub(crate) fn broker_of(op: &AdminOp) -> Option<&Addr> {
    match op {
        AdminOp::ListTransactions { broker } => broker.as_ref(),
        _ => None,
    }
}

pub(crate) fn find_coordinator(transactional_id: &str) -> RequestBodyT {
    let mut r = FindCoordinatorRequestT::default();
    r.key = transactional_id.to_owned();
    r.key_type = CoordinatorType::Transaction;
    RequestBodyT::FindCoordinatorRequest(Box::new(r))
}

pub(crate) fn body(op: &AdminOp) -> Option<RequestBodyT> {
    Some(match op {
        AdminOp::ListTransactions { .. } => RequestBodyT::ListTransactionsRequest(Box::default()),
        AdminOp::DescribeTransaction { transactional_id } => {
            let mut r = DescribeTransactionsRequestT::default();
            r.transactional_ids = Some(vec![transactional_id.clone()]);
            RequestBodyT::DescribeTransactionsRequest(Box::new(r))
        }
        _ => return None,
    })
}

/// The outcome of a transaction operation, or the error code to retry or fail with.
pub(crate) fn outcome(
    op: &AdminOp,
    body: ResponseBodyT,
) -> Option<Result<AdminOutcome, ErrorCode>> {
    Some(match (op, body) {
        (AdminOp::ListTransactions { .. }, ResponseBodyT::ListTransactionsResponse(r)) => {
            let code = ErrorCode::from(r.error_code);
            if !code.is_ok() {
                return Some(Err(code));
            }
            let mut listed: Vec<ListedTransaction> = r
                .transaction_states
                .iter()
                .flatten()
                .map(|t| ListedTransaction {
                    transactional_id: t.transactional_id.clone(),
                    state: t.transaction_state.clone().unwrap_or_default(),
                    producer_id: t.producer_id,
                    producer_epoch: t.producer_epoch,
                    coordinator: -1,
                })
                .collect();
            listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
            Ok(AdminOutcome::ListTransactions(listed))
        }
        (
            AdminOp::DescribeTransaction { transactional_id },
            ResponseBodyT::DescribeTransactionsResponse(r),
        ) => {
            let Some(t) = r
                .transaction_states
                .iter()
                .flatten()
                .find(|t| &t.transactional_id == transactional_id)
            else {
                return Some(Err(ErrorCode::UnknownServerError));
            };
            let code = ErrorCode::from(t.error_code);
            if !code.is_ok() {
                return Some(Err(code));
            }
            let mut partitions: Vec<TopicPartition> = t
                .topics
                .iter()
                .flatten()
                .flat_map(|tp| {
                    tp.partitions
                        .iter()
                        .flatten()
                        .map(|p| TopicPartition::new(tp.topic.clone(), *p))
                })
                .collect();
            partitions.sort();
            Ok(AdminOutcome::DescribeTransaction(TransactionDescription {
                transactional_id: t.transactional_id.clone(),
                state: t.transaction_state.clone().unwrap_or_default(),
                producer_id: t.producer_id,
                producer_epoch: t.producer_epoch,
                timeout_ms: t.transaction_timeout_ms,
                start_time_ms: (t.transaction_start_time_ms >= 0)
                    .then_some(t.transaction_start_time_ms),
                partitions,
            }))
        }
        _ => return None,
    })
}

/// The error an operation fails with, when `code` is not retried: an unknown id says so.
pub(crate) fn failure(op: &AdminOp, code: ErrorCode) -> Option<ClientError> {
    match (op, code) {
        (AdminOp::DescribeTransaction { transactional_id }, ErrorCode::TransactionalIdNotFound) => {
            Some(ClientError::broker(
                code,
                format!("transactional id {transactional_id} is not known to its coordinator"),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AdminConfig, AdminCore};
    use super::*;
    use crate::client::net::ClientCore;
    use crate::client::test_util::{next_request, respond};
    use crate::wire::{
        DescribeTransactionsResponseT, DescribedTransactionT, DescribedTransactionTopicT,
        FindCoordinatorResponseT, ListTransactionsResponseT, ListedTransactionT,
    };

    fn coordinator(host: &str) -> ResponseBodyT {
        let mut r = FindCoordinatorResponseT::default();
        r.host = Some(host.into());
        r.port = 1;
        ResponseBodyT::FindCoordinatorResponse(Box::new(r))
    }

    fn described(code: ErrorCode) -> ResponseBodyT {
        let mut topic = DescribedTransactionTopicT::default();
        topic.topic = "t".into();
        topic.partitions = Some(vec![2, 0]);
        let mut t = DescribedTransactionT::default();
        t.error_code = code.into();
        t.transactional_id = "tx".into();
        t.transaction_state = Some("Ongoing".into());
        t.transaction_timeout_ms = 60_000;
        t.transaction_start_time_ms = 1_700_000_000_000;
        t.producer_id = 5;
        t.producer_epoch = 3;
        t.topics = Some(vec![topic]);
        let mut r = DescribeTransactionsResponseT::default();
        r.transaction_states = Some(vec![t]);
        ResponseBodyT::DescribeTransactionsResponse(Box::new(r))
    }

    fn describe_op() -> AdminOp {
        AdminOp::DescribeTransaction {
            transactional_id: "tx".into(),
        }
    }

    #[test]
    fn describe_finds_the_transaction_coordinator_and_again_after_load_in_progress() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        let id = core.submit(describe_op(), 0).unwrap();
        let mut now = 0u64;
        // find → "c1", describe → COORDINATOR_LOAD_IN_PROGRESS, find → "c2", describe → ok.
        for (expect_find, expect_addr, answer) in [
            (true, None, coordinator("c1")),
            (
                false,
                Some("c1:1"),
                described(ErrorCode::CoordinatorLoadInProgress),
            ),
            (true, None, coordinator("c2")),
            (false, Some("c2:1"), described(ErrorCode::None)),
        ] {
            let (addr, req) = next_request(&mut core, &mut now);
            match &req.header.body {
                RequestBodyT::FindCoordinatorRequest(f) => {
                    assert!(expect_find, "{req:?}");
                    assert_eq!(f.key_type, CoordinatorType::Transaction);
                    assert_eq!(f.key, "tx");
                }
                RequestBodyT::DescribeTransactionsRequest(d) => {
                    assert!(!expect_find, "{req:?}");
                    assert_eq!(d.transactional_ids, Some(vec!["tx".to_string()]));
                }
                other => panic!("{other:?}"),
            }
            if let Some(a) = expect_addr {
                assert_eq!(addr, a);
            }
            core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), now);
        }
        let results = core.take_results();
        let [(rid, Ok(AdminOutcome::DescribeTransaction(d)))] = results.as_slice() else {
            panic!("{results:?}")
        };
        assert_eq!(*rid, id);
        assert_eq!(
            (
                d.state.as_str(),
                d.producer_id,
                d.producer_epoch,
                d.timeout_ms
            ),
            ("Ongoing", 5, 3, 60_000)
        );
        assert_eq!(d.start_time_ms, Some(1_700_000_000_000));
        assert_eq!(
            d.partitions,
            vec![TopicPartition::new("t", 0), TopicPartition::new("t", 2)]
        );
    }

    #[test]
    fn an_unknown_id_fails_at_once_saying_so() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        core.submit(describe_op(), 0).unwrap();
        let mut now = 0u64;
        let (addr, req) = next_request(&mut core, &mut now);
        core.on_response(
            &addr,
            respond(&req, coordinator("c1"), bytes::Bytes::new()),
            now,
        );
        let (addr, req) = next_request(&mut core, &mut now);
        let answer = described(ErrorCode::TransactionalIdNotFound);
        core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), now);
        let results = core.take_results();
        let [(_, Err(e))] = results.as_slice() else {
            panic!("{results:?}")
        };
        assert_eq!(e.error_code(), Some(ErrorCode::TransactionalIdNotFound));
        assert!(e.to_string().contains("transactional id tx"), "{e}");
    }

    #[test]
    fn list_goes_to_the_broker_it_names_and_sorts_by_id() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        core.submit(
            AdminOp::ListTransactions {
                broker: Some("b2:1".into()),
            },
            0,
        )
        .unwrap();
        let mut now = 0u64;
        let (addr, req) = next_request(&mut core, &mut now);
        assert_eq!(addr, "b2:1");
        assert!(matches!(
            req.header.body,
            RequestBodyT::ListTransactionsRequest(_)
        ));
        let listed = |id: &str, state: &str| {
            let mut t = ListedTransactionT::default();
            t.transactional_id = id.into();
            t.transaction_state = Some(state.into());
            t.producer_id = 9;
            t.producer_epoch = 1;
            t
        };
        let mut r = ListTransactionsResponseT::default();
        r.transaction_states = Some(vec![listed("b", "Empty"), listed("a", "Ongoing")]);
        let answer = ResponseBodyT::ListTransactionsResponse(Box::new(r));
        core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), now);
        let results = core.take_results();
        let [(_, Ok(AdminOutcome::ListTransactions(l)))] = results.as_slice() else {
            panic!("{results:?}")
        };
        let ids: Vec<(&str, &str, i16)> = l
            .iter()
            .map(|t| {
                (
                    t.transactional_id.as_str(),
                    t.state.as_str(),
                    t.producer_epoch,
                )
            })
            .collect();
        assert_eq!(ids, vec![("a", "Ongoing", 1), ("b", "Empty", 1)]);
    }
}
