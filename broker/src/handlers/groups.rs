//! Consumer-group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, DescribeGroups, ListGroups): the contract both fronts call.
//!
//! Each request is translated into a [`GroupCall`] and routed over the mesh to the core owning
//! the group's `__consumer_offsets` partition (created through the controller on first use);
//! the coordinator there decides (`crate::group`). What only the metadata image can say is
//! checked here: a commit for a topic or partition that does not exist gets
//! UNKNOWN_TOPIC_OR_PARTITION. A group's coordinator is the broker leading its offsets partition:
//! FindCoordinator answers that broker's address on the asking front's listener, and a group
//! request that reaches another broker gets NOT_COORDINATOR.

use std::rc::Rc;

use spool_protocol::wire::{
    self, CoordinatorType, DescribeGroupsRequestT, DescribeGroupsResponseT, DescribedGroupMemberT,
    DescribedGroupT, FindCoordinatorRequestT, FindCoordinatorResponseT, HeartbeatRequestT,
    HeartbeatResponseT, JoinGroupRequestT, JoinGroupResponseMemberT, JoinGroupResponseT,
    LeaveGroupMemberResponseT, LeaveGroupRequestT, LeaveGroupResponseT, ListGroupsRequestT,
    ListGroupsResponseT, ListedGroupT, OffsetCommitRequestT, OffsetCommitResponsePartitionT,
    OffsetCommitResponseT, OffsetCommitResponseTopicT, OffsetFetchRequestT,
    OffsetFetchResponsePartitionT, OffsetFetchResponseT, OffsetFetchResponseTopicT,
    SyncGroupRequestT, SyncGroupResponseT,
};
use spool_protocol::ErrorCode;

use crate::clock::now_ms;
use crate::front_rules::build;
use crate::group::{
    coordinator_partition, CommitArgs, GroupAnswer, GroupCall, HeartbeatArgs, JoinArgs, JoinResult,
    LeaveArgs, OffsetValue, Response, SyncArgs, SyncResult, OFFSETS_TOPIC,
};
use crate::requests::TopicPartition;
use crate::shard::Shard;

/// Who sent a JoinGroup (kept per member for DescribeGroups).
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub client_id: String,
    pub client_host: String,
}

fn code(c: ErrorCode) -> wire::ErrorCode {
    wire::ErrorCode::from(c)
}

/// Where `group_id` is coordinated: the broker leading its `__consumer_offsets` partition (its
/// coordinator moves with that leadership, DESIGN §8) and the core that owns the partition on
/// every broker.
async fn coordinator_of(shard: &Rc<Shard>, group_id: &str) -> Result<(i32, usize), ErrorCode> {
    if group_id.is_empty() || group_id.len() > crate::group::GROUP_ID_BYTES_MAX {
        return Err(ErrorCode::InvalidGroupId);
    }
    let partitions = super::internal_topics::offsets_topic(shard).await?;
    coordinator_at(shard, group_id, partitions)
}

/// The broker leading `group_id`'s partition of an offsets topic with `partitions` partitions,
/// and the core owning that partition here: COORDINATOR_NOT_AVAILABLE while it has no leader or
/// is not open on this broker.
pub(crate) fn coordinator_at(
    shard: &Shard,
    group_id: &str,
    partitions: i32,
) -> Result<(i32, usize), ErrorCode> {
    let tp = TopicPartition::new(OFFSETS_TOPIC, coordinator_partition(group_id, partitions));
    super::internal_topics::leader_and_core(shard, &tp)
}

/// Routes `call` to the group's coordinator core; NOT_COORDINATOR when another broker leads the
/// group's offsets partition (the client finds the coordinator again).
async fn call(
    shard: &Rc<Shard>,
    group_id: &str,
    call: GroupCall,
) -> Result<GroupAnswer, ErrorCode> {
    let (node, core) = coordinator_of(shard, group_id).await?;
    if node != shard.config.node_id {
        return Err(ErrorCode::NotCoordinator);
    }
    match shard.call(core, call).await {
        Ok(GroupAnswer::Unavailable) | Err(_) => Err(ErrorCode::CoordinatorNotAvailable),
        Ok(a) => Ok(a),
    }
}

async fn respond(shard: &Rc<Shard>, group_id: &str, c: GroupCall) -> Result<Response, ErrorCode> {
    match call(shard, group_id, c).await? {
        GroupAnswer::Response(r) => Ok(r),
        _ => Err(ErrorCode::CoordinatorNotAvailable),
    }
}

/// The group's (or transactional id's) coordinator with its address on `listener` (`native` here, `kafka` for the Kafka
/// front).
pub async fn find_coordinator(
    shard: &Rc<Shard>,
    req: FindCoordinatorRequestT,
    listener: &str,
) -> FindCoordinatorResponseT {
    let error = |c: ErrorCode, message: &str| {
        build!(FindCoordinatorResponseT {
            error_code: code(c),
            error_message: Some(message.to_string()),
        })
    };
    let node = if req.key_type == CoordinatorType::Transaction {
        match super::txn::coordinator_of(shard, &req.key).await {
            Ok((node, _)) => node,
            Err(c) => return error(c, "no coordinator for this transactional id"),
        }
    } else {
        match coordinator_of(shard, &req.key).await {
            Ok((node, _)) => node,
            Err(c) => return error(c, "no coordinator for this group"),
        }
    };
    let Some(address) = shard
        .brokers(listener)
        .into_iter()
        .find(|b| b.node_id == node)
    else {
        return error(
            ErrorCode::CoordinatorNotAvailable,
            "the coordinator's broker is not live",
        );
    };
    build!(FindCoordinatorResponseT {
        error_code: code(ErrorCode::None),
        node_id: node,
        host: Some(address.host),
        port: i32::from(address.port),
    })
}

fn join_response(r: JoinResult) -> JoinGroupResponseT {
    build!(JoinGroupResponseT {
        error_code: code(r.error),
        generation_id: r.generation,
        protocol_type: r.protocol_type,
        protocol_name: r.protocol_name,
        leader: Some(r.leader),
        skip_assignment: r.skip_assignment,
        member_id: Some(r.member_id),
        members: Some(
            r.members
                .into_iter()
                .map(|(m, i, md)| build!(JoinGroupResponseMemberT {
                    member_id: m,
                    group_instance_id: i,
                    metadata: Some(md),
                }))
                .collect(),
        ),
    })
}

pub async fn join_group(
    shard: &Rc<Shard>,
    req: JoinGroupRequestT,
    client: ClientInfo,
) -> JoinGroupResponseT {
    let member_id = req.member_id.clone().unwrap_or_default();
    let args = JoinArgs {
        group_id: req.group_id.clone(),
        member_id: member_id.clone(),
        group_instance_id: req.group_instance_id.filter(|i| !i.is_empty()),
        client_id: client.client_id,
        client_host: client.client_host,
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        protocol_type: req.protocol_type.unwrap_or_default(),
        protocols: req
            .protocols
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.name, p.metadata.unwrap_or_default()))
            .collect(),
    };
    match respond(shard, &req.group_id, GroupCall::Join(args)).await {
        Ok(Response::Join(r)) => join_response(r),
        Ok(_) => join_response(JoinResult::error(ErrorCode::UnknownServerError, &member_id)),
        Err(c) => join_response(JoinResult::error(c, &member_id)),
    }
}

fn sync_response(r: SyncResult) -> SyncGroupResponseT {
    build!(SyncGroupResponseT {
        error_code: code(r.error),
        protocol_type: r.protocol_type,
        protocol_name: r.protocol_name,
        assignment: Some(r.assignment),
    })
}

pub async fn sync_group(shard: &Rc<Shard>, req: SyncGroupRequestT) -> SyncGroupResponseT {
    let args = SyncArgs {
        group_id: req.group_id.clone(),
        generation: req.generation_id,
        member_id: req.member_id.unwrap_or_default(),
        group_instance_id: req.group_instance_id.filter(|i| !i.is_empty()),
        assignments: req
            .assignments
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.member_id, a.assignment.unwrap_or_default()))
            .collect(),
    };
    match respond(shard, &req.group_id, GroupCall::Sync(args)).await {
        Ok(Response::Sync(r)) => sync_response(r),
        Ok(_) => sync_response(SyncResult::error(ErrorCode::UnknownServerError)),
        Err(c) => sync_response(SyncResult::error(c)),
    }
}

pub async fn heartbeat(shard: &Rc<Shard>, req: HeartbeatRequestT) -> HeartbeatResponseT {
    let args = HeartbeatArgs {
        group_id: req.group_id.clone(),
        generation: req.generation_id,
        member_id: req.member_id.unwrap_or_default(),
        group_instance_id: req.group_instance_id.filter(|i| !i.is_empty()),
    };
    let c = match respond(shard, &req.group_id, GroupCall::Heartbeat(args)).await {
        Ok(Response::Heartbeat(c)) => c,
        Ok(_) => ErrorCode::UnknownServerError,
        Err(c) => c,
    };
    build!(HeartbeatResponseT {
        error_code: code(c)
    })
}

pub async fn leave_group(shard: &Rc<Shard>, req: LeaveGroupRequestT) -> LeaveGroupResponseT {
    let members: Vec<(String, Option<String>)> = req
        .members
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.member_id.unwrap_or_default(),
                m.group_instance_id.filter(|i| !i.is_empty()),
            )
        })
        .collect();
    let args = LeaveArgs {
        group_id: req.group_id.clone(),
        members: members.clone(),
    };
    let (top, per_member) = match respond(shard, &req.group_id, GroupCall::Leave(args)).await {
        Ok(Response::Leave(top, m)) => (top, m),
        Ok(_) => (ErrorCode::UnknownServerError, Vec::new()),
        Err(c) => (c, Vec::new()),
    };
    build!(LeaveGroupResponseT {
        error_code: code(top),
        members: Some(
            per_member
                .into_iter()
                .map(|(m, i, c)| build!(LeaveGroupMemberResponseT {
                    member_id: Some(m),
                    group_instance_id: i,
                    error_code: code(c),
                }))
                .collect(),
        ),
    })
}

/// Groups per-partition results back into topics, in first-seen topic order.
fn commit_response(results: Vec<(String, i32, ErrorCode)>) -> OffsetCommitResponseT {
    let mut topics: Vec<OffsetCommitResponseTopicT> = Vec::new();
    for (t, p, c) in results {
        let part = build!(OffsetCommitResponsePartitionT {
            partition_index: p,
            error_code: code(c),
        });
        match topics.iter_mut().find(|x| x.name == t) {
            Some(x) => x.partitions.get_or_insert_with(Vec::new).push(part),
            None => topics.push(build!(OffsetCommitResponseTopicT {
                name: t,
                partitions: Some(vec![part]),
            })),
        }
    }
    build!(OffsetCommitResponseT {
        topics: Some(topics)
    })
}

pub async fn offset_commit(shard: &Rc<Shard>, req: OffsetCommitRequestT) -> OffsetCommitResponseT {
    commit_offsets(shard, req, None).await
}

/// OffsetCommit, or TxnOffsetCommit with the transactional producer's (id, epoch): its offsets
/// count only once the transaction commits (`spool_core::group::txn_offsets`).
pub async fn commit_offsets(
    shard: &Rc<Shard>,
    req: OffsetCommitRequestT,
    producer: Option<(i64, i16)>,
) -> OffsetCommitResponseT {
    let now = now_ms();
    // (topic, partition, code decided here or None = for the coordinator, value)
    let mut order: Vec<(String, i32, Option<ErrorCode>)> = Vec::new();
    let mut offsets = Vec::new();
    for t in req.topics.unwrap_or_default() {
        let count = crate::ops::partition_count(shard, &t.name);
        for p in t.partitions.unwrap_or_default() {
            let known = count.is_some_and(|n| (0..n).contains(&p.partition_index));
            if known {
                offsets.push((
                    t.name.clone(),
                    p.partition_index,
                    OffsetValue {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.unwrap_or_default(),
                        commit_timestamp_ms: now,
                    },
                ));
                order.push((t.name.clone(), p.partition_index, None));
            } else {
                order.push((
                    t.name.clone(),
                    p.partition_index,
                    Some(ErrorCode::UnknownTopicOrPartition),
                ));
            }
        }
    }
    let decided: Vec<(String, i32, ErrorCode)> = if offsets.is_empty() {
        Vec::new()
    } else {
        let args = CommitArgs {
            group_id: req.group_id.clone(),
            generation: req.generation_id,
            member_id: req.member_id.unwrap_or_default(),
            group_instance_id: req.group_instance_id.filter(|i| !i.is_empty()),
            offsets: offsets.clone(),
            producer,
        };
        match respond(shard, &req.group_id, GroupCall::Commit(args)).await {
            Ok(Response::Commit(r)) => r,
            Ok(_) => offsets
                .iter()
                .map(|(t, p, _)| (t.clone(), *p, ErrorCode::UnknownServerError))
                .collect(),
            Err(c) => offsets.iter().map(|(t, p, _)| (t.clone(), *p, c)).collect(),
        }
    };
    let mut decided = decided.into_iter();
    let results = order
        .into_iter()
        .map(|(t, p, c)| match c {
            Some(c) => (t, p, c),
            None => decided
                .next()
                .map_or((t, p, ErrorCode::UnknownServerError), |(t, p, c)| (t, p, c)),
        })
        .collect();
    commit_response(results)
}

pub async fn offset_fetch(shard: &Rc<Shard>, req: OffsetFetchRequestT) -> OffsetFetchResponseT {
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name, t.partition_indexes.unwrap_or_default()))
            .collect::<Vec<_>>()
    });
    let answer = call(
        shard,
        &req.group_id,
        GroupCall::FetchOffsets {
            group_id: req.group_id.clone(),
            topics,
            require_stable: req.require_stable,
        },
    )
    .await;
    let offsets = match answer {
        Ok(GroupAnswer::Offsets(Ok(o))) => o,
        Ok(GroupAnswer::Offsets(Err(c))) | Err(c) => {
            return build!(OffsetFetchResponseT {
                error_code: code(c),
                topics: Some(Vec::new()),
            })
        }
        Ok(_) => {
            return build!(OffsetFetchResponseT {
                error_code: code(ErrorCode::UnknownServerError),
                topics: Some(Vec::new()),
            })
        }
    };
    let mut topics: Vec<OffsetFetchResponseTopicT> = Vec::new();
    for o in offsets {
        let (t, p, v) = (o.topic, o.partition, o.committed);
        let part = build!(OffsetFetchResponsePartitionT {
            partition_index: p,
            committed_offset: v.as_ref().map_or(-1, |v| v.offset),
            committed_leader_epoch: v.as_ref().map_or(-1, |v| v.leader_epoch),
            metadata: Some(v.map(|v| v.metadata).unwrap_or_default()),
            error_code: code(o.error),
        });
        match topics.iter_mut().find(|x| x.name == t) {
            Some(x) => x.partitions.get_or_insert_with(Vec::new).push(part),
            None => topics.push(build!(OffsetFetchResponseTopicT {
                name: t,
                partitions: Some(vec![part]),
            })),
        }
    }
    build!(OffsetFetchResponseT {
        error_code: code(ErrorCode::None),
        topics: Some(topics),
    })
}

pub async fn describe_groups(
    shard: &Rc<Shard>,
    req: DescribeGroupsRequestT,
) -> DescribeGroupsResponseT {
    let mut groups = Vec::new();
    for g in req.groups.unwrap_or_default() {
        let answer = call(shard, &g, GroupCall::Describe(g.clone())).await;
        let described = match answer {
            Ok(GroupAnswer::Described(Ok(d))) => build!(DescribedGroupT {
                error_code: code(ErrorCode::None),
                group_id: g,
                group_state: Some(d.state.name().to_string()),
                generation_id: d.generation,
                protocol_type: Some(d.protocol_type),
                protocol_data: Some(d.protocol),
                members: Some(
                    d.members
                        .into_iter()
                        .map(|m| build!(DescribedGroupMemberT {
                            member_id: m.member_id,
                            group_instance_id: m.group_instance_id,
                            client_id: Some(m.client_id),
                            client_host: Some(m.client_host),
                            member_metadata: Some(m.metadata),
                            member_assignment: Some(m.assignment),
                        }))
                        .collect(),
                ),
            }),
            Ok(GroupAnswer::Described(Err(c))) | Err(c) => build!(DescribedGroupT {
                error_code: code(c),
                group_id: g,
                members: Some(Vec::new()),
            }),
            Ok(_) => build!(DescribedGroupT {
                error_code: code(ErrorCode::UnknownServerError),
                group_id: g,
                members: Some(Vec::new()),
            }),
        };
        groups.push(described);
    }
    build!(DescribeGroupsResponseT {
        groups: Some(groups)
    })
}

pub async fn list_groups(shard: &Rc<Shard>, req: ListGroupsRequestT) -> ListGroupsResponseT {
    let filter: Vec<String> = req
        .states_filter
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let mut groups = Vec::new();
    for reply in shard.broadcast(|| GroupCall::List).await {
        let Ok(GroupAnswer::Listed(listed)) = reply else {
            return build!(ListGroupsResponseT {
                error_code: code(ErrorCode::CoordinatorNotAvailable),
                groups: Some(Vec::new()),
            });
        };
        for (g, protocol_type, state) in listed {
            if filter.is_empty() || filter.contains(&state.name().to_ascii_lowercase()) {
                groups.push(build!(ListedGroupT {
                    group_id: g,
                    protocol_type: Some(protocol_type),
                    group_state: Some(state.name().to_string()),
                }));
            }
        }
    }
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    build!(ListGroupsResponseT {
        error_code: code(ErrorCode::None),
        groups: Some(groups),
    })
}
