//! Per-partition log configuration, with Kafka's names and defaults, validated once at open.

/// `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    Delete,
    Compact,
}

/// How an append becomes durable (DESIGN §5): `Fsync` acknowledges after fdatasync (group
/// commit); `Replicated` after the in-memory append, flushing on an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Fsync,
    Replicated,
}

#[derive(Debug, Clone, Copy)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty segment this long after its first append.
    pub segment_ms: Option<i64>,
    /// One offset/time index entry per this many bytes of log.
    pub index_interval_bytes: u64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_batch_bytes: usize,
    /// Aligned staging buffer per active segment; a full one is written as one O_DIRECT write.
    pub write_buffer_bytes: usize,
    /// Writes of one segment in flight at once (queue depth).
    pub writes_in_flight_max: usize,
    /// fallocate step for the active segment.
    pub preallocate_bytes: u64,
    /// How far past the log end the active segment's blocks are kept written with zeros, so an
    /// fdatasync finds no extent metadata to write ([`crate::prewrite`]); 0 turns it off. It
    /// costs a second write of every block, so it pays only where acks wait for fdatasync.
    pub prewrite_bytes: u64,
    /// Recently appended bytes served from memory.
    pub tail_cache_bytes: usize,
    /// `retention.ms` (None = forever).
    pub retention_ms: Option<i64>,
    /// `retention.bytes` (None = unlimited).
    pub retention_bytes: Option<u64>,
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone survives compaction.
    pub delete_retention_ms: i64,
    /// Distinct keys one compaction pass may track.
    pub compaction_keys_max: usize,
}

/// O_DIRECT alignment on the disks spool targets.
pub const BLOCK_BYTES: u64 = 4096;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3_600_000),
            index_interval_bytes: 4096,
            max_batch_bytes: 1_048_588,
            write_buffer_bytes: 1 << 20,
            writes_in_flight_max: 4,
            preallocate_bytes: 32 << 20,
            prewrite_bytes: 0,
            tail_cache_bytes: 4 << 20,
            retention_ms: Some(7 * 24 * 3_600_000),
            retention_bytes: None,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 3_600_000,
            compaction_keys_max: 4_000_000,
        }
    }
}

impl LogConfig {
    /// Refuses settings that would only fail later, with the setting's name in the message.
    pub fn validate(&self) -> Result<(), String> {
        // Index positions are u32, so a segment must stay below 4 GiB.
        if self.segment_bytes < 4096 || self.segment_bytes > u64::from(u32::MAX) {
            return Err(format!(
                "segment.bytes must be in [4096, {}], got {}",
                u32::MAX,
                self.segment_bytes
            ));
        }
        if self.max_batch_bytes < crate::batch::HEADER_BYTES {
            return Err(format!(
                "max.message.bytes must be at least 61, got {}",
                self.max_batch_bytes
            ));
        }
        if self.write_buffer_bytes == 0 || self.write_buffer_bytes as u64 % BLOCK_BYTES != 0 {
            return Err(format!(
                "write_buffer_bytes must be a non-zero multiple of {BLOCK_BYTES}, got {}",
                self.write_buffer_bytes
            ));
        }
        if self.preallocate_bytes % BLOCK_BYTES != 0 {
            return Err(format!(
                "preallocate_bytes must be a multiple of {BLOCK_BYTES}, got {}",
                self.preallocate_bytes
            ));
        }
        if self.prewrite_bytes % BLOCK_BYTES != 0 {
            return Err(format!(
                "prewrite_bytes must be a multiple of {BLOCK_BYTES}, got {}",
                self.prewrite_bytes
            ));
        }
        if self.writes_in_flight_max == 0 {
            return Err("writes_in_flight_max must be at least 1".into());
        }
        if self.index_interval_bytes == 0 {
            return Err("index_interval_bytes must be at least 1".into());
        }
        if matches!(self.segment_ms, Some(ms) if ms <= 0) {
            return Err("segment.ms must be positive".into());
        }
        Ok(())
    }
}
