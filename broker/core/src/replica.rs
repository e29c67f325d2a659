//! Replica state of one partition on its leader: leader epoch, replica set, in-sync replicas
//! (ISR), each follower's progress, and the high watermark (DESIGN §1, §7).
//!
//! Pure (DESIGN §3): inputs are log-end reports — the leader's own, in the form its durability
//! makes safe to expose (the fdatasynced offset under `durability = fsync`), and each follower's
//! from its fetches, with the time they arrived as `now_ms` — and the outputs are the high
//! watermark and which followers have fallen out of sync. Consumers read only below the high
//! watermark, so nothing they see can vanish in a failover.
//!
//! Promises, asserted (TigerBeetle's pair assertions, on both sides of every change):
//! - the ISR always contains the leader, and is a subset of the replicas;
//! - the high watermark never decreases;
//! - the high watermark never passes the smallest log end in the ISR;
//! - the high watermark does not advance while the ISR is smaller than `min.insync.replicas`
//!   (capped by the replication factor, so one replica alone moves it): Kafka's KIP-966 rule, so
//!   that what a consumer sees was on enough replicas.
//!
//! Never does: change the ISR by itself. Every ISR change goes through the controller (a
//! partition-change record); this state reports candidates ([`ReplicaState::out_of_sync`]), holds
//! the one change in flight ([`ReplicaState::begin_isr_change`]; `isr_change` decides which) and
//! takes the committed result ([`ReplicaState::on_partition_change`]).
//!
//! While a change is in flight the watermark is computed over the "maximal ISR" (Kafka's
//! `maximalIsr`): the committed ISR plus any member the pending change adds. A follower being
//! added already holds the watermark, so that the moment the controller commits it, every offset
//! below the watermark is on it; a member being removed keeps holding it until the removal is
//! committed. `min.insync.replicas` counts the committed ISR only.

use std::collections::BTreeMap;

use crate::isr_slot::IsrSlot;

/// What the leader knows of one follower (every replica but the leader has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower has everything below this offset (its last fetch offset).
    pub log_end_offset: u64,
    /// The last time the follower's log end reached the leader's (Kafka's
    /// `lastCaughtUpTimeMs`): a follower whose value is older than `replica.lag.time.max.ms`
    /// leaves the ISR.
    pub last_caught_up_ms: u64,
    /// When its last fetch arrived.
    pub last_fetch_ms: u64,
    /// The leader's log end when that last fetch was read (Kafka's `lastFetchLeaderLogEndOffset`):
    /// a follower that reaches it by its next fetch was caught up as of that earlier fetch, even
    /// if the leader appended meanwhile — without this, a follower of a busy leader would never
    /// count as caught up.
    pub last_fetch_leader_log_end: u64,
    /// The broker epoch its last fetch carried (KIP-903), `None` until one does or when the
    /// request version has none: an ISR expansion requires it to match the registration, so a
    /// stale fetch from before a restart with an empty disk cannot put it back in the ISR.
    pub broker_epoch: Option<i64>,
    /// The log start its last fetch reported (Kafka's replica `logStartOffset`): DeleteRecords
    /// answers once every ISR member's is at or past the deleted offset. 0 until it reports.
    pub log_start_offset: u64,
}

impl FollowerState {
    fn unknown(now_ms: u64) -> Self {
        FollowerState {
            // Unknown until it fetches; only ISR members count for the watermark, and an ISR
            // follower that has not fetched yet holds it where it is.
            log_end_offset: 0,
            last_caught_up_ms: now_ms,
            last_fetch_ms: now_ms,
            last_fetch_leader_log_end: 0,
            broker_epoch: None,
            log_start_offset: 0,
        }
    }
}

/// A partition's leadership and replica set as the controller committed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

impl Leadership {
    /// One replica, leading itself: the single-node case.
    pub fn sole(broker_id: i32, leader_epoch: i32) -> Self {
        Leadership {
            leader_id: broker_id,
            leader_epoch,
            partition_epoch: 0,
            replicas: vec![broker_id],
            isr: vec![broker_id],
        }
    }
}

#[derive(Debug, Clone)]
pub struct ReplicaState {
    leadership: Leadership,
    /// `min.insync.replicas` capped by the replication factor (at least 1).
    required_isr: usize,
    /// The leader's exposable log end.
    leader_log_end: u64,
    followers: BTreeMap<i32, FollowerState>,
    high_watermark: u64,
    /// The one ISR change in flight, if any (`isr_slot`).
    isr_slot: IsrSlot,
    /// The simulator's planted bug (`crate::planted`), if any.
    #[cfg(feature = "planted-bugs")]
    planted: Option<crate::planted::PlantedBug>,
}

impl ReplicaState {
    /// The state of a leader whose exposable log end is `start_offset` at `now_ms`.
    ///
    /// Panics if `leadership` breaks the invariants (ISR ∌ leader, ISR ⊄ replicas): the
    /// controller never commits such a record, so one here is a bug upstream.
    pub fn new(
        leadership: Leadership,
        min_insync_replicas: usize,
        start_offset: u64,
        now_ms: u64,
    ) -> Self {
        let followers = leadership
            .replicas
            .iter()
            .filter(|&&b| b != leadership.leader_id)
            .map(|&b| (b, FollowerState::unknown(now_ms)))
            .collect();
        let required_isr = min_insync_replicas.clamp(1, leadership.replicas.len().max(1));
        let state = Self {
            leadership,
            required_isr,
            leader_log_end: start_offset,
            followers,
            // A new leader starts from what it may expose; followers then hold it there until
            // they report (the watermark is never lowered to their unknown ends).
            high_watermark: start_offset,
            isr_slot: IsrSlot::default(),
            #[cfg(feature = "planted-bugs")]
            planted: None,
        };
        state.assert_invariants();
        state
    }

    /// A replica that was following becomes the leader with `log_end_offset` and the watermark
    /// it learned as a follower. Unlike [`Self::new`], the watermark does not jump to the log
    /// end: the records above it may be missing from other ISR members (the new leader may be
    /// ahead of them), and exposing them now would let consumers read records that a second
    /// failover loses. It rises as the followers report (Kafka: a new leader's HW may lag, and
    /// ListOffsets answers OFFSET_NOT_AVAILABLE meanwhile).
    pub fn for_new_leader(
        leadership: Leadership,
        min_insync_replicas: usize,
        log_end_offset: u64,
        high_watermark: u64,
        now_ms: u64,
    ) -> Self {
        assert!(
            high_watermark <= log_end_offset,
            "watermark {high_watermark} past the log end {log_end_offset}"
        );
        let mut state = Self::new(leadership, min_insync_replicas, high_watermark, now_ms);
        state.on_leader_log_end(log_end_offset);
        state
    }

    /// The single-node case: one replica, in sync with itself.
    pub fn sole_leader(broker_id: i32, leader_epoch: i32, start_offset: u64) -> Self {
        Self::new(
            Leadership::sole(broker_id, leader_epoch),
            1,
            start_offset,
            0,
        )
    }

    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }

    /// Selects a planted bug for this leader (the simulator's proof that its checks fail).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: Option<crate::planted::PlantedBug>) {
        self.planted = bug;
        self.recompute_high_watermark();
    }

    /// Planted `hw-before-isr`: the watermark follows the leader's own log end.
    fn hw_before_isr(&self) -> bool {
        #[cfg(feature = "planted-bugs")]
        return self.planted == Some(crate::planted::PlantedBug::HwBeforeIsr);
        #[cfg(not(feature = "planted-bugs"))]
        false
    }

    /// Planted `keep-old-incarnation`: a restarted follower keeps its previous log end.
    fn planted_keep_old_incarnation(&self) -> bool {
        #[cfg(feature = "planted-bugs")]
        return self.planted == Some(crate::planted::PlantedBug::KeepOldIncarnation);
        #[cfg(not(feature = "planted-bugs"))]
        false
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leadership.leader_epoch
    }

    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    pub fn isr(&self) -> &[i32] {
        &self.leadership.isr
    }

    /// Whether acks=all may be accepted now: the ISR has at least `min.insync.replicas` members.
    pub fn has_min_isr(&self) -> bool {
        self.leadership.isr.len() >= self.required_isr
    }

    pub fn follower(&self, broker_id: i32) -> Option<&FollowerState> {
        self.followers.get(&broker_id)
    }

    /// Whether a consumer's ListOffsets may be answered (Kafka's rule): not while the watermark
    /// is below the start of this leader's own epoch (`leader_epoch_start_offset`, from its epoch
    /// cache) — a new leader's watermark lags, and an answer from it could point below what the
    /// old leader already exposed. OFFSET_NOT_AVAILABLE is retriable.
    pub fn check_list_offsets(
        &self,
        leader_epoch_start_offset: u64,
    ) -> Result<(), crate::ErrorCode> {
        if self.high_watermark < leader_epoch_start_offset {
            Err(crate::ErrorCode::OffsetNotAvailable)
        } else {
            Ok(())
        }
    }

    /// The leader's exposable log end, as last reported.
    pub fn leader_log_end(&self) -> u64 {
        self.leader_log_end
    }

    /// `min.insync.replicas` as this partition applies it (capped by the replication factor).
    pub fn required_isr(&self) -> usize {
        self.required_isr
    }

    /// The topic's `min.insync.replicas` changed (AlterConfigs): it applies from the next
    /// produce and watermark decision on, capped by the replication factor as at creation.
    /// Returns whether it changed (a smaller one may let the watermark advance: release).
    pub fn set_min_insync_replicas(&mut self, min_insync_replicas: usize) -> bool {
        let required = min_insync_replicas.clamp(1, self.leadership.replicas.len().max(1));
        let changed = required != self.required_isr;
        self.required_isr = required;
        changed
    }

    /// The proposed ISR while it holds the watermark (in flight, or refused as stale).
    pub fn pending_isr(&self) -> Option<&[i32]> {
        self.isr_slot.holding()
    }

    /// The partition's one ISR-change slot.
    pub fn isr_slot(&self) -> &IsrSlot {
        &self.isr_slot
    }

    /// The committed ISR plus any member the pending change adds (module docs): the set the
    /// watermark waits for.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.leadership.isr.clone();
        for b in self.isr_slot.holding().into_iter().flatten() {
            if !isr.contains(b) {
                isr.push(*b);
            }
        }
        isr
    }

    /// Whether a follower's fetches count as caught up at `now_ms` (Kafka's `isCaughtUp`): its
    /// log end reached the leader's, or it last caught up within `lag_time_max_ms`.
    pub fn is_caught_up(&self, broker_id: i32, now_ms: u64, lag_time_max_ms: u64) -> bool {
        self.followers.get(&broker_id).is_some_and(|f| {
            f.log_end_offset >= self.leader_log_end
                || now_ms.saturating_sub(f.last_caught_up_ms) <= lag_time_max_ms
        })
    }

    /// An ISR change `new_isr` was sent to the controller. Panics if one is already in flight
    /// (`isr_change` never proposes then) or if `new_isr` breaks the ISR's invariants.
    pub fn begin_isr_change(&mut self, new_isr: Vec<i32>) {
        assert!(
            new_isr.contains(&self.leadership.leader_id)
                && new_isr.iter().all(|b| self.leadership.replicas.contains(b)),
            "proposed ISR {new_isr:?} lacks the leader or leaves the replicas {:?}",
            self.leadership.replicas
        );
        self.isr_slot
            .begin(new_isr, self.leadership.partition_epoch);
        self.recompute_high_watermark();
    }

    /// The controller answered the change in flight — committed it, or refused it saying the
    /// partition stands where the change was computed: the slot is free again. The watermark
    /// stays (it never decreases); it simply stops waiting for a refused addition.
    pub fn end_isr_change(&mut self) {
        self.isr_slot.free();
        self.recompute_high_watermark();
    }

    /// The controller refused the change in flight as stale (`IsrSlot::on_stale_refusal`).
    pub fn isr_change_refused_as_stale(&mut self) {
        self.isr_slot.on_stale_refusal();
        self.recompute_high_watermark();
    }

    /// No answer came for the change in flight (`IsrSlot::on_lost`).
    pub fn isr_change_answer_lost(&mut self) {
        self.isr_slot.on_lost();
        self.recompute_high_watermark();
    }

    /// The change whose answer was lost, to send again (`IsrSlot::resend`).
    pub fn resend_isr_change(&mut self) -> Option<(Vec<i32>, i32)> {
        self.isr_slot
            .resend()
            .map(|(isr, base_epoch)| (isr.to_vec(), base_epoch))
    }

    /// The leader's exposable log end moved to `offset` (never backwards: the durable offset
    /// only grows). Returns the high watermark.
    pub fn on_leader_log_end(&mut self, offset: u64) -> u64 {
        assert!(
            offset >= self.leader_log_end,
            "leader log end moved back: {} -> {offset}",
            self.leader_log_end
        );
        self.leader_log_end = offset;
        self.recompute_high_watermark()
    }

    /// A follower fetched from `fetch_offset` (so it has everything below it) at `now_ms`.
    /// Returns the high watermark. A fetch from a broker that is not a replica changes nothing.
    pub fn on_follower_fetch(&mut self, broker_id: i32, fetch_offset: u64, now_ms: u64) -> u64 {
        self.on_follower_fetch_with_epoch(broker_id, None, fetch_offset, now_ms)
    }

    /// [`Self::on_follower_fetch`] for a fetch that carried the follower's broker epoch.
    pub fn on_follower_fetch_with_epoch(
        &mut self,
        broker_id: i32,
        broker_epoch: Option<i64>,
        fetch_offset: u64,
        now_ms: u64,
    ) -> u64 {
        let leader_end = self.leader_log_end;
        let keep_old_incarnation = self.planted_keep_old_incarnation();
        if let Some(f) = self.followers.get_mut(&broker_id) {
            match (broker_epoch, f.broker_epoch) {
                // A fetch from an incarnation older than one already seen (delayed in the
                // network): it says nothing of the log there now.
                (Some(theirs), Some(seen)) if theirs < seen => return self.high_watermark,
                // A new incarnation (KIP-903): it restarted, maybe with an empty or cut disk,
                // so what the previous one reported no longer holds — its log end is what it
                // fetches from now, even if lower. (Keeping the old one let an emptied broker
                // rejoin the ISR at once and count for the watermark.)
                (Some(theirs), Some(seen)) if theirs > seen && !keep_old_incarnation => {
                    f.log_end_offset = 0;
                    f.last_fetch_leader_log_end = 0;
                }
                _ => {}
            }
            if broker_epoch.is_some() {
                f.broker_epoch = broker_epoch;
            }
            // Within one incarnation a follower fetches from below what it reported earlier only
            // after truncating, which a new leader epoch starts afresh: its end only grows.
            f.log_end_offset = f.log_end_offset.max(fetch_offset);
            // Kafka's two rules: caught up now if it reached the leader's end, or caught up as
            // of its previous fetch if it reached the leader's end as of that fetch.
            if f.log_end_offset >= leader_end {
                f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
            } else if f.log_end_offset >= f.last_fetch_leader_log_end {
                f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
            }
            f.last_fetch_leader_log_end = leader_end;
            f.last_fetch_ms = f.last_fetch_ms.max(now_ms);
        }
        self.recompute_high_watermark()
    }

    /// A follower's fetch reported its log start (call after
    /// [`Self::on_follower_fetch_with_epoch`] for the same fetch). A fetch from an incarnation
    /// older than the one seen is ignored; otherwise the report replaces the old one (a
    /// restarted follower's log may start anywhere).
    pub fn on_follower_log_start(
        &mut self,
        broker_id: i32,
        broker_epoch: Option<i64>,
        log_start_offset: u64,
    ) {
        if let Some(f) = self.followers.get_mut(&broker_id) {
            if matches!((broker_epoch, f.broker_epoch), (Some(theirs), Some(seen)) if theirs < seen)
            {
                return;
            }
            f.log_start_offset = log_start_offset;
        }
    }

    /// Kafka's `lowWatermarkIfLeader`, over the committed ISR: the smallest log start among the
    /// leader's own (`leader_log_start`) and every ISR follower's last report. A DeleteRecords
    /// waits for this to reach its offset, so that no in-sync replica that could be elected
    /// still serves the deleted records.
    pub fn low_watermark(&self, leader_log_start: u64) -> u64 {
        self.leadership
            .isr
            .iter()
            .filter(|&&b| b != self.leadership.leader_id)
            .map(|b| self.followers.get(b).map_or(0, |f| f.log_start_offset))
            .fold(leader_log_start, u64::min)
    }

    /// ISR followers that have not caught up within `lag_time_max_ms` of `now_ms`: candidates for
    /// an ISR shrink, which the controller decides.
    pub fn out_of_sync(&self, now_ms: u64, lag_time_max_ms: u64) -> Vec<i32> {
        self.leadership
            .isr
            .iter()
            .filter_map(|b| self.followers.get(b).map(|f| (*b, f)))
            .filter(|(_, f)| now_ms.saturating_sub(f.last_caught_up_ms) > lag_time_max_ms)
            .map(|(b, _)| b)
            .collect()
    }

    /// The controller committed a new ISR (or replica set) for this leader's epoch. A record for
    /// another leader or an older partition epoch is ignored (`false`): the caller gives up
    /// leadership or waits for the newer one.
    pub fn on_partition_change(&mut self, leadership: Leadership, now_ms: u64) -> bool {
        if leadership.leader_id != self.leadership.leader_id
            || leadership.leader_epoch != self.leadership.leader_epoch
            || leadership.partition_epoch < self.leadership.partition_epoch
        {
            return false;
        }
        for &b in &leadership.replicas {
            if b != leadership.leader_id {
                self.followers
                    .entry(b)
                    .or_insert(FollowerState::unknown(now_ms));
            }
        }
        self.followers
            .retain(|b, _| leadership.replicas.contains(b));
        self.required_isr = self.required_isr.min(leadership.replicas.len().max(1));
        self.leadership = leadership;
        // A state newer than the change in flight's base supersedes it (`isr_slot`).
        self.isr_slot
            .on_partition_state(self.leadership.partition_epoch, &self.leadership.replicas);
        self.assert_invariants();
        self.recompute_high_watermark();
        true
    }

    /// `min(log end over the ISR)`, kept monotonic, and held while the ISR is below min ISR.
    fn recompute_high_watermark(&mut self) -> u64 {
        let before = self.high_watermark;
        if self.hw_before_isr() {
            self.high_watermark = self.high_watermark.max(self.leader_log_end);
            return self.high_watermark;
        }
        let isr_min = self.isr_min_log_end();
        if self.has_min_isr() && isr_min > self.high_watermark {
            self.high_watermark = isr_min;
        }
        assert!(self.high_watermark >= before, "high watermark moved back");
        assert!(
            self.high_watermark <= isr_min.max(before),
            "high watermark {} passed the ISR's minimum log end {isr_min}",
            self.high_watermark
        );
        self.high_watermark
    }

    fn isr_min_log_end(&self) -> u64 {
        self.maximal_isr()
            .iter()
            .map(|b| {
                if *b == self.leadership.leader_id {
                    self.leader_log_end
                } else {
                    self.followers.get(b).map_or(0, |f| f.log_end_offset)
                }
            })
            .min()
            .unwrap_or(self.leader_log_end)
    }

    fn assert_invariants(&self) {
        let l = &self.leadership;
        assert!(
            l.isr.contains(&l.leader_id),
            "ISR {:?} does not contain its leader {}",
            l.isr,
            l.leader_id
        );
        assert!(
            l.isr.iter().all(|b| l.replicas.contains(b)),
            "ISR {:?} is not a subset of the replicas {:?}",
            l.isr,
            l.replicas
        );
        assert!(self.required_isr >= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn three(min_isr: usize) -> ReplicaState {
        ReplicaState::new(
            Leadership {
                leader_id: 0,
                leader_epoch: 1,
                partition_epoch: 0,
                replicas: vec![0, 1, 2],
                isr: vec![0, 1, 2],
            },
            min_isr,
            0,
            0,
        )
    }

    /// An altered `min.insync.replicas` acts on the live leader: above the ISR it refuses
    /// acks=all, capped by the replication factor as at creation; unchanged reports false.
    #[test]
    fn an_altered_min_isr_applies_to_the_live_leader() {
        let mut r = three(2);
        let shrunk = Leadership {
            partition_epoch: 1,
            isr: vec![0, 1],
            ..r.leadership().clone()
        };
        assert!(r.on_partition_change(shrunk, 0));
        assert!(r.has_min_isr());
        assert!(r.set_min_insync_replicas(3));
        assert!(!r.has_min_isr());
        assert!(!r.set_min_insync_replicas(3));
        assert!(!r.set_min_insync_replicas(7), "capped at the 3 replicas");
        assert_eq!(r.required_isr(), 3);
        assert!(r.set_min_insync_replicas(1));
        assert!(r.has_min_isr());
    }

    /// KIP-903: a follower that restarted (a new broker epoch) counts from what it fetches now,
    /// not from what its previous incarnation reported; a delayed fetch from that one is ignored.
    #[test]
    fn a_restarted_follower_counts_from_what_it_fetches_now() {
        let mut r = three(2);
        r.on_leader_log_end(100);
        r.on_follower_fetch_with_epoch(1, Some(11), 100, 10);
        r.on_follower_fetch_with_epoch(2, Some(12), 100, 10);
        assert_eq!(r.high_watermark(), 100);
        r.on_leader_log_end(200);
        // 2 restarted with an empty disk: it fetches from 0 with its new broker epoch.
        r.on_follower_fetch_with_epoch(2, Some(13), 0, 20);
        r.on_follower_fetch_with_epoch(1, Some(11), 200, 20);
        assert_eq!(r.follower(2).map(|f| f.log_end_offset), Some(0));
        assert_eq!(r.high_watermark(), 100, "held where the emptied member is");
        r.on_follower_fetch_with_epoch(2, Some(12), 200, 21);
        assert_eq!(
            r.follower(2).map(|f| (f.log_end_offset, f.broker_epoch)),
            Some((0, Some(13))),
            "a delayed fetch of the old incarnation"
        );
        r.on_follower_fetch_with_epoch(2, Some(13), 200, 22);
        assert_eq!(r.high_watermark(), 200);
    }

    /// DeleteRecords' low watermark: the smallest log start in the ISR, moving as followers
    /// report; an out-of-ISR replica does not hold it, a stale incarnation's report is ignored.
    #[test]
    fn the_low_watermark_is_the_smallest_log_start_in_the_isr() {
        let mut r = three(2);
        r.on_leader_log_end(100);
        assert_eq!(
            r.low_watermark(40),
            0,
            "followers that never reported hold it at 0"
        );
        r.on_follower_fetch_with_epoch(1, Some(11), 100, 10);
        r.on_follower_log_start(1, Some(11), 40);
        r.on_follower_fetch_with_epoch(2, Some(12), 100, 10);
        r.on_follower_log_start(2, Some(12), 30);
        assert_eq!(r.low_watermark(40), 30);
        r.on_follower_log_start(2, Some(12), 45);
        assert_eq!(r.low_watermark(40), 40, "the leader's own log start counts");
        r.on_follower_log_start(2, Some(11), 0);
        assert_eq!(
            r.follower(2).map(|f| f.log_start_offset),
            Some(45),
            "stale incarnation"
        );
        r.on_follower_log_start(1, Some(11), 10);
        assert!(r.on_partition_change(
            Leadership {
                leader_id: 0,
                leader_epoch: 1,
                partition_epoch: 1,
                replicas: vec![0, 1, 2],
                isr: vec![0, 2],
            },
            11
        ));
        assert_eq!(
            r.low_watermark(40),
            40,
            "1 left the ISR: it no longer holds it"
        );
    }

    proptest! {
        #[test]
        fn high_watermark_is_the_isr_minimum_and_never_decreases(
            reports in proptest::collection::vec((0i32..3, 0u64..1000), 0..60),
        ) {
            let mut r = three(2);
            let mut ends = [0u64; 3];
            let mut last = 0;
            for (b, o) in reports {
                let hw = if b == 0 {
                    let o = o.max(ends[0]);
                    ends[0] = o;
                    r.on_leader_log_end(o)
                } else {
                    ends[b as usize] = ends[b as usize].max(o);
                    r.on_follower_fetch(b, o, 0)
                };
                prop_assert!(hw >= last);
                prop_assert_eq!(hw, *ends.iter().min().unwrap());
                last = hw;
            }
        }
    }

    #[test]
    fn a_new_leader_keeps_its_follower_watermark_until_the_isr_reports() {
        let l = Leadership {
            leader_id: 0,
            leader_epoch: 2,
            partition_epoch: 3,
            replicas: vec![0, 1, 2],
            isr: vec![0, 1, 2],
        };
        let mut r = ReplicaState::for_new_leader(l, 2, 120, 100, 0);
        assert_eq!(
            r.high_watermark(),
            100,
            "not its log end: 1 and 2 may lack 100..120"
        );
        assert_eq!(
            r.check_list_offsets(120),
            Err(crate::ErrorCode::OffsetNotAvailable)
        );
        r.on_follower_fetch(1, 120, 1);
        r.on_follower_fetch(2, 110, 1);
        assert_eq!(r.high_watermark(), 110);
        r.on_follower_fetch(2, 120, 2);
        assert_eq!(r.check_list_offsets(120), Ok(()));
    }

    #[test]
    fn a_busy_leaders_follower_counts_as_caught_up_as_of_its_previous_fetch() {
        let mut r = three(2);
        r.on_leader_log_end(100);
        r.on_follower_fetch(1, 50, 10_000);
        r.on_leader_log_end(200);
        // It reached 100 (the leader's end at its previous fetch) but never the current end.
        r.on_follower_fetch(1, 100, 20_000);
        r.on_leader_log_end(300);
        r.on_follower_fetch(1, 200, 30_000);
        assert_eq!(r.follower(1).map(|f| f.last_caught_up_ms), Some(20_000));
        assert!(!r.out_of_sync(45_000, 30_000).contains(&1));
    }

    #[test]
    fn a_single_replica_follows_the_leader() {
        let mut r = ReplicaState::sole_leader(7, 0, 0);
        assert_eq!(r.on_leader_log_end(10), 10);
        assert_eq!(r.isr(), &[7]);
        assert!(
            r.has_min_isr(),
            "one replica satisfies min.insync.replicas=2 capped at 1"
        );
        assert_eq!(
            r.on_follower_fetch(8, 50, 0),
            10,
            "a non-member's report changes nothing"
        );
    }

    #[test]
    fn a_follower_out_of_the_isr_does_not_hold_the_watermark_but_min_isr_does() {
        let mut r = three(2);
        r.on_leader_log_end(100);
        r.on_follower_fetch(1, 100, 39_000);
        assert_eq!(
            r.high_watermark(),
            0,
            "follower 2 is in the ISR and has reported nothing"
        );
        assert_eq!(r.out_of_sync(40_000, 30_000), vec![2]);
        let shrunk = Leadership {
            leader_id: 0,
            leader_epoch: 1,
            partition_epoch: 1,
            replicas: vec![0, 1, 2],
            isr: vec![0, 1],
        };
        assert!(r.on_partition_change(shrunk, 40_000));
        assert_eq!(r.high_watermark(), 100);
        let alone = Leadership {
            leader_id: 0,
            leader_epoch: 1,
            partition_epoch: 2,
            replicas: vec![0, 1, 2],
            isr: vec![0],
        };
        assert!(r.on_partition_change(alone, 41_000));
        assert!(!r.has_min_isr());
        r.on_leader_log_end(200);
        assert_eq!(r.high_watermark(), 100, "below min ISR the watermark holds");
    }

    #[test]
    fn a_stale_partition_change_is_ignored() {
        let mut r = three(2);
        let newer = Leadership {
            partition_epoch: 5,
            ..r.leadership().clone()
        };
        assert!(r.on_partition_change(newer, 0));
        let older = Leadership {
            partition_epoch: 4,
            isr: vec![0],
            ..r.leadership().clone()
        };
        assert!(!r.on_partition_change(older, 0));
        assert_eq!(r.isr(), &[0, 1, 2]);
        let other_epoch = Leadership {
            leader_epoch: 2,
            partition_epoch: 6,
            ..r.leadership().clone()
        };
        assert!(!r.on_partition_change(other_epoch, 0));
    }

    #[test]
    #[should_panic(expected = "does not contain its leader")]
    fn an_isr_without_its_leader_is_a_bug() {
        let _ = ReplicaState::new(
            Leadership {
                leader_id: 0,
                leader_epoch: 1,
                partition_epoch: 0,
                replicas: vec![0, 1],
                isr: vec![1],
            },
            1,
            0,
            0,
        );
    }

    #[test]
    #[should_panic(expected = "leader log end moved back")]
    fn the_leader_log_end_never_moves_back() {
        let mut r = ReplicaState::sole_leader(0, 0, 10);
        r.on_leader_log_end(5);
    }
}
