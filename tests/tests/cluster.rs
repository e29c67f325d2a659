//! Three real brokers as one cluster (DESIGN §7): a raft-rs controller quorum over the internal
//! port, brokers registering with the active controller, metadata reaching every node, and a new
//! controller after `kill -9` of the active one. Bounded waits, no timing assertions: a test only
//! waits for the cluster to reach the state it checks.

use spool_tests::cli::{spool, spool_ok};
use spool_tests::cluster::Cluster;

#[test]
fn three_brokers_form_a_quorum_register_and_agree_on_metadata() {
    let cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let leader = cluster.wait_until("one active controller all agree on", |c| {
        c.agreed_controller(&all)
    });
    cluster.wait_until("three registered, unfenced brokers on every node", |c| {
        all.iter()
            .all(|&i| {
                c.gauge(i, "spool_registered_brokers") == Some(3)
                    && c.gauge(i, "spool_fenced_brokers") == Some(0)
            })
            .then_some(())
    });
    // A topic created through a node that is not the controller is forwarded to it.
    let other = all.iter().copied().find(|&i| i != leader).unwrap();
    spool_ok(
        cluster.node(other),
        &[
            "topic",
            "create",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
        "",
    );
    cluster.wait_until("every node has the topic and the same image", |c| {
        let topics_everywhere = all
            .iter()
            .all(|&i| c.gauge(i, "spool_metadata_topics") == Some(1));
        topics_everywhere.then(|| c.agreed_digest(&all)).flatten()
    });
    for i in all {
        let described = spool_ok(cluster.node(i), &["topic", "describe", "orders"], "");
        assert!(described.contains("orders"), "node {i}: {described}");
    }
}

#[test]
fn killing_the_controller_elects_a_new_one_and_topic_creation_works_again() {
    let mut cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let first = cluster.wait_until("an active controller", |c| c.agreed_controller(&all));
    cluster.wait_until("three registered brokers", |c| {
        all.iter()
            .all(|&i| c.gauge(i, "spool_registered_brokers") == Some(3))
            .then_some(())
    });
    cluster.node_mut(first).kill9();
    let rest: Vec<i32> = all.iter().copied().filter(|&i| i != first).collect();
    let second = cluster.wait_until("a new controller among the survivors", |c| {
        c.agreed_controller(&rest)
    });
    assert_ne!(second, first, "a killed node cannot stay the controller");
    let survivor = cluster.node(rest[0]);
    // Retried while the survivors finish electing (NOT_CONTROLLER is retriable), then it works.
    cluster.wait_until("topic creation through a survivor", |_| {
        let f = spool(
            survivor,
            &[
                "topic",
                "create",
                "after-failover",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
            ],
            "",
        );
        f.status.success().then_some(())
    });
    cluster.wait_until("the survivors have the topic and agree on the image", |c| {
        let has_topic = rest
            .iter()
            .all(|&i| c.gauge(i, "spool_metadata_topics") == Some(1));
        has_topic.then(|| c.agreed_digest(&rest)).flatten()
    });
    // The killed node comes back, catches up with what it missed, and agrees with the others.
    cluster.node_mut(first).restart();
    cluster.wait_until(
        "the restarted node has the topic created while it was down",
        |c| (c.gauge(first, "spool_metadata_topics") == Some(1)).then_some(()),
    );
    cluster.wait_until("all three agree on the image", |c| c.agreed_digest(&all));
    cluster.wait_until("all three agree on the controller", |c| {
        c.agreed_controller(&all)
    });
}
