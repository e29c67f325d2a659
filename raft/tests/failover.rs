//! Failover through a single-voter controller, the way the active controller will drive it:
//! three brokers on racks a/b/c, an RF-3 topic with one replica per rack, then brokers fenced
//! (by proposing what `failover::fence_brokers_records` returns, and by session expiry through
//! `Controller::fence_brokers`) and unfenced again by a caught-up heartbeat. Made-up times, no
//! sleeps.

use std::collections::BTreeMap;

use spool_core::liveness::{BrokerSessions, BROKER_SESSION_TIMEOUT_MS_DEFAULT};
use spool_core::topic_config::TopicDefaults;
use spool_raft::failover::{fence_brokers_records, liveness_brokers};
use spool_raft::image::{PartitionState, NO_LEADER};
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{Controller, CreateTopicRequest, ProposalId, Uuid128};

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
            .heartbeat_and_elect(&heartbeat(&c, id))
            .expect("heartbeat");
        assert_eq!(unfence.len(), 1, "no partitions yet: just the unfence");
        commit_all(&mut c, &unfence);
        assert!(!c.image().broker(id).expect("registered").fenced);
    }
    let create = c
        .create_topic(&CreateTopicRequest {
            replication_factor: 3,
            ..CreateTopicRequest::new("orders", 6)
        })
        .expect("create");
    commit_all(&mut c, &[create]);
    c
}

fn partitions(c: &Controller) -> Vec<PartitionState> {
    c.image()
        .topic("orders")
        .expect("orders")
        .partitions
        .clone()
}

#[test]
fn fencing_a_leader_moves_its_partitions_to_isr_members_with_a_new_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let rack: BTreeMap<i32, String> = c
        .image()
        .brokers()
        .map(|b| (b.broker_id, b.rack.clone().unwrap_or_default()))
        .collect();
    let before = partitions(&c);
    for p in &before {
        let mut racks: Vec<&str> = p.replicas.iter().map(|b| rack[b].as_str()).collect();
        racks.sort_unstable();
        assert_eq!(
            racks,
            ["a", "b", "c"],
            "one replica per rack: {:?}",
            p.replicas
        );
        assert_eq!(p.leader, p.replicas[0]);
    }
    let victim = before[0].leader;

    // Fence it by proposing exactly what the failover function returns.
    let out = fence_brokers_records(c.latest_image(), &[victim], &TopicDefaults::default())
        .expect("fence");
    assert!(out.malformed.is_empty());
    assert_eq!(
        out.records.len(),
        before.len() + 1,
        "every ISR changes, then the fence"
    );
    let ids: Vec<ProposalId> = out
        .records
        .into_iter()
        .map(|r| c.propose(r).expect("propose"))
        .collect();
    commit_all(&mut c, &ids);

    assert!(c.image().broker(victim).expect("registered").fenced);
    for (old, new) in before.iter().zip(partitions(&c)) {
        assert!(
            !new.isr.contains(&victim),
            "{victim} still in {:?}",
            new.isr
        );
        assert_eq!(new.replicas, old.replicas, "fencing never reassigns");
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
        if old.leader == victim {
            assert_ne!(new.leader, victim);
            assert!(old.isr.contains(&new.leader) && new.isr.contains(&new.leader));
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
            // The preferred replica first: the first surviving replica in assignment order.
            let expected = old.replicas.iter().find(|b| **b != victim).copied();
            assert_eq!(Some(new.leader), expected);
        } else {
            assert_eq!(new.leader, old.leader);
            assert_eq!(new.leader_epoch, old.leader_epoch);
        }
    }
    // Nothing more to do: the decision is a fixpoint.
    assert_eq!(c.fence_brokers(&[victim]), Ok(vec![]));
}

fn sorted(ids: &[i32]) -> Vec<i32> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids
}

#[test]
fn silent_brokers_are_fenced_and_an_eligible_caught_up_one_leads_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let start_ms = 1_000_000;
    let mut sessions = BrokerSessions::new(start_ms);
    let timeout = BROKER_SESSION_TIMEOUT_MS_DEFAULT;
    // Brokers 1 and 2 go silent; 3 keeps heartbeating.
    let mut now_ms = start_ms;
    while now_ms <= start_ms + timeout {
        now_ms += 250;
        sessions.on_heartbeat(3, c.image().broker(3).expect("b3").broker_epoch, now_ms);
        if now_ms < start_ms + timeout {
            let expired = sessions.expired(liveness_brokers(c.latest_image()), now_ms, timeout);
            assert!(expired.is_empty(), "at {now_ms}: {expired:?}");
        }
    }
    let expired = sessions.expired(liveness_brokers(c.latest_image()), now_ms, timeout);
    assert_eq!(expired, vec![1, 2]);
    let ids = c.fence_brokers(&expired).expect("fence");
    assert!(!ids.is_empty());
    // In flight: the latest image has them fenced, so the next tick does not fence them again.
    assert!(sessions
        .expired(liveness_brokers(c.latest_image()), now_ms + 250, timeout)
        .is_empty());
    commit_all(&mut c, &ids);
    // Below min ISR (2): the members that left keep every committed record (the watermark
    // stopped with them), so they are eligible leaders (KIP-966).
    for p in partitions(&c) {
        assert_eq!((p.leader, p.isr.as_slice()), (3, &[3][..]), "{p:?}");
        assert_eq!(sorted(&p.eligible_leaders), [1, 2], "{p:?}");
    }

    // Broker 3 dies too: every partition is leaderless, its ISR kept at [3].
    let before = partitions(&c);
    let ids = c.fence_brokers(&[3]).expect("fence 3");
    commit_all(&mut c, &ids);
    for (old, p) in before.iter().zip(partitions(&c)) {
        assert_eq!((p.leader, p.isr.as_slice()), (NO_LEADER, &[3][..]));
        assert_eq!(sorted(&p.eligible_leaders), [1, 2]);
        assert_eq!(p.leader_epoch, old.leader_epoch + 1);
    }

    // Broker 1 restarts after an unclean shutdown (it does not bring back its broker epoch): its
    // log may be gone, so its registration takes it out of every eligible set
    // (`forget_lost_log`), and once unfenced it leads nothing; unclean election is off.
    let again = c
        .register_broker(&RegisterBrokerRequest {
            broker_id: 1,
            incarnation_id: Uuid128 { high: 2, low: 1 },
            listeners: vec![],
            rack: Some("a".into()),
            cluster_id: None,
            registered_session_live: false,
            previous_broker_epoch: -1,
        })
        .expect("register again");
    commit_all(&mut c, &[again]);
    assert!(c.image().broker(1).expect("b1").unclean_shutdown);
    for p in partitions(&c) {
        assert_eq!((p.leader, p.isr.as_slice()), (NO_LEADER, &[3][..]));
        assert_eq!(p.eligible_leaders, [2], "1 left every eligible set");
    }
    let back = c.heartbeat_and_elect(&heartbeat(&c, 1)).expect("hb 1");
    assert_eq!(back.len(), 1, "just the unfence");
    commit_all(&mut c, &back);
    assert!(!c.image().broker(1).expect("b1").fenced);
    for p in partitions(&c) {
        assert_eq!((p.leader, p.isr.as_slice()), (NO_LEADER, &[3][..]));
        assert_eq!(p.eligible_leaders, [2]);
    }

    // Broker 2 (fenced, not restarted) comes back caught up: as an eligible leader it leads
    // every partition, one epoch later, alone in the ISR; 3 becomes eligible in its place.
    let before = partitions(&c);
    let behind = HeartbeatRequest {
        current_metadata_offset: c.applied_index() as i64 - 1,
        ..heartbeat(&c, 2)
    };
    assert_eq!(
        c.heartbeat_and_elect(&behind),
        Ok(vec![]),
        "not caught up yet"
    );
    let back = c.heartbeat_and_elect(&heartbeat(&c, 2)).expect("hb 2");
    assert_eq!(
        back.len(),
        1 + before.len(),
        "the unfence, then the elections"
    );
    commit_all(&mut c, &back);
    for (old, p) in before.iter().zip(partitions(&c)) {
        assert_eq!((p.leader, p.isr.as_slice()), (2, &[2][..]));
        assert_eq!(p.eligible_leaders, [3]);
        assert_eq!(p.leader_epoch, old.leader_epoch + 1);
        assert_eq!(p.partition_epoch, old.partition_epoch + 1);
    }
}

#[test]
fn a_broker_asking_to_be_fenced_gives_up_its_leaderships_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cluster(dir.path());
    let led_by_2 = partitions(&c).iter().filter(|p| p.leader == 2).count();
    assert!(led_by_2 > 0);
    let ids = c
        .heartbeat_and_elect(&HeartbeatRequest {
            want_fence: true,
            ..heartbeat(&c, 2)
        })
        .expect("hb");
    assert_eq!(
        ids.len(),
        partitions(&c).len() + 1,
        "every ISR, then the heartbeat"
    );
    commit_all(&mut c, &ids);
    assert!(c.image().broker(2).expect("b2").fenced);
    assert!(partitions(&c)
        .iter()
        .all(|p| p.leader != 2 && !p.isr.contains(&2)));
}
