//! One core's transaction coordinator (DESIGN §9): the transactional ids whose
//! `__transaction_state` partition this core leads, and the rules of InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and the transaction timeout (Kafka's
//! `TransactionCoordinator` and `TransactionMetadata`).
//!
//! Sans-IO: a request either answers at once ([`Step::Answer`]) or yields the record the
//! driver must append to the id's `__transaction_state` partition ([`Step::Write`]); the
//! change takes effect, and the request is answered, only once [`TxnCoordinator::on_written`]
//! says the record is durable (a failed write leaves the state as it was and the client is told
//! NOT_COORDINATOR, as Kafka's coordinator answers after losing its partition). While a
//! record is pending every other request for the id gets CONCURRENT_TRANSACTIONS, which clients
//! retry. A durable PrepareCommit or PrepareAbort asks for markers
//! ([`TxnAction::WriteMarkers`]); once they are written ([`TxnCoordinator::on_markers_written`])
//! the CompleteCommit or CompleteAbort record follows — with the next transaction's Ongoing
//! record behind it in the same write when the producer's AddPartitionsToTxn is already
//! waiting ([`TxnCoordinator::complete_then_add`]): one append and one fdatasync instead of two
//! in a row, on the path of every back-to-back transaction. The markers carry their Prepare record's
//! offset in `__transaction_state` (the *decision offset*), so a partition can refuse a late
//! copy of an older transaction's marker (`super::marker_verdict`): the coordinator learns each
//! record's offset when it is durable ([`TxnCoordinator::on_written`]) or replayed.
//!
//! Promises: a producer epoch never goes back for a producer id; a request carrying an epoch
//! other than the current one never changes anything (PRODUCER_FENCED); a transaction is
//! completed only with markers for exactly the partitions it added; an open transaction past
//! its timeout is aborted with the epoch bumped, so its producer is fenced. Bounded: one
//! pending record per id; ids come only from InitProducerId (the API layer caps their count).
//!
//! Leadership: [`TxnCoordinator::replay`] rebuilds the ids from their partition's records
//! (`super::records`), [`TxnCoordinator::resume`] names the markers a prepared transaction
//! still needs, [`TxnCoordinator::unload`] forgets a partition's ids. Not here yet: expiry of
//! idle ids (`transactional.id.expiration.ms`). KIP-890's partition check is [`super::verify`].
//!
//! Planted (only with the `planted-bugs` feature, for the simulator): `marker-on-some-partitions`
//! makes [`TxnAction::WriteMarkers`] name only the first partition (`crate::planted`).

use std::collections::{BTreeMap, BTreeSet};

use spool_error_code::ErrorCode;

use super::state::{TxnMetadata, TxnState};
use crate::topic_partition::TopicPartition;

/// Kafka's `transaction.max.timeout.ms` default: 15 minutes.
pub const TRANSACTION_MAX_TIMEOUT_MS: u32 = 900_000;

/// What a request comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Answer now.
    Answer(Result<(), ErrorCode>),
    /// Append `record` to the id's `__transaction_state` partition and call
    /// [`TxnCoordinator::on_written`]; then answer `answer` (NOT_COORDINATOR if the write
    /// failed).
    Write {
        record: TxnMetadata,
        answer: Result<(), ErrorCode>,
    },
}

/// Work the driver must do after a durable record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnAction {
    /// Write a commit (or abort) marker for (`producer_id`, `producer_epoch`) to each partition,
    /// then call [`TxnCoordinator::on_markers_written`].
    WriteMarkers {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        partitions: Vec<TopicPartition>,
        /// The Prepare record's offset in `__transaction_state` (-1 if unknown).
        decision_offset: i64,
    },
}

/// An AddPartitionsToTxn waiting while its producer's previous transaction completes (it was
/// refused CONCURRENT_TRANSACTIONS), to fold into the completing write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextAdd {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
}

#[derive(Debug)]
struct Entry {
    current: TxnMetadata,
    /// The record being written, and the state it brings.
    pending: Option<TxnMetadata>,
    /// Where the record that made `current` is in `__transaction_state` (None: not durable
    /// yet, a brand-new id).
    offset: Option<u64>,
}

/// The coordinator's ids (module docs).
#[derive(Debug)]
pub struct TxnCoordinator {
    txns: BTreeMap<String, Entry>,
    max_timeout_ms: u32,
}

impl TxnCoordinator {
    pub fn new(max_timeout_ms: u32) -> Self {
        Self {
            txns: BTreeMap::new(),
            max_timeout_ms,
        }
    }

    /// The id's durable metadata.
    pub fn describe(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id).map(|e| &e.current)
    }

    /// Every id's durable metadata, by id.
    pub fn list(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.txns.values().map(|e| &e.current)
    }

    /// InitProducerId with a transactional id. On success the answer is the written record's
    /// producer id and epoch. `expected` is KIP-360's current (id, epoch) of a producer that
    /// already has one; `new_producer_id` allocates an id (None: none available yet).
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: u32,
        expected: Option<(i64, i16)>,
        now_ms: u64,
        new_producer_id: &mut dyn FnMut() -> Option<i64>,
    ) -> Step {
        if transactional_id.is_empty() {
            return Step::Answer(Err(ErrorCode::InvalidRequest));
        }
        if timeout_ms == 0 || timeout_ms > self.max_timeout_ms {
            return Step::Answer(Err(ErrorCode::InvalidTransactionTimeout));
        }
        let Some(entry) = self.txns.get(transactional_id) else {
            let Some(pid) = new_producer_id() else {
                return Step::Answer(Err(ErrorCode::CoordinatorLoadInProgress));
            };
            let fresh = TxnMetadata::new(transactional_id, pid, timeout_ms, now_ms);
            let mut record = fresh.transition(TxnState::Empty, now_ms);
            record.producer_epoch = 0;
            self.txns.insert(
                transactional_id.to_string(),
                Entry {
                    current: fresh,
                    pending: Some(record.clone()),
                    offset: None,
                },
            );
            return Step::Write {
                record,
                answer: Ok(()),
            };
        };
        if entry.pending.is_some() {
            return Step::Answer(Err(ErrorCode::ConcurrentTransactions));
        }
        let current = &entry.current;
        if let Some(e) = expected {
            if e != (current.producer_id, current.producer_epoch) {
                return Step::Answer(Err(ErrorCode::ProducerFenced));
            }
        }
        let record = match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Step::Answer(Err(ErrorCode::ConcurrentTransactions));
            }
            TxnState::Dead => return Step::Answer(Err(ErrorCode::ConcurrentTransactions)),
            // Fence the producer of the open transaction and abort it; the caller retries and
            // then finds it complete.
            TxnState::Ongoing => {
                let record = fenced_abort(current, now_ms);
                return self.pend(
                    transactional_id,
                    record,
                    Err(ErrorCode::ConcurrentTransactions),
                );
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut record = current.transition(TxnState::Empty, now_ms);
                record.timeout_ms = timeout_ms;
                record.partitions.clear();
                record.txn_start_ms = 0;
                if current.producer_epoch >= i16::MAX - 1 {
                    // The epoch is exhausted: a new producer id starts at epoch 0.
                    let Some(pid) = new_producer_id() else {
                        return Step::Answer(Err(ErrorCode::CoordinatorLoadInProgress));
                    };
                    record.producer_id = pid;
                    record.producer_epoch = 0;
                } else {
                    record.producer_epoch = current.producer_epoch + 1;
                }
                record
            }
        };
        self.pend(transactional_id, record, Ok(()))
    }

    /// AddPartitionsToTxn, and AddOffsetsToTxn with the group's `__consumer_offsets` partition.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        now_ms: u64,
    ) -> Step {
        let current = match self.check_producer(transactional_id, producer_id, producer_epoch) {
            Ok(current) => current,
            Err(code) => return Step::Answer(Err(code)),
        };
        match current.state {
            TxnState::Empty
            | TxnState::Ongoing
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort => {}
            _ => return Step::Answer(Err(ErrorCode::ConcurrentTransactions)),
        }
        let adds: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        if current.state == TxnState::Ongoing && adds.is_subset(&current.partitions) {
            return Step::Answer(Ok(()));
        }
        let mut record = current.transition(TxnState::Ongoing, now_ms);
        if current.state != TxnState::Ongoing {
            record.partitions.clear();
            record.txn_start_ms = now_ms;
        }
        record.partitions.extend(adds);
        self.pend(transactional_id, record, Ok(()))
    }

    /// EndTxn: commit (or abort) the open transaction.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: u64,
    ) -> Step {
        let current = match self.check_producer(transactional_id, producer_id, producer_epoch) {
            Ok(current) => current,
            Err(code) => return Step::Answer(Err(code)),
        };
        let answer = match (current.state, commit) {
            (TxnState::Ongoing, _) => {
                let next = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                let record = current.transition(next, now_ms);
                return self.pend(transactional_id, record, Ok(()));
            }
            // A retry of an EndTxn that already went through.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            _ => Err(ErrorCode::InvalidTxnState),
        };
        Step::Answer(answer)
    }

    /// Aborts, fencing their producers, the open transactions past their timeout at `now_ms`:
    /// the records to write (each pending like a request's).
    pub fn expire(&mut self, now_ms: u64) -> Vec<TxnMetadata> {
        let due: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, e)| {
                e.pending.is_none()
                    && e.current.state == TxnState::Ongoing
                    && e.current.txn_start_ms + u64::from(e.current.timeout_ms) <= now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let record = fenced_abort(&self.txns.get(&id)?.current, now_ms);
                match self.pend(&id, record, Ok(())) {
                    Step::Write { record, .. } => Some(record),
                    Step::Answer(_) => None,
                }
            })
            .collect()
    }

    /// The pending record of `transactional_id` is durable at offset `written_at` in
    /// `__transaction_state`, or its write failed (None). A durable PrepareCommit or
    /// PrepareAbort asks for its markers.
    ///
    /// # Panics
    /// If the offset is not above the id's previous record's: the driver's bug, never input.
    pub fn on_written(
        &mut self,
        transactional_id: &str,
        written_at: Option<u64>,
    ) -> Vec<TxnAction> {
        let Some(entry) = self.txns.get_mut(transactional_id) else {
            return Vec::new();
        };
        let Some(next) = entry.pending.take() else {
            return Vec::new();
        };
        let Some(offset) = written_at else {
            // A brand-new id that never became durable is forgotten.
            if entry.current.producer_epoch < 0 {
                self.txns.remove(transactional_id);
            }
            return Vec::new();
        };
        assert!(
            next.producer_id != entry.current.producer_id
                || next.producer_epoch >= entry.current.producer_epoch,
            "{transactional_id}: epoch {} after {}",
            next.producer_epoch,
            entry.current.producer_epoch
        );
        // The id's records go to one partition, in order: what makes decision offsets grow.
        assert!(
            entry.offset.is_none_or(|before| offset > before),
            "{transactional_id}: record at {offset} after {:?}",
            entry.offset
        );
        entry.current = next;
        entry.offset = Some(offset);
        markers(&entry.current, entry.offset).into_iter().collect()
    }

    /// Every marker of the id's prepared transaction is written: the completing record to write
    /// (None if the id is not prepared, or a record is already pending). Called again after a
    /// failed write of that record.
    pub fn on_markers_written(
        &mut self,
        transactional_id: &str,
        now_ms: u64,
    ) -> Option<TxnMetadata> {
        let mut records = self.complete_then_add(transactional_id, now_ms, None);
        assert!(records.len() <= 1, "nothing to fold, one record");
        records.pop()
    }

    /// [`Self::on_markers_written`], with `next` — an AddPartitionsToTxn of the id's current
    /// producer (same id and epoch) waiting for the completion — folded in: the records to
    /// write in this order as one write, Complete then the next transaction's Ongoing (as
    /// [`Self::add_partitions`] would make it right after the Complete). The last one is the
    /// pending record: [`Self::on_written`] takes the last record's offset, and both records
    /// take effect together or, if the write fails, neither. A `next` of another producer or
    /// epoch is left out (the request, decided again, gets its own answer). Empty when nothing
    /// is to be written.
    pub fn complete_then_add(
        &mut self,
        transactional_id: &str,
        now_ms: u64,
        next: Option<&NextAdd>,
    ) -> Vec<TxnMetadata> {
        let Some(entry) = self.txns.get(transactional_id) else {
            return Vec::new();
        };
        if entry.pending.is_some() {
            return Vec::new();
        }
        let done = match entry.current.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Vec::new(),
        };
        let mut complete = entry.current.transition(done, now_ms);
        complete.partitions.clear();
        complete.txn_start_ms = 0;
        let fold = next.filter(|n| {
            (n.producer_id, n.producer_epoch) == (complete.producer_id, complete.producer_epoch)
                && !n.partitions.is_empty()
        });
        let mut records = vec![complete];
        if let Some(n) = fold {
            let mut ongoing = records[0].transition(TxnState::Ongoing, now_ms);
            ongoing.txn_start_ms = now_ms;
            ongoing.partitions.extend(n.partitions.iter().cloned());
            records.push(ongoing);
        }
        let last = records
            .last()
            .cloned()
            .expect("at least the Complete record");
        match self.pend(transactional_id, last, Ok(())) {
            Step::Write { .. } => records,
            Step::Answer(_) => Vec::new(),
        }
    }

    /// Replays one `__transaction_state` record, at `offset` (in log order, on becoming the
    /// partition's leader): the newest record per id wins, a tombstone (`None`) removes it.
    pub fn replay(&mut self, transactional_id: &str, metadata: Option<TxnMetadata>, offset: u64) {
        match metadata {
            Some(current) => {
                self.txns.insert(
                    transactional_id.to_string(),
                    Entry {
                        current,
                        pending: None,
                        offset: Some(offset),
                    },
                );
            }
            None => {
                self.txns.remove(transactional_id);
            }
        }
    }

    /// After a replay: the markers of every prepared transaction, to write again (a previous
    /// coordinator may have died between prepare and complete; markers are idempotent).
    pub fn resume(&self) -> Vec<TxnAction> {
        self.txns
            .values()
            .filter(|e| e.pending.is_none())
            .filter_map(|e| markers(&e.current, e.offset))
            .collect()
    }

    /// Forgets the ids `moved` names (their partition's leadership moved away); records
    /// pending for them are dropped unanswered, as their partition can no longer take them.
    pub fn unload(&mut self, moved: impl Fn(&str) -> bool) {
        self.txns.retain(|id, _| !moved(id));
    }

    /// The id's current metadata if (`producer_id`, `producer_epoch`) is its producer and no
    /// record is pending.
    fn check_producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, ErrorCode> {
        let entry = self
            .txns
            .get(transactional_id)
            .filter(|e| e.current.producer_epoch >= 0)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if entry.current.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if entry.current.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if entry.pending.is_some() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        Ok(&entry.current)
    }

    fn pend(
        &mut self,
        transactional_id: &str,
        record: TxnMetadata,
        answer: Result<(), ErrorCode>,
    ) -> Step {
        match self.txns.get_mut(transactional_id) {
            Some(entry) if entry.pending.is_none() => {
                entry.pending = Some(record.clone());
                Step::Write { record, answer }
            }
            _ => Step::Answer(Err(ErrorCode::ConcurrentTransactions)),
        }
    }
}

/// The markers a prepared transaction needs (None in any other state), `offset` being where its
/// Prepare record is.
fn markers(m: &TxnMetadata, offset: Option<u64>) -> Option<TxnAction> {
    match m.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => {
            let mut partitions: Vec<TopicPartition> = m.partitions.iter().cloned().collect();
            if planted_marker_on_some_partitions() {
                partitions.truncate(1);
            }
            Some(TxnAction::WriteMarkers {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                commit: m.state == TxnState::PrepareCommit,
                partitions,
                decision_offset: offset.and_then(|o| i64::try_from(o).ok()).unwrap_or(-1),
            })
        }
        _ => None,
    }
}

/// Whether this thread plants `marker-on-some-partitions` (`crate::planted`).
#[cfg(feature = "planted-bugs")]
fn planted_marker_on_some_partitions() -> bool {
    crate::planted::thread_planted(crate::planted::PlantedBug::MarkerOnSomePartitions)
}

#[cfg(not(feature = "planted-bugs"))]
fn planted_marker_on_some_partitions() -> bool {
    false
}

/// The open transaction of `current` aborted with the epoch bumped (when it can be), so its
/// producer can write no more (Kafka's PrepareEpochFence, then PrepareAbort).
fn fenced_abort(current: &TxnMetadata, now_ms: u64) -> TxnMetadata {
    let fencing = current.transition(TxnState::PrepareEpochFence, now_ms);
    let mut record = fencing.transition(TxnState::PrepareAbort, now_ms);
    if current.producer_epoch < i16::MAX - 1 {
        record.producer_epoch = current.producer_epoch + 1;
    }
    record
}
