//! Outgoing connections to the other brokers' internal ports (DESIGN §7): one connection per
//! peer, opened on first use and reopened after a failure, carrying raft messages (fire and
//! forget: raft retransmits what is lost) and calls — to the active controller (registration,
//! heartbeats, forwarded metadata changes), from core 0 — and followers' fetches to partition
//! leaders, from every core (each core has its own `Peers` for those: one fetch session per
//! leader, follower and core). Answers come back on the same connection matched by correlation
//! id, with their frame's payload.
//!
//! Voters' addresses come from `--controller-voters`; a learner's (a broker that follows the
//! metadata log without voting) from its registration, as the controller driver learns it.
//!
//! Bounded: each peer has a queue of [`PEER_QUEUE_FRAMES`] frames; when it is full a raft message
//! is dropped (raft sends it again) and a call fails at once. A call waits at most its timeout,
//! and fails at once when its connection ends, whichever side ends it ([`PeerError::Closed`]).
//! Nothing here decides anything: the controller driver chooses whom to tell what.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures_lite::AsyncWriteExt;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use spool_protocol::frame::{self, FrameLimits};
use spool_protocol::internal::{self, InternalFrame, InternalMessage};

use crate::cluster_config::Voter;
use crate::net_io::{self, Half};

/// Frames queued for one peer before new ones are refused.
pub const PEER_QUEUE_FRAMES: usize = 1024;
/// Calls waiting for an answer from one peer.
pub const PEER_CALLS_IN_FLIGHT_MAX: usize = 256;
/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// Wait after a failed connection before the next attempt.
pub const RECONNECT_BACKOFF_MS: u64 = 100;
/// Largest internal frame accepted (a raft snapshot of the metadata image travels in one).
pub const INTERNAL_MAX_FRAME_BYTES: usize = 64 << 20;

/// Frame limits of the internal port.
pub fn internal_limits() -> FrameLimits {
    FrameLimits {
        max_frame_bytes: INTERNAL_MAX_FRAME_BYTES,
        max_header_bytes: INTERNAL_MAX_FRAME_BYTES,
    }
}

/// Why a call to a peer got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    #[error("node {0} is not a known peer")]
    Unknown(i32),
    #[error("node {0}: too many frames queued")]
    Busy(i32),
    #[error("node {0} did not answer in time")]
    TimedOut(i32),
    #[error("node {0}: the connection closed before the answer")]
    Closed(i32),
    #[error("encoding a frame: {0}")]
    Encode(String),
}

/// An answer and its frame's payload (a replica fetch answer's records; empty otherwise).
type Answer = (InternalMessage, Bytes);

type Waiting = RefCell<HashMap<i32, LocalSender<Answer>>>;

struct Peer {
    queue: LocalSender<Bytes>,
    /// Answers awaited on this peer's connection, by correlation id.
    waiting: Rc<Waiting>,
}

pub struct Peers {
    me: i32,
    peers: RefCell<HashMap<i32, Peer>>,
    /// The voters' ids, from `--controller-voters`, ascending.
    voter_ids: Vec<i32>,
    /// Where each node's internal port is: the voters from `--controller-voters`, learners from
    /// their registrations in the metadata image.
    addresses: RefCell<HashMap<i32, Voter>>,
    /// This node's cluster id as every frame carries it (empty until the image has one).
    cluster_id: RefCell<String>,
    next_correlation_id: Cell<i32>,
    /// The address connections are made from (`crate::peer_connect`).
    source: Option<IpAddr>,
}

impl Peers {
    /// Peers of node `me` among `voters` (connections open lazily, from `source`).
    pub fn new(me: i32, voters: Vec<Voter>, source: Option<IpAddr>) -> Rc<Self> {
        let mut voter_ids: Vec<i32> = voters.iter().map(|v| v.node_id).collect();
        voter_ids.sort_unstable();
        Rc::new(Self {
            me,
            peers: RefCell::new(HashMap::new()),
            voter_ids,
            addresses: RefCell::new(voters.into_iter().map(|v| (v.node_id, v)).collect()),
            cluster_id: RefCell::new(String::new()),
            next_correlation_id: Cell::new(1),
            source,
        })
    }

    pub fn me(&self) -> i32 {
        self.me
    }

    /// The controller voters' node ids, ascending.
    pub fn voter_ids(&self) -> &[i32] {
        &self.voter_ids
    }

    /// Learns (or updates) where a non-voter listens for raft messages. Voters' addresses are
    /// fixed by `--controller-voters` and never change here. A changed address drops the old
    /// connection (its task ends when its queue closes).
    pub fn set_address(&self, node: i32, host: &str, port: u16) {
        if node == self.me || self.voter_ids.contains(&node) {
            return;
        }
        let fresh = Voter {
            node_id: node,
            host: host.to_string(),
            port,
        };
        let changed = self.addresses.borrow_mut().insert(node, fresh.clone()) != Some(fresh);
        if changed {
            self.peers.borrow_mut().remove(&node);
        }
    }

    /// The cluster id every frame from here carries (set once the image has one).
    /// Learns every broker's internal listener and the cluster id from the committed image.
    pub fn learn_addresses(&self, image: &spool_raft::MetadataImage) {
        for b in image.brokers() {
            if let Some(l) = b.listeners.iter().find(|l| l.name == "internal") {
                self.set_address(b.broker_id, &l.host, l.port);
            }
        }
        if let Some(id) = image.cluster_id() {
            self.set_cluster_id(&id.to_hex());
        }
    }

    pub fn set_cluster_id(&self, cluster_id: &str) {
        if *self.cluster_id.borrow() != cluster_id {
            *self.cluster_id.borrow_mut() = cluster_id.to_string();
        }
    }

    fn frame(&self, correlation_id: i32, message: InternalMessage) -> InternalFrame {
        InternalFrame {
            from_node: self.me,
            correlation_id,
            message,
            cluster_id: self.cluster_id.borrow().clone(),
        }
    }

    /// Sends raft messages to `node` without waiting; dropped when its queue is full.
    pub fn send_raft(&self, node: i32, messages: Vec<Vec<u8>>) {
        let frame = self.frame(0, InternalMessage::Raft(messages));
        match internal::encode(&frame) {
            Ok(bytes) => {
                if let Err(e) = self.enqueue(node, bytes) {
                    tracing::debug!(node, "raft message dropped: {e}");
                }
            }
            Err(e) => tracing::error!(node, "encoding raft messages: {e}"),
        }
    }

    /// Sends `message` to `node` and waits up to `timeout_ms` for its answer.
    pub async fn call(
        &self,
        node: i32,
        message: InternalMessage,
        timeout_ms: u64,
    ) -> Result<InternalMessage, PeerError> {
        self.call_with_payload(node, message, timeout_ms)
            .await
            .map(|(m, _)| m)
    }

    /// [`Peers::call`], returning the answer's payload too (a follower's fetch: the records).
    pub async fn call_with_payload(
        &self,
        node: i32,
        message: InternalMessage,
        timeout_ms: u64,
    ) -> Result<Answer, PeerError> {
        let correlation_id = self.next_correlation_id.get();
        self.next_correlation_id
            .set(correlation_id.checked_add(1).unwrap_or(1));
        let frame = self.frame(correlation_id, message);
        let bytes = internal::encode(&frame).map_err(|e| PeerError::Encode(e.to_string()))?;
        self.ensure(node)?;
        let waiting = match self.peers.borrow().get(&node) {
            Some(p) => Rc::clone(&p.waiting),
            None => return Err(PeerError::Unknown(node)),
        };
        if waiting.borrow().len() >= PEER_CALLS_IN_FLIGHT_MAX {
            return Err(PeerError::Busy(node));
        }
        let (tx, rx) = local_channel::new_bounded(1);
        waiting.borrow_mut().insert(correlation_id, tx);
        if let Err(e) = self.enqueue(node, bytes) {
            waiting.borrow_mut().remove(&correlation_id);
            return Err(e);
        }
        let answer = futures_lite::future::or(
            async { rx.recv().await.ok_or(PeerError::Closed(node)) },
            async {
                glommio::timer::sleep(Duration::from_millis(timeout_ms)).await;
                Err(PeerError::TimedOut(node))
            },
        )
        .await;
        waiting.borrow_mut().remove(&correlation_id);
        answer
    }

    fn enqueue(&self, node: i32, bytes: Bytes) -> Result<(), PeerError> {
        self.ensure(node)?;
        let peers = self.peers.borrow();
        let peer = peers.get(&node).ok_or(PeerError::Unknown(node))?;
        peer.queue
            .try_send(bytes)
            .map_err(|_| PeerError::Busy(node))
    }

    /// Starts the connection task of `node` if it has none.
    fn ensure(&self, node: i32) -> Result<(), PeerError> {
        if self.peers.borrow().contains_key(&node) {
            return Ok(());
        }
        let voter = self
            .addresses
            .borrow()
            .get(&node)
            .filter(|_| node != self.me)
            .ok_or(PeerError::Unknown(node))?
            .clone();
        let (tx, rx) = local_channel::new_bounded(PEER_QUEUE_FRAMES);
        let waiting: Rc<Waiting> = Rc::new(RefCell::new(HashMap::new()));
        glommio::spawn_local(run_connection(voter, self.source, rx, Rc::clone(&waiting))).detach();
        self.peers
            .borrow_mut()
            .insert(node, Peer { queue: tx, waiting });
        Ok(())
    }
}

/// Keeps one peer connected and writes its queue; answers read back go to their callers. Ends
/// when the queue's sender is dropped (the broker stops).
async fn run_connection(
    voter: Voter,
    source: Option<IpAddr>,
    queue: LocalReceiver<Bytes>,
    waiting: Rc<Waiting>,
) {
    let addr = format!("{}:{}", voter.host, voter.port);
    let mut pending: Option<Bytes> = None;
    loop {
        let stream = match crate::peer_connect::connect_from(
            source,
            &voter.host,
            voter.port,
            Duration::from_millis(CONNECT_TIMEOUT_MS),
        )
        .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(node = voter.node_id, %addr, "connecting: {e}");
                // Waiting callers fail fast rather than time out on a peer that is down.
                waiting.borrow_mut().clear();
                glommio::timer::sleep(Duration::from_millis(RECONNECT_BACKOFF_MS)).await;
                // What queued meanwhile is stale for raft; calls were failed above.
                while let Some(Some(_)) = futures_lite::future::poll_once(queue.recv()).await {}
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (reader, mut writer, _) = net_io::split(stream);
        let read_answers = spawn_reader(reader, Rc::clone(&waiting), voter.node_id);
        // The connection ends when either side does. A peer killed or closed shows on the read
        // side first (EOF, a reset), while the writer may sit idle on an empty queue: the
        // calls waiting for answers then fail now, instead of each waiting out its timeout (a
        // transaction's markers waited 10 s for a killed leader's answer).
        let wrote =
            futures_lite::future::or(write_queue(&mut writer, &queue, &mut pending), async {
                read_answers.await;
                WriteEnd::Failed("the read side ended (the peer closed or reset it)".into())
            })
            .await;
        // (The reader task, if still running, was cancelled with its future above.)
        waiting.borrow_mut().clear();
        match wrote {
            WriteEnd::QueueClosed => return,
            WriteEnd::Failed(e) => {
                tracing::debug!(node = voter.node_id, %addr, "connection lost: {e}");
                glommio::timer::sleep(Duration::from_millis(RECONNECT_BACKOFF_MS)).await;
            }
        }
    }
}

enum WriteEnd {
    QueueClosed,
    Failed(String),
}

async fn write_queue(
    writer: &mut Half,
    queue: &LocalReceiver<Bytes>,
    pending: &mut Option<Bytes>,
) -> WriteEnd {
    loop {
        let bytes = match pending.take() {
            Some(b) => b,
            None => match queue.recv().await {
                Some(b) => b,
                None => return WriteEnd::QueueClosed,
            },
        };
        if let Err(e) = writer.write_all(&bytes).await {
            return WriteEnd::Failed(e.to_string());
        }
        if let Err(e) = writer.flush().await {
            return WriteEnd::Failed(e.to_string());
        }
    }
}

/// Reads answers off the connection until it fails; the task is cancelled when dropped.
fn spawn_reader(mut reader: Half, waiting: Rc<Waiting>, node: i32) -> glommio::Task<()> {
    glommio::spawn_local(async move {
        let limits = internal_limits();
        loop {
            let frame = match crate::frame_io::read_frame(&mut reader, |p| {
                frame::frame_bytes_from_prefix(p, &limits)
            })
            .await
            {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(node, "reading from a peer: {e}");
                    return;
                }
            };
            match internal::decode_with_payload(&frame, &limits) {
                Ok((f, payload)) => {
                    let tx = waiting.borrow_mut().remove(&f.correlation_id);
                    if let Some(tx) = tx {
                        let _ = tx.try_send((f.message, payload));
                    }
                }
                Err(e) => {
                    tracing::warn!(node, "an undecodable frame from a peer: {e}");
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod peers_tests;
