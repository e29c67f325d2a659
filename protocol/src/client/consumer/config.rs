//! The consumer's settings (Kafka's names in the docs, units in the field names), offset-reset
//! policy and seek targets, validated at construction.

use crate::client::group::assignor::Assignor;
use crate::client::ClientError;
use crate::frame::FrameLimits;
use crate::wire::IsolationLevel;

/// Where to start when a partition has no valid position (Kafka `auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// No automatic reset: fetching stops with an error until the application seeks.
    None,
}

/// A seek target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    Offset(i64),
    Earliest,
    Latest,
    /// The first offset whose timestamp is at or after this many ms since the epoch (the end of
    /// the partition when there is none).
    Timestamp(i64),
}

impl SeekTo {
    /// Kafka's ListOffsets timestamp for a lookup target.
    pub(crate) fn list_offsets_timestamp(self) -> i64 {
        match self {
            Self::Earliest => -2,
            Self::Latest => -1,
            Self::Timestamp(t) => t,
            Self::Offset(o) => o,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub client_id: String,
    /// How long the broker may hold a fetch waiting for `fetch_min_bytes`.
    pub fetch_max_wait_ms: u64,
    pub fetch_min_bytes: i32,
    /// Bytes per fetch response, all partitions together.
    pub fetch_max_bytes: i32,
    /// Bytes per partition per fetch (Kafka `max.partition.fetch.bytes`).
    pub max_partition_fetch_bytes: i32,
    pub isolation_level: IsolationLevel,
    pub auto_offset_reset: OffsetReset,
    pub request_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// Fetched bytes not yet taken by the application; no fetch goes out above it.
    pub max_buffered_bytes: usize,
    pub metadata_max_age_ms: u64,
    pub frame_limits: FrameLimits,
    // Consumer groups (used by `subscribe`; `assign` ignores them).
    /// Kafka `group.id`; `subscribe` needs one.
    pub group_id: Option<String>,
    /// Kafka `group.instance.id`: a static member, which keeps its assignment across restarts
    /// within `session_timeout_ms` and never sends LeaveGroup.
    pub group_instance_id: Option<String>,
    /// The coordinator drops a member it has not heard from for this long.
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    /// A member that does not `poll` for this long leaves the group (Kafka
    /// `max.poll.interval.ms`); also the rebalance timeout sent in JoinGroup.
    pub max_poll_interval_ms: u64,
    /// The assignor (and so the rebalance protocol: cooperative for cooperative-sticky).
    pub assignor: Assignor,
    /// Kafka `enable.auto.commit`: commit processed positions every `auto_commit_interval_ms`,
    /// on revocation and on close.
    pub auto_commit: bool,
    pub auto_commit_interval_ms: u64,
    /// How long `close` may take (commit and LeaveGroup).
    pub close_timeout_ms: u64,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            client_id: "spool-consumer".into(),
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            max_partition_fetch_bytes: 1024 * 1024,
            isolation_level: IsolationLevel::ReadUncommitted,
            auto_offset_reset: OffsetReset::Latest,
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            max_buffered_bytes: 64 * 1024 * 1024,
            metadata_max_age_ms: 300_000,
            frame_limits: FrameLimits::default(),
            group_id: None,
            group_instance_id: None,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3_000,
            max_poll_interval_ms: 300_000,
            assignor: Assignor::Range,
            auto_commit: true,
            auto_commit_interval_ms: 5_000,
            close_timeout_ms: 30_000,
        }
    }
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidConfig(m.to_owned()));
        if self.request_timeout_ms <= self.fetch_max_wait_ms {
            return bad("request_timeout_ms must exceed fetch_max_wait_ms");
        }
        if self.fetch_max_bytes <= 0 || self.max_partition_fetch_bytes <= 0 {
            return bad("fetch_max_bytes and max_partition_fetch_bytes must be > 0");
        }
        if self.fetch_max_bytes as usize + 1024 * 1024 > self.frame_limits.max_frame_bytes {
            return bad("fetch_max_bytes must leave room for the header within the frame limit");
        }
        if self.max_buffered_bytes == 0 {
            return bad("max_buffered_bytes must be > 0");
        }
        if self.heartbeat_interval_ms == 0 || self.heartbeat_interval_ms >= self.session_timeout_ms
        {
            return bad("heartbeat_interval_ms must be > 0 and below session_timeout_ms");
        }
        if self.max_poll_interval_ms == 0 || self.auto_commit_interval_ms == 0 {
            return bad("max_poll_interval_ms and auto_commit_interval_ms must be > 0");
        }
        if i32::try_from(self.session_timeout_ms).is_err()
            || i32::try_from(self.max_poll_interval_ms).is_err()
        {
            return bad("session_timeout_ms and max_poll_interval_ms must fit in 32 bits");
        }
        if self.group_id.as_deref() == Some("") {
            return bad("group_id must not be empty");
        }
        Ok(())
    }
}
