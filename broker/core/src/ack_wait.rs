//! acks=all on one partition's leader: the admission rule before an append, and the requests
//! waiting for the high watermark after it (REPLICATION.md "acks", DESIGN §1).
//!
//! Owns: [`AckWaiters`] — a bounded table of waiting produce requests (request id, required
//! offset = the batch's end, deadline), released with one code each:
//! - the HW reached the required offset → NONE (acknowledged);
//! - the ISR fell below `min.insync.replicas` while waiting → NOT_ENOUGH_REPLICAS_AFTER_APPEND
//!   (the data is written; only an idempotent producer's retry is safe);
//! - the deadline passed → REQUEST_TIMED_OUT;
//! - this broker stopped leading → NOT_LEADER_OR_FOLLOWER (the new leader may have truncated it).
//!
//! Admission ([`AckWaiters::admit`]): acks=all with the ISR below min ISR → NOT_ENOUGH_REPLICAS and
//! nothing appended; a full table refuses too, before the append, so a waiter is never dropped
//! after its data is written. Admission reserves the slot the waiter later takes.
//!
//! Cheap: waiters are kept ordered by required offset and by deadline, so each event touches only
//! the waiters it releases (O(released · log n)), never scans the table. Holds no lock and costs
//! no task: the caller keeps one table per partition and feeds it events.
//!
//! Never does: read a clock (`now_ms` comes in), or decide the HW (`replica`).

use std::collections::{BTreeMap, BTreeSet};

use crate::ErrorCode;

/// The most acks=all requests one partition holds waiting (with slots reserved for appends in
/// progress). At 1 ms per replication round trip this is seconds of a fast producer's batches.
pub const ACK_WAITERS_MAX: usize = 4096;

/// A produce request's `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: no answer.
    None,
    /// acks=1: answered after the leader's append.
    Leader,
    /// acks=all (-1): answered when the HW covers the batch.
    All,
}

impl Acks {
    /// From the wire's `acks`; anything but 0, 1 and -1 is INVALID_REQUIRED_ACKS.
    pub fn from_wire(acks: i16) -> Result<Acks, ErrorCode> {
        match acks {
            0 => Ok(Acks::None),
            1 => Ok(Acks::Leader),
            -1 => Ok(Acks::All),
            _ => Err(ErrorCode::InvalidRequiredAcks),
        }
    }
}

/// What admission decided for a request that may be appended.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Append and answer as acks says (0 or 1).
    NoWait,
    /// Append, then [`AckWaiters::register`] with this slot (or [`AckWaiters::cancel`] it if the
    /// append failed).
    Wait(Slot),
}

/// A reserved place in the table. Not `Clone`: one slot, one waiter.
#[derive(Debug, PartialEq, Eq)]
pub struct Slot {
    _private: (),
}

/// One request released, with the code to answer it with (`ErrorCode::None`: acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub request_id: u64,
    pub result: ErrorCode,
}

/// The acks=all waiters of one partition (module docs).
#[derive(Debug, Clone)]
pub struct AckWaiters {
    waiters_max: usize,
    reserved: usize,
    /// (required offset, request id) → deadline.
    by_offset: BTreeMap<(u64, u64), u64>,
    /// (deadline, request id) → required offset.
    by_deadline: BTreeMap<(u64, u64), u64>,
    ids: BTreeSet<u64>,
}

impl Default for AckWaiters {
    fn default() -> Self {
        Self::new(ACK_WAITERS_MAX)
    }
}

impl AckWaiters {
    pub fn new(waiters_max: usize) -> Self {
        assert!(waiters_max > 0);
        AckWaiters {
            waiters_max,
            reserved: 0,
            by_offset: BTreeMap::new(),
            by_deadline: BTreeMap::new(),
            ids: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_offset.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_offset.is_empty()
    }

    /// Before an append: may it go ahead, and must its answer wait? `has_min_isr` is
    /// [`crate::replica::ReplicaState::has_min_isr`]. A full table answers REQUEST_TIMED_OUT
    /// (retriable, and nothing was written).
    pub fn admit(&mut self, acks: Acks, has_min_isr: bool) -> Result<Admission, ErrorCode> {
        match acks {
            Acks::None | Acks::Leader => Ok(Admission::NoWait),
            Acks::All if !has_min_isr => Err(ErrorCode::NotEnoughReplicas),
            Acks::All if self.len() + self.reserved >= self.waiters_max => {
                Err(ErrorCode::RequestTimedOut)
            }
            Acks::All => {
                self.reserved += 1;
                Ok(Admission::Wait(Slot { _private: () }))
            }
        }
    }

    /// The append for a reserved slot failed: nothing waits.
    pub fn cancel(&mut self, slot: Slot) {
        let Slot { _private: () } = slot;
        assert!(self.reserved > 0, "cancelled a slot never reserved");
        self.reserved -= 1;
    }

    /// After the append: `request_id` waits until the HW reaches `required_offset` (the batch's
    /// last offset + 1) or `deadline_ms`. `high_watermark` is the current one: a batch already
    /// covered is released at once (returned), as is one whose deadline has passed.
    ///
    /// Panics on a request id already waiting (ids are the caller's, unique per partition).
    pub fn register(
        &mut self,
        slot: Slot,
        request_id: u64,
        required_offset: u64,
        deadline_ms: u64,
        high_watermark: u64,
        now_ms: u64,
    ) -> Option<Released> {
        let Slot { _private: () } = slot;
        assert!(self.reserved > 0, "registered without a reserved slot");
        self.reserved -= 1;
        if required_offset <= high_watermark {
            return Some(Released {
                request_id,
                result: ErrorCode::None,
            });
        }
        if now_ms >= deadline_ms {
            return Some(Released {
                request_id,
                result: ErrorCode::RequestTimedOut,
            });
        }
        assert!(
            self.ids.insert(request_id),
            "request {request_id} waits twice"
        );
        self.by_offset
            .insert((required_offset, request_id), deadline_ms);
        self.by_deadline
            .insert((deadline_ms, request_id), required_offset);
        self.assert_invariants();
        None
    }

    /// The HW advanced to `high_watermark`: every waiter it covers is acknowledged, in offset
    /// order.
    pub fn on_high_watermark(&mut self, high_watermark: u64) -> Vec<Released> {
        let mut out = Vec::new();
        while let Some((&(required, id), &deadline)) = self.by_offset.first_key_value() {
            if required > high_watermark {
                break;
            }
            self.remove(required, id, deadline);
            out.push(Released {
                request_id: id,
                result: ErrorCode::None,
            });
        }
        out
    }

    /// `now_ms` passed some deadlines: those waiters time out, earliest first.
    pub fn on_tick(&mut self, now_ms: u64) -> Vec<Released> {
        let mut out = Vec::new();
        while let Some((&(deadline, id), &required)) = self.by_deadline.first_key_value() {
            if deadline > now_ms {
                break;
            }
            self.remove(required, id, deadline);
            out.push(Released {
                request_id: id,
                result: ErrorCode::RequestTimedOut,
            });
        }
        out
    }

    /// The next deadline, for the caller's timer.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        self.by_deadline.first_key_value().map(|(&(d, _), _)| d)
    }

    /// The committed ISR fell below min ISR: every waiter gets NOT_ENOUGH_REPLICAS_AFTER_APPEND
    /// (call [`Self::on_high_watermark`] first, so that what the HW already covers is
    /// acknowledged).
    pub fn on_below_min_isr(&mut self) -> Vec<Released> {
        self.release_all(ErrorCode::NotEnoughReplicasAfterAppend)
    }

    /// This broker no longer leads the partition: every waiter gets NOT_LEADER_OR_FOLLOWER.
    pub fn on_leadership_lost(&mut self) -> Vec<Released> {
        self.release_all(ErrorCode::NotLeaderOrFollower)
    }

    fn release_all(&mut self, result: ErrorCode) -> Vec<Released> {
        let out = self
            .by_offset
            .keys()
            .map(|&(_, request_id)| Released { request_id, result })
            .collect();
        self.by_offset.clear();
        self.by_deadline.clear();
        self.ids.clear();
        out
    }

    fn remove(&mut self, required: u64, id: u64, deadline: u64) {
        let a = self.by_offset.remove(&(required, id));
        let b = self.by_deadline.remove(&(deadline, id));
        let c = self.ids.remove(&id);
        assert!(
            a == Some(deadline) && b == Some(required) && c,
            "waiter {id} indexed inconsistently"
        );
    }

    fn assert_invariants(&self) {
        assert_eq!(self.by_offset.len(), self.by_deadline.len());
        assert_eq!(self.by_offset.len(), self.ids.len());
        assert!(self.by_offset.len() + self.reserved <= self.waiters_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slot(w: &mut AckWaiters) -> Slot {
        match w.admit(Acks::All, true) {
            Ok(Admission::Wait(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    fn ok(id: u64) -> Released {
        Released {
            request_id: id,
            result: ErrorCode::None,
        }
    }

    #[test]
    fn admission() {
        let mut w = AckWaiters::new(2);
        assert_eq!(w.admit(Acks::Leader, false), Ok(Admission::NoWait));
        assert_eq!(w.admit(Acks::None, false), Ok(Admission::NoWait));
        assert_eq!(w.admit(Acks::All, false), Err(ErrorCode::NotEnoughReplicas));
        let a = slot(&mut w);
        let b = slot(&mut w);
        assert_eq!(
            w.admit(Acks::All, true),
            Err(ErrorCode::RequestTimedOut),
            "full"
        );
        w.cancel(a);
        assert!(w.register(b, 1, 10, 100, 0, 0).is_none());
        let c = slot(&mut w);
        assert!(w.register(c, 2, 5, 100, 0, 0).is_none());
        assert_eq!(w.admit(Acks::All, true), Err(ErrorCode::RequestTimedOut));
        assert_eq!(Acks::from_wire(-1), Ok(Acks::All));
        assert_eq!(Acks::from_wire(2), Err(ErrorCode::InvalidRequiredAcks));
    }

    #[test]
    fn each_event_releases_with_its_code() {
        let mut w = AckWaiters::default();
        for (id, required, deadline) in [(1, 10, 500), (2, 20, 300), (3, 30, 400), (4, 40, 900)] {
            let s = slot(&mut w);
            assert!(w.register(s, id, required, deadline, 5, 0).is_none());
        }
        let s = slot(&mut w);
        assert_eq!(
            w.register(s, 9, 5, 100, 5, 0),
            Some(ok(9)),
            "already covered"
        );
        assert_eq!(w.on_high_watermark(19), vec![ok(1)]);
        assert_eq!(w.next_deadline_ms(), Some(300));
        assert_eq!(
            w.on_tick(400),
            vec![
                Released {
                    request_id: 2,
                    result: ErrorCode::RequestTimedOut
                },
                Released {
                    request_id: 3,
                    result: ErrorCode::RequestTimedOut
                }
            ]
        );
        assert_eq!(
            w.on_below_min_isr(),
            vec![Released {
                request_id: 4,
                result: ErrorCode::NotEnoughReplicasAfterAppend
            }]
        );
        let s = slot(&mut w);
        w.register(s, 5, 50, 900, 40, 0);
        assert_eq!(
            w.on_leadership_lost(),
            vec![Released {
                request_id: 5,
                result: ErrorCode::NotLeaderOrFollower
            }]
        );
        assert!(w.is_empty());
    }

    proptest! {
        /// Against a naive list: every waiter is released exactly once, with the code of the
        /// first event that applies to it.
        #[test]
        fn waiters_match_a_naive_model(events in proptest::collection::vec((0u8..5, 0u64..100, 0u64..100), 0..80)) {
            let mut w = AckWaiters::new(16);
            let mut model: Vec<(u64, u64, u64)> = Vec::new(); // (id, required, deadline)
            let (mut hw, mut now, mut next_id) = (0u64, 0u64, 0u64);
            let mut released = BTreeSet::new();
            for (kind, a, b) in events {
                let mut got: Vec<Released> = Vec::new();
                let mut want: Vec<Released> = Vec::new();
                match kind {
                    0 | 1 => {
                        let (required, deadline) = (hw + a % 20, now + b);
                        match w.admit(Acks::All, true) {
                            Ok(Admission::Wait(s)) => {
                                next_id += 1;
                                if let Some(r) = w.register(s, next_id, required, deadline, hw, now) {
                                    got.push(r);
                                    want.push(Released { request_id: next_id, result: if required <= hw { ErrorCode::None } else { ErrorCode::RequestTimedOut } });
                                } else {
                                    model.push((next_id, required, deadline));
                                }
                            }
                            Ok(Admission::NoWait) => prop_assert!(false),
                            Err(e) => { prop_assert_eq!(e, ErrorCode::RequestTimedOut); prop_assert_eq!(model.len(), 16); }
                        }
                    }
                    2 => {
                        hw += a % 10;
                        got = w.on_high_watermark(hw);
                        model.sort_by_key(|m| (m.1, m.0));
                        want = model.iter().filter(|m| m.1 <= hw).map(|m| Released { request_id: m.0, result: ErrorCode::None }).collect();
                        model.retain(|m| m.1 > hw);
                    }
                    3 => {
                        now += b % 30;
                        got = w.on_tick(now);
                        model.sort_by_key(|m| (m.2, m.0));
                        want = model.iter().filter(|m| m.2 <= now).map(|m| Released { request_id: m.0, result: ErrorCode::RequestTimedOut }).collect();
                        model.retain(|m| m.2 > now);
                    }
                    _ => {
                        got = w.on_below_min_isr();
                        model.sort_by_key(|m| (m.1, m.0));
                        want = model.iter().map(|m| Released { request_id: m.0, result: ErrorCode::NotEnoughReplicasAfterAppend }).collect();
                        model.clear();
                    }
                }
                prop_assert_eq!(&got, &want);
                for r in got {
                    prop_assert!(released.insert(r.request_id), "released twice");
                }
                prop_assert_eq!(w.len(), model.len());
                prop_assert_eq!(w.next_deadline_ms(), model.iter().map(|m| m.2).min());
            }
        }
    }
}
