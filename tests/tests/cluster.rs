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
    let leader = cluster.wait_healthy();
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
        let rows = cluster.describe(i, "orders");
        assert_eq!(rows.len(), 3, "node {i}: {rows:?}");
        for r in &rows {
            // Racks a, b, c are nodes 1, 2, 3: one replica per rack, the first one leading.
            let mut replicas = r.replicas.clone();
            replicas.sort_unstable();
            assert_eq!(
                replicas,
                vec![1, 2, 3],
                "node {i}: one replica per rack: {r:?}"
            );
            assert_eq!(
                r.leader, r.replicas[0],
                "the preferred leader leads a new partition"
            );
        }
        let mut leaders: Vec<i32> = rows.iter().map(|r| r.leader).collect();
        leaders.sort_unstable();
        assert_eq!(leaders, vec![1, 2, 3], "leaders are balanced: {rows:?}");
    }
}

#[test]
fn kcat_sees_three_brokers_and_the_leaders_and_produces_through_them() {
    use spool_tests::kafka_clients::{kcat, run_client};
    let cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let leader = cluster.wait_healthy();
    spool_ok(
        cluster.node(leader),
        &[
            "topic",
            "create",
            "k",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
        "",
    );
    let rows = cluster.wait_until("the topic on every node", |c| {
        let rows = c.describe(3, "k");
        (all.iter()
            .all(|&i| c.gauge(i, "spool_metadata_topics") == Some(1))
            && rows.len() == 3)
            .then_some(rows)
    });
    let node = cluster.node(1);
    let scratch = node.scratch().join("kcat");
    std::fs::create_dir_all(&scratch).unwrap();
    let kcat_run = |args: &[&str], stdin: &[u8]| {
        let mut cmd = std::process::Command::new(kcat());
        cmd.arg("-b").arg(node.kafka_bootstrap()).args(args);
        run_client(
            &mut cmd,
            stdin,
            &scratch,
            std::time::Duration::from_secs(60),
        )
    };
    let listed = kcat_run(&["-L"], b"").stdout;
    assert!(listed.contains(" 3 brokers:"), "{listed}");
    for i in all {
        let addr = cluster.node(i).kafka_bootstrap();
        assert!(
            listed.contains(&format!("broker {i} at {addr}")),
            "{listed}"
        );
    }
    for r in &rows {
        let line = format!("partition {}, leader {},", r.partition, r.leader);
        assert!(listed.contains(&line), "kcat -L lacks {line:?}:\n{listed}");
    }
    // Each partition's records go to its leader, wherever kcat bootstrapped.
    let lines: String = (0..300).map(|i| format!("key-{i}:value-{i}\n")).collect();
    let produced = kcat_run(&["-P", "-t", "k", "-K", ":"], lines.as_bytes());
    assert!(produced.status.success(), "{}", produced.stderr);
    let consumed = kcat_run(
        &["-C", "-t", "k", "-o", "beginning", "-e", "-q", "-f", "%k\n"],
        b"",
    );
    let keys: Vec<&str> = consumed.stdout.lines().collect();
    let distinct: std::collections::BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(
        (keys.len(), distinct.len()),
        (300, 300),
        "every record read back exactly once: {}",
        consumed.stderr
    );
}

#[test]
fn killing_the_controller_elects_a_new_one_and_topic_creation_works_again() {
    let mut cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let first = cluster.wait_healthy();
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

/// The partitions `victim` led before a fault, and the describe rows from node `from` after it.
fn led_by(rows: &[spool_tests::cluster::PartitionRow], victim: i32) -> Vec<i32> {
    rows.iter()
        .filter(|r| r.leader == victim)
        .map(|r| r.partition)
        .collect()
}

#[test]
fn a_killed_broker_is_fenced_its_partitions_get_leaders_from_the_isr_and_it_is_unfenced_on_return()
{
    let mut cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let controller = cluster.wait_healthy();
    spool_ok(
        cluster.node(controller),
        &[
            "topic",
            "create",
            "t",
            "--partitions",
            "6",
            "--replication-factor",
            "3",
        ],
        "",
    );
    let before = cluster.wait_until("the topic on the controller", |c| {
        let rows = c.describe(controller, "t");
        (rows.len() == 6).then_some(rows)
    });
    // The victim is a broker that is not the controller (the controller's own loss is the other
    // test) and that leads at least one partition (placement balances leaders: each leads two).
    let victim = all
        .iter()
        .copied()
        .find(|&i| i != controller && !led_by(&before, i).is_empty())
        .expect("a non-controller broker leading a partition");
    let led = led_by(&before, victim);
    cluster.node_mut(victim).kill9();
    let after = cluster.wait_until(
        "the victim fenced and its partitions led by ISR members",
        |c| {
            (c.gauge(controller, "spool_fenced_brokers") == Some(1)).then_some(())?;
            let rows = c.describe(controller, "t");
            let moved = led.iter().all(|p| {
                rows.iter()
                    .any(|r| r.partition == *p && r.leader != victim && r.leader >= 0)
            });
            moved.then_some(rows)
        },
    );
    for r in &after {
        let was = before.iter().find(|b| b.partition == r.partition).unwrap();
        assert!(
            !r.isr.contains(&victim),
            "{r:?}: a fenced broker stays in no ISR"
        );
        assert!(r.isr.contains(&r.leader), "{r:?}: the leader is in the ISR");
        assert_eq!(
            r.offline,
            vec![victim],
            "{r:?}: the fenced broker's replica is offline"
        );
        assert!(
            was.isr.contains(&r.leader),
            "{r:?}: the new leader came from the old ISR {was:?}"
        );
        if led.contains(&r.partition) {
            assert_eq!(
                r.leader_epoch,
                was.leader_epoch + 1,
                "{r:?}: a leader change bumps the epoch"
            );
        }
    }
    // A new leader stamps what it appends with its new epoch: after one record, its
    // leader-epoch checkpoint says where that epoch starts.
    let moved = after
        .iter()
        .find(|r| led.contains(&r.partition))
        .expect("a moved partition")
        .clone();
    spool_ok(
        cluster.node(controller),
        &["produce", "t", "--partition", &moved.partition.to_string()],
        "after the failover\n",
    );
    let checkpoint = cluster
        .node(moved.leader)
        .data_dir()
        .join(format!("t-{}", moved.partition))
        .join("leader-epoch-checkpoint");
    let text = cluster.wait_until("the new leader's epoch checkpointed", |_| {
        let text = std::fs::read_to_string(&checkpoint).ok()?;
        text.lines()
            .skip(2)
            .any(|l| l.split_whitespace().next() == Some(&moved.leader_epoch.to_string()))
            .then_some(text)
    });
    assert!(text.starts_with("0\n"), "{text}");
    // `cluster info` shows it fenced and not answering, the others active.
    let info = cluster.info(controller);
    let row = |info: &spool_tests::cluster::ClusterInfo, id: i32| {
        info.brokers
            .iter()
            .find(|b| b.node_id == id)
            .cloned()
            .unwrap_or_else(|| panic!("broker {id} listed: {info:?}"))
    };
    let fenced = row(&info, victim);
    assert_eq!(
        (fenced.state.as_str(), fenced.applied),
        ("fenced", None),
        "{info:?}"
    );
    assert!(
        all.iter()
            .filter(|&&i| i != victim)
            .all(|&i| row(&info, i).state == "active"),
        "{info:?}"
    );
    // Back: registers again (a new incarnation, so a new broker epoch), catches up with the
    // metadata log and is unfenced. (It rejoins the ISRs only once it has caught up with each
    // leader's log: the replication milestone.)
    cluster.node_mut(victim).restart();
    cluster.wait_until("the victim unfenced again", |c| {
        all.iter()
            .all(|&i| c.gauge(i, "spool_fenced_brokers") == Some(0))
            .then_some(())
    });
    cluster.wait_until("no replica offline once it is back", |c| {
        c.describe(controller, "t")
            .iter()
            .all(|r| r.offline.is_empty())
            .then_some(())
    });
    let back = row(&cluster.info(controller), victim);
    assert_eq!(back.state, "active");
    assert!(back.epoch > fenced.epoch, "{back:?} after {fenced:?}");
}

#[test]
fn a_paused_broker_is_fenced_and_rejoins_after_it_resumes() {
    let mut cluster = Cluster::start(3);
    let all = [1, 2, 3];
    let controller = cluster.wait_healthy();
    let victim = all.iter().copied().find(|&i| i != controller).unwrap();
    cluster.node_mut(victim).pause();
    cluster.wait_until("the paused broker fenced", |c| {
        (c.gauge(controller, "spool_fenced_brokers") == Some(1)).then_some(())
    });
    cluster.node_mut(victim).resume();
    cluster.wait_until("the resumed broker unfenced on every node", |c| {
        all.iter()
            .all(|&i| c.gauge(i, "spool_fenced_brokers") == Some(0))
            .then_some(())
    });
}

#[test]
fn kafka_python_sees_three_brokers_and_each_partitions_leader() {
    use spool_tests::kafka_clients::{python_with_kafka, run_client};
    let cluster = Cluster::start(3);
    let controller = cluster.wait_healthy();
    spool_ok(
        cluster.node(controller),
        &[
            "topic",
            "create",
            "py",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        ],
        "",
    );
    let rows = cluster.wait_until("the topic on every node", |c| {
        let rows = c.describe(2, "py");
        ((1..=3).all(|i| c.gauge(i, "spool_metadata_topics") == Some(1)) && rows.len() == 3)
            .then_some(rows)
    });
    // kafka-python's own metadata client: the brokers it learned and the leader it would send
    // each partition's records to.
    let script = r#"
import json, sys, time
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], api_version_auto_timeout_ms=10000)
deadline = time.time() + 30
while time.time() < deadline:
    c.topics()
    cluster = c._client.cluster
    if cluster.partitions_for_topic("py"):
        break
    time.sleep(0.1)
brokers = sorted((b.nodeId, b.host, b.port) for b in cluster.brokers())
leaders = {p: cluster.leader_for_partition(TopicPartition("py", p)) for p in sorted(cluster.partitions_for_topic("py") or [])}
print(json.dumps({"brokers": brokers, "leaders": leaders}))
c.close()
"#;
    let node = cluster.node(3);
    let mut cmd = std::process::Command::new(python_with_kafka());
    cmd.arg("-c").arg(script).arg(node.kafka_bootstrap());
    let scratch = node.scratch().join("python");
    std::fs::create_dir_all(&scratch).unwrap();
    let f = run_client(&mut cmd, b"", &scratch, std::time::Duration::from_secs(60));
    let seen: serde_json::Value = serde_json::from_str(f.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON from kafka-python ({e}): {}\n{}",
            f.stdout, f.stderr
        )
    });
    let brokers = seen["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 3, "{seen}");
    for (i, b) in brokers.iter().enumerate() {
        let addr = cluster.node(i as i32 + 1).kafka_bootstrap();
        assert_eq!(b[0], i as i64 + 1, "{seen}");
        assert_eq!(
            format!("{}:{}", b[1].as_str().unwrap(), b[2]),
            addr,
            "{seen}"
        );
    }
    for r in &rows {
        assert_eq!(
            seen["leaders"][r.partition.to_string()],
            r.leader,
            "partition {}: {seen}",
            r.partition
        );
    }
}
