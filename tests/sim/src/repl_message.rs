//! What replication puts on the simulated network: follower fetches (one session per
//! follower/leader pair, many partitions in it), AlterPartition to the controller, and the
//! clients' produce and read requests — each with its answer.
//!
//! Owns: [`ReplMsg`] and its one-line description for the trace.
//! Promises: the fields are the ones the real requests carry (REPLICATION.md "Follower fetch",
//! "acks"); a description is a pure function of the message.
//! Never does: route, deliver or decide.

use spool_core::ack_wait::Acks;
use spool_core::epoch_cache::EpochEndOffset;
use spool_core::follower_fetch::{FetchRefusal, FollowerFetch};
use spool_core::isr_change::{AlterPartitionAnswer, AlterPartitionRequest};
use spool_protocol::ErrorCode;

use crate::metaview::PartKey;
use crate::plog::SimBatch;

/// The leader's answer for one partition of a fetch.
#[derive(Debug, Clone)]
pub enum PartAnswer {
    Read {
        batches: Vec<SimBatch>,
        high_watermark: u64,
    },
    Diverging(EpochEndOffset),
    Refused {
        refusal: FetchRefusal,
        log_start_offset: u64,
        log_end_offset: u64,
    },
}

/// A batch a producer sends (the leader assigns offsets and its epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducedBatch {
    pub id: u64,
    pub records: u64,
    pub producer: Option<(i64, i16, i32)>,
}

#[derive(Debug, Clone)]
pub enum ReplMsg {
    Fetch {
        session: u64,
        parts: Vec<(PartKey, FollowerFetch)>,
    },
    FetchAnswer {
        session: u64,
        parts: Vec<(PartKey, i32, PartAnswer)>,
    },
    AlterPartition {
        key: PartKey,
        request: AlterPartitionRequest,
    },
    AlterPartitionAnswer {
        key: PartKey,
        leader_epoch: i32,
        /// The answered request's partition epoch (`isr_change::answers_pending`).
        partition_epoch: i32,
        answer: AlterPartitionAnswer,
    },
    Produce {
        request_id: u64,
        key: PartKey,
        acks: Acks,
        batch: ProducedBatch,
    },
    ProduceAnswer {
        request_id: u64,
        error: ErrorCode,
        base_offset: u64,
    },
    Read {
        request_id: u64,
        key: PartKey,
        offset: u64,
    },
    ReadAnswer {
        request_id: u64,
        key: PartKey,
        error: ErrorCode,
        batches: Vec<SimBatch>,
    },
}

impl ReplMsg {
    pub fn describe(&self) -> String {
        match self {
            ReplMsg::Fetch { session, parts } => {
                // Long sessions: the offsets' sum stands in for the list (still a pure function).
                let sum: u64 = parts.iter().map(|(_, f)| f.fetch_offset).sum();
                format!("Fetch #{session} parts={} offsets={sum}", parts.len())
            }
            ReplMsg::FetchAnswer { session, parts } => {
                // Only the partitions that got something or were refused, to keep lines short.
                let p: Vec<String> = parts
                    .iter()
                    .filter_map(|(k, e, a)| match a {
                        PartAnswer::Read { batches, .. } if batches.is_empty() => None,
                        PartAnswer::Read {
                            batches,
                            high_watermark,
                        } => Some(format!("{k}e{e}:{}b hw={high_watermark}", batches.len())),
                        PartAnswer::Diverging(d) => {
                            Some(format!("{k}e{e}:diverging {}@{}", d.epoch, d.end_offset))
                        }
                        PartAnswer::Refused { refusal, .. } => {
                            Some(format!("{k}e{e}:{:?}", refusal.error_code()))
                        }
                    })
                    .collect();
                format!(
                    "FetchAnswer #{session} parts={} {}",
                    parts.len(),
                    p.join(" ")
                )
            }
            ReplMsg::AlterPartition { key, request } => format!(
                "AlterPartition {key} le={} pe={} isr={:?}",
                request.leader_epoch,
                request.partition_epoch,
                request.isr()
            ),
            ReplMsg::AlterPartitionAnswer {
                key,
                leader_epoch,
                partition_epoch,
                answer,
            } => format!(
                "AlterPartitionAnswer {key} le={leader_epoch} pe={partition_epoch} {answer:?}"
            ),
            ReplMsg::Produce {
                request_id,
                key,
                acks,
                batch,
            } => format!(
                "Produce #{request_id} {key} {acks:?} batch={} n={} pid={:?}",
                batch.id, batch.records, batch.producer
            ),
            ReplMsg::ProduceAnswer {
                request_id,
                error,
                base_offset,
            } => format!("ProduceAnswer #{request_id} {error:?} @{base_offset}"),
            ReplMsg::Read {
                request_id,
                key,
                offset,
            } => format!("Read #{request_id} {key}@{offset}"),
            ReplMsg::ReadAnswer {
                request_id,
                error,
                batches,
                ..
            } => format!("ReadAnswer #{request_id} {error:?} {}b", batches.len()),
        }
    }
}
