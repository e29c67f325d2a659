//! Operator leader elections for both fronts (Kafka's ElectLeaders, the native CLI): which
//! partitions an election names, and one outcome per partition.
//!
//! Owns: resolving "every partition" against this core's copy of the committed image, sending
//! the elections to the controller (`crate::ops::controller`), and pairing its per-partition
//! answers back with their partitions. The decision itself — preferred or unclean, and the
//! `PartitionChange` that bumps the leader and partition epochs — is
//! `spool_raft::topic_admin::elect_leader`, on the active controller.
//! Promises: one outcome per partition named, in order; with no partitions named, one per
//! partition that needed an election (Kafka leaves out ELECTION_NOT_NEEDED then).
//!
//! Also here: the topic admin requests to and from their internal-protocol form
//! (`spool_protocol::internal`), for forwarding to the active controller.

use std::rc::Rc;

use spool_protocol::internal::{
    ForwardConfigAlteration, ForwardConfigOp, ForwardConfigOpKind, ForwardNewPartitions,
};
use spool_protocol::ErrorCode;

use crate::requests::{
    ConfigAlteration, ConfigOp, ConfigOpKind, ControllerOp, NewPartitions, PartitionOutcome,
    TopicPartition,
};
use crate::shard::Shard;

/// Partitions one ElectLeaders request may name (bounds the controller's work per request).
/// (The internal protocol's forwarding limit, `TOPICS_PER_FORWARD_MAX`, is the same.)
pub const ELECT_PARTITIONS_MAX: usize = 10_000;

/// Elects leaders: preferred (`unclean` false) or unclean, for `partitions` (`None`: every
/// partition of the image).
pub async fn elect_leaders(
    shard: &Rc<Shard>,
    unclean: bool,
    partitions: Option<Vec<TopicPartition>>,
) -> Vec<PartitionOutcome> {
    let every = partitions.is_none();
    let partitions = partitions.unwrap_or_else(|| {
        spool_raft::topic_admin::all_partitions(&shard.local.image.borrow())
            .into_iter()
            .map(|(topic, p)| TopicPartition::new(topic, p))
            .collect()
    });
    if partitions.len() > ELECT_PARTITIONS_MAX {
        let message = format!(
            "{} partitions named; one election request may name at most {ELECT_PARTITIONS_MAX}",
            partitions.len()
        );
        return partitions
            .into_iter()
            .map(|tp| PartitionOutcome {
                tp,
                error: ErrorCode::InvalidRequest,
                message: Some(message.clone()),
            })
            .collect();
    }
    if partitions.is_empty() {
        return Vec::new();
    }
    let op = ControllerOp::ElectLeaders {
        unclean,
        partitions: partitions.clone(),
    };
    let names = op.outcome_names();
    let outcomes = crate::ops::controller(shard, op, &names).await;
    partitions
        .into_iter()
        .zip(outcomes)
        .map(|(tp, o)| PartitionOutcome {
            tp,
            error: o.error,
            message: o.message,
        })
        .filter(|o| !(every && o.error == ErrorCode::ElectionNotNeeded))
        .collect()
}

pub fn new_partitions_to_wire(t: NewPartitions) -> ForwardNewPartitions {
    ForwardNewPartitions {
        name: t.name,
        count: t.count,
        assignments: t.assignments,
    }
}

pub fn new_partitions_from_wire(t: ForwardNewPartitions) -> NewPartitions {
    NewPartitions {
        name: t.name,
        count: t.count,
        assignments: t.assignments,
    }
}

pub fn alteration_to_wire(a: ConfigAlteration) -> ForwardConfigAlteration {
    ForwardConfigAlteration {
        topic: a.topic,
        incremental: a.incremental,
        ops: a
            .ops
            .into_iter()
            .map(|op| {
                let (kind, value) = match op.kind {
                    ConfigOpKind::Set(v) => (ForwardConfigOpKind::Set, Some(v)),
                    ConfigOpKind::Delete => (ForwardConfigOpKind::Delete, None),
                    ConfigOpKind::Append(v) => (ForwardConfigOpKind::Append, Some(v)),
                    ConfigOpKind::Subtract(v) => (ForwardConfigOpKind::Subtract, Some(v)),
                };
                ForwardConfigOp {
                    key: op.key,
                    kind,
                    value,
                }
            })
            .collect(),
    }
}

pub fn alteration_from_wire(a: ForwardConfigAlteration) -> ConfigAlteration {
    ConfigAlteration {
        topic: a.topic,
        incremental: a.incremental,
        ops: a
            .ops
            .into_iter()
            .map(|op| {
                let value = op.value.unwrap_or_default();
                let kind = match op.kind {
                    ForwardConfigOpKind::Set => ConfigOpKind::Set(value),
                    ForwardConfigOpKind::Delete => ConfigOpKind::Delete,
                    ForwardConfigOpKind::Append => ConfigOpKind::Append(value),
                    ForwardConfigOpKind::Subtract => ConfigOpKind::Subtract(value),
                };
                ConfigOp { key: op.key, kind }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_admin_requests_survive_the_internal_protocol() {
        let alteration = ConfigAlteration {
            topic: "t".into(),
            incremental: true,
            ops: vec![
                ConfigOp {
                    key: "retention.ms".into(),
                    kind: ConfigOpKind::Set("5".into()),
                },
                ConfigOp {
                    key: "segment.bytes".into(),
                    kind: ConfigOpKind::Delete,
                },
                ConfigOp {
                    key: "cleanup.policy".into(),
                    kind: ConfigOpKind::Append("compact".into()),
                },
                ConfigOp {
                    key: "cleanup.policy".into(),
                    kind: ConfigOpKind::Subtract("delete".into()),
                },
            ],
        };
        let grow = NewPartitions {
            name: "t".into(),
            count: 3,
            assignments: Some(vec![vec![1, 2], vec![2, 3]]),
        };
        let ops = [
            spool_protocol::internal::ForwardOp::AlterConfigs {
                topics: vec![alteration_to_wire(alteration.clone())],
                validate_only: true,
            },
            spool_protocol::internal::ForwardOp::CreatePartitions {
                topics: vec![
                    new_partitions_to_wire(grow.clone()),
                    new_partitions_to_wire(NewPartitions {
                        assignments: None,
                        ..grow.clone()
                    }),
                ],
                validate_only: false,
            },
            spool_protocol::internal::ForwardOp::ElectLeaders {
                unclean: true,
                partitions: vec![("t".into(), 0), ("u".into(), 7)],
            },
        ];
        for op in ops {
            let frame = spool_protocol::internal::InternalFrame {
                from_node: 2,
                correlation_id: 9,
                message: spool_protocol::internal::InternalMessage::Forward(op),
                cluster_id: String::new(),
            };
            let bytes = spool_protocol::internal::encode(&frame).expect("encodes");
            let back =
                spool_protocol::internal::decode(&bytes, &Default::default()).expect("decodes");
            assert_eq!(back, frame);
        }
        let wire = alteration_to_wire(alteration.clone());
        assert_eq!(alteration_from_wire(wire), alteration);
        assert_eq!(
            new_partitions_from_wire(new_partitions_to_wire(grow.clone())),
            grow
        );
    }
}
