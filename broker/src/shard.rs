//! One core's share of the broker, assembled (shared-nothing, DESIGN §4): the composition root.
//!
//! A [`Shard`] owns this core's [`Local`] state (image, partitions, metrics, lifecycle), its
//! [`Router`], the group driver, and on core 0 the controller driver, and implements
//! [`Services`]: each call of the catalogue ([`crate::calls`]) is answered by handing it to the
//! part that owns it. It decides nothing itself. The fronts and operations above it reach the
//! local state through `Deref` (`shard.config`, `shard.image`, `shard.metrics`) and other cores
//! through [`Shard::call`].
//!
//! Layering, bottom up (no file imports a file above it): `requests`/`calls` → `router`,
//! `local`, `partition` → `group::driver`, `controller`, `metadata_apply` → `shard` → `ops` →
//! fronts (`handlers`, `kafka`, `connection`, `admin_http`) → `runtime`.

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::channel_mesh::{Receivers, Senders};
use spool_core::group::{GroupAnswer, GroupCall};
use spool_core::isr_change::AlterPartitionAnswer;
use spool_protocol::internal::VerifyTxn;
use spool_protocol::ErrorCode;

use crate::calls::{Call, Services};
use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::group::driver::GroupDriver;
use crate::group::CoordinatorConfig;
use crate::local::Local;
use crate::peers::Peers;
use crate::requests::{
    AllocateProducerIds, AlterPartition, ApplyMetadata, ControllerOp, EpochEndAnswer,
    EpochEndQuery, FetchPartition, FetchResult, ListOffsetsPartition, ListOffsetsResult,
    MetricsText, ProducePartition, ProduceResult, ProducerIdRange, QuorumQuery, ReplicaFetchRead,
    ReplicaFetchShare, TopicOutcome, TopicPartition, WatchPartitions, WriteMarkerPartition,
};
use crate::router::{Envelope, RouteError, Router};
use crate::txn::calls::{TxnAnswer, TxnCall};
use crate::txn::driver::TxnDriver;
use crate::txn_verify::Asker;

pub struct Shard {
    pub local: Rc<Local>,
    pub router: Rc<Router>,
    /// Core 0 only.
    pub controller: RefCell<Option<Rc<Controller>>>,
    /// The consumer groups whose `__consumer_offsets` partitions this core owns.
    pub groups: Rc<GroupDriver>,
    /// The transactional ids whose `__transaction_state` partitions this core owns.
    pub txns: Rc<TxnDriver>,
    /// This core's connections to other brokers' internal ports for transactions: the markers
    /// its coordinator writes (`crate::txn_markers`) and its partitions' KIP-890 checks
    /// (`crate::txn_verify`).
    pub txn_peers: Rc<Peers>,
    /// This core's unused producer ids: [next, end).
    producer_ids: Cell<(i64, i64)>,
}

impl Deref for Shard {
    type Target = Local;

    fn deref(&self) -> &Local {
        &self.local
    }
}

impl Shard {
    pub fn new(config: Rc<BrokerConfig>, senders: Senders<Envelope>) -> Rc<Self> {
        let router = Rc::new(Router::new(senders, config.cores));
        let core = router.core();
        let local = Rc::new(Local::new(core, Rc::clone(&config)));
        let groups = GroupDriver::new(
            CoordinatorConfig {
                offsets_partitions: config.offsets_topic_partitions,
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
            },
            Rc::clone(&local),
            crate::clock::entropy_seed(),
        );
        let txns = TxnDriver::new(Rc::clone(&local));
        let txn_peers = Peers::new(
            config.node_id,
            Vec::new(),
            crate::peer_connect::source_ip(&config.host),
        );
        Rc::new(Self {
            local,
            router,
            controller: RefCell::new(None),
            groups,
            txns,
            txn_peers,
            producer_ids: Cell::new((0, 0)),
        })
    }

    /// Serves the other cores' calls on this shard.
    pub fn spawn_receivers(self: &Rc<Self>, receivers: Receivers<Envelope>) {
        self.router.spawn_receivers(receivers, Rc::clone(self));
    }

    /// This core's KIP-890 asker (`crate::txn_verify`).
    pub fn verifier(self: &Rc<Self>) -> Asker<'_, Shard> {
        Asker {
            local: &self.local,
            router: &self.router,
            services: self,
            peers: &self.txn_peers,
        }
    }

    pub fn owner(&self, tp: &TopicPartition) -> Option<usize> {
        self.router.owner(tp)
    }

    /// Runs `request` on `core` (or here) and returns its typed reply.
    pub async fn call<C: Call>(
        self: &Rc<Self>,
        core: usize,
        request: C,
    ) -> Result<C::Reply, RouteError> {
        self.router.call(self, core, request).await
    }

    /// Runs a request on every core (this one included); replies in core order.
    pub async fn broadcast<C: Call>(
        self: &Rc<Self>,
        make: impl Fn() -> C,
    ) -> Vec<Result<C::Reply, RouteError>> {
        self.router.broadcast(self, make).await
    }

    /// A fresh producer id for InitProducerId, from this core's block (refilled by the controller).
    pub async fn next_producer_id(self: &Rc<Self>) -> Result<i64, ErrorCode> {
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        match self.call(0, AllocateProducerIds).await {
            Ok(Ok((first, size))) if size > 0 => {
                self.producer_ids.set((first + 1, first + i64::from(size)));
                Ok(first)
            }
            // No block now: the controller moved, is being elected, or refused this broker's
            // epoch while it re-registers. A client can do nothing about any of these but wait,
            // so it gets Kafka's answer for a manager without a block (its
            // RPCProducerIdManager): COORDINATOR_LOAD_IN_PROGRESS, which every client retries.
            // NOT_CONTROLLER is about the controller, not about this request's target.
            Ok(Err(code)) => {
                tracing::debug!(%code, "no producer-id block from the controller");
                Err(ErrorCode::CoordinatorLoadInProgress)
            }
            _ => Err(ErrorCode::CoordinatorLoadInProgress),
        }
    }
}

impl Services for Shard {
    async fn produce(self: &Rc<Self>, p: ProducePartition) -> ProduceResult {
        let (Some(part), Some(config)) = (self.partition(&p.tp), self.topic_config(&p.tp.topic))
        else {
            return ProduceResult::error(
                ErrorCode::NotLeaderOrFollower,
                format!("{} is not on this core", p.tp),
            );
        };
        // KIP-890: a transactional batch opening a transaction here is checked with its
        // coordinator first (`crate::txn_verify`), under a token the partition keeps valid
        // until the append (`crate::partition`'s `verify`).
        let verified = match part.needs_verification(&p.records).await {
            Ok(None) => None,
            Ok(Some((producer_id, producer_epoch))) => {
                let Some(id) = p.transactional_id.as_deref().filter(|t| !t.is_empty()) else {
                    return ProduceResult::error(
                        ErrorCode::InvalidTxnState,
                        format!(
                            "{}: a transactional batch needs the request's transactional id",
                            p.tp
                        ),
                    );
                };
                let v = part.begin_verification(producer_id, producer_epoch);
                let code = self
                    .verifier()
                    .verify(VerifyTxn {
                        transactional_id: id.to_string(),
                        producer_id,
                        producer_epoch,
                        topic: p.tp.topic.clone(),
                        partition: p.tp.partition,
                    })
                    .await;
                if code != ErrorCode::None {
                    part.end_verification(v);
                    return ProduceResult::error(
                        code,
                        format!(
                            "{}: transactional id {id} (producer {producer_id} epoch {producer_epoch}) has no ongoing transaction holding this partition",
                            p.tp
                        ),
                    );
                }
                Some(v)
            }
            Err(code) => {
                return ProduceResult::error(
                    code,
                    format!("{}: transactional batches of more than one producer", p.tp),
                )
            }
        };
        let r = part
            .produce(
                p.records,
                p.acks,
                p.timeout_ms,
                config.max_message_bytes,
                crate::clock::now_ms(),
                verified,
            )
            .await;
        if let Some(v) = verified {
            part.end_verification(v);
        }
        r
    }

    async fn fetch(self: &Rc<Self>, f: FetchPartition) -> FetchResult {
        match self.partition(&f.tp) {
            Some(part) => match part.check_serves_clients(f.current_leader_epoch) {
                Ok(()) => {
                    part.fetch(f.fetch_offset, f.max_bytes, f.read_committed)
                        .await
                }
                Err(code) => FetchResult::error(code),
            },
            None => FetchResult::error(ErrorCode::NotLeaderOrFollower),
        }
    }

    async fn list_offsets(self: &Rc<Self>, l: ListOffsetsPartition) -> ListOffsetsResult {
        match self.partition(&l.tp) {
            Some(part) => match part.check_serves_clients(None) {
                Ok(()) => part.list_offsets(l.timestamp, l.read_committed).await,
                Err(code) => ListOffsetsResult {
                    error: code,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                },
            },
            None => ListOffsetsResult {
                error: ErrorCode::NotLeaderOrFollower,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            },
        }
    }

    /// Waits until one of the partitions has a high watermark past the given offset, one of them
    /// is gone, `timeout_ms` passes, or the core stops.
    async fn watch(self: &Rc<Self>, w: WatchPartitions) {
        let parts: Vec<_> = w
            .partitions
            .iter()
            .map(|(tp, o)| (self.partition(tp), *o))
            .collect();
        let ready = futures_lite::future::poll_fn(|cx| {
            for (p, offset) in &parts {
                match p {
                    Some(p) if (p.high_watermark() as i64) <= *offset => p.watch(cx.waker()),
                    _ => return std::task::Poll::Ready(()),
                }
            }
            std::task::Poll::Pending
        });
        let timer = glommio::timer::sleep(Duration::from_millis(w.timeout_ms));
        let stopped = async {
            let _: Option<()> = self.stopped_signal().await;
        };
        futures_lite::future::or(futures_lite::future::or(ready, timer), stopped).await;
    }

    async fn controller(self: &Rc<Self>, op: ControllerOp) -> Vec<TopicOutcome> {
        let controller = self.controller.borrow().clone();
        match controller {
            Some(c) => c.execute_or_forward(self, op).await,
            None => Vec::new(),
        }
    }

    async fn apply_metadata(self: &Rc<Self>, records: ApplyMetadata) {
        if records.replace {
            crate::metadata_apply::replace(
                &self.local,
                &self.router,
                &self.groups,
                &self.txns,
                &records.records,
            )
            .await;
        } else {
            crate::metadata_apply::apply(
                &self.local,
                &self.router,
                &self.groups,
                &self.txns,
                &records.records,
            )
            .await;
        }
        self.mark_ready();
    }

    async fn allocate_producer_ids(self: &Rc<Self>, _: AllocateProducerIds) -> ProducerIdRange {
        let controller = self.controller.borrow().clone();
        match controller {
            Some(c) => c.allocate_or_forward(self).await,
            None => Err(ErrorCode::NotController),
        }
    }

    async fn delete_records(
        self: &Rc<Self>,
        d: crate::requests::DeleteRecordsPartition,
    ) -> crate::requests::DeleteRecordsAnswer {
        match self.partition(&d.tp) {
            Some(part) => part.delete_records(d.offset, d.timeout_ms).await,
            None => Err(ErrorCode::NotLeaderOrFollower),
        }
    }

    async fn offset_for_leader_epoch(self: &Rc<Self>, q: EpochEndQuery) -> EpochEndAnswer {
        match self.partition(&q.tp) {
            Some(part) => part.offset_for_leader_epoch(q.current_leader_epoch, q.leader_epoch),
            None => Err(ErrorCode::NotLeaderOrFollower),
        }
    }

    async fn replica_fetch(self: &Rc<Self>, share: ReplicaFetchShare) -> Vec<ReplicaFetchRead> {
        crate::replica_share::serve(&self.local, share).await
    }

    async fn alter_partition(self: &Rc<Self>, request: AlterPartition) -> AlterPartitionAnswer {
        let controller = self.controller.borrow().clone();
        match controller {
            Some(c) => c.alter_partition_or_forward(self, request).await,
            None => AlterPartitionAnswer::Lost,
        }
    }

    async fn quorum(self: &Rc<Self>, _: QuorumQuery) -> Option<spool_raft::ControllerStatus> {
        let controller = self.controller.borrow().clone();
        controller.and_then(|c| c.status.borrow().clone())
    }

    async fn metrics(self: &Rc<Self>, _: MetricsText) -> String {
        let mut text = crate::maintenance::metrics_text(&self.local);
        text.push_str(&format!(
            "spool_consumer_groups{{core=\"{}\"}} {}\n",
            self.core,
            self.groups.group_count()
        ));
        text.push_str(&format!(
            "spool_transactional_ids{{core=\"{}\"}} {}\n",
            self.core,
            self.txns.id_count()
        ));
        if self.core == 0 {
            let controller = self.controller.borrow().clone();
            text.push_str(&crate::controller_metrics::render(
                &self.image.borrow(),
                &self.config.topic_defaults,
                controller.as_deref(),
            ));
        }
        text
    }

    async fn group(self: &Rc<Self>, call: GroupCall) -> GroupAnswer {
        self.groups.serve(call).await
    }

    async fn txn(self: &Rc<Self>, mut call: TxnCall) -> TxnAnswer {
        if let TxnCall::InitProducerId {
            fresh_producer_id, ..
        } = &mut call
        {
            // Drawn here, where the block is: the coordinator decides synchronously and uses
            // it only for an id that needs a new producer id.
            if fresh_producer_id.is_none() {
                *fresh_producer_id = self.next_producer_id().await.ok();
            }
        }
        self.txns.serve(call).await
    }

    async fn write_marker(self: &Rc<Self>, m: WriteMarkerPartition) -> ErrorCode {
        match self.partition(&m.tp) {
            Some(part) => {
                let code = part
                    .write_marker(
                        m.producer_id,
                        m.producer_epoch,
                        m.commit,
                        m.coordinator_epoch,
                        m.decision_offset,
                    )
                    .await;
                if code == ErrorCode::None && m.tp.topic == crate::group::OFFSETS_TOPIC {
                    // The transaction's offset commits on this partition are decided. (A late
                    // copy of an older transaction's marker is refused by the partition, so it
                    // never decides the pending commits of the producer's next transaction.)
                    self.groups
                        .on_txn_marker(m.tp.partition, m.producer_id, m.commit);
                }
                code
            }
            None => ErrorCode::NotLeaderOrFollower,
        }
    }
}
