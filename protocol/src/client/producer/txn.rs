//! The transactional producer (KIP-98) on top of [`ProducerCore`]: with
//! `ProducerConfig::transactional_id` set, the core finds the id's coordinator (FindCoordinator,
//! key type Transaction), takes its producer id and epoch from InitProducerId with the id (which
//! fences an older instance and aborts its open transaction), and then writes only inside
//! transactions: [`ProducerCore::begin_transaction`], sends, then
//! [`ProducerCore::commit_transaction`] or [`ProducerCore::abort_transaction`], whose outcome
//! [`ProducerCore::take_transaction_outcome`] reports.
//!
//! Promises: a batch goes to a partition only after AddPartitionsToTxn added the partition to
//! the transaction (so the broker's KIP-890 check passes); EndTxn(commit) is sent only once every
//! record of the transaction has its delivery report, all of them written — a record that
//! failed makes the transaction abortable (the commit fails; abort it); abort fails the records
//! not sent yet, waits for those in flight, then sends EndTxn(abort); a transaction that added
//! no partition ends without EndTxn (it never began at the coordinator). PRODUCER_FENCED or
//! INVALID_PRODUCER_EPOCH (a newer instance took the id) is fatal: nothing more is sent.
//! Coordinator requests go one at a time; NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
//! COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS are retried with backoff (the first
//! two look the coordinator up again). After an aborted transaction whose records failed the
//! partitions' sequences are unknown, so the producer takes a new epoch (InitProducerId with its
//! current id and epoch, KIP-360).
//!
//! [`ProducerCore::send_offsets_to_transaction`] commits a consumer group's offsets inside the
//! transaction: AddOffsetsToTxn (the group's `__consumer_offsets` partition joins it), then
//! TxnOffsetCommit to the group's coordinator (found with FindCoordinator, key type Group);
//! its outcome is [`ProducerCore::take_offsets_outcome`], and EndTxn waits for it.

use std::collections::BTreeSet;

use super::{Pending, ProducerCore};
use crate::client::net::{backoff_ms, NetAction};
use crate::client::{ClientError, TopicPartition};
use crate::codec::Response;
use crate::wire::{
    AddOffsetsToTxnRequestT, AddPartitionsToTxnRequestT, AddPartitionsToTxnTopicT, CoordinatorType,
    EndTxnRequestT, FindCoordinatorRequestT, InitProducerIdRequestT, OffsetCommitRequestPartitionT,
    OffsetCommitRequestTopicT, RequestBodyT, ResponseBodyT, TxnOffsetCommitRequestT,
};
use crate::ErrorCode;

/// Where a transactional producer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnPhase {
    /// Finding the coordinator and taking a producer id.
    Initializing,
    /// No transaction open: `begin_transaction` may start one.
    Ready,
    InTransaction,
    /// Sending what is queued, then EndTxn(commit).
    Committing,
    /// Failing what is not sent, waiting for what is in flight, then EndTxn(abort).
    Aborting,
    /// A record of the open transaction failed: only `abort_transaction` is allowed.
    Abortable(ClientError),
    /// The producer can do nothing more (fenced by a newer instance, or refused for good).
    Fatal(ClientError),
}

/// A coordinator request in flight.
#[derive(Debug)]
pub(super) enum TxnPending {
    FindCoordinator,
    InitProducerId,
    AddPartitions(Vec<TopicPartition>),
    EndTxn { commit: bool },
    AddOffsets,
    FindGroupCoordinator,
    TxnOffsetCommit,
}

/// Offsets on their way into the open transaction (module docs).
#[derive(Debug)]
struct PendingOffsets {
    group_id: String,
    offsets: Vec<(TopicPartition, i64)>,
    /// AddOffsetsToTxn answered NONE.
    added: bool,
    /// The group's coordinator, once found.
    group_coordinator: Option<String>,
}

/// The transaction state the core keeps (module docs).
#[derive(Debug)]
pub(super) struct TxnManager {
    transactional_id: String,
    timeout_ms: u32,
    pub(super) phase: TxnPhase,
    coordinator: Option<String>,
    in_flight: bool,
    attempts: u32,
    retry_at_ms: u64,
    /// Partitions the coordinator added to the open transaction.
    pub(super) added: BTreeSet<TopicPartition>,
    outcome: Option<Result<(), ClientError>>,
    /// A record of the open transaction failed: after its abort, take a new epoch.
    failed: bool,
    /// The (id, epoch) to bump at the next InitProducerId (KIP-360), if any.
    expected: Option<(i64, i16)>,
    offsets: Option<PendingOffsets>,
    offsets_outcome: Option<Result<(), ClientError>>,
    /// A group's offsets joined the open transaction (so EndTxn must go to the coordinator).
    offsets_joined: bool,
}

impl TxnManager {
    pub(super) fn new(transactional_id: String, timeout_ms: u32) -> Self {
        Self {
            transactional_id,
            timeout_ms,
            phase: TxnPhase::Initializing,
            coordinator: None,
            in_flight: false,
            attempts: 0,
            retry_at_ms: 0,
            added: BTreeSet::new(),
            outcome: None,
            failed: false,
            expected: None,
            offsets: None,
            offsets_outcome: None,
            offsets_joined: false,
        }
    }

    /// Whether a batch of `tp` may be sent now.
    pub(super) fn may_send(&self, tp: &TopicPartition) -> bool {
        matches!(
            self.phase,
            TxnPhase::InTransaction | TxnPhase::Committing | TxnPhase::Aborting
        ) && self.added.contains(tp)
    }

    /// When the next coordinator request may go (None: it waits for something else).
    pub(super) fn next_wakeup_ms(&self) -> Option<u64> {
        (!self.in_flight && self.attempts > 0).then_some(self.retry_at_ms)
    }
}

impl ProducerCore {
    /// Where the transactional producer stands (None: not transactional).
    pub fn transaction_phase(&self) -> Option<&TxnPhase> {
        self.txn.as_ref().map(|t| &t.phase)
    }

    /// Whether `init_transactions` is over: Ok once the producer id is taken, the error when
    /// it never will be (fatal, or not a transactional producer); None while it goes on.
    pub fn transactions_initialized(&self) -> Option<Result<(), ClientError>> {
        match self.transaction_phase() {
            None => Some(Err(ClientError::Transaction(
                "not a transactional producer (no transactional_id)".into(),
            ))),
            Some(TxnPhase::Initializing) => None,
            Some(TxnPhase::Fatal(e)) => Some(Err(e.clone())),
            Some(_) => Some(Ok(())),
        }
    }

    /// Opens a transaction: sends are allowed until it is committed or aborted.
    pub fn begin_transaction(&mut self) -> Result<(), ClientError> {
        let t = self.txn_mut()?;
        match &t.phase {
            TxnPhase::Ready => {
                t.phase = TxnPhase::InTransaction;
                t.outcome = None;
                Ok(())
            }
            other => Err(ClientError::Transaction(format!(
                "begin_transaction in phase {other:?}"
            ))),
        }
    }

    /// Commits `offsets` (each partition's next offset to read) of `group_id` inside the open
    /// transaction: they count only if it commits. Its outcome:
    /// [`Self::take_offsets_outcome`]; one call at a time.
    pub fn send_offsets_to_transaction(
        &mut self,
        group_id: &str,
        offsets: Vec<(TopicPartition, i64)>,
    ) -> Result<(), ClientError> {
        let t = self.txn_mut()?;
        if t.phase != TxnPhase::InTransaction || t.offsets.is_some() {
            return Err(ClientError::Transaction(format!(
                "send_offsets_to_transaction in phase {:?}{}",
                t.phase,
                if t.offsets.is_some() {
                    " (another one pending)"
                } else {
                    ""
                }
            )));
        }
        if group_id.is_empty() {
            return Err(ClientError::Transaction("empty group id".into()));
        }
        t.offsets_outcome = None;
        t.offsets = Some(PendingOffsets {
            group_id: group_id.to_string(),
            offsets,
            added: false,
            group_coordinator: None,
        });
        self.drive_needed = true;
        Ok(())
    }

    /// The outcome of the last `send_offsets_to_transaction` (taken once).
    pub fn take_offsets_outcome(&mut self) -> Option<Result<(), ClientError>> {
        self.txn.as_mut().and_then(|t| t.offsets_outcome.take())
    }

    /// Starts committing the open transaction (its outcome: [`Self::take_transaction_outcome`]).
    /// An abortable transaction answers its error: abort it.
    pub fn commit_transaction(&mut self) -> Result<(), ClientError> {
        let t = self.txn_mut()?;
        match &t.phase {
            TxnPhase::InTransaction => t.phase = TxnPhase::Committing,
            TxnPhase::Abortable(e) => return Err(e.clone()),
            other => {
                return Err(ClientError::Transaction(format!(
                    "commit_transaction in phase {other:?}"
                )))
            }
        }
        self.flush();
        self.drive_needed = true;
        Ok(())
    }

    /// Starts aborting the open (or abortable) transaction: records not sent yet fail.
    pub fn abort_transaction(&mut self) -> Result<(), ClientError> {
        let t = self.txn_mut()?;
        match &t.phase {
            TxnPhase::InTransaction | TxnPhase::Abortable(_) => {
                t.phase = TxnPhase::Aborting;
                if t.offsets.take().is_some() {
                    t.offsets_outcome = Some(Err(ClientError::Transaction(
                        "the transaction was aborted".into(),
                    )));
                }
            }
            other => {
                return Err(ClientError::Transaction(format!(
                    "abort_transaction in phase {other:?}"
                )))
            }
        }
        let aborted = ClientError::Transaction("the transaction was aborted".into());
        for (_, records, reserved) in self.acc.expire(u64::MAX) {
            self.fail_records(&records, reserved, &aborted);
        }
        self.flush();
        self.drive_needed = true;
        Ok(())
    }

    /// The outcome of the last commit or abort, once EndTxn answered (taken once).
    pub fn take_transaction_outcome(&mut self) -> Option<Result<(), ClientError>> {
        self.txn.as_mut().and_then(|t| t.outcome.take())
    }

    fn txn_mut(&mut self) -> Result<&mut TxnManager, ClientError> {
        self.txn
            .as_mut()
            .ok_or_else(|| ClientError::Transaction("not a transactional producer".into()))
    }

    /// Whether `send` may take a record now (always, unless transactional).
    pub(super) fn txn_refuses_send(&self) -> Option<ClientError> {
        let t = self.txn.as_ref()?;
        match &t.phase {
            TxnPhase::InTransaction => None,
            TxnPhase::Fatal(e) | TxnPhase::Abortable(e) => Some(e.clone()),
            other => Some(ClientError::Transaction(format!(
                "send outside a transaction (phase {other:?}): call begin_transaction"
            ))),
        }
    }

    /// A record of the transaction failed: commit is no longer possible.
    pub(super) fn txn_record_failed(&mut self, error: &ClientError) {
        if let Some(t) = self.txn.as_mut() {
            if matches!(t.phase, TxnPhase::InTransaction | TxnPhase::Committing) {
                t.failed = true;
                t.phase = TxnPhase::Abortable(error.clone());
                t.outcome = Some(Err(error.clone()));
            }
        }
    }

    /// The next coordinator request, if one is due.
    pub(super) fn txn_poll(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        let idle = self.is_idle() && self.pipes.waiting().next().is_none();
        let queued: Vec<TopicPartition> = self.acc.queued_partitions().cloned().collect();
        let producer = self.producer;
        let Some(t) = self.txn.as_mut() else {
            return;
        };
        if t.in_flight || now_ms < t.retry_at_ms || matches!(t.phase, TxnPhase::Fatal(_)) {
            return;
        }
        let (addr, body, pending) = match &t.coordinator {
            None => {
                let Some(addr) = self.metadata.any_broker() else {
                    return;
                };
                let mut r = FindCoordinatorRequestT::default();
                r.key = t.transactional_id.clone();
                r.key_type = CoordinatorType::Transaction;
                (
                    addr,
                    RequestBodyT::FindCoordinatorRequest(Box::new(r)),
                    TxnPending::FindCoordinator,
                )
            }
            Some(addr) if producer.is_none() => {
                let mut r = InitProducerIdRequestT::default();
                r.transactional_id = Some(t.transactional_id.clone());
                r.transaction_timeout_ms = i32::try_from(t.timeout_ms).unwrap_or(i32::MAX);
                (r.producer_id, r.producer_epoch) = t.expected.unwrap_or((-1, -1));
                (
                    addr.clone(),
                    RequestBodyT::InitProducerIdRequest(Box::new(r)),
                    TxnPending::InitProducerId,
                )
            }
            Some(addr) => {
                let Some((producer_id, producer_epoch)) = producer else {
                    return;
                };
                let adding: Vec<TopicPartition> = match t.phase {
                    TxnPhase::InTransaction | TxnPhase::Committing => queued
                        .into_iter()
                        .filter(|tp| !t.added.contains(tp))
                        .collect(),
                    _ => Vec::new(),
                };
                let ending = match t.phase {
                    TxnPhase::Committing => Some(true),
                    TxnPhase::Aborting => Some(false),
                    _ => None,
                };
                if let Some(o) = t
                    .offsets
                    .as_ref()
                    .filter(|_| matches!(t.phase, TxnPhase::InTransaction | TxnPhase::Committing))
                {
                    let (addr, body, pending) =
                        offsets_request(&t.transactional_id, producer_id, producer_epoch, o, addr);
                    match addr {
                        Some(a) => (a, body, pending),
                        None => match self.metadata.any_broker() {
                            Some(a) => (a, body, pending),
                            None => return,
                        },
                    }
                } else if !adding.is_empty() {
                    let mut r = AddPartitionsToTxnRequestT::default();
                    r.transactional_id = t.transactional_id.clone();
                    r.producer_id = producer_id;
                    r.producer_epoch = producer_epoch;
                    r.topics = Some(by_topic(&adding));
                    (
                        addr.clone(),
                        RequestBodyT::AddPartitionsToTxnRequest(Box::new(r)),
                        TxnPending::AddPartitions(adding),
                    )
                } else if let (Some(commit), true, true) =
                    (ending, idle, t.added.is_empty() && !t.offsets_joined)
                {
                    // Nothing reached the coordinator: the transaction never began there, so
                    // it ends here (Kafka's client does the same).
                    t.phase = TxnPhase::Ready;
                    t.outcome = Some(if commit {
                        Ok(())
                    } else {
                        Err(ClientError::Transaction("aborted".into()))
                    });
                    self.flush_requested = self.closed;
                    return;
                } else if let (Some(commit), true) = (ending, idle) {
                    let mut r = EndTxnRequestT::default();
                    r.transactional_id = t.transactional_id.clone();
                    r.producer_id = producer_id;
                    r.producer_epoch = producer_epoch;
                    r.committed = commit;
                    (
                        addr.clone(),
                        RequestBodyT::EndTxnRequest(Box::new(r)),
                        TxnPending::EndTxn { commit },
                    )
                } else {
                    return;
                }
            }
        };
        if let Some(a) = self.request(&addr, body, Pending::Txn(pending), now_ms) {
            if let Some(t) = self.txn.as_mut() {
                t.in_flight = true;
            }
            out.push(a);
        }
    }

    /// A coordinator request got no answer (timeout, lost connection).
    pub(super) fn txn_lost(&mut self, now_ms: u64) {
        // Lost on the way to either coordinator: both are looked up again.
        if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
            o.group_coordinator = None;
        }
        self.txn_retry(ErrorCode::NetworkException, now_ms);
    }

    fn txn_retry(&mut self, code: ErrorCode, now_ms: u64) {
        let (base, max) = (
            self.config.retry_backoff_ms,
            self.config.retry_backoff_max_ms,
        );
        if let Some(t) = self.txn.as_mut() {
            t.in_flight = false;
            t.attempts += 1;
            // CONCURRENT_TRANSACTIONS clears within a marker write: retry soon (Kafka's client
            // uses a short backoff for it too).
            t.retry_at_ms = if code == ErrorCode::ConcurrentTransactions {
                now_ms + base.min(20)
            } else {
                now_ms + backoff_ms(t.attempts, base, max)
            };
            if matches!(
                code,
                ErrorCode::NotCoordinator
                    | ErrorCode::CoordinatorNotAvailable
                    | ErrorCode::NetworkException
            ) {
                t.coordinator = None;
            }
        }
        self.drive_needed = true;
    }

    fn txn_fatal(&mut self, error: ClientError) {
        if let Some(t) = self.txn.as_mut() {
            t.in_flight = false;
            t.outcome = Some(Err(error.clone()));
            t.phase = TxnPhase::Fatal(error.clone());
        }
        self.fatal = Some(error.clone());
        for (_, records, reserved) in self.acc.expire(u64::MAX) {
            self.fail_records(&records, reserved, &error);
        }
        self.drive_needed = true;
    }

    /// A coordinator request's answer.
    pub(super) fn txn_response(&mut self, pending: TxnPending, response: Response, now_ms: u64) {
        let body = response.header.body;
        match (pending, body) {
            (TxnPending::FindCoordinator, ResponseBodyT::FindCoordinatorResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                match (code, r.host) {
                    (ErrorCode::None, Some(host)) if r.port > 0 => {
                        let t = self.txn.as_mut().expect("a transactional producer");
                        t.coordinator = Some(format!("{host}:{}", r.port));
                        t.in_flight = false;
                        t.attempts = 0;
                        t.retry_at_ms = 0;
                        self.drive_needed = true;
                    }
                    (code, _) => self.txn_retry(code, now_ms),
                }
            }
            (TxnPending::InitProducerId, ResponseBodyT::InitProducerIdResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                if code.is_ok() {
                    self.producer = Some((r.producer_id, r.producer_epoch));
                    self.sequences.clear();
                    let t = self.txn.as_mut().expect("a transactional producer");
                    t.in_flight = false;
                    t.attempts = 0;
                    t.expected = None;
                    if t.phase == TxnPhase::Initializing {
                        t.phase = TxnPhase::Ready;
                    }
                    self.drive_needed = true;
                } else {
                    self.txn_code(code, "InitProducerId", now_ms);
                }
            }
            (TxnPending::AddPartitions(tps), ResponseBodyT::AddPartitionsToTxnResponse(r)) => {
                let code = r
                    .results_by_topic
                    .iter()
                    .flatten()
                    .flat_map(|t| t.results_by_partition.iter().flatten())
                    .map(|p| ErrorCode::from(p.partition_error_code))
                    .find(|c| !c.is_ok())
                    .unwrap_or(ErrorCode::None);
                if code.is_ok() {
                    let t = self.txn.as_mut().expect("a transactional producer");
                    t.in_flight = false;
                    t.attempts = 0;
                    t.added.extend(tps);
                    self.drive_needed = true;
                } else {
                    self.txn_code(code, "AddPartitionsToTxn", now_ms);
                }
            }
            (TxnPending::EndTxn { commit }, ResponseBodyT::EndTxnResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                if code.is_ok() {
                    let t = self.txn.as_mut().expect("a transactional producer");
                    t.in_flight = false;
                    t.attempts = 0;
                    t.added.clear();
                    t.offsets_joined = false;
                    t.phase = TxnPhase::Ready;
                    t.outcome = Some(if commit {
                        Ok(())
                    } else {
                        Err(ClientError::Transaction("aborted".into()))
                    });
                    if std::mem::take(&mut t.failed) {
                        // The partitions' sequences are unknown: a new epoch (KIP-360).
                        t.expected = self.producer.take();
                        t.phase = TxnPhase::Initializing;
                    }
                    self.flush_requested = self.closed;
                    self.drive_needed = true;
                } else {
                    self.txn_code(code, "EndTxn", now_ms);
                }
            }
            (TxnPending::AddOffsets, ResponseBodyT::AddOffsetsToTxnResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                if code.is_ok() {
                    let t = self.txn.as_mut().expect("a transactional producer");
                    t.in_flight = false;
                    t.attempts = 0;
                    t.offsets_joined = true;
                    if let Some(o) = t.offsets.as_mut() {
                        o.added = true;
                    }
                    self.drive_needed = true;
                } else {
                    self.txn_code(code, "AddOffsetsToTxn", now_ms);
                }
            }
            (TxnPending::FindGroupCoordinator, ResponseBodyT::FindCoordinatorResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                match (code, r.host) {
                    (ErrorCode::None, Some(host)) if r.port > 0 => {
                        let t = self.txn.as_mut().expect("a transactional producer");
                        t.in_flight = false;
                        t.attempts = 0;
                        if let Some(o) = t.offsets.as_mut() {
                            o.group_coordinator = Some(format!("{host}:{}", r.port));
                        }
                        self.drive_needed = true;
                    }
                    (code, _) => self.group_retry(code, now_ms),
                }
            }
            (TxnPending::TxnOffsetCommit, ResponseBodyT::TxnOffsetCommitResponse(r)) => {
                let code = r
                    .topics
                    .iter()
                    .flatten()
                    .flat_map(|t| t.partitions.iter().flatten())
                    .map(|p| ErrorCode::from(p.error_code))
                    .find(|c| !c.is_ok())
                    .unwrap_or(ErrorCode::None);
                match code {
                    ErrorCode::None => {
                        let t = self.txn.as_mut().expect("a transactional producer");
                        t.in_flight = false;
                        t.attempts = 0;
                        t.offsets = None;
                        t.offsets_outcome = Some(Ok(()));
                        self.drive_needed = true;
                    }
                    ErrorCode::NotCoordinator
                    | ErrorCode::CoordinatorNotAvailable
                    | ErrorCode::CoordinatorLoadInProgress
                    | ErrorCode::ConcurrentTransactions
                    | ErrorCode::RequestTimedOut => self.group_retry(code, now_ms),
                    ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
                        self.txn_fatal(ClientError::broker(code, "TxnOffsetCommit"))
                    }
                    code => {
                        let e = ClientError::broker(code, "TxnOffsetCommit");
                        if let Some(t) = self.txn.as_mut() {
                            t.in_flight = false;
                            t.offsets = None;
                            t.offsets_outcome = Some(Err(e.clone()));
                        }
                        self.txn_record_failed(&e);
                    }
                }
            }
            _ => self.txn_retry(ErrorCode::UnknownServerError, now_ms),
        }
    }

    /// The group coordinator's error on the offsets' way: retried, looking it up again when
    /// it moved.
    fn group_retry(&mut self, code: ErrorCode, now_ms: u64) {
        if let Some(o) = self.txn.as_mut().and_then(|t| t.offsets.as_mut()) {
            if matches!(
                code,
                ErrorCode::NotCoordinator
                    | ErrorCode::CoordinatorNotAvailable
                    | ErrorCode::NetworkException
            ) {
                o.group_coordinator = None;
            }
        }
        // Not the transaction coordinator's error: keep it.
        let code = if code == ErrorCode::NetworkException {
            ErrorCode::RequestTimedOut
        } else {
            code
        };
        self.txn_retry(
            match code {
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                    ErrorCode::CoordinatorLoadInProgress
                }
                c => c,
            },
            now_ms,
        );
    }

    /// A coordinator's error: retried, or fatal.
    fn txn_code(&mut self, code: ErrorCode, what: &str, now_ms: u64) {
        match code {
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::ConcurrentTransactions
            | ErrorCode::RequestTimedOut
            | ErrorCode::NetworkException => self.txn_retry(code, now_ms),
            code => {
                let id = self
                    .txn
                    .as_ref()
                    .map(|t| t.transactional_id.clone())
                    .unwrap_or_default();
                self.txn_fatal(ClientError::broker(
                    code,
                    format!("{what} for transactional id {id}"),
                ));
            }
        }
    }
}

/// `tps` grouped by topic, as AddPartitionsToTxn names them.
fn by_topic(tps: &[TopicPartition]) -> Vec<AddPartitionsToTxnTopicT> {
    let mut out: Vec<AddPartitionsToTxnTopicT> = Vec::new();
    for tp in tps {
        match out.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.partitions.get_or_insert_with(Vec::new).push(tp.partition),
            None => {
                let mut t = AddPartitionsToTxnTopicT::default();
                t.name = tp.topic.clone();
                t.partitions = Some(vec![tp.partition]);
                out.push(t);
            }
        }
    }
    out
}

/// The next request of `o`'s way into the transaction: AddOffsetsToTxn to the transaction's
/// coordinator `coordinator`, then FindCoordinator for the group (to any broker: `None`), then
/// TxnOffsetCommit to the group's coordinator.
fn offsets_request(
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    o: &PendingOffsets,
    coordinator: &str,
) -> (Option<String>, RequestBodyT, TxnPending) {
    if !o.added {
        let mut r = AddOffsetsToTxnRequestT::default();
        r.transactional_id = transactional_id.to_string();
        r.producer_id = producer_id;
        r.producer_epoch = producer_epoch;
        r.group_id = o.group_id.clone();
        return (
            Some(coordinator.to_string()),
            RequestBodyT::AddOffsetsToTxnRequest(Box::new(r)),
            TxnPending::AddOffsets,
        );
    }
    let Some(group_coordinator) = &o.group_coordinator else {
        let mut r = FindCoordinatorRequestT::default();
        r.key = o.group_id.clone();
        r.key_type = CoordinatorType::Group;
        return (
            None,
            RequestBodyT::FindCoordinatorRequest(Box::new(r)),
            TxnPending::FindGroupCoordinator,
        );
    };
    let mut topics: Vec<OffsetCommitRequestTopicT> = Vec::new();
    for (tp, offset) in &o.offsets {
        let mut p = OffsetCommitRequestPartitionT::default();
        p.partition_index = tp.partition;
        p.committed_offset = *offset;
        p.committed_leader_epoch = -1;
        match topics.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.partitions.get_or_insert_with(Vec::new).push(p),
            None => {
                let mut t = OffsetCommitRequestTopicT::default();
                t.name = tp.topic.clone();
                t.partitions = Some(vec![p]);
                topics.push(t);
            }
        }
    }
    let mut r = TxnOffsetCommitRequestT::default();
    r.transactional_id = transactional_id.to_string();
    r.group_id = o.group_id.clone();
    r.producer_id = producer_id;
    r.producer_epoch = producer_epoch;
    r.generation_id = -1;
    r.topics = Some(topics);
    (
        Some(group_coordinator.clone()),
        RequestBodyT::TxnOffsetCommitRequest(Box::new(r)),
        TxnPending::TxnOffsetCommit,
    )
}
