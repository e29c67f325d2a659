//! CreateTopics and DeleteTopics: forwarded to the controller on core 0, answered once the change
//! is committed and applied on every core.

use std::rc::Rc;

use spool_protocol::wire::{
    self, CreatableTopicResultT, CreateTopicsRequestT, CreateTopicsResponseT,
    DeletableTopicResultT, DeleteTopicsRequestT, DeleteTopicsResponseT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::requests::{ControllerOp, NewTopic, TopicOutcome};
use crate::shard::Shard;

async fn run(shard: &Rc<Shard>, op: ControllerOp, names: &[String]) -> Vec<TopicOutcome> {
    crate::ops::controller(shard, op, names).await
}

pub async fn create(shard: &Rc<Shard>, req: CreateTopicsRequestT) -> CreateTopicsResponseT {
    let topics: Vec<NewTopic> = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| NewTopic {
            name: t.name,
            partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            configs: t
                .configs
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.name, c.value.unwrap_or_default()))
                .collect(),
        })
        .collect();
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let requested: Vec<(i32, i16)> = topics
        .iter()
        .map(|t| (t.partitions, t.replication_factor))
        .collect();
    let outcomes = run(
        shard,
        ControllerOp::CreateTopics {
            topics,
            validate_only: req.validate_only,
        },
        &names,
    )
    .await;
    build!(CreateTopicsResponseT {
        topics: Some(
            outcomes
                .into_iter()
                .zip(requested)
                .map(|(o, (parts, rf))| {
                    let created = o.error == ErrorCode::None;
                    let actual = crate::ops::partition_count(shard, &o.name);
                    build!(CreatableTopicResultT {
                        name: o.name,
                        error_code: wire::ErrorCode::from(o.error),
                        error_message: o.message,
                        num_partitions: if created { actual.unwrap_or(parts) } else { -1 },
                        replication_factor: if created { rf.max(1) } else { -1 },
                    })
                })
                .collect(),
        ),
    })
}

pub async fn delete(shard: &Rc<Shard>, req: DeleteTopicsRequestT) -> DeleteTopicsResponseT {
    let names = req.topic_names.unwrap_or_default();
    let outcomes = run(
        shard,
        ControllerOp::DeleteTopics {
            names: names.clone(),
        },
        &names,
    )
    .await;
    build!(DeleteTopicsResponseT {
        responses: Some(
            outcomes
                .into_iter()
                .map(|o| build!(DeletableTopicResultT {
                    name: o.name,
                    error_code: wire::ErrorCode::from(o.error),
                    error_message: o.message,
                }))
                .collect(),
        ),
    })
}
