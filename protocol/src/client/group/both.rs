//! The fetching consumer core and its group member sharing one set of connections: one
//! [`ClientCore`] for the I/O layers, routing each response by correlation id (the member's ids
//! come from their own range) and telling each core when the other closed a connection they
//! share, since the I/O layer does not report a close it was asked for. [`Away`] is the pair
//! while the application is away from `poll`: the member's background duty only.

use crate::client::consumer::ConsumerCore;
use crate::client::net::{ClientCore, NetAction};
use crate::codec::Response;

use super::member::GroupCore;

pub(crate) struct Both<'a> {
    pub consumer: &'a mut ConsumerCore,
    pub group: Option<&'a mut GroupCore>,
}

fn closed(actions: &[NetAction]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            NetAction::Close { addr } => Some(addr.clone()),
            NetAction::Send { .. } => None,
        })
        .collect()
}

impl ClientCore for Both<'_> {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let Some(group) = self.group.as_deref_mut() else {
            return self.consumer.poll_actions(now_ms);
        };
        let mut out = group.poll_actions(now_ms);
        for addr in closed(&out) {
            self.consumer.on_disconnect(&addr, now_ms);
        }
        let fetching = self.consumer.poll_actions(now_ms);
        for addr in closed(&fetching) {
            group.on_disconnect(&addr, now_ms);
        }
        out.extend(fetching);
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        match self.group.as_deref_mut() {
            Some(g) if g.owns_correlation_id(response.header.correlation_id) => {
                g.on_response(addr, response, now_ms)
            }
            _ => self.consumer.on_response(addr, response, now_ms),
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        if let Some(g) = self.group.as_deref_mut() {
            g.on_disconnect(addr, now_ms);
        }
        self.consumer.on_disconnect(addr, now_ms);
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let group = self.group.as_deref().and_then(|g| g.next_wakeup_ms(now_ms));
        [group, self.consumer.next_wakeup_ms(now_ms)]
            .into_iter()
            .flatten()
            .min()
    }
}

/// The same two cores while the application is away from `poll` (Kafka's heartbeat thread): the
/// member does only its background duty ([`GroupCore::background_actions`]); the fetching core
/// sends nothing new but still takes the answers to what it had in flight, so the connections
/// they share stay in step.
pub(crate) struct Away<'a> {
    pub consumer: &'a mut ConsumerCore,
    pub group: &'a mut GroupCore,
}

impl ClientCore for Away<'_> {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let out = self.group.background_actions(now_ms);
        for addr in closed(&out) {
            self.consumer.on_disconnect(&addr, now_ms);
        }
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        if self
            .group
            .owns_correlation_id(response.header.correlation_id)
        {
            self.group.on_response(addr, response, now_ms)
        } else {
            self.consumer.on_response(addr, response, now_ms)
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        self.group.on_disconnect(addr, now_ms);
        self.consumer.on_disconnect(addr, now_ms);
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        self.group.background_wakeup_ms(now_ms)
    }
}
