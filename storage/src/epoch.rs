//! The leader-epoch cache the log keeps and checkpoints (`leader-epoch-checkpoint`): which leader
//! epoch wrote which range of offsets. Its rules — Kafka's assign, end-offset lookup and
//! truncation, and the checkpoint's text form — are the decision core's
//! ([`spool_core::epoch_cache`]), so the log, the simulator and the replication decisions share
//! one implementation; the log only persists it.

pub use spool_core::epoch_cache::{Assigned, EpochEndOffset, EpochEntry, LeaderEpochCache};
