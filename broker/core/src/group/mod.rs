//! Consumer groups and committed offsets (DESIGN §8).
//!
//! Group G lives on the core owning partition `(java_string_hash(G) & 0x7fffffff) % N` of the
//! compacted internal topic `__consumer_offsets` (N = `offsets.topic.num.partitions`, 50 by
//! default, Kafka's formula), created through the controller on first use. Layout:
//! - [`state`] (and `join`, its join phase): one group's membership state machine (sans-IO);
//! - [`coordinator`] (and `load`, its replay side): one core's groups and offsets, loading,
//!   appends in flight (sans-IO);
//! - `delete`: DeleteGroups and OffsetDelete (tombstones through the commit path), with
//!   [`subscription`] (which topics a consumer group's members read);
//! - [`records`]: the key/value records in `__consumer_offsets` (Kafka's layout);
//!
//! The glommio side (ticking the coordinator, appending its records to the partition before
//! answering, replaying partitions on open) is `spool-broker`'s `group::driver`; nothing here
//! has a runtime, a clock or entropy: time comes in as `now_ms`, member-id entropy as a seed.

pub mod coordinator;
mod delete;
mod join;
mod load;
pub mod records;
pub mod state;
pub mod subscription;
mod txn_offsets;
pub mod types;

#[cfg(test)]
mod tests;

pub use coordinator::Coordinator;
pub use types::*;

/// The internal topic holding group metadata and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Longest group id accepted (it is written as an i16-length string).
pub const GROUP_ID_BYTES_MAX: usize = 1024;

/// Java's `String.hashCode` over UTF-16 code units, as Kafka computes it for a group id.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition of `group_id` (Kafka's `Utils.abs(hashCode) % n`, with
/// Kafka's `& 0x7fffffff` for abs).
pub fn coordinator_partition(group_id: &str, partitions: i32) -> i32 {
    (java_string_hash(group_id) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(coordinator_partition("hello", 50), 99_162_322 % 50);
        assert_eq!(coordinator_partition("my-group", 50), 36);
    }
}
