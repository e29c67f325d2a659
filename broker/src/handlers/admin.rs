//! The native front's admin changes past create/delete: CreatePartitions,
//! IncrementalAlterConfigs and ElectLeaders (through the controller), DeleteRecords (on the
//! partitions' leader), DeleteGroups and OffsetDelete (on the group's coordinator). Each
//! translates to the same front-independent call the Kafka front makes, so the two ports answer
//! alike: `crate::ops::controller`, `crate::topic_admin`, `crate::delete_records`,
//! `crate::group_admin`.

use std::rc::Rc;

use spool_protocol::wire::{
    self, ConfigOperation, CreatePartitionsRequestT, CreatePartitionsResponseT,
    DeletableGroupResultT, DeleteGroupsRequestT, DeleteGroupsResponseT,
    DeleteRecordsPartitionResultT, DeleteRecordsRequestT, DeleteRecordsResponseT,
    ElectLeadersRequestT, ElectLeadersResponseT, ElectionType, IncrementalAlterConfigsRequestT,
    IncrementalAlterConfigsResponseT, OffsetDeleteRequestT, OffsetDeleteResponseT, PartitionErrorT,
    TopicErrorT,
};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::requests::{
    ConfigAlteration, ConfigOp, ConfigOpKind, ControllerOp, NewPartitions, TopicOutcome,
    TopicPartition,
};
use crate::shard::Shard;

fn code(c: ErrorCode) -> wire::ErrorCode {
    wire::ErrorCode::from(c)
}

fn topic_errors(outcomes: Vec<TopicOutcome>) -> Option<Vec<TopicErrorT>> {
    Some(
        outcomes
            .into_iter()
            .map(|o| {
                build!(TopicErrorT {
                    name: o.name,
                    error_code: code(o.error),
                    error_message: o.message,
                })
            })
            .collect(),
    )
}

pub async fn create_partitions(
    shard: &Rc<Shard>,
    req: CreatePartitionsRequestT,
) -> CreatePartitionsResponseT {
    let topics: Vec<NewPartitions> = req
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| NewPartitions {
            name: t.name,
            count: t.count,
            assignments: t.assignments.map(|a| {
                a.into_iter()
                    .map(|r| r.broker_ids.unwrap_or_default())
                    .collect()
            }),
        })
        .collect();
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let op = ControllerOp::CreatePartitions {
        topics,
        validate_only: req.validate_only,
    };
    let outcomes = crate::ops::controller(shard, op, &names).await;
    build!(CreatePartitionsResponseT {
        topics: topic_errors(outcomes),
    })
}

/// A native operation as the controller's op, or the INVALID_REQUEST answer for a number this
/// build does not know.
fn config_op(operation: ConfigOperation, value: Option<String>) -> Option<ConfigOpKind> {
    let value = value.unwrap_or_default();
    Some(match operation {
        ConfigOperation::Set => ConfigOpKind::Set(value),
        ConfigOperation::Delete => ConfigOpKind::Delete,
        ConfigOperation::Append => ConfigOpKind::Append(value),
        ConfigOperation::Subtract => ConfigOpKind::Subtract(value),
        _ => return None,
    })
}

pub async fn incremental_alter_configs(
    shard: &Rc<Shard>,
    req: IncrementalAlterConfigsRequestT,
) -> IncrementalAlterConfigsResponseT {
    let mut refused: Vec<TopicOutcome> = Vec::new();
    let mut topics: Vec<ConfigAlteration> = Vec::new();
    for t in req.topics.unwrap_or_default() {
        let mut ops = Vec::new();
        let mut bad = None;
        for c in t.configs.unwrap_or_default() {
            match config_op(c.operation, c.value) {
                Some(kind) => ops.push(ConfigOp { key: c.name, kind }),
                None => bad = Some(c.operation.0),
            }
        }
        match bad {
            Some(n) => refused.push(TopicOutcome {
                name: t.topic,
                error: ErrorCode::InvalidRequest,
                message: Some(format!("unknown config operation {n}")),
            }),
            None => topics.push(ConfigAlteration {
                topic: t.topic,
                incremental: true,
                ops,
            }),
        }
    }
    let names: Vec<String> = topics.iter().map(|t| t.topic.clone()).collect();
    let mut outcomes = if topics.is_empty() {
        Vec::new()
    } else {
        let op = ControllerOp::AlterConfigs {
            topics,
            validate_only: req.validate_only,
        };
        crate::ops::controller(shard, op, &names).await
    };
    outcomes.extend(refused);
    build!(IncrementalAlterConfigsResponseT {
        topics: topic_errors(outcomes),
    })
}

pub async fn elect_leaders(shard: &Rc<Shard>, req: ElectLeadersRequestT) -> ElectLeadersResponseT {
    let partitions = req.partitions.map(|ps| {
        ps.into_iter()
            .map(|p| TopicPartition::new(p.topic, p.partition))
            .collect()
    });
    let unclean = req.election_type == ElectionType::Unclean;
    let outcomes = crate::topic_admin::elect_leaders(shard, unclean, partitions).await;
    build!(ElectLeadersResponseT {
        partitions: Some(
            outcomes
                .into_iter()
                .map(|o| build!(PartitionErrorT {
                    topic: o.tp.topic,
                    partition: o.tp.partition,
                    error_code: code(o.error),
                    error_message: o.message,
                }))
                .collect(),
        ),
    })
}

pub async fn delete_records(
    shard: &Rc<Shard>,
    req: DeleteRecordsRequestT,
) -> DeleteRecordsResponseT {
    let wanted: Vec<(TopicPartition, i64)> = req
        .partitions
        .unwrap_or_default()
        .into_iter()
        .map(|p| (TopicPartition::new(p.topic, p.partition), p.offset))
        .collect();
    let results = crate::delete_records::delete_records(shard, wanted, req.timeout_ms).await;
    build!(DeleteRecordsResponseT {
        partitions: Some(
            results
                .into_iter()
                .map(|r| build!(DeleteRecordsPartitionResultT {
                    topic: r.tp.topic,
                    partition: r.tp.partition,
                    low_watermark: r.low_watermark,
                    error_code: code(r.error),
                }))
                .collect(),
        ),
    })
}

pub async fn delete_groups(shard: &Rc<Shard>, req: DeleteGroupsRequestT) -> DeleteGroupsResponseT {
    let groups = req.group_ids.unwrap_or_default();
    let results = crate::group_admin::delete_groups(shard, groups).await;
    build!(DeleteGroupsResponseT {
        results: Some(
            results
                .into_iter()
                .map(|(group_id, error)| build!(DeletableGroupResultT {
                    group_id: group_id,
                    error_code: code(error),
                }))
                .collect(),
        ),
    })
}

pub async fn offset_delete(shard: &Rc<Shard>, req: OffsetDeleteRequestT) -> OffsetDeleteResponseT {
    let partitions: Vec<TopicPartition> = req
        .partitions
        .unwrap_or_default()
        .into_iter()
        .map(|p| TopicPartition::new(p.topic, p.partition))
        .collect();
    match crate::group_admin::delete_offsets(shard, req.group_id, partitions).await {
        Err(error) => build!(OffsetDeleteResponseT {
            error_code: code(error),
        }),
        Ok(results) => build!(OffsetDeleteResponseT {
            partitions: Some(
                results
                    .into_iter()
                    .map(|(tp, error)| build!(PartitionErrorT {
                        topic: tp.topic,
                        partition: tp.partition,
                        error_code: code(error),
                    }))
                    .collect(),
            ),
        }),
    }
}
