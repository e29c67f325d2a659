//! Topic administration after creation, as metadata records: adding partitions (Kafka's
//! CreatePartitions), changing a topic's configs (AlterConfigs / IncrementalAlterConfigs), and
//! leader elections asked for by an operator (ElectLeaders) — or refusing them.
//!
//! Owns: the rules Kafka's controller applies to these requests (the partition count only grows,
//! up to the policy's maximum; a manual assignment names one replica list per new partition, of
//! the topic's replication factor, of distinct registered brokers; `__` topics keep their count,
//! since it keys their coordinators; config keys and values pass the CreateTopics check; APPEND
//! and SUBTRACT only for list configs), and the choice of a preferred or unclean leader.
//! Promises: pure functions of `(image, request)`, like [`crate::validate`]: a refusal carries
//! Kafka's code and a message and produces no record; a record returned applies to the image it
//! was computed from. New partitions are placed as CreateTopics places them
//! (`spool_core::placement`); an election's `PartitionChange` is written by
//! [`crate::failover`]'s own record builder, bumping the leader and partition epochs by one.
//! Never does: propose (the [`crate::Controller`] methods do) or I/O.

use std::collections::BTreeMap;

use spool_core::election::{PartitionChange, NO_LEADER};
use spool_protocol::metadata_records::MetadataRecordT;
use spool_protocol::ErrorCode;

use crate::failover::partition_change_record;
use crate::image::{MetadataImage, PartitionState};
use crate::records;
use crate::topic_config::check_topic_config;
use crate::validate::{assign_replicas, CreateTopicPolicy, Refusal};

/// Topics whose name starts with this are internal: their partition count keys their
/// coordinators (`__consumer_offsets`, `__transaction_state`), so it never changes.
pub const INTERNAL_TOPIC_PREFIX: &str = "__";
/// Config operations one topic's alteration may carry (the internal protocol forwards as many).
pub const CONFIG_OPS_PER_TOPIC_MAX: usize = 256;
/// The list config Kafka's APPEND / SUBTRACT apply to, and its default value.
const LIST_CONFIGS: &[(&str, &str)] = &[("cleanup.policy", "delete")];

/// One topic of a CreatePartitions request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPartitions {
    pub name: String,
    /// The total partition count wanted (more than the current one).
    pub count: i32,
    /// One replica list per new partition (`count - current` of them), or `None` to place them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// What one config operation does (Kafka's IncrementalAlterConfigs op types; AlterConfigs is a
/// list of `Set`s that replaces the whole set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOpKind {
    Set(String),
    Delete,
    /// Adds the comma-separated items missing from a list config's current value.
    Append(String),
    /// Removes the comma-separated items from a list config's current value.
    Subtract(String),
}

/// One config operation on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigOp {
    pub key: String,
    pub kind: ConfigOpKind,
}

/// One topic's config change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigAlteration {
    pub topic: String,
    /// IncrementalAlterConfigs: the ops apply in order to the current set. Otherwise
    /// (AlterConfigs) the `Set`s replace the whole set and every other key returns to its default.
    pub incremental: bool,
    pub ops: Vec<ConfigOp>,
}

fn unknown_topic(name: &str) -> Refusal {
    Refusal::new(
        ErrorCode::UnknownTopicOrPartition,
        format!("topic {name:?} does not exist"),
    )
}

fn bad_assignment(message: String) -> Refusal {
    Refusal::new(ErrorCode::InvalidReplicaAssignment, message)
}

/// Validates adding partitions to a topic and, if it passes, returns its `AddPartitions` record.
pub fn validate_create_partitions(
    image: &MetadataImage,
    request: &NewPartitions,
    policy: &CreateTopicPolicy,
) -> Result<MetadataRecordT, Refusal> {
    let topic = image
        .topic(&request.name)
        .ok_or_else(|| unknown_topic(&request.name))?;
    if topic.name.starts_with(INTERNAL_TOPIC_PREFIX) {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            format!(
                "topic {:?} is internal: its partition count keys its coordinators and cannot change",
                topic.name
            ),
        ));
    }
    let current = topic.partitions.len() as i64;
    let count = i64::from(request.count);
    if count < current {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!(
                "Topic currently has {current} partitions, which is higher than the requested {count}."
            ),
        ));
    }
    if count == current {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!("Topic already has {current} partitions."),
        ));
    }
    if request.count > policy.partitions_per_topic_max {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!(
                "{count} partitions requested; a topic may have at most {}",
                policy.partitions_per_topic_max
            ),
        ));
    }
    let added = count - current;
    // Every committed partition has replicas; the first one's count is the topic's factor.
    let replication_factor = topic.partitions.first().map_or(1, |p| p.replicas.len());
    let first_index = i32::try_from(current).unwrap_or(i32::MAX);
    let assignments = match &request.assignments {
        Some(lists) => {
            if lists.len() as i64 != added {
                return Err(bad_assignment(format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                    lists.len()
                )));
            }
            let mut out = Vec::with_capacity(lists.len());
            for (replicas, index) in lists.iter().zip(first_index..) {
                check_manual_assignment(image, replicas, replication_factor, index)?;
                let live: Vec<i32> = replicas
                    .iter()
                    .copied()
                    .filter(|b| is_live(image, *b))
                    .collect();
                out.push(records::partition_assignment(
                    index,
                    replicas.clone(),
                    live.clone(),
                    live[0],
                    0,
                    0,
                ));
            }
            out
        }
        None => {
            let factor = i16::try_from(replication_factor).unwrap_or(i16::MAX);
            let placed = assign_replicas(
                image,
                i32::try_from(added).unwrap_or(0),
                factor,
                // A different tie-break per growth step, so equal loads do not always pick the
                // brokers the topic's first partitions started on.
                topic.topic_id.low ^ current as u64,
            )?;
            placed
                .into_iter()
                .zip(first_index..)
                .map(|(mut a, index)| {
                    a.partition_index = index;
                    a
                })
                .collect()
        }
    };
    Ok(records::add_partitions(topic.topic_id, assignments))
}

/// Unfenced and not shutting down: may lead and be in an ISR from now on.
fn is_live(image: &MetadataImage, broker_id: i32) -> bool {
    image
        .broker(broker_id)
        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

fn check_manual_assignment(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: usize,
    index: i32,
) -> Result<(), Refusal> {
    if replicas.len() != replication_factor {
        return Err(bad_assignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
            replicas.len()
        )));
    }
    for (i, b) in replicas.iter().enumerate() {
        if replicas[..i].contains(b) {
            return Err(bad_assignment(format!(
                "The manual partition assignment includes the broker {b} more than once."
            )));
        }
        if image.broker(*b).is_none() {
            return Err(bad_assignment(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            )));
        }
    }
    if !replicas.iter().any(|b| is_live(image, *b)) {
        return Err(bad_assignment(format!(
            "All brokers specified in the manual partition assignment for partition {index} are fenced or in controlled shutdown."
        )));
    }
    Ok(())
}

fn invalid_config(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::InvalidConfig, message)
}

/// Validates one topic's config change and, if it passes, returns its `SetTopicConfigs` record
/// (the topic's whole resulting set).
pub fn validate_alter_configs(
    image: &MetadataImage,
    request: &ConfigAlteration,
) -> Result<MetadataRecordT, Refusal> {
    let topic = image
        .topic(&request.topic)
        .ok_or_else(|| unknown_topic(&request.topic))?;
    if request.ops.len() > CONFIG_OPS_PER_TOPIC_MAX {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            format!(
                "{} config operations; at most {CONFIG_OPS_PER_TOPIC_MAX} per topic",
                request.ops.len()
            ),
        ));
    }
    for (i, op) in request.ops.iter().enumerate() {
        if request.ops[..i].iter().any(|o| o.key == op.key) {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!("Error due to duplicate config keys: {:?}", op.key),
            ));
        }
    }
    let mut configs: BTreeMap<String, String> = if request.incremental {
        topic.configs.clone()
    } else {
        BTreeMap::new()
    };
    for op in &request.ops {
        let key = op.key.as_str();
        match &op.kind {
            ConfigOpKind::Set(value) => {
                check_topic_config(key, Some(value)).map_err(invalid_config)?;
                configs.insert(op.key.clone(), value.clone());
            }
            ConfigOpKind::Delete => {
                // A delete names a key it knows (any value of it would pass).
                if !crate::topic_config::known_topic_config_keys().any(|k| k == key) {
                    return Err(invalid_config(format!("unknown topic config {key:?}")));
                }
                configs.remove(key);
            }
            ConfigOpKind::Append(items) | ConfigOpKind::Subtract(items) => {
                let append = matches!(op.kind, ConfigOpKind::Append(_));
                let Some((_, default)) = LIST_CONFIGS.iter().find(|(k, _)| *k == key) else {
                    let verb = if append { "APPEND" } else { "SUBTRACT" };
                    return Err(invalid_config(format!(
                        "cannot {verb} to topic config {key:?}: it is not a list"
                    )));
                };
                let current = configs.get(key).map_or(*default, String::as_str);
                let mut list: Vec<&str> = split_list(current);
                for item in split_list(items) {
                    if append && !list.contains(&item) {
                        list.push(item);
                    } else if !append {
                        list.retain(|i| *i != item);
                    }
                }
                let value = list.join(",");
                check_topic_config(key, Some(&value)).map_err(invalid_config)?;
                configs.insert(op.key.clone(), value);
            }
        }
    }
    let configs = configs
        .iter()
        .map(|(k, v)| records::topic_config(k, Some(v)))
        .collect();
    Ok(records::set_topic_configs(topic.topic_id, configs))
}

fn split_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The outcome of one partition's election: its record, or why none is written.
pub type Election = Result<MetadataRecordT, Refusal>;

/// Decides the election of one partition: preferred (`unclean` false: `replicas[0]` leads if it
/// is live and in the ISR) or unclean (only a leaderless partition; an ISR member if one is
/// live, else any live replica, whose ISR becomes just itself).
pub fn elect_leader(image: &MetadataImage, topic: &str, partition: i32, unclean: bool) -> Election {
    let no_partition = || {
        Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            format!("partition {topic}-{partition} does not exist"),
        )
    };
    let t = image.topic(topic).ok_or_else(no_partition)?;
    let state = usize::try_from(partition)
        .ok()
        .and_then(|i| t.partitions.get(i))
        .ok_or_else(no_partition)?;
    let change = if unclean {
        unclean_change(image, state, topic, partition)?
    } else {
        preferred_change(image, state, topic, partition)?
    };
    Ok(partition_change_record(
        t.topic_id, partition, state, &change,
    ))
}

fn bumped(
    state: &PartitionState,
    leader: i32,
    isr: Vec<i32>,
    unclean: bool,
) -> Result<PartitionChange, Refusal> {
    let epochs = state
        .leader_epoch
        .checked_add(1)
        .zip(state.partition_epoch.checked_add(1))
        .ok_or_else(|| {
            Refusal::new(
                ErrorCode::UnknownServerError,
                "the leader or partition epoch cannot be bumped further",
            )
        })?;
    let eligible_leaders = if unclean {
        Vec::new()
    } else {
        state.eligible_leaders.clone()
    };
    Ok(PartitionChange {
        leader,
        isr,
        eligible_leaders,
        leader_epoch: epochs.0,
        partition_epoch: epochs.1,
        unclean,
    })
}

fn preferred_change(
    image: &MetadataImage,
    state: &PartitionState,
    topic: &str,
    partition: i32,
) -> Result<PartitionChange, Refusal> {
    let Some(&preferred) = state.replicas.first() else {
        return Err(Refusal::new(
            ErrorCode::PreferredLeaderNotAvailable,
            format!("partition {topic}-{partition} has no replicas"),
        ));
    };
    if state.leader == preferred {
        return Err(Refusal::new(
            ErrorCode::ElectionNotNeeded,
            format!("broker {preferred}, the preferred replica, already leads {topic}-{partition}"),
        ));
    }
    if !state.isr.contains(&preferred) || !is_live(image, preferred) {
        return Err(Refusal::new(
            ErrorCode::PreferredLeaderNotAvailable,
            format!(
                "the preferred replica of {topic}-{partition}, broker {preferred}, is not a live member of the ISR {:?}",
                state.isr
            ),
        ));
    }
    bumped(state, preferred, state.isr.clone(), false)
}

fn unclean_change(
    image: &MetadataImage,
    state: &PartitionState,
    topic: &str,
    partition: i32,
) -> Result<PartitionChange, Refusal> {
    if state.leader != NO_LEADER {
        return Err(Refusal::new(
            ErrorCode::ElectionNotNeeded,
            format!("{topic}-{partition} has a leader, broker {}", state.leader),
        ));
    }
    // A live ISR member first (nothing acknowledged is lost), then any live replica.
    if let Some(&b) = state
        .replicas
        .iter()
        .find(|b| state.isr.contains(b) && is_live(image, **b))
    {
        return bumped(state, b, state.isr.clone(), false);
    }
    match state.replicas.iter().find(|b| is_live(image, **b)) {
        Some(&b) => bumped(state, b, vec![b], true),
        None => Err(Refusal::new(
            ErrorCode::EligibleLeadersNotAvailable,
            format!(
                "no replica of {topic}-{partition} ({:?}) is live",
                state.replicas
            ),
        )),
    }
}

/// Every partition of the image, in topic-name order (ElectLeaders with no partitions named).
pub fn all_partitions(image: &MetadataImage) -> Vec<(String, i32)> {
    image
        .topics()
        .flat_map(|t| (0..t.partitions.len() as i32).map(move |p| (t.name.clone(), p)))
        .collect()
}

#[cfg(test)]
#[path = "topic_admin_tests.rs"]
mod tests;
