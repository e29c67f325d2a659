//! One transactional id's state (Kafka's `TransactionMetadata`): its producer id and epoch, its
//! timeout, the partitions of its open transaction, and where it stands.
//!
//! The states and which may follow which are Kafka's (`TransactionState`), ids included, since
//! they are what `__transaction_state` records and DescribeTransactions report. A change is only
//! ever made through [`TxnMetadata::transition`], which asserts it is one of those.

use std::collections::BTreeSet;

use crate::topic_partition::TopicPartition;

/// Where a transactional id stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    /// No transaction open (a new id, or the last one completed and the epoch was bumped).
    Empty,
    /// Partitions (or a group's offsets) were added: records may be written.
    Ongoing,
    /// EndTxn(commit) is durable: commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId is durable: abort markers are being
    /// written.
    PrepareAbort,
    /// Every partition has its commit marker.
    CompleteCommit,
    /// Every partition has its abort marker.
    CompleteAbort,
    /// Removed (expired id); nothing follows.
    Dead,
    /// In memory only: the epoch is being bumped to fence the current producer before an abort.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The state with Kafka's id `id`.
    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Kafka's id of the state, as `__transaction_state` and the admin APIs carry it.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// Kafka's name of the state (DescribeTransactions, ListTransactions' filter).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Whether `self` may follow `previous` (Kafka's `validPreviousStates`).
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => previous == Ongoing,
            PrepareAbort => matches!(previous, Ongoing | PrepareEpochFence),
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
            Dead => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => previous == Ongoing,
        }
    }

    /// A transaction is open: its partitions may hold records without a marker yet.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            TxnState::Ongoing
                | TxnState::PrepareCommit
                | TxnState::PrepareAbort
                | TxnState::PrepareEpochFence
        )
    }
}

/// One transactional id's metadata: what a `__transaction_state` record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for at InitProducerId.
    pub timeout_ms: u32,
    pub state: TxnState,
    /// The partitions of the open (or just completed) transaction, `__consumer_offsets`
    /// partitions of AddOffsetsToTxn included.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction's first partition was added (0 when none is open).
    pub txn_start_ms: u64,
    pub last_update_ms: u64,
}

impl TxnMetadata {
    /// A new id, before its first InitProducerId completes.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: u32, now_ms: u64) -> Self {
        Self {
            transactional_id: transactional_id.to_string(),
            producer_id,
            // Bumped to 0 by the first InitProducerId.
            producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            txn_start_ms: 0,
            last_update_ms: now_ms,
        }
    }

    /// This metadata moved to `next` at `now_ms` (a copy: the coordinator keeps it pending
    /// until its record is durable).
    ///
    /// # Panics
    /// If `next` may not follow the current state: a coordinator bug, never input.
    pub fn transition(&self, next: TxnState, now_ms: u64) -> TxnMetadata {
        assert!(
            next.may_follow(self.state),
            "{}: {:?} may not follow {:?}",
            self.transactional_id,
            next,
            self.state
        );
        let mut m = self.clone();
        m.state = next;
        m.last_update_ms = now_ms;
        m
    }
}
