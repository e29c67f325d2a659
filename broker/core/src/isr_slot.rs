//! The leader's one ISR-change slot: at most one AlterPartition in flight per partition, and how
//! each answer — or its absence, or newer metadata — ends it (Kafka's `PendingExpandIsr` /
//! `PendingShrinkIsr` states and `AlterPartitionManager`'s one item per partition).
//!
//! Owns: the proposed ISR, the partition epoch it was computed from, and where the change
//! stands ([`SlotState`]). Promises:
//! - the slot is taken from [`IsrSlot::begin`] until an answer, a lost answer of a change that
//!   can no longer commit, or a newer partition state frees it: a second change is never
//!   proposed while the first one's request may still reach the controller;
//! - the proposed members hold the watermark ([`IsrSlot::holding`]) for as long as the
//!   controller might still commit the change, or has refused it without saying how the
//!   partition stands (a stale refusal). A committed state newer than the change's base says
//!   that, since the controller commits a request only at the partition epoch it names.
//!
//! Never does: decide what to propose (`isr_change`) or compute the watermark (`replica`).

/// Where the change in the slot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Sent; its fate is unknown and its answer is awaited. Its members hold the watermark.
    InFlight,
    /// Its answer was lost (timeout, controller change): its fate is unknown, its members hold
    /// the watermark, and it is to be sent again as it was ([`IsrSlot::resend`]).
    Unanswered,
    /// Refused as stale (leader, partition or broker epoch): not applied, but the partition's
    /// state is one this leader has not seen — it may even be deposed. Its members hold the
    /// watermark and nothing is resent until a newer partition state arrives.
    AwaitsMetadata,
    /// A newer committed partition state arrived while its request was out: it can no longer
    /// commit, and holds nothing; the slot stays taken until its answer comes or is lost, so
    /// that the leader never awaits two requests at once.
    Superseded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    isr: Vec<i32>,
    base_epoch: i32,
    state: SlotState,
}

/// The slot (empty when no change is in flight).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsrSlot {
    change: Option<Change>,
}

impl IsrSlot {
    /// Whether a change occupies the slot (then nothing else may be proposed).
    pub fn is_taken(&self) -> bool {
        self.change.is_some()
    }

    /// The proposed ISR while it holds the watermark (in flight, or refused as stale).
    pub fn holding(&self) -> Option<&[i32]> {
        self.change
            .as_ref()
            .filter(|c| c.state != SlotState::Superseded)
            .map(|c| c.isr.as_slice())
    }

    pub fn state(&self) -> Option<SlotState> {
        self.change.as_ref().map(|c| c.state)
    }

    /// The partition epoch the change was computed from.
    pub fn base_epoch(&self) -> Option<i32> {
        self.change.as_ref().map(|c| c.base_epoch)
    }

    /// Whether an answer to the request from `base_epoch` (any copy of it) is awaited.
    pub fn awaits_answer_from(&self, base_epoch: i32) -> bool {
        self.change
            .as_ref()
            .is_some_and(|c| c.base_epoch == base_epoch && c.state != SlotState::AwaitsMetadata)
    }

    /// The change whose answer was lost, to send again as it was (then it is in flight again).
    pub fn resend(&mut self) -> Option<(&[i32], i32)> {
        let change = self
            .change
            .as_mut()
            .filter(|c| c.state == SlotState::Unanswered)?;
        change.state = SlotState::InFlight;
        Some((change.isr.as_slice(), change.base_epoch))
    }

    /// A change computed from `base_epoch` was sent. Panics if the slot is taken.
    pub fn begin(&mut self, isr: Vec<i32>, base_epoch: i32) {
        assert!(
            self.change.is_none(),
            "a second ISR change {isr:?} while {:?} is in flight",
            self.change
        );
        self.change = Some(Change {
            isr,
            base_epoch,
            state: SlotState::InFlight,
        });
    }

    /// The controller answered (committed it, or refused it saying the partition stands where
    /// it was computed): the slot is free.
    pub fn free(&mut self) {
        self.change = None;
    }

    /// The controller refused it as stale. Panics if nothing awaits an answer.
    pub fn on_stale_refusal(&mut self) {
        let change = self.change.as_mut().expect("a refusal answers a change");
        match change.state {
            SlotState::InFlight | SlotState::Unanswered => change.state = SlotState::AwaitsMetadata,
            SlotState::Superseded => self.change = None,
            SlotState::AwaitsMetadata => panic!("a second answer to a refused change"),
        }
    }

    /// No answer came in time: a change that may still commit stays, to be resent; one that
    /// cannot is done.
    pub fn on_lost(&mut self) {
        let Some(change) = &mut self.change else {
            return;
        };
        match change.state {
            SlotState::InFlight => change.state = SlotState::Unanswered,
            SlotState::Superseded => self.change = None,
            SlotState::Unanswered | SlotState::AwaitsMetadata => {}
        }
    }

    /// A committed partition state at `partition_epoch` with these `replicas` was applied.
    pub fn on_partition_state(&mut self, partition_epoch: i32, replicas: &[i32]) {
        let Some(change) = &mut self.change else {
            return;
        };
        if partition_epoch > change.base_epoch {
            match change.state {
                // Its request is out: wait for that answer (or its loss).
                SlotState::InFlight => change.state = SlotState::Superseded,
                // Nothing is awaited: done.
                SlotState::Unanswered | SlotState::AwaitsMetadata => self.change = None,
                SlotState::Superseded => {}
            }
        } else {
            // A member that left the replicas leaves the proposal too.
            change.isr.retain(|b| replicas.contains(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_flight_change_holds_until_answered_and_survives_a_lost_answer() {
        let mut s = IsrSlot::default();
        s.begin(vec![0, 1, 2], 7);
        assert_eq!(s.holding(), Some(&[0, 1, 2][..]));
        s.on_lost();
        assert_eq!(s.state(), Some(SlotState::Unanswered));
        assert_eq!(s.holding(), Some(&[0, 1, 2][..]), "it may have committed");
        assert_eq!(s.resend(), Some((&[0, 1, 2][..], 7)));
        assert_eq!(s.resend(), None, "in flight again");
        s.on_partition_state(7, &[0, 1]);
        assert_eq!(s.holding(), Some(&[0, 1][..]), "a member left the replicas");
        assert!(s.awaits_answer_from(7) && !s.awaits_answer_from(6));
        s.free();
        assert!(!s.is_taken());
    }

    #[test]
    fn a_stale_refusal_holds_until_newer_metadata() {
        let mut s = IsrSlot::default();
        s.begin(vec![0, 1, 2], 7);
        s.on_stale_refusal();
        assert_eq!(s.state(), Some(SlotState::AwaitsMetadata));
        assert_eq!(
            s.holding(),
            Some(&[0, 1, 2][..]),
            "still holds the watermark"
        );
        assert_eq!(s.resend(), None);
        assert!(!s.awaits_answer_from(7), "answered already");
        s.on_partition_state(7, &[0, 1, 2]);
        assert!(s.is_taken(), "not newer");
        s.on_partition_state(8, &[0, 1, 2]);
        assert!(!s.is_taken());
    }

    #[test]
    fn a_newer_state_supersedes_an_in_flight_change_until_its_answer() {
        let mut s = IsrSlot::default();
        s.begin(vec![0, 1, 2], 7);
        s.on_partition_state(8, &[0, 1, 2]);
        assert_eq!(s.state(), Some(SlotState::Superseded));
        assert_eq!(s.holding(), None, "it can no longer commit");
        assert!(s.is_taken() && s.awaits_answer_from(7));
        s.on_lost();
        assert_eq!(s.resend(), None);
        assert!(
            !s.is_taken(),
            "a lost answer of a superseded change ends it"
        );

        s.begin(vec![0, 1], 8);
        s.on_partition_state(9, &[0, 1, 2]);
        s.on_stale_refusal();
        assert!(!s.is_taken(), "so does its answer");

        // A newer state while an unanswered change waits to be resent ends it at once: no
        // answer is awaited, and it can no longer commit.
        s.begin(vec![0, 1, 2], 9);
        s.on_lost();
        s.on_partition_state(10, &[0, 1, 2]);
        assert!(!s.is_taken());
    }
}
