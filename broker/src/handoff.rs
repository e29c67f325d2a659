//! This broker's controlled-shutdown state on core 0 (Kafka's BrokerLifecycleManager keeps the
//! same two facts): whether it has asked the controller to move its leaderships away (every
//! heartbeat then carries `want_shutdown`), and whether the controller has answered
//! `should_shutdown` (it may stop). Shared by the heartbeat loop ([`crate::broker_session`]),
//! which sends the one and records the other, and the stop sequence
//! ([`crate::controlled_shutdown`]), which sets the one and waits for the other.
//!
//! Owns: the two flags and the tasks waiting for them to change. Promises: both only ever go from
//! false to true (a broker that asked to stop never takes it back), and every waiter is woken on
//! each change. Never does: talk to the controller, read a clock, or decide when to stop.

use std::cell::{Cell, RefCell};
use std::task::{Poll, Waker};

/// See the module docs. Lives in the controller driver, one per process, on core 0.
#[derive(Default)]
pub struct Handoff {
    wanted: Cell<bool>,
    granted: Cell<bool>,
    /// Tasks in [`Handoff::changed`]: the heartbeat loop and the stop sequence, so at most two.
    waiters: RefCell<Vec<Waker>>,
}

impl Handoff {
    /// Asks for a controlled shutdown: heartbeats from now on carry `want_shutdown`.
    pub fn want(&self) {
        if !self.wanted.replace(true) {
            self.wake();
        }
    }

    pub fn wanted(&self) -> bool {
        self.wanted.get()
    }

    /// The controller answered `should_shutdown` to a heartbeat that wanted it.
    pub fn grant(&self) {
        debug_assert!(self.wanted.get(), "granted before it was asked for");
        if !self.granted.replace(true) {
            self.wake();
        }
    }

    pub fn granted(&self) -> bool {
        self.granted.get()
    }

    /// Resolves at the next [`Handoff::want`] or [`Handoff::grant`] that changes something
    /// (immediately if `seen` — the `(wanted, granted)` the caller last saw — is already stale).
    pub async fn changed(&self, seen: (bool, bool)) {
        futures_lite::future::poll_fn(|cx| {
            if (self.wanted.get(), self.granted.get()) != seen {
                return Poll::Ready(());
            }
            let mut waiters = self.waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// The `(wanted, granted)` pair [`Handoff::changed`] compares against.
    pub fn state(&self) -> (bool, bool) {
        (self.wanted.get(), self.granted.get())
    }

    fn wake(&self) {
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_only_go_forward_and_changes_are_seen() {
        let h = Handoff::default();
        assert_eq!(h.state(), (false, false));
        h.want();
        h.want();
        assert_eq!(h.state(), (true, false));
        // A stale `seen` resolves at once.
        futures_lite::future::block_on(h.changed((false, false)));
        h.grant();
        assert!(h.granted() && h.wanted());
        futures_lite::future::block_on(h.changed((true, false)));
    }
}
