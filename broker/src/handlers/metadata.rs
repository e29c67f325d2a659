//! Metadata: answered from this core's replica of the metadata image; the quorum section (who
//! votes, who leads, this broker's applied offset) from core 0's controller, one mesh hop.

use std::rc::Rc;

use spool_protocol::wire::{
    self, MetadataBrokerT, MetadataPartitionT, MetadataQuorumT, MetadataRequestT,
    MetadataResponseT, MetadataTopicT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: &MetadataRequestT) -> MetadataResponseT {
    let status = shard
        .router
        .call(shard, 0, crate::requests::QuorumQuery)
        .await
        .ok()
        .flatten();
    let mut resp = answer(shard, req);
    resp.quorum = status.map(|s| {
        let nodes = |ids: &[u64]| -> Vec<i32> {
            ids.iter()
                .filter_map(|r| crate::cluster_config::node_of_raft_id(*r))
                .collect()
        };
        Box::new(build!(MetadataQuorumT {
            node_id: shard.config.node_id,
            voters: Some(nodes(&s.voters)),
            learners: Some(nodes(&s.learners)),
            leader_id: crate::cluster_config::node_of_raft_id(s.leader_id).unwrap_or(-1),
            term: s.term,
            commit_index: s.commit_index,
            applied_offset: s.applied_index,
        }))
    });
    resp
}

fn answer(shard: &Rc<Shard>, req: &MetadataRequestT) -> MetadataResponseT {
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
                        eligible_leaders: Some(p.eligible_leaders.clone()),
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
    // Live brokers (what clients route by), then fenced ones flagged as such, each with its
    // epoch: `spool cluster info` shows both.
    let registration = |id: i32| {
        image
            .broker(id)
            .map_or((-1, false), |b| (b.broker_epoch, b.fenced))
    };
    let mut brokers: Vec<MetadataBrokerT> = shard
        .brokers("native")
        .into_iter()
        .map(|b| {
            let (broker_epoch, fenced) = registration(b.node_id);
            build!(MetadataBrokerT {
                node_id: b.node_id,
                host: b.host,
                port: i32::from(b.port),
                rack: b.rack,
                broker_epoch: broker_epoch,
                fenced: fenced,
            })
        })
        .collect();
    for b in image
        .brokers()
        .filter(|b| b.fenced && b.broker_id != cfg.node_id)
    {
        if let Some(l) = b.listeners.iter().find(|l| l.name == "native") {
            brokers.push(build!(MetadataBrokerT {
                node_id: b.broker_id,
                host: l.host.clone(),
                port: i32::from(l.port),
                rack: b.rack.clone(),
                broker_epoch: b.broker_epoch,
                fenced: true,
            }));
        }
    }
    brokers.sort_by_key(|b| b.node_id);
    build!(MetadataResponseT {
        brokers: Some(brokers),
        cluster_id: shard.cluster_id(),
        controller_id: cfg.node_id,
        topics: Some(topics),
        quorum: None,
    })
}
