//! [`Controller`]: the façade the broker drives on core 0 — [`MetadataRaft`] plus its
//! `__raft/` directory, with request validation in front.
//!
//! Owns: the order of I/O around the sans-IO core (persist what a ready names, then advance, then
//! persist what advancing produced), turning wall-clock milliseconds into raft ticks, and making
//! new topic ids — from an [`IdSource`] seeded by the caller ([`RaftConfig::seed`]), so the same
//! seed and the same inputs make the same ids.
//! Promises: a request that fails validation returns a [`Refusal`] and writes nothing; a
//! request that passes is answered exactly once — by a [`Committed`] carrying its [`ProposalId`]
//! (whose `outcome` is the final answer) or by its id in [`Polled::abandoned`] (leadership moved;
//! answer `NOT_CONTROLLER`). With a single voter every accepted proposal commits in the next
//! [`Controller::poll`].
//! Never does: networking (peer messages are handed to the caller in [`Polled::messages`] and
//! fed back with [`Controller::step`]), sleeping, reading a clock (time arrives as `now_ms`) or
//! OS entropy (randomness arrives as the seed). Disk I/O is blocking `std::fs`
//! (see [`crate::disk`]); the controller is `Send`, so the broker may move it onto a blocking
//! thread for each poll or tick.
//!
//! # How the broker drives it (core 0)
//!
//! ```
//! use spool_raft::{Controller, CreateTopicRequest};
//! # let dir = tempfile::tempdir().unwrap();
//! # let data_dir = dir.path();
//! // Start-up: replay snapshot + log. `image` is what every core starts from. The seed fixes
//! // every "random" choice (topic ids, election timeouts): the broker draws it from OS entropy
//! // once at start-up, a simulator passes a fixed one.
//! let seed = 0x5eed;
//! let (mut controller, image) = Controller::open(data_dir, 1, seed).unwrap();
//! # let _ = image;
//! // This broker registers itself and, once caught up, is unfenced (replicas go only to
//! // unfenced brokers). With one voter each proposal commits on the next `poll`.
//! let me = spool_raft::validate::RegisterBrokerRequest {
//!     broker_id: 1,
//!     incarnation_id: spool_raft::Uuid128 { high: 7, low: 7 },
//!     listeners: vec![],
//!     rack: None,
//!     cluster_id: None,
//!     registered_session_live: false,
//!     previous_broker_epoch: -1,
//! };
//! controller.register_broker(&me).unwrap();
//! controller.poll().unwrap();
//! let epoch = controller.image().broker(1).unwrap().broker_epoch;
//! controller
//!     .heartbeat(&spool_raft::validate::HeartbeatRequest {
//!         broker_id: 1,
//!         broker_epoch: epoch,
//!         current_metadata_offset: controller.applied_index() as i64,
//!         want_fence: false,
//!         want_shutdown: false,
//!     })
//!     .unwrap();
//! controller.poll().unwrap();
//!
//! // A CreateTopics request arrives: validate + propose; a refusal is the answer right away.
//! let req = CreateTopicRequest::new("orders", 3).with_config("retention.ms", "60000");
//! let waiting_for = controller.create_topic(&req).unwrap();
//! // Every ~100 ms (and right after proposing): tick + poll. Send `messages` to peers (none
//! // with one voter), broadcast each committed record to every core, answer proposers.
//! let polled = controller.tick(100).unwrap();
//! for c in &polled.committed {
//!     if c.outcome.is_ok() {
//!         // every core: local_image.apply(&c.record)
//!     }
//!     if c.proposal == Some(waiting_for) {
//!         assert_eq!(c.outcome, Ok(()));
//!     }
//! }
//! assert_eq!(controller.image().topic("orders").unwrap().partitions.len(), 3);
//! ```

use std::path::Path;

use raft::eraftpb::Message;
use spool_core::isr_change::AlterPartitionRequest;
use spool_core::topic_config::TopicDefaults;
use spool_protocol::metadata_records::MetadataRecordT;
use spool_protocol::ErrorCode;
use thiserror::Error;

use crate::alter_partition::{self, AlterOutcome, AlterRefused};
use crate::disk::{DiskError, RaftDisk};
use crate::failover::{
    fence_brokers_records, heartbeat_records, reconcile_records, register_broker_records,
    FailoverRecords,
};
use crate::id_source::{IdSource, STREAM_TOPIC_IDS};
use crate::image::{MetadataImage, TopicId};
use crate::node::{Committed, MetadataRaft, NodeError, RaftConfig};
use crate::proposal::ProposalId;
use crate::validate::{
    validate_allocate_producer_ids, validate_create_topic, validate_delete_topic,
    validate_heartbeat, CreateTopicPolicy, CreateTopicRequest, HeartbeatRequest, Refusal,
    RegisterBrokerRequest,
};

/// Everything the controller needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// Raft settings; `raft.seed` is the run's one seed — it also seeds the topic ids.
    pub raft: RaftConfig,
    /// Wall-clock length of one raft tick.
    pub tick_interval_ms: u64,
    pub create_topic_policy: CreateTopicPolicy,
    /// Make every registered broker a learner of the group (its raft id is
    /// [`crate::raft_id_of_broker`] of its broker id): set by a broker whose quorum spans
    /// nodes. Off for a single node, and for drivers whose raft ids follow another scheme.
    pub brokers_learn: bool,
}

impl ControllerConfig {
    /// One node that is the group's only voter (the single-broker case), seeded with `seed`.
    pub fn single_node(node_id: u64, seed: u64) -> Self {
        ControllerConfig {
            raft: RaftConfig::single_voter(node_id, seed),
            tick_interval_ms: 100,
            create_topic_policy: CreateTopicPolicy::default(),
            brokers_learn: false,
        }
    }
}

#[derive(Debug, Error)]
pub enum ControllerError {
    /// The `__raft/` directory could not be read or written. After a write failure the
    /// controller must be dropped and reopened (raft's in-memory state may be ahead of disk,
    /// and raft-rs hands each batch out once, so it cannot be persisted again):
    /// [`Controller::storage_failure`] says so from then on, and every later poll refuses.
    #[error("controller storage: {0}")]
    Disk(#[from] DiskError),
    /// A poll after a storage write failure ([`ControllerError::Disk`]).
    #[error("controller storage failed earlier ({0}): the controller must be reopened")]
    Failed(String),
    #[error("controller raft: {0}")]
    Node(#[from] NodeError),
    #[error("invalid controller config: {0}")]
    Config(String),
}

/// What one [`Controller::poll`] (or [`Controller::tick`]) produced.
#[derive(Debug, Default)]
pub struct Polled {
    /// Newly committed records in log order: apply `outcome.is_ok()` ones on every core, and
    /// answer `proposal` (when set) with `outcome`.
    pub committed: Vec<Committed>,
    /// Raft messages for peers (always empty with a single voter).
    pub messages: Vec<Message>,
    /// Proposals that will not be answered by a commit: answer `NOT_CONTROLLER`.
    pub abandoned: Vec<ProposalId>,
    /// Set when a snapshot from the leader replaced the image during this poll: mirrors of the
    /// image take this one wholesale, and `committed` then holds only what came after it.
    pub replaced_image: Option<MetadataImage>,
    /// Entries committed before that snapshot in the same poll: already inside
    /// `replaced_image`, listed only so their proposers can be answered.
    pub superseded: Vec<Committed>,
}

/// A point-in-time view of the controller for status pages and `/metrics` (the broker's probe
/// reads this; this crate keeps no metrics of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerStatus {
    pub node_id: u64,
    /// 0 when unknown.
    pub leader_id: u64,
    pub is_leader: bool,
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    /// Entries held after the snapshot (bounded by `snapshot_every_entries`).
    pub log_entries: u64,
    pub log_bytes: u64,
    pub incarnation: u64,
    /// Raft ids that vote, and that only follow the metadata log (ascending).
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// Snapshots received from a leader and installed since start.
    pub snapshots_installed: u64,
}

// The broker moves the controller onto glommio's blocking pool for each poll/tick (the raft
// log's fsync) and gets the result back from there; this fails to compile if a field of any
// of them ever stops being `Send`.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<Controller>();
    assert_send::<Result<Polled, ControllerError>>();
};

/// The controller on core 0.
pub struct Controller {
    raft: MetadataRaft,
    disk: RaftDisk,
    config: ControllerConfig,
    last_tick_ms: Option<u64>,
    /// Messages produced while opening, handed out by the next poll.
    outbox: Vec<Message>,
    /// The first storage write that failed, after which this controller does nothing more.
    storage_failure: Option<String>,
    /// Seeded from `raft.seed`, this node and its incarnation (so a restart does not replay the
    /// ids an earlier incarnation made, which may belong to since-deleted topics).
    topic_ids: IdSource,
}

impl Controller {
    /// Opens `<data_dir>/__raft/` as a single-voter group with node id `node_id`, replays the
    /// snapshot and the log, and returns the controller and the committed image. `seed` fixes
    /// the topic ids it makes and raft's election timeouts (see [`ControllerConfig::single_node`]).
    pub fn open(
        data_dir: &Path,
        node_id: u64,
        seed: u64,
    ) -> Result<(Controller, MetadataImage), ControllerError> {
        Self::open_with(data_dir, ControllerConfig::single_node(node_id, seed))
    }

    /// [`Controller::open`] with explicit settings.
    pub fn open_with(
        data_dir: &Path,
        config: ControllerConfig,
    ) -> Result<(Controller, MetadataImage), ControllerError> {
        if config.tick_interval_ms == 0 {
            return Err(ControllerError::Config(
                "tick_interval_ms must be at least 1".into(),
            ));
        }
        let (mut disk, recovered) = RaftDisk::open(data_dir)?;
        let incarnation = recovered.incarnation;
        let raft = MetadataRaft::new(&config.raft, recovered)?;
        let topic_ids = IdSource::new(
            config.raft.seed,
            &[STREAM_TOPIC_IDS, config.raft.node_id, incarnation],
        );
        disk.persist_conf_state(raft.log().conf_state())?;
        let mut controller = Controller {
            raft,
            disk,
            config,
            last_tick_ms: None,
            outbox: Vec::new(),
            storage_failure: None,
            topic_ids,
        };
        // A sole voter has just campaigned: persist its vote and term, become leader, and commit
        // whatever earlier incarnations left uncommitted, so the image returned is complete.
        let polled = controller.poll()?;
        controller.outbox = polled.messages;
        let image = controller.raft.image().clone();
        Ok((controller, image))
    }

    /// The committed image.
    pub fn image(&self) -> &MetadataImage {
        self.raft.image()
    }

    /// The committed image plus this node's in-flight proposals (what requests validate against).
    pub fn latest_image(&self) -> &MetadataImage {
        self.raft.latest_image()
    }

    pub fn is_leader(&self) -> bool {
        self.raft.is_leader()
    }

    /// The raft leader's node id, 0 when unknown.
    pub fn leader_id(&self) -> u64 {
        self.raft.leader_id()
    }

    /// Index of the last applied metadata entry (a broker's "caught up" offset).
    pub fn applied_index(&self) -> u64 {
        self.raft.applied_index()
    }

    /// Numbers for status pages and metrics.
    pub fn status(&self) -> ControllerStatus {
        let log = self.raft.log();
        ControllerStatus {
            node_id: self.raft.node_id(),
            leader_id: self.raft.leader_id(),
            is_leader: self.raft.is_leader(),
            term: self.raft.term(),
            commit_index: log.hard_state().commit,
            applied_index: self.raft.applied_index(),
            snapshot_index: log.snapshot_index(),
            log_entries: log.last() - log.snapshot_index(),
            log_bytes: self.disk.log_size_bytes(),
            incarnation: self.raft.incarnation(),
            voters: sorted(&log.conf_state().voters),
            learners: sorted(&log.conf_state().learners),
            snapshots_installed: self.raft.snapshots_installed(),
        }
    }

    /// The sans-IO core, read-only.
    pub fn raft(&self) -> &MetadataRaft {
        &self.raft
    }

    /// The open directory, read-only.
    pub fn disk(&self) -> &RaftDisk {
        &self.disk
    }

    fn require_leader(&self) -> Result<(), Refusal> {
        if self.raft.is_active_leader() {
            Ok(())
        } else {
            Err(Refusal::new(
                ErrorCode::NotController,
                format!(
                    "this node is not the metadata leader (leader: {})",
                    self.raft.leader_id()
                ),
            ))
        }
    }

    /// The next non-zero topic id of the seeded stream that no topic uses.
    fn new_topic_id(&mut self) -> TopicId {
        // Terminates: the image holds far fewer than 2^128 topics, and the stream does not
        // repeat within any reachable number of draws.
        loop {
            let id: TopicId = self.topic_ids.next_uuid();
            if !id.is_zero() && self.raft.latest_image().topic_by_id(id).is_none() {
                return id;
            }
        }
    }

    /// Validates and proposes one CreateTopics topic.
    pub fn create_topic(&mut self, request: &CreateTopicRequest) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let topic_id = self.new_topic_id();
        let record = validate_create_topic(
            self.raft.latest_image(),
            request,
            topic_id,
            &self.config.create_topic_policy,
        )?;
        self.raft.propose(record)
    }

    /// Validates and proposes deleting a topic.
    pub fn delete_topic(&mut self, name: &str) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let record = validate_delete_topic(self.raft.latest_image(), name)?;
        self.raft.propose(record)
    }

    /// Validates and proposes adding partitions to a topic
    /// ([`crate::topic_admin::validate_create_partitions`]).
    pub fn create_partitions(
        &mut self,
        request: &crate::topic_admin::NewPartitions,
    ) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let record = crate::topic_admin::validate_create_partitions(
            self.raft.latest_image(),
            request,
            &self.config.create_topic_policy,
        )?;
        self.raft.propose(record)
    }

    /// Validates and proposes one topic's config change
    /// ([`crate::topic_admin::validate_alter_configs`]).
    pub fn alter_configs(
        &mut self,
        request: &crate::topic_admin::ConfigAlteration,
    ) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let record = crate::topic_admin::validate_alter_configs(self.raft.latest_image(), request)?;
        self.raft.propose(record)
    }

    /// Decides and proposes one partition's operator election
    /// ([`crate::topic_admin::elect_leader`]).
    pub fn elect_leader(
        &mut self,
        topic: &str,
        partition: i32,
        unclean: bool,
    ) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let record =
            crate::topic_admin::elect_leader(self.raft.latest_image(), topic, partition, unclean)?;
        self.raft.propose(record)
    }

    /// The CreateTopics policy this controller applies (CreatePartitions' maximum too).
    pub fn create_topic_policy(&self) -> &CreateTopicPolicy {
        &self.config.create_topic_policy
    }

    /// On the leader: makes `raft_id` a learner of the metadata group unless it already votes
    /// or learns ([`MetadataRaft::propose_add_learner`]).
    pub fn add_learner(&mut self, raft_id: u64) -> Result<bool, Refusal> {
        self.require_leader()?;
        self.raft.propose_add_learner(raft_id)
    }

    /// Validates and proposes a broker registration (the broker starts fenced).
    ///
    /// A broker id registering again while its current registration is unfenced (the same
    /// incarnation whose answer was lost, or a restart the session rules let through) is first
    /// fenced the usual way — its leaderships and ISR memberships move, then the fence — so no
    /// reader ever sees a fenced (re-registered) broker leading. Returns the registration's
    /// proposal, the last one.
    pub fn register_broker(
        &mut self,
        request: &RegisterBrokerRequest,
    ) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let out =
            register_broker_records(self.raft.latest_image(), request, &TopicDefaults::default())?;
        let ids = self.propose_failover(out)?;
        ids.last().copied().ok_or_else(|| {
            Refusal::new(
                ErrorCode::UnknownServerError,
                "a registration proposes a record",
            )
        })
    }

    /// Handles a broker heartbeat: `Ok(None)` when it changes nothing (nothing is written).
    pub fn heartbeat(&mut self, request: &HeartbeatRequest) -> Result<Option<ProposalId>, Refusal> {
        self.require_leader()?;
        let caught_up = i64::try_from(self.raft.applied_index()).unwrap_or(i64::MAX);
        match validate_heartbeat(self.raft.latest_image(), request, caught_up)? {
            Some(record) => self.raft.propose(record).map(Some),
            None => Ok(None),
        }
    }

    /// Validates and proposes handing `block_size` producer ids to a broker.
    pub fn allocate_producer_ids(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
        block_size: i32,
    ) -> Result<ProposalId, Refusal> {
        self.require_leader()?;
        let record = validate_allocate_producer_ids(
            self.raft.latest_image(),
            broker_id,
            broker_epoch,
            block_size,
        )?;
        self.raft.propose(record)
    }

    /// Fences `broker_ids` (their sessions expired, see [`spool_core::liveness::BrokerSessions`]):
    /// proposes the partition changes that move ISR membership and leadership off them, then
    /// the fences ([`crate::failover::fence_brokers_records`] over the latest image, with the
    /// default topic settings). Returns the proposals in log order; empty when nothing needs
    /// writing (already fenced, or fences in flight). If a proposal is refused part-way (e.g.
    /// THROTTLING_QUOTA_EXCEEDED), those before it stay in flight and calling again proposes
    /// the rest.
    pub fn fence_brokers(&mut self, broker_ids: &[i32]) -> Result<Vec<ProposalId>, Refusal> {
        self.require_leader()?;
        let out = fence_brokers_records(
            self.raft.latest_image(),
            broker_ids,
            &TopicDefaults::default(),
        )?;
        self.propose_failover(out)
    }

    /// [`Controller::heartbeat`], plus the elections its record causes
    /// ([`crate::failover::heartbeat_records`]): a heartbeat that unfences a broker also gives it
    /// back the leaderless partitions it may lead; one asking to be fenced moves leadership and
    /// ISR membership off it first; one entering controlled shutdown moves them off it after its
    /// record. Returns every proposal in log order (empty: the heartbeat changes nothing); the
    /// broker's answer waits for the last, and reads `should_shutdown` from the committed image
    /// ([`crate::controlled_shutdown::should_shut_down`]).
    pub fn heartbeat_and_elect(
        &mut self,
        request: &HeartbeatRequest,
    ) -> Result<Vec<ProposalId>, Refusal> {
        self.require_leader()?;
        let caught_up = i64::try_from(self.raft.applied_index()).unwrap_or(i64::MAX);
        let out = heartbeat_records(
            self.raft.latest_image(),
            request,
            caught_up,
            &TopicDefaults::default(),
        )?;
        self.propose_failover(out)
    }

    /// A partition leader's ISR change ([`crate::alter_partition::decide`], min ISR resolved
    /// over `defaults`): proposes its `PartitionChange` and returns the proposal, or
    /// [`AlterOutcome::AlreadySo`] when the ISR already is the requested one (nothing written).
    /// Only the active leader decides; elsewhere, when the proposal is refused, and when an
    /// answer that writes nothing would rest on proposals not yet committed,
    /// [`AlterRefused::Controller`]. A request that does not fit the partition is
    /// [`AlterRefused::Invalid`] and writes nothing.
    pub fn alter_partition(
        &mut self,
        topic_id: TopicId,
        partition: i32,
        request: &AlterPartitionRequest,
        defaults: &TopicDefaults,
    ) -> Result<AlterOutcome, AlterRefused> {
        self.require_leader().map_err(AlterRefused::Controller)?;
        match alter_partition::decide(&self.raft, topic_id, partition, request, defaults)? {
            Some(record) => self
                .raft
                .propose(record)
                .map(AlterOutcome::Proposed)
                .map_err(AlterRefused::Controller),
            None => Ok(AlterOutcome::AlreadySo),
        }
    }

    fn propose_failover(&mut self, out: FailoverRecords) -> Result<Vec<ProposalId>, Refusal> {
        for m in &out.malformed {
            tracing::warn!(
                topic = %m.topic,
                partition = m.partition_index,
                error = %m.error,
                "partition state breaks the partition invariants; no failover decision for it"
            );
        }
        out.records
            .into_iter()
            .map(|record| self.raft.propose(record))
            .collect()
    }

    /// Proposes a record the caller built (e.g. a `PartitionChange` from failover logic). It is
    /// checked only by applying it to the latest image.
    pub fn propose(&mut self, record: MetadataRecordT) -> Result<ProposalId, Refusal> {
        self.raft.propose(record)
    }

    /// Feeds a raft message from a peer. Call [`Controller::poll`] afterwards.
    pub fn step(&mut self, message: Message) -> Result<(), ControllerError> {
        Ok(self.raft.step(message)?)
    }

    /// Advances raft's clock to `now_ms` (one tick per elapsed `tick_interval_ms`; the first
    /// call only sets the origin), then polls.
    pub fn tick(&mut self, now_ms: u64) -> Result<Polled, ControllerError> {
        match self.last_tick_ms {
            None => self.last_tick_ms = Some(now_ms),
            Some(last) if now_ms > last => {
                let ticks = (now_ms - last) / self.config.tick_interval_ms;
                // Bound the catch-up after a long stall: a few election timeouts' worth is
                // as good as any more.
                let ticks_max = 4 * self.config.raft.election_ticks.max(1) as u64;
                for _ in 0..ticks.min(ticks_max) {
                    self.raft.tick();
                }
                self.last_tick_ms = Some(last + ticks * self.config.tick_interval_ms);
            }
            Some(_) => {}
        }
        self.reconcile_partitions();
        self.poll()
    }

    /// On the active controller, once per tick: proposes what [`reconcile_records`] says the
    /// partitions need (nothing, nearly always; a controlled shutdown's moves that a lost or
    /// refused proposal left undone). Against the latest image, so changes already in flight
    /// are not proposed twice.
    fn reconcile_partitions(&mut self) {
        if !self.raft.is_active_leader() {
            return;
        }
        let out = reconcile_records(self.raft.latest_image(), &TopicDefaults::default());
        if out.records.is_empty() {
            return;
        }
        tracing::info!(
            changes = out.records.len(),
            "partitions that need a leader or an ISR change: proposing them"
        );
        if let Err(r) = self.propose_failover(out) {
            tracing::debug!("reconciling partitions: {r}");
        }
    }

    /// On the leader of a quorum whose image has no cluster id yet (a fresh one, or a data
    /// directory from before cluster ids): proposes one, drawn from this node's seeded stream.
    /// The speculative image carries it while in flight, so it is proposed once; if the
    /// proposal is lost with a leadership, the next leader proposes again.
    fn ensure_cluster_id(&mut self) {
        if !self.raft.is_active_leader() || self.raft.latest_image().cluster_id().is_some() {
            return;
        }
        let id = loop {
            let id: TopicId = self.topic_ids.next_uuid();
            if !id.is_zero() {
                break id;
            }
        };
        if let Err(r) = self.raft.propose(crate::records::cluster_id(id)) {
            tracing::debug!("proposing the cluster id: {r}");
        }
    }

    /// On the leader: every registered broker follows the metadata log (DESIGN §7), so one that
    /// neither votes nor learns yet is proposed as a learner — one at a time (raft-rs takes one
    /// membership change at a time), the next at a later poll. A fixpoint over the committed
    /// image and configuration: nothing is proposed twice, and a change lost with a leadership
    /// is proposed again by the next leader.
    fn ensure_learners(&mut self) {
        if !self.config.brokers_learn || !self.raft.is_active_leader() {
            return;
        }
        let cs = self.raft.conf_state();
        let missing = self
            .raft
            .image()
            .brokers()
            .map(|b| crate::raft_id_of_broker(b.broker_id))
            .find(|id| *id != 0 && !cs.voters.contains(id) && !cs.learners.contains(id));
        if let Some(id) = missing {
            match self.raft.propose_add_learner(id) {
                Ok(true) => tracing::info!(
                    raft_id = id,
                    "adding a broker to the metadata quorum as a learner"
                ),
                Ok(false) => {}
                Err(r) => tracing::debug!(raft_id = id, "adding a learner: {r}"),
            }
        }
    }

    /// Persists and applies everything raft has ready, until it has nothing more.
    pub fn poll(&mut self) -> Result<Polled, ControllerError> {
        if let Some(why) = &self.storage_failure {
            return Err(ControllerError::Failed(why.clone()));
        }
        let polled = self.poll_inner();
        if let Err(ControllerError::Disk(e)) = &polled {
            self.storage_failure = Some(e.to_string());
        }
        polled
    }

    /// Why this controller stopped: a storage write failed, so its raft state may be ahead of
    /// its disk. The owner drops it and opens the directory again (a broker stops: Kafka's
    /// broker shuts down too when its metadata log directory fails).
    pub fn storage_failure(&self) -> Option<&str> {
        self.storage_failure.as_deref()
    }

    fn poll_inner(&mut self) -> Result<Polled, ControllerError> {
        let mut polled = Polled {
            messages: std::mem::take(&mut self.outbox),
            ..Default::default()
        };
        // What a leader writes on its own (the cluster id, learners) waits until it has applied
        // an entry of its term, which can happen inside this very loop: ask again each round.
        loop {
            self.ensure_cluster_id();
            self.ensure_learners();
            let Some(mut ready) = self.raft.ready() else {
                break;
            };
            polled.messages.append(&mut ready.messages);
            self.disk
                .persist_ready(ready.snapshot(), ready.entries(), ready.hard_state())?;
            let advanced = self.raft.advance(ready)?;
            self.disk.persist_advanced(
                advanced.hard_state.as_ref(),
                advanced.conf_state.as_ref(),
                advanced.snapshot_taken.as_ref(),
            )?;
            polled.messages.extend(advanced.messages);
            if advanced.snapshot_installed {
                let before = std::mem::take(&mut polled.committed);
                polled.superseded.extend(before);
                polled.superseded.extend(advanced.committed);
                polled.replaced_image = Some(self.raft.image().clone());
            } else {
                polled.committed.extend(advanced.committed);
            }
            polled.abandoned.extend(advanced.abandoned);
        }
        if self.disk.is_catching_up() && !self.raft.is_catching_up() {
            self.disk.caught_up()?;
        }
        Ok(polled)
    }
}

fn sorted(ids: &[u64]) -> Vec<u64> {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v
}
