//! The peer seam: three sans-IO `MetadataRaft` nodes wired by an in-memory network (messages
//! delivered in order, "persistence" instant), driven by explicit ticks — no disk, no clock.
//! A leader is elected, proposals on it commit on all three with equal images, a follower
//! refuses proposals with NOT_CONTROLLER, and after the leader is cut off the other two elect a
//! new one and keep committing. Two groups built with the same seeds and fed the same schedule
//! behave identically, message for message (raft-rs's `thread_rng` election timeouts are
//! replaced by seeded draws); other seeds give another run.

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
    election_ticks: Vec<usize>,
    /// Everything observable, in order: each message put on the wire (encoded) and, after each
    /// tick round, every node's (leader?, term, election timeout).
    trace: Vec<Vec<u8>>,
}

impl Cluster {
    fn new() -> Self {
        // Different timeouts per node make the first election quick.
        Self::with(|id| (10 + 3 * id as usize, 100 + id))
    }

    /// Three fresh voters that snapshot and compact their log every `entries` applied entries.
    fn compacting_every(entries: u64) -> Self {
        let mut cluster = Self::with_snapshots(|id| (10 + 3 * id as usize, 100 + id), entries);
        cluster.trace.clear();
        cluster
    }

    /// A fresh learner with raft id `id` (the next after the voters), empty, as a broker that
    /// is not a controller voter starts; the leader adds it with `propose_add_learner`.
    fn start_learner(&mut self, id: u64) {
        assert_eq!(id as usize, self.nodes.len() + 1, "ids are dense");
        let config = RaftConfig {
            initial_voters: vec![1, 2, 3],
            initial_learners: vec![id],
            ..RaftConfig::single_voter(id, 7)
        };
        let node = MetadataRaft::new(
            &config,
            RecoveredState {
                incarnation: 1,
                ..Default::default()
            },
        )
        .expect("learner");
        self.nodes.push(node);
        self.committed.push(Vec::new());
        self.election_ticks.push(10);
    }

    /// Three fresh voters; `config(id)` gives node `id`'s (election ticks, seed).
    fn with(config: impl Fn(u64) -> (usize, u64)) -> Self {
        Self::with_snapshots(
            config,
            RaftConfig::single_voter(1, 0).snapshot_every_entries,
        )
    }

    fn with_snapshots(config: impl Fn(u64) -> (usize, u64), snapshot_every_entries: u64) -> Self {
        let election_ticks = (1..=3).map(|id| config(id).0).collect();
        let nodes = (1..=3)
            .map(|id| {
                let (election_ticks, seed) = config(id);
                let config = RaftConfig {
                    initial_voters: vec![1, 2, 3],
                    election_ticks,
                    snapshot_every_entries,
                    ..RaftConfig::single_voter(id, seed)
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
            election_ticks,
            trace: Vec::new(),
        }
    }

    /// One tick on every node, then settle; records each node's leadership, term and election
    /// timeout, and checks the timeout lies in `[election_ticks, 2 * election_ticks)`.
    fn tick_all(&mut self) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.tick();
            let timeout = n.election_timeout_ticks();
            let range = self.election_ticks[i]..2 * self.election_ticks[i];
            assert!(
                range.contains(&timeout),
                "node {} timeout {timeout} outside {range:?}",
                i + 1
            );
            let mut seen = vec![u8::from(n.is_leader())];
            seen.extend(n.term().to_le_bytes());
            seen.extend((timeout as u64).to_le_bytes());
            self.trace.push(seen);
        }
        self.settle();
    }

    /// Node `id` restarts with its data dir wiped: a fresh node, nothing recovered.
    fn wipe(&mut self, id: u64) {
        let config = RaftConfig {
            initial_voters: vec![1, 2, 3],
            election_ticks: self.election_ticks[id as usize - 1],
            ..RaftConfig::single_voter(id, 900 + id)
        };
        let fresh = MetadataRaft::new(
            &config,
            RecoveredState {
                incarnation: 2,
                ..Default::default()
            },
        )
        .expect("a wiped node starts");
        self.nodes[id as usize - 1] = fresh;
        self.committed[id as usize - 1].clear();
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
                self.trace
                    .push(protobuf::Message::write_to_bytes(&m).expect("encode"));
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

    /// Registers broker `broker` through `leader` (and unfences it when `unfence`), settling
    /// after each proposal.
    fn register(&mut self, leader: u64, broker: i32, unfence: bool) {
        let image = self.node(leader).latest_image().clone();
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
                cluster_id: None,
                registered_session_live: false,
                previous_broker_epoch: -1,
            },
        )
        .expect("register");
        self.node(leader).propose(record).expect("propose");
        self.settle();
        if unfence {
            let epoch = self
                .node(leader)
                .image()
                .broker(broker)
                .expect("registered")
                .broker_epoch;
            let unfence = spool_raft::records::unfence_broker(broker, epoch);
            self.node(leader).propose(unfence).expect("unfence");
            self.settle();
        }
    }

    fn tick_until_leader(&mut self, among: &[u64]) -> u64 {
        for _ in 0..500 {
            self.tick_all();
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
        cluster.register(leader, broker, true);
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
        cluster.tick_all();
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

/// What a run shows from outside: the leaders elected, in order, the final term, and the trace.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    leaders: Vec<u64>,
    term: u64,
    trace: Vec<Vec<u8>>,
}

/// Equal election ticks on all three nodes, so who campaigns first — and everything after —
/// is decided by the election timeouts alone: elect, commit a registration, cut the leader off,
/// elect again, heal.
fn run(seeds: [u64; 3]) -> Outcome {
    let mut cluster = Cluster::with(|id| (10, seeds[id as usize - 1]));
    let first = cluster.tick_until_leader(&[1, 3, 2]);
    cluster.register(first, 1, false);
    cluster.cut_off.insert(first);
    let others: Vec<u64> = (1..=3).filter(|id| *id != first).collect();
    let second = cluster.tick_until_leader(&others);
    cluster.cut_off.clear();
    for _ in 0..30 {
        cluster.tick_all();
    }
    let images: Vec<_> = cluster.nodes.iter().map(|n| n.image().clone()).collect();
    assert!(images
        .iter()
        .all(|i| *i == images[0] && i.broker(1).is_some()));
    Outcome {
        leaders: vec![first, second],
        term: cluster.nodes.iter().map(|n| n.term()).max().unwrap_or(0),
        trace: cluster.trace,
    }
}

#[test]
fn the_same_seeds_and_schedule_give_the_same_run() {
    for seeds in [[1, 2, 3], [0x5eed, 0x5eed, 0x5eed], [40, 41, 42]] {
        let a = run(seeds);
        let b = run(seeds);
        assert_eq!(a.leaders, b.leaders, "seeds {seeds:?}");
        assert_eq!(a.term, b.term, "seeds {seeds:?}");
        assert_eq!(a.trace.len(), b.trace.len(), "seeds {seeds:?}");
        let first_difference = a.trace.iter().zip(&b.trace).position(|(x, y)| x != y);
        assert_eq!(first_difference, None, "seeds {seeds:?}: traces diverge");
    }
}

#[test]
fn other_seeds_give_another_run() {
    let base = run([1, 2, 3]);
    let others: Vec<Outcome> = [[4, 5, 6], [7, 8, 9], [10, 11, 12]].map(run).into();
    assert!(
        others.iter().all(|o| o.trace != base.trace),
        "a different seed replayed the same trace"
    );
}

/// A broker that is not a voter joins after the voters compacted their log: the leader adds it
/// as a learner, it is sent a snapshot (one that names it — a snapshot from before it joined
/// would be refused by raft-rs), ends with the voters' image, and never campaigns, even when
/// the leader is cut off.
#[test]
fn a_learner_that_joins_after_compaction_is_sent_a_snapshot_and_never_votes() {
    let mut cluster = Cluster::compacting_every(8);
    let leader = cluster.tick_until_leader(&[1, 2, 3]);
    for broker in 0..20 {
        cluster.register(leader, broker, broker == 0);
    }
    assert!(
        cluster.node(leader).log().snapshot_index() > 1,
        "the leader compacted its log"
    );

    cluster.start_learner(4);
    assert_eq!(cluster.node(leader).propose_add_learner(4), Ok(true));
    assert_eq!(
        cluster
            .node(leader)
            .propose_add_learner(4)
            .map_err(|r| r.code),
        Err(ErrorCode::ThrottlingQuotaExceeded),
        "one membership change at a time"
    );
    for _ in 0..20 {
        cluster.tick_all();
    }
    assert_eq!(
        cluster.node(leader).propose_add_learner(4),
        Ok(false),
        "already a learner"
    );
    let learner_image = cluster.node(4).image().clone();
    assert_eq!(&learner_image, cluster.node(leader).image());
    assert_eq!(learner_image.brokers().count(), 20);
    assert_eq!(cluster.node(4).snapshots_installed(), 1);
    assert_eq!(cluster.node(4).conf_state().learners, vec![4]);
    assert_eq!(cluster.node(leader).conf_state().learners, vec![4]);

    // Cut off the leader: the other two voters elect one; the learner never leads.
    cluster.cut_off.insert(leader);
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let new_leader = cluster.tick_until_leader(&others);
    for _ in 0..100 {
        cluster.tick_all();
        assert!(!cluster.node(4).is_leader(), "a learner never campaigns");
    }
    let image = cluster.node(new_leader).latest_image().clone();
    let record = validate_create_topic(
        &image,
        &CreateTopicRequest::new("after-failover", 1),
        Uuid128 { high: 3, low: 3 },
        &CreateTopicPolicy::default(),
    )
    .expect("valid");
    cluster.node(new_leader).propose(record).expect("propose");
    cluster.settle();
    assert!(
        cluster.node(4).image().topic("after-failover").is_some(),
        "the learner follows the new leader"
    );
}

/// The fault harness's `wipe` nemesis, in the sans-IO world: a follower whose data dir was
/// wiped comes back empty while the leader still counts it as holding the log. raft-rs alone
/// panics on the leader's first heartbeat (its commit index lies past the empty log) and the
/// leader discards the empty follower's rejections as stale forever; `spool_raft::lost_log`
/// makes it catch up instead, and vote again only once it has.
#[test]
fn a_wiped_follower_catches_up_and_votes_again_once_it_has() {
    let mut cluster = Cluster::new();
    let leader = cluster.tick_until_leader(&[1, 2, 3]);
    for broker in 1..=5 {
        cluster.register(leader, broker, true);
    }
    let wiped = (1..=3).find(|id| *id != leader).expect("a follower");
    cluster.wipe(wiped);
    assert!(
        cluster.node(wiped).is_catching_up(),
        "an empty log in a group of three"
    );
    for _ in 0..30 {
        cluster.tick_all();
    }
    assert!(!cluster.node(wiped).is_catching_up(), "it caught up");
    let on_leader = cluster.node(leader).image().clone();
    assert_eq!(cluster.node(wiped).image(), &on_leader);
    assert_eq!(on_leader.brokers().count(), 5);
    // Having caught up it votes like any voter: with the leader gone, it and the third elect.
    cluster.cut_off.insert(leader);
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let new_leader = cluster.tick_until_leader(&others);
    assert_ne!(new_leader, leader);
}

/// The vote a wiped voter must not give: the third voter lags (cut off while the leader
/// committed with the second), then the second is wiped and the leader lost. With the empty
/// voter's vote the laggard would win and overwrite the committed entries on the leader when it
/// returned; instead nobody is elected until the leader is back, and nothing committed is lost.
#[test]
fn a_wiped_voter_never_elects_a_candidate_missing_committed_entries() {
    let mut cluster = Cluster::new();
    let leader = cluster.tick_until_leader(&[1, 2, 3]);
    cluster.register(leader, 1, true);
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (holder, laggard) = (
        followers.next().expect("a follower"),
        followers.next().expect("another"),
    );
    cluster.cut_off.insert(laggard);
    for broker in 2..=4 {
        cluster.register(leader, broker, true);
    }
    assert_eq!(cluster.node(holder).image().brokers().count(), 4);
    assert_eq!(cluster.node(laggard).image().brokers().count(), 1);

    cluster.wipe(holder);
    cluster.cut_off.clear();
    cluster.cut_off.insert(leader);
    for _ in 0..300 {
        cluster.tick_all();
        assert!(
            !cluster.node(laggard).is_leader(),
            "the laggard was elected with the wiped voter's vote"
        );
    }
    assert!(!cluster.node(holder).is_leader());

    cluster.cut_off.clear();
    let elected = cluster.tick_until_leader(&[1, 2, 3]);
    assert_eq!(
        elected, leader,
        "only the leader holds everything committed"
    );
    for _ in 0..30 {
        cluster.tick_all();
    }
    for id in 1..=3 {
        assert_eq!(
            cluster.node(id).image().brokers().count(),
            4,
            "node {id} holds every committed registration"
        );
    }
}
