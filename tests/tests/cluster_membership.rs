//! Who belongs to a cluster (DESIGN §7): a broker outside the controller voters joins as a raft
//! learner and is sent a snapshot when it lags past the compacted log; a second process with a
//! live broker's node id, or with a voter's id at another address, is refused with a clear error;
//! a broker started with another cluster's data directory is refused and cannot disturb this
//! cluster's quorum. Real processes, bounded waits, no timing assertions.

use spool_tests::cli::spool_ok;
use spool_tests::cluster::Cluster;

/// Small, so that a dozen topics compact the log and a late joiner needs the snapshot.
const SNAPSHOT_EVERY: &str = "8";

#[test]
fn a_broker_outside_the_voters_joins_as_a_learner_from_a_snapshot_and_serves() {
    let mut cluster = Cluster::start_with_args(3, &["--metadata-snapshot-entries", SNAPSHOT_EVERY]);
    let controller = cluster.wait_healthy();
    for i in 0..12 {
        spool_ok(
            cluster.node(controller),
            &[
                "topic",
                "create",
                &format!("early-{i}"),
                "--partitions",
                "1",
            ],
            "",
        );
    }
    let learner =
        cluster.add_learner(&["--metadata-snapshot-entries", SNAPSHOT_EVERY, "--rack", "d"]);
    assert_eq!(learner, 4);
    let all = [1, 2, 3, 4];
    cluster.wait_until(
        "the learner registered, unfenced, caught up from a snapshot",
        |c| {
            let caught_up = c.gauge(learner, "spool_controller_is_learner") == Some(1)
                && c.gauge(learner, "spool_metadata_snapshots_installed_total") >= Some(1)
                && all.iter().all(|&i| {
                    c.gauge(i, "spool_registered_brokers") == Some(4)
                        && c.gauge(i, "spool_fenced_brokers") == Some(0)
                        && c.gauge(i, "spool_metadata_topics") == Some(12)
                });
            caught_up.then(|| c.agreed_digest(&all)).flatten()
        },
    );
    // The learner never votes: the voters agree on the controller, which is one of them.
    let leader = cluster
        .agreed_controller(&all)
        .expect("all four agree on the controller");
    assert!(
        cluster.voter_ids().contains(&leader),
        "controller {leader} votes"
    );

    // It serves like any broker: a topic created through it (forwarded to the controller)
    // reaches everyone, and `cluster info` lists it as a learner with no metadata lag.
    spool_ok(
        cluster.node(learner),
        &[
            "topic",
            "create",
            "late",
            "--partitions",
            "4",
            "--replication-factor",
            "3",
        ],
        "",
    );
    cluster.wait_until("the topic made through the learner everywhere", |c| {
        all.iter()
            .all(|&i| c.gauge(i, "spool_metadata_topics") == Some(13))
            .then(|| c.agreed_digest(&all))
            .flatten()
    });
    let info = cluster.wait_until("cluster info shows four caught-up brokers", |c| {
        let info = c.info(learner);
        let caught_up = info.brokers.len() == 4
            && info
                .brokers
                .iter()
                .all(|b| b.state == "active" && b.lag == Some(0));
        caught_up.then_some(info)
    });
    assert_eq!(info.voters, vec![1, 2, 3], "{info:?}");
    assert_eq!(info.learners, vec![4], "{info:?}");
    assert_eq!(info.controller, Some(leader), "{info:?}");
    assert!(info.brokers.iter().all(|b| b.epoch > 0), "{info:?}");
    assert_eq!(
        info.cluster_id.len(),
        32,
        "a 128-bit cluster id in hex: {info:?}"
    );
}

#[test]
fn a_second_broker_with_a_taken_node_id_is_refused_with_a_clear_error() {
    let mut cluster = Cluster::start(3);
    cluster.wait_healthy();
    let learner = cluster.add_learner(&[]);
    let all = [1, 2, 3, 4];
    cluster.wait_until("the learner registered and unfenced", |c| {
        all.iter()
            .all(|&i| {
                c.gauge(i, "spool_registered_brokers") == Some(4)
                    && c.gauge(i, "spool_fenced_brokers") == Some(0)
            })
            .then_some(())
    });
    let before = cluster.info(1);
    let epoch_before = before
        .brokers
        .iter()
        .find(|b| b.node_id == learner)
        .map(|b| b.epoch);

    // The learner's id again, elsewhere: the active controller refuses the registration while
    // the first one lives, and the second process stops with the reason.
    let dir = tempfile::tempdir().expect("a data directory");
    let refused = cluster.serve_refused(learner, dir.path(), &[]);
    assert!(!refused.status.success(), "a duplicate id must not run");
    assert!(
        refused.stderr.contains("DUPLICATE_BROKER_REGISTRATION")
            && refused
                .stderr
                .contains(&format!("node id {learner} is in use")),
        "stderr: {}",
        refused.stderr
    );

    // A voter's id at another address is refused before it starts (it would vote as that id).
    let dir = tempfile::tempdir().expect("a data directory");
    let refused = cluster.serve_refused(2, dir.path(), &[]);
    assert!(!refused.status.success());
    assert!(
        refused
            .stderr
            .contains("--controller-voters says node 2 listens on"),
        "stderr: {}",
        refused.stderr
    );

    // Nothing changed for the broker that owns the id.
    let after = cluster.info(1);
    let owner = after
        .brokers
        .iter()
        .find(|b| b.node_id == learner)
        .expect("still registered");
    assert_eq!(Some(owner.epoch), epoch_before, "{after:?}");
    assert_eq!(owner.state, "active", "{after:?}");
    assert!(cluster.node_mut(learner).is_running());
}

#[test]
fn a_broker_started_with_another_clusters_data_directory_is_refused() {
    // Cluster "other": three voters; keep its node 3's data directory, then stop it.
    let kept = tempfile::tempdir().expect("a directory to keep the other cluster's data in");
    let other_id = {
        let mut other = Cluster::start(3);
        other.wait_healthy();
        let id = other.info(1).cluster_id;
        other.node_mut(3).terminate();
        copy_dir(other.node(3).data_dir(), kept.path());
        id
    };

    let mut cluster = Cluster::start(3);
    cluster.wait_healthy();
    let ours = cluster.info(1).cluster_id;
    assert_ne!(ours, other_id, "every cluster gets its own id");

    // Node 3 comes back with the other cluster's data directory (same voter ids, another log).
    cluster.node_mut(3).terminate();
    let dir = cluster.node(3).data_dir().to_path_buf();
    std::fs::remove_dir_all(&dir).expect("removing node 3's data");
    copy_dir(kept.path(), &dir);
    let mut cmd = cluster.node(3).serve_command();
    let scratch = tempfile::tempdir().expect("scratch");
    let refused = spool_tests::process::run_to_end(
        &mut cmd,
        b"",
        scratch.path(),
        spool_tests::cluster::REFUSAL_TIMEOUT,
    );
    assert!(!refused.status.success(), "a stranger must not run");
    assert!(
        refused.stderr.contains("INCONSISTENT_CLUSTER_ID")
            && refused.stderr.contains(&other_id)
            && refused.stderr.contains(&ours),
        "stderr: {}",
        refused.stderr
    );

    // The two remaining voters still agree, still have a controller, and still take changes.
    let two = [1, 2];
    let controller = cluster.wait_until("nodes 1 and 2 agree on a controller", |c| {
        c.agreed_controller(&two)
    });
    spool_ok(
        cluster.node(controller),
        &["topic", "create", "after", "--partitions", "1"],
        "",
    );
    cluster.wait_until("the topic on both", |c| {
        two.iter()
            .all(|&i| c.gauge(i, "spool_metadata_topics") == Some(1))
            .then(|| c.agreed_digest(&two))
            .flatten()
    });
    assert_eq!(
        cluster.info(1).cluster_id,
        ours,
        "the cluster id never changes"
    );
}

/// `cp -a src/. dst` (the data directory with its raft log, as a stranger would bring it).
fn copy_dir(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).expect("creating the copy");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dst)
        .status()
        .expect("running cp");
    assert!(
        status.success(),
        "copying {} to {}",
        src.display(),
        dst.display()
    );
}

#[test]
fn a_restart_tells_the_controller_whether_the_broker_had_shut_down_cleanly() {
    let mut cluster = Cluster::start(3);
    let controller = cluster.wait_healthy();
    let victim = (1..=3)
        .find(|&i| i != controller)
        .expect("a non-controller");
    let unclean = |c: &Cluster| c.gauge(controller, "spool_unclean_shutdown_brokers");
    assert_eq!(unclean(&cluster), Some(0), "first registrations are clean");

    // kill -9 under `durability = fsync`: the data directory recorded the registration's
    // epoch, and everything the broker reported is synced, so the restart registers clean.
    let mark = cluster.node(victim).data_dir().join("clean-shutdown");
    cluster.wait_until("the registration's epoch recorded", |_| {
        mark.exists().then_some(())
    });
    cluster.node_mut(victim).kill9();
    cluster.wait_until("the killed broker fenced", |c| {
        (c.gauge(controller, "spool_fenced_brokers") == Some(1)).then_some(())
    });
    cluster.node_mut(victim).restart();
    cluster.wait_until("registered again after a crash, clean, and unfenced", |c| {
        (mark.exists() && c.gauge(controller, "spool_fenced_brokers") == Some(0)).then_some(())
    });
    assert_eq!(
        unclean(&cluster),
        Some(0),
        "a crash under fsync loses nothing reported"
    );

    // A data directory that lost its mark (a replaced disk): the next registration is unclean
    // (KIP-966), and the broker leaves every ISR until it has caught up again.
    cluster.node_mut(victim).kill9();
    cluster.wait_until("the killed broker fenced", |c| {
        (c.gauge(controller, "spool_fenced_brokers") == Some(1)).then_some(())
    });
    std::fs::remove_file(&mark).expect("removing the mark");
    cluster.node_mut(victim).restart();
    cluster.wait_until(
        "registered again after an unclean shutdown, and unfenced",
        |c| {
            (unclean(c) == Some(1) && c.gauge(controller, "spool_fenced_brokers") == Some(0))
                .then_some(())
        },
    );

    // SIGTERM: it flushes, closes and records its epoch; the next registration is clean.
    cluster.node_mut(victim).terminate();
    assert!(
        cluster
            .node(victim)
            .data_dir()
            .join("clean-shutdown")
            .exists(),
        "a clean stop leaves its mark"
    );
    cluster.node_mut(victim).restart();
    cluster.wait_until(
        "registered again after a clean shutdown, and unfenced",
        |c| {
            (unclean(c) == Some(0) && c.gauge(controller, "spool_fenced_brokers") == Some(0))
                .then_some(())
        },
    );
    cluster.wait_until("the new registration's epoch recorded", |_| {
        mark.exists().then_some(())
    });
}
