//! DeleteRecords on one partition (Kafka's `Partition.deleteRecordsOnLeader`,
//! `DelayedDeleteRecords` and the follower's `maybeIncrementLogStartOffset`): moving the log
//! start forward on the leader, and the followers following it.
//!
//! Owns: [`Partition::delete_records`] — on the leader, the offset checked against the high
//! watermark (-1 means the high watermark), the log start raised and persisted (storage deletes
//! the segments wholly below it), then a wait, in the leader role's `delete_waiters` table, until
//! every ISR member has reported a log start at or past it (the low watermark,
//! `ReplicaState::low_watermark`), or the request's timeout; and [`Partition::follow_log_start`]
//! — a follower raising its own log start to the leader's (from each fetch answer), capped at
//! its log end, so a failover to it cannot bring deleted records back.
//!
//! Promises: an answer without an error means the log start is durable on the leader and every
//! ISR member reported one at or past the offset; REQUEST_TIMED_OUT means the leader's is
//! durable and some ISR member had not reported yet (it will, at its next fetches); the log
//! start never moves back. A waiting request costs a table entry and a channel slot — no task,
//! no lock, no `RefCell` borrow across an await (the acks=all pattern of `leader.rs`).

use spool_core::ack_wait::{Acks, Admission};
use spool_protocol::ErrorCode;

use super::follower::NotApplied;
use super::role::Role;
use super::{log_error_code, Partition};

/// The wire's "delete up to the high watermark".
pub const DELETE_TO_HIGH_WATERMARK: i64 = -1;

impl Partition {
    /// DeleteRecords before `offset` on this leader (module docs). Returns the low watermark the
    /// request was answered at (≥ the offset).
    pub async fn delete_records(&self, offset: i64, timeout_ms: i32) -> Result<u64, ErrorCode> {
        let (hw, leader_epoch) = match &*self.role.borrow() {
            Role::Leader(l) => (l.state.high_watermark(), l.state.leader_epoch()),
            Role::Follower(_) => return Err(ErrorCode::NotLeaderOrFollower),
        };
        let target = match offset {
            DELETE_TO_HIGH_WATERMARK => hw,
            o if o < 0 || o as u64 > hw => return Err(ErrorCode::OffsetOutOfRange),
            o => o as u64,
        };
        let start = self
            .log
            .delete_records_before(target)
            .await
            .map_err(|e| log_error_code(&e))?;
        // Pair assertion: storage never leaves the start below what it was asked for.
        assert!(
            start >= target,
            "{}: log start {start} below {target}",
            self.tp
        );
        tracing::info!(tp = %self.tp, log_start = start, "deleted records");
        self.wait_for_low_watermark(leader_epoch, target, timeout_ms)
            .await?;
        Ok(self.low_watermark().unwrap_or(start).max(target))
    }

    /// The leader's low watermark: the smallest log start in the ISR (`None` on a follower).
    pub fn low_watermark(&self) -> Option<u64> {
        let start = self.log.log_start_offset();
        match &*self.role.borrow() {
            Role::Leader(l) => Some(l.state.low_watermark(start)),
            Role::Follower(_) => None,
        }
    }

    /// Waits until the low watermark reaches `offset` in the leadership of `leader_epoch`, or
    /// `timeout_ms` passes.
    async fn wait_for_low_watermark(
        &self,
        leader_epoch: i32,
        offset: u64,
        timeout_ms: i32,
    ) -> Result<(), ErrorCode> {
        let now_ms = crate::clock::monotonic_ms();
        let deadline_ms = now_ms + u64::try_from(timeout_ms).unwrap_or(0);
        let request_id = self.next_request_id.get();
        self.next_request_id.set(request_id + 1);
        let start = self.log.log_start_offset();
        let released = {
            let mut role = self.role.borrow_mut();
            match &mut *role {
                Role::Leader(l) if l.state.leader_epoch() == leader_epoch => {
                    let low = l.state.low_watermark(start);
                    match l.delete_waiters.admit(Acks::All, true)? {
                        Admission::Wait(slot) => l.delete_waiters.register(
                            slot,
                            request_id,
                            offset,
                            deadline_ms,
                            low,
                            now_ms,
                        ),
                        Admission::NoWait => unreachable!("acks=all always waits"),
                    }
                }
                // Deposed meanwhile: the new leader answers for its own log start.
                _ => return Err(ErrorCode::NotLeaderOrFollower),
            }
        };
        if let Some(r) = released {
            return code_to_result(r.result);
        }
        let code = self.await_release(request_id, deadline_ms, now_ms).await;
        code_to_result(code.unwrap_or(ErrorCode::RequestTimedOut))
    }

    /// A follower learned the leader's log start from a fetch answer: raise its own to it
    /// (capped at its log end; the caller holds `append_turn`), persisted before the next fetch
    /// reports it.
    pub(super) async fn follow_log_start(&self, leader_log_start: u64) -> Result<(), NotApplied> {
        let end = self.log.log_end_offset();
        let to = leader_log_start.min(end);
        if to <= self.log.log_start_offset() {
            return Ok(());
        }
        let start = self
            .log
            .delete_records_before(to)
            .await
            .map_err(|e| NotApplied(format!("raising the log start to {to}: {e}")))?;
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_log_start(start.min(f.log_end_offset()));
        }
        tracing::debug!(tp = %self.tp, log_start = start, "followed the leader's log start");
        Ok(())
    }
}

fn code_to_result(code: ErrorCode) -> Result<(), ErrorCode> {
    match code {
        ErrorCode::None => Ok(()),
        other => Err(other),
    }
}
