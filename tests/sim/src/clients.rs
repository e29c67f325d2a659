//! The data clients: [`Producer`]s (one idempotent at acks=all, one plain at acks 0/1/all) and a
//! [`Reader`] that reads each partition from its leader, below the HW.
//!
//! Owns: each client's metadata (a broker's cached [`MetaView`], refreshed by the world), its one
//! request in flight, an idempotent producer's (producer id, epoch, sequence per partition), and
//! the acknowledgements and reads it recorded, which the world hands to the checkers.
//! Promises: every acknowledgement is recorded with its acks, partition, offset and batch id; an
//! idempotent producer retries a batch with its original sequence until it is answered (after
//! `RETRIES_MAX` tries it bumps its epoch and starts over at sequence 0, as a real one would);
//! a plain producer never retries (a retry would be a new batch). Every choice is drawn from
//! the world's [`SimRng`].
//! Never does: check anything.

use std::collections::BTreeMap;
use std::sync::Arc;

use spool_core::ack_wait::Acks;
use spool_core::election::NO_LEADER;
use spool_protocol::ErrorCode;

use crate::message::{Endpoint, Envelope, Payload};
use crate::metaview::{MetaView, PartKey};
use crate::plog::SimBatch;
use crate::repl_message::{ProducedBatch, ReplMsg};
use crate::rng::SimRng;

/// A request unanswered this long is given up (and an idempotent one retried).
pub const CLIENT_TIMEOUT_MS: u64 = 4_000;
/// Tries of one idempotent batch before the producer bumps its epoch.
pub const RETRIES_MAX: u32 = 20;

/// One acknowledgement a producer received.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub key: PartKey,
    pub acks: Acks,
    pub base_offset: u64,
    pub batch_id: u64,
}

struct InFlight {
    request_id: u64,
    key: PartKey,
    acks: Acks,
    batch: ProducedBatch,
    sent_ms: u64,
    tries: u32,
}

pub struct Producer {
    id: u32,
    idempotent: bool,
    view: Option<Arc<MetaView>>,
    next_request: u64,
    next_batch: u64,
    producer_epoch: i16,
    sequences: BTreeMap<PartKey, i32>,
    in_flight: Option<InFlight>,
    retry_now: bool,
    pub acked: Vec<Ack>,
}

impl Producer {
    pub fn new(id: u32, idempotent: bool) -> Self {
        Producer {
            id,
            idempotent,
            view: None,
            next_request: 0,
            next_batch: 0,
            producer_epoch: 0,
            sequences: BTreeMap::new(),
            in_flight: None,
            retry_now: false,
            acked: Vec::new(),
        }
    }

    pub fn on_metadata(&mut self, view: &Arc<MetaView>) {
        if self.view.as_ref().is_none_or(|v| v.offset < view.offset) {
            self.view = Some(Arc::clone(view));
        }
    }

    fn producer_id(&self) -> i64 {
        1000 + i64::from(self.id)
    }

    fn send(&self, f: &InFlight) -> Option<Envelope> {
        let view = self.view.as_ref()?;
        let leader = view.partitions.get(&f.key)?.state.leader;
        (leader != NO_LEADER).then(|| {
            Envelope::new(
                Endpoint::Producer(self.id),
                Endpoint::Broker(leader),
                Payload::Repl(Box::new(ReplMsg::Produce {
                    request_id: f.request_id,
                    key: f.key,
                    acks: f.acks,
                    batch: f.batch,
                })),
            )
        })
    }

    pub fn tick(&mut self, rng: &mut SimRng, now_ms: u64) -> Option<Envelope> {
        if let Some(f) = &mut self.in_flight {
            if !self.retry_now && now_ms < f.sent_ms + CLIENT_TIMEOUT_MS {
                return None;
            }
            self.retry_now = false;
            if !self.idempotent || f.tries >= RETRIES_MAX {
                if self.idempotent {
                    self.producer_epoch += 1;
                    self.sequences.clear();
                }
                self.in_flight = None;
            } else {
                f.tries += 1;
                f.sent_ms = now_ms;
                self.next_request += 1;
                f.request_id = self.next_request;
                let f = self.in_flight.as_ref().expect("in flight");
                return self.send(f);
            }
        }
        let view = self.view.as_ref()?;
        let keys: Vec<PartKey> = view.partitions.keys().copied().collect();
        if keys.is_empty() {
            return None;
        }
        let key = *rng.pick(&keys);
        let records = rng.range(1, 3);
        let acks = if self.idempotent {
            Acks::All
        } else {
            *rng.pick(&[Acks::None, Acks::Leader, Acks::All, Acks::All])
        };
        self.next_batch += 1;
        let producer = self.idempotent.then(|| {
            let seq = *self.sequences.get(&key).unwrap_or(&0);
            (self.producer_id(), self.producer_epoch, seq)
        });
        self.next_request += 1;
        let f = InFlight {
            request_id: self.next_request,
            key,
            acks,
            batch: ProducedBatch {
                id: (u64::from(self.id) << 40) | self.next_batch,
                records,
                producer,
            },
            sent_ms: now_ms,
            tries: 1,
        };
        let env = self.send(&f);
        if acks == Acks::None {
            // Nothing will answer: the next tick starts the next batch.
            return env;
        }
        self.in_flight = Some(f);
        env
    }

    pub fn on_answer(&mut self, msg: &ReplMsg) {
        let ReplMsg::ProduceAnswer {
            request_id,
            error,
            base_offset,
        } = msg
        else {
            return;
        };
        let Some(f) = self
            .in_flight
            .as_ref()
            .filter(|f| f.request_id == *request_id)
        else {
            return;
        };
        if *error == ErrorCode::None {
            self.acked.push(Ack {
                key: f.key,
                acks: f.acks,
                base_offset: *base_offset,
                batch_id: f.batch.id,
            });
            if let Some((_, _, seq)) = f.batch.producer {
                self.sequences.insert(f.key, seq + f.batch.records as i32);
            }
            self.in_flight = None;
        } else if self.idempotent && *error != ErrorCode::OutOfOrderSequenceNumber {
            self.retry_now = true;
        } else {
            self.retry_now = true;
            if let Some(f) = &mut self.in_flight {
                f.tries = RETRIES_MAX;
            }
        }
    }
}

/// Reads every partition from its leader, below the HW, from where it last stopped.
pub struct Reader {
    view: Option<Arc<MetaView>>,
    positions: BTreeMap<PartKey, u64>,
    next_request: u64,
    pub seen: Vec<(PartKey, SimBatch)>,
    /// A read that did not start where the reader asked (a gap or an overlap).
    pub misreads: Vec<String>,
}

impl Default for Reader {
    fn default() -> Self {
        Self::new()
    }
}

impl Reader {
    pub fn new() -> Self {
        Reader {
            view: None,
            positions: BTreeMap::new(),
            next_request: 0,
            seen: Vec::new(),
            misreads: Vec::new(),
        }
    }

    pub fn on_metadata(&mut self, view: &Arc<MetaView>) {
        if self.view.as_ref().is_none_or(|v| v.offset < view.offset) {
            self.view = Some(Arc::clone(view));
        }
    }

    pub fn tick(&mut self, rng: &mut SimRng) -> Option<Envelope> {
        let view = self.view.as_ref()?;
        let keys: Vec<PartKey> = view.partitions.keys().copied().collect();
        if keys.is_empty() {
            return None;
        }
        let key = *rng.pick(&keys);
        let leader = view.partitions[&key].state.leader;
        if leader == NO_LEADER {
            return None;
        }
        self.next_request += 1;
        Some(Envelope::new(
            Endpoint::Reader,
            Endpoint::Broker(leader),
            Payload::Repl(Box::new(ReplMsg::Read {
                request_id: self.next_request,
                key,
                offset: *self.positions.get(&key).unwrap_or(&0),
            })),
        ))
    }

    pub fn on_answer(&mut self, msg: &ReplMsg) {
        let ReplMsg::ReadAnswer {
            key,
            error: ErrorCode::None,
            batches,
            ..
        } = msg
        else {
            return;
        };
        let pos = self.positions.entry(*key).or_insert(0);
        for b in batches {
            if b.base_offset < *pos {
                // An answer to an older read: already seen.
                continue;
            }
            if b.base_offset != *pos {
                self.misreads
                    .push(format!("{key}: read batch at {} from {pos}", b.base_offset));
            }
            *pos = b.end_offset();
            self.seen.push((*key, *b));
        }
    }
}
