//! The group member's sans-IO core: one consumer's membership in a consumer group.
//!
//! Inputs are the application's calls (`subscribe` at construction, [`GroupCore::polled`],
//! [`GroupCore::processed`], [`GroupCore::commit`], [`GroupCore::close`]), decoded responses,
//! lost connections and `now_ms`; outputs are [`NetAction`]s and [`GroupEvent`]s, which the
//! driver hands to the fetching core and the application's rebalance listener. It never touches a
//! socket or a clock.
//!
//! The cycle, as Kafka's ConsumerCoordinator runs it: FindCoordinator → JoinGroup → (the leader
//! fetches metadata for every member's topics and runs the assignor) → SyncGroup → OffsetFetch
//! for newly assigned partitions → stable, heartbeating every `heartbeat_interval_ms` and
//! auto-committing processed positions every `auto_commit_interval_ms`.
//!
//! - Rebalance: a heartbeat or commit answered REBALANCE_IN_PROGRESS makes the member rejoin.
//!   Eager (range, roundrobin): it first commits and revokes everything it holds. Cooperative
//!   (cooperative-sticky): it keeps consuming, rejoins with its owned partitions, and after
//!   SyncGroup commits and revokes only the partitions the new assignment removed — and then
//!   rejoins once more so they can go to their new owner.
//! - ILLEGAL_GENERATION resets the generation, UNKNOWN_MEMBER_ID also the member id; both lose
//!   every partition (revoked with `lost: true`, nothing committed: the generation is gone).
//!   NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection or no successful heartbeat
//!   for `session_timeout_ms` send the member to find the coordinator again.
//! - `max_poll_interval_ms` without a `polled` call: the member leaves (LeaveGroup unless
//!   static), loses its partitions, and rejoins at the next `polled`.
//! - Commits go out one at a time in the order asked. Auto and async commits are never retried;
//!   sync, revoke and close commits are retried on retriable errors until their deadline.
//! - Close: commit (with `auto_commit`), revoke everything, LeaveGroup unless static.
//!
//! The driver must take the events (`take_events`) after every input; JoinGroup waits until they
//! were taken, so a revocation's listener has run before the member rejoins.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use tracing::{debug, warn};

use crate::client::consumer::ConsumerConfig;
use crate::client::metadata::MetadataCache;
use crate::client::net::{backoff_ms, Addr, InFlight, NetAction, GROUP_FIRST_ID};
use crate::client::{ClientError, TopicPartition};
use crate::codec::{self, encode_request};
use crate::wire::{JoinGroupResponseT, MetadataRequestT, RequestBodyT};
use crate::ErrorCode;

use super::assignor::{Assignor, Member};
use super::protocol::{Assignment, Subscription};
use super::requests::{self as rq, is_coordinator_error, Identity};

/// Members the leader assigns for at most (a named bound on what one JoinGroup may carry).
pub const MEMBERS_MAX: usize = 10_000;
/// Commits queued at most; an auto or async commit beyond it is dropped (the next one carries
/// the same positions).
pub const COMMITS_QUEUED_MAX: usize = 16;

/// Why a commit was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitKind {
    Auto,
    Async,
    Sync,
    /// Before partitions are revoked.
    Revoke,
    /// On close.
    Close,
}

impl CommitKind {
    fn retried(self) -> bool {
        matches!(self, Self::Sync | Self::Revoke | Self::Close)
    }
}

/// What happened, for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// Stop consuming `partitions`. `lost`: the generation was gone, nothing was committed.
    Revoked {
        generation: i32,
        partitions: Vec<TopicPartition>,
        lost: bool,
    },
    /// The new assignment: `added` are new to this member and start at `start_offsets` (the
    /// group's committed offsets; partitions missing there start at `auto_offset_reset`).
    Assigned {
        generation: i32,
        added: Vec<TopicPartition>,
        assignment: Vec<TopicPartition>,
        start_offsets: Vec<(TopicPartition, i64)>,
    },
    Committed {
        id: u64,
        kind: CommitKind,
        offsets: Vec<(TopicPartition, i64)>,
    },
    CommitFailed {
        id: u64,
        kind: CommitKind,
        error: ClientError,
    },
    /// The member cannot go on (fenced static member, group authorization, bad config).
    Fatal(ClientError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Unjoined {
        retry_at_ms: u64,
    },
    Joining,
    LeaderMetadata {
        protocol: Assignor,
        members: Vec<Member>,
        sent: bool,
    },
    /// SyncGroup to send: the leader's assignments, or none from a follower.
    SyncReady {
        protocol: Assignor,
        assignments: Vec<(String, Bytes)>,
    },
    Syncing,
    FetchingOffsets {
        assignment: Vec<TopicPartition>,
        added: Vec<TopicPartition>,
        retry_at_ms: u64,
        in_flight: bool,
    },
    Stable,
    /// Left after `max_poll_interval_ms`; rejoins at the next `polled`.
    PollTimedOut,
    /// Revocation done; LeaveGroup in flight (or about to be).
    Leaving {
        sent: bool,
    },
    Closed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum AfterRevoke {
    Join,
    Assign {
        assignment: Vec<TopicPartition>,
        added: Vec<TopicPartition>,
    },
    Leave,
}

#[derive(Debug)]
struct Revocation {
    partitions: Vec<TopicPartition>,
    commit_id: Option<u64>,
    then: AfterRevoke,
}

#[derive(Debug)]
struct PendingCommit {
    id: u64,
    kind: CommitKind,
    offsets: Vec<(TopicPartition, i64)>,
    deadline_ms: u64,
    retry_at_ms: u64,
    attempts: u32,
    in_flight: bool,
}

#[derive(Debug)]
enum Pending {
    FindCoordinator,
    Join,
    Sync,
    Heartbeat,
    Commit(u64),
    OffsetFetch,
    Metadata,
    Leave,
}

#[derive(Debug)]
pub struct GroupCore {
    config: ConsumerConfig,
    group_id: String,
    topics: Vec<String>,
    metadata: MetadataCache,
    inflight: InFlight<Pending>,
    coordinator: Option<Addr>,
    find_in_flight: bool,
    find_retry_at_ms: u64,
    find_attempts: u32,
    member_id: String,
    generation: i32,
    protocol: Option<Assignor>,
    phase: Phase,
    rejoin_needed: bool,
    join_attempts: u32,
    held: BTreeSet<TopicPartition>,
    positions: BTreeMap<TopicPartition, i64>,
    committed: BTreeMap<TopicPartition, i64>,
    commits: VecDeque<PendingCommit>,
    next_commit_id: u64,
    revocation: Option<Revocation>,
    next_heartbeat_ms: u64,
    heartbeat_in_flight: bool,
    last_heartbeat_ok_ms: u64,
    last_poll_ms: u64,
    next_auto_commit_ms: u64,
    events: VecDeque<GroupEvent>,
}

impl GroupCore {
    /// A member of `config.group_id` subscribed to `topics`.
    pub fn new(
        config: ConsumerConfig,
        bootstrap: Vec<Addr>,
        topics: Vec<String>,
        now_ms: u64,
    ) -> Result<Self, ClientError> {
        config.validate()?;
        let Some(group_id) = config.group_id.clone() else {
            return Err(ClientError::InvalidConfig(
                "subscribe needs a group_id".into(),
            ));
        };
        if topics.is_empty() || bootstrap.is_empty() {
            return Err(ClientError::InvalidConfig(
                "subscribe needs topics and a bootstrap list".into(),
            ));
        }
        Ok(Self {
            metadata: MetadataCache::new(
                bootstrap,
                config.retry_backoff_ms,
                config.metadata_max_age_ms,
            ),
            group_id,
            topics,
            inflight: InFlight::with_ids(GROUP_FIRST_ID, i32::MAX),
            coordinator: None,
            find_in_flight: false,
            find_retry_at_ms: 0,
            find_attempts: 0,
            member_id: String::new(),
            generation: -1,
            protocol: None,
            phase: Phase::Unjoined { retry_at_ms: 0 },
            rejoin_needed: false,
            join_attempts: 0,
            held: BTreeSet::new(),
            positions: BTreeMap::new(),
            committed: BTreeMap::new(),
            commits: VecDeque::new(),
            next_commit_id: 1,
            revocation: None,
            next_heartbeat_ms: 0,
            heartbeat_in_flight: false,
            last_heartbeat_ok_ms: now_ms,
            last_poll_ms: now_ms,
            next_auto_commit_ms: now_ms + config.auto_commit_interval_ms,
            events: VecDeque::new(),
            config,
        })
    }

    /// Whether a response with this correlation id is this core's.
    pub fn owns_correlation_id(&self, correlation_id: i32) -> bool {
        self.inflight.owns_id(correlation_id)
    }

    pub fn take_events(&mut self) -> Vec<GroupEvent> {
        self.events.drain(..).collect()
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// Partitions the application holds now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.held.iter().cloned().collect()
    }

    /// Whether the member is stable (joined, assigned, no rebalance under way).
    pub fn is_stable(&self) -> bool {
        self.phase == Phase::Stable && !self.rejoin_needed && self.revocation.is_none()
    }

    /// Whether partitions are being revoked (their commit is under way): the driver returns no
    /// records meanwhile, so the commit covers everything the application was given.
    pub fn is_revoking(&self) -> bool {
        self.revocation.is_some()
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed | Phase::Failed)
    }

    fn is_static(&self) -> bool {
        self.config.group_instance_id.is_some()
    }

    /// The application polled (resets the `max_poll_interval_ms` clock; rejoins after a poll
    /// timeout).
    pub fn polled(&mut self, now_ms: u64) {
        self.last_poll_ms = now_ms;
        if self.phase == Phase::PollTimedOut {
            self.phase = Phase::Unjoined { retry_at_ms: 0 };
        }
    }

    /// The application was given records up to `next_offset - 1` of `tp`: its position to commit.
    pub fn processed(&mut self, tp: &TopicPartition, next_offset: i64) {
        if self.held.contains(tp) {
            self.positions.insert(tp.clone(), next_offset);
        }
    }

    /// Positions not yet committed.
    fn uncommitted(&self) -> Vec<(TopicPartition, i64)> {
        self.positions
            .iter()
            .filter(|(tp, o)| self.committed.get(*tp) != Some(*o))
            .map(|(tp, o)| (tp.clone(), *o))
            .collect()
    }

    /// Queues a commit of the processed positions. `None`: nothing to commit (or, for auto and
    /// async commits, the queue is full).
    pub fn commit(&mut self, kind: CommitKind, now_ms: u64) -> Option<u64> {
        let offsets = self.uncommitted();
        if offsets.is_empty() || self.generation < 0 && !kind.retried() {
            return None;
        }
        if self.commits.len() >= COMMITS_QUEUED_MAX && !kind.retried() {
            return None;
        }
        let id = self.next_commit_id;
        self.next_commit_id += 1;
        let timeout_ms = match kind {
            CommitKind::Close => self.config.close_timeout_ms,
            CommitKind::Revoke => self.config.max_poll_interval_ms,
            _ => self.config.request_timeout_ms,
        };
        self.commits.push_back(PendingCommit {
            id,
            kind,
            offsets,
            deadline_ms: now_ms + timeout_ms,
            retry_at_ms: 0,
            attempts: 0,
            in_flight: false,
        });
        Some(id)
    }

    /// Starts closing: commit (with `auto_commit`), revoke, leave. Done when `is_closed`.
    pub fn close(&mut self, now_ms: u64) {
        if self.is_closed() || matches!(self.phase, Phase::Leaving { .. }) {
            return;
        }
        self.commits.retain(|c| c.in_flight || c.kind.retried());
        if self.held.is_empty() || self.generation < 0 {
            self.lose_all();
            self.phase = Phase::Leaving { sent: false };
            return;
        }
        self.start_revocation(
            self.assignment(),
            AfterRevoke::Leave,
            CommitKind::Close,
            now_ms,
        );
    }

    fn identity(&self) -> Identity<'_> {
        Identity {
            group_id: &self.group_id,
            member_id: &self.member_id,
            generation: self.generation,
            group_instance_id: self.config.group_instance_id.as_deref(),
        }
    }

    fn fail(&mut self, error: ClientError) {
        warn!(group = %self.group_id, %error, "group member failed");
        self.events.push_back(GroupEvent::Fatal(error));
        self.phase = Phase::Failed;
    }

    fn backoff(&self, attempts: u32) -> u64 {
        backoff_ms(
            attempts,
            self.config.retry_backoff_ms,
            self.config.retry_backoff_max_ms,
        )
    }

    /// Every partition is gone without a commit (the generation is no longer valid).
    fn lose_all(&mut self) {
        if let Some(r) = self.revocation.take() {
            // A revocation under way becomes a loss; what it meant to do next still follows.
            if let AfterRevoke::Leave = r.then {
                self.phase = Phase::Leaving { sent: false };
            }
        }
        if !self.held.is_empty() {
            self.events.push_back(GroupEvent::Revoked {
                generation: self.generation,
                partitions: self.assignment(),
                lost: true,
            });
        }
        self.held.clear();
        self.positions.clear();
        self.committed.clear();
        self.commits.retain(|c| c.in_flight);
    }

    fn reset_generation(&mut self, reset_member_id: bool) {
        self.lose_all();
        self.generation = -1;
        if reset_member_id {
            self.member_id.clear();
        }
    }

    fn rejoin(&mut self, delay_ms: u64, now_ms: u64) {
        if matches!(
            self.phase,
            Phase::Leaving { .. } | Phase::Closed | Phase::Failed
        ) {
            return;
        }
        self.phase = Phase::Unjoined {
            retry_at_ms: now_ms + delay_ms,
        };
    }

    fn coordinator_lost(&mut self, now_ms: u64) {
        if let Some(addr) = self.coordinator.take() {
            debug!(group = %self.group_id, %addr, "coordinator lost");
        }
        self.heartbeat_in_flight = false;
        self.find_retry_at_ms = now_ms;
    }

    fn start_revocation(
        &mut self,
        partitions: Vec<TopicPartition>,
        then: AfterRevoke,
        kind: CommitKind,
        now_ms: u64,
    ) {
        let commit_id = if self.config.auto_commit {
            self.commit(kind, now_ms)
        } else {
            None
        };
        self.revocation = Some(Revocation {
            partitions,
            commit_id,
            then,
        });
    }

    /// Finishes a revocation whose commit is done.
    fn finish_revocation(&mut self, now_ms: u64) {
        let done = match &self.revocation {
            Some(r) => r
                .commit_id
                .is_none_or(|id| !self.commits.iter().any(|c| c.id == id)),
            None => false,
        };
        if !done {
            return;
        }
        let Some(r) = self.revocation.take() else {
            return;
        };
        self.events.push_back(GroupEvent::Revoked {
            generation: self.generation,
            partitions: r.partitions.clone(),
            lost: false,
        });
        for tp in &r.partitions {
            self.held.remove(tp);
            self.positions.remove(tp);
            self.committed.remove(tp);
        }
        match r.then {
            AfterRevoke::Join => self.send_join_when_ready(now_ms),
            AfterRevoke::Assign { assignment, added } => self.begin_assign(assignment, added),
            AfterRevoke::Leave => self.phase = Phase::Leaving { sent: false },
        }
    }

    fn send_join_when_ready(&mut self, now_ms: u64) {
        self.rejoin(0, now_ms);
    }

    fn begin_assign(&mut self, assignment: Vec<TopicPartition>, added: Vec<TopicPartition>) {
        if added.is_empty() {
            self.finish_assign(assignment, added, Vec::new());
        } else {
            self.phase = Phase::FetchingOffsets {
                assignment,
                added,
                retry_at_ms: 0,
                in_flight: false,
            };
        }
    }

    fn finish_assign(
        &mut self,
        assignment: Vec<TopicPartition>,
        added: Vec<TopicPartition>,
        committed: Vec<(TopicPartition, i64)>,
    ) {
        let start_offsets: Vec<(TopicPartition, i64)> = committed
            .into_iter()
            .filter(|(tp, o)| *o >= 0 && added.contains(tp))
            .collect();
        for (tp, o) in &start_offsets {
            self.committed.insert(tp.clone(), *o);
        }
        self.held = assignment.iter().cloned().collect();
        self.events.push_back(GroupEvent::Assigned {
            generation: self.generation,
            added,
            assignment,
            start_offsets,
        });
        self.phase = Phase::Stable;
    }

    fn send(
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

    fn find_coordinator(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
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

    fn send_commits(&mut self, coordinator: &str, now_ms: u64, out: &mut Vec<NetAction>) {
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

    fn send_join(&mut self, coordinator: &str, now_ms: u64, out: &mut Vec<NetAction>) {
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

    fn send_sync(
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
    fn leader_assign(&mut self, protocol: Assignor, members: &[Member]) {
        let topics: BTreeSet<&String> = members
            .iter()
            .flat_map(|m| m.subscription.topics.iter())
            .collect();
        let counts: BTreeMap<String, i32> = topics
            .into_iter()
            .filter_map(|t| {
                let n = self.metadata.partition_count(t)?;
                Some((t.clone(), i32::try_from(n).ok()?))
            })
            .collect();
        let map = protocol.assign(members, &counts);
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

    fn check_timers(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if self.phase != Phase::Stable {
            return;
        }
        if now_ms.saturating_sub(self.last_poll_ms) > self.config.max_poll_interval_ms {
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
            return;
        }
        if now_ms.saturating_sub(self.last_heartbeat_ok_ms) > self.config.session_timeout_ms {
            warn!(group = %self.group_id, "no heartbeat answered within session_timeout_ms");
            self.coordinator_lost(now_ms);
            self.last_heartbeat_ok_ms = now_ms;
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
    fn step_phase(&mut self, coordinator: &str, now_ms: u64, out: &mut Vec<NetAction>) -> bool {
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
                if eager && !self.held.is_empty() && self.generation >= 0 {
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
            Phase::Leaving { sent: false } if !self.commits.iter().any(|c| c.in_flight) => {
                let body = rq::leave_group(&self.identity(), "the consumer is being closed");
                let timeout_ms = self.config.request_timeout_ms;
                if self.send(coordinator, body, Pending::Leave, timeout_ms, now_ms, out) {
                    self.phase = Phase::Leaving { sent: true };
                }
            }
            _ => {}
        }
        self.phase != before
    }

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
}

mod responses;

#[cfg(test)]
mod tests;
