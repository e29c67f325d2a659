//! Shared steps of the replication tests (three-broker clusters with an RF-3 topic): setting the
//! cluster and topic up, waiting for a dead leader's partitions to be led elsewhere, and the
//! closing check every such test makes — every acknowledged record read back once, in order, at
//! its acknowledged offset ([`crate::checker`]'s three checks).

use std::time::Duration;

use crate::checker::{assert_none, duplicates, missing_acked, out_of_order, Acked};
use crate::cli::spool_ok;
use crate::cluster::{Cluster, PartitionRow};

/// Bound on reading everything back.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// On `cluster` (three nodes, started by the caller): waits until it is healthy, creates `topic`
/// with `partitions` partitions at RF 3 (`extra`: more `topic create` flags), and waits until
/// every node has it. Returns the cluster, the controller, a victim — a broker that is not the
/// controller and leads at least one partition — and the partitions the victim leads.
pub fn cluster_with_topic_on(
    cluster: Cluster,
    topic: &str,
    partitions: i32,
    extra: &[&str],
) -> (Cluster, i32, i32, Vec<i32>) {
    let controller = cluster.wait_healthy();
    let count = partitions.to_string();
    let mut args = vec![
        "topic",
        "create",
        topic,
        "--partitions",
        &count,
        "--replication-factor",
        "3",
    ];
    args.extend_from_slice(extra);
    spool_ok(cluster.node(controller), &args, "");
    let rows: Vec<PartitionRow> = cluster.wait_until("the topic on every node", |c| {
        let everywhere = (1..=3).all(|i| c.describe(i, topic).len() == partitions as usize);
        everywhere.then(|| c.describe(controller, topic))
    });
    let victim = (1..=3)
        .find(|&i| i != controller && rows.iter().any(|r| r.leader == i))
        .expect("a non-controller broker that leads a partition");
    let led = rows
        .iter()
        .filter(|r| r.leader == victim)
        .map(|r| r.partition)
        .collect();
    (cluster, controller, victim, led)
}

/// Waits until every partition in `led` of `topic` has a live leader other than `victim`.
pub fn wait_re_led(cluster: &Cluster, controller: i32, topic: &str, victim: i32, led: &[i32]) {
    cluster.wait_until("the victim's partitions led elsewhere", |c| {
        let rows = c.describe(controller, topic);
        led.iter()
            .all(|p| {
                rows.iter()
                    .any(|r| r.partition == *p && r.leader >= 0 && r.leader != victim)
            })
            .then_some(())
    });
}

/// Reads `topic` (its `partitions`) back through `reader` until every acknowledged offset is
/// reached, and checks the three promises: nothing acknowledged missing, nothing twice, nothing
/// out of order (values are the paced producer's `g-<seq>`). Returns how many records it read.
pub fn check_everything_acknowledged_is_there(
    cluster: &Cluster,
    reader: i32,
    topic: &str,
    partitions: i32,
    acked: &[Acked],
) -> usize {
    let last = crate::checker::last_acked_offsets(acked);
    let read =
        crate::client::consume_until(cluster.node(reader), topic, partitions, READ_TIMEOUT, |r| {
            crate::checker::reached(r, &last)
        });
    assert_none(
        "acknowledged records read back",
        &missing_acked(acked, &read),
    );
    assert_none("records read twice", &duplicates(&read));
    assert_none(
        "per-partition order",
        &out_of_order(&read, crate::paced::seq_of),
    );
    read.len()
}
