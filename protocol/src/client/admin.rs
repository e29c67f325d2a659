//! The admin client's sans-IO core: create, delete, list and describe topics; add partitions,
//! alter configs, elect leaders and delete records ([`changes`]); list, describe and delete
//! consumer groups, fetch, commit and delete their offsets ([`groups`]); list and describe
//! transactional ids ([`txns`]); the operations and outcomes themselves are [`ops`]'s.
//!
//! Each operation is one request to any broker (the broker forwards to the controller; the client
//! never needs to know which broker that is). An operation survives lost connections and
//! retriable frame-level errors by resending to the next broker with backoff, until
//! `operation_timeout_ms`. Per-topic outcomes come back as they are: a retried CreateTopics may
//! report TOPIC_ALREADY_EXISTS for a topic the first attempt created, as with Kafka's admin client.

use std::collections::BTreeMap;

mod changes;
mod groups;
mod ops;
#[cfg(test)]
mod retry_tests;
mod txns;
pub use changes::{ConfigChange, PartitionResult};
pub use groups::{CommitResults, GroupDescription, ListedGroup, MemberDescription};
pub(crate) use ops::err;
pub use ops::{
    AdminOp, AdminOutcome, BrokerDescription, ClusterDescription, NewTopic, QuorumDescription,
    TopicDescription, TopicResult,
};
pub use txns::{ListedTransaction, TransactionDescription};

use tracing::warn;

use crate::client::metadata::MetadataCache;
use crate::client::net::{backoff_ms, Addr, ClientCore, InFlight, NetAction};
use crate::client::{ClientError, TopicPartition};
use crate::codec::{self, encode_request, Response};
use crate::frame::FrameLimits;
use crate::wire::{
    ConfigEntryT, CoordinatorType, CreatableTopicT, CreateTopicsRequestT, DeleteTopicsRequestT,
    MetadataRequestT, RequestBodyT, ResponseBodyT,
};
use crate::ErrorCode;

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
    /// Coordinators found, by coordinator type (group, transaction) and key.
    coordinators: BTreeMap<(CoordinatorType, String), Addr>,
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
        let built = groups::body(op)
            .or_else(|| changes::body(op))
            .or_else(|| txns::body(op));
        if let Some(b) = built {
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
            // Built by `txns::body` above.
            AdminOp::ListTransactions { .. } | AdminOp::DescribeTransaction { .. } => {
                RequestBodyT::ListTransactionsRequest(Box::default())
            }
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

    /// The coordinator an operation must go to: a group's or a transactional id's.
    fn coordinator_of(op: &AdminOp) -> Option<(CoordinatorType, &str)> {
        groups::coordinator_key(op)
            .map(|g| (CoordinatorType::Group, g))
            .or_else(|| txns::coordinator_key(op).map(|t| (CoordinatorType::Transaction, t)))
    }

    /// Schedules another attempt after the backoff, if one still fits before the deadline.
    fn retry_later(&mut self, id: OpId, now_ms: u64) -> bool {
        let Some(st) = self.ops.get_mut(&id) else {
            return false;
        };
        st.in_flight = false;
        let deadline = st.started_ms + self.config.operation_timeout_ms;
        let retry_at = now_ms
            + backoff_ms(
                st.attempts,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            );
        if retry_at < deadline {
            st.retry_at_ms = retry_at;
            return true;
        }
        false
    }

    /// Finishes an outcome, unless it says the change met no active controller and another
    /// attempt fits: then it is resent. When none fits, the outcome is reported as it came, so the
    /// operator sees NOT_CONTROLLER per topic rather than a bare timeout.
    fn finish(&mut self, id: OpId, outcome: AdminOutcome, now_ms: u64) {
        if outcome.awaits_controller() && self.retry_later(id, now_ms) {
            return;
        }
        self.ops.remove(&id);
        self.results.push((id, Ok(outcome)));
    }

    fn retry_or_fail(&mut self, id: OpId, code: ErrorCode, now_ms: u64) {
        if code.is_retriable() && self.retry_later(id, now_ms) {
            return;
        }
        let Some(st) = self.ops.remove(&id) else {
            return;
        };
        let error = if let Some(e) = txns::failure(&st.op, code) {
            e
        } else if code.is_retriable() {
            ClientError::Timeout {
                what: "admin operation".into(),
                timeout_ms: self.config.operation_timeout_ms,
            }
        } else {
            ClientError::broker(code, st.op.describe())
        };
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
                match (Self::coordinator_of(&st.op), changes::leader_key(&st.op)) {
                    (Some((kind, key)), _) => {
                        match self.coordinators.get(&(kind, key.to_owned())) {
                            Some(c) => (c.clone(), Self::body(&st.op), false),
                            None => {
                                let Some(addr) = self.brokers.any_broker() else {
                                    break;
                                };
                                let find = if kind == CoordinatorType::Transaction {
                                    txns::find_coordinator(key)
                                } else {
                                    groups::find_coordinator(key)
                                };
                                (addr, find, true)
                            }
                        }
                    }
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
                        let addr = match txns::broker_of(&st.op) {
                            Some(b) => b.clone(),
                            None => {
                                let Some(addr) = self.brokers.any_broker() else {
                                    break;
                                };
                                addr
                            }
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
            let Some((kind, key)) = Self::coordinator_of(&st.op) else {
                self.retry_or_fail(id, ErrorCode::UnknownServerError, now_ms);
                return;
            };
            let key = (kind, key.to_owned());
            match groups::coordinator_addr(&response.header.body) {
                Ok(c) => {
                    self.coordinators.insert(key, c);
                    // Straight on to the coordinator: finding it is not an attempt.
                    st.in_flight = false;
                    st.retry_at_ms = now_ms;
                }
                Err(code) => self.retry_or_fail(id, code, now_ms),
            }
            return;
        }
        let body = response.header.body.clone();
        let result = groups::outcome(&st.op, body.clone())
            .or_else(|| changes::outcome(&st.op, body.clone()))
            .or_else(|| txns::outcome(&st.op, body));
        if let Some(result) = result {
            match result {
                Ok(outcome) => self.finish(id, outcome, now_ms),
                Err(code) => {
                    if groups::is_coordinator_error(code) {
                        if let Some((kind, key)) = Self::coordinator_of(&st.op) {
                            self.coordinators.remove(&(kind, key.to_owned()));
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
            Some(outcome) => self.finish(id, outcome, now_ms),
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
