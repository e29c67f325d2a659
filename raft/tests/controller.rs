//! The controller driven the way the broker drives it on core 0: open the directory, register
//! and unfence the broker, create/delete topics, poll until committed, restart from the same
//! directory. No sleeps and no clocks: `tick(now_ms)` is given made-up times.

use std::path::Path;

use spool_protocol::ErrorCode;
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{
    Committed, Controller, ControllerConfig, CreateTopicRequest, MetadataImage, ProposalId, Uuid128,
};

/// Polls until `id` commits and returns its entry.
fn commit(controller: &mut Controller, id: ProposalId) -> Committed {
    for _ in 0..10 {
        let polled = controller.poll().expect("poll");
        assert!(polled.messages.is_empty(), "a single voter sends nothing");
        assert!(polled.abandoned.is_empty());
        if let Some(c) = polled
            .committed
            .into_iter()
            .find(|c| c.proposal == Some(id))
        {
            return c;
        }
    }
    panic!("proposal {id:?} did not commit");
}

/// Registers broker 1 and unfences it, as the broker does at start-up.
fn start_broker(controller: &mut Controller) {
    let id = controller
        .register_broker(&RegisterBrokerRequest {
            broker_id: 1,
            incarnation_id: Uuid128 { high: 1, low: 2 },
            listeners: vec![spool_raft::image::BrokerListener {
                name: "native".into(),
                host: "127.0.0.1".into(),
                port: 9093,
            }],
            rack: None,
            cluster_id: None,
            registered_session_live: false,
            previous_broker_epoch: -1,
        })
        .expect("register");
    assert_eq!(commit(controller, id).outcome, Ok(()));
    let broker = controller.image().broker(1).expect("registered").clone();
    assert!(broker.fenced, "a new registration starts fenced");
    let hb = HeartbeatRequest {
        broker_id: 1,
        broker_epoch: broker.broker_epoch,
        current_metadata_offset: controller.applied_index() as i64,
        want_fence: false,
        want_shutdown: false,
    };
    let id = controller
        .heartbeat(&hb)
        .expect("heartbeat")
        .expect("a caught-up fenced broker is unfenced");
    assert_eq!(commit(controller, id).outcome, Ok(()));
    assert!(!controller.image().broker(1).expect("registered").fenced);
    assert_eq!(controller.heartbeat(&hb), Ok(None), "nothing more to write");
}

fn create(controller: &mut Controller, req: &CreateTopicRequest) -> Result<(), ErrorCode> {
    let id = controller.create_topic(req).map_err(|r| r.code)?;
    commit(controller, id).outcome
}

fn open(dir: &Path) -> (Controller, MetadataImage) {
    Controller::open(dir, 1, 1).expect("open")
}

#[test]
fn create_restart_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, image) = open(dir.path());
    assert!(c.is_leader(), "a sole voter leads as soon as it opens");
    // A fresh quorum's first leader writes the cluster id before anything else.
    let cluster_id = image
        .cluster_id()
        .expect("a fresh quorum names its cluster at once");
    assert!(!cluster_id.is_zero());
    assert_eq!(image.topic_count(), 0);
    assert_eq!(image.brokers().count(), 0);
    start_broker(&mut c);

    let req = CreateTopicRequest::new("orders", 3)
        .with_config("retention.ms", "60000")
        .with_config("cleanup.policy", "compact")
        .with_config("segment.bytes", "1048576")
        .with_config("retention.bytes", "-1")
        .with_config("max.message.bytes", "2000000")
        .with_config("min.insync.replicas", "1");
    assert_eq!(create(&mut c, &req), Ok(()));
    let topic = c.image().topic("orders").expect("created").clone();
    assert_eq!(topic.partitions.len(), 3);
    assert_eq!(topic.config.retention_ms, Some(60000));
    assert_eq!(topic.config_value("cleanup.policy"), Some("compact"));
    assert_eq!(
        topic.config.cleanup_policy,
        Some(spool_core::topic_config::CleanupPolicy::COMPACT)
    );
    for p in &topic.partitions {
        assert_eq!(
            (p.replicas.as_slice(), p.isr.as_slice(), p.leader),
            (&[1][..], &[1][..], 1)
        );
    }

    // Duplicate: refused at once, nothing written.
    let applied = c.applied_index();
    let dup = c.create_topic(&CreateTopicRequest::new("orders", 1));
    assert_eq!(dup.map_err(|r| r.code), Err(ErrorCode::TopicAlreadyExists));
    assert_eq!(c.poll().expect("poll").committed.len(), 0);
    assert_eq!(c.applied_index(), applied);

    // Restart: the topic is still there, with the same id.
    drop(c);
    let (mut c, image) = open(dir.path());
    assert_eq!(image.topic("orders"), Some(&topic));
    assert_eq!(c.image(), &image);
    assert_eq!(
        image.cluster_id(),
        Some(cluster_id),
        "the cluster id never changes"
    );

    // Delete, then delete again.
    let id = c.delete_topic("orders").expect("delete");
    assert_eq!(commit(&mut c, id).outcome, Ok(()));
    assert!(c.image().topic("orders").is_none());
    let again = c.delete_topic("orders").map_err(|r| r.code);
    assert_eq!(again, Err(ErrorCode::UnknownTopicOrPartition));

    drop(c);
    let (_, image) = open(dir.path());
    assert!(image.topic("orders").is_none());
    assert!(!image.broker(1).expect("broker survives restarts").fenced);
}

#[test]
fn invalid_requests_are_refused_with_kafka_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = open(dir.path());
    // No unfenced broker yet: no replica can be placed.
    assert_eq!(
        create(&mut c, &CreateTopicRequest::new("t", 1)),
        Err(ErrorCode::InvalidReplicationFactor)
    );
    start_broker(&mut c);
    let cases: Vec<(CreateTopicRequest, ErrorCode)> = vec![
        (
            CreateTopicRequest::new("", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new(".", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("..", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("a/b", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("a b", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("é", 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("x".repeat(250), 1),
            ErrorCode::InvalidTopicException,
        ),
        (
            CreateTopicRequest::new("t", 0),
            ErrorCode::InvalidPartitions,
        ),
        (
            CreateTopicRequest::new("t", -5),
            ErrorCode::InvalidPartitions,
        ),
        (
            CreateTopicRequest::new("t", 1_000_000),
            ErrorCode::InvalidPartitions,
        ),
        (
            CreateTopicRequest {
                replication_factor: 2,
                ..CreateTopicRequest::new("t", 1)
            },
            ErrorCode::InvalidReplicationFactor,
        ),
        (
            CreateTopicRequest {
                replication_factor: 0,
                ..CreateTopicRequest::new("t", 1)
            },
            ErrorCode::InvalidReplicationFactor,
        ),
        (
            CreateTopicRequest::new("t", 1).with_config("retention.ms", "forever"),
            ErrorCode::InvalidConfig,
        ),
        (
            CreateTopicRequest::new("t", 1).with_config("cleanup.policy", "shred"),
            ErrorCode::InvalidConfig,
        ),
        (
            CreateTopicRequest::new("t", 1).with_config("no.such.config", "1"),
            ErrorCode::InvalidConfig,
        ),
        (
            CreateTopicRequest {
                configs: vec![("retention.ms".into(), None)],
                ..CreateTopicRequest::new("t", 1)
            },
            ErrorCode::InvalidConfig,
        ),
    ];
    let applied = c.applied_index();
    for (req, code) in cases {
        let got = c.create_topic(&req).map(|_| ()).map_err(|r| r.code);
        assert_eq!(got, Err(code), "{:?}", req.name);
    }
    assert_eq!(
        c.poll().expect("poll").committed.len(),
        0,
        "refusals write nothing"
    );
    assert_eq!(c.applied_index(), applied);
    // Legal edge cases pass.
    assert_eq!(
        create(&mut c, &CreateTopicRequest::new("x".repeat(249), 1)),
        Ok(())
    );
    assert_eq!(
        create(&mut c, &CreateTopicRequest::new("a-b_c.D9", -1)),
        Ok(())
    );
    // '.' and '_' collide.
    assert_eq!(
        create(&mut c, &CreateTopicRequest::new("a-b_c_D9", 1)),
        Err(ErrorCode::InvalidTopicException)
    );
}

#[test]
fn a_second_create_of_a_pending_topic_is_refused_before_the_first_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = open(dir.path());
    start_broker(&mut c);
    let first = c
        .create_topic(&CreateTopicRequest::new("t", 2))
        .expect("first");
    let second = c
        .create_topic(&CreateTopicRequest::new("t", 2))
        .map_err(|r| r.code);
    assert_eq!(second, Err(ErrorCode::TopicAlreadyExists));
    // Delete of the pending topic is accepted (it exists in the latest image) and commits after.
    let delete = c.delete_topic("t").expect("delete pending");
    let polled = c.poll().expect("poll");
    let outcomes: Vec<_> = polled
        .committed
        .iter()
        .map(|c| (c.proposal, c.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![(Some(first), Ok(())), (Some(delete), Ok(()))]
    );
    assert!(c.image().topic("t").is_none());
    assert_eq!(c.latest_image(), c.image());
}

#[test]
fn snapshots_compact_the_log_and_restore_on_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ControllerConfig::single_node(1, 1);
    config.raft.snapshot_every_entries = 5;
    let (mut c, _) = Controller::open_with(dir.path(), config.clone()).expect("open");
    start_broker(&mut c);
    for i in 0..23 {
        assert_eq!(
            create(&mut c, &CreateTopicRequest::new(format!("t{i}"), 1 + i % 4)),
            Ok(())
        );
        if i % 3 == 0 {
            let id = c.delete_topic(&format!("t{i}")).expect("delete");
            assert_eq!(commit(&mut c, id).outcome, Ok(()));
        }
    }
    let pid = c.allocate_producer_ids(1, c.image().broker(1).expect("b").broker_epoch, 1000);
    assert_eq!(commit(&mut c, pid.expect("pids")).outcome, Ok(()));
    assert_eq!(c.image().next_producer_id(), 1000);
    assert!(c.disk().snapshot_index() > 0, "a snapshot was taken");
    let status = c.status();
    assert!(status.is_leader && status.leader_id == 1 && status.term >= 1);
    assert_eq!(status.applied_index, status.commit_index);
    assert!(status.log_entries < 5, "{status:?}");
    assert_eq!(status.snapshot_index, c.disk().snapshot_index());
    let held = c.raft().log().last() + 1 - c.raft().log().first();
    assert!(held <= 5 + 2, "the log is compacted (holds {held} entries)");
    let before = c.image().clone();
    drop(c);
    let (c, image) = Controller::open_with(dir.path(), config).expect("reopen");
    assert_eq!(image, before);
    assert_eq!(c.image().topic_count(), 23 - 8);
}

#[test]
fn proposal_ids_do_not_repeat_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = open(dir.path());
    start_broker(&mut c);
    let a = c.create_topic(&CreateTopicRequest::new("a", 1)).expect("a");
    commit(&mut c, a);
    drop(c);
    let (mut c, _) = open(dir.path());
    let b = c.create_topic(&CreateTopicRequest::new("b", 1)).expect("b");
    assert_ne!(a, b);
    assert!(b.incarnation > a.incarnation);
    commit(&mut c, b);
}

#[test]
fn ticks_from_any_clock_keep_a_single_voter_leading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = open(dir.path());
    let mut now_ms = 1_000_000;
    for _ in 0..100 {
        now_ms += 250;
        let polled = c.tick(now_ms).expect("tick");
        assert!(polled.messages.is_empty());
    }
    assert!(c.is_leader());
    start_broker(&mut c);
}

#[test]
fn entries_durable_but_uncommitted_at_a_crash_commit_on_restart() {
    use spool_raft::disk::RaftDisk;
    use spool_raft::validate::validate_create_topic;
    use spool_raft::{CreateTopicPolicy, MetadataRaft, RaftConfig};

    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut c, _) = open(dir.path());
        start_broker(&mut c);
    }
    // Drive the sans-IO core by hand and "crash" after the entry is durable but before the
    // commit index that covers it is.
    let (mut disk, recovered) = RaftDisk::open(dir.path()).expect("disk");
    let mut raft = MetadataRaft::new(&RaftConfig::single_voter(1, 1), recovered).expect("raft");
    while let Some(ready) = raft.ready() {
        disk.persist_ready(ready.snapshot(), ready.entries(), ready.hard_state())
            .expect("persist");
        let adv = raft.advance(ready).expect("advance");
        disk.persist_advanced(
            adv.hard_state.as_ref(),
            adv.conf_state.as_ref(),
            adv.snapshot_taken.as_ref(),
        )
        .expect("persist advanced");
    }
    assert!(raft.is_leader());
    let record = validate_create_topic(
        raft.latest_image(),
        &CreateTopicRequest::new("late", 1),
        Uuid128 { high: 9, low: 9 },
        &CreateTopicPolicy::default(),
    )
    .expect("valid");
    let id = raft.propose(record).expect("propose");
    let ready = raft.ready().expect("ready");
    assert_eq!(ready.entries().len(), 1);
    disk.persist_ready(ready.snapshot(), ready.entries(), ready.hard_state())
        .expect("persist");
    drop(ready);
    drop(raft);
    drop(disk);

    let (mut c, image) = open(dir.path());
    let topic = image.topic("late").expect("committed on restart");
    assert_eq!(topic.topic_id, Uuid128 { high: 9, low: 9 });
    // The old incarnation's proposal is not reported as this incarnation's.
    let next = c
        .create_topic(&CreateTopicRequest::new("next", 1))
        .expect("next");
    assert_ne!(next.incarnation, id.incarnation);
    assert_eq!(commit(&mut c, next).outcome, Ok(()));
}

#[test]
fn proposals_in_flight_are_bounded_until_the_driver_polls() {
    use spool_raft::node::PENDING_PROPOSALS_MAX;

    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = open(dir.path());
    start_broker(&mut c);
    let epoch = c.image().broker(1).expect("registered").broker_epoch;
    for _ in 0..PENDING_PROPOSALS_MAX {
        c.allocate_producer_ids(1, epoch, 10)
            .expect("within the bound");
    }
    let over = c.allocate_producer_ids(1, epoch, 10).map_err(|r| r.code);
    assert_eq!(over, Err(ErrorCode::ThrottlingQuotaExceeded));
    let polled = c.poll().expect("poll");
    assert_eq!(polled.committed.len(), PENDING_PROPOSALS_MAX);
    assert_eq!(
        c.image().next_producer_id(),
        10 * PENDING_PROPOSALS_MAX as i64
    );
    c.allocate_producer_ids(1, epoch, 10)
        .expect("room again after the poll");
}

/// Opens a fresh directory with `seed`, creates topics `a`, `b`, `c`, restarts, creates `d`,
/// and returns the four topic ids in creation order.
fn topic_ids_of_a_run(seed: u64) -> Vec<Uuid128> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ids = Vec::new();
    {
        let (mut c, _) = Controller::open(dir.path(), 1, seed).expect("open");
        start_broker(&mut c);
        for name in ["a", "b", "c"] {
            assert_eq!(create(&mut c, &CreateTopicRequest::new(name, 1)), Ok(()));
            ids.push(c.image().topic(name).expect("created").topic_id);
        }
    }
    let (mut c, _) = Controller::open(dir.path(), 1, seed).expect("reopen");
    assert_eq!(create(&mut c, &CreateTopicRequest::new("d", 1)), Ok(()));
    ids.push(c.image().topic("d").expect("created").topic_id);
    ids
}

#[test]
fn the_same_seed_makes_the_same_topic_ids() {
    let first = topic_ids_of_a_run(0x5eed);
    assert_eq!(first, topic_ids_of_a_run(0x5eed));
    assert!(first.iter().all(|id| !id.is_zero()), "{first:?}");
    let mut distinct = first.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), first.len(), "ids repeat: {first:?}");
}

#[test]
fn different_seeds_make_different_topic_ids() {
    let a = topic_ids_of_a_run(1);
    let b = topic_ids_of_a_run(2);
    for id in &a {
        assert!(!b.contains(id), "{id:?} made under both seeds");
    }
}

#[test]
fn a_restart_with_the_same_seed_does_not_replay_earlier_ids() {
    // Incarnation 2 must not hand out incarnation 1's ids: they may belong to deleted topics
    // whose data a broker still holds. topic_ids_of_a_run restarts before creating "d".
    let ids = topic_ids_of_a_run(7);
    let (before_restart, after_restart) = ids.split_at(3);
    assert!(!before_restart.contains(&after_restart[0]), "{ids:?}");
    // And deleting a topic frees its name but not its id: a new topic of the same name gets a
    // fresh one.
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, _) = Controller::open(dir.path(), 1, 7).expect("open");
    start_broker(&mut c);
    assert_eq!(create(&mut c, &CreateTopicRequest::new("x", 1)), Ok(()));
    let old = c.image().topic("x").expect("x").topic_id;
    let del = c.delete_topic("x").expect("delete");
    assert_eq!(commit(&mut c, del).outcome, Ok(()));
    assert_eq!(create(&mut c, &CreateTopicRequest::new("x", 1)), Ok(()));
    assert_ne!(c.image().topic("x").expect("x again").topic_id, old);
}
