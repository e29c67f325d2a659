//! The join phase of a group (part of [`super::state`]'s state machine): JoinGroup for new,
//! known and static members, starting a rebalance (with the initial delay for a new group),
//! ending it as soon as every known member has rejoined, and choosing the protocol and leader.

use spool_error_code::ErrorCode;

use super::state::{Group, GroupEffect, InitialDelay, Member, Out, MEMBERS_PER_GROUP_MAX};
use super::types::{GroupState, JoinArgs, JoinResult, RequestId, Response, SyncResult};

impl Group {
    /// JoinGroup. `fresh_member_id` is used when the member needs a new id.
    pub fn join(
        &mut self,
        id: RequestId,
        args: JoinArgs,
        fresh_member_id: String,
        initial_delay_ms: u64,
        now_ms: u64,
        out: &mut Out,
    ) {
        let reply = |out: &mut Out, code: ErrorCode, member: &str| {
            out.push(GroupEffect::Respond(
                id,
                Response::Join(JoinResult::error(code, member)),
            ))
        };
        if !self.members.is_empty() && !self.accepts_protocols(&args) {
            return reply(out, ErrorCode::InconsistentGroupProtocol, &args.member_id);
        }
        if args.member_id.is_empty() {
            let known = args
                .group_instance_id
                .as_ref()
                .and_then(|i| self.instances.get(i))
                .cloned();
            match known {
                Some(old) if self.members.contains_key(&old) => self.static_rejoin(
                    id,
                    args,
                    old,
                    fresh_member_id,
                    initial_delay_ms,
                    now_ms,
                    out,
                ),
                _ => self.add_member(id, args, fresh_member_id, initial_delay_ms, now_ms, out),
            }
            return;
        }
        if !self.members.contains_key(&args.member_id) {
            let code = if self.fenced(&args.member_id, args.group_instance_id.as_deref()) {
                ErrorCode::FencedInstanceId
            } else {
                ErrorCode::UnknownMemberId
            };
            return reply(out, code, &args.member_id);
        }
        if self.fenced(&args.member_id, args.group_instance_id.as_deref()) {
            return reply(out, ErrorCode::FencedInstanceId, &args.member_id);
        }
        let unchanged = self.members.get(&args.member_id).is_some_and(|m| {
            m.protocol_type == args.protocol_type && m.protocols == args.protocols
        });
        self.update_member(&args, now_ms);
        match self.state {
            GroupState::CompletingRebalance if unchanged => {
                // The member missed its answer: give it this generation's again.
                let r = self.join_result(&args.member_id, false);
                out.push(GroupEffect::Respond(id, Response::Join(r)));
            }
            GroupState::PreparingRebalance => {
                self.await_join(&args.member_id, id, out);
                self.maybe_complete_join(now_ms, out);
            }
            _ => {
                self.await_join(&args.member_id, id, out);
                self.prepare_rebalance(initial_delay_ms, now_ms, out);
            }
        }
    }

    fn accepts_protocols(&self, args: &JoinArgs) -> bool {
        if self
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != args.protocol_type)
        {
            return false;
        }
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| m.id != args.member_id)
            .collect();
        args.protocols.iter().any(|(name, _)| {
            others
                .iter()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    pub(super) fn update_member(&mut self, args: &JoinArgs, now_ms: u64) {
        if let Some(m) = self.members.get_mut(&args.member_id) {
            m.protocol_type = args.protocol_type.clone();
            m.protocols = args.protocols.clone();
            m.session_timeout_ms = args.session_timeout_ms.max(0) as u64;
            m.rebalance_timeout_ms = args.rebalance_timeout_ms.max(0) as u64;
            m.client_id = args.client_id.clone();
            m.client_host = args.client_host.clone();
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
        }
    }

    pub(super) fn await_join(&mut self, member_id: &str, id: RequestId, out: &mut Out) {
        if let Some(m) = self.members.get_mut(member_id) {
            if let Some(old) = m.awaiting_join.replace(id) {
                out.push(GroupEffect::Respond(
                    old,
                    Response::Join(JoinResult::error(ErrorCode::RebalanceInProgress, member_id)),
                ));
            }
        }
    }

    fn add_member(
        &mut self,
        id: RequestId,
        args: JoinArgs,
        member_id: String,
        initial_delay_ms: u64,
        now_ms: u64,
        out: &mut Out,
    ) {
        if self.members.len() >= MEMBERS_PER_GROUP_MAX {
            out.push(GroupEffect::Respond(
                id,
                Response::Join(JoinResult::error(ErrorCode::GroupMaxSizeReached, "")),
            ));
            return;
        }
        if let Some(i) = &args.group_instance_id {
            self.instances.insert(i.clone(), member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(args.protocol_type.clone());
        }
        let session = args.session_timeout_ms.max(0) as u64;
        self.members.insert(
            member_id.clone(),
            Member {
                id: member_id,
                instance_id: args.group_instance_id,
                client_id: args.client_id,
                client_host: args.client_host,
                session_timeout_ms: session,
                rebalance_timeout_ms: args.rebalance_timeout_ms.max(0) as u64,
                protocol_type: args.protocol_type,
                protocols: args.protocols,
                assignment: None,
                heartbeat_deadline_ms: now_ms + session,
                awaiting_join: Some(id),
                awaiting_sync: None,
            },
        );
        if let Some(d) = self.initial_delay.as_mut() {
            d.new_member_added = true;
        }
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms, out),
            _ => self.prepare_rebalance(initial_delay_ms, now_ms, out),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn static_rejoin(
        &mut self,
        id: RequestId,
        args: JoinArgs,
        old_id: String,
        new_id: String,
        initial_delay_ms: u64,
        now_ms: u64,
        out: &mut Out,
    ) {
        let Some(mut m) = self.members.remove(&old_id) else {
            return;
        };
        if let Some(j) = m.awaiting_join.take() {
            out.push(GroupEffect::Respond(
                j,
                Response::Join(JoinResult::error(ErrorCode::FencedInstanceId, &old_id)),
            ));
        }
        if let Some(s) = m.awaiting_sync.take() {
            out.push(GroupEffect::Respond(
                s,
                Response::Sync(SyncResult::error(ErrorCode::FencedInstanceId)),
            ));
        }
        let unchanged = m.protocol_type == args.protocol_type
            && self.protocol.as_deref().is_some_and(|p| {
                m.metadata_for(Some(p))
                    == args
                        .protocols
                        .iter()
                        .find(|(n, _)| n == p)
                        .map(|(_, md)| md.clone())
                        .unwrap_or_default()
                    && args.protocols.iter().any(|(n, _)| n == p)
            });
        m.id = new_id.clone();
        if let Some(i) = &args.group_instance_id {
            self.instances.insert(i.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        let mut updated = args.clone();
        updated.member_id = new_id.clone();
        self.update_member(&updated, now_ms);
        match self.state {
            GroupState::Stable if unchanged => {
                let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                let r = self.join_result(&new_id, is_leader);
                out.push(GroupEffect::Respond(id, Response::Join(r)));
                // The new member id must survive a restart.
                out.push(GroupEffect::Persist { after_sync: None });
            }
            GroupState::PreparingRebalance => {
                self.await_join(&new_id, id, out);
                self.maybe_complete_join(now_ms, out);
            }
            _ => {
                self.await_join(&new_id, id, out);
                self.prepare_rebalance(initial_delay_ms, now_ms, out);
            }
        }
    }

    /// This generation's join answer for `member_id` (the member list for the leader).
    pub(super) fn join_result(&self, member_id: &str, skip_assignment: bool) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.members
                .values()
                .map(|m| {
                    (
                        m.id.clone(),
                        m.instance_id.clone(),
                        m.metadata_for(self.protocol.as_deref()),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error: ErrorCode::None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            member_id: member_id.to_string(),
            members,
            skip_assignment,
        }
    }

    /// Starts (or restarts) a join phase.
    pub(super) fn prepare_rebalance(&mut self, initial_delay_ms: u64, now_ms: u64, out: &mut Out) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                if let Some(s) = m.awaiting_sync.take() {
                    out.push(GroupEffect::Respond(
                        s,
                        Response::Sync(SyncResult::error(ErrorCode::RebalanceInProgress)),
                    ));
                }
            }
        }
        let was_empty = self.state == GroupState::Empty;
        self.sync_persisting = false;
        for m in self.members.values_mut() {
            m.assignment = None;
        }
        self.set_state(GroupState::PreparingRebalance, now_ms);
        let rebalance_timeout_ms = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        self.join_deadline_ms = now_ms + rebalance_timeout_ms;
        self.initial_delay = (was_empty && initial_delay_ms > 0).then_some(InitialDelay {
            deadline_ms: now_ms + initial_delay_ms.min(rebalance_timeout_ms),
            limit_ms: now_ms + rebalance_timeout_ms,
            new_member_added: false,
        });
        self.maybe_complete_join(now_ms, out);
    }

    /// Ends the join phase once every known member has rejoined (outside an initial delay).
    pub(super) fn maybe_complete_join(&mut self, now_ms: u64, out: &mut Out) {
        if self.state != GroupState::PreparingRebalance || self.initial_delay.is_some() {
            return;
        }
        if self.members.values().all(|m| m.awaiting_join.is_some()) {
            self.complete_join(now_ms, out);
        }
    }

    /// Ends the join phase: members that did not rejoin are removed, a new generation begins.
    pub(super) fn complete_join(&mut self, now_ms: u64, out: &mut Out) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.drop_member(&id, out);
        }
        self.initial_delay = None;
        self.generation = self.generation.saturating_add(1);
        if self.members.is_empty() {
            self.protocol = None;
            self.protocol_type = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now_ms);
            out.push(GroupEffect::Persist { after_sync: None });
            return;
        }
        self.protocol = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.set_state(GroupState::CompletingRebalance, now_ms);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let r = self.join_result(&id, false);
            if let Some(m) = self.members.get_mut(&id) {
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms;
                if let Some(req) = m.awaiting_join.take() {
                    out.push(GroupEffect::Respond(req, Response::Join(r)));
                }
            }
        }
    }

    /// A protocol every member supports, by the members' votes (each votes for its most
    /// preferred candidate); ties go to the leader's (or first member's) preference order.
    fn select_protocol(&self) -> Option<String> {
        let first = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().next())?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == *n))
            })
            .collect();
        let mut votes: Vec<usize> = vec![0; candidates.len()];
        for m in self.members.values() {
            if let Some(i) = m
                .protocols
                .iter()
                .find_map(|(n, _)| candidates.iter().position(|c| *c == n))
            {
                votes[i] += 1;
            }
        }
        let best = votes.iter().copied().max()?;
        let i = votes.iter().position(|v| *v == best)?;
        Some(candidates[i].clone())
    }
}
