//! Metadata: answered from this core's replica of the metadata image, no mesh hop.

use std::rc::Rc;

use spool_protocol::wire::{
    self, MetadataBrokerT, MetadataPartitionT, MetadataRequestT, MetadataResponseT, MetadataTopicT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::shard::Shard;

pub fn handle(shard: &Rc<Shard>, req: &MetadataRequestT) -> MetadataResponseT {
    let image = shard.image.borrow();
    let cfg = &shard.config;
    let topic_t = |t: &spool_raft::image::TopicImage| {
        build!(MetadataTopicT {
            error_code: wire::ErrorCode::from(ErrorCode::None),
            name: t.name.clone(),
            is_internal: t.name.starts_with("__"),
            partitions: Some(
                t.partitions
                    .iter()
                    .enumerate()
                    .map(|(i, p)| build!(MetadataPartitionT {
                        error_code: wire::ErrorCode::from(crate::local::partition_error(p.leader)),
                        partition_index: i as i32,
                        leader_id: p.leader,
                        leader_epoch: p.leader_epoch,
                        replica_nodes: Some(p.replicas.clone()),
                        isr_nodes: Some(p.isr.clone()),
                        offline_replicas: Some(crate::local::offline_replicas(&image, &p.replicas)),
                    }))
                    .collect(),
            ),
        })
    };
    let topics = match &req.topics {
        None => image.topics().map(topic_t).collect(),
        Some(names) => names
            .iter()
            .map(|n| match image.topic(n) {
                Some(t) => topic_t(t),
                None => build!(MetadataTopicT {
                    error_code: wire::ErrorCode::from(ErrorCode::UnknownTopicOrPartition),
                    name: n.clone(),
                    is_internal: false,
                    partitions: Some(Vec::new()),
                }),
            })
            .collect(),
    };
    build!(MetadataResponseT {
        brokers: Some(
            shard
                .brokers("native")
                .into_iter()
                .map(|b| build!(MetadataBrokerT {
                    node_id: b.node_id,
                    host: b.host,
                    port: i32::from(b.port),
                    rack: b.rack,
                }))
                .collect()
        ),
        cluster_id: Some(cfg.cluster_id.clone()),
        controller_id: cfg.node_id,
        topics: Some(topics),
    })
}
