//! The seam between sans-IO client cores and the I/O layers that drive them.
//!
//! A core never touches a socket: it emits [`NetAction`]s (send this frame to that address, close
//! that connection) and is told what happened ([`ClientCore::on_response`],
//! [`ClientCore::on_disconnect`]). Addresses are `host:port` strings: a bootstrap entry or a
//! broker from the metadata. The I/O layer keeps at most one connection per address, writes
//! frames in the order given and delivers responses in the order read; correlation ids let cores
//! match them. [`InFlight`] is the bookkeeping every core shares: correlation ids, per-address
//! counts (the in-flight bound) and request deadlines.

use std::collections::HashMap;

use crate::codec::Response;
use crate::frame::EncodedFrame;

/// A `host:port` a connection goes to.
pub type Addr = String;

/// What a core asks its I/O layer to do.
#[derive(Debug, Clone)]
pub enum NetAction {
    /// Write `frame` on the connection to `addr`, opening it first if needed. `expects_response`
    /// is false only for `acks = 0` produce requests.
    Send {
        addr: Addr,
        frame: EncodedFrame,
        expects_response: bool,
    },
    /// Close the connection to `addr` (a request on it timed out). The I/O layer then reports
    /// [`ClientCore::on_disconnect`] like any other loss.
    Close { addr: Addr },
}

/// A sans-IO client core, as the blocking and glommio layers drive it.
pub trait ClientCore {
    /// What to do now. Called after every input and whenever [`Self::next_wakeup_ms`] passes.
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction>;
    /// A decoded response arrived on the connection to `addr`.
    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64);
    /// The connection to `addr` failed or closed (connect error, write error, EOF, malformed
    /// frame). Every request in flight on it is lost.
    fn on_disconnect(&mut self, addr: &str, now_ms: u64);
    /// The earliest time at which `poll_actions` would do something without new input.
    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64>;
}

#[derive(Debug)]
struct Entry<C> {
    addr: Addr,
    deadline_ms: u64,
    context: C,
}

/// Requests in flight, keyed by correlation id.
#[derive(Debug)]
pub struct InFlight<C> {
    next_correlation_id: i32,
    /// Ids are drawn from `first_id..=last_id`, so two cores sharing connections (the consumer
    /// and its group member) can each tell their own responses apart.
    first_id: i32,
    last_id: i32,
    entries: HashMap<i32, Entry<C>>,
}

impl<C> Default for InFlight<C> {
    fn default() -> Self {
        Self::with_ids(1, CONSUMER_LAST_ID)
    }
}

/// The default id range ends here; [`GROUP_FIRST_ID`].. belongs to the group member core.
pub const CONSUMER_LAST_ID: i32 = (1 << 30) - 1;
/// The first correlation id of the group member core's range.
pub const GROUP_FIRST_ID: i32 = 1 << 30;

impl<C> InFlight<C> {
    /// Correlation ids from `first_id` to `last_id` (both > 0, `first_id <= last_id`).
    pub fn with_ids(first_id: i32, last_id: i32) -> Self {
        let first_id = first_id.max(1);
        Self {
            next_correlation_id: first_id,
            first_id,
            last_id: last_id.max(first_id),
            entries: HashMap::new(),
        }
    }

    /// Whether `correlation_id` is from this table's range.
    pub fn owns_id(&self, correlation_id: i32) -> bool {
        (self.first_id..=self.last_id).contains(&correlation_id)
    }

    fn advance(&mut self) {
        self.next_correlation_id = if self.next_correlation_id >= self.last_id {
            self.first_id
        } else {
            self.next_correlation_id + 1
        };
    }

    /// Reserves a correlation id for a request to `addr` that times out at `deadline_ms`.
    pub fn start(&mut self, addr: &str, deadline_ms: u64, context: C) -> i32 {
        let id = self.next_correlation_id;
        // Wraps after 2^30 requests; ids in flight at once are few, so a clash is impossible in
        // practice, and skipping any id still in use makes it impossible in principle.
        self.advance();
        while self.entries.contains_key(&self.next_correlation_id) {
            self.advance();
        }
        self.entries.insert(
            id,
            Entry {
                addr: addr.to_owned(),
                deadline_ms,
                context,
            },
        );
        id
    }

    /// The context of a completed request — only if it was sent to `addr`.
    pub fn complete(&mut self, addr: &str, correlation_id: i32) -> Option<C> {
        match self.entries.get(&correlation_id) {
            Some(e) if e.addr == addr => self.entries.remove(&correlation_id).map(|e| e.context),
            _ => None,
        }
    }

    /// The context of a request in flight, to fill in after its frame was encoded.
    pub fn context_mut(&mut self, correlation_id: i32) -> Option<&mut C> {
        self.entries
            .get_mut(&correlation_id)
            .map(|e| &mut e.context)
    }

    /// Requests in flight to `addr`.
    pub fn count_to(&self, addr: &str) -> usize {
        self.entries.values().filter(|e| e.addr == addr).count()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes and returns every request in flight to `addr` (its connection is gone).
    pub fn drain_addr(&mut self, addr: &str) -> Vec<C> {
        let ids: Vec<i32> = self
            .entries
            .iter()
            .filter(|(_, e)| e.addr == addr)
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.entries.remove(&id))
            .map(|e| e.context)
            .collect()
    }

    /// Addresses with a request past its deadline.
    pub fn expired_addrs(&self, now_ms: u64) -> Vec<Addr> {
        let mut addrs: Vec<Addr> = self
            .entries
            .values()
            .filter(|e| e.deadline_ms <= now_ms)
            .map(|e| e.addr.clone())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    pub fn earliest_deadline_ms(&self) -> Option<u64> {
        self.entries.values().map(|e| e.deadline_ms).min()
    }

    /// Contexts of requests in flight to `addr`.
    pub fn contexts_to<'a>(&'a self, addr: &'a str) -> impl Iterator<Item = &'a C> + 'a {
        self.entries
            .values()
            .filter(move |e| e.addr == addr)
            .map(|e| &e.context)
    }

    /// Contexts in flight (for inspection).
    pub fn contexts(&self) -> impl Iterator<Item = &C> {
        self.entries.values().map(|e| &e.context)
    }
}

/// Exponential backoff: `base_ms * 2^(attempt-1)`, capped at `max_ms`.
pub fn backoff_ms(attempt: u32, base_ms: u64, max_ms: u64) -> u64 {
    let shift = attempt.saturating_sub(1).min(20);
    base_ms
        .saturating_mul(1u64 << shift)
        .min(max_ms.max(base_ms))
}

/// The earliest of several optional times.
pub fn earliest(times: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    times.into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_matches_by_address_and_counts() {
        let mut f = InFlight::default();
        let a = f.start("a:1", 100, "x");
        let b = f.start("a:1", 200, "y");
        let c = f.start("b:1", 50, "z");
        assert_eq!(f.count_to("a:1"), 2);
        assert_eq!(
            f.complete("b:1", a),
            None,
            "a response on another connection is not ours"
        );
        assert_eq!(f.complete("a:1", a), Some("x"));
        assert_eq!(f.expired_addrs(60), vec!["b:1".to_owned()]);
        assert_eq!(f.earliest_deadline_ms(), Some(50));
        assert_eq!(f.drain_addr("b:1"), vec!["z"]);
        assert_eq!(f.complete("a:1", b), Some("y"));
        assert_eq!(f.complete("b:1", c), None);
        assert!(f.is_empty());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_ms(1, 100, 1000), 100);
        assert_eq!(backoff_ms(2, 100, 1000), 200);
        assert_eq!(backoff_ms(4, 100, 1000), 800);
        assert_eq!(backoff_ms(5, 100, 1000), 1000);
        assert_eq!(backoff_ms(99, 100, 1000), 1000);
    }
}
