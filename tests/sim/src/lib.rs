//! spool-sim: the deterministic simulator (issue #14, DESIGN §11) — the real controller core in
//! a seeded world.
//!
//! Each run builds a [`world::World`] from a [`config::SimConfig`]: three controller nodes, each
//! a real `spool_raft::MetadataRaft` (raft-rs `RawNode` + the metadata state machine) on a
//! simulated disk with an fsync boundary ([`disk`]), driven like `spool_raft::Controller`
//! drives it ([`node`]) and answering brokers and an admin client through the real `validate`
//! and `failover` functions and spool-core's `BrokerSessions` ([`controller`]); brokers that
//! register and heartbeat ([`broker`]); a topic workload ([`workload`]); a network with delay,
//! loss, duplication, reordering and partitions ([`net`]); and a fault schedule ([`faults`]).
//! After every event the checkers ([`check_raft`], [`check_durable`], [`check_image`]) look at every node; after
//! the faults stop, [`liveness`] judges recovery. One `u64` seed drives everything through one
//! [`rng::SimRng`], on the clock of one [`events::EventQueue`]; the [`trace::Trace`] hashes
//! every event, so a seed replays exactly.
//!
//! The replication half: each broker's [`replica_host::ReplicaHost`] hosts the replicas the
//! committed image assigns it (learned from heartbeat answers, [`metaview`]), each a
//! [`sim_replica::SimReplica`] over a [`plog::SimLog`] driven by spool-core's replication
//! structs; followers fetch from leaders in sessions, leaders send ISR changes to the
//! controller (decided by `spool_raft::alter_partition`); [`clients`] produce (acks 0/1/all,
//! idempotent and not) and read; [`check_repl`] checks the replication invariants after every
//! step and [`liveness_repl`] judges recovery.
//!
//! The transaction world (issue 18, [`txn_world::TxnWorld`], `--world txn`), a second world on
//! the same foundations: spool-core's real `TxnCoordinator` on a simulated
//! `__transaction_state` log with an fsync boundary, crashing and failing over with a newer
//! coordinator epoch, replaying its records and resuming markers ([`txn_coord`]); data
//! partitions whose leaders run spool-core's `ProducerStateTable` and `PartitionTxns`, with
//! KIP-890 verification and the coordinator-epoch fence, rebuilt from their logs after a crash
//! ([`txn_partition`]); transactional producers, two per id sometimes, crashing mid-transaction
//! ([`txn_client`]); a read_committed reader filtering aborted transactions as Kafka's consumer
//! does ([`txn_reader`]); links with delay, loss, duplication and reordering where Kafka's
//! connections allow them ([`txn_net`]); and [`check_txn`]'s four invariants after every event.
//!
//! Layout, one job per file: `rng`, `events`, `trace` (foundations); `message`,
//! `repl_message`, `net`, `disk`, `plog`, `out`, `repl_event`, `metaview` (the simulated
//! world's parts); `controller`, `node`, `broker`, `replica_host`, `sim_replica`, `workload`,
//! `clients` (the actors); `faults`, `planted` (what goes wrong); `violation`,
//! `check_raft`, `check_durable`, `check_image`, `check_repl`, `liveness`, `liveness_repl` (the
//! checkers); `describe` (trace text); `config`, `world`, `runner` (running). The transaction
//! world: `txn_net` (its messages and links), `txn_coord`, `txn_partition`, `txn_client`,
//! `txn_reader` (the actors), `check_txn` (the checkers), `txn_world` (its config, loop and
//! report).

pub mod broker;
pub mod check_durable;
pub mod check_image;
pub mod check_raft;
pub mod check_repl;
pub mod check_txn;
pub mod clients;
pub mod config;
pub mod controller;
pub mod describe;
pub mod disk;
pub mod events;
pub mod faults;
pub mod liveness;
pub mod liveness_repl;
pub mod message;
pub mod metaview;
pub mod net;
pub mod node;
pub mod out;
pub mod planted;
pub mod plog;
pub mod repl_event;
pub mod repl_message;
pub mod replica_host;
pub mod rng;
pub mod runner;
pub mod sim_replica;
pub mod trace;
pub mod txn_client;
pub mod txn_coord;
pub mod txn_net;
pub mod txn_partition;
pub mod txn_reader;
pub mod txn_world;
pub mod violation;
pub mod workload;
pub mod world;

pub use config::SimConfig;
pub use planted::PlantedBug;
pub use txn_world::{TxnConfig, TxnRunReport, TxnWorld};
pub use violation::Violation;
pub use world::{RunReport, World};

/// Runs one seed.
pub fn run(config: SimConfig) -> RunReport {
    World::new(config).run()
}

/// Runs one seed of the transaction world.
pub fn run_txn(config: TxnConfig) -> TxnRunReport {
    TxnWorld::new(config).run()
}
