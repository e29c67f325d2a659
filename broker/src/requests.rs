//! The broker's internal requests and results: what both fronts (native flatbuffers, and later the
//! Kafka wire protocol) translate into, and what crosses the core mesh.
//!
//! Everything here is `Send` (it travels between executors) and owns its data: record bytes as
//! `Bytes`, file ranges as a duplicated descriptor, so a core never lends another its `Rc`s.

use std::os::fd::OwnedFd;

use bytes::Bytes;
use spool_protocol::ErrorCode;

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One partition's share of a produce request.
#[derive(Debug, Clone)]
pub struct ProducePartition {
    pub tp: TopicPartition,
    /// Whole RecordBatch v2 batches, as the client sent them.
    pub records: Bytes,
    /// 0, 1 or -1 (all).
    pub acks: i16,
    pub timeout_ms: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResult {
    pub error: ErrorCode,
    pub base_offset: i64,
    pub log_start_offset: i64,
    pub message: Option<String>,
}

impl ProduceResult {
    pub fn error(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            base_offset: -1,
            log_start_offset: -1,
            message: Some(message.into()),
        }
    }
}

/// One partition's share of a fetch.
#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub tp: TopicPartition,
    pub fetch_offset: i64,
    pub max_bytes: i32,
}

/// Bytes of a fetch answer: in memory, or a range of a segment file to splice from.
#[derive(Debug)]
pub enum FetchChunk {
    Memory(Bytes),
    File {
        fd: OwnedFd,
        position: u64,
        len: u64,
    },
}

impl FetchChunk {
    pub fn len(&self) -> u64 {
        match self {
            FetchChunk::Memory(b) => b.len() as u64,
            FetchChunk::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
pub struct FetchResult {
    pub error: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub chunks: Vec<FetchChunk>,
}

impl FetchResult {
    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            high_watermark: -1,
            log_start_offset: -1,
            chunks: Vec::new(),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(FetchChunk::len).sum()
    }
}

/// ListOffsets: -2 earliest, -1 latest, otherwise a timestamp in ms.
#[derive(Debug, Clone)]
pub struct ListOffsetsPartition {
    pub tp: TopicPartition,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsResult {
    pub error: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;
