//! The fault harness (issue 15): Jepsen-style runs of real `spool serve` processes under kill,
//! pause, partition, full disk, wiped disk and rolling restart, each with a workload, a nemesis
//! and a checker. `tests/faults.sh` drives it through the `spool-faults` binary
//! (`tests/src/bin/spool-faults.rs`).
//!
//! - [`history`]: what a run saw (writes and their outcomes, reads, commits, nemesis windows);
//! - [`workload`]: producers (spool's client, librdkafka) and group consumers recording it;
//! - [`nemesis`]: the harms, chosen from the seed, and their heals;
//! - [`run`]: one run from fresh brokers to the checker's report;
//! - [`origins`]: the final log's batch writers (producer id and epoch), read through the
//!   Kafka port;
//! - [`check`]: the checker — lost, duplicated, reordered, inconsistent, vanished reads,
//!   committed offsets moving backwards, and the longest window without an acknowledgement;
//! - [`txn_workload`], [`txn_rdkafka`] and [`txn_check`]: the `txn` workload (transactional
//!   producers of spool's client and librdkafka, some
//!   transactions aborted on purpose, the topic read back with read_committed and whole) and
//!   its checker (committed transactions whole, aborted ones invisible, doubtful ones all or
//!   nothing);
//! - [`ctp_workload`] and [`ctp_check`]: the `ctp` workload (a consume-transform-produce
//!   processor committing its input offsets in its output's transactions, starting over on any
//!   failure) and its checker (every input's output visible exactly once);
//! - [`run_txn`]: the transactional workloads' share of a run (set-up, read-back, verdict).

pub mod check;
pub mod ctp_check;
pub mod ctp_workload;
pub mod history;
pub mod nemesis;
pub mod origins;
pub mod run;
pub mod run_txn;
pub mod txn_check;
pub mod txn_rdkafka;
pub mod txn_workload;
pub mod workload;
