//! The peer seam: three sans-IO `MetadataRaft` nodes wired by an in-memory network (messages
//! delivered in order, "persistence" instant), driven by explicit ticks — no disk, no clock.
//! A leader is elected, proposals on it commit on all three with equal images, a follower
//! refuses proposals with NOT_CONTROLLER, and after the leader is cut off the other two elect a
//! new one and keep committing.

use std::collections::{BTreeSet, VecDeque};

use spool_protocol::ErrorCode;
use spool_raft::validate::{validate_create_topic, validate_register_broker};
use spool_raft::{
    Committed, CreateTopicPolicy, CreateTopicRequest, MetadataRaft, RaftConfig, RaftMessage,
    RecoveredState, RegisterBrokerRequest, Uuid128,
};

struct Cluster {
    nodes: Vec<MetadataRaft>,
    wire: VecDeque<RaftMessage>,
    /// Nodes whose messages (both ways) are dropped.
    cut_off: BTreeSet<u64>,
    committed: Vec<Vec<Committed>>,
}

impl Cluster {
    fn new() -> Self {
        let nodes = (1..=3)
            .map(|id| {
                let config = RaftConfig {
                    initial_voters: vec![1, 2, 3],
                    // Different timeouts per node make the first election deterministic-ish.
                    election_ticks: 10 + 3 * id as usize,
                    ..RaftConfig::single_voter(id, id)
                };
                MetadataRaft::new(
                    &config,
                    RecoveredState {
                        incarnation: 1,
                        ..Default::default()
                    },
                )
                .expect("node")
            })
            .collect();
        Cluster {
            nodes,
            wire: VecDeque::new(),
            cut_off: BTreeSet::new(),
            committed: vec![Vec::new(); 3],
        }
    }

    fn node(&mut self, id: u64) -> &mut MetadataRaft {
        &mut self.nodes[id as usize - 1]
    }

    /// Drains every node's ready work and delivers messages until the network is quiet.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut progressed = false;
            for i in 0..self.nodes.len() {
                while let Some(mut ready) = self.nodes[i].ready() {
                    progressed = true;
                    self.wire.extend(ready.messages.drain(..));
                    // In-memory "disk": nothing to persist before advancing.
                    let adv = self.nodes[i].advance(ready).expect("advance");
                    self.wire.extend(adv.messages);
                    self.committed[i].extend(adv.committed);
                }
            }
            while let Some(m) = self.wire.pop_front() {
                progressed = true;
                if self.cut_off.contains(&m.from) || self.cut_off.contains(&m.to) {
                    continue;
                }
                let to = m.to;
                self.node(to).step(m).expect("step");
            }
            if !progressed {
                return;
            }
        }
        panic!("the cluster never went quiet");
    }

    fn tick_until_leader(&mut self, among: &[u64]) -> u64 {
        for _ in 0..500 {
            for n in &mut self.nodes {
                n.tick();
            }
            self.settle();
            let leaders: Vec<u64> = among
                .iter()
                .copied()
                .filter(|id| self.nodes[*id as usize - 1].is_leader())
                .collect();
            if let [leader] = leaders[..] {
                return leader;
            }
        }
        panic!("no leader elected");
    }
}

#[test]
fn three_voters_replicate_metadata_and_survive_a_leader_loss() {
    let mut cluster = Cluster::new();
    let leader = cluster.tick_until_leader(&[1, 2, 3]);

    // Register + unfence three brokers through the leader.
    for broker in 1..=3 {
        let image = cluster.node(leader).latest_image().clone();
        let record = validate_register_broker(
            &image,
            &RegisterBrokerRequest {
                broker_id: broker,
                incarnation_id: Uuid128 {
                    high: 0,
                    low: broker as u64,
                },
                listeners: vec![],
                rack: None,
            },
        )
        .expect("register");
        cluster.node(leader).propose(record).expect("propose");
        cluster.settle();
        let epoch = cluster
            .node(leader)
            .image()
            .broker(broker)
            .expect("b")
            .broker_epoch;
        let unfence = spool_raft::records::unfence_broker(broker, epoch);
        cluster.node(leader).propose(unfence).expect("unfence");
        cluster.settle();
    }

    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let req = CreateTopicRequest {
        replication_factor: 3,
        ..CreateTopicRequest::new("replicated", 4)
    };
    let image = cluster.node(follower).latest_image().clone();
    let record = validate_create_topic(
        &image,
        &req,
        Uuid128 { high: 1, low: 1 },
        &CreateTopicPolicy::default(),
    )
    .expect("valid");
    let refused = cluster
        .node(follower)
        .propose(record.clone())
        .map_err(|r| r.code);
    assert_eq!(refused, Err(ErrorCode::NotController));

    let id = cluster
        .node(leader)
        .propose(record)
        .expect("propose on leader");
    cluster.settle();
    let on_leader = &cluster.committed[leader as usize - 1];
    assert!(on_leader
        .iter()
        .any(|c| c.proposal == Some(id) && c.outcome.is_ok()));
    let images: Vec<_> = cluster.nodes.iter().map(|n| n.image().clone()).collect();
    assert_eq!(images[0], images[1]);
    assert_eq!(images[1], images[2]);
    let topic = images[0].topic("replicated").expect("topic everywhere");
    assert!(topic.partitions.iter().all(|p| p.replicas.len() == 3));

    // Cut the leader off; the two others elect a new leader and keep committing.
    cluster.cut_off.insert(leader);
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let new_leader = cluster.tick_until_leader(&others);
    assert_ne!(new_leader, leader);
    let image = cluster.node(new_leader).latest_image().clone();
    let record = validate_create_topic(
        &image,
        &CreateTopicRequest::new("after-failover", 1),
        Uuid128 { high: 2, low: 2 },
        &CreateTopicPolicy::default(),
    )
    .expect("valid");
    cluster.node(new_leader).propose(record).expect("propose");
    cluster.settle();
    for id in &others {
        assert!(cluster.node(*id).image().topic("after-failover").is_some());
    }
    assert!(cluster
        .node(leader)
        .image()
        .topic("after-failover")
        .is_none());

    // Heal: the old leader catches up.
    cluster.cut_off.clear();
    for _ in 0..50 {
        for n in &mut cluster.nodes {
            n.tick();
        }
        cluster.settle();
    }
    assert!(cluster
        .node(leader)
        .image()
        .topic("after-failover")
        .is_some());
    let images: Vec<_> = cluster.nodes.iter().map(|n| n.image().clone()).collect();
    assert_eq!(images[0], images[1]);
    assert_eq!(images[1], images[2]);
}
