//! A member whose handler takes longer than its `session.timeout.ms` between two polls (but less
//! than `max.poll.interval.ms`) is alive, and keeps its partitions: the client library's
//! background heartbeat keeps it in the group while the application is away from `poll`, as
//! Kafka's heartbeat thread does. Without it the coordinator would drop the member after the
//! session timeout and give its partitions to the other member.
//!
//! The slow member is the library's blocking consumer in this process (so its handler can
//! sleep); the other member is a `spool consume --group` process that polls all along. The
//! sleep is the behaviour under test; every wait around it is for a condition, bounded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spool_protocol::client::blocking::Consumer;
use spool_protocol::client::consumer::ConsumerConfig;
use spool_protocol::client::group::RebalanceListener;
use spool_protocol::client::TopicPartition;
use spool_tests::client::create_topic;
use spool_tests::group_checks::SETTLE;
use spool_tests::group_consumer::{mark, GroupConsumer, MemberOptions};

use crate::broker;

/// The slow member's session: the broker's smallest allowed (`group.min.session.timeout.ms`).
const SESSION_TIMEOUT_MS: u64 = 6_000;
/// Its progress bound, far above the handler's time.
const MAX_POLL_INTERVAL_MS: u64 = 120_000;
/// The handler's time between two polls: three sessions.
const HANDLER_MS: u64 = 3 * SESSION_TIMEOUT_MS;

/// Every callback the slow member's listener saw: (generation, partitions, assigned?).
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(i32, Vec<TopicPartition>, bool)>>>);

impl RebalanceListener for Seen {
    fn on_assigned(&mut self, generation: i32, partitions: &[TopicPartition]) {
        self.0
            .lock()
            .expect("listener log")
            .push((generation, partitions.to_vec(), true));
    }
    fn on_revoked(&mut self, generation: i32, partitions: &[TopicPartition]) {
        self.0
            .lock()
            .expect("listener log")
            .push((generation, partitions.to_vec(), false));
    }
}

#[test]
fn a_handler_slower_than_the_session_keeps_its_partitions() {
    let broker = broker();
    let (topic, group) = ("slow", "slow-group");
    create_topic(&broker, topic, 4);

    let config = ConsumerConfig {
        group_id: Some(group.into()),
        session_timeout_ms: SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: 1_000,
        max_poll_interval_ms: MAX_POLL_INTERVAL_MS,
        ..ConsumerConfig::default()
    };
    let mut slow = Consumer::new(&[&broker.bootstrap()], config).expect("a consumer");
    let seen = Seen::default();
    slow.subscribe(&[topic], seen.clone()).expect("subscribe");
    let other = GroupConsumer::start(&broker, "other", topic, group, &MemberOptions::default());

    // Both members hold two partitions each in one generation (the slow one polls meanwhile).
    let deadline = Instant::now() + SETTLE;
    loop {
        slow.poll(100).expect("poll");
        let shared = slow.assignment().len() == 2
            && other.owned().len() == 2
            && other.with(|o| o.generation()) == Some(slow.generation());
        if shared {
            break;
        }
        assert!(
            Instant::now() < deadline && other.exit_status().is_none(),
            "no 2+2 assignment after {SETTLE:?}: slow holds {:?} in generation {}\n{}",
            slow.assignment(),
            slow.generation(),
            other.summary()
        );
    }
    let generation = slow.generation();
    let slow_owned = slow.assignment();
    let other_owned = other.owned();
    let callbacks_before = seen.0.lock().expect("listener log").len();
    let since = mark();

    // The handler: longer than the session, shorter than max_poll_interval_ms.
    std::thread::sleep(Duration::from_millis(HANDLER_MS));
    slow.poll(100).expect("poll after the slow handler");

    assert_eq!(
        slow.generation(),
        generation,
        "the slow member was dropped from the group; the other member saw:\n{}",
        other.summary()
    );
    assert_eq!(slow.assignment(), slow_owned);
    assert_eq!(
        seen.0.lock().expect("listener log").len(),
        callbacks_before,
        "the slow member's partitions were revoked: {:?}",
        seen.0.lock().expect("listener log")
    );
    // The other member took nothing over: no callback of its since the handler started.
    let (assigned, revoked) = other.with(|o| {
        (
            o.assigned().iter().filter(|a| a.2 > since).count(),
            o.revoked().iter().filter(|r| r.2 > since).count(),
        )
    });
    assert_eq!(
        (assigned, revoked, other.owned()),
        (0, 0, other_owned),
        "the other member rebalanced while the slow one was processing:\n{}",
        other.summary()
    );
    assert!(
        other.exit_status().is_none(),
        "the other member exited:\n{}",
        other.summary()
    );
    slow.close().expect("close");
}
