//! What one fault run saw: every produce attempt and its outcome, every record a consumer read,
//! every offset commit the group coordinator acknowledged, and when each nemesis was active.
//! The workload threads append to it while the run goes; the checker
//! ([`crate::faults::check`]) reads it afterwards with the log and the group offsets as read back
//! once the cluster has healed.
//!
//! Times are milliseconds since the run's workload started (one clock: the harness's monotonic
//! clock), so gaps and nemesis windows compare directly.

use std::collections::BTreeMap;

/// A topic partition.
pub type Tp = (String, i32);

/// The acks a write was sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAcks {
    /// acks=all: once acknowledged it must survive (the promise under test).
    All,
    /// acks=1: may be lost, but a consumer must never have read it if it is.
    Leader,
}

/// How a write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The broker acknowledged it at this partition and offset. A negative offset: acknowledged
    /// without one (librdkafka reports a retry the broker answered DUPLICATE_SEQUENCE_NUMBER
    /// as delivered, offset -1001, as Kafka's clients do) — it must be in that partition.
    Acked { tp: Tp, offset: i64 },
    /// No acknowledgement (an error, a timeout, the run ended first): it may or may not be in
    /// the log — the checker allows both, but never twice.
    NotAcked { error: String },
}

/// One produce attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Which producer sent it (its number in the run).
    pub producer: u32,
    /// Its place in that producer's sequence, from 0; the producer sends in this order.
    pub seq: u64,
    /// Unique in the run: [`value_of`]`(producer, seq)`.
    pub value: String,
    pub acks: WriteAcks,
    pub outcome: Outcome,
    /// When the outcome came.
    pub done_ms: u64,
}

/// One record a consumer read while the run went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub consumer: u32,
    pub tp: Tp,
    pub offset: i64,
    pub value: String,
    pub at_ms: u64,
}

/// An offset commit the coordinator acknowledged: the group's next offset to read on `tp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub group: String,
    pub consumer: u32,
    pub tp: Tp,
    pub offset: i64,
    pub at_ms: u64,
}

/// A nemesis's active window (from its first harm to its heal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NemesisSpan {
    /// The nemesis's name, e.g. `kill-leader`, `pause`, `isolate`, `disk-full`.
    pub kind: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// How a transaction ended, as its producer saw it (the `txn` workload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOutcome {
    /// commit_transaction returned Ok: every record must be read_committed-visible, once.
    Committed,
    /// The producer aborted it (abort_transaction, whether it returned Ok or not: commit was
    /// never asked for, so no coordinator may commit it): none of its records may be visible.
    Aborted,
    /// commit_transaction failed: committed or aborted, but whole either way.
    Unknown { error: String },
}

/// One transaction of the `txn` workload: records [`txn_value`]`(producer, txn, i)` for `i` in
/// `0..records` (the ones `send` queued), spread over the topic's partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnAttempt {
    pub producer: u32,
    pub txn: u64,
    pub records: u64,
    pub outcome: TxnOutcome,
    pub done_ms: u64,
}

/// What the `ctp` workload's processor got through ([`crate::faults::ctp_workload`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CtpProgress {
    /// Transactions begun (crashed and failed ones included).
    pub attempted_txns: u64,
    pub committed_txns: u64,
    /// Inputs whose transaction's commit returned Ok (counting reprocessed ones again).
    pub committed_inputs: u64,
    /// Commits that failed, each followed by a restart.
    pub in_doubt: u64,
    /// Times the processor started over.
    pub restarts: u64,
    pub last_restart: String,
    /// Its committed offsets reached the input's end.
    pub finished: bool,
}

/// Everything a run recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub writes: Vec<Write>,
    /// The `txn` workload's transactions (empty in the other workloads).
    pub txns: Vec<TxnAttempt>,
    /// The `ctp` workload's processor.
    pub ctp: CtpProgress,
    pub reads: Vec<Read>,
    pub commits: Vec<Commit>,
    pub nemeses: Vec<NemesisSpan>,
    /// When the workload stopped sending (the end of the availability window).
    pub workload_end_ms: u64,
}

/// The log as read back after healing: every partition's records from its start to its high
/// watermark, in offset order.
pub type FinalLog = BTreeMap<Tp, Vec<(i64, String)>>;

/// The group offsets as fetched after healing: (group, partition) → committed offset.
pub type FinalCommits = BTreeMap<(String, Tp), i64>;

/// The value of producer `producer`'s write `seq`: unique in a run, and parsed back by
/// [`parse_value`] so the checker can order what it reads by producer sequence.
pub fn value_of(producer: u32, seq: u64) -> String {
    format!("p{producer}-{seq}")
}

/// (producer, seq) of a value written by [`value_of`]; `None` for anything else.
pub fn parse_value(value: &str) -> Option<(u32, u64)> {
    let (p, s) = value.strip_prefix('p')?.split_once('-')?;
    Some((p.parse().ok()?, s.parse().ok()?))
}

/// The value of record `i` of producer `producer`'s transaction `txn`: unique in a run.
pub fn txn_value(producer: u32, txn: u64, i: u64) -> String {
    format!("t{producer}-{txn}-{i}")
}

/// (producer, txn, i) of a value written by [`txn_value`]; `None` for anything else.
pub fn parse_txn_value(value: &str) -> Option<(u32, u64, u64)> {
    let mut parts = value.strip_prefix('t')?.split('-');
    let p = parts.next()?.parse().ok()?;
    let t = parts.next()?.parse().ok()?;
    let i = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((p, t, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_values_parse_back_and_nothing_else_does() {
        assert_eq!(parse_txn_value(&txn_value(1, 22, 5)), Some((1, 22, 5)));
        for junk in ["", "t", "t1-2", "t1-2-3-4", "p1-2", "t1-x-3", "tx-1-2"] {
            assert_eq!(parse_txn_value(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn values_parse_back_and_nothing_else_does() {
        assert_eq!(parse_value(&value_of(3, 41)), Some((3, 41)));
        assert_eq!(parse_value(&value_of(0, u64::MAX)), Some((0, u64::MAX)));
        for junk in ["", "p", "p1", "p-1", "q1-2", "p1-x", "px-1", "p1-2-3"] {
            assert_eq!(parse_value(junk), None, "{junk:?}");
        }
    }
}
