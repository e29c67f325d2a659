//! A follower that comes back after its leader deleted everything it had (Kafka's
//! `truncateFullyAndStartAt`), on three real broker processes: a follower is killed, the leader
//! writes on and DeleteRecords moves its log start past the follower's end, the follower
//! restarts; its fetch is out of range, it restarts its log empty at the leader's log start
//! (said once in its log, persisted in its log-start checkpoint), catches up and rejoins the
//! ISR, after which acks=all needs it again and works.
//!
//! Every wait is on a condition with a deadline; nothing sleeps to hope.

use bytes::Bytes;
use spool_protocol::client::producer::Acks;
use spool_protocol::client::ProducerRecord;
use spool_tests::cli::spool_ok;
use spool_tests::client::producer;
use spool_tests::cluster::Cluster;
use spool_tests::log_files::persisted_log_start;
use spool_tests::replicated::cluster_with_topic_on;
use spool_tests::Broker;

/// Produces records `range` to `partition` of `topic`, one batch each, acks=all.
fn produce_batches(broker: &Broker, topic: &str, partition: i32, range: std::ops::Range<u64>) {
    let p = producer(broker, Acks::All);
    for i in range {
        let mut r = ProducerRecord::new(topic, Bytes::from(format!("v-{i}")));
        r.partition = Some(partition);
        p.send(r).expect("queued");
        p.flush(30_000).expect("acknowledged");
    }
}

#[test]
fn a_follower_back_after_its_records_were_deleted_restarts_at_the_leaders_start_and_rejoins() {
    let topic = "restarted";
    let partition = 0;
    let (mut cluster, controller, _, _) = cluster_with_topic_on(Cluster::start(3), topic, 3, &[]);
    let leader = cluster.describe(controller, topic)[partition as usize].leader;
    let follower = (1..=3)
        .find(|&i| i != controller && i != leader)
        .expect("a follower that is not the controller");
    let isr = |c: &Cluster| {
        c.describe(controller, topic)[partition as usize]
            .isr
            .clone()
    };
    produce_batches(cluster.node(controller), topic, partition, 0..10);
    cluster.wait_until("every broker in the ISR", |c| {
        (isr(c).len() == 3).then_some(())
    });

    cluster.node_mut(follower).kill9();
    cluster.wait_until("the killed follower out of the ISR", |c| {
        (!isr(c).contains(&follower)).then_some(())
    });
    produce_batches(cluster.node(controller), topic, partition, 10..20);
    let out = spool_ok(
        cluster.node(controller),
        &[
            "topic",
            "delete-records",
            topic,
            "--partition",
            &partition.to_string(),
            "--before",
            "-1",
        ],
        "",
    );
    assert!(out.contains("log start 20"), "{out}");

    cluster.node_mut(follower).restart();
    cluster.wait_until("the restarted follower back in the ISR", |c| {
        isr(c).contains(&follower).then_some(())
    });
    let log = cluster.node(follower).log();
    let said = log
        .lines()
        .filter(|l| l.contains("replica restarted empty at the leader's log start 20"))
        .count();
    assert_eq!(said, 1, "said once, at warn:\n{log}");
    assert_eq!(
        persisted_log_start(cluster.node(follower).data_dir(), topic, partition),
        Some(20),
        "the follower's log starts where the leader's does"
    );
    // acks=all with the follower in the ISR again: it has to hold these too.
    produce_batches(cluster.node(controller), topic, partition, 20..25);
}
