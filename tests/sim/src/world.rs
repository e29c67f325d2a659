//! [`World`]: one seeded run — the nodes, brokers and client, the network, the clock, the
//! faults and the checkers, and the loop that ties them together.
//!
//! Owns: the event loop (pop the earliest event, advance the clock to it, dispatch it, send and
//! schedule what it produced, run every safety check), turning fsync requests into completions
//! (and sometimes into a power loss mid-fsync), applying faults, and stopping them at
//! `faults_end_ms` (heal, calm links, resume and restart everything); for replication, the
//! brokers' replication ticks and partition-log fsyncs, the data clients' ticks (each takes a
//! broker's cached metadata first), and handing each step's replication events, touched
//! replicas, acknowledgements and reads to [`ReplChecks`].
//! Promises: the run is a function of the [`SimConfig`] alone — every draw comes from one
//! [`SimRng`] seeded with `config.seed`, in event order; the clock is the event queue's; every
//! event is traced (and so hashed). The first violation stops the run.
//! Never does: read real time or OS entropy.

use spool_raft::RaftConfig;

use crate::broker::SimBroker;
use crate::check_durable::DurableChecks;
use crate::check_image::ImageChecks;
use crate::check_raft::RaftChecks;
use crate::config::SimConfig;
use crate::events::EventQueue;
use crate::faults::{plan, Fault, FaultProfile};
use crate::liveness;

use crate::check_repl::{ReplChecks, ReplStats};
use crate::clients::{Producer, Reader};
use crate::liveness_repl;
use crate::message::{Endpoint, Envelope, Payload};
use crate::net::{Fate, Network};
use crate::node::{Life, NodeConfig, SimNode};
use crate::out::Out;
use crate::planted::PlantedBug;
use crate::replica_host::{ReplicaHost, REPL_TICK_MS};
use crate::rng::SimRng;
use crate::trace::Trace;
use crate::violation::{Violation, DRIVER_ERROR, PANIC, READS_COMMITTED};

/// The admin client starts nothing new this long before the run ends.
const WORKLOAD_SILENT_BEFORE_END_MS: u64 = 3_000;

enum Event {
    Deliver(Envelope),
    NodeTick(u64),
    SyncDone {
        node: u64,
        token: u64,
    },
    BrokerTick(i32),
    ClientTick,
    ReplTick(i32),
    LogSyncDone {
        broker: i32,
        incarnation: u64,
        token: u64,
    },
    ProducerTick(u32),
    ReaderTick,
    Fault(Fault),
    FaultsEnd,
}

/// What one run found.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub seed: u64,
    pub violation: Option<(u64, Violation)>,
    pub trace_hash: u64,
    pub events: u64,
    /// Simulated time covered (less than `sim_ms` when a violation stopped the run).
    pub sim_ms: u64,
    /// The last trace lines (for a violation report).
    pub tail: Vec<String>,
    pub commits_max: u64,
    pub faults: u64,
    pub repl: ReplStats,
}

pub struct World {
    config: SimConfig,
    rng: SimRng,
    now_ms: u64,
    queue: EventQueue<Event>,
    net: Network,
    nodes: Vec<SimNode>,
    brokers: Vec<SimBroker>,
    client: crate::workload::AdminClient,
    profile: FaultProfile,
    faults_active: bool,
    faults: u64,
    trace: Trace,
    raft_checks: RaftChecks,
    durable_checks: DurableChecks,
    image_checks: ImageChecks,
    hosts: Vec<ReplicaHost>,
    producers: Vec<Producer>,
    reader: Reader,
    repl_checks: ReplChecks,
    /// Whether a broker lost its disk ([`Fault::BrokerWipe`]): only then may a partition end
    /// the run with an empty ISR (its last member's log gone), and so unavailable.
    wiped: bool,
}

impl World {
    pub fn new(config: SimConfig) -> Self {
        let mut rng = SimRng::new(config.seed);
        let voters: Vec<u64> = (1..=config.nodes).collect();
        let nodes = voters
            .iter()
            .map(|&node_id| {
                SimNode::new(NodeConfig {
                    raft: RaftConfig {
                        node_id,
                        initial_voters: voters.clone(),
                        initial_learners: Vec::new(),
                        election_ticks: config.election_ticks,
                        heartbeat_ticks: config.heartbeat_ticks,
                        snapshot_every_entries: config.snapshot_every_entries,
                        seed: config.seed,
                    },
                    tick_interval_ms: config.tick_interval_ms,
                    session_timeout_ms: config.session_timeout_ms,
                    planted: config.planted,
                })
            })
            .collect();
        let brokers = (1..=config.brokers)
            .map(|id| SimBroker::new(id, config.nodes))
            .collect();
        let core_bug = config.planted.and_then(PlantedBug::core);
        let hosts = (1..=config.brokers)
            .map(|id| ReplicaHost::new(id, core_bug))
            .collect();
        let mut profile = FaultProfile::draw(&mut rng);
        if config.broker_faults {
            profile.only_broker_and_network_faults();
        }
        let mut world = World {
            trace: Trace::new(config.verbose),
            client: crate::workload::AdminClient::new(config.nodes),
            rng,
            now_ms: 0,
            queue: EventQueue::default(),
            net: Network::default(),
            nodes,
            brokers,
            profile,
            faults_active: true,
            faults: 0,
            raft_checks: RaftChecks::default(),
            durable_checks: DurableChecks::default(),
            image_checks: ImageChecks::default(),
            hosts,
            producers: vec![Producer::new(1, true), Producer::new(2, false)],
            reader: Reader::new(),
            repl_checks: ReplChecks::default(),
            wiped: false,
            config,
        };
        world.schedule_start();
        world
    }

    fn schedule_start(&mut self) {
        let c = &self.config;
        for id in 1..=c.nodes {
            let offset = self.rng.below(c.tick_interval_ms);
            self.queue.push(offset, Event::NodeTick(id));
        }
        for id in 1..=c.brokers {
            let offset = self.rng.range(0, 500);
            self.queue.push(offset, Event::BrokerTick(id));
        }
        let first_client_ms = self.rng.range(500, 1500);
        self.queue.push(first_client_ms, Event::ClientTick);
        for id in 1..=c.brokers {
            let offset = self.rng.below(REPL_TICK_MS);
            self.queue.push(offset, Event::ReplTick(id));
        }
        for p in 1..=self.producers.len() as u32 {
            let at = self.rng.range(1000, 2000);
            self.queue.push(at, Event::ProducerTick(p));
        }
        let at = self.rng.range(1000, 2000);
        self.queue.push(at, Event::ReaderTick);
        let faults = plan(
            &mut self.rng,
            &self.profile,
            c.nodes,
            c.brokers,
            c.faults_end_ms(),
            c.voter_wipes,
        );
        for (at, f) in faults {
            self.queue.push(at, Event::Fault(f));
        }
        self.queue.push(c.faults_end_ms(), Event::FaultsEnd);
    }

    /// Runs to the end (or the first violation).
    pub fn run(mut self) -> RunReport {
        // spool-core's planted election bug is selected per thread, for this run only.
        let _planted = spool_core::planted::scoped(self.config.planted.and_then(PlantedBug::core));
        let profile = format!("{:?}", self.profile);
        self.trace
            .record(0, &format!("seed {} profile {profile}", self.config.seed));
        let mut out = Out::default();
        for i in 0..self.nodes.len() {
            self.nodes[i].start(0, &mut out);
        }
        for b in &mut self.brokers {
            b.start();
        }
        for h in &mut self.hosts {
            h.start();
        }
        let mut violation = self.absorb(out).err();
        while violation.is_none() {
            let Some((at_ms, event)) = self.queue.pop() else {
                break;
            };
            if at_ms > self.config.sim_ms {
                break;
            }
            self.now_ms = at_ms;
            // A panic inside the code under test (raft-rs asserts its own invariants, e.g. a
            // commit index past a follower's log) is a finding like any violation.
            let dispatched =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.dispatch(event)));
            violation = match dispatched {
                Ok(out) => self.absorb(out).err(),
                Err(payload) => Some(Violation::new(PANIC, panic_text(payload.as_ref()))),
            };
        }
        if violation.is_none() {
            self.now_ms = self.config.sim_ms;
            violation =
                liveness::check(&self.nodes, &self.brokers, self.config.quiet_ms, self.wiped)
                    .and_then(|()| {
                        liveness_repl::check(
                            &self.nodes,
                            &self.hosts,
                            self.repl_checks.acked_all(),
                            self.config.quiet_ms,
                            self.wiped,
                        )
                    })
                    .err();
        }
        if let Some(v) = &violation {
            self.trace.record(self.now_ms, &format!("VIOLATION {v}"));
        }
        let commits_max = self
            .nodes
            .iter()
            .filter_map(|n| n.raft().map(|r| r.applied_index()))
            .max()
            .unwrap_or(0);
        RunReport {
            seed: self.config.seed,
            violation: violation.map(|v| (self.now_ms, v)),
            trace_hash: self.trace.hash(),
            events: self.trace.events(),
            sim_ms: self.now_ms,
            tail: self.trace.tail().map(str::to_owned).collect(),
            commits_max,
            faults: self.faults,
            repl: self.repl_checks.stats,
        }
    }

    fn node(&mut self, id: u64) -> &mut SimNode {
        &mut self.nodes[(id - 1) as usize]
    }

    fn dispatch(&mut self, event: Event) -> Out {
        let now = self.now_ms;
        let mut out = Out::default();
        match event {
            Event::Deliver(env) => {
                if self.net.is_cut(env.from, env.to) {
                    self.trace
                        .record(now, &format!("cut in flight {}", env.describe()));
                    return out;
                }
                self.trace.record(now, &format!("recv {}", env.describe()));
                match env.to {
                    Endpoint::Node(id) => self.node(id).deliver(env, now, &mut out),
                    Endpoint::Broker(id) => self.deliver_to_broker(id, env, &mut out),
                    Endpoint::Client => self.client.on_answer(&env.payload),
                    Endpoint::Producer(id) => {
                        if let Payload::Repl(m) = &env.payload {
                            self.producers[(id - 1) as usize].on_answer(m);
                        }
                    }
                    Endpoint::Reader => {
                        if let Payload::Repl(m) = &env.payload {
                            self.reader.on_answer(m);
                        }
                    }
                }
            }
            Event::NodeTick(id) => {
                self.node(id).tick(now, &mut out);
                self.queue
                    .push(now + self.config.tick_interval_ms, Event::NodeTick(id));
            }
            Event::SyncDone { node, token } => {
                self.trace
                    .record(now, &format!("n{node} fsync {token} done"));
                self.node(node).sync_done(token, now, &mut out);
            }
            Event::BrokerTick(id) => {
                if let Some(env) = self.brokers[(id - 1) as usize].tick(now) {
                    out.sends.push(env);
                }
                let next = now + self.config.broker_heartbeat_interval_ms;
                self.queue.push(next, Event::BrokerTick(id));
            }
            Event::ClientTick => {
                // The workload falls silent for the last seconds, so the liveness check at the
                // end does not catch a commit in flight.
                let silent = now + WORKLOAD_SILENT_BEFORE_END_MS >= self.config.sim_ms;
                if silent {
                    return out;
                }
                if let Some(env) = self.client.tick(&mut self.rng, now) {
                    out.sends.push(env);
                }
                let next = now + self.rng.range(200, 1000);
                self.queue.push(next, Event::ClientTick);
            }
            Event::ReplTick(id) => {
                let i = (id - 1) as usize;
                let controller = self.brokers[i].controller_guess();
                self.hosts[i].tick(now, controller, &mut out);
                self.queue.push(now + REPL_TICK_MS, Event::ReplTick(id));
            }
            Event::LogSyncDone {
                broker,
                incarnation,
                token,
            } => {
                self.hosts[(broker - 1) as usize].sync_done(incarnation, token, now, &mut out);
            }
            Event::ProducerTick(id) => {
                if now + WORKLOAD_SILENT_BEFORE_END_MS >= self.config.sim_ms {
                    return out;
                }
                self.refresh_client_metadata(Endpoint::Producer(id));
                if let Some(env) = self.producers[(id - 1) as usize].tick(&mut self.rng, now) {
                    out.sends.push(env);
                }
                let next = now + self.rng.range(20, 120);
                self.queue.push(next, Event::ProducerTick(id));
            }
            Event::ReaderTick => {
                self.refresh_client_metadata(Endpoint::Reader);
                if let Some(env) = self.reader.tick(&mut self.rng) {
                    out.sends.push(env);
                }
                let next = now + self.rng.range(20, 120);
                self.queue.push(next, Event::ReaderTick);
            }
            Event::Fault(f) => self.inject(f, &mut out),
            Event::FaultsEnd => {
                self.trace
                    .record(now, "faults end: heal, calm, resume and restart everything");
                self.faults_active = false;
                self.net.heal();
                self.net.calm();
                for i in 0..self.nodes.len() {
                    match self.nodes[i].life() {
                        Life::Paused => self.nodes[i].resume(now, &mut out),
                        Life::Down => self.nodes[i].start(now, &mut out),
                        Life::Up => {}
                    }
                }
                for (b, h) in self.brokers.iter_mut().zip(&mut self.hosts) {
                    if !b.is_up() {
                        b.start();
                        h.start();
                        h.touch_all(&mut out);
                    }
                }
            }
        }
        out
    }

    /// A message for a broker: replication traffic to its [`ReplicaHost`], controller answers
    /// to its [`SimBroker`] (a heartbeat answer's metadata then goes to the host).
    fn deliver_to_broker(&mut self, id: i32, env: Envelope, out: &mut Out) {
        let i = (id - 1) as usize;
        if let Payload::Repl(m) = env.payload {
            if self.brokers[i].is_up() {
                self.hosts[i].handle(env.from, *m, self.now_ms, out);
            }
            return;
        }
        self.brokers[i].on_answer(&env.payload);
        if let Payload::HeartbeatAnswer {
            metadata: Some(view),
            broker_epoch,
            ..
        } = &env.payload
        {
            if self.brokers[i].is_up() && self.brokers[i].epoch() == Some(*broker_epoch) {
                self.hosts[i].on_metadata(view, Some(*broker_epoch), self.now_ms, out);
            }
        }
    }

    /// A client asks a broker (drawn from the up ones) for metadata: it gets that broker's view.
    fn refresh_client_metadata(&mut self, client: Endpoint) {
        let up: Vec<usize> = (0..self.hosts.len())
            .filter(|i| {
                self.hosts[*i].is_up() && !self.net.is_cut(client, Endpoint::Broker(*i as i32 + 1))
            })
            .collect();
        if up.is_empty() {
            return;
        }
        let view = std::sync::Arc::clone(self.hosts[*self.rng.pick(&up)].view());
        match client {
            Endpoint::Producer(id) => self.producers[(id - 1) as usize].on_metadata(&view),
            _ => self.reader.on_metadata(&view),
        }
    }

    fn inject(&mut self, fault: Fault, out: &mut Out) {
        let now = self.now_ms;
        self.trace
            .record(now, &format!("fault {}", fault.describe()));
        self.faults += 1;
        match fault {
            Fault::Crash {
                node,
                lose_unsynced,
            } => {
                let n = &mut self.nodes[(node - 1) as usize];
                n.crash(lose_unsynced, &mut self.rng, out);
            }
            Fault::Wipe { node } => {
                let n = &mut self.nodes[(node - 1) as usize];
                n.wipe(&mut self.rng, out);
                self.durable_checks.on_wiped(node);
            }
            Fault::Restart { node } => {
                if self.node(node).life() == Life::Down {
                    self.node(node).start(now, out);
                }
            }
            Fault::Pause { node } => self.node(node).pause(out),
            Fault::Resume { node } => self.node(node).resume(now, out),
            Fault::Isolate { node } => {
                let me = Endpoint::Node(node);
                let others: Vec<Endpoint> = (1..=self.config.nodes)
                    .filter(|&n| n != node)
                    .map(Endpoint::Node)
                    .chain((1..=self.config.brokers).map(Endpoint::Broker))
                    .chain([Endpoint::Client])
                    .collect();
                for o in others {
                    self.net.cut_both_ways(me, o);
                }
            }
            Fault::CutOneWay { from, to } => self.net.cut_one_way(from, to),
            Fault::Heal => self.net.heal(),
            Fault::NetChaos(f) => self.net.set_faults(f),
            Fault::NetCalm => self.net.calm(),
            Fault::BrokerCrash {
                broker,
                lose_unsynced,
            } => {
                let i = (broker - 1) as usize;
                self.brokers[i].crash();
                self.hosts[i].crash(lose_unsynced, &mut self.rng);
                self.hosts[i].touch_all(out);
            }
            Fault::BrokerWipe { broker } => {
                self.wiped = true;
                let i = (broker - 1) as usize;
                self.brokers[i].wipe();
                self.hosts[i].wipe();
                self.hosts[i].touch_all(out);
            }
            Fault::BrokerRestart { broker } => {
                let i = (broker - 1) as usize;
                if !self.brokers[i].is_up() {
                    self.brokers[i].start();
                    self.hosts[i].start();
                    self.hosts[i].touch_all(out);
                }
            }
            Fault::IsolateBroker { broker } => {
                let me = Endpoint::Broker(broker);
                let others: Vec<Endpoint> = (1..=self.config.nodes)
                    .map(Endpoint::Node)
                    .chain(
                        (1..=self.config.brokers)
                            .filter(|b| *b != broker)
                            .map(Endpoint::Broker),
                    )
                    .collect();
                // The clients still reach it (REPLICATION.md's case: a leader cut off from the
                // cluster keeps taking acks=1 writes, which its successor's log lacks).
                for o in others {
                    self.net.cut_both_ways(me, o);
                }
            }
        }
    }

    fn send(&mut self, env: Envelope) {
        let now = self.now_ms;
        match self.net.send(&mut self.rng, now, &env) {
            Fate::Cut => self.trace.record(now, &format!("cut {}", env.describe())),
            Fate::Lost => self.trace.record(now, &format!("lost {}", env.describe())),
            Fate::Deliver(times) => {
                if times.len() > 1 {
                    self.trace.record(now, &format!("dup {}", env.describe()));
                }
                for at in times {
                    self.queue.push(at, Event::Deliver(env.clone()));
                }
            }
        }
    }

    /// Traces, sends and schedules what a step produced, then runs the safety checks.
    fn absorb(&mut self, out: Out) -> Result<(), Violation> {
        let now = self.now_ms;
        for note in &out.notes {
            self.trace.record(now, note);
        }
        if let Some(e) = out.errors.first() {
            return Err(Violation::new(DRIVER_ERROR, e.clone()));
        }
        // Restarts first: what a node sends after restarting is not what it promised before.
        for id in &out.started {
            if let Some(r) = self.nodes[(id - 1) as usize].raft() {
                self.raft_checks.on_start(*id, r);
                self.durable_checks.on_start(*id, r)?;
            }
        }
        for env in out.sends {
            if let (Endpoint::Node(from), Payload::Raft(m)) = (env.from, &env.payload) {
                self.durable_checks.on_sent(from, m);
            }
            self.send(env);
        }
        for s in out.syncs {
            let latency_ms = self
                .rng
                .range(self.config.fsync_ms_min, self.config.fsync_ms_max);
            self.queue.push(
                now + latency_ms,
                Event::SyncDone {
                    node: s.node,
                    token: s.token,
                },
            );
            if self.faults_active && self.rng.chance(self.profile.fsync_crash_chance) {
                let crash_at = (now + self.rng.below(latency_ms)).min(self.config.faults_end_ms());
                let back_at = crash_at + self.rng.range(10, 2000);
                self.queue.push(
                    crash_at,
                    Event::Fault(Fault::Crash {
                        node: s.node,
                        lose_unsynced: true,
                    }),
                );
                self.queue
                    .push(back_at, Event::Fault(Fault::Restart { node: s.node }));
            }
        }
        for (broker, incarnation, token) in out.log_syncs {
            let latency_ms = self
                .rng
                .range(self.config.fsync_ms_min, self.config.fsync_ms_max);
            self.queue.push(
                now + latency_ms,
                Event::LogSyncDone {
                    broker,
                    incarnation,
                    token,
                },
            );
        }
        for o in &out.observed {
            self.raft_checks.observe(o)?;
        }
        for n in &self.nodes {
            if let Some(r) = n.raft() {
                self.raft_checks.check_node(n.id(), r)?;
                self.image_checks.check_node(n.id(), n.starts(), r)?;
            }
        }
        let acks: Vec<_> = self
            .producers
            .iter_mut()
            .flat_map(|p| p.acked.drain(..))
            .collect();
        if let Some(m) = self.reader.misreads.first() {
            return Err(Violation::new(READS_COMMITTED, m.clone()));
        }
        self.repl_checks.check(
            &self.hosts,
            &out.repl_touched,
            &out.repl,
            &acks,
            &self.reader.seen,
        )?;
        self.reader.seen.clear();
        Ok(())
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
