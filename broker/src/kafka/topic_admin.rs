//! CreatePartitions, AlterConfigs, IncrementalAlterConfigs and ElectLeaders on the Kafka front:
//! each request translated into the controller's op (`crate::requests::ControllerOp`,
//! `crate::topic_admin::elect_leaders`) and its outcomes back into Kafka's response, one result
//! per item named, in order.
//!
//! Only TOPIC resources (type 2) have alterable configs: a BROKER resource (4) is answered
//! INVALID_REQUEST (spool's broker configs are start-up flags), any other type INVALID_REQUEST
//! too. A resource or topic named twice in one request is INVALID_REQUEST for each occurrence,
//! as in Kafka; nothing of it reaches the controller.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::{
    alter_configs_response, create_partitions_response, elect_leaders_response,
    incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    CreatePartitionsRequest, CreatePartitionsResponse, ElectLeadersRequest, ElectLeadersResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, TopicName,
};
use spool_protocol::ErrorCode;

use super::kstr;
use crate::requests::{
    ConfigAlteration, ConfigOp, ConfigOpKind, ControllerOp, NewPartitions, TopicOutcome,
    TopicPartition,
};
use crate::shard::Shard;

/// Kafka's ConfigResource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// Kafka's ElectionType: 0 preferred, 1 unclean.
const ELECTION_UNCLEAN: i8 = 1;

/// Items of one request, each either sent to the controller or answered here.
enum Item<T> {
    Send(T),
    Answer(ErrorCode, String),
}

/// Sends the `Send` items as one op built by `op`, and returns one outcome per item in order.
async fn run<T>(
    shard: &Rc<Shard>,
    items: Vec<(String, Item<T>)>,
    op: impl FnOnce(Vec<T>) -> ControllerOp,
) -> Vec<TopicOutcome> {
    let mut sent = Vec::new();
    let mut names = Vec::new();
    let mut answered = Vec::with_capacity(items.len());
    for (name, item) in items {
        match item {
            Item::Send(t) => {
                names.push(name.clone());
                sent.push(t);
                answered.push((name, None));
            }
            Item::Answer(code, message) => answered.push((name, Some((code, message)))),
        }
    }
    let mut outcomes = if sent.is_empty() {
        Vec::new()
    } else {
        crate::ops::controller(shard, op(sent), &names).await
    }
    .into_iter();
    answered
        .into_iter()
        .map(|(name, answer)| match answer {
            Some((error, message)) => TopicOutcome {
                name,
                error,
                message: Some(message),
            },
            None => outcomes.next().unwrap_or(TopicOutcome {
                name,
                error: ErrorCode::UnknownServerError,
                message: Some("the controller gave no outcome".into()),
            }),
        })
        .collect()
}

/// How often each name occurs.
fn counts<'a>(names: impl Iterator<Item = &'a str>) -> BTreeMap<&'a str, usize> {
    let mut out = BTreeMap::new();
    for n in names {
        *out.entry(n).or_insert(0) += 1;
    }
    out
}

pub async fn create_partitions(
    shard: &Rc<Shard>,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let seen = counts(req.topics.iter().map(|t| t.name.0.as_str()));
    let items: Vec<(String, Item<NewPartitions>)> = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str().to_owned();
            if seen.get(name.as_str()).copied().unwrap_or(0) > 1 {
                let why = format!("Duplicate topic {name:?} in the request");
                return (name, Item::Answer(ErrorCode::InvalidRequest, why));
            }
            let assignments = t.assignments.as_ref().map(|a| {
                a.iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
            let new = NewPartitions {
                name: name.clone(),
                count: t.count,
                assignments,
            };
            (name, Item::Send(new))
        })
        .collect();
    let validate_only = req.validate_only;
    let outcomes = run(shard, items, |topics| ControllerOp::CreatePartitions {
        topics,
        validate_only,
    })
    .await;
    CreatePartitionsResponse::default().with_results(
        outcomes
            .into_iter()
            .map(|o| {
                create_partitions_response::CreatePartitionsTopicResult::default()
                    .with_name(TopicName(kstr(o.name)))
                    .with_error_code(o.error as i16)
                    .with_error_message(o.message.map(kstr))
            })
            .collect(),
    )
}

/// One config resource of either AlterConfigs request: its type, name and operations.
struct Resource {
    resource_type: i8,
    name: String,
    ops: Vec<ConfigOp>,
}

/// The resources as items: topics go to the controller, the rest are answered here.
fn resource_items(
    resources: Vec<Resource>,
    incremental: bool,
) -> Vec<(String, Item<ConfigAlteration>)> {
    let seen = counts(resources.iter().map(|r| r.name.as_str()));
    let twice: Vec<bool> = resources
        .iter()
        .map(|r| seen.get(r.name.as_str()).copied().unwrap_or(0) > 1)
        .collect();
    resources
        .into_iter()
        .zip(twice)
        .map(|(r, twice)| {
            let item = match r.resource_type {
                _ if twice => Item::Answer(
                    ErrorCode::InvalidRequest,
                    format!("Duplicate resource {:?} in the request", r.name),
                ),
                RESOURCE_TOPIC => Item::Send(ConfigAlteration {
                    topic: r.name.clone(),
                    incremental,
                    ops: r.ops,
                }),
                RESOURCE_BROKER => Item::Answer(
                    ErrorCode::InvalidRequest,
                    "broker configs are set by flags at start-up".into(),
                ),
                other => Item::Answer(
                    ErrorCode::InvalidRequest,
                    format!("resource type {other} has no alterable configs"),
                ),
            };
            (r.name, item)
        })
        .collect()
}

/// Runs the config alterations; each outcome with the resource type it answers.
async fn alter(
    shard: &Rc<Shard>,
    resources: Vec<Resource>,
    incremental: bool,
    validate_only: bool,
) -> Vec<(i8, TopicOutcome)> {
    let types: Vec<i8> = resources.iter().map(|r| r.resource_type).collect();
    let items = resource_items(resources, incremental);
    let outcomes = run(shard, items, |topics| ControllerOp::AlterConfigs {
        topics,
        validate_only,
    })
    .await;
    types.into_iter().zip(outcomes).collect()
}

pub async fn alter_configs(shard: &Rc<Shard>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources = req
        .resources
        .into_iter()
        .map(|r| Resource {
            resource_type: r.resource_type,
            name: r.resource_name.as_str().to_owned(),
            ops: r
                .configs
                .into_iter()
                .map(|c| ConfigOp {
                    key: c.name.as_str().to_owned(),
                    // A null value sets nothing: the key is back at its default.
                    kind: c.value.map_or(ConfigOpKind::Delete, |v| {
                        ConfigOpKind::Set(v.as_str().to_owned())
                    }),
                })
                .collect(),
        })
        .collect();
    let outcomes = alter(shard, resources, false, req.validate_only).await;
    AlterConfigsResponse::default().with_responses(
        outcomes
            .into_iter()
            .map(|(resource_type, o)| {
                alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(o.error as i16)
                    .with_error_message(o.message.map(kstr))
                    .with_resource_type(resource_type)
                    .with_resource_name(kstr(o.name))
            })
            .collect(),
    )
}

/// An IncrementalAlterConfigs operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
fn incremental_op(key: String, op: i8, value: Option<String>) -> Result<ConfigOp, String> {
    let value = || value.clone().unwrap_or_default();
    let kind = match op {
        0 => ConfigOpKind::Set(value()),
        1 => ConfigOpKind::Delete,
        2 => ConfigOpKind::Append(value()),
        3 => ConfigOpKind::Subtract(value()),
        other => {
            return Err(format!(
                "config operation {other} for {key:?} is not one of 0-3"
            ))
        }
    };
    Ok(ConfigOp { key, kind })
}

pub async fn incremental_alter_configs(
    shard: &Rc<Shard>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let types: Vec<i8> = req.resources.iter().map(|r| r.resource_type).collect();
    let mut refused: Vec<Option<String>> = Vec::with_capacity(types.len());
    let mut resources = Vec::with_capacity(types.len());
    for r in req.resources {
        let ops: Result<Vec<ConfigOp>, String> = r
            .configs
            .into_iter()
            .map(|c| {
                incremental_op(
                    c.name.as_str().to_owned(),
                    c.config_operation,
                    c.value.map(|v| v.as_str().to_owned()),
                )
            })
            .collect();
        let (ops, why) = match ops {
            Ok(ops) => (ops, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        resources.push(Resource {
            // A resource with an unknown operation is answered here: a type that is never sent.
            resource_type: if why.is_some() { -1 } else { r.resource_type },
            name: r.resource_name.as_str().to_owned(),
            ops,
        });
        refused.push(why);
    }
    let outcomes = alter(shard, resources, true, req.validate_only).await;
    IncrementalAlterConfigsResponse::default().with_responses(
        outcomes
            .into_iter()
            .zip(refused)
            .zip(types)
            .map(|(((_, o), why), resource_type)| {
                let (error, message) = match why {
                    Some(why) => (ErrorCode::InvalidRequest, Some(why)),
                    None => (o.error, o.message),
                };
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(error as i16)
                    .with_error_message(message.map(kstr))
                    .with_resource_type(resource_type)
                    .with_resource_name(kstr(o.name))
            })
            .collect(),
    )
}

pub async fn elect_leaders(
    shard: &Rc<Shard>,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let unclean = version >= 1 && req.election_type == ELECTION_UNCLEAN;
    let partitions = req.topic_partitions.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic.0.as_str().to_owned();
                t.partitions
                    .into_iter()
                    .map(move |p| TopicPartition::new(topic.clone(), p))
            })
            .collect::<Vec<_>>()
    });
    let outcomes = crate::topic_admin::elect_leaders(shard, unclean, partitions).await;
    // Grouped by topic, in the order topics first appear.
    let mut topics: Vec<elect_leaders_response::ReplicaElectionResult> = Vec::new();
    for o in outcomes {
        let result = elect_leaders_response::PartitionResult::default()
            .with_partition_id(o.tp.partition)
            .with_error_code(o.error as i16)
            .with_error_message(o.message.map(kstr));
        match topics.iter_mut().find(|t| t.topic.0.as_str() == o.tp.topic) {
            Some(t) => t.partition_result.push(result),
            None => topics.push(
                elect_leaders_response::ReplicaElectionResult::default()
                    .with_topic(TopicName(kstr(o.tp.topic.clone())))
                    .with_partition_result(vec![result]),
            ),
        }
    }
    ElectLeadersResponse::default()
        .with_error_code(ErrorCode::None as i16)
        .with_replica_election_results(topics)
}
