//! A member whose handler takes longer than its `session.timeout.ms` between two polls (but less
//! than `max.poll.interval.ms`) is alive, and keeps its partitions: the client library's
//! background heartbeat keeps it in the group while the application is away from `poll`, as
//! Kafka's heartbeat thread does. Without it the coordinator would drop the member after the
//! session timeout and give its partitions to the other member.
//!
//! The slow member is the library's consumer in this process (so its handler can sleep): the
//! blocking one (heartbeat thread) and the glommio one (heartbeat task; its handler awaits a
//! timer, as a handler on a glommio executor must). The other member is a `spool consume
//! --group` process that polls all along. The sleep is the behaviour under test; every wait
//! around it is for a condition, bounded.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spool_protocol::client::consumer::ConsumerConfig;
use spool_protocol::client::group::RebalanceListener;
use spool_protocol::client::{blocking, glommio_io, TopicPartition};
use spool_tests::client::create_topic;
use spool_tests::group_checks::SETTLE;
use spool_tests::group_consumer::{mark, GroupConsumer, MemberOptions};
use spool_tests::Broker;

use crate::broker;

/// The slow member's session: the broker's smallest allowed (`group.min.session.timeout.ms`).
const SESSION_TIMEOUT_MS: u64 = 6_000;
/// Its progress bound, far above the handler's time.
const MAX_POLL_INTERVAL_MS: u64 = 120_000;
/// The handler's time between two polls: three sessions.
const HANDLER_MS: u64 = 3 * SESSION_TIMEOUT_MS;
/// Partitions of the topic: two for each member.
const PARTITIONS: i32 = 4;

/// One callback: (generation, partitions, assigned? else revoked).
type Callback = (i32, Vec<TopicPartition>, bool);

/// Every callback the slow member's listener saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Callback>>>);

impl Seen {
    fn log(&self) -> Vec<Callback> {
        self.0.lock().expect("listener log").clone()
    }

    /// What the callbacks so far left the member holding.
    fn held(&self) -> BTreeSet<TopicPartition> {
        let mut held = BTreeSet::new();
        for (_, partitions, assigned) in self.log() {
            for p in partitions {
                if assigned {
                    held.insert(p);
                } else {
                    held.remove(&p);
                }
            }
        }
        held
    }
}

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

fn config(group: &str) -> ConsumerConfig {
    ConsumerConfig {
        group_id: Some(group.into()),
        session_timeout_ms: SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: 1_000,
        max_poll_interval_ms: MAX_POLL_INTERVAL_MS,
        ..ConsumerConfig::default()
    }
}

/// Whether both members hold two partitions each in one generation; fails once `deadline`
/// passes or the other member exits.
fn shared(seen: &Seen, generation: i32, other: &GroupConsumer, deadline: Instant) -> bool {
    let done = seen.held().len() == 2
        && other.owned().len() == 2
        && other.with(|o| o.generation()) == Some(generation);
    assert!(
        done || (Instant::now() < deadline && other.exit_status().is_none()),
        "no 2+2 assignment after {SETTLE:?}: the slow member's callbacks {:?}\n{}",
        seen.log(),
        other.summary()
    );
    done
}

/// What both members held when the slow handler started.
struct Before {
    generation: i32,
    callbacks: usize,
    other_owned: BTreeSet<TopicPartition>,
    since: u64,
}

impl Before {
    fn take(generation: i32, seen: &Seen, other: &GroupConsumer) -> Self {
        Self {
            generation,
            callbacks: seen.log().len(),
            other_owned: other.owned(),
            since: mark(),
        }
    }

    /// Nothing moved: same generation, no callback on either side, the same partitions.
    fn assert_kept(&self, generation: i32, seen: &Seen, other: &GroupConsumer) {
        assert_eq!(
            generation,
            self.generation,
            "the slow member was dropped from the group; the other member saw:\n{}",
            other.summary()
        );
        assert_eq!(
            seen.log().len(),
            self.callbacks,
            "the slow member's partitions moved: {:?}",
            seen.log()
        );
        let (assigned, revoked) = other.with(|o| {
            (
                o.assigned().iter().filter(|a| a.2 > self.since).count(),
                o.revoked().iter().filter(|r| r.2 > self.since).count(),
            )
        });
        assert_eq!(
            (assigned, revoked, other.owned()),
            (0, 0, self.other_owned.clone()),
            "the other member rebalanced while the slow one was processing:\n{}",
            other.summary()
        );
        assert!(
            other.exit_status().is_none(),
            "the other member exited:\n{}",
            other.summary()
        );
    }
}

fn setup() -> (Broker, &'static str) {
    let broker = broker();
    let topic = "slow";
    create_topic(&broker, topic, PARTITIONS);
    (broker, topic)
}

#[test]
fn a_handler_slower_than_the_session_keeps_its_partitions() {
    let group = "slow-group";
    let (broker, topic) = setup();
    let mut slow =
        blocking::Consumer::new(&[&broker.bootstrap()], config(group)).expect("a consumer");
    let seen = Seen::default();
    slow.subscribe(&[topic], seen.clone()).expect("subscribe");
    let other = GroupConsumer::start(&broker, "other", topic, group, &MemberOptions::default());

    let deadline = Instant::now() + SETTLE;
    loop {
        slow.poll(100).expect("poll");
        if shared(&seen, slow.generation(), &other, deadline) {
            break;
        }
    }
    let before = Before::take(slow.generation(), &seen, &other);

    // The handler: longer than the session, shorter than max_poll_interval_ms.
    std::thread::sleep(Duration::from_millis(HANDLER_MS));
    slow.poll(100).expect("poll after the slow handler");

    before.assert_kept(slow.generation(), &seen, &other);
    slow.close().expect("close");
}

#[test]
fn an_async_handler_slower_than_the_session_keeps_its_partitions() {
    let group = "slow-async-group";
    let (broker, topic) = setup();
    let bootstrap = broker.bootstrap();
    let other = Arc::new(GroupConsumer::start(
        &broker,
        "other",
        topic,
        group,
        &MemberOptions::default(),
    ));
    let on_executor = Arc::clone(&other);
    glommio::LocalExecutorBuilder::default()
        .name("slow-member")
        .spawn(move || async move {
            let other = on_executor;
            let mut slow =
                glommio_io::Consumer::new(&[&bootstrap], config(group)).expect("a consumer");
            let seen = Seen::default();
            slow.subscribe(&[topic], seen.clone()).expect("subscribe");
            let deadline = Instant::now() + SETTLE;
            loop {
                slow.poll(100).await.expect("poll");
                if shared(&seen, slow.generation(), &other, deadline) {
                    break;
                }
            }
            let before = Before::take(slow.generation(), &seen, &other);

            // The handler awaits (a handler that blocked the executor's thread would stop
            // everything on it, the heartbeat task included: thread-per-core).
            glommio::timer::sleep(Duration::from_millis(HANDLER_MS)).await;
            slow.poll(100).await.expect("poll after the slow handler");

            before.assert_kept(slow.generation(), &seen, &other);
            slow.close().await.expect("close");
        })
        .expect("an executor")
        .join()
        .expect("the slow member's executor");
    drop(other);
}
