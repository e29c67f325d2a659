//! spool-core: every decision the broker makes, as plain structs (DESIGN §2, §3).
//!
//! Each piece takes inputs — requests, reports, the current time as `now_ms`, entropy as a seed —
//! and returns outputs or actions; none of them awaits, sleeps, reads a clock or touches a socket
//! or a disk. `spool-broker`'s glommio layer drives them; the deterministic simulator
//! (`tests/sim`) drives the very same structs. Cargo enforces the boundary: this crate depends on
//! nothing with a runtime in it (`scripts/test.sh` checks `cargo tree -p spool-core`).
//!
//! - [`replica`]: one partition's replica state on its leader — leader epoch, ISR, follower
//!   progress, high watermark (never decreasing, never past the ISR's minimum);
//! - [`ack_wait`]: acks=all admission and the requests waiting for the high watermark;
//! - [`producer_state`]: the idempotent producers' recent batches per partition (DESIGN §9);
//! - [`group`]: the consumer-group state machine and one core's coordinator (DESIGN §8);
//! - [`shard_map`]: which core owns which partition (DESIGN §4);
//! - [`topic_config`]: the typed topic configuration, the known keys and their legal values, and
//!   the defaults in one place;
//! - [`follower_fetch`]: the leader's answer to one partition of a follower's fetch (epoch
//!   checks, diverging epoch, range) and to OffsetForLeaderEpoch;
//! - [`follower_state`]: one partition on a follower — its next fetch, appends, HW, and
//!   truncation on a diverging epoch;
//! - [`fetch_wait`]: when a long-polling fetch answers;
//! - [`epoch_cache`]: the leader-epoch cache (which epoch wrote which offsets), its
//!   OffsetForLeaderEpoch lookup and its checkpoint text;
//! - [`election`]: a partition's leader and ISR after brokers are fenced or unfenced (clean
//!   elections from the ISR, never an empty ISR, epochs bumped exactly once per change);
//! - [`isr_change`]: ISR shrink/expand proposals on the leader (one in flight), the
//!   controller's AlterPartition checks, KIP-966's eligible leader replicas;
//! - [`liveness`]: the active controller's broker sessions (who to fence for silence) and the
//!   unfence rule;
//! - [`txn`]: the transaction coordinator's states, transitions and rules (issue 18; not wired
//!   into the broker yet);
//! - [`placement`]: the controller's replica placement for a new topic (distinct brokers and
//!   racks, balanced replicas and preferred leaders).

pub mod ack_wait;
pub mod election;
pub mod epoch_cache;
pub mod fetch_wait;
pub mod follower_fetch;
pub mod follower_state;
pub mod group;
pub mod isr_change;
pub mod isr_slot;
pub mod liveness;
pub mod placement;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod producer_state;
mod record_codec;
pub mod replica;
pub mod shard_map;
pub mod topic_config;
mod topic_partition;
pub mod txn;

pub use spool_error_code::ErrorCode;
pub use topic_partition::TopicPartition;
