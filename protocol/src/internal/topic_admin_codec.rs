//! Forwarded topic administration to and from its flatbuffers form (`CreatePartitions`,
//! `AlterConfigs`, `ElectLeaders` of `schemas/internal.fbs`): what a broker that is not the
//! active controller sends it for Kafka's CreatePartitions, (Incremental)AlterConfigs and
//! ElectLeaders. Each is answered with `TopicOutcomes` (the codec's).
//!
//! Owns: these messages' fields, each count checked against its named limit on both sides
//! ([`TOPICS_PER_FORWARD_MAX`] topics or partitions, [`CONFIGS_PER_TOPIC_MAX`] operations,
//! [`REPLICAS_PER_PARTITION_MAX`] replicas per list), names and values against their lengths, and
//! an operation number outside 0-3 refused. Never does: frame, verify or route a message (the
//! codec does), or validate the request itself (the controller does).

use flatbuffers::WIPOffset;

use super::limits::{
    check_count, check_len, decode_name, encode_name, Fbb, InternalError, CONFIGS_PER_TOPIC_MAX,
    CONFIG_VALUE_BYTES_MAX, REPLICAS_PER_PARTITION_MAX, TOPICS_PER_FORWARD_MAX,
};
use super::types::{
    ForwardConfigAlteration, ForwardConfigOp, ForwardConfigOpKind, ForwardNewPartitions,
};
use crate::internal_wire as fb;

pub(super) fn encode_create_partitions<'b>(
    fbb: &mut Fbb<'b>,
    topics: &[ForwardNewPartitions],
    validate_only: bool,
) -> Result<WIPOffset<fb::CreatePartitions<'b>>, InternalError> {
    check_count("topics", topics.len(), TOPICS_PER_FORWARD_MAX)?;
    let mut offsets = Vec::with_capacity(topics.len());
    for t in topics {
        let name = encode_name(fbb, "topic name", &t.name)?;
        let assignments = match &t.assignments {
            None => None,
            Some(lists) => {
                check_count("new partitions", lists.len(), TOPICS_PER_FORWARD_MAX)?;
                let mut out = Vec::with_capacity(lists.len());
                for replicas in lists {
                    check_count("replicas", replicas.len(), REPLICAS_PER_PARTITION_MAX)?;
                    let replicas = fbb.create_vector(replicas);
                    out.push(fb::PartitionReplicas::create(
                        fbb,
                        &fb::PartitionReplicasArgs {
                            replicas: Some(replicas),
                        },
                    ));
                }
                Some(fbb.create_vector(&out))
            }
        };
        offsets.push(fb::ForwardNewPartitions::create(
            fbb,
            &fb::ForwardNewPartitionsArgs {
                name: Some(name),
                count: t.count,
                assigned: t.assignments.is_some(),
                assignments,
            },
        ));
    }
    let topics = fbb.create_vector(&offsets);
    Ok(fb::CreatePartitions::create(
        fbb,
        &fb::CreatePartitionsArgs {
            topics: Some(topics),
            validate_only,
        },
    ))
}

pub(super) fn decode_create_partitions(
    c: fb::CreatePartitions<'_>,
) -> Result<(Vec<ForwardNewPartitions>, bool), InternalError> {
    let mut topics = Vec::new();
    if let Some(ts) = c.topics() {
        check_count("topics", ts.len(), TOPICS_PER_FORWARD_MAX)?;
        topics.reserve_exact(ts.len());
        for t in ts {
            let assignments = if t.assigned() {
                let mut lists = Vec::new();
                if let Some(ls) = t.assignments() {
                    check_count("new partitions", ls.len(), TOPICS_PER_FORWARD_MAX)?;
                    lists.reserve_exact(ls.len());
                    for l in ls {
                        let replicas = l.replicas().map(|r| r.iter().collect::<Vec<i32>>());
                        let replicas = replicas.unwrap_or_default();
                        check_count("replicas", replicas.len(), REPLICAS_PER_PARTITION_MAX)?;
                        lists.push(replicas);
                    }
                }
                Some(lists)
            } else {
                None
            };
            topics.push(ForwardNewPartitions {
                name: decode_name("topic name", t.name())?,
                count: t.count(),
                assignments,
            });
        }
    }
    Ok((topics, c.validate_only()))
}

pub(super) fn encode_alter_configs<'b>(
    fbb: &mut Fbb<'b>,
    topics: &[ForwardConfigAlteration],
    validate_only: bool,
) -> Result<WIPOffset<fb::AlterConfigs<'b>>, InternalError> {
    check_count("topics", topics.len(), TOPICS_PER_FORWARD_MAX)?;
    let mut offsets = Vec::with_capacity(topics.len());
    for t in topics {
        let topic = encode_name(fbb, "topic name", &t.topic)?;
        check_count("config operations", t.ops.len(), CONFIGS_PER_TOPIC_MAX)?;
        let mut ops = Vec::with_capacity(t.ops.len());
        for op in &t.ops {
            let key = encode_name(fbb, "config name", &op.key)?;
            let value = match &op.value {
                Some(v) => {
                    check_len("config value", v.len(), CONFIG_VALUE_BYTES_MAX)?;
                    Some(fbb.create_string(v))
                }
                None => None,
            };
            ops.push(fb::ConfigOperation::create(
                fbb,
                &fb::ConfigOperationArgs {
                    key: Some(key),
                    operation: op.kind as i8,
                    value,
                },
            ));
        }
        let ops = fbb.create_vector(&ops);
        offsets.push(fb::ForwardConfigAlteration::create(
            fbb,
            &fb::ForwardConfigAlterationArgs {
                topic: Some(topic),
                incremental: t.incremental,
                ops: Some(ops),
            },
        ));
    }
    let topics = fbb.create_vector(&offsets);
    Ok(fb::AlterConfigs::create(
        fbb,
        &fb::AlterConfigsArgs {
            topics: Some(topics),
            validate_only,
        },
    ))
}

fn op_kind(operation: i8) -> Result<ForwardConfigOpKind, InternalError> {
    Ok(match operation {
        0 => ForwardConfigOpKind::Set,
        1 => ForwardConfigOpKind::Delete,
        2 => ForwardConfigOpKind::Append,
        3 => ForwardConfigOpKind::Subtract,
        other => {
            return Err(InternalError::OutOfRange {
                field: "ConfigOperation.operation",
                value: other.into(),
            })
        }
    })
}

pub(super) fn decode_alter_configs(
    a: fb::AlterConfigs<'_>,
) -> Result<(Vec<ForwardConfigAlteration>, bool), InternalError> {
    let mut topics = Vec::new();
    if let Some(ts) = a.topics() {
        check_count("topics", ts.len(), TOPICS_PER_FORWARD_MAX)?;
        topics.reserve_exact(ts.len());
        for t in ts {
            let mut ops = Vec::new();
            if let Some(os) = t.ops() {
                check_count("config operations", os.len(), CONFIGS_PER_TOPIC_MAX)?;
                ops.reserve_exact(os.len());
                for op in os {
                    let value = match op.value() {
                        Some(v) => {
                            check_len("config value", v.len(), CONFIG_VALUE_BYTES_MAX)?;
                            Some(v.to_owned())
                        }
                        None => None,
                    };
                    ops.push(ForwardConfigOp {
                        key: decode_name("config name", op.key())?,
                        kind: op_kind(op.operation())?,
                        value,
                    });
                }
            }
            topics.push(ForwardConfigAlteration {
                topic: decode_name("topic name", t.topic())?,
                incremental: t.incremental(),
                ops,
            });
        }
    }
    Ok((topics, a.validate_only()))
}

pub(super) fn encode_elect_leaders<'b>(
    fbb: &mut Fbb<'b>,
    unclean: bool,
    partitions: &[(String, i32)],
) -> Result<WIPOffset<fb::ElectLeaders<'b>>, InternalError> {
    check_count("partitions", partitions.len(), TOPICS_PER_FORWARD_MAX)?;
    let mut offsets = Vec::with_capacity(partitions.len());
    for (topic, partition) in partitions {
        let topic = encode_name(fbb, "topic name", topic)?;
        offsets.push(fb::ElectPartition::create(
            fbb,
            &fb::ElectPartitionArgs {
                topic: Some(topic),
                partition: *partition,
            },
        ));
    }
    let partitions = fbb.create_vector(&offsets);
    Ok(fb::ElectLeaders::create(
        fbb,
        &fb::ElectLeadersArgs {
            unclean,
            partitions: Some(partitions),
        },
    ))
}

pub(super) fn decode_elect_leaders(
    e: fb::ElectLeaders<'_>,
) -> Result<(bool, Vec<(String, i32)>), InternalError> {
    let mut partitions = Vec::new();
    if let Some(ps) = e.partitions() {
        check_count("partitions", ps.len(), TOPICS_PER_FORWARD_MAX)?;
        partitions.reserve_exact(ps.len());
        for p in ps {
            partitions.push((decode_name("topic name", p.topic())?, p.partition()));
        }
    }
    Ok((e.unclean(), partitions))
}
