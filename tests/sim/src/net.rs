//! [`Network`]: the simulated links between every pair of endpoints.
//!
//! Owns: per-link fault settings (delay range, loss, duplication, reordering), the set of cut
//! one-way links (a symmetric partition is two cuts), and deciding each message's fate when it is
//! sent: dropped, delivered once, or delivered twice, each copy at its own time.
//! Promises: every decision is drawn from the world's [`SimRng`] in send order, so a seed fixes
//! every fate; a cut link delivers nothing (checked at send and again at delivery, so a message
//! in flight when the link is cut is lost too); after [`Network::heal`] and
//! [`Network::calm`], every message is delivered once, within the base delay range.
//! Never does: queue or deliver messages (the world's event queue does), or look inside them.

use std::collections::BTreeSet;

use crate::message::{Endpoint, Envelope};
use crate::rng::SimRng;

/// Message faults, applied to every link alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFaults {
    pub delay_ms_min: u64,
    pub delay_ms_max: u64,
    /// Probability a message is lost.
    pub loss: f64,
    /// Probability a delivered message is delivered a second time.
    pub duplicate: f64,
    /// Probability a message is held back by up to `reorder_delay_ms_max` more, so later
    /// messages on the same link overtake it.
    pub reorder: f64,
    pub reorder_delay_ms_max: u64,
}

impl LinkFaults {
    /// A healthy LAN: 1–5 ms, nothing lost, duplicated or held back (small jitter still reorders).
    pub const CALM: LinkFaults = LinkFaults {
        delay_ms_min: 1,
        delay_ms_max: 5,
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        reorder_delay_ms_max: 0,
    };
}

/// What happened to one sent message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// The link from sender to receiver is cut.
    Cut,
    Lost,
    /// Delivery times, one per copy (two when duplicated).
    Deliver(Vec<u64>),
}

#[derive(Debug, Clone)]
pub struct Network {
    faults: LinkFaults,
    /// `(from, to)` pairs that deliver nothing.
    cut: BTreeSet<(Endpoint, Endpoint)>,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            faults: LinkFaults::CALM,
            cut: BTreeSet::new(),
        }
    }
}

impl Network {
    pub fn faults(&self) -> LinkFaults {
        self.faults
    }

    pub fn set_faults(&mut self, faults: LinkFaults) {
        self.faults = faults;
    }

    /// Back to [`LinkFaults::CALM`] (cuts stay).
    pub fn calm(&mut self) {
        self.faults = LinkFaults::CALM;
    }

    pub fn cut_one_way(&mut self, from: Endpoint, to: Endpoint) {
        self.cut.insert((from, to));
    }

    pub fn cut_both_ways(&mut self, a: Endpoint, b: Endpoint) {
        self.cut.insert((a, b));
        self.cut.insert((b, a));
    }

    /// Removes every cut.
    pub fn heal(&mut self) {
        self.cut.clear();
    }

    pub fn is_cut(&self, from: Endpoint, to: Endpoint) -> bool {
        self.cut.contains(&(from, to))
    }

    pub fn cuts(&self) -> usize {
        self.cut.len()
    }

    /// Decides the fate of `envelope` sent at `now_ms`.
    pub fn send(&self, rng: &mut SimRng, now_ms: u64, envelope: &Envelope) -> Fate {
        if self.is_cut(envelope.from, envelope.to) {
            return Fate::Cut;
        }
        let f = self.faults;
        if rng.chance(f.loss) {
            return Fate::Lost;
        }
        let copies = if rng.chance(f.duplicate) { 2 } else { 1 };
        let times = (0..copies)
            .map(|_| {
                let mut delay_ms = rng.range(f.delay_ms_min, f.delay_ms_max.max(f.delay_ms_min));
                if f.reorder_delay_ms_max > 0 && rng.chance(f.reorder) {
                    delay_ms += rng.range(1, f.reorder_delay_ms_max);
                }
                now_ms + delay_ms
            })
            .collect();
        Fate::Deliver(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Payload;

    fn hb() -> Envelope {
        Envelope::new(
            Endpoint::Node(1),
            Endpoint::Node(2),
            Payload::DeleteTopic {
                request_id: 1,
                name: "t".into(),
            },
        )
    }

    #[test]
    fn cuts_are_one_way_and_heal_restores_delivery() {
        let mut rng = SimRng::new(1);
        let mut net = Network::default();
        net.cut_one_way(Endpoint::Node(1), Endpoint::Node(2));
        assert_eq!(net.send(&mut rng, 0, &hb()), Fate::Cut);
        let back = Envelope::new(Endpoint::Node(2), Endpoint::Node(1), hb().payload);
        assert!(matches!(net.send(&mut rng, 0, &back), Fate::Deliver(_)));
        net.heal();
        match net.send(&mut rng, 10, &hb()) {
            Fate::Deliver(t) => assert!(t.len() == 1 && (11..=15).contains(&t[0])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn loss_and_duplication_happen_at_roughly_their_rates() {
        let mut rng = SimRng::new(2);
        let mut net = Network::default();
        net.set_faults(LinkFaults {
            loss: 0.2,
            duplicate: 0.1,
            ..LinkFaults::CALM
        });
        let (mut lost, mut dup) = (0, 0);
        for _ in 0..10_000 {
            match net.send(&mut rng, 0, &hb()) {
                Fate::Lost => lost += 1,
                Fate::Deliver(t) if t.len() == 2 => dup += 1,
                _ => {}
            }
        }
        assert!((1700..2300).contains(&lost), "lost {lost}");
        assert!((600..1000).contains(&dup), "dup {dup}");
    }
}
