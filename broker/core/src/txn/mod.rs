//! Transactions (DESIGN §9, issue 18): the transaction coordinator's decisions and a partition's
//! transaction state, sans-IO.
//!
//! Transactional id T lives on the leader of partition `java_string_hash(T) % N` of the compacted
//! internal topic `__transaction_state` (N = `transaction.state.log.num.partitions`, 50 by
//! default, Kafka's formula), like a group on `__consumer_offsets`.
//! - [`state`]: one id's metadata and Kafka's states and transitions;
//! - [`records`]: its `__transaction_state` records, in Kafka's layout;
//! - [`coordinator`]: one core's ids and the rules of InitProducerId, AddPartitionsToTxn,
//!   AddOffsetsToTxn, EndTxn and the transaction timeout, each change durable before it counts;
//! - [`partition_txns`]: one partition's side: its open and aborted transactions and its last
//!   stable offset, fed by the partition's appends, markers and high watermark;
//! - [`marker_verdict`]: whether a partition appends a marker, refusing a late copy of an older
//!   transaction's (decision offsets);
//! - [`verify`]: KIP-890 part 1, whether a partition may take a producer's first
//!   transactional batch of a transaction.
//!
//! The glommio side (the driver, the marker writer, the partitions' use of these) is
//! `broker/src/txn`, `broker/src/txn_markers.rs` and `broker/src/partition/txn.rs`.

pub mod coordinator;
pub mod marker_verdict;
pub mod partition_txns;
pub mod records;
pub mod state;
pub mod verify;

#[cfg(test)]
mod fold_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod verify_tests;

pub use coordinator::{NextAdd, Step, TxnAction, TxnCoordinator, TRANSACTION_MAX_TIMEOUT_MS};
pub use marker_verdict::{marker_verdict, MarkerVerdict};
pub use state::{TxnMetadata, TxnState};

/// The internal topic holding the transaction coordinators' state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's `transaction.state.log.num.partitions` default.
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// The `__transaction_state` partition of `transactional_id` (Kafka's formula, as for groups).
pub fn coordinator_partition(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::coordinator_partition(transactional_id, partitions)
}
