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

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::local_channel::{self, LocalSender};
use glommio::sync::Semaphore;
use spool_protocol::metadata_log;
use spool_protocol::metadata_records::{MetadataRecordBody, MetadataRecordT};
use spool_protocol::ErrorCode;
use spool_raft::controller::{ControllerError, Polled};
use spool_raft::validate::{HeartbeatRequest, Refusal, RegisterBrokerRequest};
use spool_raft::{CreateTopicRequest, MetadataImage, ProposalId, Uuid128};

use crate::calls::Services;
use crate::local::Local;
use crate::requests::{ApplyMetadata, ControllerOp, ProducerIdRange, TopicOutcome};
use crate::router::Router;

/// Wall-clock length of one raft tick.
pub const TICK_INTERVAL_MS: u64 = 100;

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
    waiting: RefCell<HashMap<ProposalId, LocalSender<Answer>>>,
    /// Committed records are broadcast by one task at a time, so cores apply them in order.
    publish: Semaphore,
    router: Rc<Router>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Raft(#[from] ControllerError),
    #[error("registering this broker with the controller: {0}")]
    Register(String),
}

/// Opens the raft directory and registers and unfences this broker (blocking: runs on the pool).
fn open_blocking(
    cfg: &crate::config::BrokerConfig,
    incarnation_id: Uuid128,
    seed: u64,
) -> Result<(Raft, MetadataImage), StartError> {
    let (raft, _) = spool_raft::Controller::open(&cfg.data_dir, cfg.node_id as u64 + 1, seed)?;
    let mut raft = Box::new(raft);
    let listener = spool_raft::image::BrokerListener {
        name: "native".into(),
        host: cfg.host.clone(),
        port: cfg.native_port,
    };
    let reg = RegisterBrokerRequest {
        broker_id: cfg.node_id,
        incarnation_id,
        listeners: vec![listener],
        rack: None,
    };
    raft.register_broker(&reg)
        .map_err(|r| StartError::Register(r.message))?;
    raft.poll()?;
    let epoch = raft
        .image()
        .broker(cfg.node_id)
        .map(|b| b.broker_epoch)
        .unwrap_or(0);
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
        let (raft, image) = glommio::executor()
            .spawn_blocking(move || open_blocking(&config, incarnation_id, seed))
            .await?;
        let c = Rc::new(Self {
            raft: RefCell::new(Some(raft)),
            turn: Semaphore::new(1),
            waiting: RefCell::new(HashMap::new()),
            publish: Semaphore::new(1),
            router,
        });
        Ok((c, image))
    }

    /// Runs `f` on the façade on the blocking pool; `None` once the controller is closing.
    async fn with_raft<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut spool_raft::Controller) -> R + Send + 'static,
    ) -> Option<R> {
        let _turn = self.turn.acquire_permit(1).await.ok()?;
        // Taken out under the turn: no other call can find it missing.
        let mut raft = self.raft.borrow_mut().take()?;
        let (raft, out) = glommio::executor()
            .spawn_blocking(move || {
                let out = f(&mut raft);
                (raft, out)
            })
            .await;
        *self.raft.borrow_mut() = Some(raft);
        Some(out)
    }

    /// Ticks raft every [`TICK_INTERVAL_MS`] until the core stops.
    pub fn spawn_ticker<S: Services>(self: &Rc<Self>, local: Rc<Local>, services: Rc<S>) {
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            while !local.stopping.get() {
                glommio::timer::sleep(Duration::from_millis(TICK_INTERVAL_MS)).await;
                let now_ms = crate::clock::now_ms_u64();
                match me.with_raft(move |raft| raft.tick(now_ms)).await {
                    Some(Ok(p)) => me.publish(&services, p).await,
                    Some(Err(e)) => tracing::error!("controller tick: {e}"),
                    None => break,
                }
            }
        })
        .detach();
    }

    /// Proposes `op` and answers per topic once committed and applied everywhere.
    pub async fn execute<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        op: ControllerOp,
    ) -> Vec<TopicOutcome> {
        let names: Vec<String> = match &op {
            ControllerOp::CreateTopics { topics, .. } => {
                topics.iter().map(|t| t.name.clone()).collect()
            }
            ControllerOp::DeleteTopics { names } => names.clone(),
        };
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
            Ok(p) => self.publish(services, p).await,
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
            Some(Ok(p)) => self.publish(services, p).await,
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

    /// Broadcasts committed records to every core (in order), then answers their proposers.
    async fn publish<S: Services>(&self, services: &Rc<S>, polled: Polled) {
        if polled.committed.is_empty() && polled.abandoned.is_empty() {
            return;
        }
        let Ok(_turn) = self.publish.acquire_permit(1).await else {
            return;
        };
        let records: Vec<Vec<u8>> = polled
            .committed
            .iter()
            .filter(|c| c.outcome.is_ok())
            .filter_map(|c| metadata_log::encode(&c.record).ok())
            .collect();
        if !records.is_empty() {
            for (core, applied) in self
                .router
                .broadcast(services, || ApplyMetadata(records.clone()))
                .await
                .into_iter()
                .enumerate()
            {
                if let Err(e) = applied {
                    tracing::warn!(core, "committed metadata not applied: {e}");
                }
            }
        }
        let mut waiting = self.waiting.borrow_mut();
        for c in polled.committed {
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
