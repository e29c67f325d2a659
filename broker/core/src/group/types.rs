//! What goes into and comes out of the sans-IO group coordinator ([`super::Coordinator`]): plain
//! data, no I/O handles, so the glommio driver and the tests feed it the same way.

use bytes::Bytes;
use spool_error_code::ErrorCode;

pub use super::records::OffsetValue;

/// The driver's id for a request waiting on an answer.
pub type RequestId = u64;

/// The driver's id for an append whose outcome it reports back through
/// [`super::Coordinator::persisted`].
pub type PersistToken = u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinArgs {
    pub group_id: String,
    /// Empty: a new member (the coordinator assigns an id).
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncArgs {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The leader's assignment, per member id (empty from followers).
    pub assignments: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatArgs {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveArgs {
    pub group_id: String,
    /// (member id, group instance id); an empty member id with an instance id names the static
    /// member by its instance.
    pub members: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitArgs {
    pub group_id: String,
    /// -1 with an empty member id: a commit from outside any generation.
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<(String, i32, OffsetValue)>,
    /// TxnOffsetCommit: the transactional producer's (id, epoch). Its offsets are pending until
    /// the transaction's marker reaches the group's offsets partition (committed) or are
    /// dropped (aborted).
    pub producer: Option<(i64, i16)>,
}

/// OffsetDelete for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteOffsetsArgs {
    pub group_id: String,
    /// (topic, partition), in request order.
    pub partitions: Vec<(String, i32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Join(RequestId, JoinArgs),
    Sync(RequestId, SyncArgs),
    Heartbeat(RequestId, HeartbeatArgs),
    Leave(RequestId, LeaveArgs),
    Commit(RequestId, CommitArgs),
    /// DeleteGroups for the groups this core coordinates (any of them may be named twice).
    DeleteGroups(RequestId, Vec<String>),
    DeleteOffsets(RequestId, DeleteOffsetsArgs),
}

/// A JoinGroup answer; `members` is filled for the leader only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub members: Vec<(String, Option<String>, Vec<u8>)>,
    /// A static leader that rejoined without a rebalance: it must not compute a new assignment.
    pub skip_assignment: bool,
}

impl JoinResult {
    pub fn error(error: ErrorCode, member_id: &str) -> Self {
        Self {
            error,
            generation: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Vec<u8>,
}

impl SyncResult {
    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Join(JoinResult),
    Sync(SyncResult),
    Heartbeat(ErrorCode),
    /// Top-level error, then per member (member id, instance id, error).
    Leave(ErrorCode, Vec<(String, Option<String>, ErrorCode)>),
    /// Per partition (topic, partition, error), in request order.
    Commit(Vec<(String, i32, ErrorCode)>),
    /// Per group (group id, error), in request order.
    DeleteGroups(Vec<(String, ErrorCode)>),
    /// Top-level error (the partitions are empty when it is set), then per partition (topic,
    /// partition, error) in request order.
    DeleteOffsets(ErrorCode, Vec<(String, i32, ErrorCode)>),
}

impl Response {
    /// The same kind of answer carrying only `error` (shutdown, unloading).
    pub fn error_like(&self, error: ErrorCode) -> Response {
        match self {
            Response::Join(j) => Response::Join(JoinResult::error(error, &j.member_id)),
            Response::Sync(_) => Response::Sync(SyncResult::error(error)),
            Response::Heartbeat(_) => Response::Heartbeat(error),
            Response::Leave(_, m) => Response::Leave(error, m.clone()),
            Response::Commit(ps) => {
                Response::Commit(ps.iter().map(|(t, p, _)| (t.clone(), *p, error)).collect())
            }
            Response::DeleteGroups(gs) => {
                Response::DeleteGroups(gs.iter().map(|(g, _)| (g.clone(), error)).collect())
            }
            Response::DeleteOffsets(..) => Response::DeleteOffsets(error, Vec::new()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Respond(RequestId, Response),
    /// Append `records` (key, value; `None` = tombstone) to partition `partition` of
    /// `__consumer_offsets`, durably, then report through `persisted(token, ..)`.
    Persist {
        token: PersistToken,
        partition: i32,
        records: Vec<(Bytes, Option<Bytes>)>,
    },
    /// [`Action::Persist`] as one transactional batch of (`producer_id`, `producer_epoch`): a
    /// TxnOffsetCommit's offsets, decided by the transaction's marker.
    PersistTxn {
        token: PersistToken,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        records: Vec<(Bytes, Option<Bytes>)>,
    },
}

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// Kafka's names (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// One member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: GroupState,
    /// -1 for an unknown group.
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// The coordinator's settings (Kafka's `group.*` and `offsets.topic.num.partitions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorConfig {
    pub offsets_partitions: i32,
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            offsets_partitions: 50,
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
        }
    }
}

/// A group request routed over the mesh to the coordinator core of its group.
#[derive(Debug, Clone)]
pub enum GroupCall {
    Join(JoinArgs),
    Sync(SyncArgs),
    Heartbeat(HeartbeatArgs),
    Leave(LeaveArgs),
    Commit(CommitArgs),
    /// `topics` `None`: every partition the group committed.
    FetchOffsets {
        group_id: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
        /// KIP-447: UNSTABLE_OFFSET_COMMIT where a transaction holds an undecided offset.
        require_stable: bool,
    },
    Describe(String),
    /// Every group this core coordinates.
    List,
    /// DeleteGroups for groups this core coordinates: answered [`Response::DeleteGroups`].
    DeleteGroups(Vec<String>),
    /// OffsetDelete: answered [`Response::DeleteOffsets`].
    DeleteOffsets(DeleteOffsetsArgs),
}

/// One partition's OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub topic: String,
    pub partition: i32,
    /// None: nothing committed (or, with `error`, not answered).
    pub committed: Option<OffsetValue>,
    /// NONE, or UNSTABLE_OFFSET_COMMIT (asked with `require_stable`).
    pub error: ErrorCode,
}

/// The coordinator core's answer to a [`GroupCall`].
#[derive(Debug, Clone)]
pub enum GroupAnswer {
    Response(Response),
    Offsets(Result<Vec<FetchedOffset>, ErrorCode>),
    Described(Result<GroupDescription, ErrorCode>),
    Listed(Vec<(String, String, GroupState)>),
    /// The coordinator stopped before answering.
    Unavailable,
}

/// A DeleteGroups request waiting on its appends (one per offsets partition it touched): kept
/// by the coordinator, decided by `super::delete`.
#[derive(Debug)]
pub(super) struct DeleteWait {
    /// Per group, in request order; NONE for groups whose tombstones are in flight.
    pub(super) results: Vec<(String, ErrorCode)>,
    /// Groups whose tombstones are in flight.
    pub(super) in_flight: std::collections::BTreeSet<String>,
    /// Appends not yet reported.
    pub(super) remaining: usize,
}
