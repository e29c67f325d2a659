//! spool-tests: the process-level test harness (DESIGN §11). Tests here run real `spool serve`
//! processes and talk to them only through public surfaces: the native port (the client library,
//! or raw frames built with `spool_protocol::codec`), the admin HTTP port, and the `spool` CLI.
//!
//! - [`binary`]: the `spool` binary, built once per test process from the sources under test;
//! - [`addr`]: a loopback address of its own (127.0.x.y) and free ports for every broker, so tests
//!   run in parallel;
//! - [`broker`]: start (ready = ApiVersions answers), `kill9`, `terminate` (exit 0 required),
//!   `restart` on the same data dir; killed on drop;
//! - [`client`], [`cli`], [`wire`], [`http`]: the four ways in;
//! - [`garbage`]: seeded malformed input for the bad-input tests;
//! - [`steady`]: a producer that keeps going (and checking its acks) while a test does harm;
//! - [`checker`]: acknowledged vs read back — nothing lost, nothing twice, order per partition;
//! - [`process`]: bounded waits on child processes; [`source_addr`]: connecting from a chosen
//!   loopback address (more than one client address on one machine).
//! - [`group_consumer`], [`group_output`], [`group_checks`], [`group_wire`], [`group_cli`],
//!   [`paced`]: consumer groups — `spool consume --group` members as child processes, their output
//!   parsed and checked, the group protocol by hand, `spool group describe` read back, producers
//!   that feed every partition.
//! - [`kafka_clients`]: Kafka clients nobody here wrote (kcat, kafka-python, aiokafka, sarama;
//!   rdkafka is a dependency), found or failed with how to install them, run with bounds;
//!   [`node_clients`]: the same for kafkajs (Node.js).
//! - [`faults`]: the fault harness (`tests/faults.sh`): workloads, nemeses and the checker;
//!   [`small_disk`]: a loop-mounted filesystem for full-disk faults.
//!
//! Every wait has a deadline that only bounds failure; nothing sleeps to let something happen.
//! The tests themselves live in `tests/` by area: `data_integrity`, `faults` (`bad_input`,
//! `lifecycle`), `cli`, `groups` (consumer groups), `kafka_*` (the Kafka port with real clients).
//!
//! Run: `cargo test -p spool-tests` (builds the broker too). Tests pinning a known broker bug are
//! `#[ignore]`d with the reason: `cargo test -p spool-tests -- --ignored`. `SPOOL_BIN=path` runs
//! another `spool` binary; `TMPDIR` places the brokers' data (it must take O_DIRECT).

// The generated flatbuffers object-API types (`wire::FooT`) are `#[non_exhaustive]`: outside
// spool-protocol they can only be built as `Default` plus field assignments.
#![allow(clippy::field_reassign_with_default)]

pub mod addr;
pub mod binary;
pub mod broker;
pub mod checker;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod faults;
pub mod garbage;
pub mod group_checks;
pub mod group_cli;
pub mod group_consumer;
pub mod group_output;
pub mod group_wire;
pub mod http;
pub mod kafka_call;
pub mod kafka_clients;
pub mod log_files;
pub mod netfilter;
pub mod node_clients;
pub mod paced;
pub mod proc_memory;
pub mod process;
pub mod replicated;
pub mod small_disk;
pub mod source_addr;
pub mod steady;
pub mod wire;

pub use broker::{Broker, BrokerOptions};
