//! [`TxnClient`]: one transactional producer instance of the transaction world, as a Kafka
//! producer behaves: InitProducerId, then transactions of AddPartitionsToTxn → produce → EndTxn
//! (commit or abort), one after another.
//!
//! Owns: its phase, its producer id and epoch, the sequence numbers of each partition (reset on
//! every new epoch), one coordinator request and one produce per partition in flight, and its
//! crashes (a crashed instance comes back as a new instance, whose InitProducerId fences the old
//! epoch; a crash longer than the transaction timeout leaves the abort to the coordinator's
//! timeout). Two clients may share a transactional id, so they fence each other.
//! Promises: a request without an answer is sent again after [`REQUEST_TIMEOUT_MS`] (longer
//! than any round trip, so a client never has two copies of a coordinator request in flight);
//! a produce retry resends the same batch with the same sequence; retriable errors are retried,
//! any other error starts over with InitProducerId (a new epoch, as Kafka's producer does after
//! an abortable error with unresolved sequences, KIP-360); EndTxn is sent only once every batch
//! of the transaction is acknowledged. Every record is tagged with the transaction number the
//! coordinator's AddPartitionsToTxn answer gave.
//! Never does: read anything (see [`crate::txn_reader`]) or check an invariant.

use std::collections::BTreeMap;

use spool_protocol::ErrorCode;

use crate::rng::SimRng;
use crate::txn_net::{DataBatch, RecordTag, TxnEndpoint, TxnEnvelope, TxnMsg};

/// The transaction timeout clients ask for.
pub const TXN_TIMEOUT_MS: u32 = 2_000;
/// A request unanswered this long is sent again.
pub const REQUEST_TIMEOUT_MS: u64 = 500;
/// After a retriable error, the request is sent again this much later.
const RETRY_BACKOFF_MS: u64 = 50;
/// Probability a client crashes on one tick.
const CRASH_PER_TICK: f64 = 0.003;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Down { until_ms: u64 },
    Init,
    Add,
    Produce,
    End,
    Pause { until_ms: u64 },
}

#[derive(Debug, Clone)]
struct Pending {
    req: u64,
    msg: TxnMsg,
    resend_at_ms: u64,
}

pub struct TxnClient {
    pub index: u32,
    pub transactional_id: String,
    phase: Phase,
    producer: Option<(i64, i16)>,
    txn_no: u64,
    /// Batches still to send, per partition of the transaction.
    to_send: BTreeMap<i32, u32>,
    next_seq: BTreeMap<i32, i32>,
    coord_pending: Option<Pending>,
    produce_pending: BTreeMap<i32, Pending>,
    next_req: u64,
    partitions: i32,
    pub crashes: u64,
}

fn retriable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::ConcurrentTransactions
            | ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::NotLeaderOrFollower
    )
}

impl TxnClient {
    /// A client of `transactional_id` that starts at `start_ms`, producing to partitions
    /// `0..partitions`.
    pub fn new(index: u32, transactional_id: &str, start_ms: u64, partitions: i32) -> Self {
        TxnClient {
            index,
            transactional_id: transactional_id.to_string(),
            phase: Phase::Down { until_ms: start_ms },
            producer: None,
            txn_no: 0,
            to_send: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            coord_pending: None,
            produce_pending: BTreeMap::new(),
            next_req: 0,
            partitions,
            crashes: 0,
        }
    }

    pub fn is_up(&self) -> bool {
        !matches!(self.phase, Phase::Down { .. })
    }

    fn me(&self) -> TxnEndpoint {
        TxnEndpoint::Client(self.index)
    }

    /// Timers: starting, resending, the next transaction, and crashing.
    pub fn on_tick(
        &mut self,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<TxnEnvelope>,
    ) -> Option<String> {
        match self.phase {
            Phase::Down { until_ms } => {
                if now_ms >= until_ms {
                    self.init(now_ms, out);
                    return Some(format!("client {} up: InitProducerId", self.index));
                }
                return None;
            }
            Phase::Pause { until_ms } if now_ms >= until_ms => self.begin(now_ms, rng, out),
            _ => {}
        }
        if rng.chance(CRASH_PER_TICK) {
            let down_ms = rng.range(200, 4_000);
            self.crash(now_ms + down_ms);
            return Some(format!("client {} crashed for {down_ms} ms", self.index));
        }
        let me = self.me();
        let to = TxnEndpoint::Coordinator;
        if let Some(p) = &mut self.coord_pending {
            if now_ms >= p.resend_at_ms {
                p.resend_at_ms = now_ms + REQUEST_TIMEOUT_MS;
                out.push(TxnEnvelope {
                    from: me,
                    to,
                    msg: p.msg.clone(),
                });
            }
        }
        for (&partition, p) in &mut self.produce_pending {
            if now_ms >= p.resend_at_ms {
                p.resend_at_ms = now_ms + REQUEST_TIMEOUT_MS;
                out.push(TxnEnvelope {
                    from: me,
                    to: TxnEndpoint::Partition(partition),
                    msg: p.msg.clone(),
                });
            }
        }
        None
    }

    /// An answer from the coordinator or a partition; a trace note when it changes the phase.
    pub fn on_answer(
        &mut self,
        msg: &TxnMsg,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<TxnEnvelope>,
    ) -> Option<String> {
        match msg {
            TxnMsg::CoordAnswer {
                req,
                result,
                producer,
                txn_no,
            } => {
                if self.coord_pending.as_ref().map(|p| p.req) != Some(*req) {
                    return None;
                }
                match result {
                    Ok(()) => {
                        self.coord_pending = None;
                        self.on_coord_ok(*producer, *txn_no, now_ms, rng, out)
                    }
                    Err(code) if retriable(*code) => {
                        if let Some(p) = &mut self.coord_pending {
                            p.resend_at_ms = now_ms + RETRY_BACKOFF_MS;
                        }
                        None
                    }
                    Err(code) => {
                        self.init(now_ms, out);
                        Some(format!("client {}: {code:?}, starting over", self.index))
                    }
                }
            }
            TxnMsg::ProduceAnswer {
                req,
                partition,
                result,
            } => {
                if self.produce_pending.get(partition).map(|p| p.req) != Some(*req) {
                    return None;
                }
                match result {
                    Ok(_) => {
                        let Some(Pending {
                            msg: TxnMsg::Produce { batch, .. },
                            ..
                        }) = self.produce_pending.remove(partition)
                        else {
                            unreachable!("a produce is pending");
                        };
                        *self.next_seq.entry(*partition).or_insert(0) = batch.last_seq() + 1;
                        self.send_next_batch(*partition, now_ms, rng, out);
                        if self.phase == Phase::Produce && self.produce_pending.is_empty() {
                            return Some(self.end(now_ms, rng, out));
                        }
                        None
                    }
                    Err(code) if retriable(*code) => {
                        if let Some(p) = self.produce_pending.get_mut(partition) {
                            p.resend_at_ms = now_ms + RETRY_BACKOFF_MS;
                        }
                        None
                    }
                    Err(code) => {
                        self.init(now_ms, out);
                        Some(format!(
                            "client {}: produce to p{partition} {code:?}, starting over",
                            self.index
                        ))
                    }
                }
            }
            _ => None,
        }
    }

    fn on_coord_ok(
        &mut self,
        producer: Option<(i64, i16)>,
        txn_no: u64,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<TxnEnvelope>,
    ) -> Option<String> {
        match self.phase {
            Phase::Init => {
                self.producer = producer;
                self.next_seq.clear();
                self.begin(now_ms, rng, out);
                Some(format!("client {}: producer {producer:?}", self.index))
            }
            Phase::Add => {
                self.txn_no = txn_no;
                self.phase = Phase::Produce;
                let partitions: Vec<i32> = self.to_send.keys().copied().collect();
                for p in partitions {
                    self.send_next_batch(p, now_ms, rng, out);
                }
                Some(format!(
                    "client {}: transaction {} on {:?}",
                    self.index,
                    txn_no,
                    self.to_send.keys().collect::<Vec<_>>()
                ))
            }
            Phase::End => {
                self.phase = Phase::Pause {
                    until_ms: now_ms + rng.range(0, 300),
                };
                Some(format!(
                    "client {}: transaction {} ended",
                    self.index, self.txn_no
                ))
            }
            _ => None,
        }
    }

    fn crash(&mut self, until_ms: u64) {
        self.crashes += 1;
        self.phase = Phase::Down { until_ms };
        self.producer = None;
        self.coord_pending = None;
        self.produce_pending.clear();
        self.to_send.clear();
    }

    fn init(&mut self, now_ms: u64, out: &mut Vec<TxnEnvelope>) {
        self.phase = Phase::Init;
        self.producer = None;
        self.produce_pending.clear();
        self.to_send.clear();
        let msg = TxnMsg::InitProducerId {
            req: self.req(),
            transactional_id: self.transactional_id.clone(),
            timeout_ms: TXN_TIMEOUT_MS,
        };
        self.send_coord(msg, now_ms, out);
    }

    /// A new transaction: one to three partitions, one or two batches each.
    fn begin(&mut self, now_ms: u64, rng: &mut SimRng, out: &mut Vec<TxnEnvelope>) {
        let Some((producer_id, producer_epoch)) = self.producer else {
            return self.init(now_ms, out);
        };
        self.phase = Phase::Add;
        self.to_send.clear();
        let count = rng.range(1, 3.min(self.partitions as u64));
        while (self.to_send.len() as u64) < count {
            let p = rng.below(self.partitions as u64) as i32;
            self.to_send.insert(p, rng.range(1, 2) as u32);
        }
        let msg = TxnMsg::AddPartitions {
            req: self.req(),
            transactional_id: self.transactional_id.clone(),
            producer_id,
            producer_epoch,
            partitions: self.to_send.keys().copied().collect(),
        };
        self.send_coord(msg, now_ms, out);
    }

    fn send_next_batch(
        &mut self,
        partition: i32,
        now_ms: u64,
        rng: &mut SimRng,
        out: &mut Vec<TxnEnvelope>,
    ) {
        let Some((producer_id, producer_epoch)) = self.producer else {
            return;
        };
        let Some(left) = self.to_send.get_mut(&partition) else {
            return;
        };
        if *left == 0 {
            self.to_send.remove(&partition);
            return;
        }
        *left -= 1;
        let records = (0..rng.range(1, 3))
            .map(|_| RecordTag {
                transactional_id: self.transactional_id.clone(),
                txn_no: self.txn_no,
            })
            .collect();
        let batch = DataBatch {
            producer_id,
            producer_epoch,
            first_seq: self.next_seq.get(&partition).copied().unwrap_or(0),
            records,
        };
        let req = self.req();
        let msg = TxnMsg::Produce {
            req,
            partition,
            batch,
        };
        out.push(TxnEnvelope {
            from: self.me(),
            to: TxnEndpoint::Partition(partition),
            msg: msg.clone(),
        });
        self.produce_pending.insert(
            partition,
            Pending {
                req,
                msg,
                resend_at_ms: now_ms + REQUEST_TIMEOUT_MS,
            },
        );
    }

    fn end(&mut self, now_ms: u64, rng: &mut SimRng, out: &mut Vec<TxnEnvelope>) -> String {
        let (producer_id, producer_epoch) = self.producer.expect("producing with a producer");
        let commit = rng.chance(0.75);
        self.phase = Phase::End;
        let msg = TxnMsg::EndTxn {
            req: self.req(),
            transactional_id: self.transactional_id.clone(),
            producer_id,
            producer_epoch,
            commit,
        };
        self.send_coord(msg, now_ms, out);
        format!(
            "client {}: EndTxn {} transaction {}",
            self.index,
            if commit { "commit" } else { "abort" },
            self.txn_no
        )
    }

    fn send_coord(&mut self, msg: TxnMsg, now_ms: u64, out: &mut Vec<TxnEnvelope>) {
        let req = match &msg {
            TxnMsg::InitProducerId { req, .. }
            | TxnMsg::AddPartitions { req, .. }
            | TxnMsg::EndTxn { req, .. } => *req,
            other => panic!("not a coordinator request: {other:?}"),
        };
        out.push(TxnEnvelope {
            from: self.me(),
            to: TxnEndpoint::Coordinator,
            msg: msg.clone(),
        });
        self.coord_pending = Some(Pending {
            req,
            msg,
            resend_at_ms: now_ms + REQUEST_TIMEOUT_MS,
        });
    }

    fn req(&mut self) -> u64 {
        self.next_req += 1;
        self.next_req
    }
}
