//! One core's share of the broker (shared-nothing, DESIGN §4): the partitions it owns, its replica
//! of the metadata image and shard map, its mesh endpoints, and the request/reply routing.
//!
//! A connection's core calls [`Shard::call`] with the owning core of a partition; the call is a
//! direct function call when the owner is this core and a mesh round trip otherwise. Committed
//! metadata reaches every core as [`Request::ApplyMetadata`], applied in commit order, and the
//! controller answers its proposer only after every core has applied — so a client that saw
//! "topic created" finds it on whichever core its next connection lands.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::channel_mesh::{Receivers, Senders};
use glommio::channels::local_channel::{self, LocalSender};
use spool_protocol::metadata_records::{MetadataRecordBody, MetadataRecordT};
use spool_protocol::ErrorCode;
use spool_raft::MetadataImage;
use spool_storage::PartitionLog;

use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::group::driver::GroupDriver;
use crate::group::{CoordinatorConfig, OFFSETS_TOPIC};
use crate::mesh::{Message, Reply, Request};
use crate::metrics::CoreMetrics;
use crate::partition::{log_error_code, Partition};
use crate::requests::{FetchResult, ListOffsetsResult, ProduceResult, TopicPartition};
use crate::shard_map::ShardMap;
use crate::topic_config::log_config_for;

pub struct Shard {
    pub core: usize,
    pub config: Rc<BrokerConfig>,
    pub image: RefCell<MetadataImage>,
    pub shard_map: RefCell<ShardMap>,
    pub partitions: RefCell<HashMap<TopicPartition, Rc<Partition>>>,
    pub metrics: CoreMetrics,
    /// Core 0 only.
    pub controller: RefCell<Option<Rc<Controller>>>,
    /// The consumer groups whose `__consumer_offsets` partitions this core owns.
    pub groups: Rc<GroupDriver>,
    pub stopping: Cell<bool>,
    stop_waiters: RefCell<Vec<std::task::Waker>>,
    /// Set once the first committed metadata (the start-up image) has been applied.
    pub ready: Cell<bool>,
    ready_waiters: RefCell<Vec<std::task::Waker>>,
    /// This core's unused producer ids: [next, end).
    producer_ids: Cell<(i64, i64)>,
    senders: Senders<Message>,
    pending: RefCell<HashMap<u64, LocalSender<Reply>>>,
    next_id: Cell<u64>,
}

impl Shard {
    pub fn new(core: usize, config: Rc<BrokerConfig>, senders: Senders<Message>) -> Rc<Self> {
        let cores = config.cores;
        let groups = GroupDriver::new(
            CoordinatorConfig {
                offsets_partitions: config.offsets_topic_partitions,
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
            },
            core,
        );
        Rc::new(Self {
            core,
            config,
            image: RefCell::new(MetadataImage::new()),
            shard_map: RefCell::new(ShardMap::new(cores)),
            partitions: RefCell::new(HashMap::new()),
            metrics: CoreMetrics::new(core),
            controller: RefCell::new(None),
            groups,
            stopping: Cell::new(false),
            stop_waiters: RefCell::new(Vec::new()),
            ready: Cell::new(false),
            ready_waiters: RefCell::new(Vec::new()),
            producer_ids: Cell::new((0, 0)),
            senders,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
        })
    }

    /// Starts the shutdown of this core: listeners and connections stop taking requests.
    pub fn stop(&self) {
        self.stopping.set(true);
        for w in self.stop_waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves (to `None`) once [`Shard::stop`] was called.
    pub async fn stopped_signal<T>(&self) -> Option<T> {
        futures_lite::future::poll_fn(|cx| {
            if self.stopping.get() {
                std::task::Poll::Ready(None)
            } else {
                self.stop_waiters.borrow_mut().push(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await
    }

    /// Resolves once the start-up metadata has been applied on this core.
    pub async fn until_ready(&self) {
        futures_lite::future::poll_fn(|cx| {
            if self.ready.get() {
                std::task::Poll::Ready(())
            } else {
                self.ready_waiters.borrow_mut().push(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await
    }

    pub fn cores(&self) -> usize {
        self.config.cores
    }

    pub fn owner(&self, tp: &TopicPartition) -> Option<usize> {
        self.shard_map.borrow().owner(tp)
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(tp).cloned()
    }

    /// Sends `request` to `core` (or runs it here) and returns its reply.
    pub async fn call(self: &Rc<Self>, core: usize, request: Request) -> Reply {
        if core == self.core {
            return Box::pin(self.handle(request)).await;
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = local_channel::new_bounded(1);
        self.pending.borrow_mut().insert(id, tx);
        let sent = self
            .senders
            .send_to(
                core,
                Message::Request {
                    from: self.core,
                    id,
                    request,
                },
            )
            .await;
        if sent.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Reply::Failed(format!("core {core} is not reachable"));
        }
        match rx.recv().await {
            Some(reply) => reply,
            None => Reply::Failed(format!("core {core} dropped the request")),
        }
    }

    /// Runs `request` on every core (this one included) and collects the replies in core order.
    pub async fn broadcast(self: &Rc<Self>, make: impl Fn() -> Request) -> Vec<Reply> {
        let calls: Vec<_> = (0..self.cores())
            .map(|c| {
                let me = Rc::clone(self);
                let req = make();
                glommio::spawn_local(async move { me.call(c, req).await })
            })
            .collect();
        let mut out = Vec::with_capacity(calls.len());
        for c in calls {
            out.push(c.await);
        }
        out
    }

    /// Handles a request for a partition (or service) this core owns.
    pub async fn handle(self: &Rc<Self>, request: Request) -> Reply {
        match request {
            Request::Produce(p) => {
                let Some(part) = self.partition(&p.tp) else {
                    return Reply::Produce(ProduceResult::error(
                        ErrorCode::NotLeaderOrFollower,
                        format!("{} is not on this core", p.tp),
                    ));
                };
                let max = self.max_message_bytes(&p.tp.topic);
                Reply::Produce(part.produce(p.records, p.acks, max).await)
            }
            Request::Fetch(f) => match self.partition(&f.tp) {
                Some(part) => Reply::Fetch(part.fetch(f.fetch_offset, f.max_bytes).await),
                None => Reply::Fetch(FetchResult::error(ErrorCode::NotLeaderOrFollower)),
            },
            Request::ListOffsets(l) => match self.partition(&l.tp) {
                Some(part) => Reply::ListOffsets(part.list_offsets(l.timestamp).await),
                None => Reply::ListOffsets(ListOffsetsResult {
                    error: ErrorCode::NotLeaderOrFollower,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                }),
            },
            Request::Watch {
                partitions,
                timeout_ms,
            } => {
                self.watch(partitions, timeout_ms).await;
                Reply::Woken
            }
            Request::Controller(op) => {
                let controller = self.controller.borrow().clone();
                match controller {
                    Some(c) => Reply::Controller(c.execute(self, op).await),
                    None => Reply::Controller(Vec::new()),
                }
            }
            Request::ApplyMetadata(records) => {
                self.apply_metadata(&records).await;
                if !self.ready.replace(true) {
                    for w in self.ready_waiters.borrow_mut().drain(..) {
                        w.wake();
                    }
                }
                Reply::Woken
            }
            Request::AllocateProducerIds => {
                let controller = self.controller.borrow().clone();
                match controller {
                    Some(c) => Reply::ProducerIds(c.allocate_producer_ids(self).await),
                    None => Reply::ProducerIds(Err(ErrorCode::NotController)),
                }
            }
            Request::Metrics => Reply::Metrics(self.metrics_text()),
            Request::Group(call) => {
                let groups = Rc::clone(&self.groups);
                Reply::Group(groups.serve(self, call).await)
            }
        }
    }

    /// Waits until one of `partitions` has a high watermark past the given offset, one of them is
    /// gone, or `timeout_ms` passes.
    async fn watch(&self, partitions: Vec<(TopicPartition, i64)>, timeout_ms: u64) {
        let parts: Vec<(Option<Rc<Partition>>, i64)> = partitions
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
        let timer = glommio::timer::sleep(Duration::from_millis(timeout_ms));
        let stopped = async {
            let _: Option<()> = self.stopped_signal().await;
        };
        futures_lite::future::or(futures_lite::future::or(ready, timer), stopped).await;
    }

    fn max_message_bytes(&self, topic: &str) -> usize {
        let image = self.image.borrow();
        image
            .topic(topic)
            .and_then(|t| t.config_i64("max.message.bytes"))
            .map_or(self.config.max_message_bytes, |v| v.max(0) as usize)
    }

    /// Applies committed records to this core's image and opens or drops the partitions this core
    /// owns. Records were validated before they were committed; one this build cannot apply is
    /// logged and skipped (the controller's image is the authority).
    pub async fn apply_metadata(self: &Rc<Self>, records: &[Vec<u8>]) {
        for bytes in records {
            let record = match spool_protocol::metadata_log::decode(bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(
                        core = self.core,
                        "undecodable committed metadata record: {e}"
                    );
                    continue;
                }
            };
            let dropped = self.topic_being_deleted(&record);
            if let Err(code) = self.image.borrow_mut().apply(&record) {
                tracing::error!(
                    core = self.core,
                    ?code,
                    "could not apply a committed metadata record"
                );
                continue;
            }
            if let Some((name, partitions)) = dropped {
                for p in 0..partitions {
                    self.drop_partition(&TopicPartition::new(name.clone(), p))
                        .await;
                }
                // Committed offsets of a deleted topic go too (tombstones), off this path.
                let (me, groups) = (Rc::clone(self), Rc::clone(&self.groups));
                glommio::spawn_local(async move { groups.topic_deleted(&me, &name).await })
                    .detach();
            }
            self.open_assigned_partitions().await;
        }
    }

    /// For a DeleteTopic record: the topic's name and partition count before it goes.
    fn topic_being_deleted(&self, record: &MetadataRecordT) -> Option<(String, i32)> {
        if record.body.metadata_record_body_type() != MetadataRecordBody::DeleteTopic {
            return None;
        }
        let del = record.body.as_delete_topic()?;
        let image = self.image.borrow();
        let topic = image.topic(&del.name)?;
        Some((topic.name.clone(), topic.partitions.len() as i32))
    }

    /// Opens every partition of the image that this core owns and has not opened yet.
    async fn open_assigned_partitions(self: &Rc<Self>) {
        if let Some(n) = crate::ops::partition_count(self, OFFSETS_TOPIC) {
            self.groups.set_partition_count(n);
        }
        let wanted: Vec<(TopicPartition, i32, spool_storage::LogConfig)> = {
            let image = self.image.borrow();
            let mut map = self.shard_map.borrow_mut();
            let opened = self.partitions.borrow();
            let mut out = Vec::new();
            for topic in image.topics() {
                for (p, state) in topic.partitions.iter().enumerate() {
                    let tp = TopicPartition::new(topic.name.clone(), p as i32);
                    if map.assign(&tp) == self.core && !opened.contains_key(&tp) {
                        out.push((tp, state.leader_epoch, log_config_for(&self.config, topic)));
                    }
                }
            }
            out
        };
        // Groups of offsets partitions about to open wait (COORDINATOR_LOAD_IN_PROGRESS) rather
        // than being told this core is not their coordinator while the opens below run.
        for (tp, _, _) in &wanted {
            if tp.topic == OFFSETS_TOPIC {
                self.groups.expect_load(tp.partition);
            }
        }
        for (tp, epoch, log_config) in wanted {
            let dir = self.config.data_dir.join(tp.to_string());
            match PartitionLog::open(&dir, log_config).await {
                Ok((log, stats)) => {
                    tracing::debug!(core = self.core, %tp, ?stats, "opened partition");
                    let part = Partition::new(
                        tp.clone(),
                        log,
                        self.config.node_id,
                        epoch.max(0),
                        self.config.durability,
                        self.config.fetch_copy,
                    );
                    self.partitions
                        .borrow_mut()
                        .insert(tp.clone(), part.clone());
                    if tp.topic == OFFSETS_TOPIC {
                        self.groups.begin_load(self, part, tp.partition);
                    }
                }
                Err(e) => {
                    tracing::error!(core = self.core, %tp, code = ?log_error_code(&e), "cannot open partition: {e}");
                    if tp.topic == OFFSETS_TOPIC {
                        let groups = Rc::clone(&self.groups);
                        groups.unload(self, tp.partition).await;
                    }
                }
            }
        }
    }

    async fn drop_partition(self: &Rc<Self>, tp: &TopicPartition) {
        self.shard_map.borrow_mut().remove(tp);
        let part = self.partitions.borrow_mut().remove(tp);
        if tp.topic == OFFSETS_TOPIC {
            let groups = Rc::clone(&self.groups);
            groups.unload(self, tp.partition).await;
        }
        if let Some(part) = part {
            if let Err(e) = part.log.close().await {
                tracing::warn!(%tp, "closing a deleted partition: {e}");
            }
            let dir = part.log.dir().to_path_buf();
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(%tp, "removing {}: {e}", dir.display());
            }
        }
    }

    /// Accepts connections on `listener` until the shard stops, serving each on its own task.
    pub async fn accept_until_stopped<F, Fut>(
        self: &Rc<Self>,
        listener: &glommio::net::TcpListener,
        what: &str,
        serve: F,
    ) where
        F: Fn(Rc<Shard>, glommio::net::TcpStream) -> Fut,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        loop {
            let accepted = futures_lite::future::or(
                async { Some(listener.accept().await) },
                self.stopped_signal(),
            )
            .await;
            match accepted {
                None => break,
                Some(Ok(stream)) => {
                    glommio::spawn_local(serve(Rc::clone(self), stream)).detach();
                }
                Some(Err(e)) => tracing::warn!(core = self.core, "{what} accept: {e}"),
            }
        }
    }

    /// A fresh producer id for InitProducerId, from this core's block (refilled by the controller).
    pub async fn next_producer_id(self: &Rc<Self>) -> Result<i64, ErrorCode> {
        let (next, end) = self.producer_ids.get();
        if next < end {
            self.producer_ids.set((next + 1, end));
            return Ok(next);
        }
        match self.call(0, Request::AllocateProducerIds).await {
            Reply::ProducerIds(Ok((first, size))) if size > 0 => {
                self.producer_ids.set((first + 1, first + i64::from(size)));
                Ok(first)
            }
            Reply::ProducerIds(Err(code)) => Err(code),
            _ => Err(ErrorCode::CoordinatorNotAvailable),
        }
    }

    /// Dispatches what arrives from the other cores until they hang up.
    pub fn spawn_receivers(self: &Rc<Self>, mut receivers: Receivers<Message>) {
        for (_, stream) in receivers.streams() {
            let me = Rc::clone(self);
            glommio::spawn_local(async move {
                while let Some(msg) = stream.recv().await {
                    match msg {
                        Message::Request { from, id, request } => {
                            let me2 = Rc::clone(&me);
                            glommio::spawn_local(async move {
                                let reply = me2.handle(request).await;
                                let _ = me2
                                    .senders
                                    .send_to(from, Message::Reply { id, reply })
                                    .await;
                            })
                            .detach();
                        }
                        Message::Reply { id, reply } => {
                            let tx = me.pending.borrow_mut().remove(&id);
                            if let Some(tx) = tx {
                                let _ = tx.try_send(reply);
                            }
                        }
                    }
                }
            })
            .detach();
        }
    }

    /// Syncs every partition whose acknowledged-but-unsynced tail (acks=0) is not yet visible.
    pub async fn flush_partitions(&self) {
        let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for p in parts {
            if let Err(e) = p.sync().await {
                tracing::warn!(tp = %p.tp, "periodic flush: {e}");
            }
        }
    }

    /// Retention on every partition; compaction on `cleanup.policy=compact` ones.
    pub async fn enforce_retention(&self) {
        let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        let now = crate::partition::now_ms();
        for p in parts {
            if let Err(e) = p.log.enforce_retention(now).await {
                tracing::warn!(tp = %p.tp, "retention: {e}");
            }
            if p.log.config().cleanup_policy == spool_storage::CleanupPolicy::Compact {
                if let Err(e) = p.log.compact(now).await {
                    tracing::warn!(tp = %p.tp, "compaction: {e}");
                }
            }
        }
    }

    /// Closes every partition log cleanly (flush, index, clean marker).
    pub async fn close_partitions(&self) {
        let parts: Vec<Rc<Partition>> = self
            .partitions
            .borrow_mut()
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in parts {
            if let Err(e) = p.log.close().await {
                tracing::error!(tp = %p.tp, "clean close failed: {e}");
            }
        }
    }

    fn metrics_text(&self) -> String {
        let parts = self.partitions.borrow();
        let log_bytes: u64 = parts.values().map(|p| p.log.size_bytes()).sum();
        let mut text = self.metrics.render(parts.len(), log_bytes);
        text.push_str(&format!(
            "spool_consumer_groups{{core=\"{}\"}} {}\n",
            self.core,
            self.groups.group_count()
        ));
        text
    }
}
