//! Consumer-group administration both fronts call: DeleteGroups and OffsetDelete.
//!
//! Each group is routed, like every group request (`handlers::groups`), to the core owning its
//! `__consumer_offsets` partition on the broker leading that partition; the coordinator there
//! decides and answers once its tombstones are durable (`spool_core::group`'s `delete`). What
//! only the metadata image can say is decided here: an OffsetDelete partition of a topic or
//! partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION, as Kafka's `KafkaApis` does.
//!
//! Unlike JoinGroup, nothing here creates the offsets topic: without it no group exists, so
//! every group is GROUP_ID_NOT_FOUND. A group led by another broker gets NOT_COORDINATOR (the
//! client finds the coordinator and retries there). Requests are bounded by the frame size.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use spool_protocol::ErrorCode;

use crate::group::{
    DeleteOffsetsArgs, GroupAnswer, GroupCall, Response, GROUP_ID_BYTES_MAX, OFFSETS_TOPIC,
};
use crate::requests::TopicPartition;
use crate::shard::Shard;

/// The core coordinating `group_id` on this broker, or why it is not here.
fn coordinator_core(shard: &Rc<Shard>, group_id: &str) -> Result<usize, ErrorCode> {
    if group_id.is_empty() || group_id.len() > GROUP_ID_BYTES_MAX {
        // JoinGroup refuses such ids, so no group has one.
        return Err(ErrorCode::GroupIdNotFound);
    }
    let Some(partitions) = crate::ops::partition_count(shard, OFFSETS_TOPIC) else {
        return Err(ErrorCode::GroupIdNotFound);
    };
    let (leader, core) = crate::handlers::groups::coordinator_at(shard, group_id, partitions)?;
    if leader != shard.config.node_id {
        return Err(ErrorCode::NotCoordinator);
    }
    Ok(core)
}

/// DeleteGroups: (group id, error) per group, in request order. Kafka's errors:
/// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
/// COORDINATOR_NOT_AVAILABLE.
pub async fn delete_groups(shard: &Rc<Shard>, groups: Vec<String>) -> Vec<(String, ErrorCode)> {
    // One call per coordinator core, carrying its groups.
    let mut decided: HashMap<String, ErrorCode> = HashMap::new();
    let mut by_core: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for g in &groups {
        if !seen.insert(g.as_str()) {
            continue;
        }
        match coordinator_core(shard, g) {
            Ok(core) => by_core.entry(core).or_default().push(g.clone()),
            Err(c) => {
                decided.insert(g.clone(), c);
            }
        }
    }
    for (core, gs) in by_core {
        match shard.call(core, GroupCall::DeleteGroups(gs.clone())).await {
            Ok(GroupAnswer::Response(Response::DeleteGroups(r))) => decided.extend(r),
            _ => decided.extend(
                gs.into_iter()
                    .map(|g| (g, ErrorCode::CoordinatorNotAvailable)),
            ),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let c = decided
                .get(&g)
                .copied()
                .unwrap_or(ErrorCode::UnknownServerError);
            (g, c)
        })
        .collect()
}

/// OffsetDelete: (partition, error) per partition in request order, or `Err` with the top-level
/// error (INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR,
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE). Per partition: NONE (deleted, or
/// there was none), GROUP_SUBSCRIBED_TO_TOPIC, UNKNOWN_TOPIC_OR_PARTITION.
pub async fn delete_offsets(
    shard: &Rc<Shard>,
    group: String,
    partitions: Vec<TopicPartition>,
) -> Result<Vec<(TopicPartition, ErrorCode)>, ErrorCode> {
    if group.is_empty() {
        return Err(ErrorCode::InvalidGroupId);
    }
    let core = coordinator_core(shard, &group)?;
    let known: Vec<(String, i32)> = partitions
        .iter()
        .filter(|tp| {
            crate::ops::partition_count(shard, &tp.topic)
                .is_some_and(|n| (0..n).contains(&tp.partition))
        })
        .map(|tp| (tp.topic.clone(), tp.partition))
        .collect();
    let call = GroupCall::DeleteOffsets(DeleteOffsetsArgs {
        group_id: group,
        partitions: known,
    });
    let per = match shard.call(core, call).await {
        Ok(GroupAnswer::Response(Response::DeleteOffsets(ErrorCode::None, per))) => per,
        Ok(GroupAnswer::Response(Response::DeleteOffsets(top, _))) => return Err(top),
        _ => return Err(ErrorCode::CoordinatorNotAvailable),
    };
    let decided: HashMap<(String, i32), ErrorCode> =
        per.into_iter().map(|(t, p, c)| ((t, p), c)).collect();
    Ok(partitions
        .into_iter()
        .map(|tp| {
            let c = decided
                .get(&(tp.topic.clone(), tp.partition))
                .copied()
                .unwrap_or(ErrorCode::UnknownTopicOrPartition);
            (tp, c)
        })
        .collect())
}
