//! The member's background duty, Kafka's heartbeat thread: what the member does while the
//! application is away from `poll` (processing records), so that liveness is
//! `session_timeout_ms` and progress is `max_poll_interval_ms`.
//!
//! [`GroupCore::background_actions`] and [`GroupCore::background_wakeup_ms`] are the whole
//! interface; a driver (a thread on the blocking client, a task on the glommio client) calls them
//! whenever the application is not inside a call, and hands responses and lost connections to
//! the same `on_response` / `on_disconnect` as always.
//!
//! Promises, as Kafka's heartbeat thread keeps them:
//! - heartbeats go out every `heartbeat_interval_ms` while the member is stable, and a lost
//!   coordinator is looked up again;
//! - `max_poll_interval_ms` without a poll: LeaveGroup (unless static), the partitions are lost,
//!   and the member rejoins at the next poll — at once, not when the application returns;
//! - never anything the application must see first: no auto-commit (the positions of records
//!   handed out by the last poll are not processed yet: committing them would lose them on a
//!   crash), no rebalance step (a REBALANCE_IN_PROGRESS only marks the rejoin, which the next
//!   poll performs, revocation callbacks included), no events taken.

use super::{GroupCore, Pending, Phase};
use crate::client::group::requests as rq;
use crate::client::net::{ClientCore, NetAction};

impl GroupCore {
    /// What to send while the application is away from `poll`: heartbeats, the coordinator
    /// lookup, and the LeaveGroup of a `max_poll_interval_ms` that ran out.
    pub fn background_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let mut out = Vec::new();
        for addr in self.inflight.expired_addrs(now_ms) {
            out.push(NetAction::Close { addr: addr.clone() });
            self.on_disconnect(&addr, now_ms);
        }
        if self.is_closed() || self.phase != Phase::Stable {
            return out;
        }
        if self.check_poll_interval(now_ms, &mut out) {
            return out;
        }
        if self.heartbeats_now() {
            // Only a member that heartbeats can miss answers; one waiting to rejoin is not.
            self.check_session(now_ms);
        }
        self.find_coordinator(now_ms, &mut out);
        if let Some(coordinator) = self.coordinator.clone() {
            self.heartbeat_if_due(&coordinator, now_ms, &mut out);
        }
        out
    }

    /// The earliest future time at which [`Self::background_actions`] would act without new
    /// input (`None`: only an input can make it act).
    pub fn background_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let stable = self.phase == Phase::Stable && !self.is_closed();
        let found = self.coordinator.is_some();
        let timers = [
            (stable && found && self.heartbeats_now()).then_some(self.next_heartbeat_ms),
            stable.then(|| self.last_poll_ms + self.config.max_poll_interval_ms + 1),
            (stable && self.heartbeats_now())
                .then(|| self.last_heartbeat_ok_ms + self.config.session_timeout_ms + 1),
            (stable && !found && !self.find_in_flight).then_some(self.find_retry_at_ms),
            self.inflight.earliest_deadline_ms(),
        ];
        timers.into_iter().flatten().filter(|t| *t > now_ms).min()
    }

    /// Whether a stable member heartbeats now: not while a rejoin or revocation waits for the
    /// next poll (the coordinator gives a rebalance `max_poll_interval_ms`, not the session).
    pub(super) fn heartbeats_now(&self) -> bool {
        !self.rejoin_needed && self.revocation.is_none()
    }

    pub(super) fn heartbeat_if_due(
        &mut self,
        coordinator: &str,
        now_ms: u64,
        out: &mut Vec<NetAction>,
    ) {
        if self.heartbeat_in_flight || now_ms < self.next_heartbeat_ms || !self.heartbeats_now() {
            return;
        }
        let body = rq::heartbeat(&self.identity());
        let timeout_ms = self.config.request_timeout_ms;
        self.heartbeat_in_flight = self.send(
            coordinator,
            body,
            Pending::Heartbeat,
            timeout_ms,
            now_ms,
            out,
        );
    }
}
