//! What a front asks the transaction coordinator of an id (a mesh call to the core owning the
//! id's `__transaction_state` partition), and what comes back. Data only.

use crate::requests::TopicPartition;
use spool_core::txn::TxnMetadata;
use spool_protocol::ErrorCode;

/// One transaction request for the coordinator core.
#[derive(Debug, Clone)]
pub enum TxnCall {
    /// InitProducerId with a transactional id. `fresh_producer_id` is an unused producer id the
    /// serving core drew for the coordinator, used only if the id needs a new one.
    InitProducerId {
        transactional_id: String,
        timeout_ms: u32,
        /// KIP-360: the (producer id, epoch) the producer has now, if any.
        expected: Option<(i64, i16)>,
        fresh_producer_id: Option<i64>,
    },
    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets`
    /// partition).
    AddPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
    /// A partition leader's KIP-890 check: may `tp` take the producer's first transactional
    /// batch (`spool_core::txn::verify`)?
    Verify {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        tp: TopicPartition,
    },
    /// DescribeTransactions.
    Describe(Vec<String>),
    /// ListTransactions: every id this core coordinates.
    List,
}

/// The coordinator core's answer.
#[derive(Debug, Clone)]
pub enum TxnAnswer {
    /// InitProducerId: the producer id and epoch.
    Producer(Result<(i64, i16), ErrorCode>),
    /// AddPartitions, EndTxn and Verify.
    Done(Result<(), ErrorCode>),
    /// Describe: each id's metadata, or why not (NOT_COORDINATOR, TRANSACTIONAL_ID_NOT_FOUND).
    Described(Vec<(String, Result<TxnMetadata, ErrorCode>)>),
    Listed(Vec<TxnMetadata>),
    /// The coordinator stopped, or does not serve the id's partition (yet).
    Refused(ErrorCode),
}
