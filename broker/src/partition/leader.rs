//! The leader's half of replication on one partition (DESIGN §1, §7): serving a follower's fetch,
//! the acks=all waiters, and the ISR changes it asks the controller for.
//!
//! Owns: [`Partition::serve_replica_fetch`] — spool-core's `follower_fetch::decide` on the
//! fetch, then the follower's progress into the replica state and a read of the log from the
//! fetch offset up to the log end (the same log read consumers use, not capped by the high
//! watermark); [`Partition::wait_for_in_sync`] — an acks=all request's wait, registered in the
//! role's `AckWaiters` with its deadline and woken through a one-slot channel when released;
//! [`Partition::release`], run after everything that can move the high watermark, the low
//! watermark (DeleteRecords' waiters, `delete`), the ISR or the role; and
//! [`Partition::propose_isr_change`] / [`Partition::on_alter_answer`], the two ends of an
//! AlterPartition (spool-core's `isr_change`).
//!
//! Promises: the high watermark moves only through the replica state (never past the ISR's
//! smallest reported offset, never back); a waiter is answered exactly once — acknowledged,
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER; a waiting
//! request costs a table entry and a channel slot, no task and no lock.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use glommio::channels::local_channel;
use spool_core::ack_wait::{Acks, Admission, Released};
use spool_core::follower_fetch::{self, FetchDecision, FollowerFetch, LeaderView};
use spool_core::isr_change::{
    self, AlterPartitionAnswer, AlterPartitionRequest, AnswerOutcome, ProposeInput,
};
use spool_protocol::ErrorCode;

use super::role::Role;
use super::{log_error_code, Partition};
use crate::requests::ReplicaFetchRead;

/// An admitted produce: whether its answer waits for the in-sync replicas, and under which
/// leader epoch it was admitted (a waiter belongs to that epoch's waiter table only).
pub(super) struct Admitted {
    leader_epoch: i32,
    admission: Admission,
}

impl Role {
    /// Before an append: the leader admits it per `acks` (acks=all needs min ISR); a follower
    /// refuses.
    pub(super) fn admit(&mut self, acks: Acks) -> Result<Admitted, ErrorCode> {
        match self {
            Role::Leader(l) => {
                let admission = l.waiters.admit(acks, l.state.has_min_isr())?;
                Ok(Admitted {
                    leader_epoch: l.state.leader_epoch(),
                    admission,
                })
            }
            Role::Follower(_) => Err(ErrorCode::NotLeaderOrFollower),
        }
    }

    /// The append of an admitted request failed: its reserved slot is freed (only in the table
    /// it was reserved in; a newer leadership's table never saw it).
    pub(super) fn cancel(&mut self, admitted: Admitted) {
        if let (Role::Leader(l), Admission::Wait(slot)) = (self, admitted.admission) {
            if l.state.leader_epoch() == admitted.leader_epoch {
                l.waiters.cancel(slot);
            }
        }
    }
}

impl Partition {
    /// The leader's exposable log end moved to `offset` (an append under `durability =
    /// replicated`, an fdatasync under fsync).
    pub(super) fn on_leader_log_end(&self, offset: u64, now_ms: u64) {
        if let Role::Leader(l) = &mut *self.role.borrow_mut() {
            if offset > l.state.leader_log_end() {
                l.state.on_leader_log_end(offset);
            }
        }
        self.release(now_ms);
    }

    /// An fdatasync covered everything below `offset`: a leader exposes it, a follower reports
    /// it in its next fetch.
    pub(super) fn on_synced(&self, offset: u64, now_ms: u64) {
        let leading = {
            let mut role = self.role.borrow_mut();
            match &mut *role {
                Role::Leader(_) => true,
                Role::Follower(f) => {
                    f.on_synced(offset.min(f.log_end_offset()));
                    false
                }
            }
        };
        if leading {
            self.on_leader_log_end(offset, now_ms);
        }
    }

    /// Answers the acks=all waiters the high watermark, the ISR's size or the clock release
    /// now, and wakes long-polls when the watermark moved.
    pub fn release(&self, now_ms: u64) {
        let (released, hw) = {
            let mut role = self.role.borrow_mut();
            let Role::Leader(l) = &mut *role else {
                return;
            };
            let hw = l.state.high_watermark();
            let mut released = l.waiters.on_high_watermark(hw);
            if !l.state.has_min_isr() {
                released.extend(l.waiters.on_below_min_isr());
            }
            released.extend(l.waiters.on_tick(now_ms));
            let low = l.state.low_watermark(self.log.log_start_offset());
            released.extend(l.delete_waiters.on_high_watermark(low));
            released.extend(l.delete_waiters.on_tick(now_ms));
            (released, hw)
        };
        self.answer_released(&released);
        if hw > self.notified_hw.get() {
            self.notified_hw.set(hw);
            self.wake_watchers();
        }
    }

    pub(super) fn answer_released(&self, released: &[Released]) {
        for r in released {
            let sender = self.ack_senders.borrow_mut().remove(&r.request_id);
            if let Some(tx) = sender {
                // A full or closed slot means the request already gave up: nothing to tell.
                let _ = tx.try_send(r.result);
            }
        }
    }

    /// After an admitted produce's append (and, under fsync, the leader's sync): NONE at once
    /// for acks 0 and 1; for acks=all, the code its waiter is released with.
    pub(super) async fn wait_for_in_sync(
        &self,
        admitted: Admitted,
        required_offset: u64,
        timeout_ms: i32,
    ) -> ErrorCode {
        let Admission::Wait(slot) = admitted.admission else {
            return ErrorCode::None;
        };
        let now_ms = crate::clock::monotonic_ms();
        let deadline_ms = now_ms + u64::try_from(timeout_ms).unwrap_or(0);
        let request_id = self.next_request_id.get();
        self.next_request_id.set(request_id + 1);
        let released = {
            let mut role = self.role.borrow_mut();
            match &mut *role {
                Role::Leader(l) if l.state.leader_epoch() == admitted.leader_epoch => {
                    let hw = l.state.high_watermark();
                    l.waiters
                        .register(slot, request_id, required_offset, deadline_ms, hw, now_ms)
                }
                // Deposed while its batch was being synced: the new leader may truncate it.
                _ => return ErrorCode::NotLeaderOrFollower,
            }
        };
        if let Some(r) = released {
            return r.result;
        }
        // No code: the partition was closed (topic deleted, broker stopping) or the request is
        // still in the table past its deadline by a clock tick; either way it is not known to be
        // on the in-sync replicas.
        self.await_release(request_id, deadline_ms, now_ms)
            .await
            .unwrap_or(ErrorCode::RequestTimedOut)
    }

    /// Waits for the waiter table to release `request_id` (registered in one of the leader's
    /// tables, acks=all or DeleteRecords): its code, or `None` when the partition closed first.
    /// Past `deadline_ms` the table is told the time, so it releases the request as timed out.
    pub(super) async fn await_release(
        &self,
        request_id: u64,
        deadline_ms: u64,
        now_ms: u64,
    ) -> Option<ErrorCode> {
        let (tx, rx) = local_channel::new_bounded(1);
        self.ack_senders.borrow_mut().insert(request_id, tx);
        let answered = futures_lite::future::or(async { Some(rx.recv().await) }, async {
            glommio::timer::sleep(Duration::from_millis(deadline_ms - now_ms)).await;
            None
        })
        .await;
        let code = match answered {
            Some(code) => code,
            None => {
                self.release(crate::clock::monotonic_ms());
                futures_lite::future::poll_once(rx.recv()).await.flatten()
            }
        };
        self.ack_senders.borrow_mut().remove(&request_id);
        code
    }

    /// A follower's fetch of this partition (module docs). `broker_epochs` are the registered
    /// brokers' epochs from the metadata image.
    pub async fn serve_replica_fetch(
        &self,
        fetch: &FollowerFetch,
        broker_epochs: &BTreeMap<i32, i64>,
        max_bytes: usize,
        now_ms: u64,
    ) -> ReplicaFetchRead {
        let (log_start, log_end) = (self.log.log_start_offset(), self.log.log_end_offset());
        let decision =
            self.with_leader_view(broker_epochs, |view| follower_fetch::decide(fetch, view));
        let mut answer = ReplicaFetchRead {
            error: ErrorCode::None,
            high_watermark: self.high_watermark() as i64,
            log_start_offset: log_start as i64,
            log_end_offset: log_end as i64,
            diverging: None,
            records: Bytes::new(),
        };
        match decision {
            Ok(FetchDecision::Read {
                fetch_offset,
                progress_offset,
            }) => {
                if let Role::Leader(l) = &mut *self.role.borrow_mut() {
                    l.state.on_follower_fetch_with_epoch(
                        fetch.replica_id,
                        fetch.replica_broker_epoch,
                        progress_offset,
                        now_ms,
                    );
                    l.state.on_follower_log_start(
                        fetch.replica_id,
                        fetch.replica_broker_epoch,
                        fetch.log_start_offset,
                    );
                }
                self.release(now_ms);
                answer.high_watermark = self.high_watermark() as i64;
                if max_bytes > 0 && fetch_offset < log_end {
                    match self.log.read_copy(fetch_offset, max_bytes, log_end).await {
                        Ok(b) => answer.records = b,
                        Err(e) => {
                            tracing::warn!(tp = %self.tp, fetch_offset, "reading for a follower: {e}");
                            answer.error = log_error_code(&e);
                        }
                    }
                }
            }
            Ok(FetchDecision::Diverging(d)) => answer.diverging = Some(d),
            Err(refusal) => {
                tracing::debug!(tp = %self.tp, replica = fetch.replica_id, ?refusal, "refused a follower's fetch");
                answer.error = refusal.error_code();
            }
        }
        answer
    }

    /// Whether this replica may answer a client's fetch or offset lookup, as Kafka's leader-only
    /// reads decide: first KIP-320's check of the client's current leader epoch against this
    /// replica's — older → FENCED_LEADER_EPOCH (it refreshes its metadata), newer →
    /// UNKNOWN_LEADER_EPOCH (ours lags; it retries), `None` passes — then only the leader
    /// answers; a follower says NOT_LEADER_OR_FOLLOWER. A follower's log may be far shorter
    /// than what a client has read (one catching up after a lost disk), and a client told
    /// "out of range" there would reset its position and read everything again; its offsets
    /// (earliest, latest) would be its own, not the partition's.
    pub fn check_serves_clients(&self, theirs: Option<i32>) -> Result<(), ErrorCode> {
        let ours = self.leader_epoch();
        match theirs {
            Some(e) if e < ours => Err(ErrorCode::FencedLeaderEpoch),
            Some(e) if e > ours => Err(ErrorCode::UnknownLeaderEpoch),
            _ if !self.is_leader() => Err(ErrorCode::NotLeaderOrFollower),
            _ => Ok(()),
        }
    }

    /// OffsetForLeaderEpoch on this partition: only its leader answers, after the KIP-320 check
    /// of the sender's current leader epoch (spool-core's `follower_fetch::offset_for_leader_epoch`).
    pub fn offset_for_leader_epoch(
        &self,
        current_leader_epoch: Option<i32>,
        leader_epoch: i32,
    ) -> Result<spool_core::epoch_cache::EpochEndOffset, ErrorCode> {
        self.with_leader_view(&BTreeMap::new(), |view| {
            follower_fetch::offset_for_leader_epoch(current_leader_epoch, leader_epoch, view)
        })
        .map_err(|r| r.error_code())
    }

    /// What spool-core's fetch and epoch rules see of this replica now: its role, replicas,
    /// epoch cache and log bounds (the role borrowed only for `f`, which must not await).
    fn with_leader_view<R>(
        &self,
        broker_epochs: &BTreeMap<i32, i64>,
        f: impl FnOnce(&LeaderView<'_>) -> R,
    ) -> R {
        let epochs = self.log.leader_epochs();
        let role = self.role.borrow();
        let replicas: &[i32] = match &*role {
            Role::Leader(l) => &l.state.leadership().replicas,
            Role::Follower(_) => &[],
        };
        f(&LeaderView {
            is_leader: role.is_leader(),
            leader_epoch: role.leader_epoch(),
            replicas,
            broker_epochs,
            epochs: &epochs,
            log_start_offset: self.log.log_start_offset(),
            log_end_offset: self.log.log_end_offset(),
        })
    }

    /// Whether a follower's fetch from `offset` would find records now (its long poll waits
    /// for this).
    pub fn has_data_past(&self, offset: u64) -> bool {
        self.log.log_end_offset() > offset || !self.is_leader()
    }

    /// The ISR change this leader should ask the controller for now, if any (it then holds the
    /// partition's one in-flight slot until [`Partition::on_alter_answer`]). A change whose answer
    /// was lost, or is later than `alter_timeout_ms`, is sent again as it was: it may have
    /// committed, so it stays pending (`isr_change::retry_request`).
    pub fn propose_isr_change(
        &self,
        input: &ProposeInput<'_>,
        alter_timeout_ms: u64,
    ) -> Option<AlterPartitionRequest> {
        let mut role = self.role.borrow_mut();
        let Role::Leader(l) = &mut *role else {
            return None;
        };
        if l.alter_sent_ms
            .is_some_and(|t| input.now_ms >= t + alter_timeout_ms)
        {
            isr_change::on_answer(&mut l.state, AlterPartitionAnswer::Lost, input.now_ms);
            l.alter_sent_ms = None;
        }
        if l.alter_sent_ms.is_none() {
            if let Some(request) = isr_change::retry_request(&mut l.state, input.own_broker_epoch) {
                l.alter_sent_ms = Some(input.now_ms);
                return Some(request);
            }
        }
        let start = self
            .log
            .leader_epochs()
            .start_offset_of(l.state.leader_epoch())?;
        let input = ProposeInput {
            leader_epoch_start_offset: start,
            ..*input
        };
        let request = isr_change::propose(&mut l.state, &input)?;
        l.alter_sent_ms = Some(input.now_ms);
        Some(request)
    }

    /// The controller's answer to the ISR change this leader sent at `leader_epoch` from
    /// `partition_epoch` (an answer to an older copy, or for another leadership, is ignored).
    pub fn on_alter_answer(
        &self,
        leader_epoch: i32,
        partition_epoch: i32,
        answer: AlterPartitionAnswer,
        now_ms: u64,
    ) {
        let outcome = {
            let mut role = self.role.borrow_mut();
            match &mut *role {
                Role::Leader(l)
                    if l.alter_sent_ms.is_some()
                        && isr_change::answers_pending(&l.state, leader_epoch, partition_epoch) =>
                {
                    l.alter_sent_ms = None;
                    Some(isr_change::on_answer(&mut l.state, answer, now_ms))
                }
                _ => None,
            }
        };
        self.release(now_ms);
        match outcome {
            Some(AnswerOutcome::Applied) => {
                tracing::info!(tp = %self.tp, isr = ?self.isr(), "ISR changed")
            }
            Some(other) => tracing::debug!(tp = %self.tp, ?other, "ISR change not applied"),
            None => {}
        }
    }

    /// Each follower's lag as this leader sees it: (broker, messages behind the leader's log
    /// end, ms since it was last caught up). Empty on a follower.
    pub fn follower_lags(&self, now_ms: u64) -> Vec<(i32, u64, u64)> {
        let role = self.role.borrow();
        let Role::Leader(l) = &*role else {
            return Vec::new();
        };
        let leadership = l.state.leadership();
        let end = self.log.log_end_offset();
        leadership
            .replicas
            .iter()
            .filter(|&&b| b != leadership.leader_id)
            .filter_map(|&b| {
                let f = l.state.follower(b)?;
                Some((
                    b,
                    end.saturating_sub(f.log_end_offset),
                    now_ms.saturating_sub(f.last_caught_up_ms),
                ))
            })
            .collect()
    }

    /// Whether this leader's committed ISR is below its replicas (under-replicated) and below
    /// min ISR: `(under_replicated, under_min_isr)`; `None` on a follower.
    pub fn replication_health(&self) -> Option<(bool, bool)> {
        match &*self.role.borrow() {
            Role::Leader(l) => Some((
                l.state.isr().len() < l.state.leadership().replicas.len(),
                !l.state.has_min_isr(),
            )),
            Role::Follower(_) => None,
        }
    }

    /// The committed ISR as this leader holds it (empty on a follower).
    pub fn isr(&self) -> Vec<i32> {
        match &*self.role.borrow() {
            Role::Leader(l) => l.state.isr().to_vec(),
            Role::Follower(_) => Vec::new(),
        }
    }
}
