//! [`SimReplica`]: one partition replica on one simulated broker — its [`SimLog`] and its role,
//! each role a spool-core struct: a leader's [`ReplicaState`] (ISR, HW, follower progress),
//! [`LeaderEpochCache`], [`AckWaiters`] and [`ProducerStateTable`]; a follower's
//! [`FollowerPartition`].
//!
//! Owns: role changes from the committed metadata ([`SimReplica::learn`], the model test's rule:
//! a new leader assigns its epoch at its log end at once and starts from
//! `ReplicaState::for_new_leader`; a deposed leader fsyncs and follows; a follower takes the new
//! leader and epoch), and the leader's exposable log end under `durability = fsync` (its synced
//! offset).
//! Promises: every decision is the spool-core struct's; this file only moves data between the
//! log and those structs. Releasing acks=all waiters happens in [`SimReplica::release`] after
//! every change that can move the HW, the ISR or leadership.
//! Never does: send messages (the host does), or read a clock.

use spool_core::ack_wait::{AckWaiters, Released};
use spool_core::election::NO_LEADER;
use spool_core::epoch_cache::LeaderEpochCache;
use spool_core::follower_state::FollowerPartition;
use spool_core::planted::PlantedBug;
use spool_core::producer_state::{BatchInfo, ProducerStateTable};
use spool_core::replica::ReplicaState;

use crate::metaview::PartView;
use crate::plog::SimLog;

/// Producers remembered per partition.
pub const PRODUCERS_MAX: usize = 64;

pub struct LeaderPart {
    pub state: ReplicaState,
    pub epochs: LeaderEpochCache,
    pub waiters: AckWaiters,
    pub producers: ProducerStateTable,
    /// When the ISR change in flight was sent.
    pub alter_sent_ms: Option<u64>,
}

pub enum Role {
    Leader(Box<LeaderPart>),
    Follower(FollowerPartition),
}

pub struct SimReplica {
    pub log: SimLog,
    pub role: Role,
    pub min_insync_replicas: usize,
}

/// What a role change did, for the host to act on.
#[derive(Debug, Default)]
pub struct Learned {
    pub took_leadership: Option<i32>,
    pub released: Vec<Released>,
}

impl SimReplica {
    /// A follower of no one yet, over `log` (fresh, or recovered after a restart).
    pub fn follower(me: i32, broker_epoch: i64, log: SimLog, epochs: LeaderEpochCache) -> Self {
        let epoch = epochs.latest_epoch().unwrap_or(0);
        let end = log.end_offset();
        SimReplica {
            role: Role::Follower(FollowerPartition::new(
                me,
                broker_epoch,
                NO_LEADER,
                epoch,
                0,
                end,
                0,
                epochs,
            )),
            log,
            min_insync_replicas: 1,
        }
    }

    pub fn epochs(&self) -> &LeaderEpochCache {
        match &self.role {
            Role::Leader(l) => &l.epochs,
            Role::Follower(f) => f.epochs(),
        }
    }

    pub fn high_watermark(&self) -> u64 {
        match &self.role {
            Role::Leader(l) => l.state.high_watermark(),
            Role::Follower(f) => f.high_watermark(),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        match &self.role {
            Role::Leader(l) => l.state.leader_epoch(),
            Role::Follower(f) => f.leader_epoch(),
        }
    }

    pub fn leader(&self) -> Option<&LeaderPart> {
        match &self.role {
            Role::Leader(l) => Some(l),
            Role::Follower(_) => None,
        }
    }

    /// Takes the partition's committed state.
    pub fn learn(
        &mut self,
        me: i32,
        broker_epoch: i64,
        pv: &PartView,
        planted: Option<PlantedBug>,
        now_ms: u64,
    ) -> Learned {
        let mut learned = Learned::default();
        let s = &pv.state;
        if s.leader_epoch < self.leader_epoch() {
            return learned;
        }
        self.min_insync_replicas = pv.min_insync_replicas;
        let hw = self.high_watermark();
        let end = self.log.end_offset();
        match &mut self.role {
            Role::Leader(l) if s.leader == me && s.leader_epoch == l.state.leader_epoch() => {
                l.state.on_partition_change(pv.leadership(), now_ms);
            }
            Role::Follower(f) if s.leader != me => {
                if s.leader_epoch > f.leader_epoch() || s.leader != f.leader_id() {
                    f.on_new_leader(s.leader, s.leader_epoch);
                }
                f.on_broker_epoch(broker_epoch);
            }
            _ if s.leader == me => {
                let mut epochs = self.epochs().clone();
                if let Role::Leader(old) = &mut self.role {
                    learned.released = old.waiters.on_leadership_lost();
                }
                epochs.assign(s.leader_epoch, end);
                // Under durability = fsync the leader exposes only what it has synced; the HW it
                // learned as a follower is on the ISR's disks already.
                let exposable = self.log.synced_offset().max(hw);
                let mut state = ReplicaState::for_new_leader(
                    pv.leadership(),
                    pv.min_insync_replicas,
                    exposable,
                    hw,
                    now_ms,
                );
                state.plant(planted);
                let producers = ProducerStateTable::rebuild(
                    PRODUCERS_MAX,
                    self.log.batches().iter().filter_map(|b| {
                        b.producer.map(|(pid, pepoch, seq)| BatchInfo {
                            producer_id: pid,
                            producer_epoch: pepoch,
                            first_seq: seq,
                            last_seq: seq + b.records as i32 - 1,
                            base_offset: b.base_offset,
                            last_offset: b.last_offset(),
                            is_control: false,
                        })
                    }),
                );
                self.role = Role::Leader(Box::new(LeaderPart {
                    state,
                    epochs,
                    waiters: AckWaiters::default(),
                    producers,
                    alter_sent_ms: None,
                }));
                learned.took_leadership = Some(s.leader_epoch);
            }
            _ => {
                // Deposed: what it wrote as leader must be on disk before it reports anything
                // as a follower (a FollowerPartition starts with its whole log synced).
                let Role::Leader(old) = &mut self.role else {
                    unreachable!("the follower arms above cover followers")
                };
                learned.released = old.waiters.on_leadership_lost();
                self.log.sync();
                let mut f = FollowerPartition::new(
                    me,
                    broker_epoch,
                    s.leader,
                    s.leader_epoch,
                    0,
                    end,
                    hw,
                    old.epochs.clone(),
                );
                f.plant(planted);
                self.role = Role::Follower(f);
            }
        }
        learned.released.extend(self.release(now_ms));
        learned
    }

    /// A leader's exposable log end moved (an fsync completed).
    pub fn on_synced(&mut self) {
        let synced = self.log.synced_offset();
        match &mut self.role {
            Role::Leader(l) => {
                if synced > l.state.leader_log_end() {
                    l.state.on_leader_log_end(synced);
                }
            }
            Role::Follower(f) => f.on_synced(synced.min(f.log_end_offset())),
        }
    }

    /// The acks=all waiters the HW, the ISR's size or the clock now release.
    pub fn release(&mut self, now_ms: u64) -> Vec<Released> {
        let Role::Leader(l) = &mut self.role else {
            return Vec::new();
        };
        let mut released = l.waiters.on_high_watermark(l.state.high_watermark());
        if !l.state.has_min_isr() {
            released.extend(l.waiters.on_below_min_isr());
        }
        released.extend(l.waiters.on_tick(now_ms));
        released
    }
}
