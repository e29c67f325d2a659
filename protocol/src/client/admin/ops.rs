//! The admin client's vocabulary: the operations it runs ([`AdminOp`]), what they return
//! ([`AdminOutcome`]), the descriptions of topics, brokers and the quorum, and the per-item error
//! every result carries. `super` (the core) sends them; `changes`, `groups` and `txns` build and
//! read their requests.

use crate::client::metadata::PartitionMeta;
use crate::client::{ClientError, TopicPartition};
use crate::ErrorCode;

use super::{
    CommitResults, ConfigChange, GroupDescription, ListedGroup, ListedTransaction, PartitionResult,
    TransactionDescription,
};
use crate::client::net::Addr;

/// A topic to create. `-1` partitions / replication factor take the broker's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    pub fn new(name: impl Into<String>, num_partitions: i32, replication_factor: i16) -> Self {
        Self {
            name: name.into(),
            num_partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((name.into(), value.into()));
        self
    }
}

/// A topic as described by the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub is_internal: bool,
    pub partitions: Vec<PartitionMeta>,
}

/// One broker as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerDescription {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// From its last registration (-1: not registered yet).
    pub broker_epoch: i64,
    /// Fenced by the controller: it leads nothing until it catches up again.
    pub fenced: bool,
}

/// The controller quorum as the broker asked sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumDescription {
    /// The broker that answered.
    pub node_id: i32,
    /// Node ids that vote, and that only follow the metadata log.
    pub voters: Vec<i32>,
    pub learners: Vec<i32>,
    /// The active controller (-1: an election is under way).
    pub leader_id: i32,
    pub term: u64,
    pub commit_index: u64,
    /// The metadata offset the answering broker has applied.
    pub applied_offset: u64,
}

/// The cluster as the broker asked sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    pub cluster_id: Option<String>,
    /// The broker clients send metadata changes to (it forwards them to the active controller).
    pub controller_id: i32,
    /// Registered brokers (live and fenced), ascending by id.
    pub brokers: Vec<BrokerDescription>,
    /// `None` from a broker that does not report it.
    pub quorum: Option<QuorumDescription>,
}

/// An admin operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminOp {
    /// The brokers and the controller (a Metadata request for no topic).
    DescribeCluster,
    CreateTopics {
        topics: Vec<NewTopic>,
        timeout_ms: i32,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
        timeout_ms: i32,
    },
    /// Every topic's name (internal topics included only when asked).
    ListTopics {
        include_internal: bool,
    },
    DescribeTopics {
        names: Vec<String>,
    },
    /// Every consumer group (of the broker asked).
    ListGroups,
    /// One group's state, protocol and members (sent to its coordinator).
    DescribeGroup {
        group_id: String,
    },
    /// A group's committed offsets: these partitions, or every one it committed (`None`).
    FetchOffsets {
        group_id: String,
        partitions: Option<Vec<TopicPartition>>,
    },
    /// Commits offsets from outside any generation (generation -1, no member id), as Kafka's
    /// reset-offsets tool does; the coordinator refuses it while the group has members.
    CommitOffsets {
        group_id: String,
        offsets: Vec<(TopicPartition, i64)>,
    },
    /// Grows a topic to `count` partitions (Kafka's CreatePartitions; keys hash differently
    /// afterwards).
    CreatePartitions {
        topic: String,
        count: i32,
        validate_only: bool,
        timeout_ms: i32,
    },
    /// Changes a topic's configs, in order (Kafka's IncrementalAlterConfigs).
    AlterConfigs {
        topic: String,
        changes: Vec<ConfigChange>,
        validate_only: bool,
    },
    /// Elects the preferred leader (or, `unclean`, any live replica of a leaderless partition)
    /// of these partitions, or of every partition (`None`).
    ElectLeaders {
        unclean: bool,
        partitions: Option<Vec<TopicPartition>>,
        timeout_ms: i32,
    },
    /// Deletes the records of a partition before `before_offset` (-1: the high watermark), on
    /// its leader.
    DeleteRecords {
        partition: TopicPartition,
        before_offset: i64,
        timeout_ms: i32,
    },
    /// Deletes an empty group and its committed offsets (sent to its coordinator).
    DeleteGroup {
        group_id: String,
    },
    /// Deletes a group's committed offsets of these partitions.
    DeleteOffsets {
        group_id: String,
        partitions: Vec<TopicPartition>,
    },
    /// The transactional ids `broker` coordinates (`None`: any broker).
    ListTransactions {
        broker: Option<Addr>,
    },
    /// One transactional id, from its transaction coordinator.
    DescribeTransaction {
        transactional_id: String,
    },
}

impl AdminOp {
    /// What the operation does, for its error messages.
    pub fn describe(&self) -> String {
        match self {
            AdminOp::DeleteRecords {
                partition,
                before_offset,
                ..
            } => format!("delete records of {partition} before offset {before_offset}"),
            AdminOp::DeleteGroup { group_id } => format!("delete group {group_id}"),
            AdminOp::DeleteOffsets { group_id, .. } => {
                format!("delete offsets of group {group_id}")
            }
            AdminOp::DescribeGroup { group_id }
            | AdminOp::FetchOffsets { group_id, .. }
            | AdminOp::CommitOffsets { group_id, .. } => {
                format!("admin operation on group {group_id}")
            }
            AdminOp::DescribeTransaction { transactional_id } => {
                format!("describe transactional id {transactional_id}")
            }
            _ => "admin operation".into(),
        }
    }
}

/// The broker's refusal of `what` on `name` (a topic, a partition), with its message when it
/// sent one: the error every per-item admin result carries.
pub(crate) fn err(
    code: ErrorCode,
    message: &Option<String>,
    what: &str,
    name: &str,
) -> ClientError {
    let context = match message {
        Some(m) if !m.is_empty() => format!("{what} {name}: {m}"),
        _ => format!("{what} {name}"),
    };
    ClientError::broker(code, context)
}

/// Per-topic outcome.
pub type TopicResult<T> = (String, Result<T, ClientError>);

/// What an operation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminOutcome {
    DescribeCluster(ClusterDescription),
    CreateTopics(Vec<TopicResult<()>>),
    DeleteTopics(Vec<TopicResult<()>>),
    ListTopics(Vec<String>),
    DescribeTopics(Vec<TopicResult<TopicDescription>>),
    ListGroups(Vec<ListedGroup>),
    DescribeGroup(GroupDescription),
    /// Committed offsets (-1: none), sorted.
    FetchOffsets(Vec<(TopicPartition, i64)>),
    CommitOffsets(CommitResults),
    CreatePartitions(Vec<TopicResult<()>>),
    AlterConfigs(Vec<TopicResult<()>>),
    /// Per partition, sorted.
    ElectLeaders(Vec<PartitionResult>),
    /// The partition's log start offset afterwards.
    DeleteRecords(i64),
    DeleteGroup(Result<(), ClientError>),
    /// The group's refusal, or one result per partition (sorted).
    DeleteOffsets(Result<Vec<PartitionResult>, ClientError>),
    ListTransactions(Vec<ListedTransaction>),
    DescribeTransaction(TransactionDescription),
}

impl AdminOutcome {
    /// Whether a metadata change was refused, in part or whole, because the cluster had no
    /// active controller at that moment (an election under way): worth resending, as Kafka's
    /// admin client does, rather than reporting NOT_CONTROLLER to the operator.
    pub(crate) fn awaits_controller(&self) -> bool {
        fn refused(r: &Result<(), ClientError>) -> bool {
            matches!(
                r,
                Err(ClientError::Broker {
                    code: ErrorCode::NotController,
                    ..
                })
            )
        }
        match self {
            Self::CreateTopics(rs)
            | Self::DeleteTopics(rs)
            | Self::CreatePartitions(rs)
            | Self::AlterConfigs(rs) => rs.iter().any(|(_, r)| refused(r)),
            Self::ElectLeaders(rs) => rs.iter().any(|(_, r)| refused(r)),
            _ => false,
        }
    }
}
