//! A partition replica's role, taken from the committed metadata (DESIGN §7): leading — the
//! replica state ([`ReplicaState`]: ISR, followers' progress, high watermark) and the acks=all
//! waiters — or following a leader ([`FollowerPartition`]).
//!
//! Owns: [`Partition::learn`], the one place a role changes, and the rules of a change (the
//! simulator's `SimReplica::learn` follows the same ones over the same spool-core structs):
//! - a new leader records (its epoch, its log end) in `leader-epoch-checkpoint` before anything
//!   is appended in the epoch (KIP-101), starts its high watermark from the one it had learned
//!   as a follower (never its whole log: what it holds past that may not be on the others yet),
//!   and rebuilds the producer table from its log before its first produce;
//! - a deposed leader answers its acks=all waiters NOT_LEADER_OR_FOLLOWER (the new leader may
//!   truncate their batches), fdatasyncs what it wrote, and follows;
//! - a follower takes a new leader or epoch without touching its log: what to cut is learned from
//!   the new leader's first answer.
//!
//! A role change takes `append_turn`, so no append (a client's or a replicated one) runs across
//! it. A committed state older than the one held (its leader epoch, or partition epoch) is
//! ignored. Never does: decide who leads (the controller does) or I/O beyond the epoch checkpoint
//! and the deposed leader's sync.

use spool_core::ack_wait::AckWaiters;
use spool_core::follower_state::FollowerPartition;
use spool_core::replica::{Leadership, ReplicaState};
use spool_storage::{Durability, PartitionLog};

use super::Partition;

/// No leader (the metadata log's value).
pub const NO_LEADER: i32 = -1;

/// A partition's committed state as this broker's image has it, with what the replica needs of
/// the topic's config and this broker's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub min_insync_replicas: usize,
    /// This broker's broker epoch (-1 before its registration is committed).
    pub broker_epoch: i64,
}

impl Committed {
    fn leadership(&self) -> Leadership {
        Leadership {
            leader_id: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
        }
    }

    /// The invariants the replica state asserts: the ISR holds the leader and only replicas. The
    /// controller validates every record, so a state breaking them is a bug there; the broker
    /// logs it and keeps its role rather than panic on metadata.
    fn is_well_formed(&self) -> bool {
        (self.leader == NO_LEADER || self.isr.contains(&self.leader))
            && self.isr.iter().all(|b| self.replicas.contains(b))
    }
}

/// What the leader role holds besides the replica state.
pub(super) struct LeaderPart {
    pub state: ReplicaState,
    pub waiters: AckWaiters,
    /// DeleteRecords requests waiting for the low watermark (the ISR's smallest log start) to
    /// reach their offset (`delete`): the same table, fed the low watermark instead of the HW.
    pub delete_waiters: AckWaiters,
    /// When the ISR change in flight was sent (monotonic ms), if one is.
    pub alter_sent_ms: Option<u64>,
}

impl LeaderPart {
    /// Every waiter, acks=all and DeleteRecords, answered NOT_LEADER_OR_FOLLOWER.
    fn on_leadership_lost(&mut self) -> Vec<spool_core::ack_wait::Released> {
        let mut released = self.waiters.on_leadership_lost();
        released.extend(self.delete_waiters.on_leadership_lost());
        released
    }
}

pub(super) enum Role {
    Leader(Box<LeaderPart>),
    Follower(FollowerPartition),
}

impl Role {
    /// A replica just opened: following no one, its whole log held (the log is synced on open).
    pub fn unassigned(me: i32, log: &PartitionLog) -> Role {
        Role::Follower(FollowerPartition::new(
            me,
            -1,
            NO_LEADER,
            -1,
            log.log_start_offset(),
            log.log_end_offset(),
            0,
            log.leader_epochs(),
        ))
    }

    pub fn high_watermark(&self) -> u64 {
        match self {
            Role::Leader(l) => l.state.high_watermark(),
            Role::Follower(f) => f.high_watermark(),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        match self {
            Role::Leader(l) => l.state.leader_epoch(),
            Role::Follower(f) => f.leader_epoch(),
        }
    }

    pub fn is_leader(&self) -> bool {
        matches!(self, Role::Leader(_))
    }

    /// The committed ISR and the size acks=all needs, for error messages.
    pub fn isr_text(&self) -> String {
        match self {
            Role::Leader(l) => format!(
                "ISR {:?}, min.insync.replicas {}",
                l.state.isr(),
                l.state.required_isr()
            ),
            Role::Follower(f) => format!("not the leader (broker {} leads)", f.leader_id()),
        }
    }
}

impl Partition {
    /// Takes the partition's committed state (module docs).
    pub async fn learn(&self, committed: &Committed, now_ms: u64) {
        if !committed.is_well_formed() {
            tracing::error!(tp = %self.tp, ?committed, "a committed partition state breaks the ISR invariants; keeping the current role");
            return;
        }
        if self.learn_in_place(committed, now_ms) {
            return;
        }
        let turn = crate::stall_watch::watch(
            || format!("{}: the append turn for a role change", self.tp),
            self.append_turn.acquire_permit(1),
        )
        .await;
        let Ok(_turn) = turn else {
            return;
        };
        // Checked again under the turn: another learn may have run while this one waited.
        if self.learn_in_place(committed, now_ms) {
            return;
        }
        if committed.leader == self.me {
            self.become_leader(committed, now_ms).await;
        } else {
            self.become_follower(committed).await;
        }
        self.release(now_ms);
        self.wake_watchers();
    }

    /// The changes that keep the role: a leader's new ISR or replicas at its epoch, a follower's
    /// new leader or epoch. Returns false when the role must change.
    fn learn_in_place(&self, c: &Committed, now_ms: u64) -> bool {
        let changed_isr = {
            let mut role = self.role.borrow_mut();
            if c.leader_epoch < role.leader_epoch() {
                return true;
            }
            match &mut *role {
                Role::Leader(l)
                    if c.leader == self.me && c.leader_epoch == l.state.leader_epoch() =>
                {
                    // A topic config change (min.insync.replicas) moves no epoch.
                    let changed_min = l.state.set_min_insync_replicas(c.min_insync_replicas);
                    // An older or the same partition epoch changes nothing.
                    let changed_isr = c.partition_epoch > l.state.leadership().partition_epoch
                        && l.state.on_partition_change(c.leadership(), now_ms);
                    changed_min || changed_isr
                }
                Role::Leader(_) => return false,
                Role::Follower(_) if c.leader == self.me => return false,
                Role::Follower(f) => {
                    if c.leader_epoch > f.leader_epoch() || c.leader != f.leader_id() {
                        f.on_new_leader(c.leader, c.leader_epoch);
                    }
                    if c.broker_epoch >= 0 {
                        f.on_broker_epoch(c.broker_epoch);
                    }
                    return true;
                }
            }
        };
        if changed_isr {
            self.release(now_ms);
            self.wake_watchers();
        }
        true
    }

    /// Called under `append_turn`.
    async fn become_leader(&self, c: &Committed, now_ms: u64) {
        if let Err(e) = self.log.begin_leader_epoch(c.leader_epoch).await {
            // The epoch is recorded with the first batch appended in it anyway; only an
            // OffsetForLeaderEpoch asked before then answers from the older epoch.
            tracing::warn!(tp = %self.tp, epoch = c.leader_epoch, "recording the leader epoch: {e}");
        }
        let exposable = match self.durability {
            Durability::Fsync => self.log.durable_offset(),
            Durability::Replicated => self.log.log_end_offset(),
        };
        let mut role = self.role.borrow_mut();
        let hw = role.high_watermark().min(exposable);
        let released = match &mut *role {
            Role::Leader(old) => old.on_leadership_lost(),
            Role::Follower(_) => Vec::new(),
        };
        let state = ReplicaState::for_new_leader(
            c.leadership(),
            c.min_insync_replicas,
            exposable,
            hw,
            now_ms,
        );
        *role = Role::Leader(Box::new(LeaderPart {
            state,
            waiters: AckWaiters::default(),
            delete_waiters: AckWaiters::default(),
            alter_sent_ms: None,
        }));
        drop(role);
        // What it replicated as a follower rebuilds the producer table before its first produce.
        self.producers_loaded.set(false);
        self.answer_released(&released);
        tracing::info!(tp = %self.tp, epoch = c.leader_epoch, isr = ?c.isr, high_watermark = hw, log_end = self.log.log_end_offset(), "leading");
    }

    /// Called under `append_turn`.
    async fn become_follower(&self, c: &Committed) {
        // A follower reports its synced offset; it starts with its whole log synced. The role
        // stays the old leader's while the sync runs: an acks=all produce finishing its own sync
        // meanwhile may still register a waiter, which the swap below answers with the rest.
        let end = self.log.log_end_offset();
        let synced = crate::stall_watch::watch(
            || format!("{}: syncing the deposed leader's log", self.tp),
            self.log.sync_to(end),
        )
        .await;
        if let Err(e) = synced {
            tracing::warn!(tp = %self.tp, "syncing a deposed leader's log: {e}");
        }
        let hw = self.high_watermark();
        let f = FollowerPartition::new(
            self.me,
            c.broker_epoch,
            c.leader,
            c.leader_epoch,
            self.log.log_start_offset(),
            self.log.log_end_offset(),
            hw,
            self.log.leader_epochs(),
        );
        let old = std::mem::replace(&mut *self.role.borrow_mut(), Role::Follower(f));
        if let Role::Leader(mut old) = old {
            // After the swap, so that no waiter can register in the old table once it is read.
            let released = old.on_leadership_lost();
            self.answer_released(&released);
        }
        tracing::info!(tp = %self.tp, leader = c.leader, epoch = c.leader_epoch, "following");
    }
}
