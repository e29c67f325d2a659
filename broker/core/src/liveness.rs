//! Broker liveness as the active controller sees it: who has heartbeated lately, who should be
//! fenced for silence, and when a fenced broker may be unfenced (DESIGN §7 "Liveness").
//!
//! Owns: the active controller's in-memory session per broker (broker epoch, last contact time).
//! Sessions are not metadata: they live only on the active controller, start afresh when a node
//! becomes active, and are never written to the log (heartbeats that change nothing are not
//! logged either).
//!
//! Promises:
//! - a broker is [`BrokerSessions::expired`] only if the image shows it unfenced and nothing was
//!   heard from it (registration or heartbeat at its current epoch or later) for more than
//!   `session_timeout_ms`;
//! - a controller that just became active counts every broker as heard from at that moment
//!   (Kafka does the same): sessions were on the previous controller, so without this grace a
//!   failover would fence every broker at once;
//! - a heartbeat from an older broker epoch than the session knows (a previous incarnation still
//!   running) refreshes nothing;
//! - [`may_unfence`]: a fenced broker is unfenced only when it asks to run (neither fence nor
//!   shutdown wanted) and has applied the metadata log up to an offset the controller committed
//!   at or after the fence — so it has seen its own fencing and every leader change it caused.
//!
//! Never does: read a clock (time arrives as `now_ms`, any monotonic milliseconds), decide what
//! fencing changes in the partitions (that is [`crate::election`]), or write records.

use std::collections::BTreeMap;

/// How often a broker heartbeats (DESIGN §7; Kafka's default is 2 s).
pub const BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 250;
/// Silence after which the active controller fences a broker (DESIGN §7; Kafka's is 9 s).
/// Six heartbeat intervals: one or two lost or late heartbeats do not fence a broker, and a dead
/// broker is fenced — and its partitions get new leaders — well within DESIGN §1's ~2 s.
pub const BROKER_SESSION_TIMEOUT_MS_DEFAULT: u64 = 1500;

// A session timeout that a single late heartbeat could exceed would fence healthy brokers.
const _: () =
    assert!(BROKER_SESSION_TIMEOUT_MS_DEFAULT >= 4 * BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT);

/// One registered broker as liveness sees it in the metadata image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessBroker {
    pub broker_id: i32,
    pub fenced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    broker_epoch: i64,
    last_contact_ms: u64,
}

/// The active controller's broker sessions. Make one when this node becomes the active
/// controller ([`BrokerSessions::new`] with that moment) and drop it when it stops being active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSessions {
    /// When this node became active: every broker counts as heard from then.
    active_since_ms: u64,
    /// At most one per registered broker (brokers are keyed by id and never duplicated).
    sessions: BTreeMap<i32, Session>,
}

impl BrokerSessions {
    /// Sessions of a controller that became active at `active_since_ms`.
    pub fn new(active_since_ms: u64) -> Self {
        BrokerSessions {
            active_since_ms,
            sessions: BTreeMap::new(),
        }
    }

    pub fn active_since_ms(&self) -> u64 {
        self.active_since_ms
    }

    /// A broker registered (or re-registered) with `broker_epoch` at `now_ms`: a fresh session.
    /// A registration with an older epoch than the session's is ignored (it was superseded).
    pub fn on_register(&mut self, broker_id: i32, broker_epoch: i64, now_ms: u64) {
        self.touch(broker_id, broker_epoch, now_ms);
    }

    /// A heartbeat from `broker_id` at `broker_epoch` arrived at `now_ms`. Returns whether it
    /// refreshed the session: `false` for an epoch older than the session's (an earlier
    /// incarnation of the broker, which must not keep the current one alive).
    pub fn on_heartbeat(&mut self, broker_id: i32, broker_epoch: i64, now_ms: u64) -> bool {
        self.touch(broker_id, broker_epoch, now_ms)
    }

    fn touch(&mut self, broker_id: i32, broker_epoch: i64, now_ms: u64) -> bool {
        let session = self.sessions.entry(broker_id).or_insert(Session {
            broker_epoch,
            last_contact_ms: now_ms,
        });
        if broker_epoch < session.broker_epoch {
            return false;
        }
        let before = session.last_contact_ms;
        session.broker_epoch = broker_epoch;
        // Times from a monotonic source never go back; if a caller's do, keep the later one so a
        // session is never shortened by it.
        session.last_contact_ms = before.max(now_ms);
        assert!(session.last_contact_ms >= before);
        true
    }

    /// When the controller last heard from `broker_id`, counting its activation as contact.
    pub fn last_contact_ms(&self, broker_id: i32) -> u64 {
        self.sessions
            .get(&broker_id)
            .map_or(self.active_since_ms, |s| s.last_contact_ms)
            .max(self.active_since_ms)
    }

    /// Brokers unfenced in `brokers` (the image the controller proposes against, so one already
    /// being fenced is not returned twice) that have been silent for more than
    /// `session_timeout_ms` at `now_ms`, in id order.
    pub fn expired(
        &self,
        brokers: impl IntoIterator<Item = LivenessBroker>,
        now_ms: u64,
        session_timeout_ms: u64,
    ) -> Vec<i32> {
        let mut expired: Vec<i32> = brokers
            .into_iter()
            .filter(|b| !b.fenced)
            .filter(|b| {
                now_ms.saturating_sub(self.last_contact_ms(b.broker_id)) > session_timeout_ms
            })
            .map(|b| b.broker_id)
            .collect();
        expired.sort_unstable();
        expired.dedup();
        expired
    }
}

/// What of a heartbeat the unfence rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnfenceCheck {
    /// Whether the image shows the broker fenced.
    pub fenced: bool,
    pub want_fence: bool,
    pub want_shutdown: bool,
    /// The last metadata log offset the broker has applied.
    pub current_metadata_offset: i64,
}

/// Whether this heartbeat unfences the broker. `caught_up_offset` is a metadata offset the
/// controller has committed, taken at or after the broker's fence (the controller passes its
/// applied index at the time of the heartbeat, which always is): a broker that has applied that
/// far has seen its own fencing and every partition change made because of it, so it will not
/// act on stale leadership once unfenced.
pub fn may_unfence(heartbeat: &UnfenceCheck, caught_up_offset: i64) -> bool {
    heartbeat.fenced
        && !heartbeat.want_fence
        && !heartbeat.want_shutdown
        && heartbeat.current_metadata_offset >= caught_up_offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TIMEOUT: u64 = BROKER_SESSION_TIMEOUT_MS_DEFAULT;
    const EVERY: u64 = BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT;

    fn live(ids: &[i32]) -> Vec<LivenessBroker> {
        ids.iter()
            .map(|&broker_id| LivenessBroker {
                broker_id,
                fenced: false,
            })
            .collect()
    }

    #[test]
    fn a_heartbeating_broker_stays_and_a_silent_one_expires_after_the_timeout() {
        let mut s = BrokerSessions::new(0);
        for b in 1..=3 {
            s.on_register(b, 10 + i64::from(b), 0);
        }
        let mut now = 0;
        while now < 10_000 {
            now += EVERY;
            s.on_heartbeat(1, 11, now);
            s.on_heartbeat(2, 12, now);
            if now <= 1_000 {
                s.on_heartbeat(3, 13, now);
            }
            let expected: Vec<i32> = if now > 1_000 + TIMEOUT {
                vec![3]
            } else {
                vec![]
            };
            assert_eq!(
                s.expired(live(&[1, 2, 3]), now, TIMEOUT),
                expected,
                "at {now}"
            );
        }
        // Exactly at the timeout is not yet "older than" it.
        assert_eq!(
            s.expired(live(&[3]), 1_000 + TIMEOUT, TIMEOUT),
            Vec::<i32>::new()
        );
        assert_eq!(s.expired(live(&[3]), 1_001 + TIMEOUT, TIMEOUT), vec![3]);
    }

    #[test]
    fn a_new_active_controller_gives_every_broker_a_grace_period() {
        // Broker 1 last heartbeated to the previous controller long ago; broker 2 never did.
        let mut s = BrokerSessions::new(50_000);
        s.on_heartbeat(1, 5, 100);
        assert_eq!(s.last_contact_ms(1), 50_000);
        assert_eq!(s.last_contact_ms(2), 50_000);
        assert!(s
            .expired(live(&[1, 2]), 50_000 + TIMEOUT, TIMEOUT)
            .is_empty());
        s.on_heartbeat(1, 5, 51_000);
        assert_eq!(
            s.expired(live(&[1, 2]), 50_001 + TIMEOUT, TIMEOUT),
            vec![2],
            "broker 2 stayed silent through its grace period"
        );
    }

    #[test]
    fn fenced_brokers_are_never_expired_and_old_incarnations_keep_nothing_alive() {
        let mut s = BrokerSessions::new(0);
        s.on_register(1, 7, 0);
        let fenced = [LivenessBroker {
            broker_id: 1,
            fenced: true,
        }];
        assert!(s.expired(fenced, 100_000, TIMEOUT).is_empty());
        // Broker 1 restarts as epoch 8; the old process (epoch 7) keeps heartbeating.
        s.on_register(1, 8, 1_000);
        assert!(!s.on_heartbeat(1, 7, 2_000));
        assert!(!s.on_heartbeat(1, 7, 2_600));
        assert_eq!(s.expired(live(&[1]), 1_001 + TIMEOUT, TIMEOUT), vec![1]);
        assert!(s.on_heartbeat(1, 8, 2_700));
        assert!(s.expired(live(&[1]), 2_700 + TIMEOUT, TIMEOUT).is_empty());
    }

    #[test]
    fn a_fenced_broker_is_unfenced_only_caught_up_and_asking_to_run() {
        let hb = UnfenceCheck {
            fenced: true,
            want_fence: false,
            want_shutdown: false,
            current_metadata_offset: 40,
        };
        assert!(may_unfence(&hb, 40));
        assert!(may_unfence(&hb, 39));
        assert!(!may_unfence(&hb, 41), "has not seen offset 41 yet");
        assert!(!may_unfence(
            &UnfenceCheck {
                fenced: false,
                ..hb
            },
            0
        ));
        assert!(!may_unfence(
            &UnfenceCheck {
                want_fence: true,
                ..hb
            },
            0
        ));
        assert!(!may_unfence(
            &UnfenceCheck {
                want_shutdown: true,
                ..hb
            },
            0
        ));
        assert!(!may_unfence(
            &UnfenceCheck {
                current_metadata_offset: -1,
                ..hb
            },
            0
        ));
    }

    #[derive(Debug, Clone)]
    enum Event {
        Register { broker: i32, epoch: i64 },
        Heartbeat { broker: i32, epoch: i64 },
        Wait { ms: u64 },
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0i32..4, 0i64..3).prop_map(|(broker, epoch)| Event::Register { broker, epoch }),
            (0i32..4, 0i64..3).prop_map(|(broker, epoch)| Event::Heartbeat { broker, epoch }),
            (0u64..2 * TIMEOUT).prop_map(|ms| Event::Wait { ms }),
        ]
    }

    proptest! {
        /// Against a model: a broker is expired exactly when it is unfenced and the latest of
        /// (activation, each registration or heartbeat at an epoch no older than any before it)
        /// is more than the timeout ago.
        #[test]
        fn expiry_matches_the_model(
            active_since in 0u64..10_000,
            events in proptest::collection::vec(event(), 0..60),
            fenced in proptest::collection::vec(any::<bool>(), 4),
        ) {
            let mut s = BrokerSessions::new(active_since);
            let mut now = active_since;
            let mut model_epoch = [i64::MIN; 4];
            let mut model_contact = [active_since; 4];
            let brokers: Vec<LivenessBroker> = (0..4)
                .map(|b| LivenessBroker { broker_id: b, fenced: fenced[b as usize] })
                .collect();
            for e in events {
                match e {
                    Event::Wait { ms } => now += ms,
                    Event::Register { broker, epoch } | Event::Heartbeat { broker, epoch } => {
                        let fresh = epoch >= model_epoch[broker as usize];
                        if fresh {
                            model_epoch[broker as usize] = epoch;
                            model_contact[broker as usize] = now;
                        }
                        let refreshed = if matches!(e, Event::Register { .. }) {
                            s.on_register(broker, epoch, now);
                            fresh
                        } else {
                            s.on_heartbeat(broker, epoch, now)
                        };
                        prop_assert_eq!(refreshed, fresh);
                    }
                }
                let want: Vec<i32> = (0..4)
                    .filter(|&b| !fenced[b as usize])
                    .filter(|&b| now - model_contact[b as usize] > TIMEOUT)
                    .collect();
                prop_assert_eq!(s.expired(brokers.clone(), now, TIMEOUT), want);
            }
        }
    }
}
