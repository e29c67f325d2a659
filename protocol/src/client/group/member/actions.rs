//! The group member's outgoing side: the requests each phase sends and the timers (heartbeat,
//! auto-commit, `max_poll_interval_ms`, session) that fire in `poll_actions`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use tracing::{debug, warn};

use super::{AfterRevoke, CommitKind, GroupCore, GroupEvent, Pending, Phase};
use crate::client::group::assignor::{Assignor, Member};
use crate::client::group::protocol::{Assignment, Subscription};
use crate::client::group::requests as rq;
use crate::client::net::NetAction;
use crate::client::ClientError;
use crate::codec::{self, encode_request};
use crate::wire::{MetadataRequestT, RequestBodyT};

impl GroupCore {
    pub(super) fn send(
        &mut self,
        addr: &str,
        body: RequestBodyT,
        pending: Pending,
        timeout_ms: u64,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) -> bool {
        let correlation_id = self.inflight.start(addr, now_ms + timeout_ms, pending);
        let header = codec::request(correlation_id, Some(&self.config.client_id), body);
        match encode_request(&header, Vec::new(), &self.config.frame_limits) {
            Ok(frame) => {
                out.push(NetAction::Send {
                    addr: addr.to_owned(),
                    frame,
                    expects_response: true,
                });
                true
            }
            Err(e) => {
                let _ = self.inflight.complete(addr, correlation_id);
                self.fail(ClientError::InvalidConfig(format!(
                    "group request too large: {e}"
                )));
                false
            }
        }
    }

    pub(super) fn find_coordinator(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if self.coordinator.is_some() || self.find_in_flight || now_ms < self.find_retry_at_ms {
            return;
        }
        let Some(addr) = self.metadata.any_broker() else {
            return;
        };
        let body = rq::find_coordinator(&self.group_id);
        let timeout_ms = self.config.request_timeout_ms;
        self.find_in_flight = self.send(
            &addr,
            body,
            Pending::FindCoordinator,
            timeout_ms,
            now_ms,
            out,
        );
    }

    pub(super) fn send_commits(
        &mut self,
        coordinator: &str,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) {
        let Some(front) = self.commits.front_mut() else {
            return;
        };
        if front.in_flight || front.retry_at_ms > now_ms {
            return;
        }
        // Only what this member still holds: a commit queued before a revocation must not
        // overwrite the progress of the partition's next owner.
        front.offsets.retain(|(tp, _)| self.held.contains(tp));
        if front.offsets.is_empty() {
            if let Some(c) = self.commits.pop_front() {
                self.events.push_back(GroupEvent::Committed {
                    id: c.id,
                    kind: c.kind,
                    offsets: Vec::new(),
                });
            }
            return;
        }
        let (id, offsets) = (front.id, front.offsets.clone());
        let body = rq::offset_commit(&self.identity(), &offsets);
        let timeout_ms = self.config.request_timeout_ms;
        if self.send(
            coordinator,
            body,
            Pending::Commit(id),
            timeout_ms,
            now_ms,
            out,
        ) {
            if let Some(c) = self.commits.front_mut() {
                c.in_flight = true;
                c.attempts += 1;
            }
        }
    }

    pub(super) fn send_join(&mut self, coordinator: &str, now_ms: u64, out: &mut Vec<NetAction>) {
        let assignor = self.config.assignor;
        let owned = if assignor.is_cooperative() {
            self.assignment()
        } else {
            Vec::new()
        };
        let subscription = Subscription {
            topics: self.topics.clone(),
            user_data: None,
            owned_partitions: owned,
        };
        let metadata = match subscription.encode() {
            Ok(m) => m,
            Err(e) => return self.fail(e),
        };
        let rebalance_timeout_ms = self.config.max_poll_interval_ms;
        let body = rq::join_group(
            &self.identity(),
            i32::try_from(self.config.session_timeout_ms).unwrap_or(i32::MAX),
            i32::try_from(rebalance_timeout_ms).unwrap_or(i32::MAX),
            assignor.name(),
            metadata,
            "",
        );
        // The coordinator may hold a JoinGroup for the whole rebalance (Kafka's client waits
        // rebalance timeout + 5 s).
        let timeout_ms = self
            .config
            .request_timeout_ms
            .max(rebalance_timeout_ms + 5_000);
        if self.send(coordinator, body, Pending::Join, timeout_ms, now_ms, out) {
            self.phase = Phase::Joining;
            self.rejoin_needed = false;
        }
    }

    pub(super) fn send_sync(
        &mut self,
        coordinator: &str,
        protocol: Assignor,
        assignments: Vec<(String, Bytes)>,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) {
        let body = rq::sync_group(&self.identity(), protocol.name(), assignments);
        let timeout_ms = self
            .config
            .request_timeout_ms
            .max(self.config.max_poll_interval_ms + 5_000);
        if self.send(coordinator, body, Pending::Sync, timeout_ms, now_ms, out) {
            self.phase = Phase::Syncing;
        }
    }

    /// The leader's assignment, once it knows every subscribed topic's partition count.
    pub(super) fn leader_assign(&mut self, protocol: Assignor, members: &[Member]) {
        let topics: BTreeSet<&String> = members
            .iter()
            .flat_map(|m| m.subscription.topics.iter())
            .collect();
        let counts: BTreeMap<String, i32> = topics
            .into_iter()
            .map(|t| (t.clone(), self.partition_count(t)))
            .collect();
        let map = protocol.assign(members, &counts);
        self.assigned_counts = counts;
        let mut assignments = Vec::with_capacity(map.len());
        for (member_id, partitions) in map {
            match (Assignment {
                partitions,
                user_data: None,
            })
            .encode()
            {
                Ok(b) => assignments.push((member_id, b)),
                Err(e) => return self.fail(e),
            }
        }
        debug!(group = %self.group_id, generation = self.generation, members = members.len(), "leader assigned");
        self.phase = Phase::SyncReady {
            protocol,
            assignments,
        };
    }

    /// A topic's partition count in the member's metadata (0 when unknown).
    pub(super) fn partition_count(&self, topic: &str) -> i32 {
        self.metadata
            .partition_count(topic)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    }

    /// The leader asks for its topics' metadata every [`super::LEADER_METADATA_CHECK_MS`].
    fn check_metadata(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if self.assigned_counts.is_empty()
            || self.metadata_check_in_flight
            || now_ms < self.next_metadata_check_ms
        {
            return;
        }
        let Some(addr) = self.metadata.any_broker() else {
            return;
        };
        let mut req = MetadataRequestT::default();
        req.topics = Some(self.assigned_counts.keys().cloned().collect());
        let body = RequestBodyT::MetadataRequest(Box::new(req));
        let timeout_ms = self.config.request_timeout_ms;
        self.metadata_check_in_flight =
            self.send(&addr, body, Pending::MetadataCheck, timeout_ms, now_ms, out);
    }

    /// `max_poll_interval_ms` without a poll (Stable only): leaves and returns true.
    pub(super) fn check_poll_interval(&mut self, now_ms: u64, out: &mut Vec<NetAction>) -> bool {
        if self.phase != Phase::Stable
            || now_ms.saturating_sub(self.last_poll_ms) <= self.config.max_poll_interval_ms
        {
            return false;
        }
        {
            warn!(group = %self.group_id, "no poll within max_poll_interval_ms; leaving the group");
            if !self.is_static() && !self.member_id.is_empty() {
                if let Some(c) = self.coordinator.clone() {
                    let body =
                        rq::leave_group(&self.identity(), "consumer poll timeout has expired");
                    let timeout_ms = self.config.request_timeout_ms;
                    self.send(&c, body, Pending::Leave, timeout_ms, now_ms, out);
                }
            }
            self.reset_generation(!self.is_static());
            self.phase = Phase::PollTimedOut;
        }
        true
    }

    /// No heartbeat answered within `session_timeout_ms`: the coordinator is looked up again.
    pub(super) fn check_session(&mut self, now_ms: u64) {
        if now_ms.saturating_sub(self.last_heartbeat_ok_ms) > self.config.session_timeout_ms {
            warn!(group = %self.group_id, "no heartbeat answered within session_timeout_ms");
            self.coordinator_lost(now_ms);
            self.last_heartbeat_ok_ms = now_ms;
        }
    }

    pub(super) fn check_timers(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if self.phase != Phase::Stable || self.check_poll_interval(now_ms, out) {
            return;
        }
        if self.heartbeats_now() {
            // A member waiting to rejoin sends no heartbeat, so it has none to miss.
            self.check_session(now_ms);
        }
        if self.config.auto_commit
            && self.revocation.is_none()
            && now_ms >= self.next_auto_commit_ms
        {
            self.next_auto_commit_ms = now_ms + self.config.auto_commit_interval_ms;
            if !self.commits.iter().any(|c| c.kind == CommitKind::Auto) {
                let _ = self.commit(CommitKind::Auto, now_ms);
            }
        }
    }

    /// One pass over the phase; returns whether it changed (so the caller runs another).
    pub(super) fn step_phase(
        &mut self,
        coordinator: &str,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) -> bool {
        let before = self.phase.clone();
        match self.phase.clone() {
            Phase::Unjoined { retry_at_ms } => {
                let ready = retry_at_ms <= now_ms
                    && self.revocation.is_none()
                    && self.events.is_empty()
                    && !self.commits.iter().any(|c| c.in_flight);
                if !ready {
                    return false;
                }
                let eager = !self.config.assignor.is_cooperative();
                // Eager: every rebalance of a generation that assigned us starts by revoking
                // everything (possibly nothing), as Kafka's listener sees it.
                let assigned_now = self.assigned_generation == Some(self.generation);
                if eager && self.generation >= 0 && (assigned_now || !self.held.is_empty()) {
                    self.assigned_generation = None;
                    let held = self.assignment();
                    self.start_revocation(held, AfterRevoke::Join, CommitKind::Revoke, now_ms);
                    self.finish_revocation(now_ms);
                    return false;
                }
                self.send_join(coordinator, now_ms, out);
            }
            Phase::LeaderMetadata {
                protocol,
                members,
                sent: false,
            } => {
                let topics: BTreeSet<String> = members
                    .iter()
                    .flat_map(|m| m.subscription.topics.iter().cloned())
                    .collect();
                let mut req = MetadataRequestT::default();
                req.topics = Some(topics.into_iter().collect());
                let body = RequestBodyT::MetadataRequest(Box::new(req));
                let timeout_ms = self.config.request_timeout_ms;
                let Some(addr) = self.metadata.any_broker() else {
                    return false;
                };
                if self.send(&addr, body, Pending::Metadata, timeout_ms, now_ms, out) {
                    self.phase = Phase::LeaderMetadata {
                        protocol,
                        members,
                        sent: true,
                    };
                }
            }
            Phase::SyncReady {
                protocol,
                assignments,
            } => self.send_sync(coordinator, protocol, assignments, now_ms, out),
            Phase::FetchingOffsets {
                assignment,
                added,
                retry_at_ms,
                in_flight: false,
            } if retry_at_ms <= now_ms => {
                let body = rq::offset_fetch(&self.group_id, Some(&added));
                let timeout_ms = self.config.request_timeout_ms;
                if self.send(
                    coordinator,
                    body,
                    Pending::OffsetFetch,
                    timeout_ms,
                    now_ms,
                    out,
                ) {
                    self.phase = Phase::FetchingOffsets {
                        assignment,
                        added,
                        retry_at_ms,
                        in_flight: true,
                    };
                }
            }
            Phase::Stable => {
                self.check_metadata(now_ms, out);
                if self.rejoin_needed && self.revocation.is_none() {
                    self.rejoin(0, now_ms);
                } else if !self.heartbeat_in_flight && now_ms >= self.next_heartbeat_ms {
                    let body = rq::heartbeat(&self.identity());
                    let timeout_ms = self.config.request_timeout_ms;
                    self.heartbeat_in_flight = self.send(
                        coordinator,
                        body,
                        Pending::Heartbeat,
                        timeout_ms,
                        now_ms,
                        out,
                    );
                }
            }
            Phase::Leaving { sent: false } if self.ready_to_leave() => {
                if self.is_static() || self.member_id.is_empty() {
                    // A static member's membership ends by session timeout (KIP-345); a member
                    // without an id has none to end.
                    self.phase = Phase::Closed;
                } else {
                    let body = rq::leave_group(&self.identity(), "the consumer is being closed");
                    let timeout_ms = self.config.request_timeout_ms;
                    if self.send(coordinator, body, Pending::Leave, timeout_ms, now_ms, out) {
                        self.phase = Phase::Leaving { sent: true };
                    }
                }
            }
            _ => {}
        }
        self.phase != before
    }
}
