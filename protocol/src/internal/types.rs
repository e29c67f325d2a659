//! The internal protocol's messages as plain Rust values (see the module above for the framing).
//! Every message carries the sender's node id; a request carries a correlation id that its answer
//! repeats (the codec puts both in the frame header).

use crate::ErrorCode;

/// One frame of the internal protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalFrame {
    /// The sending broker's node id.
    pub from_node: i32,
    /// Chosen by the requester; an answer repeats its request's. Raft messages use 0.
    pub correlation_id: i32,
    pub message: InternalMessage,
    /// The sender's cluster id; empty while it knows none yet (a fresh data directory).
    pub cluster_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InternalMessage {
    /// raft-rs messages (`eraftpb::Message`, protobuf-encoded), in the order raft produced them.
    /// No answer: raft retries on its own.
    Raft(Vec<Vec<u8>>),
    RegisterBroker(RegisterBroker),
    RegisterBrokerAnswer(RegisterBrokerAnswer),
    Heartbeat(Heartbeat),
    HeartbeatAnswer(HeartbeatAnswer),
    /// A metadata change a broker forwards to the active controller (KIP-590's forwarding).
    Forward(ForwardOp),
    ForwardAnswer(ForwardAnswer),
}

/// A listener a broker advertises (`name` is `native` or `kafka`, or `internal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A broker announcing itself to the active controller at start-up (Kafka's BrokerRegistration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker {
    pub broker_id: i32,
    /// A fresh id per process start: the controller tells a restart from a broker that never
    /// went away by it.
    pub incarnation_high: u64,
    pub incarnation_low: u64,
    pub listeners: Vec<Listener>,
    pub rack: Option<String>,
    /// The broker epoch it had before this start (-1: none, or it did not shut down cleanly).
    pub previous_broker_epoch: i64,
    /// The cluster the broker's data directory belongs to: a broker of another cluster is refused.
    pub cluster_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerAnswer {
    pub error: ErrorCode,
    pub message: Option<String>,
    /// The epoch the controller gave this registration (valid when `error` is NONE).
    pub broker_epoch: i64,
}

/// A broker's heartbeat to the active controller (Kafka's BrokerHeartbeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The last metadata offset (raft index) this broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub error: ErrorCode,
    pub is_fenced: bool,
    pub should_shutdown: bool,
}

/// A topic to create, as forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardOp {
    CreateTopics {
        topics: Vec<ForwardTopic>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
}

/// One topic's outcome of a forwarded create or delete, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardTopicOutcome {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardAnswer {
    Topics(Vec<ForwardTopicOutcome>),
    /// (first producer id, block size), or why not.
    ProducerIds(Result<(i64, i32), ErrorCode>),
    /// The receiver is not the active controller (the sender refreshes and retries).
    NotController,
}
