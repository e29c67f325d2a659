//! spool-raft: the cluster controller's metadata, replicated through raft-rs (DESIGN §4, §7).
//!
//! Layers, from pure to I/O:
//! - [`image`]: [`MetadataImage`], the metadata state machine (brokers, topics, partitions,
//!   configs, producer-id blocks) and `apply(record)`. Every core keeps one and applies the
//!   committed records core 0 broadcasts.
//! - [`validate`] / [`topic_config`]: requests → records, or a [`Refusal`] with Kafka's error
//!   code (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
//!   INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION, …). Refused requests never reach the log.
//! - [`topic_admin`]: adding partitions, changing a topic's configs, and operator leader
//!   elections (preferred / unclean) as records.
//! - [`failover`]: fencing and unfencing brokers as records — spool-core's election and liveness
//!   decisions mapped onto the image (partition changes, fence / unfence records).
//! - [`controlled_shutdown`]: a broker in controlled shutdown (it heartbeated `want_shutdown`)
//!   loses its leaderships and ISR memberships to live ISR members — spool-core's election rule
//!   with it counted as ineligible — and [`controlled_shutdown::should_shut_down`] says when it
//!   may stop (the heartbeat answer's `should_shutdown`).
//! - [`alter_partition`]: a partition leader's ISR change (AlterPartition) as a
//!   `PartitionChange` record — spool-core's `isr_change` decision mapped onto the image.
//! - [`image_snapshot`]: the image as bytes (a raft snapshot's payload) and back.
//! - [`node`]: [`MetadataRaft`], the sans-IO raft driver (`propose`/`tick`/`step`, `ready` →
//!   persist → `advance`), raft-rs `RawNode` over the in-memory [`log_cache::LogCache`].
//! - [`disk`]: `<data_dir>/__raft/` — CRC-framed append-only log, hard state, snapshot; torn
//!   tails are cut on open. Blocking `std::fs` I/O (rare, small writes on core 0).
//! - [`controller`]: [`Controller`], the façade the broker drives on core 0 (see its docs for
//!   the exact loop).
//! - [`uuid128`]: [`Uuid128`], the id type under both the image and the records.
//! - [`id_source`]: [`IdSource`], the seeded stream behind topic ids and election timeouts.
//!
//! Nothing here reads a clock or OS entropy: time comes in as `now_ms` / `tick()` calls and
//! randomness as a caller's `seed` ([`RaftConfig::seed`]), so a seed and an input schedule fix a
//! run (DESIGN §3, §11). raft-rs itself draws its election timeout from `thread_rng()`;
//! [`node`] replaces every such draw with one from the seed before raft-rs can use it.
//!
//! Metadata records are `spool_protocol::metadata_records` (schemas/metadata.fbs), one per raft
//! entry, encoded by `spool_protocol::metadata_log`. raft-rs logs through [`slog_tracing`].

pub mod alter_partition;
pub mod controlled_shutdown;
pub mod controller;
pub mod disk;
pub mod failover;
pub mod id_source;
pub mod image;
pub mod image_snapshot;
pub mod log_cache;
pub mod lost_log;
pub mod node;
pub mod peer_message;
pub mod proposal;
pub mod records;
pub mod slog_tracing;
pub mod topic_admin;
pub mod topic_config;
pub mod uuid128;
pub mod validate;

/// The raft id of a broker's metadata replica: raft reserves 0, broker ids start at 0.
pub fn raft_id_of_broker(broker_id: i32) -> u64 {
    u64::try_from(broker_id).map_or(0, |b| b + 1)
}

/// The broker behind a raft id (`None` for raft's "nobody", 0).
pub fn broker_of_raft_id(raft_id: u64) -> Option<i32> {
    raft_id.checked_sub(1).and_then(|n| i32::try_from(n).ok())
}

pub use alter_partition::{AlterOutcome, AlterRefused};
pub use controller::{Controller, ControllerConfig, ControllerError, ControllerStatus, Polled};
pub use id_source::IdSource;
pub use image::{MetadataImage, TopicId, TopicImage};
pub use node::{Advanced, Committed, MetadataRaft, RaftConfig, RaftReady, RecoveredState};
pub use proposal::ProposalId;
pub use raft::eraftpb::Message as RaftMessage;
pub use uuid128::Uuid128;
pub use validate::{
    CreateTopicPolicy, CreateTopicRequest, HeartbeatRequest, Refusal, RegisterBrokerRequest,
};
