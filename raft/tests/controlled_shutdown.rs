//! Controlled shutdown through a single-voter controller, the way the active controller drives
//! it: three brokers on racks a/b/c and an RF-3 topic, then one broker heartbeats with
//! `want_shutdown`. Its leaderships move to other ISR members with a new leader epoch, it leaves
//! every ISR, and `should_shut_down` turns true only once all of that is committed; a partition
//! whose only ISR member it is stays led by it; the per-tick reconcile pass finishes what was
//! left unproposed; nobody puts it back in an ISR. Made-up times, no sleeps.

use spool_core::isr_change::{AlterPartitionError, AlterPartitionRequest, IsrMember};
use spool_core::topic_config::TopicDefaults;
use spool_raft::controlled_shutdown::should_shut_down;
use spool_raft::failover::reconcile_records;
use spool_raft::image::PartitionState;
use spool_raft::validate::{validate_heartbeat, HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{AlterRefused, Controller, CreateTopicRequest, ProposalId, Uuid128};

/// Polls until every proposal in `ids` has committed, asserting each applied.
fn commit_all(c: &mut Controller, ids: &[ProposalId]) {
    let mut waiting: Vec<ProposalId> = ids.to_vec();
    for _ in 0..10 {
        let polled = c.poll().expect("poll");
        assert!(polled.abandoned.is_empty());
        for committed in polled.committed {
            if let Some(i) = waiting
                .iter()
                .position(|id| Some(*id) == committed.proposal)
            {
                assert_eq!(committed.outcome, Ok(()), "{:?}", committed.record);
                waiting.remove(i);
            }
        }
        if waiting.is_empty() {
            return;
        }
    }
    panic!("proposals {waiting:?} did not commit");
}

fn heartbeat(c: &Controller, broker_id: i32, want_shutdown: bool) -> HeartbeatRequest {
    HeartbeatRequest {
        broker_id,
        broker_epoch: c
            .image()
            .broker(broker_id)
            .expect("registered")
            .broker_epoch,
        current_metadata_offset: c.applied_index() as i64,
        want_fence: false,
        want_shutdown,
    }
}

/// A controller with brokers 1, 2, 3 on racks a, b, c, registered and unfenced, and topic
/// "orders" of 6 partitions at RF 3.
fn cluster(dir: &std::path::Path) -> Controller {
    let (mut c, _) = Controller::open(dir, 1, 0x5eed).expect("open");
    for (id, rack) in [(1, "a"), (2, "b"), (3, "c")] {
        let reg = c
            .register_broker(&RegisterBrokerRequest {
                broker_id: id,
                incarnation_id: Uuid128 {
                    high: 1,
                    low: id as u64,
                },
                listeners: vec![],
                rack: Some(rack.into()),
                cluster_id: None,
                registered_session_live: false,
                previous_broker_epoch: -1,
            })
            .expect("register");
        commit_all(&mut c, &[reg]);
        let unfence = c
            .heartbeat_and_elect(&heartbeat(&c, id, false))
            .expect("heartbeat");
        commit_all(&mut c, &unfence);
    }
    create(&mut c, "orders", 6, 3);
    c
}

fn create(c: &mut Controller, name: &str, partitions: i32, replication_factor: i16) {
    let id = c
        .create_topic(&CreateTopicRequest {
            replication_factor,
            ..CreateTopicRequest::new(name, partitions)
        })
        .expect("create");
    commit_all(c, &[id]);
}

fn partitions(c: &Controller, topic: &str) -> Vec<PartitionState> {
    c.image().topic(topic).expect("topic").partitions.clone()
}

fn without(list: &[i32], b: i32) -> Vec<i32> {
    list.iter().copied().filter(|x| *x != b).collect()
}

#[test]
fn leaderships_move_with_a_new_epoch_isrs_shrink_and_then_it_may_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let before = partitions(&c, "orders");
    let victim = before[0].leader;
    assert!(
        before.iter().filter(|p| p.leader == victim).count() < before.len(),
        "the victim leads some partitions and follows in others: {before:?}"
    );
    assert!(!should_shut_down(c.image(), victim), "it did not ask yet");

    let ids = c
        .heartbeat_and_elect(&heartbeat(&c, victim, true))
        .expect("heartbeat");
    assert_eq!(
        ids.len(),
        1 + before.len(),
        "the heartbeat record, then one change per partition (it is in every ISR)"
    );
    assert!(
        !should_shut_down(c.image(), victim),
        "proposed is not committed"
    );
    commit_all(&mut c, &ids);

    assert!(c.image().broker(victim).expect("b").in_controlled_shutdown);
    for (p, was) in partitions(&c, "orders").iter().zip(&before) {
        assert_eq!(p.isr, without(&was.isr, victim), "it left the ISR");
        assert_eq!(p.partition_epoch, was.partition_epoch + 1);
        if was.leader == victim {
            // The first ISR replica in assignment order that is not shutting down.
            let expected = *was
                .replicas
                .iter()
                .find(|b| **b != victim)
                .expect("another replica");
            assert_eq!(p.leader, expected, "{was:?} -> {p:?}");
            assert_eq!(p.leader_epoch, was.leader_epoch + 1, "a leader change");
        } else {
            assert_eq!(
                (p.leader, p.leader_epoch),
                (was.leader, was.leader_epoch),
                "a follower leaving the ISR leaves the leader and its epoch alone"
            );
        }
    }
    assert!(should_shut_down(c.image(), victim));
    // The others may not: they were never asked.
    assert!((1..=3)
        .filter(|b| *b != victim)
        .all(|b| !should_shut_down(c.image(), b)));

    // A fixpoint: the reconcile pass and the next heartbeat find nothing left to do.
    assert!(reconcile_records(c.image(), &TopicDefaults::default())
        .records
        .is_empty());
    let again = c
        .heartbeat_and_elect(&heartbeat(&c, victim, true))
        .expect("heartbeat");
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn should_shutdown_waits_for_every_move_and_the_tick_proposes_what_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let victim = 2;
    // Only the heartbeat record, as if the proposals after it were lost with a leadership.
    let caught_up = c.applied_index() as i64;
    let record = validate_heartbeat(c.latest_image(), &heartbeat(&c, victim, true), caught_up)
        .expect("valid")
        .expect("a state change is written");
    let id = c.propose(record).expect("proposed");
    commit_all(&mut c, &[id]);
    assert!(c.image().broker(victim).expect("b").in_controlled_shutdown);
    assert!(
        !should_shut_down(c.image(), victim),
        "in controlled shutdown, but still leading and in every ISR"
    );

    // All the moves but the last committed: still not.
    let mut moves = reconcile_records(c.latest_image(), &TopicDefaults::default()).records;
    assert_eq!(moves.len(), 6, "one per partition");
    let last = moves.pop().expect("a move");
    let ids: Vec<ProposalId> = moves
        .into_iter()
        .map(|r| c.propose(r).expect("proposed"))
        .collect();
    commit_all(&mut c, &ids);
    assert!(!should_shut_down(c.image(), victim), "one move missing");
    let pending = reconcile_records(c.latest_image(), &TopicDefaults::default()).records;
    assert_eq!(
        pending,
        vec![last],
        "the pass proposes exactly what is missing"
    );

    // The active controller's tick runs that pass on its own.
    for now_ms in [0, 100] {
        c.tick(now_ms).expect("tick");
    }
    c.poll().expect("poll");
    assert!(should_shut_down(c.image(), victim));
    assert!(
        reconcile_records(c.latest_image(), &TopicDefaults::default())
            .records
            .is_empty()
    );
}

#[test]
fn a_partition_whose_only_isr_member_is_shutting_down_stays_led() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    create(&mut c, "solo", 3, 1);
    let solo = partitions(&c, "solo");
    let victim = solo[0].leader;
    let ids = c
        .heartbeat_and_elect(&heartbeat(&c, victim, true))
        .expect("heartbeat");
    commit_all(&mut c, &ids);
    assert_eq!(
        partitions(&c, "solo"),
        solo,
        "RF 1: nobody else can lead, so nothing changes (no leaderless partition)"
    );
    assert!(partitions(&c, "orders")
        .iter()
        .all(|p| p.leader != victim && !p.isr.contains(&victim)));
    assert!(
        should_shut_down(c.image(), victim),
        "what it still leads has no other ISR member to move to"
    );
}

#[test]
fn a_broker_in_controlled_shutdown_is_not_put_back_in_an_isr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let victim = 3;
    let ids = c
        .heartbeat_and_elect(&heartbeat(&c, victim, true))
        .expect("heartbeat");
    commit_all(&mut c, &ids);
    let topic_id = c.image().topic("orders").expect("orders").topic_id;
    let p = partitions(&c, "orders")[0].clone();
    let epoch = |b: i32| c.image().broker(b).expect("registered").broker_epoch;
    // The leader still sees the victim fetching and caught up, and asks to add it back.
    let mut isr = p.isr.clone();
    isr.push(victim);
    let request = AlterPartitionRequest {
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
    };
    let refused = c.alter_partition(topic_id, 0, &request, &TopicDefaults::default());
    assert_eq!(
        refused,
        Err(AlterRefused::Invalid(
            AlterPartitionError::IneligibleReplica { broker_id: victim }
        ))
    );
}

#[test]
fn two_brokers_shutting_down_at_once_leave_every_partition_led() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    for victim in [1, 2] {
        let ids = c
            .heartbeat_and_elect(&heartbeat(&c, victim, true))
            .expect("heartbeat");
        commit_all(&mut c, &ids);
    }
    for p in partitions(&c, "orders") {
        assert_eq!((p.leader, p.isr.as_slice()), (3, &[3][..]), "{p:?}");
    }
    assert!(should_shut_down(c.image(), 1) && should_shut_down(c.image(), 2));
    // Now the last one goes too: nobody is left to take over, so it keeps leading and may stop.
    let ids = c
        .heartbeat_and_elect(&heartbeat(&c, 3, true))
        .expect("heartbeat");
    commit_all(&mut c, &ids);
    assert_eq!(ids.len(), 1, "just the heartbeat record");
    assert!(partitions(&c, "orders").iter().all(|p| p.leader == 3));
    assert!(should_shut_down(c.image(), 3));
}
