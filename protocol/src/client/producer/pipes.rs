//! The producer's per-partition pipelines: which of a partition's batches are in flight, which
//! wait to be sent again, and whether the next one may go.
//!
//! Rules (Kafka's idempotent producer, `max.in.flight.requests.per.connection` ≤ 5):
//! - An idempotent producer keeps up to `max_in_flight` batches of one partition in flight, all
//!   to one leader and under one producer id and epoch, numbered consecutively; the broker
//!   appends them in sequence order or answers OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch can
//!   never overtake an earlier one in the log. A producer without idempotence keeps one, so a
//!   retry can never overtake a later batch either (the broker could not tell).
//! - Once any batch of a partition waits to be sent again, no new batch of it goes, and the
//!   waiting ones go one at a time, in the order they were closed, each only when nothing of
//!   the partition is in flight: a resend finds every earlier batch resolved, and new batches
//!   follow once none waits.
//! - New batches also wait while the partition's in-flight batches went to another leader or
//!   under another producer id or epoch: sequences must continue where the broker's left off.
//!
//! Owns the batches waiting to be sent again; the in-flight ones travel with their requests
//! ([`super::Pending::Produce`]) and are only counted here. Every batch is unresolved from
//! [`Pipes::sent`] until [`Pipes::resolved`] (delivered or failed); [`Pipes::requeue`] keeps
//! it unresolved. Bounded: at most `max_in_flight` in flight per partition, and the waiting
//! batches are ones that were in flight.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::client::accumulator::ClosedBatch;
use crate::client::TopicPartition;

/// One partition's pipeline.
#[derive(Debug, Default)]
struct Pipe {
    in_flight: usize,
    /// The leader and the producer (id, epoch) of the batches in flight.
    sent_to: Option<i32>,
    producer: Option<(i64, i16)>,
    /// Orders of the batches in flight or waiting.
    unresolved: BTreeSet<u64>,
    /// Batches waiting to be sent again, by order.
    waiting: BTreeMap<u64, ClosedBatch>,
    /// The order the next closed batch gets.
    next_order: u64,
}

impl Pipe {
    fn is_empty(&self) -> bool {
        self.unresolved.is_empty()
    }
}

/// Every partition's pipeline (module docs).
#[derive(Debug)]
pub struct Pipes {
    by_tp: HashMap<TopicPartition, Pipe>,
    max_in_flight: usize,
}

impl Pipes {
    /// `max_in_flight` batches per partition at most (1 without idempotence).
    pub fn new(max_in_flight: usize) -> Self {
        assert!(max_in_flight >= 1, "a pipeline holds at least one batch");
        Self {
            by_tp: HashMap::new(),
            max_in_flight,
        }
    }

    /// Whether a new batch of `tp` may go now to `leader` under `producer`.
    pub fn may_send_new(
        &self,
        tp: &TopicPartition,
        leader: i32,
        producer: Option<(i64, i16)>,
    ) -> bool {
        let Some(pipe) = self.by_tp.get(tp) else {
            return true;
        };
        pipe.waiting.is_empty()
            && (pipe.in_flight == 0
                || (pipe.in_flight < self.max_in_flight
                    && pipe.sent_to == Some(leader)
                    && pipe.producer == producer))
    }

    /// Numbers a batch just closed for `tp` (before it is sent).
    pub fn number(&mut self, batch: &mut ClosedBatch) {
        let pipe = self.by_tp.entry(batch.tp.clone()).or_default();
        batch.order = pipe.next_order;
        pipe.next_order += 1;
    }

    /// `batch` goes to `leader` now (new or again).
    pub fn sent(&mut self, batch: &mut ClosedBatch, leader: i32) {
        let pipe = self.by_tp.entry(batch.tp.clone()).or_default();
        assert!(
            pipe.in_flight < self.max_in_flight,
            "{}: more than {} batches in flight",
            batch.tp,
            self.max_in_flight
        );
        batch.sent_behind = pipe.unresolved.first().is_some_and(|o| *o < batch.order);
        pipe.in_flight += 1;
        pipe.sent_to = Some(leader);
        pipe.producer = batch.stamp.map(|(id, epoch, _)| (id, epoch));
        pipe.unresolved.insert(batch.order);
        batch.sent_to = Some(leader);
    }

    /// `batch` came back delivered or failed for good; it was in flight.
    pub fn resolved(&mut self, batch: &ClosedBatch) {
        self.leave_flight(batch);
        if let Some(pipe) = self.by_tp.get_mut(&batch.tp) {
            pipe.unresolved.remove(&batch.order);
            if pipe.is_empty() {
                // Orders only need to grow while something is unresolved.
                self.by_tp.remove(&batch.tp);
            }
        }
    }

    /// `batch` came back to be sent again (it was in flight).
    pub fn requeue(&mut self, batch: ClosedBatch) {
        self.leave_flight(&batch);
        let pipe = self.by_tp.entry(batch.tp.clone()).or_default();
        pipe.waiting.insert(batch.order, batch);
    }

    fn leave_flight(&mut self, batch: &ClosedBatch) {
        let pipe = self.by_tp.get_mut(&batch.tp);
        let pipe = pipe.filter(|p| p.in_flight > 0 && p.unresolved.contains(&batch.order));
        let Some(pipe) = pipe else {
            debug_assert!(
                false,
                "{} order {} was not in flight",
                batch.tp, batch.order
            );
            return;
        };
        pipe.in_flight -= 1;
    }

    /// Whether a batch of `batch`'s partition closed before it is still unresolved: an
    /// OUT_OF_ORDER_SEQUENCE_NUMBER then only says that one is not written yet.
    pub fn earlier_unresolved(&self, batch: &ClosedBatch) -> bool {
        self.by_tp
            .get(&batch.tp)
            .and_then(|p| p.unresolved.first())
            .is_some_and(|first| *first < batch.order)
    }

    /// The first waiting batch of every partition with nothing in flight.
    pub fn resendable(&self) -> impl Iterator<Item = &ClosedBatch> {
        self.by_tp
            .values()
            .filter(|p| p.in_flight == 0)
            .filter_map(|p| p.waiting.values().next())
    }

    /// Takes `tp`'s first waiting batch (to send it).
    pub fn take_resend(&mut self, tp: &TopicPartition) -> Option<ClosedBatch> {
        let pipe = self.by_tp.get_mut(tp)?;
        pipe.waiting.pop_first().map(|(_, b)| b)
    }

    /// Every waiting batch.
    pub fn waiting(&self) -> impl Iterator<Item = &ClosedBatch> {
        self.by_tp.values().flat_map(|p| p.waiting.values())
    }

    /// Takes the waiting batches created before `created_before_ms` (their delivery timeout
    /// ran out); they stay unresolved until [`Pipes::resolved_waiting`].
    pub fn take_expired(&mut self, created_before_ms: u64) -> Vec<ClosedBatch> {
        let mut out = Vec::new();
        for pipe in self.by_tp.values_mut() {
            let due: Vec<u64> = pipe
                .waiting
                .iter()
                .filter(|(_, b)| b.created_ms < created_before_ms)
                .map(|(order, _)| *order)
                .collect();
            out.extend(due.into_iter().filter_map(|o| pipe.waiting.remove(&o)));
        }
        out
    }

    /// A waiting batch taken by [`Pipes::take_expired`] failed for good.
    pub fn resolved_waiting(&mut self, batch: &ClosedBatch) {
        if let Some(pipe) = self.by_tp.get_mut(&batch.tp) {
            pipe.unresolved.remove(&batch.order);
            if pipe.is_empty() {
                self.by_tp.remove(&batch.tp);
            }
        }
    }

    /// A taken resend goes back unsent (no room, no producer id yet).
    pub fn put_back(&mut self, batch: ClosedBatch) {
        let pipe = self.by_tp.entry(batch.tp.clone()).or_default();
        pipe.waiting.insert(batch.order, batch);
    }
}

#[cfg(test)]
#[path = "pipes_tests.rs"]
mod tests;
