//! What cores say to each other over the glommio channel mesh (DESIGN §4), and the small
//! request/reply layer on top: a core sends a request tagged with an id and awaits the reply the
//! owner sends back. Messages are `Send` and own their data; channels are bounded (1024, DESIGN
//! §12), so a slow core back-pressures its senders.

use crate::requests::{
    FetchPartition, FetchResult, ListOffsetsPartition, ListOffsetsResult, ProducePartition,
    ProduceResult, TopicPartition,
};
use spool_protocol::ErrorCode;

/// Channel capacity between two cores.
pub const MESH_CHANNEL_CAPACITY: usize = 1024;

/// A topic to create, as the controller sees it.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Metadata changes, proposed to the controller on core 0.
#[derive(Debug, Clone)]
pub enum ControllerOp {
    CreateTopics {
        topics: Vec<NewTopic>,
        validate_only: bool,
    },
    DeleteTopics {
        names: Vec<String>,
    },
}

/// Per-topic outcome of a controller op, in request order.
#[derive(Debug, Clone)]
pub struct TopicOutcome {
    pub name: String,
    pub error: ErrorCode,
    pub message: Option<String>,
}

#[derive(Debug)]
pub enum Request {
    Produce(ProducePartition),
    Fetch(FetchPartition),
    ListOffsets(ListOffsetsPartition),
    /// Reply once any of these partitions' high watermark passes the given offset (or it is
    /// gone), or after `timeout_ms`.
    Watch {
        partitions: Vec<(TopicPartition, i64)>,
        timeout_ms: u64,
    },
    Controller(ControllerOp),
    /// Committed metadata records (encoded `MetadataRecord`s) in commit order, from core 0.
    ApplyMetadata(Vec<Vec<u8>>),
    /// A block of producer ids for the asking core (core 0 only).
    AllocateProducerIds,
    /// Per-core metrics, as Prometheus text lines.
    Metrics,
    /// A consumer-group request for the coordinator on this core.
    Group(crate::group::GroupCall),
}

#[derive(Debug)]
pub enum Reply {
    Produce(ProduceResult),
    Fetch(FetchResult),
    ListOffsets(ListOffsetsResult),
    Woken,
    Controller(Vec<TopicOutcome>),
    Metrics(String),
    /// (first producer id, block size), or why not.
    ProducerIds(Result<(i64, i32), ErrorCode>),
    /// The request never reached its core (it is shutting down).
    Failed(String),
    Group(crate::group::GroupAnswer),
}

#[derive(Debug)]
pub enum Message {
    Request {
        from: usize,
        id: u64,
        request: Request,
    },
    Reply {
        id: u64,
        reply: Reply,
    },
}
