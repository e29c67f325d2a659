//! [`CoordHost`]: the transaction coordinator of the transaction world — spool-core's real
//! [`TxnCoordinator`] on a simulated `__transaction_state` partition.
//!
//! Owns: the partition's log of records (encoded and decoded with spool-core's
//! `txn::records`, Kafka's layout) with an fsync boundary — a record counts, and its request is
//! answered, only once an fsync covers it ([`TxnCoordinator::on_written`]); a crash loses the
//! records after the boundary and everything in memory; a restart bumps the coordinator epoch,
//! replays the durable records ([`TxnCoordinator::replay`]) and resumes the markers of prepared
//! transactions ([`TxnCoordinator::resume`]). It also owns the marker jobs (one
//! [`TxnAction::WriteMarkers`] each: a marker to every partition it names, carrying the Prepare
//! record's offset in this log (its decision offset), resent after [`MARKER_RESEND_MS`] without
//! an answer, then [`TxnCoordinator::on_markers_written`]; an answer counts only for the job's
//! own decision offset), the
//! timeout ticks ([`TxnCoordinator::expire`]), and the producer-id allocator (the controller's in
//! Kafka, so it survives the coordinator's crashes).
//! Ground truth kept here, outside the coordinator's state and surviving its crashes: the number
//! of each id's current transaction, counted on durable records (module docs of
//! [`crate::txn_net`]'s `RecordTag`).
//! Promises: the world hears of every durable record ([`CoordOut::durable`]), in log order.
//! Failed writes: while the world sets [`CoordHost::writes_fail`] (for one step), every append
//! fails at once (the partition refused it): [`TxnCoordinator::on_written`] hears `false`, the
//! request is answered NOT_COORDINATOR, a timeout's abort is tried again on a later tick and a
//! completing record after the markers again on the next tick.
//! Folding, as the broker's driver does: an AddPartitionsToTxn refused CONCURRENT_TRANSACTIONS
//! is remembered (the broker's request waits instead), and the completing write after the
//! markers carries it ([`TxnCoordinator::complete_then_add`]): the Complete record and the next
//! Ongoing record are appended together and become durable with one fsync, or are lost together.
//! Never does: decide anything the coordinator decides.

use std::collections::{BTreeMap, BTreeSet};

use spool_core::txn::records;
use spool_core::txn::{NextAdd, Step, TxnAction, TxnCoordinator, TxnMetadata, TxnState};
use spool_core::TopicPartition;
use spool_protocol::ErrorCode;

use crate::txn_net::{TxnEndpoint, TxnEnvelope, TxnMsg, MARKER_RESEND_MS};

/// The data topic's name.
pub const TOPIC: &str = "data";

/// What one step asks of the world.
#[derive(Debug, Default)]
pub struct CoordOut {
    pub sends: Vec<TxnEnvelope>,
    /// Schedule an fsync of the log up to this length, for this incarnation.
    pub sync: Option<(u64, usize)>,
    /// Records that became durable, with the id's transaction number after each.
    pub durable: Vec<(TxnMetadata, u64)>,
    /// Trace lines.
    pub notes: Vec<String>,
}

#[derive(Debug)]
struct Reply {
    to: TxnEndpoint,
    req: u64,
    answer: Result<(), ErrorCode>,
}

#[derive(Debug)]
struct InFlight {
    index: usize,
    transactional_id: String,
    reply: Option<Reply>,
    /// Records appended in the same write before this one (a folded Complete), reported
    /// durable before it.
    earlier: Vec<TxnMetadata>,
}

#[derive(Debug)]
struct MarkerJob {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    decision_offset: i64,
    /// Partitions still owing an answer, and when their marker was last sent.
    remaining: BTreeMap<i32, u64>,
}

pub struct CoordHost {
    pub up: bool,
    /// Appends fail during this step (set by the world before each call).
    pub writes_fail: bool,
    pub coordinator_epoch: i32,
    incarnation: u64,
    log: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    synced: usize,
    coord: TxnCoordinator,
    in_flight: Vec<InFlight>,
    markers: BTreeMap<String, MarkerJob>,
    /// Ids whose markers are all written but whose completing record could not be pended yet.
    complete_due: BTreeSet<String>,
    /// The last AddPartitionsToTxn refused CONCURRENT_TRANSACTIONS per id, to fold into the
    /// id's completing write (lost on a crash, as a waiting request is).
    parked: BTreeMap<String, NextAdd>,
    next_producer_id: i64,
    txn_numbers: BTreeMap<String, (u64, bool)>,
}

impl Default for CoordHost {
    fn default() -> Self {
        Self::new()
    }
}

impl CoordHost {
    pub fn new() -> Self {
        CoordHost {
            up: true,
            writes_fail: false,
            coordinator_epoch: 0,
            incarnation: 0,
            log: Vec::new(),
            synced: 0,
            coord: TxnCoordinator::new(spool_core::txn::TRANSACTION_MAX_TIMEOUT_MS),
            in_flight: Vec::new(),
            markers: BTreeMap::new(),
            complete_due: BTreeSet::new(),
            parked: BTreeMap::new(),
            next_producer_id: 1000,
            txn_numbers: BTreeMap::new(),
        }
    }

    pub fn coordinator(&self) -> &TxnCoordinator {
        &self.coord
    }

    /// The id's current transaction number (ground truth).
    pub fn txn_no(&self, transactional_id: &str) -> u64 {
        self.txn_numbers.get(transactional_id).map_or(0, |n| n.0)
    }

    /// KIP-890 verification for a partition (a direct call: the partition's leader asks the
    /// coordinator and waits; the answer is the coordinator's durable state at that moment).
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: i32,
    ) -> ErrorCode {
        if !self.up {
            return ErrorCode::CoordinatorNotAvailable;
        }
        self.coord.verify(
            transactional_id,
            producer_id,
            producer_epoch,
            &TopicPartition::new(TOPIC, partition),
        )
    }

    /// A client's request.
    pub fn on_request(&mut self, from: TxnEndpoint, msg: TxnMsg, now_ms: u64, out: &mut CoordOut) {
        let next_pid = &mut self.next_producer_id;
        let mut alloc = || {
            let pid = *next_pid;
            *next_pid += 1;
            Some(pid)
        };
        let (req, id, step) = match msg {
            TxnMsg::InitProducerId {
                req,
                transactional_id,
                timeout_ms,
            } => {
                let step = self.coord.init_producer_id(
                    &transactional_id,
                    timeout_ms,
                    None,
                    now_ms,
                    &mut alloc,
                );
                (req, transactional_id, step)
            }
            TxnMsg::AddPartitions {
                req,
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
            } => {
                let tps: Vec<TopicPartition> = partitions
                    .iter()
                    .map(|&p| TopicPartition::new(TOPIC, p))
                    .collect();
                let step = self.coord.add_partitions(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    &tps,
                    now_ms,
                );
                if step == Step::Answer(Err(ErrorCode::ConcurrentTransactions)) {
                    self.parked.insert(
                        transactional_id.clone(),
                        NextAdd {
                            producer_id,
                            producer_epoch,
                            partitions: tps,
                        },
                    );
                }
                (req, transactional_id, step)
            }
            TxnMsg::EndTxn {
                req,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
            } => {
                let step = self.coord.end_txn(
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    commit,
                    now_ms,
                );
                (req, transactional_id, step)
            }
            other => panic!("not a coordinator request: {other:?}"),
        };
        match step {
            Step::Answer(answer) => {
                let txn_no = self.txn_no(&id);
                out.sends.push(TxnEnvelope {
                    from: TxnEndpoint::Coordinator,
                    to: from,
                    msg: TxnMsg::CoordAnswer {
                        req,
                        result: answer,
                        producer: None,
                        txn_no,
                    },
                });
            }
            Step::Write { record, answer } => {
                let reply = Reply {
                    to: from,
                    req,
                    answer,
                };
                self.append(vec![record], Some(reply), out);
            }
        }
    }

    /// The periodic tick: timeouts, marker resends, completions still due.
    pub fn on_tick(&mut self, now_ms: u64, out: &mut CoordOut) {
        for record in self.coord.expire(now_ms) {
            out.notes.push(format!(
                "coordinator: {} timed out, aborting at epoch {}",
                record.transactional_id, record.producer_epoch
            ));
            self.append(vec![record], None, out);
        }
        let epoch = self.coordinator_epoch;
        for (id, job) in &mut self.markers {
            for (&p, sent_ms) in &mut job.remaining {
                if *sent_ms + MARKER_RESEND_MS <= now_ms {
                    *sent_ms = now_ms;
                    out.sends.push(marker_request(
                        epoch,
                        id,
                        (job.producer_id, job.producer_epoch),
                        job.commit,
                        job.decision_offset,
                        p,
                    ));
                }
            }
        }
        let due: Vec<String> = std::mem::take(&mut self.complete_due).into_iter().collect();
        for id in due {
            self.complete(&id, now_ms, out);
        }
    }

    /// A partition's answer to a marker.
    pub fn on_marker_answer(&mut self, msg: TxnMsg, now_ms: u64, out: &mut CoordOut) {
        let TxnMsg::MarkerAnswer {
            coordinator_epoch,
            transactional_id,
            producer_id,
            producer_epoch,
            partition,
            decision_offset,
            code,
        } = msg
        else {
            panic!("not a marker answer: {msg:?}");
        };
        if coordinator_epoch != self.coordinator_epoch {
            return;
        }
        let Some(job) = self.markers.get_mut(&transactional_id) else {
            return;
        };
        if (job.producer_id, job.producer_epoch, job.decision_offset)
            != (producer_id, producer_epoch, decision_offset)
        {
            // The answer to a copy of an older transaction's marker.
            return;
        }
        match code {
            ErrorCode::None => {
                job.remaining.remove(&partition);
            }
            ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced => {
                // Kafka's coordinator stops sending this transaction's markers; a later
                // coordinator resumes them. Reported: the clean world should never see it.
                out.notes.push(format!(
                    "coordinator: marker of {transactional_id} refused by p{partition}: {code:?}"
                ));
                self.markers.remove(&transactional_id);
                return;
            }
            // Retriable: resent on a tick.
            _ => return,
        }
        if job.remaining.is_empty() {
            self.markers.remove(&transactional_id);
            self.complete(&transactional_id, now_ms, out);
        }
    }

    /// An fsync of the log up to `upto` completed.
    pub fn on_synced(&mut self, incarnation: u64, upto: usize, now_ms: u64, out: &mut CoordOut) {
        if !self.up || incarnation != self.incarnation {
            return;
        }
        self.synced = self.synced.max(upto);
        let synced = self.synced;
        let (done, rest): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|f| f.index < synced);
        self.in_flight = rest;
        for f in done {
            for earlier in &f.earlier {
                let txn_no = self.count(earlier);
                out.durable.push((earlier.clone(), txn_no));
            }
            let actions = self
                .coord
                .on_written(&f.transactional_id, Some(f.index as u64));
            let current = self
                .coord
                .describe(&f.transactional_id)
                .cloned()
                .expect("a durable record's id is known");
            let txn_no = self.count(&current);
            out.durable.push((current.clone(), txn_no));
            if let Some(r) = f.reply {
                let producer = r
                    .answer
                    .is_ok()
                    .then_some((current.producer_id, current.producer_epoch));
                out.sends.push(TxnEnvelope {
                    from: TxnEndpoint::Coordinator,
                    to: r.to,
                    msg: TxnMsg::CoordAnswer {
                        req: r.req,
                        result: r.answer,
                        producer,
                        txn_no,
                    },
                });
            }
            for a in actions {
                self.start_markers(a, now_ms, out);
            }
        }
    }

    /// Power loss: unsynced records and everything in memory are gone.
    pub fn crash(&mut self) {
        self.up = false;
        self.log.truncate(self.synced);
        self.in_flight.clear();
        self.markers.clear();
        self.complete_due.clear();
        self.parked.clear();
        self.coord = TxnCoordinator::new(spool_core::txn::TRANSACTION_MAX_TIMEOUT_MS);
    }

    /// Back as the partition's new leader: a newer coordinator epoch, the durable records
    /// replayed, the prepared transactions' markers resumed.
    pub fn restart(&mut self, now_ms: u64, out: &mut CoordOut) {
        self.incarnation += 1;
        self.coordinator_epoch += 1;
        let mut coord = TxnCoordinator::new(spool_core::txn::TRANSACTION_MAX_TIMEOUT_MS);
        for (offset, (key, value)) in self.log.iter().enumerate() {
            let (id, m) = records::decode(key, value.as_deref()).expect("a record we encoded");
            coord.replay(&id, m, offset as u64);
        }
        self.coord = coord;
        self.up = true;
        out.notes.push(format!(
            "coordinator: epoch {} replayed {} records",
            self.coordinator_epoch,
            self.log.len()
        ));
        for a in self.coord.resume() {
            self.start_markers(a, now_ms, out);
        }
    }

    /// Appends `records` (one write: the last is the id's pending record) to the log.
    fn append(&mut self, records: Vec<TxnMetadata>, reply: Option<Reply>, out: &mut CoordOut) {
        let record = records
            .last()
            .cloned()
            .expect("a write of at least one record");
        if self.writes_fail {
            let id = record.transactional_id.clone();
            let states: Vec<TxnState> = records.iter().map(|r| r.state).collect();
            out.notes
                .push(format!("coordinator: write of {id} {states:?} failed"));
            let actions = self.coord.on_written(&id, None);
            assert!(actions.is_empty(), "a failed write asks for markers");
            match reply {
                Some(r) => out.sends.push(TxnEnvelope {
                    from: TxnEndpoint::Coordinator,
                    to: r.to,
                    msg: TxnMsg::CoordAnswer {
                        req: r.req,
                        result: Err(ErrorCode::NotCoordinator),
                        producer: None,
                        txn_no: self.txn_no(&id),
                    },
                }),
                None => {
                    if matches!(
                        records[0].state,
                        TxnState::CompleteCommit | TxnState::CompleteAbort
                    ) {
                        self.complete_due.insert(id);
                    }
                }
            }
            return;
        }
        for r in &records {
            let key = records::encode_key(&r.transactional_id).to_vec();
            let value = records::encode_value(r).to_vec();
            self.log.push((key, Some(value)));
        }
        let mut earlier = records;
        earlier.pop();
        self.in_flight.push(InFlight {
            index: self.log.len() - 1,
            transactional_id: record.transactional_id.clone(),
            reply,
            earlier,
        });
        out.sync = Some((self.incarnation, self.log.len()));
    }

    /// Counts transactions on a durable record: a new one begins at the first Ongoing.
    fn count(&mut self, m: &TxnMetadata) -> u64 {
        let n = self
            .txn_numbers
            .entry(m.transactional_id.clone())
            .or_insert((0, false));
        let ongoing = m.state == TxnState::Ongoing;
        if ongoing && !n.1 {
            n.0 += 1;
        }
        n.1 = ongoing;
        n.0
    }

    fn start_markers(&mut self, action: TxnAction, now_ms: u64, out: &mut CoordOut) {
        let TxnAction::WriteMarkers {
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            partitions,
            decision_offset,
        } = action;
        let remaining: BTreeMap<i32, u64> =
            partitions.iter().map(|tp| (tp.partition, now_ms)).collect();
        for &p in remaining.keys() {
            out.sends.push(marker_request(
                self.coordinator_epoch,
                &transactional_id,
                (producer_id, producer_epoch),
                commit,
                decision_offset,
                p,
            ));
        }
        if remaining.is_empty() {
            self.complete(&transactional_id, now_ms, out);
            return;
        }
        self.markers.insert(
            transactional_id,
            MarkerJob {
                producer_id,
                producer_epoch,
                commit,
                decision_offset,
                remaining,
            },
        );
    }

    fn complete(&mut self, transactional_id: &str, now_ms: u64, out: &mut CoordOut) {
        let next = self.parked.remove(transactional_id);
        let records = self
            .coord
            .complete_then_add(transactional_id, now_ms, next.as_ref());
        if records.len() > 1 {
            out.notes.push(format!(
                "coordinator: {transactional_id} completes with its next AddPartitions folded in"
            ));
        }
        match records.is_empty() {
            false => self.append(records, None, out),
            true => {
                if let Some(next) = next {
                    self.parked.insert(transactional_id.to_string(), next);
                }
                let prepared = self.coord.describe(transactional_id).is_some_and(|m| {
                    matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
                });
                if prepared {
                    self.complete_due.insert(transactional_id.to_string());
                }
            }
        }
    }
}

fn marker_request(
    coordinator_epoch: i32,
    transactional_id: &str,
    (producer_id, producer_epoch): (i64, i16),
    commit: bool,
    decision_offset: i64,
    partition: i32,
) -> TxnEnvelope {
    TxnEnvelope {
        from: TxnEndpoint::Coordinator,
        to: TxnEndpoint::Partition(partition),
        msg: TxnMsg::WriteMarker {
            coordinator_epoch,
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            commit,
            partition,
            decision_offset,
        },
    }
}
