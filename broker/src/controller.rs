//! The controller on core 0 (DESIGN §4, §7): drives `spool_raft::Controller` (the raft-rs
//! metadata group, a single voter on one node), answers CreateTopics/DeleteTopics proposals, and
//! broadcasts every committed record to every core — answering the proposer only after all cores
//! have applied it.
//!
//! The raft façade does blocking `std::fs` I/O (fsync of the raft log); it runs only on core 0
//! and only when metadata changes, never on a message's path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::local_channel::{self, LocalSender};
use glommio::sync::Semaphore;
use spool_protocol::metadata_log;
use spool_protocol::metadata_records::{MetadataRecordBody, MetadataRecordT};
use spool_protocol::ErrorCode;
use spool_raft::controller::Polled;
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{CreateTopicRequest, MetadataImage, ProposalId, Uuid128};

use crate::mesh::{ControllerOp, Request, TopicOutcome};
use crate::partition::now_ms;
use crate::shard::Shard;

/// Wall-clock length of one raft tick.
pub const TICK_INTERVAL_MS: u64 = 100;

/// What a proposer is told: the outcome and the committed record (which carries, e.g., the
/// producer-id block that was handed out).
type Answer = (Result<(), ErrorCode>, Option<MetadataRecordT>);

/// Producer ids handed to a core at a time.
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

pub struct Controller {
    raft: RefCell<spool_raft::Controller>,
    waiting: RefCell<HashMap<ProposalId, LocalSender<Answer>>>,
    /// Committed records are broadcast by one task at a time, so cores apply them in order.
    publish: Semaphore,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Raft(#[from] spool_raft::controller::ControllerError),
    #[error("registering this broker with the controller: {0}")]
    Register(String),
}

impl Controller {
    /// Opens the raft directory, registers and unfences this broker, and returns the controller
    /// with the committed image every core starts from.
    pub fn open(shard: &Shard) -> Result<(Rc<Self>, MetadataImage), StartError> {
        let cfg = &shard.config;
        let (mut raft, _) = spool_raft::Controller::open(&cfg.data_dir, cfg.node_id as u64 + 1)?;
        let incarnation = now_ms() as u64;
        let listener = spool_raft::image::BrokerListener {
            name: "native".into(),
            host: cfg.host.clone(),
            port: cfg.native_port,
        };
        let reg = RegisterBrokerRequest {
            broker_id: cfg.node_id,
            incarnation_id: Uuid128 {
                high: incarnation,
                low: u64::from(std::process::id()),
            },
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
        let c = Rc::new(Self {
            raft: RefCell::new(raft),
            waiting: RefCell::new(HashMap::new()),
            publish: Semaphore::new(1),
        });
        Ok((c, image))
    }

    /// Ticks raft every [`TICK_INTERVAL_MS`] until the shard stops.
    pub fn spawn_ticker(self: &Rc<Self>, shard: &Rc<Shard>) {
        let me = Rc::clone(self);
        let shard = Rc::clone(shard);
        glommio::spawn_local(async move {
            while !shard.stopping.get() {
                glommio::timer::sleep(Duration::from_millis(TICK_INTERVAL_MS)).await;
                let polled = me.raft.borrow_mut().tick(now_ms() as u64);
                match polled {
                    Ok(p) => me.publish(&shard, p).await,
                    Err(e) => tracing::error!("controller tick: {e}"),
                }
            }
        })
        .detach();
    }

    /// Proposes `op` and answers per topic once committed and applied everywhere.
    pub async fn execute(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
        op: ControllerOp,
    ) -> Vec<TopicOutcome> {
        let mut pending = Vec::new();
        {
            let mut raft = self.raft.borrow_mut();
            match &op {
                ControllerOp::CreateTopics {
                    topics,
                    validate_only,
                } => {
                    for t in topics {
                        let req = CreateTopicRequest {
                            name: t.name.clone(),
                            num_partitions: t.partitions,
                            replication_factor: t.replication_factor,
                            configs: t
                                .configs
                                .iter()
                                .map(|(k, v)| (k.clone(), Some(v.clone())))
                                .collect(),
                        };
                        let r = if *validate_only {
                            spool_raft::validate::validate_create_topic(
                                raft.latest_image(),
                                &req,
                                Uuid128 { high: 1, low: 1 },
                                &Default::default(),
                            )
                            .map(|_| None)
                        } else {
                            raft.create_topic(&req).map(Some)
                        };
                        pending.push((t.name.clone(), r));
                    }
                }
                ControllerOp::DeleteTopics { names } => {
                    for n in names {
                        pending.push((n.clone(), raft.delete_topic(n).map(Some)));
                    }
                }
            }
        }
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
        let polled = self.raft.borrow_mut().poll();
        match polled {
            Ok(p) => self.publish(shard, p).await,
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
    pub async fn allocate_producer_ids(
        self: &Rc<Self>,
        shard: &Rc<Shard>,
    ) -> Result<(i64, i32), ErrorCode> {
        let node = shard.config.node_id;
        let proposed = {
            let mut raft = self.raft.borrow_mut();
            let epoch = raft
                .latest_image()
                .broker(node)
                .map(|b| b.broker_epoch)
                .unwrap_or(-1);
            raft.allocate_producer_ids(node, epoch, PRODUCER_ID_BLOCK_SIZE)
        };
        let id = proposed.map_err(|r| r.code)?;
        let (tx, rx) = local_channel::new_bounded(1);
        self.waiting.borrow_mut().insert(id, tx);
        let polled = self.raft.borrow_mut().poll();
        match polled {
            Ok(p) => self.publish(shard, p).await,
            Err(e) => tracing::error!("controller poll: {e}"),
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
    async fn publish(&self, shard: &Rc<Shard>, polled: Polled) {
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
            shard
                .broadcast(|| Request::ApplyMetadata(records.clone()))
                .await;
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
