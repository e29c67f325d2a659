//! AlterPartition through a single-voter controller, the way the active controller drives it
//! (`Controller::alter_partition`): three brokers, an RF-3 partition, then a leader's shrink and
//! expand commit and each bumps the partition epoch by one; stale partition epochs, wrong leader
//! epochs and fenced members are refused and write nothing; the ISR it already has is "already
//! so"; a node that is not the active controller refuses with NOT_CONTROLLER. Made-up times, no
//! sleeps.

use spool_core::isr_change::{AlterPartitionError, AlterPartitionRequest, IsrMember};
use spool_core::topic_config::TopicDefaults;
use spool_protocol::ErrorCode;
use spool_raft::alter_partition::leadership;
use spool_raft::image::PartitionState;
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{
    AlterOutcome, AlterRefused, Controller, ControllerConfig, CreateTopicRequest, ProposalId,
    RaftConfig, TopicId, Uuid128,
};

/// Polls until every proposal in `ids` has committed, asserting each applied.
fn commit_all(c: &mut Controller, ids: &[ProposalId]) {
    let mut waiting: Vec<ProposalId> = ids.to_vec();
    for _ in 0..10 {
        let polled = c.poll().expect("poll");
        assert!(polled.abandoned.is_empty());
        for done in polled.committed {
            if let Some(i) = waiting.iter().position(|id| Some(*id) == done.proposal) {
                assert_eq!(done.outcome, Ok(()), "{:?}", done.record);
                waiting.remove(i);
            }
        }
        if waiting.is_empty() {
            return;
        }
    }
    panic!("proposals {waiting:?} did not commit");
}

fn commit(c: &mut Controller, id: ProposalId) {
    commit_all(c, &[id]);
}

fn heartbeat(c: &Controller, broker_id: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        broker_id,
        broker_epoch: c
            .image()
            .broker(broker_id)
            .expect("registered")
            .broker_epoch,
        current_metadata_offset: c.applied_index() as i64,
        want_fence: false,
        want_shutdown: false,
    }
}

/// Brokers 1, 2, 3 registered and unfenced, and topic "orders" of one partition at RF 3.
fn cluster(dir: &std::path::Path) -> (Controller, TopicId) {
    let (mut c, _) = Controller::open(dir, 1, 0x5eed).expect("open");
    for id in 1..=3 {
        let reg = c
            .register_broker(&RegisterBrokerRequest {
                broker_id: id,
                incarnation_id: Uuid128 {
                    high: 1,
                    low: id as u64,
                },
                listeners: vec![],
                rack: None,
                cluster_id: None,
                registered_session_live: false,
                previous_broker_epoch: -1,
            })
            .expect("register");
        commit(&mut c, reg);
        let unfence = c
            .heartbeat_and_elect(&heartbeat(&c, id))
            .expect("heartbeat");
        commit_all(&mut c, &unfence);
    }
    let create = c
        .create_topic(&CreateTopicRequest {
            replication_factor: 3,
            ..CreateTopicRequest::new("orders", 1)
        })
        .expect("create");
    commit(&mut c, create);
    let topic_id = c.image().topic("orders").expect("orders").topic_id;
    (c, topic_id)
}

fn partition(c: &Controller) -> PartitionState {
    c.image().topic("orders").expect("orders").partitions[0].clone()
}

/// What the partition's leader would send to make the ISR `isr`, from the committed state.
fn request(c: &Controller, isr: &[i32]) -> AlterPartitionRequest {
    let p = partition(c);
    let epoch = |b: i32| c.image().broker(b).expect("registered").broker_epoch;
    AlterPartitionRequest {
        broker_id: p.leader,
        broker_epoch: epoch(p.leader),
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr
            .iter()
            .map(|&b| IsrMember {
                broker_id: b,
                broker_epoch: epoch(b),
            })
            .collect(),
    }
}

fn alter(
    c: &mut Controller,
    topic_id: TopicId,
    request: &AlterPartitionRequest,
) -> Result<AlterOutcome, AlterRefused> {
    c.alter_partition(topic_id, 0, request, &TopicDefaults::default())
}

/// `request` is refused with `want`, and nothing is written: the log and the image stay as
/// they were, even after polling.
fn assert_refused(
    c: &mut Controller,
    topic_id: TopicId,
    request: &AlterPartitionRequest,
    want: AlterPartitionError,
) {
    let (applied, image) = (c.applied_index(), c.image().clone());
    assert_eq!(
        alter(c, topic_id, request),
        Err(AlterRefused::Invalid(want)),
        "{request:?}"
    );
    let polled = c.poll().expect("poll");
    assert!(polled.committed.is_empty(), "{:?}", polled.committed);
    assert_eq!(c.applied_index(), applied);
    assert_eq!(c.image(), &image);
    assert_eq!(c.latest_image(), &image);
}

#[test]
fn a_shrink_and_an_expand_commit_and_each_bumps_the_partition_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, topic_id) = cluster(dir.path());
    let before = partition(&c);
    assert_eq!(before.isr.len(), 3);
    let leader = before.leader;
    let follower = *before
        .isr
        .iter()
        .find(|b| **b != leader)
        .expect("a follower");
    let kept = vec![leader, follower];

    let shrink = request(&c, &kept);
    let Ok(AlterOutcome::Proposed(id)) = alter(&mut c, topic_id, &shrink) else {
        panic!("a shrink is proposed");
    };
    commit(&mut c, id);
    let shrunk = partition(&c);
    assert_eq!(shrunk.isr, kept);
    assert_eq!(
        (shrunk.leader, shrunk.leader_epoch, shrunk.partition_epoch),
        (leader, before.leader_epoch, before.partition_epoch + 1)
    );
    assert!(shrunk.eligible_leaders.is_empty(), "at min ISR (2)");

    // Below min ISR the member leaving stays an eligible leader (KIP-966)...
    let alone = request(&c, &[leader]);
    let Ok(AlterOutcome::Proposed(id)) = alter(&mut c, topic_id, &alone) else {
        panic!("a shrink is proposed");
    };
    commit(&mut c, id);
    assert_eq!(partition(&c).eligible_leaders, [follower]);
    // ... until the ISR is back at min ISR.
    let back = request(&c, &kept);
    let Ok(AlterOutcome::Proposed(id)) = alter(&mut c, topic_id, &back) else {
        panic!("an expansion is proposed");
    };
    commit(&mut c, id);
    assert!(partition(&c).eligible_leaders.is_empty());

    let mut all = kept.clone();
    all.extend(before.isr.iter().copied().filter(|b| !kept.contains(b)));
    let expand = request(&c, &all);
    let Ok(AlterOutcome::Proposed(id)) = alter(&mut c, topic_id, &expand) else {
        panic!("an expansion is proposed");
    };
    commit(&mut c, id);
    let expanded = partition(&c);
    assert_eq!(expanded.isr, all);
    assert_eq!(
        (
            expanded.leader,
            expanded.leader_epoch,
            expanded.partition_epoch
        ),
        (leader, before.leader_epoch, before.partition_epoch + 4)
    );
    let answer = leadership(c.image(), topic_id, 0).expect("known");
    assert_eq!(
        (
            answer.leader_id,
            answer.partition_epoch,
            answer.isr,
            answer.replicas
        ),
        (
            leader,
            expanded.partition_epoch,
            expanded.isr,
            expanded.replicas
        )
    );
}

#[test]
fn the_isr_it_already_has_is_already_so_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, topic_id) = cluster(dir.path());
    let isr = partition(&c).isr;
    let applied = c.applied_index();
    let same = request(&c, &isr);
    assert_eq!(alter(&mut c, topic_id, &same), Ok(AlterOutcome::AlreadySo));
    assert!(c.poll().expect("poll").committed.is_empty());
    assert_eq!(c.applied_index(), applied);
}

#[test]
fn stale_epochs_and_fenced_members_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut c, topic_id) = cluster(dir.path());
    let p = partition(&c);
    let follower = *p.isr.iter().find(|b| **b != p.leader).expect("a follower");
    let shrink: Vec<i32> = p.isr.iter().copied().filter(|b| *b != follower).collect();

    let stale = AlterPartitionRequest {
        partition_epoch: p.partition_epoch - 1,
        ..request(&c, &shrink)
    };
    assert_refused(
        &mut c,
        topic_id,
        &stale,
        AlterPartitionError::InvalidUpdateVersion,
    );
    let deposed = AlterPartitionRequest {
        leader_epoch: p.leader_epoch + 1,
        ..request(&c, &shrink)
    };
    assert_refused(
        &mut c,
        topic_id,
        &deposed,
        AlterPartitionError::FencedLeaderEpoch,
    );

    // Fencing the follower takes it out of the ISR; asking to put it back is refused.
    let fence = c.fence_brokers(&[follower]).expect("fence");
    commit_all(&mut c, &fence);
    let after_fence = partition(&c);
    assert!(!after_fence.isr.contains(&follower));
    let mut back = after_fence.isr.clone();
    back.push(follower);
    let rejoin = request(&c, &back);
    assert_refused(
        &mut c,
        topic_id,
        &rejoin,
        AlterPartitionError::IneligibleReplica {
            broker_id: follower,
        },
    );

    // One change in flight: a second from the same partition epoch is stale against the latest
    // image, before the first has committed — so nothing is proposed for it; but the refusal is
    // not answered while it rests on a proposal that may yet be lost: the leader asks again.
    let first = request(&c, &after_fence.isr[..1]);
    let Ok(AlterOutcome::Proposed(id)) = alter(&mut c, topic_id, &first) else {
        panic!("a shrink is proposed");
    };
    let Err(AlterRefused::Controller(unsettled)) = alter(&mut c, topic_id, &first) else {
        panic!("not answered from an unsettled image");
    };
    assert_eq!(unsettled.code, ErrorCode::RequestTimedOut);
    commit(&mut c, id);
    assert_eq!(
        partition(&c).partition_epoch,
        after_fence.partition_epoch + 1
    );
    // Once it committed, the same request is refused as stale, from committed state.
    assert_eq!(
        alter(&mut c, topic_id, &first),
        Err(AlterRefused::Invalid(
            AlterPartitionError::InvalidUpdateVersion
        ))
    );
}

#[test]
fn a_node_that_is_not_the_active_controller_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One of three voters that has heard from nobody: it has not campaigned, so it leads nothing.
    let config = ControllerConfig {
        raft: RaftConfig {
            initial_voters: vec![1, 2, 3],
            ..RaftConfig::single_voter(1, 0x5eed)
        },
        ..ControllerConfig::single_node(1, 0x5eed)
    };
    let (mut c, _) = Controller::open_with(dir.path(), config).expect("open");
    assert!(!c.is_leader());
    let request = AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![IsrMember {
            broker_id: 1,
            broker_epoch: 1,
        }],
    };
    match alter(&mut c, Uuid128 { high: 1, low: 1 }, &request) {
        Err(AlterRefused::Controller(r)) => assert_eq!(r.code, ErrorCode::NotController),
        other => panic!("NOT_CONTROLLER, got {other:?}"),
    }
}
