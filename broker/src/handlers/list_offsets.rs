//! ListOffsets (earliest, latest = high watermark, by timestamp), routed to the owning cores.

use std::rc::Rc;

use spool_protocol::wire::{
    self, ListOffsetsPartitionResponseT, ListOffsetsRequestT, ListOffsetsResponseT,
    ListOffsetsTopicResponseT,
};
use spool_protocol::ErrorCode;

use crate::mesh::{Reply, Request};
use crate::requests::{ListOffsetsPartition, ListOffsetsResult, TopicPartition};
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: ListOffsetsRequestT) -> ListOffsetsResponseT {
    let mut topics = Vec::new();
    for t in req.topics.unwrap_or_default() {
        let mut parts = Vec::new();
        for p in t.partitions.unwrap_or_default() {
            let tp = TopicPartition::new(t.name.clone(), p.partition_index);
            let r = match shard.owner(&tp) {
                None => ListOffsetsResult {
                    error: ErrorCode::UnknownTopicOrPartition,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                },
                Some(owner) => match shard
                    .call(
                        owner,
                        Request::ListOffsets(ListOffsetsPartition {
                            tp,
                            timestamp: p.timestamp,
                        }),
                    )
                    .await
                {
                    Reply::ListOffsets(r) => r,
                    _ => ListOffsetsResult {
                        error: ErrorCode::RequestTimedOut,
                        timestamp: -1,
                        offset: -1,
                        leader_epoch: -1,
                    },
                },
            };
            parts.push(build!(ListOffsetsPartitionResponseT {
                partition_index: p.partition_index,
                error_code: wire::ErrorCode::from(r.error),
                timestamp: r.timestamp,
                offset: r.offset,
                leader_epoch: r.leader_epoch,
            }));
        }
        topics.push(build!(ListOffsetsTopicResponseT {
            name: t.name,
            partitions: Some(parts)
        }));
    }
    build!(ListOffsetsResponseT {
        topics: Some(topics)
    })
}
