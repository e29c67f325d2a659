//! spool-broker: the broker behind `spool serve` (DESIGN §4, §6, §10).
//!
//! The data path, top to bottom: [`connection`] (frames in, responses out) → [`handlers`]
//! (decode, split by partition) → [`shard`] (route to the owning core over the [`mesh`]) →
//! [`partition`] (log, high watermark) → `spool_storage` → ack. Core 0 also runs the
//! [`controller`] (raft metadata) and the [`admin_http`] endpoint. Decision logic that needs no
//! I/O is pure and tested without a runtime: [`replica`] (ISR and high watermark), [`shard_map`].
//! The two fronts ([`handlers`] native, [`kafka`]) each declare their APIs once in a table
//! ([`apis`]) and share their rules ([`front_rules`]: acks, metrics, fetch grouping,
//! InitProducerId) and their connection loop ([`connection`]).

pub mod admin_http;
pub mod alloc;
pub mod apis;
pub mod cli;
pub mod config;
pub mod connection;
pub mod controller;
pub mod front_rules;
pub mod group;
pub mod handlers;
pub mod kafka;
pub mod mesh;
pub mod metrics;
pub mod net_io;
pub mod ops;
pub mod partition;
pub mod producer_state;
pub mod replica;
pub mod requests;
pub mod runtime;
pub mod shard;
pub mod shard_map;
pub mod stop_signal;
pub mod topic_config;
