//! The internal protocol's messages as plain Rust values (see the module above for the framing).
//! Every message carries the sender's node id; a request carries a correlation id that its answer
//! repeats (the codec puts both in the frame header).

use bytes::Bytes;

use crate::ErrorCode;

/// One frame of the internal protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalFrame {
    /// The sending broker's node id.
    pub from_node: i32,
    /// Chosen by the requester; an answer repeats its request's. Raft messages use 0.
    pub correlation_id: i32,
    pub message: InternalMessage,
    /// The sender's cluster id; empty while it knows none yet (a fresh data directory).
    pub cluster_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InternalMessage {
    /// raft-rs messages (`eraftpb::Message`, protobuf-encoded), in the order raft produced them.
    /// No answer: raft retries on its own.
    Raft(Vec<Vec<u8>>),
    RegisterBroker(RegisterBroker),
    RegisterBrokerAnswer(RegisterBrokerAnswer),
    Heartbeat(Heartbeat),
    HeartbeatAnswer(HeartbeatAnswer),
    /// A metadata change a broker forwards to the active controller (KIP-590's forwarding).
    Forward(ForwardOp),
    ForwardAnswer(ForwardAnswer),
    /// A follower's fetch from a partition leader (its payload is empty).
    ReplicaFetch(ReplicaFetch),
    /// The leader's answer; the frame's payload carries the partitions' record batches (see
    /// [`ReplicaFetchAnswer`]).
    ReplicaFetchAnswer(ReplicaFetchAnswer),
    /// A transaction coordinator's markers for partitions the receiver leads.
    WriteTxnMarkers(WriteTxnMarkers),
    /// One code per partition, in request order.
    WriteTxnMarkersAnswer(Vec<TxnMarkerResult>),
    /// A partition leader's KIP-890 check with a transaction coordinator.
    VerifyTxn(VerifyTxn),
    /// NONE, or why the batch must be refused.
    VerifyTxnAnswer(ErrorCode),
}

/// One transaction's commit (or abort) marker for partitions the receiving broker leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTxnMarkers {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// (topic, partition).
    pub partitions: Vec<(String, i32)>,
    /// The offset of the transaction's Prepare record in `__transaction_state` (-1: unknown),
    /// written into each marker (spool-storage's `control`).
    pub decision_offset: i64,
}

/// Whether (`producer_id`, `producer_epoch`) of `transactional_id` has an Ongoing transaction
/// holding `topic`/`partition` (KIP-890 part 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub topic: String,
    pub partition: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarkerResult {
    pub topic: String,
    pub partition: i32,
    pub error: ErrorCode,
}

/// A listener a broker advertises (`name` is `native` or `kafka`, or `internal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A broker announcing itself to the active controller at start-up (Kafka's BrokerRegistration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker {
    pub broker_id: i32,
    /// A fresh id per process start: the controller tells a restart from a broker that never
    /// went away by it.
    pub incarnation_high: u64,
    pub incarnation_low: u64,
    pub listeners: Vec<Listener>,
    pub rack: Option<String>,
    /// The broker epoch it had before this start (-1: none, or it did not shut down cleanly).
    pub previous_broker_epoch: i64,
    /// The cluster the broker's data directory belongs to: a broker of another cluster is refused.
    pub cluster_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerAnswer {
    pub error: ErrorCode,
    pub message: Option<String>,
    /// The epoch the controller gave this registration (valid when `error` is NONE).
    pub broker_epoch: i64,
}

/// A broker's heartbeat to the active controller (Kafka's BrokerHeartbeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The last metadata offset (raft index) this broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub error: ErrorCode,
    pub is_fenced: bool,
    pub should_shutdown: bool,
}

/// A topic to create, as forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardOp {
    CreateTopics {
        topics: Vec<ForwardTopic>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// A partition leader's ISR change (KIP-497), for the active controller to decide.
    AlterPartition(AlterPartitionOp),
    /// Kafka's CreatePartitions; answered with one topic outcome per topic.
    CreatePartitions {
        topics: Vec<ForwardNewPartitions>,
        validate_only: bool,
    },
    /// AlterConfigs / IncrementalAlterConfigs on topics; one topic outcome per topic.
    AlterConfigs {
        topics: Vec<ForwardConfigAlteration>,
        validate_only: bool,
    },
    /// Operator leader elections; one outcome per partition, in order, named by its topic.
    ElectLeaders {
        unclean: bool,
        partitions: Vec<(String, i32)>,
    },
}

/// One topic of a forwarded CreatePartitions: the total count wanted and, when given, one
/// replica list per new partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardNewPartitions {
    pub name: String,
    pub count: i32,
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// One config operation's kind, as IncrementalAlterConfigs numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardConfigOpKind {
    Set = 0,
    Delete = 1,
    Append = 2,
    Subtract = 3,
}

/// One config operation: its key, kind and value (`None` for a delete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardConfigOp {
    pub key: String,
    pub kind: ForwardConfigOpKind,
    pub value: Option<String>,
}

/// One topic's forwarded config change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardConfigAlteration {
    pub topic: String,
    pub incremental: bool,
    pub ops: Vec<ForwardConfigOp>,
}

/// A partition leader's AlterPartition, as forwarded: exactly the fields of
/// `spool_core::isr_change::AlterPartitionRequest`, plus the partition it is for. Ids and epochs
/// are non-negative, but a broker epoch may be -1 (unknown); the codec refuses anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionOp {
    /// The topic's 128-bit id, `high` half first, each half big-endian
    /// (`spool_raft::Uuid128::to_bytes`).
    pub topic_id: [u8; 16],
    pub partition: i32,
    /// The sender (the partition's leader) and its broker epoch.
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub leader_epoch: i32,
    /// The partition epoch the change was computed from.
    pub partition_epoch: i32,
    /// The proposed ISR: (broker id, the broker epoch the leader saw in its fetches; -1 unknown).
    pub new_isr: Vec<(i32, i64)>,
}

/// A partition's committed leadership, as the active controller answers an AlterPartition with
/// it (`spool_core::replica::Leadership`). `leader_id` is -1 when it has no leader; every other
/// number is non-negative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeadership {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// Why the active controller refused an AlterPartition: Kafka's code (never NONE), and for
/// INELIGIBLE_REPLICA the member it refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlterPartitionRefusal {
    pub error: ErrorCode,
    pub ineligible_broker_id: Option<i32>,
}

/// One topic's outcome of a forwarded create or delete, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardTopicOutcome {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardAnswer {
    Topics(Vec<ForwardTopicOutcome>),
    /// (first producer id, block size), or why not.
    ProducerIds(Result<(i64, i32), ErrorCode>),
    /// The receiver is not the active controller (the sender refreshes and retries).
    NotController,
    /// The partition's committed state after the change (or a newer one), or why it was refused.
    AlterPartition(Result<PartitionLeadership, AlterPartitionRefusal>),
}

/// A follower's fetch from a partition leader (REPLICATION.md "Follower fetch"): one per
/// leader/follower/core session, over many partitions. The per-partition fields, with the
/// request's `replica_id` and `broker_epoch`, are exactly `broker_core::follower_fetch::FollowerFetch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetch {
    pub replica_id: i32,
    /// KIP-903's replica broker epoch; `None` when absent (-1 on the wire).
    pub broker_epoch: Option<i64>,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partitions: Vec<ReplicaFetchPartition>,
}

/// One partition of a [`ReplicaFetch`]. On the wire an absent option is -1; the codec refuses any
/// other negative number, and an offset over `i64::MAX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchPartition {
    pub topic: String,
    pub partition: i32,
    /// KIP-320's current leader epoch; `None`: not checked.
    pub current_leader_epoch: Option<i32>,
    /// The follower's log end: where to read from.
    pub fetch_offset: u64,
    /// The epoch of the follower's last appended batch; `None` when its log has none.
    pub last_fetched_epoch: Option<i32>,
    pub log_start_offset: u64,
    /// The offset the follower has fdatasynced (`durability = fsync`); `None`: its fetch offset.
    pub durable_offset: Option<u64>,
}

/// Where the leader's copy of `epoch` ends (`broker_core::epoch_cache::EpochEndOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

/// The leader's answer to a [`ReplicaFetch`]. The frame's payload is every partition's records,
/// concatenated in answer order: partition `i`'s are the `records_bytes` bytes after those of
/// partitions `0..i` ([`Self::split_records`]). The codec checks the sum equals the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchAnswer {
    /// A whole-request error (NONE when the partitions say how each went).
    pub error: ErrorCode,
    pub partitions: Vec<ReplicaFetchAnswerPartition>,
}

/// One partition of a [`ReplicaFetchAnswer`], in request order. The offsets are -1 when unknown
/// (an error answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchAnswerPartition {
    pub topic: String,
    pub partition: i32,
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// Set when the follower's log diverges: it truncates to this and fetches again.
    pub diverging_epoch: Option<EpochEndOffset>,
    /// How many payload bytes are this partition's records.
    pub records_bytes: u32,
}

impl ReplicaFetchAnswer {
    /// The payload bytes the partitions' `records_bytes` add up to.
    pub fn records_bytes(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| u64::from(p.records_bytes))
            .sum()
    }

    /// Each partition's records, in answer order, as zero-copy slices of `payload`; `None` when
    /// the `records_bytes` do not add up to `payload.len()` (a decoded answer always does).
    pub fn split_records(&self, payload: &Bytes) -> Option<Vec<Bytes>> {
        if self.records_bytes() != payload.len() as u64 {
            return None;
        }
        let mut at = 0;
        let mut out = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            let end = at + p.records_bytes as usize;
            out.push(payload.slice(at..end));
            at = end;
        }
        Some(out)
    }
}
