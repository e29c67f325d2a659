//! The broker's internal requests and results: what both fronts (native flatbuffers and the Kafka
//! wire protocol) translate into, and what crosses the core mesh ([`crate::calls`] pairs each
//! request with its reply).
//!
//! Everything here is `Send` (it travels between executors) and owns its data: record bytes as
//! `Bytes`, file ranges as a duplicated descriptor, so a core never lends another its `Rc`s.

use std::os::fd::OwnedFd;

use bytes::Bytes;
use spool_protocol::ErrorCode;

pub use spool_core::TopicPartition;

/// One partition's share of a produce request.
#[derive(Debug, Clone)]
pub struct ProducePartition {
    pub tp: TopicPartition,
    /// Whole RecordBatch v2 batches, as the client sent them.
    pub records: Bytes,
    /// 0, 1 or -1 (all).
    pub acks: i16,
    pub timeout_ms: i32,
    /// The request's transactional id (KIP-890: the coordinator a transactional batch is
    /// verified with).
    pub transactional_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResult {
    pub error: ErrorCode,
    pub base_offset: i64,
    pub log_start_offset: i64,
    pub message: Option<String>,
}

impl ProduceResult {
    pub fn error(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            base_offset: -1,
            log_start_offset: -1,
            message: Some(message.into()),
        }
    }
}

/// One partition's share of a fetch.
#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub tp: TopicPartition,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// The consumer's view of the leader epoch (KIP-320; Kafka Fetch v9+): an older one is
    /// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH. `None`: not checked.
    pub current_leader_epoch: Option<i32>,
    /// Kafka's `read_committed` isolation: read below the last stable offset, and learn the
    /// aborted transactions in range (otherwise below the high watermark).
    pub read_committed: bool,
}

/// Bytes of a fetch answer: in memory, or a range of a segment file to splice from.
#[derive(Debug)]
pub enum FetchChunk {
    Memory(Bytes),
    File {
        fd: OwnedFd,
        position: u64,
        len: u64,
    },
}

impl FetchChunk {
    pub fn len(&self) -> u64 {
        match self {
            FetchChunk::Memory(b) => b.len() as u64,
            FetchChunk::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
pub struct FetchResult {
    pub error: ErrorCode,
    pub high_watermark: i64,
    /// Below it every transaction is decided (the high watermark when none is open).
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// For a read_committed fetch: (producer id, first offset) of each aborted transaction in
    /// range, whose records the client drops.
    pub aborted: Vec<(i64, i64)>,
    pub chunks: Vec<FetchChunk>,
}

impl FetchResult {
    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted: Vec::new(),
            chunks: Vec::new(),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(FetchChunk::len).sum()
    }
}

/// ListOffsets: -2 earliest, -1 latest, otherwise a timestamp in ms.
#[derive(Debug, Clone)]
pub struct ListOffsetsPartition {
    pub tp: TopicPartition,
    pub timestamp: i64,
    /// Latest is the last stable offset, not the high watermark.
    pub read_committed: bool,
}

/// A transaction marker for one partition, from a transaction coordinator (Kafka's
/// WriteTxnMarkers, one partition's share).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteMarkerPartition {
    pub tp: TopicPartition,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// The transaction's Prepare record offset in `__transaction_state` (-1: unknown).
    pub decision_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsResult {
    pub error: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;

/// Reply once any of these partitions' high watermark passes the given offset (or it is gone), or
/// after `timeout_ms`: the long-poll half of a fetch, asked of each owning core.
#[derive(Debug, Clone)]
pub struct WatchPartitions {
    pub partitions: Vec<(TopicPartition, i64)>,
    pub timeout_ms: u64,
}

/// One core's share of a follower's fetch (DESIGN §7): the partitions of one `ReplicaFetch` that
/// this core owns, served in order on it. With nothing to send and `max_wait_ms` left, the core
/// waits (without a task per partition) for one of them to grow, then reads again.
#[derive(Debug, Clone)]
pub struct ReplicaFetchShare {
    pub partitions: Vec<(TopicPartition, spool_core::follower_fetch::FollowerFetch)>,
    pub max_wait_ms: u64,
    /// Record bytes this share may return in all (at least one batch of the first partition
    /// with data is sent whatever its size, so a follower always progresses).
    pub max_bytes: usize,
}

/// The leader's answer for one partition of a follower's fetch: the wire answer's fields, with
/// the records read (empty unless `error` is NONE and there is no divergence).
#[derive(Debug, Clone)]
pub struct ReplicaFetchRead {
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub diverging: Option<spool_core::epoch_cache::EpochEndOffset>,
    pub records: Bytes,
}

impl ReplicaFetchRead {
    /// An answer carrying only an error (offsets unknown).
    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            high_watermark: -1,
            log_start_offset: -1,
            log_end_offset: -1,
            diverging: None,
            records: Bytes::new(),
        }
    }
}

/// OffsetForLeaderEpoch for one partition, on its owner (KIP-101, KIP-320: consumers after a
/// leader change, followers of old protocols): where `leader_epoch` ends in the leader's log.
#[derive(Debug, Clone)]
pub struct EpochEndQuery {
    pub tp: TopicPartition,
    /// The sender's view of the current leader epoch (`None`: not checked).
    pub current_leader_epoch: Option<i32>,
    pub leader_epoch: i32,
}

/// The answer: the epoch found and where it ends (UNDEFINED: -1, -1), or the error.
pub type EpochEndAnswer = Result<spool_core::epoch_cache::EpochEndOffset, ErrorCode>;

/// A topic to create, as the controller sees it.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// A partition leader's ISR change for the active controller (Kafka's AlterPartition, KIP-497),
/// sent to core 0: served there when it is the active controller, forwarded to it otherwise.
/// The reply is the committed partition state, the controller's refusal, or `Lost` (no answer in
/// time, no controller reachable): the leader frees its in-flight slot and proposes afresh.
#[derive(Debug, Clone)]
pub struct AlterPartition {
    pub topic_id: spool_raft::TopicId,
    pub partition: i32,
    pub request: spool_core::isr_change::AlterPartitionRequest,
}

/// Metadata changes, proposed to the controller on core 0.
#[derive(Debug, Clone)]
pub enum ControllerOp {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    /// Kafka's CreatePartitions: one outcome per topic.
    CreatePartitions {
        topics: Vec<NewPartitions>,
        validate_only: bool,
    },
    /// AlterConfigs / IncrementalAlterConfigs on topics: one outcome per topic.
    AlterConfigs {
        topics: Vec<ConfigAlteration>,
        validate_only: bool,
    },
    /// Operator leader elections (`crate::topic_admin::elect_leaders`): one outcome per
    /// partition, in order, each named by its topic.
    ElectLeaders {
        unclean: bool,
        partitions: Vec<TopicPartition>,
    },
}

impl ControllerOp {
    /// The name of each outcome the op answers, in order (a topic per topic; for elections,
    /// each partition's topic).
    pub fn outcome_names(&self) -> Vec<String> {
        match self {
            ControllerOp::CreateTopics { topics, .. } => {
                topics.iter().map(|t| t.name.clone()).collect()
            }
            ControllerOp::DeleteTopics { names } => names.clone(),
            ControllerOp::CreatePartitions { topics, .. } => {
                topics.iter().map(|t| t.name.clone()).collect()
            }
            ControllerOp::AlterConfigs { topics, .. } => {
                topics.iter().map(|t| t.topic.clone()).collect()
            }
            ControllerOp::ElectLeaders { partitions, .. } => {
                partitions.iter().map(|tp| tp.topic.clone()).collect()
            }
        }
    }
}

/// Topic admin requests as the controller validates them (`spool_raft::topic_admin`): one
/// CreatePartitions topic, one topic's config change and its operations.
pub use spool_raft::topic_admin::{ConfigAlteration, ConfigOp, ConfigOpKind, NewPartitions};

/// One partition's outcome of an operator request (ElectLeaders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOutcome {
    pub tp: TopicPartition,
    pub error: ErrorCode,
    pub message: Option<String>,
}

/// Per-topic outcome of a controller op, in request order.
#[derive(Debug, Clone)]
pub struct TopicOutcome {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

/// Committed metadata records (encoded `MetadataRecord`s) in commit order, from core 0, for
/// every core to apply to its image — or, with `replace`, a whole image (the records of a
/// snapshot) that takes the place of the core's image: how a broker that lagged past the
/// compacted raft log catches up.
#[derive(Debug, Clone)]
pub struct ApplyMetadata {
    pub records: Vec<Vec<u8>>,
    pub replace: bool,
}

/// A block of producer ids for the asking core (core 0 only).
#[derive(Debug, Clone, Copy)]
pub struct AllocateProducerIds;

/// (first producer id, block size).
pub type ProducerIdRange = Result<(i64, i32), ErrorCode>;

/// The controller quorum as core 0 last saw it (raft role, term, commit, membership).
#[derive(Debug, Clone, Copy)]
pub struct QuorumQuery;

/// This core's metrics, as Prometheus text lines.
#[derive(Debug, Clone, Copy)]
pub struct MetricsText;

/// DeleteRecords for one partition, on its owner core (Kafka's `ReplicaManager.deleteRecords`):
/// records below `offset` (-1: the high watermark) go, answered once every ISR member's log
/// start reached it or after `timeout_ms`.
#[derive(Debug, Clone)]
pub struct DeleteRecordsPartition {
    pub tp: TopicPartition,
    pub offset: i64,
    pub timeout_ms: i32,
}

/// The new low watermark, or the error.
pub type DeleteRecordsAnswer = Result<u64, ErrorCode>;
