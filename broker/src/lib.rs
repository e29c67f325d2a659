//! spool-broker: the broker behind `spool serve` (DESIGN §4, §6, §10).
//!
//! The data path, top to bottom, one file per hop: a front ([`connection`] + [`handlers`] for the
//! native protocol, [`kafka`] for Kafka's) reads and decodes a frame → [`ops`] (split by
//! partition, the rules both fronts share) → [`router`] (a typed call to the owning core, from
//! the catalogue in [`calls`]) → [`partition`] (asks `spool-core` what to do, then does it) →
//! `spool_storage` → a typed reply back up. [`shard`] is the composition root that answers calls
//! by handing them to their owner; [`local`] is one core's data. Core 0 also runs the
//! [`controller`] driver (raft metadata) and the [`admin_http`] endpoint; on SIGTERM a clustered
//! broker first hands its leaderships to other replicas ([`controlled_shutdown`]), then stops.
//! The two fronts ([`handlers`] native, [`kafka`]) each declare their APIs once in a table
//! ([`apis`]) and share their rules ([`front_rules`]: acks, metrics, fetch grouping,
//! InitProducerId) and their connection loop ([`connection`]).
//!
//! Every decision is in `spool-core` (no runtime, no clock, no entropy), driven from here.

pub mod accept;
pub mod admin_http;
pub mod alloc;
pub mod alter_wire;
pub mod api_readme;
pub mod apis;
pub mod broker_session;
pub mod calls;
pub mod clean_shutdown;
pub mod cli;
pub mod cli_cluster_local;
pub mod clock;
pub mod cluster_config;
pub mod config;
pub mod conn_deadlines;
pub mod conn_limits;
pub mod connection;
pub mod controlled_shutdown;
pub mod controller;
pub mod controller_calls;
pub mod controller_metrics;
pub mod cpuset;
pub mod delete_records;
pub mod fail_stop;
pub mod frame_io;
pub mod frame_pins;
pub mod front_rules;
pub mod group;
pub mod group_admin;
pub mod handlers;
pub mod handoff;
pub mod internal_replay;
pub mod internal_server;
pub mod kafka;
pub mod local;
pub mod maintenance;
pub mod metadata_apply;
pub mod metrics;
pub mod net_io;
pub mod ops;
pub mod partition;
pub mod peer_connect;
pub mod peers;
pub mod publish_order;
pub mod replica_share;
pub mod replication;
pub mod request_memory;
pub mod requests;
pub mod response_memory;
pub mod router;
pub mod runtime;
pub mod shard;
pub mod shutdown_grants;
pub mod stall_watch;
pub mod stop_signal;
#[cfg(test)]
mod test_executor;
pub mod topic_admin;
pub mod topic_config;
pub mod txn;
pub mod txn_markers;
pub mod txn_verify;
