//! [`SimNode`]: one simulated controller node — a real [`MetadataRaft`] on a [`SimDisk`], driven
//! in the order `spool_raft::Controller` drives it, plus its [`ControllerService`].
//!
//! Owns: the node's life (up, paused, down), its inbox (messages that arrive while it is paused
//! or blocked on an fsync wait), the raft driver loop and the planted driver bugs.
//! Promises (without a planted bug): for every `RaftReady` the node sends `ready.messages` at
//! once, writes the snapshot, entries and hard state, and *waits for the fsync* (a
//! [`SyncRequest`] whose completion the world schedules) before it calls `advance` and sends
//! what advancing produced — raft's persist-then-acknowledge rule. While it waits it neither
//! steps, ticks nor answers (the real controller's I/O is blocking on core 0); a tick that
//! fired meanwhile (and a tick's fencing held up by its own fsync) runs when the fsync completes,
//! so a node that is always persisting still ticks and fences; missed ticks are caught up
//! afterwards with `Controller::tick`'s rule (one per elapsed interval, at most four
//! election timeouts' worth). What `advance` asks to write (commit index, conf state, a taken
//! snapshot) is written at once and made durable by the next fsync, which raft allows. On
//! restart the node recovers its disk (bumping the incarnation) and builds a fresh
//! `MetadataRaft`, as `Controller::open_with` does.
//! Never does: read a clock or entropy (time is `now_ms`; the world draws fsync latencies and
//! crash losses), or deliver its own messages (they go out in [`Out::sends`]).

use std::collections::VecDeque;

use raft::eraftpb::Message;
use spool_raft::{MetadataRaft, RaftConfig, RaftReady};

use crate::controller::ControllerService;
use crate::describe;
use crate::disk::{DiskWrite, SimDisk};
use crate::message::{Endpoint, Envelope, Payload};
use crate::out::{Observed, Out, SyncRequest};
use crate::planted::PlantedBug;
use crate::rng::SimRng;
use crate::trace::{fnv1a, hash_bytes};

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub raft: RaftConfig,
    pub tick_interval_ms: u64,
    pub session_timeout_ms: u64,
    pub planted: Option<PlantedBug>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    Up,
    Paused,
    Down,
}

struct Running {
    raft: MetadataRaft,
    service: ControllerService,
    inbox: VecDeque<Envelope>,
    /// The ready whose fsync the node is waiting for, and that fsync's token.
    persisting: Option<(u64, RaftReady)>,
    last_tick_ms: u64,
    /// `(is_leader, term, leader_id)` as last traced.
    last_role: (bool, u64, u64),
    /// A tick that came while an fsync was in flight, or a tick's session fencing that waits for
    /// the fsync the tick's reconcile started: the real controller's fsync blocks, and its tick
    /// and fencing run after it. Without these a node that is always persisting (a busy
    /// leader) would never tick or fence.
    tick_due: bool,
    fence_due: bool,
}

pub struct SimNode {
    id: u64,
    config: NodeConfig,
    disk: SimDisk,
    life: Life,
    run: Option<Running>,
    next_token: u64,
    /// Tokens below this belong to an earlier incarnation and are ignored.
    token_floor: u64,
    /// Bumped on every start: lets the checker notice a restart.
    starts: u64,
}

impl SimNode {
    pub fn new(config: NodeConfig) -> Self {
        SimNode {
            id: config.raft.node_id,
            config,
            disk: SimDisk::default(),
            life: Life::Down,
            run: None,
            next_token: 0,
            token_floor: 0,
            starts: 0,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn life(&self) -> Life {
        self.life
    }

    pub fn starts(&self) -> u64 {
        self.starts
    }

    /// The raft core while the node is up (or paused).
    pub fn raft(&self) -> Option<&MetadataRaft> {
        self.run.as_ref().map(|r| &r.raft)
    }

    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }

    fn me(&self) -> Endpoint {
        Endpoint::Node(self.id)
    }

    /// Starts (or restarts) the node from its durable disk.
    pub fn start(&mut self, now_ms: u64, out: &mut Out) {
        assert!(self.run.is_none(), "n{} started twice", self.id);
        let recovered = match self.disk.recover() {
            Ok(r) => r,
            Err(e) => {
                out.errors
                    .push(format!("n{} cannot open its disk: {e}", self.id));
                return;
            }
        };
        let incarnation = recovered.incarnation;
        let (entries, commit) = (recovered.entries.len(), recovered.hard_state.commit);
        let raft = match MetadataRaft::new(&self.config.raft, recovered) {
            Ok(r) => r,
            Err(e) => {
                out.errors
                    .push(format!("n{} MetadataRaft::new: {e}", self.id));
                return;
            }
        };
        // Controller::open_with persists the initial voters of a fresh group at once.
        if self.disk.durable_conf_state() != raft.log().conf_state() {
            self.disk
                .write(DiskWrite::ConfState(raft.log().conf_state().clone()));
            self.disk.sync();
        }
        out.note(format!(
            "n{} starts: incarnation={incarnation} entries={entries} commit={commit} applied={}",
            self.id,
            raft.applied_index()
        ));
        let service = ControllerService::new(
            self.id,
            self.config.raft.seed,
            incarnation,
            self.config.session_timeout_ms,
        );
        self.run = Some(Running {
            last_role: (raft.is_leader(), raft.term(), raft.leader_id()),
            tick_due: false,
            fence_due: false,
            raft,
            service,
            inbox: VecDeque::new(),
            persisting: None,
            last_tick_ms: now_ms,
        });
        self.life = Life::Up;
        self.starts += 1;
        out.started.push(self.id);
        self.drive(now_ms, out);
    }

    /// The node dies; `lose_unsynced`: a power loss (see [`SimDisk::crash`]).
    pub fn crash(&mut self, lose_unsynced: bool, rng: &mut SimRng, out: &mut Out) {
        if self.life == Life::Down {
            return;
        }
        self.run = None;
        self.life = Life::Down;
        self.token_floor = self.next_token;
        let loss = self.disk.crash(lose_unsynced, rng);
        out.note(format!(
            "n{} crashes ({}): unsynced writes={} kept={} torn={:?}",
            self.id,
            if lose_unsynced {
                "power loss"
            } else {
                "process"
            },
            loss.unsynced_writes,
            loss.kept_writes,
            loss.torn_kept_entries
        ));
    }

    /// The node dies and its disk is replaced: it comes back (at its restart) with an empty
    /// log, which `spool_raft::lost_log` must make it catch up before it votes.
    pub fn wipe(&mut self, rng: &mut SimRng, out: &mut Out) {
        self.crash(true, rng, out);
        self.disk.wipe();
        out.note(format!("n{} loses its disk", self.id));
    }

    pub fn pause(&mut self, out: &mut Out) {
        if self.life == Life::Up {
            self.life = Life::Paused;
            out.note(format!("n{} paused", self.id));
        }
    }

    pub fn resume(&mut self, now_ms: u64, out: &mut Out) {
        if self.life == Life::Paused {
            self.life = Life::Up;
            out.note(format!("n{} resumed", self.id));
            self.pump(now_ms, out);
        }
    }

    /// A message arrives. Dropped when the node is down; queued while it is paused or waiting.
    pub fn deliver(&mut self, envelope: Envelope, now_ms: u64, out: &mut Out) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        run.inbox.push_back(envelope);
        self.pump(now_ms, out);
    }

    /// The tick timer fired (every `tick_interval_ms`).
    pub fn tick(&mut self, now_ms: u64, out: &mut Out) {
        if self.life != Life::Up {
            return;
        }
        let Some(run) = self.run.as_mut() else {
            return;
        };
        if run.persisting.is_some() {
            run.tick_due = true;
            return;
        }
        let interval = self.config.tick_interval_ms;
        let ticks = now_ms.saturating_sub(run.last_tick_ms) / interval;
        let ticks_max = 4 * self.config.raft.election_ticks.max(1) as u64;
        for _ in 0..ticks.min(ticks_max) {
            run.raft.tick();
        }
        run.last_tick_ms += ticks * interval;
        // `Controller::tick`: reconcile on the active leader, then poll; then the broker's
        // ticker fences expired sessions and polls again.
        run.service.reconcile(&mut run.raft, out);
        self.drive(now_ms, out);
        if let Some(run) = self.run.as_mut() {
            if run.persisting.is_none() {
                run.service.fence_expired(&mut run.raft, now_ms, out);
            } else {
                run.fence_due = true;
            }
        }
        self.drive(now_ms, out);
        self.pump(now_ms, out);
    }

    /// An fsync this node asked for completed.
    pub fn sync_done(&mut self, token: u64, now_ms: u64, out: &mut Out) {
        if token < self.token_floor || self.run.is_none() {
            return;
        }
        self.disk.sync();
        let Some(run) = self.run.as_mut() else {
            return;
        };
        if run.persisting.as_ref().is_some_and(|(t, _)| *t == token) {
            if let Some((_, ready)) = run.persisting.take() {
                finish(self.id, run, &mut self.disk, ready, now_ms, out);
            }
            // What the blocking fsync held up runs now, in the real controller's order: the
            // fencing of the tick that started it, then a tick whose timer fired meanwhile.
            if std::mem::take(&mut run.fence_due) {
                run.service.fence_expired(&mut run.raft, now_ms, out);
            }
            if std::mem::take(&mut run.tick_due) {
                self.tick(now_ms, out);
                return;
            }
            self.drive(now_ms, out);
            self.pump(now_ms, out);
        }
    }

    /// Handles queued messages while the node is up and not waiting for an fsync.
    fn pump(&mut self, now_ms: u64, out: &mut Out) {
        loop {
            if self.life != Life::Up {
                return;
            }
            let Some(run) = self.run.as_mut() else {
                return;
            };
            if run.persisting.is_some() {
                return;
            }
            let Some(envelope) = run.inbox.pop_front() else {
                return;
            };
            match envelope.payload {
                Payload::Raft(m) => {
                    if let Err(e) = run.raft.step(*m) {
                        out.note(format!("n{} step: {e}", self.id));
                    }
                }
                _ => run.service.handle(&mut run.raft, envelope, now_ms, out),
            }
            self.drive(now_ms, out);
        }
    }

    /// ready → send → write → (fsync) → advance, until raft has nothing ready or the node waits.
    fn drive(&mut self, now_ms: u64, out: &mut Out) {
        let me = self.me();
        let Some(run) = self.run.as_mut() else {
            return;
        };
        while run.persisting.is_none() {
            let Some(mut ready) = run.raft.ready() else {
                break;
            };
            send_raft(me, std::mem::take(&mut ready.messages), out);
            write_ready(self.id, &mut self.disk, &ready, out);
            let token = self.next_token;
            self.next_token += 1;
            // The replication bugs are planted in spool-core, not in this driver.
            match self.config.planted.filter(|b| b.core().is_none()) {
                None => {
                    out.syncs.push(SyncRequest {
                        node: self.id,
                        token,
                    });
                    run.persisting = Some((token, ready));
                }
                Some(PlantedBug::AckBeforePersist) => {
                    // The fsync is still issued, but the acknowledgements go out first.
                    out.syncs.push(SyncRequest {
                        node: self.id,
                        token,
                    });
                    finish(self.id, run, &mut self.disk, ready, now_ms, out);
                }
                Some(PlantedBug::SkipFsync) => {
                    finish(self.id, run, &mut self.disk, ready, now_ms, out);
                }
                Some(other) => unreachable!("{other} is not a driver bug"),
            }
        }
        // As `Controller::poll`: the catch-up obligation ends once raft says so.
        if self.disk.is_catching_up() && !run.raft.is_catching_up() {
            self.disk.caught_up();
            out.note(format!("n{} has caught up", self.id));
        }
        let role = (run.raft.is_leader(), run.raft.term(), run.raft.leader_id());
        if role != run.last_role {
            run.last_role = role;
            out.note(format!(
                "n{} term={} leader={}{}",
                self.id,
                role.1,
                role.2,
                if role.0 { " (me)" } else { "" }
            ));
        }
    }
}

fn send_raft(me: Endpoint, messages: Vec<Message>, out: &mut Out) {
    for m in messages {
        let to = Endpoint::Node(m.to);
        out.sends
            .push(Envelope::new(me, to, Payload::Raft(Box::new(m))));
    }
}

/// What `RaftDisk::persist_ready` writes, in its order.
fn write_ready(node: u64, disk: &mut SimDisk, ready: &RaftReady, out: &mut Out) {
    if let Some(snap) = ready.snapshot() {
        out.observed.push(Observed::SnapshotInstalled {
            node,
            index: snap.get_metadata().index,
        });
        out.note(format!(
            "n{node} installs a snapshot at {}",
            snap.get_metadata().index
        ));
        disk.write(DiskWrite::InstallSnapshot(snap.clone()));
    }
    let entries = ready.entries();
    if !entries.is_empty() {
        for e in entries {
            out.observed.push(Observed::Appended {
                node,
                index: e.index,
                term: e.term,
                content_hash: entry_hash(e),
            });
        }
        disk.write(DiskWrite::Append(entries.to_vec()));
    }
    if let Some(hs) = ready.hard_state() {
        disk.write(DiskWrite::HardState(hs.clone()));
    }
}

/// FNV-1a over an entry's type, context and data (what log matching compares).
pub fn entry_hash(e: &raft::eraftpb::Entry) -> u64 {
    let h = hash_bytes(&(e.get_entry_type() as i32).to_le_bytes());
    let h = fnv1a(h, &(e.context.len() as u64).to_le_bytes());
    let h = fnv1a(h, &e.context);
    fnv1a(h, &e.data)
}

/// `advance`, then write what it produced (durable at the next fsync), send its messages and
/// answer the requests it settled.
fn finish(
    node: u64,
    run: &mut Running,
    disk: &mut SimDisk,
    ready: RaftReady,
    now_ms: u64,
    out: &mut Out,
) {
    let advanced = match run.raft.advance(ready) {
        Ok(a) => a,
        Err(e) => {
            out.errors.push(format!("n{node} advance: {e}"));
            return;
        }
    };
    if let Some(hs) = &advanced.hard_state {
        disk.write(DiskWrite::HardState(hs.clone()));
    }
    if let Some(cs) = &advanced.conf_state {
        disk.write(DiskWrite::ConfState(cs.clone()));
    }
    if let Some(snap) = &advanced.snapshot_taken {
        disk.write(DiskWrite::SnapshotTaken(snap.clone()));
    }
    send_raft(Endpoint::Node(node), advanced.messages, out);
    for c in &advanced.committed {
        out.note(format!(
            "n{node} applies {}@{}: {} -> {:?}",
            c.index,
            c.term,
            describe::record(&c.record),
            c.outcome
        ));
    }
    run.service.settle(
        &run.raft,
        &advanced.committed,
        &advanced.abandoned,
        now_ms,
        out,
    );
}
