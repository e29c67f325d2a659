//! What one core holds (shared-nothing, DESIGN §4): its copy of the metadata image, the
//! partitions it owns, its metrics, and its lifecycle (stopping, ready). Data and lookups only:
//! no routing (that is [`crate::router`]) and no services (those are the drivers and
//! [`crate::shard::Shard`], the composition root). Everything in it belongs to this core's
//! executor: `Rc`/`RefCell`, no locks, and no borrow is held across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::task::{Poll, Waker};

use spool_core::topic_config::ResolvedTopicConfig;
use spool_raft::MetadataImage;

use crate::config::BrokerConfig;
use crate::metrics::CoreMetrics;
use crate::partition::Partition;
use crate::requests::TopicPartition;

/// The replicas of a partition whose broker is not alive (fenced, or not registered): Metadata's
/// `offline_replicas`.
pub fn offline_replicas(image: &MetadataImage, replicas: &[i32]) -> Vec<i32> {
    replicas
        .iter()
        .copied()
        .filter(|r| image.broker(*r).is_none_or(|b| b.fenced))
        .collect()
}

/// A partition's error in Metadata: LEADER_NOT_AVAILABLE while it has no leader (an election is
/// due or no ISR member is alive), as Kafka answers; clients retry.
pub fn partition_error(leader: i32) -> spool_protocol::ErrorCode {
    if leader < 0 {
        spool_protocol::ErrorCode::LeaderNotAvailable
    } else {
        spool_protocol::ErrorCode::None
    }
}

/// Where a broker listens, as Metadata tells clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

pub struct Local {
    pub core: usize,
    pub config: Rc<BrokerConfig>,
    /// This core's copy of the committed metadata image (applied in commit order).
    pub image: RefCell<MetadataImage>,
    /// The partitions this core owns and has opened.
    pub partitions: RefCell<HashMap<TopicPartition, Rc<Partition>>>,
    pub metrics: CoreMetrics,
    pub stopping: Cell<bool>,
    stop_waiters: RefCell<Vec<Waker>>,
    /// Set once the first committed metadata (the start-up image) has been applied.
    ready: Cell<bool>,
    ready_waiters: RefCell<Vec<Waker>>,
}

impl Local {
    pub fn new(core: usize, config: Rc<BrokerConfig>) -> Self {
        Self {
            core,
            config,
            image: RefCell::new(MetadataImage::new()),
            partitions: RefCell::new(HashMap::new()),
            metrics: CoreMetrics::new(core),
            stopping: Cell::new(false),
            stop_waiters: RefCell::new(Vec::new()),
            ready: Cell::new(false),
            ready_waiters: RefCell::new(Vec::new()),
        }
    }

    pub fn cores(&self) -> usize {
        self.config.cores
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Rc<Partition>> {
        self.partitions.borrow().get(tp).cloned()
    }

    /// Partitions of `topic` in this core's metadata image.
    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        self.image
            .borrow()
            .topic(topic)
            .map(|t| t.partitions.len() as i32)
    }

    /// The live (registered, unfenced) brokers with where their `listener` (`native` or `kafka`)
    /// is, ascending by id; this broker is always among them (before its registration is
    /// committed it is listed from its own config).
    /// The cluster's id as clients and peers see it (32 hex digits), once the controller has
    /// written one.
    pub fn cluster_id(&self) -> Option<String> {
        self.image.borrow().cluster_id().map(|id| id.to_hex())
    }

    pub fn brokers(&self, listener: &str) -> Vec<BrokerAddress> {
        let image = self.image.borrow();
        let mut out: Vec<BrokerAddress> = image
            .brokers()
            .filter(|b| !b.fenced || b.broker_id == self.config.node_id)
            .filter_map(|b| {
                let l = b.listeners.iter().find(|l| l.name == listener)?;
                Some(BrokerAddress {
                    node_id: b.broker_id,
                    host: l.host.clone(),
                    port: l.port,
                    rack: b.rack.clone(),
                })
            })
            .collect();
        if !out.iter().any(|b| b.node_id == self.config.node_id) {
            let cfg = &self.config;
            let (host, port) = match listener {
                "kafka" => (cfg.advertised_host.clone(), cfg.advertised_kafka_port),
                _ => (cfg.host.clone(), cfg.native_port),
            };
            out.push(BrokerAddress {
                node_id: cfg.node_id,
                host,
                port,
                rack: cfg.rack.clone(),
            });
        }
        out.sort_by_key(|b| b.node_id);
        out
    }

    /// Why this broker may not serve `tp` as its leader (`None`: it leads it).
    pub fn not_leader(&self, tp: &TopicPartition) -> Option<spool_protocol::ErrorCode> {
        let image = self.image.borrow();
        let p = image
            .topic(&tp.topic)
            .and_then(|t| t.partitions.get(usize::try_from(tp.partition).ok()?))?;
        (p.leader != self.config.node_id).then_some(spool_protocol::ErrorCode::NotLeaderOrFollower)
    }

    /// `topic`'s effective configuration (its typed config over the broker's defaults).
    pub fn topic_config(&self, topic: &str) -> Option<ResolvedTopicConfig> {
        self.image
            .borrow()
            .topic(topic)
            .map(|t| crate::topic_config::resolved(&self.config, t))
    }

    /// Starts the shutdown of this core: listeners and connections stop taking requests.
    pub fn stop(&self) {
        self.stopping.set(true);
        for w in self.stop_waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves (to `None`) once [`Local::stop`] was called.
    pub async fn stopped_signal<T>(&self) -> Option<T> {
        futures_lite::future::poll_fn(|cx| {
            if self.stopping.get() {
                Poll::Ready(None)
            } else {
                register(&self.stop_waiters, cx.waker());
                Poll::Pending
            }
        })
        .await
    }

    /// Sleeps `ms` unless the core starts stopping first: whether it did (a ticker's wait).
    pub async fn sleep_unless_stopped(&self, ms: u64) -> bool {
        futures_lite::future::or(
            async {
                glommio::timer::sleep(std::time::Duration::from_millis(ms)).await;
                false
            },
            async {
                let _: Option<()> = self.stopped_signal().await;
                true
            },
        )
        .await
    }

    /// The start-up image has been applied here.
    pub fn mark_ready(&self) {
        if !self.ready.replace(true) {
            for w in self.ready_waiters.borrow_mut().drain(..) {
                w.wake();
            }
        }
    }

    /// Resolves once the start-up metadata has been applied on this core.
    pub async fn until_ready(&self) {
        futures_lite::future::poll_fn(|cx| {
            if self.ready.get() {
                Poll::Ready(())
            } else {
                register(&self.ready_waiters, cx.waker());
                Poll::Pending
            }
        })
        .await
    }
}

/// Wakers kept per signal. Every connection's loop waits on the stop signal once per request, and
/// a task that ends leaves its waker behind, so the list is bounded: a task already listed is not
/// listed again, and past this many everyone is woken and the list starts afresh (a spurious wake
/// only makes a waiter look again and re-register).
const SIGNAL_WAITERS_MAX: usize = 4096;

fn register(waiters: &RefCell<Vec<Waker>>, waker: &Waker) {
    let mut w = waiters.borrow_mut();
    if w.iter().any(|x| x.will_wake(waker)) {
        return;
    }
    if w.len() >= SIGNAL_WAITERS_MAX {
        for x in w.drain(..) {
            x.wake();
        }
    }
    w.push(waker.clone());
}
