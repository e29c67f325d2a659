//! One consumer group's membership state machine (Kafka's classic group protocol), sans-IO.
//!
//! States: Empty → PreparingRebalance (members (re)join) → CompletingRebalance (waiting for the
//! leader's assignment) → Stable; Dead is never entered here (the coordinator drops a group
//! instead). Promises:
//! - a join phase ends **as soon as every known member has rejoined**; the rebalance timeout only
//!   bounds members that never come back (they are removed), and a new group (from Empty) first
//!   waits `initial_rebalance_delay_ms` for more members, extended while new ones keep arriving,
//!   never beyond the rebalance timeout;
//! - the generation only grows; a request from another generation is ILLEGAL_GENERATION;
//! - members whose session timeout passes without a heartbeat (and that wait on no join or sync)
//!   are removed; a removal or a rejoin while Stable starts a rebalance, which members learn of
//!   by REBALANCE_IN_PROGRESS on their heartbeats;
//! - static members (`group.instance.id`): a rejoin under a known instance id while Stable with an
//!   unchanged subscription gets a fresh member id and keeps its assignment without a rebalance;
//!   the old member id is fenced (FENCED_INSTANCE_ID);
//! - the leader's assignment is answered to the members only after the group's metadata record is
//!   durable ([`GroupEffect::Persist`] then [`Group::sync_persisted`]).
//!
//! The join phase (JoinGroup, starting and ending a rebalance) lives in `super::join`; this file
//! holds the group's data, sync, heartbeat, leave, commit checks, expiry and the record form.

use std::collections::{BTreeMap, HashMap};

use spool_error_code::ErrorCode;

use super::records::{GroupValue, MemberValue, OffsetValue};
use super::types::{GroupState, JoinResult, RequestId, Response, SyncArgs, SyncResult};

/// Members one group may hold (Kafka's `group.max.size` default is unlimited; spool bounds it).
pub const MEMBERS_PER_GROUP_MAX: usize = 1000;

/// What a group asks its coordinator to do besides answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEffect {
    Respond(RequestId, Response),
    /// Write the group's metadata record; `after_sync` = the generation whose pending syncs wait
    /// for it (then report through [`Group::sync_persisted`]).
    Persist {
        after_sync: Option<i32>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Set once the leader's assignment for this generation is known.
    pub assignment: Option<Vec<u8>>,
    pub heartbeat_deadline_ms: u64,
    pub awaiting_join: Option<RequestId>,
    pub awaiting_sync: Option<RequestId>,
}

impl Member {
    pub(super) fn metadata_for(&self, protocol: Option<&str>) -> Vec<u8> {
        protocol
            .and_then(|p| self.protocols.iter().find(|(n, _)| n == p))
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct InitialDelay {
    pub(super) deadline_ms: u64,
    pub(super) limit_ms: u64,
    pub(super) new_member_added: bool,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    /// The `__consumer_offsets` partition holding this group's records.
    pub partition: i32,
    pub(crate) state: GroupState,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// group.instance.id → member id.
    pub(crate) instances: HashMap<String, String>,
    pub(crate) offsets: BTreeMap<(String, i32), OffsetValue>,
    /// TxnOffsetCommits of open transactions, by producer id (`super::txn_offsets`).
    pub(crate) txn_offsets: BTreeMap<i64, BTreeMap<(String, i32), OffsetValue>>,
    pub(super) join_deadline_ms: u64,
    pub(super) initial_delay: Option<InitialDelay>,
    pub(super) sync_persisting: bool,
    pub(super) state_timestamp_ms: u64,
}

pub(super) type Out = Vec<GroupEffect>;

impl Group {
    pub fn new(id: String, partition: i32) -> Self {
        Self {
            id,
            partition,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            instances: HashMap::new(),
            offsets: BTreeMap::new(),
            txn_offsets: BTreeMap::new(),
            join_deadline_ms: 0,
            initial_delay: None,
            sync_persisting: false,
            state_timestamp_ms: 0,
        }
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// When the group entered its current state.
    pub fn state_timestamp_ms(&self) -> u64 {
        self.state_timestamp_ms
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Whether some member waits on an answer (the group must not be dropped).
    pub fn has_waiters(&self) -> bool {
        self.sync_persisting
            || self
                .members
                .values()
                .any(|m| m.awaiting_join.is_some() || m.awaiting_sync.is_some())
    }

    /// Every member's assignment, if all are known (Stable).
    pub fn assignments(&self) -> impl Iterator<Item = (&str, Option<&Vec<u8>>)> {
        self.members
            .values()
            .map(|m| (m.id.as_str(), m.assignment.as_ref()))
    }

    /// Kafka's `isStaticMemberFenced`: the instance id names another member.
    pub(super) fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        match instance_id {
            Some(i) => self
                .instances
                .get(i)
                .is_some_and(|known| known != member_id),
            None => false,
        }
    }

    pub(super) fn set_state(&mut self, state: GroupState, now_ms: u64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// Removes a member, answering whatever it waits on with UNKNOWN_MEMBER_ID.
    pub(super) fn drop_member(&mut self, member_id: &str, out: &mut Out) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(i) = &m.instance_id {
            if self.instances.get(i).map(String::as_str) == Some(member_id) {
                self.instances.remove(i);
            }
        }
        if let Some(j) = m.awaiting_join {
            out.push(GroupEffect::Respond(
                j,
                Response::Join(JoinResult::error(ErrorCode::UnknownMemberId, member_id)),
            ));
        }
        if let Some(s) = m.awaiting_sync {
            out.push(GroupEffect::Respond(
                s,
                Response::Sync(SyncResult::error(ErrorCode::UnknownMemberId)),
            ));
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
    }

    /// Removes a member (left or expired) and rebalances the rest.
    pub fn remove_member(&mut self, member_id: &str, now_ms: u64, out: &mut Out) {
        if !self.members.contains_key(member_id) {
            return;
        }
        self.drop_member(member_id, out);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(0, now_ms, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// SyncGroup.
    pub fn sync(&mut self, id: RequestId, args: SyncArgs, now_ms: u64, out: &mut Out) {
        let reply = |out: &mut Out, code: ErrorCode| {
            out.push(GroupEffect::Respond(
                id,
                Response::Sync(SyncResult::error(code)),
            ))
        };
        if self.fenced(&args.member_id, args.group_instance_id.as_deref()) {
            return reply(out, ErrorCode::FencedInstanceId);
        }
        if !self.members.contains_key(&args.member_id) {
            return reply(out, ErrorCode::UnknownMemberId);
        }
        if args.generation != self.generation {
            return reply(out, ErrorCode::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => reply(out, ErrorCode::UnknownMemberId),
            GroupState::PreparingRebalance => reply(out, ErrorCode::RebalanceInProgress),
            GroupState::Stable => {
                let Some(m) = self.members.get_mut(&args.member_id) else {
                    return;
                };
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                let r = SyncResult {
                    error: ErrorCode::None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol.clone(),
                    assignment: m.assignment.clone().unwrap_or_default(),
                };
                out.push(GroupEffect::Respond(id, Response::Sync(r)));
            }
            GroupState::CompletingRebalance => {
                let is_leader = self.leader.as_deref() == Some(args.member_id.as_str());
                if let Some(m) = self.members.get_mut(&args.member_id) {
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                    if let Some(old) = m.awaiting_sync.replace(id) {
                        out.push(GroupEffect::Respond(
                            old,
                            Response::Sync(SyncResult::error(ErrorCode::RebalanceInProgress)),
                        ));
                    }
                }
                if is_leader && !self.sync_persisting {
                    let mut given: HashMap<String, Vec<u8>> =
                        args.assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = Some(given.remove(&m.id).unwrap_or_default());
                    }
                    self.sync_persisting = true;
                    out.push(GroupEffect::Persist {
                        after_sync: Some(self.generation),
                    });
                }
            }
        }
    }

    /// The outcome of the metadata append a leader's sync started.
    pub fn sync_persisted(
        &mut self,
        generation: i32,
        result: Result<(), ErrorCode>,
        now_ms: u64,
        out: &mut Out,
    ) {
        if self.state != GroupState::CompletingRebalance
            || generation != self.generation
            || !self.sync_persisting
        {
            return;
        }
        self.sync_persisting = false;
        match result {
            Ok(()) => {
                self.set_state(GroupState::Stable, now_ms);
                for m in self.members.values_mut() {
                    m.assignment.get_or_insert_with(Vec::new);
                    if let Some(s) = m.awaiting_sync.take() {
                        let r = SyncResult {
                            error: ErrorCode::None,
                            protocol_type: self.protocol_type.clone(),
                            protocol_name: self.protocol.clone(),
                            assignment: m.assignment.clone().unwrap_or_default(),
                        };
                        out.push(GroupEffect::Respond(s, Response::Sync(r)));
                    }
                }
            }
            Err(code) => {
                for m in self.members.values_mut() {
                    m.assignment = None;
                    if let Some(s) = m.awaiting_sync.take() {
                        out.push(GroupEffect::Respond(
                            s,
                            Response::Sync(SyncResult::error(code)),
                        ));
                    }
                }
                self.prepare_rebalance(0, now_ms, out);
            }
        }
    }

    /// Heartbeat: Kafka's checks, in Kafka's order.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: u64,
    ) -> ErrorCode {
        if self.fenced(member_id, instance_id) {
            return ErrorCode::FencedInstanceId;
        }
        let state = self.state;
        let current = self.generation;
        let Some(m) = self.members.get_mut(member_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if generation != current {
            return ErrorCode::IllegalGeneration;
        }
        match state {
            GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId,
            GroupState::CompletingRebalance | GroupState::Stable => {
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                ErrorCode::None
            }
            GroupState::PreparingRebalance => {
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                ErrorCode::RebalanceInProgress
            }
        }
    }

    /// LeaveGroup for one member (by id, or by instance id when the id is empty).
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: u64,
        out: &mut Out,
    ) -> ErrorCode {
        let target = if member_id.is_empty() {
            match instance_id.and_then(|i| self.instances.get(i)) {
                Some(m) => m.clone(),
                None => return ErrorCode::UnknownMemberId,
            }
        } else {
            if self.fenced(member_id, instance_id) {
                return ErrorCode::FencedInstanceId;
            }
            member_id.to_string()
        };
        if !self.members.contains_key(&target) {
            return ErrorCode::UnknownMemberId;
        }
        self.remove_member(&target, now_ms, out);
        ErrorCode::None
    }

    /// Kafka's OffsetCommit membership checks; `Ok` = the commit may be written.
    pub fn check_commit(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: u64,
    ) -> Result<(), ErrorCode> {
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if self.fenced(member_id, instance_id) {
            return Err(ErrorCode::FencedInstanceId);
        }
        let state = self.state;
        let Some(m) = self.members.get_mut(member_id) else {
            return Err(ErrorCode::UnknownMemberId);
        };
        if generation != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        match state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(ErrorCode::UnknownMemberId),
            GroupState::Stable | GroupState::PreparingRebalance => {
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                Ok(())
            }
        }
    }

    /// Time passes: initial delay, join deadline, session expiry.
    pub fn tick(&mut self, now_ms: u64, initial_delay_ms: u64, out: &mut Out) {
        if self.state == GroupState::PreparingRebalance {
            if let Some(d) = self.initial_delay {
                if now_ms >= d.deadline_ms {
                    if d.new_member_added && now_ms < d.limit_ms {
                        self.initial_delay = Some(InitialDelay {
                            deadline_ms: now_ms.saturating_add(initial_delay_ms).min(d.limit_ms),
                            limit_ms: d.limit_ms,
                            new_member_added: false,
                        });
                    } else {
                        self.complete_join(now_ms, out);
                    }
                }
            } else if now_ms >= self.join_deadline_ms {
                self.complete_join(now_ms, out);
            }
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.awaiting_join.is_none()
                    && m.awaiting_sync.is_none()
                    && now_ms >= m.heartbeat_deadline_ms
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now_ms, out);
        }
    }

    /// The group-metadata record value for the current state.
    pub fn to_value(&self) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp_ms: self.state_timestamp_ms as i64,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms.min(i32::MAX as u64) as i32,
                    session_timeout_ms: m.session_timeout_ms.min(i32::MAX as u64) as i32,
                    subscription: m.metadata_for(self.protocol.as_deref()),
                    assignment: m.assignment.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// Restores the state a group-metadata record describes (replay). Members come back Stable
    /// with their assignments; their sessions start at `finish_load`.
    pub fn restore(&mut self, v: GroupValue) {
        self.generation = v.generation;
        self.protocol = v.protocol.clone();
        self.leader = v.leader;
        self.state_timestamp_ms = v.state_timestamp_ms.max(0) as u64;
        self.members.clear();
        self.instances.clear();
        self.sync_persisting = false;
        self.initial_delay = None;
        self.protocol_type = (!v.members.is_empty()).then_some(v.protocol_type.clone());
        for m in v.members.into_iter().take(MEMBERS_PER_GROUP_MAX) {
            if let Some(i) = &m.group_instance_id {
                self.instances.insert(i.clone(), m.member_id.clone());
            }
            self.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms.max(0) as u64,
                    rebalance_timeout_ms: m.rebalance_timeout_ms.max(0) as u64,
                    protocol_type: v.protocol_type.clone(),
                    protocols: vec![(v.protocol.clone().unwrap_or_default(), m.subscription)],
                    assignment: Some(m.assignment),
                    heartbeat_deadline_ms: 0,
                    awaiting_join: None,
                    awaiting_sync: None,
                },
            );
        }
        if self
            .leader
            .as_ref()
            .is_some_and(|l| !self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
    }

    /// After replay: every restored member's session starts now.
    pub fn start_sessions(&mut self, now_ms: u64) {
        for m in self.members.values_mut() {
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
        }
    }

    /// Members as DescribeGroups shows them.
    pub fn describe_members(&self) -> Vec<super::types::MemberDescription> {
        self.members
            .values()
            .map(|m| super::types::MemberDescription {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: m.metadata_for(self.protocol.as_deref()),
                assignment: m.assignment.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// Answers every waiting request with `code` (shutdown, unloading).
    pub fn abandon_waiters(&mut self, code: ErrorCode, out: &mut Out) {
        self.sync_persisting = false;
        for m in self.members.values_mut() {
            if let Some(j) = m.awaiting_join.take() {
                out.push(GroupEffect::Respond(
                    j,
                    Response::Join(JoinResult::error(code, &m.id)),
                ));
            }
            if let Some(s) = m.awaiting_sync.take() {
                out.push(GroupEffect::Respond(
                    s,
                    Response::Sync(SyncResult::error(code)),
                ));
            }
        }
    }
}
