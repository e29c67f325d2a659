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
//! - While the application is away from `poll`, the driver calls
//!   [`GroupCore::background_actions`] instead (Kafka's heartbeat thread, `background.rs`):
//!   heartbeats and the poll-interval check only, so processing may take longer than
//!   `session_timeout_ms` but not longer than `max_poll_interval_ms`.
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
use crate::client::net::{backoff_ms, Addr, InFlight, GROUP_FIRST_ID};
use crate::client::{ClientError, TopicPartition};

use super::assignor::{Assignor, Member};
use super::requests::Identity;

/// Members the leader assigns for at most (a named bound on what one JoinGroup may carry).
pub const MEMBERS_MAX: usize = 10_000;
/// How often the leader checks its subscribed topics' partition counts; a change (a topic
/// created after the assignment, partitions added) makes it rejoin so the new partitions are
/// assigned (Kafka's leader watches its metadata the same way).
pub const LEADER_METADATA_CHECK_MS: u64 = 5_000;
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
    /// The leader's periodic look at its subscribed topics' partition counts.
    MetadataCheck,
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
    /// The generation whose assignment the application was last given (its eager revocation
    /// is still due).
    assigned_generation: Option<i32>,
    /// Partition counts the leader assigned with (0: topic unknown then); empty when not leader.
    assigned_counts: BTreeMap<String, i32>,
    next_metadata_check_ms: u64,
    metadata_check_in_flight: bool,
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
            assigned_counts: BTreeMap::new(),
            assigned_generation: None,
            next_metadata_check_ms: 0,
            metadata_check_in_flight: false,
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
        self.rejoin_needed = false;
        if self.held.is_empty() || self.generation < 0 {
            self.lose_all();
        } else {
            // Replaces any revocation under way: everything goes now.
            self.revocation = None;
            self.start_revocation(
                self.assignment(),
                AfterRevoke::Leave,
                CommitKind::Close,
                now_ms,
            );
        }
        // Out of any join or sync: their late answers are ignored from here on.
        self.phase = Phase::Leaving { sent: false };
    }

    /// Whether the close's commit and revocation are done, so LeaveGroup may go.
    fn ready_to_leave(&self) -> bool {
        self.phase == (Phase::Leaving { sent: false })
            && self.revocation.is_none()
            && self.commits.is_empty()
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
        // Its partitions are gone with it: nothing more is committed for them.
        self.lose_all();
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
        // Not at once: the broker named may have said "not me" (it and the broker that named
        // it disagree while one of them catches up on metadata), and asking again at once
        // would spin between the two. Kafka's consumer sleeps `retry.backoff.ms` after such a
        // failed join; losses in a row back off further, until the coordinator answers.
        self.find_attempts = self.find_attempts.saturating_add(1);
        self.find_retry_at_ms = now_ms + self.backoff(self.find_attempts);
    }

    /// The coordinator answered a request as coordinator: the next loss backs off from the
    /// start again.
    fn coordinator_answered(&mut self) {
        self.find_attempts = 0;
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
        self.assigned_generation = Some(self.generation);
        self.events.push_back(GroupEvent::Assigned {
            generation: self.generation,
            added,
            assignment,
            start_offsets,
        });
        self.phase = Phase::Stable;
    }
}

mod actions;
mod background;
mod responses;

#[cfg(test)]
mod background_tests;
#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests;
