//! What travels on the simulated network: raft messages between controller nodes, and the
//! broker and client requests the controller answers (registration, heartbeats, CreateTopics,
//! DeleteTopics).
//!
//! Owns: [`Endpoint`] (who can send and receive), [`Payload`] and its one-line description for
//! the trace.
//! Promises: a description names the kind and the fields that matter for reading a trace, and
//! is a pure function of the message (so it can be hashed).
//! Never does: route or deliver (that is [`crate::net`]).

use std::sync::Arc;

use raft::eraftpb::Message;
use spool_protocol::ErrorCode;
use spool_raft::validate::HeartbeatRequest;
use spool_raft::Uuid128;

use crate::metaview::MetaView;
use crate::repl_message::ReplMsg;

/// A network address in the simulated world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// A controller node, by raft id.
    Node(u64),
    /// A broker, by broker id.
    Broker(i32),
    /// The workload's admin client.
    Client,
    /// A producing client.
    Producer(u32),
    /// The reading client.
    Reader,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Node(id) => write!(f, "n{id}"),
            Endpoint::Broker(id) => write!(f, "b{id}"),
            Endpoint::Client => write!(f, "client"),
            Endpoint::Producer(id) => write!(f, "p{id}"),
            Endpoint::Reader => write!(f, "reader"),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Payload {
    Raft(Box<Message>),
    Register {
        broker_id: i32,
        incarnation_id: Uuid128,
        /// The broker epoch its data directory last recorded (-1: none, e.g. a wiped disk).
        previous_broker_epoch: i64,
    },
    /// `leader_hint`: the raft leader as the answering node knows it (0: unknown).
    RegisterAnswer {
        error: ErrorCode,
        broker_epoch: i64,
        leader_hint: u64,
        /// The registering incarnation: a broker restarted since must not take the answer for
        /// itself (a real one gets it on its own connection).
        incarnation_id: Uuid128,
    },
    Heartbeat(HeartbeatRequest),
    /// `metadata_offset`: the answering controller's applied index (what the broker has now
    /// "fetched" of the metadata log).
    HeartbeatAnswer {
        broker_epoch: i64,
        error: ErrorCode,
        fenced: bool,
        metadata_offset: i64,
        leader_hint: u64,
        /// The answering node's applied image, as the broker's metadata (none on a refusal).
        metadata: Option<Arc<MetaView>>,
    },
    CreateTopic {
        request_id: u64,
        name: String,
        partitions: i32,
        replication_factor: i16,
    },
    DeleteTopic {
        request_id: u64,
        name: String,
    },
    AdminAnswer {
        request_id: u64,
        error: ErrorCode,
        leader_hint: u64,
    },
    /// Replication and client traffic ([`crate::repl_message`]).
    Repl(Box<ReplMsg>),
}

/// One message in flight.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub from: Endpoint,
    pub to: Endpoint,
    pub payload: Payload,
}

impl Envelope {
    pub fn new(from: Endpoint, to: Endpoint, payload: Payload) -> Self {
        Envelope { from, to, payload }
    }

    /// `from->to kind fields`, for the trace.
    pub fn describe(&self) -> String {
        format!("{}->{} {}", self.from, self.to, self.payload.describe())
    }
}

impl Payload {
    pub fn describe(&self) -> String {
        match self {
            Payload::Raft(m) => format!(
                "{:?} term={} log_term={} index={} commit={} entries={} reject={}{}",
                m.get_msg_type(),
                m.term,
                m.log_term,
                m.index,
                m.commit,
                m.entries.len(),
                m.reject,
                if m.has_snapshot() && m.get_snapshot().get_metadata().index > 0 {
                    format!(" snapshot@{}", m.get_snapshot().get_metadata().index)
                } else {
                    String::new()
                }
            ),
            Payload::Register {
                broker_id,
                incarnation_id,
                previous_broker_epoch,
            } => format!(
                "Register broker={broker_id} previous_epoch={previous_broker_epoch} incarnation={:x}",
                incarnation_id.low
            ),
            Payload::RegisterAnswer {
                error,
                broker_epoch,
                leader_hint,
                incarnation_id,
            } => format!(
                "RegisterAnswer {error:?} epoch={broker_epoch} leader={leader_hint} incarnation={:x}",
                incarnation_id.low
            ),
            Payload::Heartbeat(h) => format!(
                "Heartbeat broker={} epoch={} offset={}",
                h.broker_id, h.broker_epoch, h.current_metadata_offset
            ),
            Payload::HeartbeatAnswer {
                broker_epoch,
                error,
                fenced,
                metadata_offset,
                leader_hint,
                ..
            } => format!(
                "HeartbeatAnswer epoch={broker_epoch} {error:?} fenced={fenced} \
                 offset={metadata_offset} leader={leader_hint}"
            ),
            Payload::CreateTopic {
                request_id,
                name,
                partitions,
                replication_factor,
            } => format!(
                "CreateTopic #{request_id} {name} partitions={partitions} rf={replication_factor}"
            ),
            Payload::DeleteTopic { request_id, name } => {
                format!("DeleteTopic #{request_id} {name}")
            }
            Payload::AdminAnswer {
                request_id,
                error,
                leader_hint,
            } => format!("AdminAnswer #{request_id} {error:?} leader={leader_hint}"),
            Payload::Repl(m) => m.describe(),
        }
    }
}
