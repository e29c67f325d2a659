//! The Kafka port with librdkafka (the `rdkafka` crate, librdkafka 2.12 built from its bundled
//! sources), a client nobody here wrote (issue #7, item 4a).
//!
//! One scenario, run twice (the broker stopped with SIGTERM, and with `kill -9`):
//! 1. an idempotent producer (`acks=all`, `partitioner=murmur2_random`) sends 100,000 keyed
//!    messages; every delivery report must name the partition Kafka's murmur2 picks for the key,
//!    and each partition's offsets must be exactly 0..n with each key's messages in send order;
//! 2. a group of three consumers (`enable.auto.commit=false`) reads about half of them, each
//!    committing synchronously what it processed (records polled but not committed before a
//!    revocation are forgotten: the partition's next owner reads them from the committed offset);
//! 3. the broker is stopped and restarted on the same data; OffsetFetch must answer the offsets
//!    committed before;
//! 4. a new group of three (same group id) resumes from the committed offsets: what was committed
//!    before and after must be every produced message exactly once, each at its acknowledged
//!    partition and offset. The checker lists the offenders.
//!
//! Every wait has a deadline that fails the test with what was seen so far.

mod group;
mod produce;

use std::time::{Duration, Instant};

use spool_protocol::client::partitioner::{murmur2, partition_for_key};
use spool_tests::checker::assert_none;
use spool_tests::client::create_topic;
use spool_tests::kafka_clients::start_broker;
use spool_tests::BrokerOptions;

use group::{commit_points, fetch_committed, run_group, summary, Consumed};
use produce::produce_all;

pub const MESSAGES: u64 = 100_000;
pub const PARTITIONS: i32 = 6;
pub const GROUP_SIZE: usize = 3;
/// Distinct keys: each key carries about ten messages, so per-key order is checked too.
pub const KEYS: u64 = 10_007;
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);
pub const TOPIC: &str = "rdkafka-orders";
pub const GROUP: &str = "rdkafka-group";

pub fn key_of(seq: u64) -> String {
    format!("key-{}", seq % KEYS)
}

/// Kafka's own murmur2 vectors (DESIGN §6), checked here too: every partition assertion below
/// rests on this function.
#[test]
fn murmur2_matches_kafkas_vectors() {
    for (input, expected) in [
        ("21", -973_932_308),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        ("abc", 479_470_107),
    ] {
        assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
    }
    // (murmur2 & 0x7fffffff) % n, with a negative hash: "21" → 1173551340.
    assert_eq!(partition_for_key(b"21", 6), 1_173_551_340 % 6);
}

#[test]
fn hundred_thousand_keyed_messages_resume_exactly_once_after_sigterm() {
    scenario(Stop::Sigterm);
}

#[test]
fn hundred_thousand_keyed_messages_resume_exactly_once_after_kill9() {
    scenario(Stop::Kill9);
}

#[derive(Debug, Clone, Copy)]
enum Stop {
    Sigterm,
    Kill9,
}

fn scenario(stop: Stop) {
    let mut broker = start_broker(BrokerOptions::default());
    create_topic(&broker, TOPIC, PARTITIONS);

    let started = Instant::now();
    let acked = produce_all(&broker);
    println!(
        "{stop:?}: produced {MESSAGES} keyed messages in {:?}",
        started.elapsed()
    );

    // A group nobody has committed for has no offsets. Asking also makes the broker set up the
    // group's coordinator before the three members look for it at once: on a fresh broker their
    // first JoinGroups can otherwise get NOT_COORDINATOR, and librdkafka waits ~3 s to rejoin,
    // late enough that the first generation may start without them (then one member could take
    // the whole first half alone).
    assert_eq!(
        fetch_committed(&broker),
        commit_points(&[]),
        "OffsetFetch for a new group"
    );
    let first = run_group(&broker, "before", MESSAGES as usize / 2, 0);
    let committed_before: Vec<&Consumed> = first.iter().flat_map(|m| &m.committed).collect();
    for m in &first {
        assert!(
            !m.committed.is_empty(),
            "{} committed nothing before the restart: the group of {GROUP_SIZE} did not share \
             the {PARTITIONS} partitions\n{}",
            m.name,
            summary(&first)
        );
    }
    let commit_points = commit_points(&committed_before);
    println!("{stop:?}: {}", summary(&first));

    match stop {
        Stop::Sigterm => broker.terminate(),
        Stop::Kill9 => broker.kill9(),
    }
    broker.restart();
    broker.wait_kafka_ready();

    assert_eq!(
        fetch_committed(&broker),
        commit_points,
        "OffsetFetch after the restart (left) vs the offsets committed before it (right)\n{}",
        broker.log_tail()
    );

    let second = run_group(&broker, "after", MESSAGES as usize, committed_before.len());
    println!("{stop:?}: {}", summary(&second));

    let all: Vec<(&str, &Consumed)> = first
        .iter()
        .chain(&second)
        .flat_map(|m| m.committed.iter().map(move |c| (m.name.as_str(), c)))
        .collect();
    check_exactly_once(&acked, &all);
}

/// Every produced message committed exactly once over both groups, each read at the partition
/// and offset its delivery report named, in the partition murmur2 picks for its key.
fn check_exactly_once(acked: &[(i32, i64)], all: &[(&str, &Consumed)]) {
    let mut by: Vec<Vec<&str>> = vec![Vec::new(); acked.len()];
    let mut wrong = Vec::new();
    for &(member, c) in all {
        let Some(&(p, o)) = acked.get(c.seq as usize) else {
            wrong.push(format!("{member}: message {} was never produced", c.seq));
            continue;
        };
        if (c.partition, c.offset) != (p, o) || c.key != key_of(c.seq) {
            wrong.push(format!(
                "{member}: message {} read as key {:?} at partition {} offset {}; produced as \
                 key {:?} at partition {p} offset {o}",
                c.seq,
                c.key,
                c.partition,
                c.offset,
                key_of(c.seq)
            ));
        }
        by[c.seq as usize].push(member);
    }
    let repeated: Vec<String> = by
        .iter()
        .enumerate()
        .filter(|(_, m)| m.len() > 1)
        .map(|(seq, m)| {
            let (p, o) = acked[seq];
            format!("message {seq} (partition {p} offset {o}) committed by {m:?}")
        })
        .collect();
    let lost: Vec<String> = by
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_empty())
        .map(|(seq, _)| {
            let (p, o) = acked[seq];
            format!("message {seq} (partition {p} offset {o}) never committed")
        })
        .collect();
    assert_none("records read back wrong", &wrong);
    assert_none("records repeated across the restart", &repeated);
    assert_none("records lost across the restart", &lost);
}
