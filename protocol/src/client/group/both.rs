//! The fetching consumer core and its group member sharing one set of connections: one
//! [`ClientCore`] for the I/O layers, routing each response by correlation id (the member's ids
//! come from their own range) and telling each core when the other closed a connection they
//! share, since the I/O layer does not report a close it was asked for.

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
