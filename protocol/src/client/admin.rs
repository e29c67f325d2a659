//! The admin client's sans-IO core: create, delete, list and describe topics; add partitions,
//! alter configs, elect leaders and delete records ([`changes`]); list, describe and delete
//! consumer groups, fetch, commit and delete their offsets ([`groups`]).
//!
//! Each operation is one request to any broker (the broker forwards to the controller; the client
//! never needs to know which broker that is). An operation survives lost connections and
//! retriable frame-level errors by resending to the next broker with backoff, until
//! `operation_timeout_ms`. Per-topic outcomes come back as they are: a retried CreateTopics may
//! report TOPIC_ALREADY_EXISTS for a topic the first attempt created, as with Kafka's admin client.

use std::collections::BTreeMap;

mod changes;
mod groups;
pub use changes::{ConfigChange, PartitionResult};
pub use groups::{CommitResults, GroupDescription, ListedGroup, MemberDescription};

use tracing::warn;

use crate::client::metadata::{MetadataCache, PartitionMeta};
use crate::client::net::{backoff_ms, Addr, ClientCore, InFlight, NetAction};
use crate::client::{ClientError, TopicPartition};
use crate::codec::{self, encode_request, Response};
use crate::frame::FrameLimits;
use crate::wire::{
    ConfigEntryT, CreatableTopicT, CreateTopicsRequestT, DeleteTopicsRequestT, MetadataRequestT,
    RequestBodyT, ResponseBodyT,
};
use crate::ErrorCode;

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
}

pub type OpId = u64;

#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub client_id: String,
    pub request_timeout_ms: u64,
    /// Total time an operation may take, retries included (Kafka `default.api.timeout.ms`).
    pub operation_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// Operations queued or in flight at once.
    pub max_pending_ops: usize,
    pub frame_limits: FrameLimits,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            client_id: "spool-admin".into(),
            request_timeout_ms: 30_000,
            operation_timeout_ms: 60_000,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            max_pending_ops: 64,
            frame_limits: FrameLimits::default(),
        }
    }
}

#[derive(Debug)]
struct OpState {
    op: AdminOp,
    started_ms: u64,
    attempts: u32,
    retry_at_ms: u64,
    in_flight: bool,
}

#[derive(Debug)]
pub struct AdminCore {
    config: AdminConfig,
    brokers: MetadataCache,
    ops: BTreeMap<OpId, OpState>,
    /// The operation a request is for, and whether it is that operation's FindCoordinator.
    inflight: InFlight<(OpId, bool)>,
    /// Coordinators found, by group id.
    coordinators: BTreeMap<String, Addr>,
    /// Partition leaders found, for operations sent to a leader.
    leaders: BTreeMap<TopicPartition, Addr>,
    results: Vec<(OpId, Result<AdminOutcome, ClientError>)>,
    next_id: OpId,
}

impl AdminCore {
    pub fn new(config: AdminConfig, bootstrap: Vec<Addr>) -> Result<Self, ClientError> {
        if bootstrap.is_empty() {
            return Err(ClientError::InvalidConfig("bootstrap list is empty".into()));
        }
        if config.max_pending_ops == 0 {
            return Err(ClientError::InvalidConfig(
                "max_pending_ops must be > 0".into(),
            ));
        }
        Ok(Self {
            brokers: MetadataCache::new(bootstrap, config.retry_backoff_ms, u64::MAX / 2),
            config,
            ops: BTreeMap::new(),
            inflight: InFlight::default(),
            coordinators: BTreeMap::new(),
            leaders: BTreeMap::new(),
            results: Vec::new(),
            next_id: 0,
        })
    }

    /// Queues an operation; refused when `max_pending_ops` are already pending.
    pub fn submit(&mut self, op: AdminOp, now_ms: u64) -> Result<OpId, ClientError> {
        if self.ops.len() >= self.config.max_pending_ops {
            return Err(ClientError::InvalidConfig(format!(
                "more than max_pending_ops ({}) admin operations pending",
                self.config.max_pending_ops
            )));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ops.insert(
            id,
            OpState {
                op,
                started_ms: now_ms,
                attempts: 0,
                retry_at_ms: 0,
                in_flight: false,
            },
        );
        Ok(id)
    }

    /// Takes the results of finished operations.
    pub fn take_results(&mut self) -> Vec<(OpId, Result<AdminOutcome, ClientError>)> {
        std::mem::take(&mut self.results)
    }

    pub fn is_pending(&self, id: OpId) -> bool {
        self.ops.contains_key(&id)
    }

    fn body(op: &AdminOp) -> RequestBodyT {
        if let Some(b) = groups::body(op).or_else(|| changes::body(op)) {
            return b;
        }
        match op {
            AdminOp::CreateTopics {
                topics,
                timeout_ms,
                validate_only,
            } => {
                let mut r = CreateTopicsRequestT::default();
                r.timeout_ms = *timeout_ms;
                r.validate_only = *validate_only;
                r.topics = Some(
                    topics
                        .iter()
                        .map(|t| CreatableTopicT {
                            name: t.name.clone(),
                            num_partitions: t.num_partitions,
                            replication_factor: t.replication_factor,
                            assignments: None,
                            configs: Some(
                                t.configs
                                    .iter()
                                    .map(|(n, v)| ConfigEntryT {
                                        name: n.clone(),
                                        value: Some(v.clone()),
                                    })
                                    .collect(),
                            ),
                        })
                        .collect(),
                );
                RequestBodyT::CreateTopicsRequest(Box::new(r))
            }
            AdminOp::DeleteTopics { names, timeout_ms } => {
                let mut r = DeleteTopicsRequestT::default();
                r.topic_names = Some(names.clone());
                r.timeout_ms = *timeout_ms;
                RequestBodyT::DeleteTopicsRequest(Box::new(r))
            }
            AdminOp::ListTopics { .. } => {
                let mut r = MetadataRequestT::default();
                r.topics = None;
                RequestBodyT::MetadataRequest(Box::new(r))
            }
            AdminOp::DescribeCluster => {
                let mut r = MetadataRequestT::default();
                r.topics = Some(Vec::new());
                RequestBodyT::MetadataRequest(Box::new(r))
            }
            AdminOp::DescribeTopics { names } => {
                let mut r = MetadataRequestT::default();
                r.topics = Some(names.clone());
                RequestBodyT::MetadataRequest(Box::new(r))
            }
            // Built by `groups::body` above.
            AdminOp::ListGroups
            | AdminOp::DescribeGroup { .. }
            | AdminOp::FetchOffsets { .. }
            | AdminOp::CommitOffsets { .. }
            | AdminOp::DeleteGroup { .. }
            | AdminOp::DeleteOffsets { .. } => RequestBodyT::ListGroupsRequest(Box::default()),
            // Built by `changes::body` above.
            AdminOp::CreatePartitions { .. }
            | AdminOp::AlterConfigs { .. }
            | AdminOp::ElectLeaders { .. }
            | AdminOp::DeleteRecords { .. } => RequestBodyT::MetadataRequest(Box::default()),
        }
    }

    fn outcome(op: &AdminOp, body: ResponseBodyT) -> Option<AdminOutcome> {
        Some(match (op, body) {
            (AdminOp::CreateTopics { .. }, ResponseBodyT::CreateTopicsResponse(r)) => {
                AdminOutcome::CreateTopics(
                    r.topics
                        .iter()
                        .flatten()
                        .map(|t| {
                            let code = ErrorCode::from(t.error_code);
                            let res = if code.is_ok() {
                                Ok(())
                            } else {
                                Err(err(code, &t.error_message, "create topic", &t.name))
                            };
                            (t.name.clone(), res)
                        })
                        .collect(),
                )
            }
            (AdminOp::DeleteTopics { .. }, ResponseBodyT::DeleteTopicsResponse(r)) => {
                AdminOutcome::DeleteTopics(
                    r.responses
                        .iter()
                        .flatten()
                        .map(|t| {
                            let code = ErrorCode::from(t.error_code);
                            let res = if code.is_ok() {
                                Ok(())
                            } else {
                                Err(err(code, &t.error_message, "delete topic", &t.name))
                            };
                            (t.name.clone(), res)
                        })
                        .collect(),
                )
            }
            (AdminOp::DescribeCluster, ResponseBodyT::MetadataResponse(r)) => {
                let mut brokers: Vec<BrokerDescription> = r
                    .brokers
                    .iter()
                    .flatten()
                    .map(|b| BrokerDescription {
                        node_id: b.node_id,
                        host: b.host.clone(),
                        port: b.port,
                        rack: b.rack.clone(),
                        broker_epoch: b.broker_epoch,
                        fenced: b.fenced,
                    })
                    .collect();
                brokers.sort_by_key(|b| b.node_id);
                AdminOutcome::DescribeCluster(ClusterDescription {
                    cluster_id: r.cluster_id.clone(),
                    controller_id: r.controller_id,
                    brokers,
                    quorum: r.quorum.as_ref().map(|q| QuorumDescription {
                        node_id: q.node_id,
                        voters: q.voters.clone().unwrap_or_default(),
                        learners: q.learners.clone().unwrap_or_default(),
                        leader_id: q.leader_id,
                        term: q.term,
                        commit_index: q.commit_index,
                        applied_offset: q.applied_offset,
                    }),
                })
            }
            (AdminOp::ListTopics { include_internal }, ResponseBodyT::MetadataResponse(r)) => {
                let mut names: Vec<String> = r
                    .topics
                    .iter()
                    .flatten()
                    .filter(|t| {
                        ErrorCode::from(t.error_code).is_ok()
                            && (*include_internal || !t.is_internal)
                    })
                    .map(|t| t.name.clone())
                    .collect();
                names.sort();
                AdminOutcome::ListTopics(names)
            }
            (AdminOp::DescribeTopics { .. }, ResponseBodyT::MetadataResponse(r)) => {
                let mut cache = MetadataCache::new(Vec::new(), 0, u64::MAX / 2);
                cache.update(&r, 0);
                AdminOutcome::DescribeTopics(
                    r.topics
                        .iter()
                        .flatten()
                        .map(|t| {
                            let code = ErrorCode::from(t.error_code);
                            let res = match cache.topic(&t.name) {
                                Some(meta) if code.is_ok() => Ok(TopicDescription {
                                    name: meta.name.clone(),
                                    is_internal: meta.is_internal,
                                    partitions: meta.partitions.clone(),
                                }),
                                _ => Err(err(code, &None, "describe topic", &t.name)),
                            };
                            (t.name.clone(), res)
                        })
                        .collect(),
                )
            }
            _ => return None,
        })
    }

    fn retry_or_fail(&mut self, id: OpId, code: ErrorCode, now_ms: u64) {
        let Some(st) = self.ops.get_mut(&id) else {
            return;
        };
        st.in_flight = false;
        let deadline = st.started_ms + self.config.operation_timeout_ms;
        let retry_at = now_ms
            + backoff_ms(
                st.attempts,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            );
        if code.is_retriable() && retry_at < deadline {
            st.retry_at_ms = retry_at;
            return;
        }
        let error = if code.is_retriable() {
            ClientError::Timeout {
                what: "admin operation".into(),
                timeout_ms: self.config.operation_timeout_ms,
            }
        } else {
            ClientError::broker(code, st.op.describe())
        };
        self.ops.remove(&id);
        self.results.push((id, Err(error)));
    }
}

impl ClientCore for AdminCore {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let mut out = Vec::new();
        for addr in self.inflight.expired_addrs(now_ms) {
            out.push(NetAction::Close { addr: addr.clone() });
            self.on_disconnect(&addr, now_ms);
        }
        let timed_out: Vec<OpId> = self
            .ops
            .iter()
            .filter(|(_, s)| {
                !s.in_flight && now_ms >= s.started_ms + self.config.operation_timeout_ms
            })
            .map(|(id, _)| *id)
            .collect();
        for id in timed_out {
            self.ops.remove(&id);
            self.results.push((
                id,
                Err(ClientError::Timeout {
                    what: "admin operation".into(),
                    timeout_ms: self.config.operation_timeout_ms,
                }),
            ));
        }
        let ready: Vec<OpId> = self
            .ops
            .iter()
            .filter(|(_, s)| !s.in_flight && s.retry_at_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            let Some(st) = self.ops.get_mut(&id) else {
                continue;
            };
            // A group operation goes to the group's coordinator, a record deletion to the
            // partition's leader: each found first.
            let (addr, body, find) =
                match (groups::coordinator_key(&st.op), changes::leader_key(&st.op)) {
                    (Some(g), _) => match self.coordinators.get(g) {
                        Some(c) => (c.clone(), Self::body(&st.op), false),
                        None => {
                            let Some(addr) = self.brokers.any_broker() else {
                                break;
                            };
                            (addr, groups::find_coordinator(g), true)
                        }
                    },
                    (None, Some(tp)) => match self.leaders.get(tp) {
                        Some(l) => (l.clone(), Self::body(&st.op), false),
                        None => {
                            let Some(addr) = self.brokers.any_broker() else {
                                break;
                            };
                            (addr, changes::find_leader(tp), true)
                        }
                    },
                    (None, None) => {
                        let Some(addr) = self.brokers.any_broker() else {
                            break;
                        };
                        (addr, Self::body(&st.op), false)
                    }
                };
            st.in_flight = true;
            st.attempts += 1;
            let correlation_id =
                self.inflight
                    .start(&addr, now_ms + self.config.request_timeout_ms, (id, find));
            let header = codec::request(correlation_id, Some(&self.config.client_id), body);
            match encode_request(&header, Vec::new(), &self.config.frame_limits) {
                Ok(frame) => out.push(NetAction::Send {
                    addr,
                    frame,
                    expects_response: true,
                }),
                Err(e) => {
                    let _ = self.inflight.complete(&addr, correlation_id);
                    self.ops.remove(&id);
                    self.results.push((
                        id,
                        Err(ClientError::InvalidConfig(format!(
                            "request too large: {e}"
                        ))),
                    ));
                }
            }
        }
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        let Some((id, find)) = self.inflight.complete(addr, response.header.correlation_id) else {
            warn!(%addr, correlation_id = response.header.correlation_id, "response matches no request");
            return;
        };
        let frame_error = ErrorCode::from(response.header.error_code);
        let Some(st) = self.ops.get_mut(&id) else {
            return;
        };
        if let (true, Some(tp)) = (find, changes::leader_key(&st.op)) {
            let tp = tp.clone();
            match changes::leader_addr(&response.header.body, &tp) {
                Ok(l) => {
                    self.leaders.insert(tp, l);
                    st.in_flight = false;
                    st.retry_at_ms = now_ms;
                }
                Err(code) => self.retry_or_fail(id, code, now_ms),
            }
            return;
        }
        if find {
            let group = groups::coordinator_key(&st.op)
                .unwrap_or_default()
                .to_owned();
            match groups::coordinator_addr(&response.header.body) {
                Ok(c) => {
                    self.coordinators.insert(group, c);
                    // Straight on to the coordinator: finding it is not an attempt.
                    st.in_flight = false;
                    st.retry_at_ms = now_ms;
                }
                Err(code) => self.retry_or_fail(id, code, now_ms),
            }
            return;
        }
        let body = response.header.body.clone();
        let result =
            groups::outcome(&st.op, body.clone()).or_else(|| changes::outcome(&st.op, body));
        if let Some(result) = result {
            match result {
                Ok(outcome) => {
                    self.ops.remove(&id);
                    self.results.push((id, Ok(outcome)));
                }
                Err(code) => {
                    if groups::is_coordinator_error(code) {
                        if let Some(g) = groups::coordinator_key(&st.op) {
                            self.coordinators.remove(g);
                        }
                    }
                    if changes::is_leader_error(code) {
                        if let Some(tp) = changes::leader_key(&st.op) {
                            self.leaders.remove(tp);
                        }
                    }
                    self.retry_or_fail(id, code, now_ms);
                }
            }
            return;
        }
        match Self::outcome(&st.op, response.header.body) {
            Some(outcome) => {
                self.ops.remove(&id);
                self.results.push((id, Ok(outcome)));
            }
            None => {
                let code = if frame_error.is_ok() {
                    ErrorCode::UnknownServerError
                } else {
                    frame_error
                };
                self.retry_or_fail(id, code, now_ms);
            }
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        self.coordinators.retain(|_, c| c != addr);
        self.leaders.retain(|_, l| l != addr);
        for (id, _) in self.inflight.drain_addr(addr) {
            self.retry_or_fail(id, ErrorCode::NetworkException, now_ms);
        }
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let retry = self
            .ops
            .values()
            .filter(|s| !s.in_flight)
            .map(|s| s.retry_at_ms)
            .min();
        let timeout = self
            .ops
            .values()
            .map(|s| s.started_ms + self.config.operation_timeout_ms)
            .min();
        [retry, timeout, self.inflight.earliest_deadline_ms()]
            .into_iter()
            .flatten()
            .filter(|t| *t > now_ms)
            .min()
    }
}
