//! The controller driver on core 0 (DESIGN §4, §7): drives `spool_raft::Controller` (the raft-rs
//! metadata group, a single voter on one node), answers CreateTopics/DeleteTopics proposals and
//! producer-id allocations, and broadcasts every committed record to every core — answering the
//! proposer only after all cores have applied it.
//!
//! Nothing here blocks the reactor: the raft façade does blocking `std::fs` I/O (the raft log's
//! fsync, snapshot writes), so every call into it — opening, proposing, ticking, polling — runs on
//! glommio's blocking thread pool, one at a time (`turn`), with the façade moved there and back.
//! Core 0 keeps serving its partitions meanwhile. The decisions are the façade's and
//! `spool_raft::validate`'s, pure; time comes in as `now_ms`, the incarnation id as an argument.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::local_channel::{self, LocalSender};
use glommio::sync::Semaphore;
use spool_protocol::metadata_log;
use spool_protocol::metadata_records::{MetadataRecordBody, MetadataRecordBodyT, MetadataRecordT};
use spool_protocol::ErrorCode;
use spool_raft::controller::{ControllerError, Polled};
use spool_raft::validate::{HeartbeatRequest, Refusal, RegisterBrokerRequest};
use spool_raft::{ControllerStatus, CreateTopicRequest, MetadataImage, ProposalId, Uuid128};

use crate::calls::Services;
use crate::cluster_config::{node_of_raft_id, raft_id};
use crate::handoff::Handoff;
use crate::local::Local;
use crate::peers::Peers;
use crate::publish_order::{PublishOrder, Ticket};
use crate::requests::{ApplyMetadata, ControllerOp, ProducerIdRange, TopicOutcome};
use crate::router::Router;
use crate::shutdown_grants::ShutdownGrants;

/// Wall-clock length of one raft tick. With raft's 10-tick election timeout (drawn in [10, 20)
/// ticks) a follower campaigns 0.5–1 s after its leader went silent, and the leader heartbeats
/// every 150 ms: together with the broker-session grace below, a new partition leader exists
/// within 2 s of the controller's own `kill -9` (DESIGN §7). Raft traffic is a few small messages
/// per tick on the internal port.
pub const TICK_INTERVAL_MS: u64 = 50;
/// Heartbeats a live broker gets to reach a newly active controller before its session counts:
/// the new controller treats every broker as last heard from `session timeout − this many
/// heartbeat intervals` ago, so a broker that died with the old controller is fenced that soon
/// after the election instead of a whole session later (Kafka waits a whole session).
pub const ACTIVATION_GRACE_HEARTBEATS: u64 = 3;

/// What a proposer is told: the outcome and the committed record (which carries, e.g., the
/// producer-id block that was handed out).
type Answer = (Result<(), ErrorCode>, Option<MetadataRecordT>);

/// Producer ids handed to a core at a time.
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

/// The raft façade, which lives on the blocking pool while a call runs.
type Raft = Box<spool_raft::Controller>;

pub struct Controller {
    /// `None` only while a call runs on the blocking pool (always under `turn`).
    raft: RefCell<Option<Raft>>,
    /// One call into the façade at a time.
    turn: Semaphore,
    pub(crate) waiting: RefCell<HashMap<ProposalId, LocalSender<Answer>>>,
    /// Committed records are broadcast one poll's worth at a time, in poll order, so cores
    /// apply them in commit order (`crate::publish_order`).
    publish_order: Rc<PublishOrder>,
    router: Rc<Router>,
    /// The other voters (clustered only): raft messages and calls to the active controller.
    pub(crate) peers: Option<Rc<Peers>>,
    /// This broker's node id.
    pub(crate) node_id: i32,
    /// The active controller's node id as raft last reported it (`None`: unknown, an election).
    leader_node: Cell<Option<i32>>,
    /// What the last status read said (for `/metrics` and `cluster info`).
    pub(crate) status: RefCell<Option<ControllerStatus>>,
    /// This broker's epoch from its last registration (-1 before one; clustered only).
    pub(crate) broker_epoch: Cell<i64>,
    /// The epoch its data directory recorded (-1: none; `crate::clean_shutdown`), sent with its
    /// registrations; after each registration, that one's (a re-registration of a live process
    /// has lost nothing).
    pub(crate) previous_broker_epoch: Cell<i64>,
    /// The brokers' sessions, kept while this node is the active controller (a node that becomes
    /// active starts a fresh one, giving every broker a grace period: a failover fences nobody).
    pub(crate) sessions: RefCell<Option<spool_core::liveness::BrokerSessions>>,
    pub(crate) session_timeout_ms: u64,
    heartbeat_interval_ms: u64,
    /// The broker-wide topic defaults (`--segment-bytes`, …): what a topic's own config falls
    /// back to when the controller decides for it (AlterPartition's `min.insync.replicas`).
    pub(crate) topic_defaults: spool_core::topic_config::TopicDefaults,
    /// This broker's controlled shutdown: asked for, and allowed (clustered only).
    pub(crate) handoff: Handoff,
    /// The controlled shutdowns this node let through while it was the active controller.
    pub(crate) shutdown_grants: ShutdownGrants,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Raft(#[from] ControllerError),
    #[error("registering this broker with the controller: {0}")]
    Register(String),
    #[error("{0}")]
    Quorum(String),
}

/// Opens the raft directory and registers and unfences this broker (blocking: runs on the pool).
fn open_blocking(
    cfg: &crate::config::BrokerConfig,
    incarnation_id: Uuid128,
    seed: u64,
    previous_broker_epoch: i64,
) -> Result<(Raft, MetadataImage), StartError> {
    let mut config = spool_raft::ControllerConfig::single_node(raft_id(cfg.node_id), seed);
    config.raft.snapshot_every_entries = cfg.metadata_snapshot_entries;
    if cfg.clustered() {
        config.raft.initial_voters = cfg
            .controller_voters
            .iter()
            .map(|v| raft_id(v.node_id))
            .collect();
        // A broker outside the voters starts as a learner of the same group: it never
        // campaigns, and the active controller adds it to the configuration when it registers.
        if !cfg.is_voter() {
            config.raft.initial_learners = vec![raft_id(cfg.node_id)];
        }
        config.tick_interval_ms = TICK_INTERVAL_MS;
        config.brokers_learn = true;
    }
    let (raft, _) = spool_raft::Controller::open_with(&cfg.data_dir, config)?;
    let mut raft = Box::new(raft);
    let voters: Vec<u64> = raft.status().voters;
    let mut wanted: Vec<u64> = if cfg.clustered() {
        cfg.controller_voters
            .iter()
            .map(|v| raft_id(v.node_id))
            .collect()
    } else {
        vec![raft_id(cfg.node_id)]
    };
    wanted.sort_unstable();
    if voters != wanted {
        let shown: Vec<String> = voters
            .iter()
            .filter_map(|r| node_of_raft_id(*r))
            .map(|n| n.to_string())
            .collect();
        return Err(StartError::Quorum(format!(
            "the data directory {} belongs to a controller quorum of nodes [{}], not the one this broker was started with; start it with that quorum, or give it an empty data directory",
            cfg.data_dir.display(),
            shown.join(", ")
        )));
    }
    if cfg.clustered() {
        // Registration goes to the active controller once a quorum has one (the broker
        // session, `crate::broker_session`), not to this node's raft.
        let image = raft.image().clone();
        return Ok((raft, image));
    }
    let listener = |name: &str, host: &str, port: u16| spool_raft::image::BrokerListener {
        name: name.into(),
        host: host.into(),
        port,
    };
    let reg = RegisterBrokerRequest {
        broker_id: cfg.node_id,
        incarnation_id,
        listeners: vec![
            listener("native", &cfg.host, cfg.native_port),
            listener("kafka", &cfg.advertised_host, cfg.advertised_kafka_port),
        ],
        rack: cfg.rack.clone(),
        cluster_id: None,
        registered_session_live: false,
        previous_broker_epoch,
    };
    // This process holds the data directory's lock, so the incarnation the image names (if
    // any) is dead: fence it first, as its session would have expired in a cluster, so the
    // registration does not wait out a session that nobody heartbeats.
    if raft
        .image()
        .broker(cfg.node_id)
        .is_some_and(|b| !b.fenced && b.incarnation_id != Some(incarnation_id))
    {
        raft.fence_brokers(&[cfg.node_id])
            .map_err(|r| StartError::Register(r.message))?;
        raft.poll()?;
    }
    raft.register_broker(&reg)
        .map_err(|r| StartError::Register(r.message))?;
    raft.poll()?;
    let epoch = raft
        .image()
        .broker(cfg.node_id)
        .map(|b| b.broker_epoch)
        .unwrap_or(0);
    // As a clustered broker does after each registration (`broker_session`): under fsync what it
    // reports is synced, so a crash from here on registers clean.
    if cfg.durability == spool_storage::Durability::Fsync {
        crate::clean_shutdown::record(&cfg.data_dir, epoch).map_err(StartError::Register)?;
    }
    let hb = HeartbeatRequest {
        broker_id: cfg.node_id,
        broker_epoch: epoch,
        current_metadata_offset: raft.applied_index() as i64,
        want_fence: false,
        want_shutdown: false,
    };
    raft.heartbeat(&hb)
        .map_err(|r| StartError::Register(r.message))?;
    raft.poll()?;
    let image = raft.image().clone();
    Ok((raft, image))
}

impl Controller {
    /// Opens the raft directory, registers and unfences this broker under `incarnation_id` (a
    /// fresh id per process start), and returns the controller with the committed image every
    /// core starts from. `seed` fixes raft's election timeouts and the topic ids it makes; both
    /// are drawn by the caller (entropy at the edge, a fixed seed in a simulation).
    pub async fn open(
        local: &Local,
        router: Rc<Router>,
        incarnation_id: Uuid128,
        seed: u64,
    ) -> Result<(Rc<Self>, MetadataImage), StartError> {
        let config = (*local.config).clone();
        let (raft, image, previous_broker_epoch) = glommio::executor()
            .spawn_blocking(move || {
                let previous =
                    crate::clean_shutdown::take(&config.data_dir).map_err(StartError::Register)?;
                let (raft, image) = open_blocking(&config, incarnation_id, seed, previous)?;
                Ok::<_, StartError>((raft, image, previous))
            })
            .await?;
        let status = raft.status();
        let peers = local.config.clustered().then(|| {
            Peers::new(
                local.config.node_id,
                local.config.controller_voters.clone(),
                crate::peer_connect::source_ip(&local.config.host),
            )
        });
        let c = Rc::new(Self {
            raft: RefCell::new(Some(raft)),
            turn: Semaphore::new(1),
            waiting: RefCell::new(HashMap::new()),
            publish_order: Rc::default(),
            router,
            peers,
            node_id: local.config.node_id,
            leader_node: Cell::new(node_of_raft_id(status.leader_id)),
            status: RefCell::new(Some(status)),
            broker_epoch: Cell::new(-1),
            previous_broker_epoch: Cell::new(previous_broker_epoch),
            sessions: RefCell::new(None),
            session_timeout_ms: local.config.broker_session_timeout_ms,
            heartbeat_interval_ms: local.config.broker_heartbeat_interval_ms,
            topic_defaults: local.config.topic_defaults.clone(),
            handoff: Handoff::default(),
            shutdown_grants: ShutdownGrants::default(),
        });
        c.learn_peers(spool_raft::image_snapshot::image_records(&image).iter());
        Ok((c, image))
    }

    /// Runs `f` on the façade on the blocking pool; `None` once the controller is closing.
    pub(crate) async fn with_raft<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut spool_raft::Controller) -> R + Send + 'static,
    ) -> Option<R> {
        let _turn = self.turn.acquire_permit(1).await.ok()?;
        // Taken out under the turn: no other call can find it missing.
        let mut raft = self.raft.borrow_mut().take()?;
        let (raft, out, status, failure) = glommio::executor()
            .spawn_blocking(move || {
                let out = f(&mut raft);
                let status = raft.status();
                let failure = raft.storage_failure().map(str::to_owned);
                (raft, out, status, failure)
            })
            .await;
        if let Some(why) = failure {
            crate::fail_stop::metadata_storage_failed(&why);
        }
        *self.raft.borrow_mut() = Some(raft);
        self.leader_node.set(node_of_raft_id(status.leader_id));
        *self.status.borrow_mut() = Some(status);
        Some(out)
    }

    /// Records a clean shutdown: the broker epoch this broker has now (its registration in the
    /// image), written to the data directory for the next start to register with.
    pub async fn record_clean_shutdown(&self, data_dir: std::path::PathBuf) {
        let me = self.node_id;
        let epoch = self
            .with_raft(move |raft| raft.image().broker(me).map(|b| b.broker_epoch))
            .await
            .flatten();
        let Some(epoch) = epoch else {
            return;
        };
        let written = glommio::executor()
            .spawn_blocking(move || crate::clean_shutdown::record(&data_dir, epoch))
            .await;
        if let Err(e) = written {
            tracing::warn!("recording the clean shutdown: {e}");
        }
    }

    /// The active controller's node id, as far as this node knows.
    pub fn leader_node(&self) -> Option<i32> {
        self.leader_node.get()
    }

    pub fn is_leader(&self) -> bool {
        self.leader_node.get() == Some(self.node_id)
    }

    /// Feeds raft messages from a peer into raft, then sends and publishes what that produced.
    pub async fn step_raft<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        from_node: i32,
        messages: Vec<Vec<u8>>,
    ) {
        let mut decoded = Vec::with_capacity(messages.len());
        for bytes in &messages {
            match spool_raft::peer_message::decode_message(bytes) {
                Ok(m) => decoded.push(m),
                Err(e) => {
                    tracing::warn!(from_node, "an undecodable raft message: {e}");
                    return;
                }
            }
        }
        let polled = self
            .with_raft(move |raft| {
                for m in decoded {
                    raft.step(m)?;
                }
                raft.poll()
            })
            .await;
        match polled {
            Some(Ok(p)) => self.handle_polled(services, p).await,
            Some(Err(e)) => tracing::warn!(from_node, "controller step: {e}"),
            None => {}
        }
    }

    /// Sends raft's messages to their peers (raft persisted what they depend on before `poll`
    /// returned them), then publishes what was committed.
    pub(crate) async fn handle_polled<S: Services>(&self, services: &Rc<S>, mut polled: Polled) {
        // First, before anything can yield: the raft call that produced `polled` has just
        // returned, and calls into raft run one at a time, so tickets follow poll order.
        let ticket = self.publish_order.ticket();
        if let Some(peers) = &self.peers {
            let mut by_node: HashMap<i32, Vec<Vec<u8>>> = HashMap::new();
            for m in std::mem::take(&mut polled.messages) {
                let Some(node) = node_of_raft_id(m.to) else {
                    continue;
                };
                match spool_raft::peer_message::encode_message(&m) {
                    Ok(bytes) => by_node.entry(node).or_default().push(bytes),
                    Err(e) => tracing::error!(node, "encoding a raft message: {e}"),
                }
            }
            for (node, messages) in by_node {
                peers.send_raft(node, messages);
            }
        }
        self.publish(services, polled, ticket).await;
    }

    /// Ticks raft every [`TICK_INTERVAL_MS`] until the core stops.
    pub fn spawn_ticker<S: Services>(self: &Rc<Self>, local: Rc<Local>, services: Rc<S>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            while !local.stopping.get() {
                glommio::timer::sleep(Duration::from_millis(TICK_INTERVAL_MS)).await;
                let now_ms = crate::clock::now_ms_u64();
                match me.with_raft(move |raft| raft.tick(now_ms)).await {
                    Some(Ok(p)) => me.handle_polled(&services, p).await,
                    Some(Err(e)) => tracing::error!("controller tick: {e}"),
                    None => break,
                }
                if me.peers.is_some() {
                    me.fence_expired(&services).await;
                }
            }
        })
        .detach();
    }

    /// On the active controller: fences the brokers whose session expired (no heartbeat for
    /// `--broker-session-timeout-ms`), moving their leaderships and ISR memberships to live
    /// replicas in the same step (`spool_raft::failover`). Elsewhere: drops the sessions, so the
    /// next activation starts with a grace period.
    async fn fence_expired<S: Services>(self: &Rc<Self>, services: &Rc<S>) {
        let now_ms = crate::clock::monotonic_ms();
        if !self.is_leader() {
            self.sessions.borrow_mut().take();
            return;
        }
        let timeout_ms = self.session_timeout_ms;
        let grace_ms = (self.heartbeat_interval_ms * ACTIVATION_GRACE_HEARTBEATS).min(timeout_ms);
        let sessions = self
            .sessions
            .borrow_mut()
            .get_or_insert_with(|| {
                spool_core::liveness::BrokerSessions::new(
                    now_ms.saturating_sub(timeout_ms - grace_ms),
                )
            })
            .clone();
        let fenced = self
            .with_raft(move |raft| {
                let brokers = spool_raft::failover::liveness_brokers(raft.latest_image());
                let expired = sessions.expired(brokers, now_ms, timeout_ms);
                if expired.is_empty() {
                    return (expired, None);
                }
                let proposed = raft.fence_brokers(&expired);
                let polled = raft.poll();
                (expired, Some((proposed, polled)))
            })
            .await;
        let Some((expired, Some((proposed, polled)))) = fenced else {
            return;
        };
        match proposed {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(brokers = ?expired, "fencing brokers whose session expired");
            }
            Ok(_) => {}
            Err(r) => tracing::warn!(brokers = ?expired, "fencing refused: {}", r.message),
        }
        match polled {
            Ok(p) => self.handle_polled(services, p).await,
            Err(e) => tracing::error!("controller poll: {e}"),
        }
    }

    /// Proposes `op` and answers per topic once committed and applied everywhere.
    pub async fn execute<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        op: ControllerOp,
    ) -> Vec<TopicOutcome> {
        let names = op.outcome_names();
        let proposed = self.with_raft(move |raft| propose(raft, op)).await;
        let Some((pending, polled)) = proposed else {
            return refuse_all(&names, "the controller is closing");
        };
        let mut waits = Vec::new();
        for (name, r) in pending {
            match r {
                Ok(Some(id)) => {
                    let (tx, rx) = local_channel::new_bounded(1);
                    self.waiting.borrow_mut().insert(id, tx);
                    waits.push((name, Some(rx), None));
                }
                Ok(None) => waits.push((name, None, None)),
                Err(refusal) => waits.push((name, None, Some(refusal))),
            }
        }
        match polled {
            Ok(p) => self.handle_polled(services, p).await,
            Err(e) => tracing::error!("controller poll: {e}"),
        }
        let mut out = Vec::new();
        for (name, rx, refusal) in waits {
            let (error, message) = match (rx, refusal) {
                (_, Some(r)) => (r.code, Some(r.message)),
                (Some(rx), None) => match rx.recv().await {
                    Some((Ok(()), _)) => (ErrorCode::None, None),
                    Some((Err(code), _)) => (code, None),
                    None => (
                        ErrorCode::NotController,
                        Some("the controller lost the proposal".into()),
                    ),
                },
                (None, None) => (ErrorCode::None, None),
            };
            out.push(TopicOutcome {
                name,
                error,
                message,
            });
        }
        out
    }

    /// Hands a block of producer ids to this broker; returns (first id, block size).
    pub async fn allocate_producer_ids<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        node: i32,
    ) -> ProducerIdRange {
        let proposed = self
            .with_raft(move |raft| {
                let epoch = raft
                    .latest_image()
                    .broker(node)
                    .map(|b| b.broker_epoch)
                    .unwrap_or(-1);
                let id = raft.allocate_producer_ids(node, epoch, PRODUCER_ID_BLOCK_SIZE);
                let polled = id.is_ok().then(|| raft.poll());
                (id, polled)
            })
            .await;
        let Some((id, polled)) = proposed else {
            return Err(ErrorCode::NotController);
        };
        let id = id.map_err(|r| r.code)?;
        let (tx, rx) = local_channel::new_bounded(1);
        self.waiting.borrow_mut().insert(id, tx);
        match polled {
            Some(Ok(p)) => self.handle_polled(services, p).await,
            Some(Err(e)) => tracing::error!("controller poll: {e}"),
            None => {}
        }
        match rx.recv().await {
            Some((Ok(()), Some(record)))
                if record.body.metadata_record_body_type()
                    == MetadataRecordBody::ProducerIdBlock =>
            {
                let b = record
                    .body
                    .as_producer_id_block()
                    .ok_or(ErrorCode::UnknownServerError)?;
                Ok((b.first_producer_id, b.block_size))
            }
            Some((Err(code), _)) => Err(code),
            _ => Err(ErrorCode::NotController),
        }
    }

    /// Broadcasts committed records to every core (in order) — after a whole image first, when
    /// a snapshot from the leader replaced this node's — then answers their proposers.
    async fn publish<S: Services>(&self, services: &Rc<S>, polled: Polled, ticket: Ticket) {
        debug_assert!(polled.messages.is_empty() || self.peers.is_none());
        if polled.committed.is_empty()
            && polled.abandoned.is_empty()
            && polled.replaced_image.is_none()
        {
            return;
        }
        crate::stall_watch::watch(
            || "the turn to publish committed metadata to the cores".to_string(),
            ticket.turn(),
        )
        .await;
        if let Some(image) = &polled.replaced_image {
            tracing::info!(
                brokers = image.brokers().count(),
                topics = image.topic_count(),
                "installed a metadata snapshot from the active controller"
            );
            let records: Vec<MetadataRecordT> = spool_raft::image_snapshot::image_records(image);
            self.learn_peers(records.iter());
            let encoded: Vec<Vec<u8>> = records
                .iter()
                .filter_map(|r| metadata_log::encode(r).ok())
                .collect();
            self.broadcast_records(services, encoded, true).await;
        }
        let applied: Vec<&MetadataRecordT> = polled
            .committed
            .iter()
            .filter(|c| c.outcome.is_ok())
            .map(|c| &c.record)
            .collect();
        self.learn_peers(applied.iter().copied());
        let records: Vec<Vec<u8>> = applied
            .iter()
            .filter_map(|r| metadata_log::encode(r).ok())
            .collect();
        if !records.is_empty() {
            self.broadcast_records(services, records, false).await;
        }
        let mut waiting = self.waiting.borrow_mut();
        for c in polled.superseded.into_iter().chain(polled.committed) {
            if let Some(tx) = c.proposal.and_then(|id| waiting.remove(&id)) {
                let _ = tx.try_send((c.outcome, Some(c.record)));
            }
        }
        for id in polled.abandoned {
            if let Some(tx) = waiting.remove(&id) {
                let _ = tx.try_send((Err(ErrorCode::NotController), None));
            }
        }
    }

    async fn broadcast_records<S: Services>(
        &self,
        services: &Rc<S>,
        records: Vec<Vec<u8>>,
        replace: bool,
    ) {
        let count = records.len();
        let broadcast = self.router.broadcast(services, || ApplyMetadata {
            records: records.clone(),
            replace,
        });
        for (core, applied) in crate::stall_watch::watch(
            || format!("every core applying {count} committed metadata records"),
            broadcast,
        )
        .await
        .into_iter()
        .enumerate()
        {
            if let Err(e) = applied {
                tracing::warn!(core, "committed metadata not applied: {e}");
            }
        }
    }

    /// Tells the peer connections what committed records say about them: where a registered
    /// broker's internal port is (learners are reached there), and the cluster id every frame
    /// carries.
    pub(crate) fn learn_peers<'r>(&self, records: impl Iterator<Item = &'r MetadataRecordT>) {
        let Some(peers) = &self.peers else {
            return;
        };
        for record in records {
            match &record.body {
                MetadataRecordBodyT::RegisterBroker(r) => {
                    let internal = r.listeners.iter().flatten().find(|l| l.name == "internal");
                    if let Some(l) = internal {
                        peers.set_address(r.broker_id, &l.host, l.port);
                    }
                }
                MetadataRecordBodyT::ClusterId(c) => {
                    if let Some(id) = c.id.as_ref() {
                        peers.set_cluster_id(&Uuid128::from(id).to_hex());
                    }
                }
                _ => {}
            }
        }
    }
}

/// A proposal's outcome per topic: waiting for a commit, validated only, or refused.
type Proposed = Vec<(String, Result<Option<ProposalId>, Refusal>)>;

/// Validates and proposes `op` on the façade, then polls it (on the blocking pool).
fn propose(
    raft: &mut spool_raft::Controller,
    op: ControllerOp,
) -> (Proposed, Result<Polled, ControllerError>) {
    let mut pending = Vec::new();
    match op {
        ControllerOp::CreateTopics {
            topics,
            validate_only,
        } => {
            for t in topics {
                let req = CreateTopicRequest {
                    name: t.name.clone(),
                    num_partitions: t.partitions,
                    replication_factor: t.replication_factor,
                    configs: t.configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
                };
                let r = if validate_only {
                    spool_raft::validate::validate_create_topic(
                        raft.latest_image(),
                        &req,
                        // Any id: validation only checks that it is unused and non-zero.
                        Uuid128 { high: 1, low: 1 },
                        &Default::default(),
                    )
                    .map(|_| None)
                } else {
                    raft.create_topic(&req).map(Some)
                };
                pending.push((t.name, r));
            }
        }
        ControllerOp::DeleteTopics { names } => {
            for n in names {
                let r = raft.delete_topic(&n).map(Some);
                pending.push((n, r));
            }
        }
        ControllerOp::CreatePartitions {
            topics,
            validate_only,
        } => {
            for t in topics {
                let r = if validate_only {
                    let policy = *raft.create_topic_policy();
                    spool_raft::topic_admin::validate_create_partitions(
                        raft.latest_image(),
                        &t,
                        &policy,
                    )
                    .map(|_| None)
                } else {
                    raft.create_partitions(&t).map(Some)
                };
                pending.push((t.name, r));
            }
        }
        ControllerOp::AlterConfigs {
            topics,
            validate_only,
        } => {
            for t in topics {
                let r = if validate_only {
                    spool_raft::topic_admin::validate_alter_configs(raft.latest_image(), &t)
                        .map(|_| None)
                } else {
                    raft.alter_configs(&t).map(Some)
                };
                pending.push((t.topic, r));
            }
        }
        ControllerOp::ElectLeaders {
            unclean,
            partitions,
        } => {
            for tp in partitions {
                let r = raft
                    .elect_leader(&tp.topic, tp.partition, unclean)
                    .map(Some);
                pending.push((tp.topic, r));
            }
        }
    }
    let polled = raft.poll();
    (pending, polled)
}

fn refuse_all(names: &[String], why: &str) -> Vec<TopicOutcome> {
    names
        .iter()
        .map(|n| TopicOutcome {
            name: n.clone(),
            error: ErrorCode::NotController,
            message: Some(why.to_string()),
        })
        .collect()
}
