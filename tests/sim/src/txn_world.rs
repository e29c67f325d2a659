//! [`TxnWorld`]: one seeded run of the transaction world (issue 18) — spool-core's transaction
//! coordinator ([`crate::txn_coord`]), a few data partitions with their producer-state tables
//! and transaction state ([`crate::txn_partition`]), transactional producers
//! ([`crate::txn_client`]) and a read_committed reader ([`crate::txn_reader`]) over simulated
//! links ([`crate::txn_net`]), with coordinator crashes (losing unsynced records, coming back
//! with a newer coordinator epoch), failed `__transaction_state` writes, partition leader
//! crashes (rebuilding from the log) and client crashes, and the four invariants of [`crate::check_txn`] checked after every event.
//! A marker a deposed coordinator sent before its crash travels on that coordinator's own
//! connection, which nothing orders with its successor's: on arrival after the failover it is
//! held back (sometimes, up to 3 s) so it may land after the new coordinator's markers and the
//! next transaction's data — what the partitions' coordinator-epoch fence is for.
//!
//! Owns: [`TxnConfig`], the event loop (pop the earliest event, advance the clock, dispatch,
//! send and schedule what it produced, check), the fault schedule (drawn at the start), and
//! [`TxnRunReport`].
//! Promises: the run is a function of the [`TxnConfig`] alone — one [`SimRng`] seeded with
//! `config.seed`, the [`EventQueue`]'s clock, every event traced and hashed ([`Trace`]); the
//! first violation (or a panic in the code under test) stops the run. A planted spool-core bug is
//! selected for this thread for the run (`spool_core::planted::scoped`).
//! Never does: read real time or OS entropy; check liveness (a run that stalls is reported only
//! through its [`TxnStats`]).

use crate::check_txn::{TxnChecks, TxnStats};
use crate::events::EventQueue;
use crate::planted::PlantedBug;
use crate::rng::SimRng;
use crate::trace::Trace;
use crate::txn_client::TxnClient;
use crate::txn_coord::{CoordHost, CoordOut};
use crate::txn_net::{TxnEndpoint, TxnEnvelope, TxnLinkFaults, TxnMsg, TxnNet};
use crate::txn_partition::TxnPartition;
use crate::txn_reader::TxnReader;
use crate::violation::{Violation, PANIC};
use spool_protocol::ErrorCode;

const CLIENT_TICK_MS: u64 = 50;
const COORD_TICK_MS: u64 = 100;
const READER_TICK_MS: u64 = 40;
/// Transactional ids; client `i` uses id `i % TRANSACTIONAL_IDS`, so the clients past the first
/// [`TRANSACTIONAL_IDS`] share an id with an earlier one and fence it.
const TRANSACTIONAL_IDS: u32 = 3;

/// Everything one run of the transaction world needs besides its seed's draws.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnConfig {
    pub seed: u64,
    pub sim_ms: u64,
    /// Data partitions.
    pub partitions: i32,
    /// Transactional producers (more than [`TRANSACTIONAL_IDS`]: some ids have two).
    pub clients: u32,
    pub planted: Option<PlantedBug>,
    pub verbose: bool,
}

impl TxnConfig {
    pub fn new(seed: u64) -> Self {
        TxnConfig {
            seed,
            sim_ms: 20_000,
            partitions: 4,
            clients: 4,
            planted: None,
            verbose: false,
        }
    }
}

/// What one run found.
#[derive(Debug, Clone)]
pub struct TxnRunReport {
    pub seed: u64,
    pub violation: Option<(u64, Violation)>,
    pub trace_hash: u64,
    pub events: u64,
    pub sim_ms: u64,
    pub tail: Vec<String>,
    pub faults: u64,
    pub stats: TxnStats,
}

/// Probability a deposed coordinator's marker still in flight is held back (module docs).
const DEPOSED_MARKER_HELD: f64 = 0.5;
const DEPOSED_MARKER_HELD_MS_MAX: u64 = 3_000;
/// Probability the coordinator crashes just after sending a transaction's markers (while it
/// has crashes of that kind left), so markers are in flight from a deposed coordinator.
const CRASH_AFTER_MARKERS: f64 = 0.05;

enum Event {
    /// A message arriving; `held` once it was held back already.
    Deliver {
        env: TxnEnvelope,
        held: bool,
    },
    ClientTick(u32),
    CoordTick,
    CoordSynced {
        incarnation: u64,
        upto: usize,
    },
    ReaderTick,
    CoordCrash {
        down_ms: u64,
    },
    CoordRestart,
    PartitionCrash {
        partition: i32,
        down_ms: u64,
    },
    PartitionRestart(i32),
}

pub struct TxnWorld {
    config: TxnConfig,
    rng: SimRng,
    now_ms: u64,
    queue: EventQueue<Event>,
    net: TxnNet,
    coord: CoordHost,
    partitions: Vec<TxnPartition>,
    clients: Vec<TxnClient>,
    reader: TxnReader,
    next_read: i32,
    checks: TxnChecks,
    trace: Trace,
    faults: u64,
    /// Crashes just after markers are sent, left to this run.
    crashes_after_markers: u64,
    /// Probability a coordinator step's `__transaction_state` appends fail.
    write_failure: f64,
}

impl TxnWorld {
    pub fn new(config: TxnConfig) -> Self {
        let mut rng = SimRng::new(config.seed);
        let net = TxnNet::new(TxnLinkFaults::draw(&mut rng));
        let clients = (0..config.clients)
            .map(|i| {
                let start_ms = if i < TRANSACTIONAL_IDS {
                    rng.range(0, 200)
                } else {
                    rng.range(1_000, config.sim_ms / 2)
                };
                let id = format!("txn-{}", i % TRANSACTIONAL_IDS);
                TxnClient::new(i, &id, start_ms, config.partitions)
            })
            .collect();
        let mut world = TxnWorld {
            partitions: (0..config.partitions).map(TxnPartition::new).collect(),
            trace: Trace::new(config.verbose),
            rng,
            now_ms: 0,
            queue: EventQueue::default(),
            net,
            coord: CoordHost::new(),
            clients,
            reader: TxnReader::default(),
            next_read: 0,
            checks: TxnChecks::default(),
            faults: 0,
            crashes_after_markers: 0,
            write_failure: 0.0,
            config,
        };
        world.schedule_start();
        world
    }

    fn schedule_start(&mut self) {
        let end = self.config.sim_ms;
        for i in 0..self.config.clients {
            self.queue.push(0, Event::ClientTick(i));
        }
        self.queue.push(COORD_TICK_MS, Event::CoordTick);
        self.queue.push(READER_TICK_MS, Event::ReaderTick);
        let late = end.saturating_sub(2_000).max(1_000);
        self.crashes_after_markers = self.rng.below(3);
        self.write_failure = *self.rng.pick(&[0.0, 0.0, 0.02, 0.1]);
        for _ in 0..self.rng.below(4) {
            let at = self.rng.range(500, late);
            let down_ms = self.rng.range(50, 2_500);
            self.queue.push(at, Event::CoordCrash { down_ms });
        }
        for _ in 0..self.rng.below(6) {
            let at = self.rng.range(500, late);
            let partition = self.rng.below(self.config.partitions as u64) as i32;
            let down_ms = self.rng.range(20, 1_500);
            self.queue
                .push(at, Event::PartitionCrash { partition, down_ms });
        }
    }

    /// Runs to the end (or the first violation).
    pub fn run(mut self) -> TxnRunReport {
        let _planted = spool_core::planted::scoped(self.config.planted.and_then(PlantedBug::core));
        self.trace.record(
            0,
            &format!(
                "seed {} txn world, links {:?}",
                self.config.seed, self.net.faults
            ),
        );
        let mut violation = None;
        while violation.is_none() {
            let Some((at_ms, event)) = self.queue.pop() else {
                break;
            };
            if at_ms > self.config.sim_ms {
                break;
            }
            self.now_ms = at_ms;
            let dispatched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.dispatch(event).and_then(|()| self.check_lsos())
            }));
            violation = match dispatched {
                Ok(r) => r.err(),
                Err(payload) => Some(Violation::new(PANIC, panic_text(payload.as_ref()))),
            };
        }
        if let Some(v) = &violation {
            self.trace.record(self.now_ms, &format!("VIOLATION {v}"));
        }
        TxnRunReport {
            seed: self.config.seed,
            violation: violation.map(|v| (self.now_ms, v)),
            trace_hash: self.trace.hash(),
            events: self.trace.events(),
            sim_ms: self.now_ms,
            tail: self.trace.tail().map(str::to_owned).collect(),
            faults: self.faults,
            stats: self.checks.stats,
        }
    }

    fn dispatch(&mut self, event: Event) -> Result<(), Violation> {
        let now = self.now_ms;
        match event {
            Event::Deliver { env, held } => {
                if !held && self.deposed_marker(&env) && self.rng.chance(DEPOSED_MARKER_HELD) {
                    let at = now + self.rng.range(1, DEPOSED_MARKER_HELD_MS_MAX);
                    self.trace
                        .record(now, &format!("held back (deposed) {}", env.describe()));
                    self.queue.push(at, Event::Deliver { env, held: true });
                    return Ok(());
                }
                return self.deliver(env);
            }
            Event::ClientTick(i) => {
                let mut sends = Vec::new();
                let note = self.clients[i as usize].on_tick(now, &mut self.rng, &mut sends);
                if let Some(n) = note {
                    self.trace.record(now, &n);
                }
                self.send_all(sends);
                self.queue.push(now + CLIENT_TICK_MS, Event::ClientTick(i));
            }
            Event::CoordTick => {
                if self.coord.up {
                    let mut out = CoordOut::default();
                    self.draw_write_failures();
                    self.coord.on_tick(now, &mut out);
                    self.absorb(out)?;
                }
                self.queue.push(now + COORD_TICK_MS, Event::CoordTick);
            }
            Event::CoordSynced { incarnation, upto } => {
                self.trace
                    .record(now, &format!("coordinator fsync to {upto} done"));
                let mut out = CoordOut::default();
                self.draw_write_failures();
                self.coord.on_synced(incarnation, upto, now, &mut out);
                self.absorb(out)?;
            }
            Event::ReaderTick => {
                self.read()?;
                self.queue.push(now + READER_TICK_MS, Event::ReaderTick);
            }
            Event::CoordCrash { down_ms } => {
                if self.coord.up {
                    self.faults += 1;
                    self.trace
                        .record(now, &format!("coordinator crashes for {down_ms} ms"));
                    self.coord.crash();
                    self.queue.push(now + down_ms, Event::CoordRestart);
                }
            }
            Event::CoordRestart => {
                if !self.coord.up {
                    let mut out = CoordOut::default();
                    self.draw_write_failures();
                    self.coord.restart(now, &mut out);
                    self.absorb(out)?;
                }
            }
            Event::PartitionCrash { partition, down_ms } => {
                let p = &mut self.partitions[partition as usize];
                if p.up {
                    self.faults += 1;
                    self.trace.record(
                        now,
                        &format!("p{partition} leader crashes for {down_ms} ms"),
                    );
                    p.crash();
                    self.queue
                        .push(now + down_ms, Event::PartitionRestart(partition));
                }
            }
            Event::PartitionRestart(partition) => {
                let p = &mut self.partitions[partition as usize];
                if !p.up {
                    p.restart();
                    let lso = p.last_stable_offset();
                    self.trace.record(
                        now,
                        &format!("p{partition} leader back, rebuilt from its log: LSO {lso}"),
                    );
                }
            }
        }
        Ok(())
    }

    /// Draws whether the coordinator's appends fail in the step about to run.
    fn draw_write_failures(&mut self) {
        let fail = self.write_failure > 0.0 && self.rng.chance(self.write_failure);
        self.coord.writes_fail = fail;
    }

    /// A marker from a coordinator that crashed since (down, or older than the current one).
    fn deposed_marker(&self, env: &TxnEnvelope) -> bool {
        matches!(env.msg, TxnMsg::WriteMarker { coordinator_epoch, .. }
            if !self.coord.up || coordinator_epoch < self.coord.coordinator_epoch)
    }

    fn deliver(&mut self, env: TxnEnvelope) -> Result<(), Violation> {
        let now = self.now_ms;
        let up = match env.to {
            TxnEndpoint::Coordinator => self.coord.up,
            TxnEndpoint::Partition(p) => self.partitions[p as usize].up,
            TxnEndpoint::Client(c) => self.clients[c as usize].is_up(),
        };
        if !up {
            self.trace
                .record(now, &format!("dropped (down) {}", env.describe()));
            return Ok(());
        }
        self.trace.record(now, &format!("recv {}", env.describe()));
        match env.to {
            TxnEndpoint::Coordinator => {
                let mut out = CoordOut::default();
                self.draw_write_failures();
                if matches!(env.msg, TxnMsg::MarkerAnswer { .. }) {
                    self.coord.on_marker_answer(env.msg, now, &mut out);
                } else {
                    self.coord.on_request(env.from, env.msg, now, &mut out);
                }
                self.absorb(out)?;
            }
            TxnEndpoint::Partition(p) => self.at_partition(p, env)?,
            TxnEndpoint::Client(c) => {
                let mut sends = Vec::new();
                let note =
                    self.clients[c as usize].on_answer(&env.msg, now, &mut self.rng, &mut sends);
                if let Some(n) = note {
                    self.trace.record(now, &n);
                }
                self.send_all(sends);
            }
        }
        Ok(())
    }

    fn at_partition(&mut self, p: i32, env: TxnEnvelope) -> Result<(), Violation> {
        let coord = &self.coord;
        let partition = &mut self.partitions[p as usize];
        let (answer, appended) = match env.msg {
            TxnMsg::Produce { req, batch, .. } => {
                let id = batch.records[0].transactional_id.clone();
                let (result, appended) =
                    partition.produce(batch, |pid, epoch| coord.verify(&id, pid, epoch, p));
                let answer = TxnMsg::ProduceAnswer {
                    req,
                    partition: p,
                    result,
                };
                (answer, appended)
            }
            TxnMsg::WriteMarker {
                coordinator_epoch,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                decision_offset,
                ..
            } => {
                let (code, appended) = partition.write_marker(
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    decision_offset,
                );
                if code == ErrorCode::TransactionCoordinatorFenced
                    && coordinator_epoch == coord.coordinator_epoch
                {
                    self.checks.stats.late_markers_refused += 1;
                }
                let answer = TxnMsg::MarkerAnswer {
                    coordinator_epoch,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    partition: p,
                    decision_offset,
                    code,
                };
                (answer, appended)
            }
            other => panic!("not a partition request: {other:?}"),
        };
        if let Some(a) = &appended {
            self.trace
                .record(self.now_ms, &format!("p{p} appended {a:?}"));
            self.checks.on_append(p, a)?;
        }
        self.send_all(vec![TxnEnvelope {
            from: TxnEndpoint::Partition(p),
            to: env.from,
            msg: answer,
        }]);
        Ok(())
    }

    /// The reader fetches the next partition that is up, round robin.
    fn read(&mut self) -> Result<(), Violation> {
        let p = self.next_read;
        self.next_read = (p + 1) % self.config.partitions;
        let partition = &self.partitions[p as usize];
        if !partition.up {
            return Ok(());
        }
        let fetched = partition.fetch(self.reader.position(p));
        let from = self.reader.position(p);
        let records = self.reader.consume(p, fetched);
        if !records.is_empty() {
            self.trace.record(
                self.now_ms,
                &format!("reader p{p} from {from}: {} records", records.len()),
            );
        }
        for (offset, tag) in &records {
            self.checks.on_read(p, *offset, tag)?;
        }
        Ok(())
    }

    fn check_lsos(&mut self) -> Result<(), Violation> {
        for p in &self.partitions {
            if p.up {
                self.checks.on_lso(p.id, p.last_stable_offset())?;
            }
        }
        Ok(())
    }

    fn absorb(&mut self, out: CoordOut) -> Result<(), Violation> {
        let now = self.now_ms;
        for n in &out.notes {
            self.trace.record(now, n);
        }
        for (m, txn_no) in &out.durable {
            self.trace.record(
                now,
                &format!(
                    "durable {} {:?} producer {}/{} txn {txn_no} partitions {}",
                    m.transactional_id,
                    m.state,
                    m.producer_id,
                    m.producer_epoch,
                    m.partitions.len()
                ),
            );
            self.checks.on_durable(m, *txn_no)?;
        }
        let markers_sent = out
            .sends
            .iter()
            .any(|e| matches!(e.msg, TxnMsg::WriteMarker { .. }));
        if markers_sent && self.crashes_after_markers > 0 && self.rng.chance(CRASH_AFTER_MARKERS) {
            self.crashes_after_markers -= 1;
            let down_ms = self.rng.range(50, 1_000);
            self.queue.push(now + 1, Event::CoordCrash { down_ms });
        }
        if let Some((incarnation, upto)) = out.sync {
            let at = now + self.rng.range(1, 15);
            self.queue
                .push(at, Event::CoordSynced { incarnation, upto });
        }
        self.send_all(out.sends);
        Ok(())
    }

    fn send_all(&mut self, sends: Vec<TxnEnvelope>) {
        for env in sends {
            let fates = self.net.fates(&mut self.rng, env.from, env.to, self.now_ms);
            if fates.is_empty() {
                self.trace
                    .record(self.now_ms, &format!("lost {}", env.describe()));
            }
            for at in fates {
                self.queue.push(
                    at,
                    Event::Deliver {
                        env: env.clone(),
                        held: false,
                    },
                );
            }
        }
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}
