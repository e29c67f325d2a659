//! The group member's reactions to responses and lost requests, and its [`ClientCore`] face:
//! what each coordinator answer means for the membership (see the parent module for the cycle).

use std::collections::BTreeSet;

use tracing::{debug, warn};

use super::{
    AfterRevoke, CommitKind, GroupCore, GroupEvent, Pending, Phase, LEADER_METADATA_CHECK_MS,
    MEMBERS_MAX,
};
use crate::client::group::assignor::{Assignor, Member};
use crate::client::group::protocol::{Assignment, Subscription};
use crate::client::group::requests::{self as rq, is_coordinator_error};
use crate::client::net::{ClientCore, NetAction};
use crate::client::{ClientError, TopicPartition};
use crate::codec::Response;
use crate::wire::{JoinGroupResponseT, ResponseBodyT};
use crate::ErrorCode;

impl GroupCore {
    fn on_join(&mut self, r: &JoinGroupResponseT, code: ErrorCode, now_ms: u64) {
        if self.phase != Phase::Joining {
            return;
        }
        match code {
            ErrorCode::None => {}
            ErrorCode::MemberIdRequired => {
                self.member_id = r.member_id.clone().unwrap_or_default();
                return self.rejoin(0, now_ms);
            }
            ErrorCode::UnknownMemberId => {
                self.reset_generation(true);
                return self.rejoin(0, now_ms);
            }
            ErrorCode::IllegalGeneration => {
                self.reset_generation(false);
                return self.rejoin(0, now_ms);
            }
            c if is_coordinator_error(c) => {
                self.coordinator_lost(now_ms);
                return self.rejoin(0, now_ms);
            }
            c if c.is_retriable()
                || c == ErrorCode::RebalanceInProgress
                || c == ErrorCode::UnknownServerError =>
            {
                self.join_attempts += 1;
                let delay = self.backoff(self.join_attempts);
                return self.rejoin(delay, now_ms);
            }
            c => {
                return self.fail(ClientError::broker(
                    c,
                    format!("join group {}", self.group_id),
                ))
            }
        }
        self.join_attempts = 0;
        self.coordinator_answered();
        self.member_id = r.member_id.clone().unwrap_or_default();
        self.generation = r.generation_id;
        let Some(protocol) = r.protocol_name.as_deref().and_then(Assignor::from_name) else {
            return self.fail(ClientError::broker(
                ErrorCode::InconsistentGroupProtocol,
                format!(
                    "join group {}: protocol {:?}",
                    self.group_id, r.protocol_name
                ),
            ));
        };
        self.protocol = Some(protocol);
        let leader = r.leader.as_deref() == Some(self.member_id.as_str());
        // Set again by `leader_assign`: only the assigning leader watches partition counts.
        self.assigned_counts.clear();
        if leader && !r.skip_assignment {
            let mut members = Vec::new();
            for m in r.members.iter().flatten().take(MEMBERS_MAX) {
                match Subscription::decode(m.metadata.as_deref().unwrap_or_default()) {
                    Ok(subscription) => members.push(Member {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        subscription,
                    }),
                    Err(e) => {
                        warn!(member = %m.member_id, error = %e, "undecodable subscription; assigning it nothing")
                    }
                }
            }
            for m in &members {
                for t in &m.subscription.topics {
                    self.metadata.want_topic(t);
                }
            }
            self.phase = Phase::LeaderMetadata {
                protocol,
                members,
                sent: false,
            };
        } else {
            self.phase = Phase::SyncReady {
                protocol,
                assignments: Vec::new(),
            };
        }
    }

    fn on_sync(&mut self, assignment: Option<&[u8]>, code: ErrorCode, now_ms: u64) {
        if self.phase != Phase::Syncing {
            return;
        }
        match code {
            ErrorCode::None => {}
            ErrorCode::RebalanceInProgress => return self.rejoin(0, now_ms),
            ErrorCode::UnknownMemberId => {
                self.reset_generation(true);
                return self.rejoin(0, now_ms);
            }
            ErrorCode::IllegalGeneration => {
                self.reset_generation(false);
                return self.rejoin(0, now_ms);
            }
            c if is_coordinator_error(c) => {
                self.coordinator_lost(now_ms);
                return self.rejoin(0, now_ms);
            }
            c if c.is_retriable() || c == ErrorCode::UnknownServerError => {
                self.join_attempts += 1;
                let delay = self.backoff(self.join_attempts);
                return self.rejoin(delay, now_ms);
            }
            c => {
                return self.fail(ClientError::broker(
                    c,
                    format!("sync group {}", self.group_id),
                ))
            }
        }
        let new = match Assignment::decode(assignment.unwrap_or_default()) {
            Ok(a) => a.partitions,
            Err(e) => {
                warn!(group = %self.group_id, error = %e, "undecodable assignment; rejoining");
                self.join_attempts += 1;
                let delay = self.backoff(self.join_attempts);
                return self.rejoin(delay, now_ms);
            }
        };
        let new_set: BTreeSet<TopicPartition> = new.iter().cloned().collect();
        let assignment: Vec<TopicPartition> = new_set.iter().cloned().collect();
        let added: Vec<TopicPartition> = new_set.difference(&self.held).cloned().collect();
        let revoked: Vec<TopicPartition> = self.held.difference(&new_set).cloned().collect();
        self.last_heartbeat_ok_ms = now_ms;
        self.next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms;
        if revoked.is_empty() {
            self.begin_assign(assignment, added);
        } else {
            // Cooperative: give up what moves, then rejoin so its new owner can have it.
            self.rejoin_needed = true;
            self.start_revocation(
                revoked,
                AfterRevoke::Assign { assignment, added },
                CommitKind::Revoke,
                now_ms,
            );
            self.phase = Phase::Stable;
            self.finish_revocation(now_ms);
        }
    }

    fn on_heartbeat(&mut self, code: ErrorCode, now_ms: u64) {
        self.heartbeat_in_flight = false;
        self.next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms;
        if self.phase != Phase::Stable {
            return;
        }
        match code {
            ErrorCode::None => {
                self.last_heartbeat_ok_ms = now_ms;
                self.coordinator_answered();
            }
            ErrorCode::RebalanceInProgress => {
                self.last_heartbeat_ok_ms = now_ms;
                self.rejoin_needed = true;
            }
            ErrorCode::IllegalGeneration => {
                self.reset_generation(false);
                self.rejoin(0, now_ms);
            }
            ErrorCode::UnknownMemberId => {
                self.reset_generation(true);
                self.rejoin(0, now_ms);
            }
            c if is_coordinator_error(c) => self.coordinator_lost(now_ms),
            ErrorCode::FencedInstanceId => self.fail(ClientError::broker(
                ErrorCode::FencedInstanceId,
                format!("heartbeat {}", self.group_id),
            )),
            _ => self.next_heartbeat_ms = now_ms + self.config.retry_backoff_ms,
        }
    }

    fn on_commit(&mut self, id: u64, code: ErrorCode, now_ms: u64) {
        let Some(pos) = self.commits.iter().position(|c| c.id == id) else {
            return;
        };
        if is_coordinator_error(code) || code == ErrorCode::CoordinatorLoadInProgress {
            if code != ErrorCode::CoordinatorLoadInProgress {
                self.coordinator_lost(now_ms);
            }
            let delay = self.backoff(self.commits[pos].attempts);
            let c = &mut self.commits[pos];
            if c.kind.retried() && now_ms + delay < c.deadline_ms {
                c.in_flight = false;
                c.retry_at_ms = now_ms + delay;
                return;
            }
        }
        let Some(c) = self.commits.remove(pos) else {
            return;
        };
        if code.is_ok() {
            for (tp, o) in &c.offsets {
                if self.held.contains(tp) {
                    self.committed.insert(tp.clone(), *o);
                }
            }
            self.events.push_back(GroupEvent::Committed {
                id,
                kind: c.kind,
                offsets: c.offsets,
            });
        } else {
            warn!(group = %self.group_id, %code, kind = ?c.kind, "commit failed");
            self.events.push_back(GroupEvent::CommitFailed {
                id,
                kind: c.kind,
                error: ClientError::broker(code, format!("commit offsets of {}", self.group_id)),
            });
            match code {
                ErrorCode::RebalanceInProgress if self.phase == Phase::Stable => {
                    self.rejoin_needed = true
                }
                ErrorCode::FencedInstanceId => self.fail(ClientError::broker(
                    code,
                    format!("commit offsets of {}", self.group_id),
                )),
                _ => {}
            }
        }
        self.finish_revocation(now_ms);
    }

    fn on_offset_fetch(
        &mut self,
        result: Result<Vec<(TopicPartition, i64)>, ErrorCode>,
        now_ms: u64,
    ) {
        let Phase::FetchingOffsets {
            assignment, added, ..
        } = self.phase.clone()
        else {
            return;
        };
        match result {
            Ok(committed) => self.finish_assign(assignment, added, committed),
            Err(
                code @ (ErrorCode::GroupAuthorizationFailed
                | ErrorCode::TopicAuthorizationFailed
                | ErrorCode::InvalidGroupId),
            ) => self.fail(ClientError::broker(
                code,
                format!("fetch committed offsets of {}", self.group_id),
            )),
            // Anything else is retried, as Kafka's consumer retries the fetch on its next poll.
            Err(code) => {
                if is_coordinator_error(code) {
                    self.coordinator_lost(now_ms);
                }
                self.join_attempts += 1;
                self.phase = Phase::FetchingOffsets {
                    assignment,
                    added,
                    retry_at_ms: now_ms + self.backoff(self.join_attempts),
                    in_flight: false,
                };
            }
        }
    }

    /// A lost request: what it was for is redone.
    fn lost(&mut self, pending: Pending, now_ms: u64) {
        match pending {
            Pending::FindCoordinator => {
                self.find_in_flight = false;
                self.find_attempts += 1;
                self.find_retry_at_ms = now_ms + self.backoff(self.find_attempts);
            }
            Pending::Join | Pending::Sync => {
                self.coordinator_lost(now_ms);
                if matches!(self.phase, Phase::Joining | Phase::Syncing) {
                    self.rejoin(0, now_ms);
                }
            }
            Pending::Heartbeat => {
                self.heartbeat_in_flight = false;
                self.coordinator_lost(now_ms);
            }
            Pending::Commit(id) => self.on_commit(id, ErrorCode::NetworkException, now_ms),
            Pending::OffsetFetch => self.on_offset_fetch(Err(ErrorCode::NetworkException), now_ms),
            Pending::Metadata => {
                if let Phase::LeaderMetadata {
                    protocol, members, ..
                } = self.phase.clone()
                {
                    self.phase = Phase::LeaderMetadata {
                        protocol,
                        members,
                        sent: false,
                    };
                }
            }
            Pending::Leave => {
                if matches!(self.phase, Phase::Leaving { .. }) {
                    self.phase = Phase::Closed;
                }
            }
            Pending::MetadataCheck => {
                self.metadata_check_in_flight = false;
                self.next_metadata_check_ms = now_ms + LEADER_METADATA_CHECK_MS;
            }
        }
    }
}

impl ClientCore for GroupCore {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let mut out = Vec::new();
        for addr in self.inflight.expired_addrs(now_ms) {
            warn!(%addr, "group request timed out; closing the connection");
            out.push(NetAction::Close { addr: addr.clone() });
            self.on_disconnect(&addr, now_ms);
        }
        if self.is_closed() {
            return out;
        }
        self.check_timers(now_ms, &mut out);
        if self.ready_to_leave() && (self.is_static() || self.member_id.is_empty()) {
            // Nothing to tell the coordinator: a static member's membership ends by session
            // timeout (Kafka's KIP-345), and a member without an id has none.
            self.phase = Phase::Closed;
            return out;
        }
        self.find_coordinator(now_ms, &mut out);
        let Some(coordinator) = self.coordinator.clone() else {
            return out;
        };
        self.send_commits(&coordinator, now_ms, &mut out);
        self.finish_revocation(now_ms);
        // Bounded: each pass moves the phase forward, and no cycle of phases completes without
        // a response.
        for _ in 0..4 {
            let changed = self.step_phase(&coordinator, now_ms, &mut out);
            self.send_commits(&coordinator, now_ms, &mut out);
            if !changed || self.is_closed() {
                break;
            }
        }
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        let Some(pending) = self.inflight.complete(addr, response.header.correlation_id) else {
            warn!(%addr, correlation_id = response.header.correlation_id, "response matches no group request");
            return;
        };
        let frame_error = ErrorCode::from(response.header.error_code);
        let frame_code = if frame_error.is_ok() {
            ErrorCode::UnknownServerError
        } else {
            frame_error
        };
        match (pending, response.header.body) {
            (Pending::FindCoordinator, ResponseBodyT::FindCoordinatorResponse(r)) => {
                self.find_in_flight = false;
                let code = ErrorCode::from(r.error_code);
                match (&r.host, code.is_ok() && r.port > 0) {
                    (Some(host), true) => {
                        self.coordinator = Some(format!("{host}:{}", r.port));
                        debug!(group = %self.group_id, coordinator = ?self.coordinator, "coordinator found");
                    }
                    _ if code == ErrorCode::GroupAuthorizationFailed => {
                        self.fail(ClientError::broker(code, "find coordinator"))
                    }
                    _ => self.lost(Pending::FindCoordinator, now_ms),
                }
            }
            (Pending::Join, ResponseBodyT::JoinGroupResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                self.on_join(&r, code, now_ms)
            }
            (Pending::Sync, ResponseBodyT::SyncGroupResponse(r)) => {
                let code = ErrorCode::from(r.error_code);
                self.on_sync(r.assignment.as_deref(), code, now_ms)
            }
            (Pending::Heartbeat, ResponseBodyT::HeartbeatResponse(r)) => {
                self.on_heartbeat(ErrorCode::from(r.error_code), now_ms)
            }
            (Pending::Commit(id), ResponseBodyT::OffsetCommitResponse(r)) => {
                self.on_commit(id, rq::offset_commit_error(&r), now_ms)
            }
            (Pending::OffsetFetch, ResponseBodyT::OffsetFetchResponse(r)) => {
                self.on_offset_fetch(rq::offset_fetch_result(&r), now_ms)
            }
            (Pending::Metadata, ResponseBodyT::MetadataResponse(m)) => {
                self.metadata.update(&m, now_ms);
                self.next_metadata_check_ms = now_ms + LEADER_METADATA_CHECK_MS;
                if let Phase::LeaderMetadata {
                    protocol, members, ..
                } = self.phase.clone()
                {
                    self.leader_assign(protocol, &members);
                }
            }
            (Pending::MetadataCheck, ResponseBodyT::MetadataResponse(m)) => {
                self.metadata.update(&m, now_ms);
                self.lost(Pending::MetadataCheck, now_ms); // schedules the next check
                let changed: Vec<String> = self
                    .assigned_counts
                    .iter()
                    .filter(|(t, n)| self.partition_count(t) != **n)
                    .map(|(t, _)| t.clone())
                    .collect();
                if !changed.is_empty() && self.phase == Phase::Stable {
                    debug!(group = %self.group_id, topics = ?changed, "partition counts changed; rejoining");
                    self.rejoin_needed = true;
                }
            }
            (Pending::Leave, _) => self.lost(Pending::Leave, now_ms),
            (Pending::Heartbeat, _) => self.on_heartbeat(frame_code, now_ms),
            (Pending::Join, _) => self.on_join(&JoinGroupResponseT::default(), frame_code, now_ms),
            (Pending::Sync, _) => self.on_sync(None, frame_code, now_ms),
            (Pending::Commit(id), _) => self.on_commit(id, frame_code, now_ms),
            (Pending::OffsetFetch, _) => self.on_offset_fetch(Err(frame_code), now_ms),
            (pending, _) => self.lost(pending, now_ms),
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        for pending in self.inflight.drain_addr(addr) {
            self.lost(pending, now_ms);
        }
        if self.coordinator.as_deref() == Some(addr) {
            self.coordinator_lost(now_ms);
        }
    }

    /// Only future times: anything already due was acted on by the last `poll_actions`, or waits
    /// for an answer (a due time returned here would make the driver spin until it came).
    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        if self.is_closed() {
            return self.inflight.earliest_deadline_ms();
        }
        let stable = self.phase == Phase::Stable;
        let found = self.coordinator.is_some();
        let phase_retry = match &self.phase {
            Phase::Unjoined { retry_at_ms } => Some(*retry_at_ms),
            Phase::FetchingOffsets {
                retry_at_ms,
                in_flight: false,
                ..
            } => Some(*retry_at_ms),
            _ => None,
        };
        let timers = [
            (stable && found).then_some(self.next_heartbeat_ms),
            (stable && self.config.auto_commit).then_some(self.next_auto_commit_ms),
            stable.then(|| self.last_poll_ms + self.config.max_poll_interval_ms + 1),
            stable.then(|| self.last_heartbeat_ok_ms + self.config.session_timeout_ms + 1),
            (!found && !self.find_in_flight).then_some(self.find_retry_at_ms),
            phase_retry.filter(|_| found),
            self.commits
                .front()
                .filter(|c| !c.in_flight && found)
                .map(|c| c.retry_at_ms),
            (stable && found && !self.assigned_counts.is_empty() && !self.metadata_check_in_flight)
                .then_some(self.next_metadata_check_ms),
            self.inflight.earliest_deadline_ms(),
        ];
        timers.into_iter().flatten().filter(|t| *t > now_ms).min()
    }
}
