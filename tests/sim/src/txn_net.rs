//! The transaction world's messages and the links that carry them.
//!
//! Owns: [`TxnMsg`] (what clients, the coordinator and the partitions say to each other),
//! [`RecordTag`] (the ground truth every record value carries: which transactional id wrote it,
//! in which of that id's transactions), and [`TxnNet`], which decides each message's delivery
//! times when it is sent.
//! Promises: every fate is drawn from the world's [`SimRng`] in send order. The links differ the
//! way Kafka's connections do:
//! - client ↔ partition (produce): delay, loss, duplication and reordering — produce is
//!   idempotent by sequence number, so a late copy must be deduplicated or fenced;
//! - client ↔ coordinator: delay, loss and reordering, never duplication (a Kafka client has one
//!   request in flight to its coordinator on one TCP connection; it resends only after a
//!   timeout longer than any delay, so no stale copy of an EndTxn can arrive later);
//! - coordinator ↔ partition (markers): delay, in order (one connection per broker) — except that
//!   a marker may stall (probability [`TxnLinkFaults::marker_stall`]): that copy lands only
//!   after the coordinator's resend, 1–4 resend periods late and out of order, as a request
//!   does when a cut link stalls its connection and the retry goes on a new one. The late copy
//!   may reach the partition after the transaction completed and the producer's next one
//!   opened there (what decision offsets are for); a message to an endpoint that is down is
//!   dropped at delivery, as for every link.
//!
//! Never does: deliver anything (the world's event queue does) or look inside a message beyond
//! naming it in the trace.

use std::collections::BTreeMap;

use spool_protocol::ErrorCode;

use crate::rng::SimRng;

/// The coordinator sends a marker again when this long passes without its answer (longer than
/// any message's round trip, unless the first copy stalled: the module docs).
pub const MARKER_RESEND_MS: u64 = 1_000;

/// Who sends and receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnEndpoint {
    Coordinator,
    Partition(i32),
    Client(u32),
}

/// What a record value says: the transaction that wrote it. `txn_no` counts the id's
/// transactions as the coordinator's durable records begin them (told to the client with its
/// AddPartitionsToTxn answer), so the coordinator's decision on each is known to the checkers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordTag {
    pub transactional_id: String,
    pub txn_no: u64,
}

/// One transactional data batch of one producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_seq: i32,
    /// One tag per record (never empty).
    pub records: Vec<RecordTag>,
}

impl DataBatch {
    pub fn last_seq(&self) -> i32 {
        self.first_seq + self.records.len() as i32 - 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnMsg {
    InitProducerId {
        req: u64,
        transactional_id: String,
        timeout_ms: u32,
    },
    AddPartitions {
        req: u64,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<i32>,
    },
    EndTxn {
        req: u64,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
    /// The coordinator's answer to any of the three above: the id's producer after a successful
    /// InitProducerId, and the id's current transaction number (ground truth, see
    /// [`RecordTag`]).
    CoordAnswer {
        req: u64,
        result: Result<(), ErrorCode>,
        producer: Option<(i64, i16)>,
        txn_no: u64,
    },
    Produce {
        req: u64,
        partition: i32,
        batch: DataBatch,
    },
    ProduceAnswer {
        req: u64,
        partition: i32,
        result: Result<u64, ErrorCode>,
    },
    WriteMarker {
        coordinator_epoch: i32,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        partition: i32,
        /// The transaction's Prepare record offset in the coordinator's log.
        decision_offset: i64,
    },
    /// Carries its marker's decision offset back, as the real writer's call correlates its
    /// answer: an answer to a copy the coordinator gave up on is not taken for the current one.
    MarkerAnswer {
        coordinator_epoch: i32,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partition: i32,
        decision_offset: i64,
        code: ErrorCode,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEnvelope {
    pub from: TxnEndpoint,
    pub to: TxnEndpoint,
    pub msg: TxnMsg,
}

impl TxnEnvelope {
    /// One trace line's worth.
    pub fn describe(&self) -> String {
        format!("{:?}->{:?} {:?}", self.from, self.to, self.msg)
    }
}

/// Link faults of the links that have them (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TxnLinkFaults {
    pub delay_ms_min: u64,
    pub delay_ms_max: u64,
    pub loss: f64,
    /// Client ↔ partition only.
    pub duplicate: f64,
    /// Coordinator → partition markers only: the chance a copy stalls (module docs).
    pub marker_stall: f64,
}

impl TxnLinkFaults {
    /// Drawn per seed: some seeds calm, some lossy.
    pub fn draw(rng: &mut SimRng) -> Self {
        TxnLinkFaults {
            delay_ms_min: 1,
            delay_ms_max: rng.range(5, 40),
            loss: *rng.pick(&[0.0, 0.01, 0.05]),
            duplicate: *rng.pick(&[0.0, 0.02, 0.1]),
            marker_stall: *rng.pick(&[0.0, 0.05, 0.2]),
        }
    }
}

/// Decides delivery times (module docs).
#[derive(Debug)]
pub struct TxnNet {
    pub faults: TxnLinkFaults,
    /// The last delivery time on each in-order link.
    fifo_last_ms: BTreeMap<(TxnEndpoint, TxnEndpoint), u64>,
}

impl TxnNet {
    pub fn new(faults: TxnLinkFaults) -> Self {
        TxnNet {
            faults,
            fifo_last_ms: BTreeMap::new(),
        }
    }

    /// The delivery times of one message sent at `now_ms`: none (lost), one, or two copies.
    pub fn fates(
        &mut self,
        rng: &mut SimRng,
        from: TxnEndpoint,
        to: TxnEndpoint,
        now_ms: u64,
    ) -> Vec<u64> {
        use TxnEndpoint::{Client, Coordinator, Partition};
        let f = self.faults;
        let delay = rng.range(f.delay_ms_min, f.delay_ms_max);
        match (from, to) {
            (Coordinator, Partition(_)) if rng.chance(f.marker_stall) => {
                // Not through the in-order link: the resend overtakes it.
                let resends = rng.range(1, 4);
                vec![now_ms + resends * MARKER_RESEND_MS + delay]
            }
            (Coordinator, Partition(_)) | (Partition(_), Coordinator) => {
                let last = self.fifo_last_ms.entry((from, to)).or_insert(0);
                let at = (now_ms + delay).max(*last);
                *last = at;
                vec![at]
            }
            _ => {
                if rng.chance(f.loss) {
                    return Vec::new();
                }
                let mut at = vec![now_ms + delay];
                let produce_link = matches!(
                    (from, to),
                    (Client(_), Partition(_)) | (Partition(_), Client(_))
                );
                if produce_link && rng.chance(f.duplicate) {
                    at.push(now_ms + rng.range(f.delay_ms_min, f.delay_ms_max * 3));
                }
                at
            }
        }
    }

    /// The longest any delivered message takes (clients resend only after longer than twice it).
    pub fn delay_ms_max(&self) -> u64 {
        self.faults.delay_ms_max * 3
    }
}
