//! The transactional workloads' share of a run ([`super::run`] calls these): `txn` and `ctp`
//! read back the run's topic with read_committed once every transaction is decided (and whole)
//! and judge it with their own checkers; `ctp` also creates and fills its input topic before
//! the nemeses, and is waited for after them.
//!
//! Bounded: every wait has its timeout. Never touches the brokers' processes.

use std::time::{Duration, Instant};

use spool_protocol::client::admin::NewTopic;

use super::check::Report;
use super::history::{FinalLog, History};
use super::workload::Shared;
use super::{ctp_check, ctp_workload, txn_check, txn_workload};
use crate::broker::Broker;

/// A transactional workload's verdict and its own counts (for the run's JSON).
pub type Verdict = (Report, serde_json::Value);

/// The run's topic read back through `broker` once every transaction is decided: with
/// read_committed, and whole (`super::txn_workload::read_back`).
pub fn read_back(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<(FinalLog, FinalLog), String> {
    txn_workload::read_back(&broker.bootstrap(), topic, partitions, timeout)
}

/// The `txn` workload's verdict (`super::txn_check`) on the topic as read_committed sees it
/// (`visible`) and whole; its counts printed.
pub fn check_txn(history: &History, visible: &FinalLog, whole: &FinalLog) -> Verdict {
    let (mut report, mut counts) =
        txn_check::check_txns(&history.txns, visible, whole, txn_workload::PRODUCERS);
    report.max_unavailable_ms = txn_check::longest_gap_ms(history, None);
    counts.longest_gap_ms_by_producer = (0..txn_workload::PRODUCERS)
        .map(|p| txn_check::longest_gap_ms(history, Some(p)))
        .collect();
    println!("  {}", counts.summary());
    let json = serde_json::json!({
        "committed": counts.committed,
        "aborted": counts.aborted,
        "unknown": counts.unknown,
        "aborted_records_in_log": counts.aborted_in_log,
        "longest_gap_ms_by_producer": counts.longest_gap_ms_by_producer,
    });
    (report, json)
}

/// Creates the `ctp` workload's input topic (RF 3) and writes its inputs.
pub fn setup_ctp(broker: &Broker, native: &[String], partitions: i32) -> Result<(), String> {
    let mut admin = crate::client::admin(broker);
    for (topic, r) in admin
        .create_topics(vec![NewTopic::new(
            ctp_workload::INPUT_TOPIC,
            partitions,
            3,
        )])
        .map_err(|e| format!("creating {}: {e}", ctp_workload::INPUT_TOPIC))?
    {
        r.map_err(|e| format!("creating {topic}: {e}"))?;
    }
    ctp_workload::seed(native, partitions)
}

/// Waits (at most `timeout`) until the `ctp` processor has committed every input.
pub fn wait_ctp(shared: &Shared, timeout: Duration) {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if shared.history.lock().is_ok_and(|h| h.ctp.finished) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `ctp` workload's verdict (`super::ctp_check`) on the topic as read_committed sees it
/// (`visible`) and whole; its counts printed.
pub fn check_ctp(history: &History, visible: &FinalLog, whole: &FinalLog) -> Verdict {
    let (report, rewritten) = ctp_check::check_ctp(visible, whole, &history.ctp);
    let p = &history.ctp;
    println!(
        "  ctp_finished={} ctp_transactions={} ctp_inputs_committed={} ctp_in_doubt={} ctp_restarts={} ctp_outputs_rewritten_hidden={rewritten}",
        p.finished, p.committed_txns, p.committed_inputs, p.in_doubt, p.restarts
    );
    let json = serde_json::json!({
        "finished": p.finished,
        "transactions_attempted": p.attempted_txns,
        "transactions_committed": p.committed_txns,
        "inputs_committed": p.committed_inputs,
        "in_doubt": p.in_doubt,
        "restarts": p.restarts,
        "last_restart": p.last_restart,
        "outputs_rewritten_hidden": rewritten,
    });
    (report, json)
}
