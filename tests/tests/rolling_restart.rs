//! Rolling restart with controlled shutdown (DESIGN §7; the replication issue's item 8): a real
//! three-broker cluster with an RF-3 topic and an acks=all producer that fails on any delivery
//! error. Each broker in turn is stopped with SIGTERM, restarted, and waited on until it is back
//! in every ISR. Each SIGTERM first hands the broker's leaderships to other in-sync replicas
//! through the controller, so the producer sees leader changes, not a partition whose leader is
//! gone until the controller fences it; afterwards every acknowledged record is read back once,
//! in order, at its acknowledged offset.
//!
//! That each stop was a controlled one is read from what the brokers say: the stopped broker's
//! log says the controller let it go and that its last image had it leading nothing at exit,
//! and — when the controller was another node — that controller's
//! `spool_controlled_shutdowns_total` counted it. (A describe from another node cannot tell: a
//! fence moves the leaderships too, only later, and its partition changes land just before the
//! fence record.)
//!
//! Waits are on conditions, never on time, and every one is bounded.

use spool_tests::cluster::Cluster;
use spool_tests::paced::PacedProducer;
use spool_tests::replicated::{check_everything_acknowledged_is_there, cluster_with_topic_on};

const PARTITIONS: i32 = 3;
/// What a broker's log says once the controller let it stop (`broker/src/controlled_shutdown.rs`).
const GRANTED_LINE: &str =
    "controlled shutdown: the controller moved this broker's leaderships to other in-sync replicas";
/// What it says at exit when its last image has it leading nothing.
const LED_NOTHING_LINE: &str = "leading at exit: []";

#[test]
fn a_rolling_restart_moves_leaders_and_loses_nothing_acknowledged() {
    let cluster = Cluster::start(3);
    let (mut cluster, first_controller, _, _) =
        cluster_with_topic_on(cluster, "rolling", PARTITIONS, &[]);
    let all = [1, 2, 3];
    let producer = PacedProducer::start(cluster.node(first_controller), "rolling", PARTITIONS, 0);
    producer.wait_past(10 * PARTITIONS as usize);
    let mut restarted: Vec<i32> = Vec::new();
    let mut controller_stopped = false;
    while restarted.len() < all.len() {
        let controller = cluster.wait_until("one active controller", |c| c.agreed_controller(&all));
        // Next: first the active controller itself (the hard case: it decides its own
        // hand-off, and its raft leadership goes with it), then a broker not restarted yet that
        // leads the most, so there is a leadership to hand off. One always leads something: a
        // broker keeps the leaderships it was placed with (one each) until its own turn, as
        // hand-offs only move leaderships off the broker stopping.
        let rows = cluster.describe(controller, "rolling");
        let leads = |b: i32| rows.iter().filter(|r| r.leader == b).count();
        let victim = if restarted.is_empty() && leads(controller) > 0 {
            controller
        } else {
            all.iter()
                .copied()
                .filter(|b| !restarted.contains(b))
                .max_by_key(|b| leads(*b))
                .expect("a broker left to restart")
        };
        let led: Vec<i32> = rows
            .iter()
            .filter(|r| r.leader == victim)
            .map(|r| r.partition)
            .collect();
        assert!(
            !led.is_empty(),
            "broker {victim} leads a partition before it stops: {rows:?}"
        );
        controller_stopped |= victim == controller;
        let grants = |c: &Cluster| c.gauge(controller, "spool_controlled_shutdowns_total");
        let grants_before = grants(&cluster);
        let watcher = all
            .iter()
            .copied()
            .find(|b| *b != victim)
            .expect("another broker");

        cluster.node_mut(victim).terminate();

        let log = cluster.node(victim).log();
        assert!(
            log.contains(GRANTED_LINE),
            "broker {victim}'s controlled shutdown took effect\n{}",
            cluster.node(victim).log_tail()
        );
        assert!(
            log.contains(LED_NOTHING_LINE),
            "broker {victim} (leading {led:?} before SIGTERM) led nothing when it exited\n{}",
            cluster.node(victim).log_tail()
        );
        if victim != controller {
            let after = grants(&cluster);
            assert!(
                matches!((grants_before, after), (Some(b), Some(a)) if a > b),
                "the active controller {controller} counted broker {victim}'s controlled shutdown: {grants_before:?} -> {after:?}"
            );
        }

        cluster.node_mut(victim).restart();
        cluster.wait_until("the restarted broker back in every ISR", |c| {
            let rows = c.describe(watcher, "rolling");
            (rows.len() == PARTITIONS as usize && rows.iter().all(|r| r.isr.contains(&victim)))
                .then_some(())
        });
        restarted.push(victim);
        // The producer goes on through each step (it fails the test on any delivery error).
        let acked = producer.acked_count();
        producer.wait_past(acked + 5 * PARTITIONS as usize);
    }
    assert!(
        controller_stopped,
        "one of the stops was the active controller's own"
    );
    let acked = producer.stop();
    let reader = cluster.wait_until("one active controller", |c| c.agreed_controller(&all));
    let read =
        check_everything_acknowledged_is_there(&cluster, reader, "rolling", PARTITIONS, &acked);
    assert!(read >= acked.len(), "read {read} of {}", acked.len());
}
