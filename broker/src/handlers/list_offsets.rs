//! ListOffsets (earliest, latest = high watermark or, read_committed, the last stable offset, by
//! timestamp), routed to the owning cores.

use std::rc::Rc;

use spool_protocol::wire::{
    self, ListOffsetsPartitionResponseT, ListOffsetsRequestT, ListOffsetsResponseT,
    ListOffsetsTopicResponseT,
};

use crate::front_rules::build;
use crate::requests::TopicPartition;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: ListOffsetsRequestT) -> ListOffsetsResponseT {
    let read_committed = req.isolation_level == wire::IsolationLevel::ReadCommitted;
    let mut topics = Vec::new();
    for t in req.topics.unwrap_or_default() {
        let mut parts = Vec::new();
        for p in t.partitions.unwrap_or_default() {
            let tp = TopicPartition::new(t.name.clone(), p.partition_index);
            let r =
                crate::ops::list_offsets_partition(shard, tp, p.timestamp, read_committed).await;
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
