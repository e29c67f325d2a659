//! [`ControllerService`]: the controller's request handling on one simulated node — the same
//! decisions `spool_raft::Controller` and the broker's `controller.rs` / `controller_calls.rs`
//! make, over the node's real [`MetadataRaft`].
//!
//! Owns: the active controller's broker sessions (spool-core [`BrokerSessions`], made when the
//! node is found leading, dropped when it is not, with the broker's activation grace), the
//! seeded topic-id stream (as `Controller` seeds it: run seed, node id, incarnation), and the
//! requests waiting for their proposal to commit.
//! Promises: every request is answered at most once — at once when refused or when nothing needs
//! writing, else when the proposal it waits for commits (with its outcome) or is abandoned
//! (NOT_CONTROLLER). Every decision is a production function, called as the production
//! controller calls it against `latest_image()`: the façade's gate
//! ([`MetadataRaft::is_active_leader`]), `validate_create_topic` / `validate_delete_topic`,
//! `register_broker_records`, `heartbeat_records`, `fence_brokers_records` over
//! `BrokerSessions::expired`, `alter_partition::decide`, and per tick `reconcile_records`; their
//! records are proposed in order, stopping at the first refusal (`Controller::propose_failover`).
//! Never does: drive raft (that is [`crate::node`]), read a clock (time is `now_ms`), decide
//! anything itself, or answer for a node that is not the active leader (NOT_CONTROLLER with a
//! leader hint).

use std::collections::BTreeMap;
use std::sync::Arc;

use spool_core::isr_change::{AlterPartitionAnswer, AlterPartitionRequest};
use spool_core::liveness::{BrokerSessions, BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT};
use spool_core::topic_config::TopicDefaults;
use spool_protocol::ErrorCode;
use spool_raft::alter_partition::{self, leadership};
use spool_raft::failover::{
    fence_brokers_records, heartbeat_records, liveness_brokers, reconcile_records,
    register_broker_records, FailoverRecords,
};
use spool_raft::id_source::STREAM_TOPIC_IDS;
use spool_raft::validate::{
    validate_create_topic, validate_delete_topic, CreateTopicPolicy, CreateTopicRequest,
    HeartbeatRequest, RegisterBrokerRequest,
};
use spool_raft::AlterRefused;
use spool_raft::{Committed, IdSource, MetadataRaft, ProposalId, Refusal, TopicId, Uuid128};

use crate::metaview::{MetaView, PartKey};
use crate::repl_message::ReplMsg;

use crate::message::{Endpoint, Envelope, Payload};
use crate::out::Out;

/// The broker's `ACTIVATION_GRACE_HEARTBEATS` (broker/src/controller.rs).
pub const ACTIVATION_GRACE_HEARTBEATS: u64 = 3;

#[derive(Debug, Clone)]
enum Waiter {
    Register {
        to: Endpoint,
        broker_id: i32,
        incarnation_id: Uuid128,
    },
    Heartbeat {
        to: Endpoint,
        broker_id: i32,
        broker_epoch: i64,
    },
    Admin {
        to: Endpoint,
        request_id: u64,
    },
    Alter {
        to: Endpoint,
        key: PartKey,
        leader_epoch: i32,
        /// The request's partition epoch: which copy of the leader's change this answers.
        partition_epoch: i32,
    },
}

pub struct ControllerService {
    me: Endpoint,
    topic_ids: IdSource,
    sessions: Option<BrokerSessions>,
    session_timeout_ms: u64,
    waiting: BTreeMap<ProposalId, Waiter>,
    policy: CreateTopicPolicy,
    /// The metadata heartbeat answers carry, built once per applied index.
    metadata: Option<Arc<MetaView>>,
}

impl ControllerService {
    pub fn new(node_id: u64, seed: u64, incarnation: u64, session_timeout_ms: u64) -> Self {
        ControllerService {
            me: Endpoint::Node(node_id),
            topic_ids: IdSource::new(seed, &[STREAM_TOPIC_IDS, node_id, incarnation]),
            sessions: None,
            session_timeout_ms,
            waiting: BTreeMap::new(),
            policy: CreateTopicPolicy::default(),
            metadata: None,
        }
    }

    /// One broker or client request.
    pub fn handle(&mut self, raft: &mut MetadataRaft, env: Envelope, now_ms: u64, out: &mut Out) {
        let from = env.from;
        match env.payload {
            Payload::Register {
                broker_id,
                incarnation_id,
                previous_broker_epoch,
            } => {
                // As the broker's controller does: whether the id's current registration still
                // has a live session decides whether another incarnation may take it over.
                let registered_session_live = self.sessions.as_ref().is_some_and(|s| {
                    now_ms.saturating_sub(s.last_contact_ms(broker_id)) < self.session_timeout_ms
                });
                let request = RegisterBrokerRequest {
                    broker_id,
                    incarnation_id,
                    listeners: Vec::new(),
                    rack: None,
                    cluster_id: None,
                    registered_session_live,
                    previous_broker_epoch,
                };
                // `Controller::register_broker`: the answer waits for the last record, the
                // registration (any fence of the old registration comes first).
                let proposed = require_leader(raft)
                    .and_then(|()| {
                        register_broker_records(
                            raft.latest_image(),
                            &request,
                            &TopicDefaults::default(),
                        )
                    })
                    .and_then(|records| propose_failover(raft, records))
                    .and_then(|ids| {
                        ids.last().copied().ok_or_else(|| {
                            Refusal::new(
                                ErrorCode::UnknownServerError,
                                "a registration proposes a record",
                            )
                        })
                    });
                match proposed {
                    Ok(id) => {
                        self.waiting.insert(
                            id,
                            Waiter::Register {
                                to: from,
                                broker_id,
                                incarnation_id,
                            },
                        );
                    }
                    Err(r) => self.answer_register(raft, from, incarnation_id, r.code, -1, out),
                }
            }
            Payload::Heartbeat(request) => self.heartbeat(raft, from, request, now_ms, out),
            Payload::CreateTopic {
                request_id,
                name,
                partitions,
                replication_factor,
            } => {
                let proposed = require_leader(raft).and_then(|()| {
                    let request = CreateTopicRequest {
                        name,
                        num_partitions: partitions,
                        replication_factor,
                        configs: Vec::new(),
                    };
                    let topic_id = self.new_topic_id(raft);
                    let record = validate_create_topic(
                        raft.latest_image(),
                        &request,
                        topic_id,
                        &self.policy,
                    )?;
                    raft.propose(record)
                });
                self.admin_proposed(raft, from, request_id, proposed, out);
            }
            Payload::DeleteTopic { request_id, name } => {
                let proposed = require_leader(raft)
                    .and_then(|()| validate_delete_topic(raft.latest_image(), &name))
                    .and_then(|record| raft.propose(record));
                self.admin_proposed(raft, from, request_id, proposed, out);
            }
            Payload::Repl(m) => match *m {
                ReplMsg::AlterPartition { key, request } => {
                    self.alter_partition(raft, from, key, &request, out)
                }
                other => out.errors.push(format!(
                    "{} got an unexpected {}",
                    self.me,
                    other.describe()
                )),
            },
            other => out.errors.push(format!(
                "{} got an unexpected {}",
                self.me,
                other.describe()
            )),
        }
    }

    /// `Controller::heartbeat_and_elect` as the broker's `controller_calls.rs` calls it: the
    /// session is refreshed first, the answer waits for the last record.
    fn heartbeat(
        &mut self,
        raft: &mut MetadataRaft,
        from: Endpoint,
        request: HeartbeatRequest,
        now_ms: u64,
        out: &mut Out,
    ) {
        if let Some(sessions) = self.sessions.as_mut() {
            sessions.on_heartbeat(request.broker_id, request.broker_epoch, now_ms);
        }
        let proposed = require_leader(raft).and_then(|()| {
            let caught_up = i64::try_from(raft.applied_index()).unwrap_or(i64::MAX);
            let records = heartbeat_records(
                raft.latest_image(),
                &request,
                caught_up,
                &TopicDefaults::default(),
            )?;
            propose_failover(raft, records)
        });
        match proposed {
            Ok(ids) => match ids.last() {
                Some(last) => {
                    self.waiting.insert(
                        *last,
                        Waiter::Heartbeat {
                            to: from,
                            broker_id: request.broker_id,
                            broker_epoch: request.broker_epoch,
                        },
                    );
                }
                None => self.answer_heartbeat(
                    raft,
                    from,
                    request.broker_id,
                    request.broker_epoch,
                    ErrorCode::None,
                    out,
                ),
            },
            Err(r) => self.answer_heartbeat(
                raft,
                from,
                request.broker_id,
                request.broker_epoch,
                r.code,
                out,
            ),
        }
    }

    /// AlterPartition (`spool_raft::alter_partition::decide`, called as
    /// `Controller::alter_partition` calls it): answered when its record commits, at once when
    /// nothing needs writing, `Lost` (the leader retries) when this node cannot propose or an
    /// answer that writes nothing would rest on its uncommitted proposals.
    fn alter_partition(
        &mut self,
        raft: &mut MetadataRaft,
        to: Endpoint,
        key: PartKey,
        request: &AlterPartitionRequest,
        out: &mut Out,
    ) {
        let leader_epoch = request.leader_epoch;
        let partition_epoch = request.partition_epoch;
        if require_leader(raft).is_err() {
            return answer_alter(
                self.me,
                to,
                key,
                leader_epoch,
                partition_epoch,
                AlterPartitionAnswer::Lost,
                out,
            );
        }
        let defaults = TopicDefaults::default();
        let lost = AlterPartitionAnswer::Lost;
        match alter_partition::decide(raft, key.topic_id, key.partition, request, &defaults) {
            Ok(Some(record)) => match raft.propose(record) {
                Ok(id) => {
                    self.waiting.insert(
                        id,
                        Waiter::Alter {
                            to,
                            key,
                            leader_epoch,
                            partition_epoch,
                        },
                    );
                }
                Err(_) => answer_alter(self.me, to, key, leader_epoch, partition_epoch, lost, out),
            },
            Ok(None) => {
                let answer = leadership(raft.image(), key.topic_id, key.partition)
                    .map_or(lost, AlterPartitionAnswer::Committed);
                answer_alter(self.me, to, key, leader_epoch, partition_epoch, answer, out);
            }
            Err(AlterRefused::Invalid(e)) => {
                let answer = AlterPartitionAnswer::Refused(e);
                answer_alter(self.me, to, key, leader_epoch, partition_epoch, answer, out)
            }
            Err(AlterRefused::Controller(_)) => {
                answer_alter(self.me, to, key, leader_epoch, partition_epoch, lost, out)
            }
        }
    }

    fn admin_proposed(
        &mut self,
        raft: &MetadataRaft,
        to: Endpoint,
        request_id: u64,
        proposed: Result<ProposalId, Refusal>,
        out: &mut Out,
    ) {
        match proposed {
            Ok(id) => {
                self.waiting.insert(id, Waiter::Admin { to, request_id });
            }
            Err(r) => self.answer_admin(raft, to, request_id, r.code, out),
        }
    }

    /// The next non-zero topic id of the seeded stream that no topic uses (`Controller`'s rule).
    fn new_topic_id(&mut self, raft: &MetadataRaft) -> TopicId {
        loop {
            let id: TopicId = self.topic_ids.next_uuid();
            if !id.is_zero() && raft.latest_image().topic_by_id(id).is_none() {
                return id;
            }
        }
    }

    /// Inside `Controller::tick`, after raft's ticks and before the poll: on the active leader,
    /// propose what `reconcile_records` says the partitions need (`reconcile_partitions`).
    pub fn reconcile(&mut self, raft: &mut MetadataRaft, out: &mut Out) {
        if !raft.is_active_leader() {
            return;
        }
        let records = reconcile_records(raft.latest_image(), &TopicDefaults::default());
        if records.records.is_empty() {
            return;
        }
        let n = records.records.len();
        match propose_failover(raft, records) {
            Ok(_) => out.note(format!("{} reconciles: {n} partition changes", self.me)),
            Err(r) => out.note(format!("{} reconciling refused: {r}", self.me)),
        }
    }

    /// After a tick: on the leader, fence the brokers whose session expired (the broker's
    /// `fence_expired`, through `Controller::fence_brokers`); elsewhere, drop the sessions.
    /// Sessions start when the node is found leading (`is_leader`, not yet active, as the
    /// broker's), the fencing itself waits for the façade's gate.
    pub fn fence_expired(&mut self, raft: &mut MetadataRaft, now_ms: u64, out: &mut Out) {
        if !raft.is_leader() {
            self.sessions = None;
            return;
        }
        let timeout_ms = self.session_timeout_ms;
        let grace_ms =
            (BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT * ACTIVATION_GRACE_HEARTBEATS).min(timeout_ms);
        let sessions = self.sessions.get_or_insert_with(|| {
            BrokerSessions::new(now_ms.saturating_sub(timeout_ms - grace_ms))
        });
        let expired = sessions.expired(liveness_brokers(raft.latest_image()), now_ms, timeout_ms);
        if expired.is_empty() {
            return;
        }
        let proposed = require_leader(raft)
            .and_then(|()| {
                fence_brokers_records(raft.latest_image(), &expired, &TopicDefaults::default())
            })
            .and_then(|records| propose_failover(raft, records));
        match proposed {
            Ok(ids) if !ids.is_empty() => {
                out.note(format!("{} fences expired brokers {expired:?}", self.me));
            }
            Ok(_) => {}
            Err(r) => out.note(format!("{} fencing {expired:?} refused: {r}", self.me)),
        }
    }

    /// Answers the requests whose proposals committed or were abandoned.
    pub fn settle(
        &mut self,
        raft: &MetadataRaft,
        committed: &[Committed],
        abandoned: &[ProposalId],
        now_ms: u64,
        out: &mut Out,
    ) {
        for c in committed {
            let Some(waiter) = c.proposal.and_then(|id| self.waiting.remove(&id)) else {
                continue;
            };
            let code = c.outcome.err().unwrap_or(ErrorCode::None);
            self.answer(raft, waiter, code, now_ms, out);
        }
        for id in abandoned {
            if let Some(waiter) = self.waiting.remove(id) {
                self.answer(raft, waiter, ErrorCode::NotController, now_ms, out);
            }
        }
    }

    fn answer(
        &mut self,
        raft: &MetadataRaft,
        waiter: Waiter,
        code: ErrorCode,
        now_ms: u64,
        out: &mut Out,
    ) {
        match waiter {
            Waiter::Register {
                to,
                broker_id,
                incarnation_id,
            } => {
                // The epoch of this incarnation's registration (a later one may have replaced it).
                let epoch = (code == ErrorCode::None)
                    .then(|| {
                        raft.image()
                            .broker(broker_id)
                            .filter(|b| b.incarnation_id == Some(incarnation_id))
                            .map(|b| b.broker_epoch)
                    })
                    .flatten();
                if let (Some(sessions), Some(e)) = (self.sessions.as_mut(), epoch) {
                    sessions.on_register(broker_id, e, now_ms);
                }
                match epoch {
                    Some(e) => {
                        self.answer_register(raft, to, incarnation_id, ErrorCode::None, e, out)
                    }
                    None if code == ErrorCode::None => self.answer_register(
                        raft,
                        to,
                        incarnation_id,
                        ErrorCode::NotController,
                        -1,
                        out,
                    ),
                    None => self.answer_register(raft, to, incarnation_id, code, -1, out),
                }
            }
            Waiter::Heartbeat {
                to,
                broker_id,
                broker_epoch,
            } => self.answer_heartbeat(raft, to, broker_id, broker_epoch, code, out),
            Waiter::Admin { to, request_id } => self.answer_admin(raft, to, request_id, code, out),
            Waiter::Alter {
                to,
                key,
                leader_epoch,
                partition_epoch,
            } => {
                let answer = (code == ErrorCode::None)
                    .then(|| leadership(raft.image(), key.topic_id, key.partition))
                    .flatten()
                    .map_or(AlterPartitionAnswer::Lost, AlterPartitionAnswer::Committed);
                answer_alter(self.me, to, key, leader_epoch, partition_epoch, answer, out);
            }
        }
    }

    fn answer_register(
        &self,
        raft: &MetadataRaft,
        to: Endpoint,
        incarnation_id: Uuid128,
        error: ErrorCode,
        broker_epoch: i64,
        out: &mut Out,
    ) {
        out.sends.push(Envelope::new(
            self.me,
            to,
            Payload::RegisterAnswer {
                error,
                broker_epoch,
                leader_hint: raft.leader_id(),
                incarnation_id,
            },
        ));
    }

    fn answer_heartbeat(
        &mut self,
        raft: &MetadataRaft,
        to: Endpoint,
        broker_id: i32,
        broker_epoch: i64,
        error: ErrorCode,
        out: &mut Out,
    ) {
        let fenced =
            error != ErrorCode::None || raft.image().broker(broker_id).is_none_or(|b| b.fenced);
        let offset = i64::try_from(raft.applied_index()).unwrap_or(i64::MAX);
        let metadata = (error == ErrorCode::None).then(|| {
            let fresh = self.metadata.as_ref().filter(|m| m.offset == offset);
            match fresh {
                Some(m) => Arc::clone(m),
                None => {
                    let m = Arc::new(MetaView::from_image(raft.image(), offset));
                    self.metadata = Some(Arc::clone(&m));
                    m
                }
            }
        });
        out.sends.push(Envelope::new(
            self.me,
            to,
            Payload::HeartbeatAnswer {
                broker_epoch,
                error,
                fenced,
                metadata_offset: offset,
                leader_hint: raft.leader_id(),
                metadata,
            },
        ));
    }

    fn answer_admin(
        &self,
        raft: &MetadataRaft,
        to: Endpoint,
        request_id: u64,
        error: ErrorCode,
        out: &mut Out,
    ) {
        out.sends.push(Envelope::new(
            self.me,
            to,
            Payload::AdminAnswer {
                request_id,
                error,
                leader_hint: raft.leader_id(),
            },
        ));
    }
}

/// The committed state of `key` as its leader takes it.
fn answer_alter(
    me: Endpoint,
    to: Endpoint,
    key: PartKey,
    leader_epoch: i32,
    partition_epoch: i32,
    answer: AlterPartitionAnswer,
    out: &mut Out,
) {
    out.sends.push(Envelope::new(
        me,
        to,
        Payload::Repl(Box::new(ReplMsg::AlterPartitionAnswer {
            key,
            leader_epoch,
            partition_epoch,
            answer,
        })),
    ));
}

/// The façade's gate (`Controller::require_leader`): only the active leader — leading, and
/// applied an entry of its own term — validates and proposes.
fn require_leader(raft: &MetadataRaft) -> Result<(), Refusal> {
    if raft.is_active_leader() {
        Ok(())
    } else {
        Err(Refusal::new(
            ErrorCode::NotController,
            format!("not the metadata leader (leader: {})", raft.leader_id()),
        ))
    }
}

/// `Controller::propose_failover`: every record in order, stopping at the first refusal (those
/// before it stay in flight).
fn propose_failover(
    raft: &mut MetadataRaft,
    records: FailoverRecords,
) -> Result<Vec<ProposalId>, Refusal> {
    records
        .records
        .into_iter()
        .map(|r| raft.propose(r))
        .collect()
}
