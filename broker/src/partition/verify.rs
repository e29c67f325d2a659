//! KIP-890 part 1 on the partition's side: a producer's first transactional batch of a
//! transaction on this partition is appended only if the transaction's coordinator said it
//! added the partition to an Ongoing transaction of that producer id and epoch
//! (`spool_core::txn::verify`; the call itself is `crate::txn_verify`).
//!
//! The check is made before the append, outside `append_turn` (it is a call to another core or
//! broker), so the partition remembers each verification in flight as a [`Verified`] token.
//! A marker for the producer appended meanwhile forgets its tokens: the batch verified before
//! the marker belongs to the transaction that marker ended, and is refused under the turn
//! (INVALID_TXN_STATE) instead of opening a new transaction that no coordinator knows — the
//! hanging transaction, and the "late produce after abort" Jepsen found in Bufstream.
//!
//! Promises: a client's transactional batch is appended only while its producer has an open
//! transaction here at the batch's epoch, or under a token that was verified and not forgotten
//! since. Bounded: one token per produce in flight, removed when that produce ends.

use std::collections::HashMap;

use bytes::Bytes;
use spool_protocol::ErrorCode;
use spool_storage::batch::BatchHeader;

use super::Partition;

/// One produce's verification of (`producer_id`, `producer_epoch`) on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub producer_id: i64,
    pub producer_epoch: i16,
    token: u64,
}

/// The verifications in flight, by producer id (each produce its own token).
#[derive(Debug, Default)]
pub(super) struct Verifications {
    by_producer: HashMap<i64, Vec<(i16, u64)>>,
    next_token: u64,
}

impl Verifications {
    fn begin(&mut self, producer_id: i64, producer_epoch: i16) -> Verified {
        self.next_token += 1;
        let token = self.next_token;
        self.by_producer
            .entry(producer_id)
            .or_default()
            .push((producer_epoch, token));
        Verified {
            producer_id,
            producer_epoch,
            token,
        }
    }

    fn end(&mut self, v: Verified) {
        if let Some(tokens) = self.by_producer.get_mut(&v.producer_id) {
            tokens.retain(|&(_, t)| t != v.token);
            if tokens.is_empty() {
                self.by_producer.remove(&v.producer_id);
            }
        }
    }

    fn holds(&self, v: Verified) -> bool {
        self.by_producer
            .get(&v.producer_id)
            .is_some_and(|ts| ts.contains(&(v.producer_epoch, v.token)))
    }

    fn forget(&mut self, producer_id: i64) {
        self.by_producer.remove(&producer_id);
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.by_producer.values().map(Vec::len).sum()
    }
}

impl Partition {
    /// The producer of `records`' transactional data batches, when it has no open transaction
    /// here at their epoch: the coordinator must verify it first. INVALID_RECORD when the
    /// transactional batches name more than one producer id and epoch (a producer sends its
    /// own batches only). Headers that do not parse are left to the append's validation.
    pub async fn needs_verification(
        &self,
        records: &Bytes,
    ) -> Result<Option<(i64, i16)>, ErrorCode> {
        let mut producer: Option<(i64, i16)> = None;
        let mut at = 0usize;
        while at < records.len() {
            let Ok(h) = BatchHeader::parse(&records[at..]) else {
                break;
            };
            at = at.saturating_add(h.total_bytes());
            if !h.is_transactional() || h.is_control() {
                continue;
            }
            let this = (h.producer_id, h.producer_epoch);
            match producer {
                None => producer = Some(this),
                Some(p) if p == this => {}
                Some(_) => return Err(ErrorCode::InvalidRecord),
            }
        }
        let Some((producer_id, producer_epoch)) = producer else {
            return Ok(None);
        };
        if self.ensure_txn_state().await.is_err() {
            // The produce's own rebuild reports the storage error.
            return Ok(None);
        }
        Ok((!self.txn_open_at(producer_id, producer_epoch))
            .then_some((producer_id, producer_epoch)))
    }

    fn txn_open_at(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.txns
            .borrow()
            .open_txn(producer_id)
            .is_some_and(|o| o.producer_epoch == producer_epoch)
    }

    /// Remembers a verification about to be asked for; [`Partition::end_verification`] when
    /// the produce is over, whatever its outcome.
    pub fn begin_verification(&self, producer_id: i64, producer_epoch: i16) -> Verified {
        self.verifications
            .borrow_mut()
            .begin(producer_id, producer_epoch)
    }

    pub fn end_verification(&self, v: Verified) {
        self.verifications.borrow_mut().end(v);
    }

    /// Whether a client's transactional data batch `h` may be appended (under `append_turn`):
    /// its producer's transaction is open here at its epoch, or `verified` vouches for it.
    pub(super) fn may_append_transactional(
        &self,
        h: &BatchHeader,
        verified: Option<Verified>,
    ) -> bool {
        if self.txn_open_at(h.producer_id, h.producer_epoch) {
            return true;
        }
        verified.is_some_and(|v| {
            v.producer_id == h.producer_id
                && v.producer_epoch == h.producer_epoch
                && self.verifications.borrow().holds(v)
        })
    }

    /// A marker of `producer_id` was appended: the verifications in flight speak of the
    /// transaction it ended.
    pub(super) fn forget_verifications(&self, producer_id: i64) {
        self.verifications.borrow_mut().forget(producer_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_until_its_produce_ends_or_a_marker_forgets_it() {
        let mut v = Verifications::default();
        let a = v.begin(7, 0);
        let b = v.begin(7, 0);
        assert_ne!(a, b);
        assert!(v.holds(a) && v.holds(b));
        v.end(a);
        assert!(!v.holds(a) && v.holds(b));
        v.forget(7);
        assert!(!v.holds(b), "a marker forgets every token of its producer");
        let c = v.begin(7, 1);
        assert!(v.holds(c));
        assert!(
            !v.holds(Verified {
                producer_epoch: 0,
                ..c
            }),
            "another epoch"
        );
        v.end(c);
        v.end(b);
        assert_eq!(v.in_flight(), 0, "bounded by the produces in flight");
    }
}
