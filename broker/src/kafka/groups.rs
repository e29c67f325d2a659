//! The consumer-group APIs on the Kafka front: each Kafka request is translated field by field
//! into the native object-API struct, handed to `handlers::groups` (the same coordinator the
//! native front uses), and the answer translated back for the request's version.
//!
//! Version notes: JoinGroup v0 has no rebalance timeout (Kafka uses the session timeout);
//! LeaveGroup before v3 names one member and answers with a top-level error only; FindCoordinator
//! answers with the coordinating broker's advertised Kafka address.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::{
    describe_groups_response, join_group_response, leave_group_response, list_groups_response,
    offset_commit_response, offset_fetch_response, BrokerId, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use spool_protocol::wire;
use spool_protocol::ErrorCode;

use super::{kstr, Peer};
use crate::front_rules::build;
use crate::handlers::groups::{self as coordinator, ClientInfo};
use crate::shard::Shard;

fn code(c: wire::ErrorCode) -> i16 {
    ErrorCode::from(c) as i16
}

fn owned(s: &StrBytes) -> String {
    s.as_str().to_owned()
}

/// A non-empty string, or `None` (the native structs' "absent").
fn some(s: &StrBytes) -> Option<String> {
    (!s.is_empty()).then(|| owned(s))
}

fn kbytes(b: Option<Vec<u8>>) -> Bytes {
    b.map(Bytes::from).unwrap_or_default()
}

fn group(g: &GroupId) -> String {
    g.0.as_str().to_owned()
}

pub async fn find_coordinator(
    shard: &Rc<Shard>,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let key_type = match req.key_type {
        1 => wire::CoordinatorType::Transaction,
        _ => wire::CoordinatorType::Group,
    };
    let native = build!(wire::FindCoordinatorRequestT {
        key: owned(&req.key),
        key_type: key_type,
    });
    let r = coordinator::find_coordinator(shard, native, "kafka").await;
    let host = r.host.clone().unwrap_or_default();
    let port = u16::try_from(r.port).unwrap_or(0);
    find_coordinator_answer(r, &host, port)
}

pub(super) fn find_coordinator_answer(
    r: wire::FindCoordinatorResponseT,
    host: &str,
    port: u16,
) -> FindCoordinatorResponse {
    let error = code(r.error_code);
    let resp = FindCoordinatorResponse::default()
        .with_error_code(error)
        .with_error_message(r.error_message.map(kstr));
    if error != 0 {
        return resp.with_node_id(BrokerId(-1)).with_port(-1);
    }
    resp.with_node_id(BrokerId(r.node_id))
        .with_host(kstr(host))
        .with_port(i32::from(port))
}

pub async fn join_group(
    shard: &Rc<Shard>,
    req: JoinGroupRequest,
    version: i16,
    client_id: String,
    peer: &Peer,
) -> JoinGroupResponse {
    let rebalance_timeout_ms = if version == 0 {
        req.session_timeout_ms
    } else {
        req.rebalance_timeout_ms
    };
    let native = build!(wire::JoinGroupRequestT {
        group_id: group(&req.group_id),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: rebalance_timeout_ms,
        member_id: some(&req.member_id),
        group_instance_id: req.group_instance_id.as_ref().map(owned),
        protocol_type: Some(owned(&req.protocol_type)),
        protocols: Some(
            req.protocols
                .iter()
                .map(|p| build!(wire::JoinGroupRequestProtocolT {
                    name: owned(&p.name),
                    metadata: Some(p.metadata.to_vec()),
                }))
                .collect(),
        ),
        reason: req.reason.as_ref().map(owned),
    });
    let client = ClientInfo {
        client_id,
        client_host: peer.host.clone(),
    };
    let r = coordinator::join_group(shard, native, client).await;
    join_group_answer(r, version)
}

pub(super) fn join_group_answer(r: wire::JoinGroupResponseT, version: i16) -> JoinGroupResponse {
    let mut resp = JoinGroupResponse::default()
        .with_error_code(code(r.error_code))
        .with_generation_id(r.generation_id)
        .with_protocol_name(r.protocol_name.map(kstr))
        .with_leader(kstr(r.leader.unwrap_or_default()))
        .with_member_id(kstr(r.member_id.unwrap_or_default()))
        .with_members(
            r.members
                .unwrap_or_default()
                .into_iter()
                .map(|m| {
                    join_group_response::JoinGroupResponseMember::default()
                        .with_member_id(kstr(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(kstr))
                        .with_metadata(kbytes(m.metadata))
                })
                .collect(),
        );
    if version >= 7 {
        resp = resp.with_protocol_type(r.protocol_type.map(kstr));
    }
    if version >= 9 {
        resp = resp.with_skip_assignment(r.skip_assignment);
    }
    resp
}

pub async fn sync_group(shard: &Rc<Shard>, req: SyncGroupRequest) -> SyncGroupResponse {
    let native = build!(wire::SyncGroupRequestT {
        group_id: group(&req.group_id),
        generation_id: req.generation_id,
        member_id: some(&req.member_id),
        group_instance_id: req.group_instance_id.as_ref().map(owned),
        protocol_type: req.protocol_type.as_ref().map(owned),
        protocol_name: req.protocol_name.as_ref().map(owned),
        assignments: Some(
            req.assignments
                .iter()
                .map(|a| build!(wire::SyncGroupRequestAssignmentT {
                    member_id: owned(&a.member_id),
                    assignment: Some(a.assignment.to_vec()),
                }))
                .collect(),
        ),
    });
    let r = coordinator::sync_group(shard, native).await;
    sync_group_answer(r)
}

pub(super) fn sync_group_answer(r: wire::SyncGroupResponseT) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(code(r.error_code))
        .with_protocol_type(r.protocol_type.map(kstr))
        .with_protocol_name(r.protocol_name.map(kstr))
        .with_assignment(kbytes(r.assignment))
}

pub async fn heartbeat(shard: &Rc<Shard>, req: HeartbeatRequest) -> HeartbeatResponse {
    let native = build!(wire::HeartbeatRequestT {
        group_id: group(&req.group_id),
        generation_id: req.generation_id,
        member_id: some(&req.member_id),
        group_instance_id: req.group_instance_id.as_ref().map(owned),
    });
    let r = coordinator::heartbeat(shard, native).await;
    heartbeat_answer(r)
}

pub(super) fn heartbeat_answer(r: wire::HeartbeatResponseT) -> HeartbeatResponse {
    HeartbeatResponse::default().with_error_code(code(r.error_code))
}

pub async fn leave_group(
    shard: &Rc<Shard>,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                build!(wire::MemberIdentityT {
                    member_id: some(&m.member_id),
                    group_instance_id: m.group_instance_id.as_ref().map(owned),
                    reason: m.reason.as_ref().map(owned),
                })
            })
            .collect()
    } else {
        vec![build!(wire::MemberIdentityT {
            member_id: some(&req.member_id),
        })]
    };
    let native = build!(wire::LeaveGroupRequestT {
        group_id: group(&req.group_id),
        members: Some(members),
    });
    let r = coordinator::leave_group(shard, native).await;
    leave_group_answer(r, version)
}

pub(super) fn leave_group_answer(r: wire::LeaveGroupResponseT, version: i16) -> LeaveGroupResponse {
    let mut resp = LeaveGroupResponse::default().with_error_code(code(r.error_code));
    if version >= 3 {
        resp = resp.with_members(
            r.members
                .unwrap_or_default()
                .into_iter()
                .map(|m| {
                    leave_group_response::MemberResponse::default()
                        .with_member_id(kstr(m.member_id.unwrap_or_default()))
                        .with_group_instance_id(m.group_instance_id.map(kstr))
                        .with_error_code(code(m.error_code))
                })
                .collect(),
        );
    } else if r.error_code == wire::ErrorCode::from(ErrorCode::None) {
        // One member: its own outcome is the answer.
        if let Some(m) = r.members.unwrap_or_default().first() {
            resp = resp.with_error_code(code(m.error_code));
        }
    }
    resp
}

pub async fn offset_commit(shard: &Rc<Shard>, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let native = build!(wire::OffsetCommitRequestT {
        group_id: group(&req.group_id),
        generation_id: req.generation_id_or_member_epoch,
        member_id: some(&req.member_id),
        group_instance_id: req.group_instance_id.as_ref().map(owned),
        retention_time_ms: req.retention_time_ms,
        topics: Some(
            req.topics
                .iter()
                .map(|t| build!(wire::OffsetCommitRequestTopicT {
                    name: t.name.0.as_str().to_owned(),
                    partitions: Some(
                        t.partitions
                            .iter()
                            .map(|p| build!(wire::OffsetCommitRequestPartitionT {
                                partition_index: p.partition_index,
                                committed_offset: p.committed_offset,
                                committed_leader_epoch: p.committed_leader_epoch,
                                committed_metadata: p.committed_metadata.as_ref().map(owned),
                            }))
                            .collect(),
                    ),
                }))
                .collect(),
        ),
    });
    let r = coordinator::offset_commit(shard, native).await;
    offset_commit_answer(r)
}

pub(super) fn offset_commit_answer(r: wire::OffsetCommitResponseT) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        r.topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                offset_commit_response::OffsetCommitResponseTopic::default()
                    .with_name(TopicName(kstr(t.name)))
                    .with_partitions(
                        t.partitions
                            .unwrap_or_default()
                            .into_iter()
                            .map(|p| {
                                offset_commit_response::OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code(p.error_code))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

pub async fn offset_fetch(
    shard: &Rc<Shard>,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let native = build!(wire::OffsetFetchRequestT {
        group_id: group(&req.group_id),
        topics: req.topics.as_ref().map(|ts| ts
            .iter()
            .map(|t| build!(wire::OffsetFetchRequestTopicT {
                name: t.name.0.as_str().to_owned(),
                partition_indexes: Some(t.partition_indexes.clone()),
            }))
            .collect()),
        require_stable: req.require_stable,
    });
    let r = coordinator::offset_fetch(shard, native).await;
    offset_fetch_answer(r, version)
}

pub(super) fn offset_fetch_answer(
    r: wire::OffsetFetchResponseT,
    version: i16,
) -> OffsetFetchResponse {
    let top_error = code(r.error_code);
    // v1 has no top-level error: the group's error goes on every partition.
    let partition_error = |own: i16| {
        if version < 2 && own == 0 {
            top_error
        } else {
            own
        }
    };
    let topics = r
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(TopicName(kstr(t.name)))
                .with_partitions(
                    t.partitions
                        .unwrap_or_default()
                        .into_iter()
                        .map(|p| {
                            offset_fetch_response::OffsetFetchResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_committed_offset(p.committed_offset)
                                .with_committed_leader_epoch(p.committed_leader_epoch)
                                .with_metadata(Some(kstr(p.metadata.unwrap_or_default())))
                                .with_error_code(partition_error(code(p.error_code)))
                        })
                        .collect(),
                )
        })
        .collect();
    let resp = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        resp.with_error_code(top_error)
    } else {
        resp
    }
}

/// DescribeGroups v3+ authorized operations when asked (no authorizer: READ, DELETE, DESCRIBE).
const GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8);

pub async fn describe_groups(
    shard: &Rc<Shard>,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let operations = if version >= 3 && req.include_authorized_operations {
        GROUP_OPERATIONS
    } else {
        i32::MIN
    };
    let native = build!(wire::DescribeGroupsRequestT {
        groups: Some(req.groups.iter().map(group).collect()),
        include_authorized_operations: req.include_authorized_operations,
    });
    let r = coordinator::describe_groups(shard, native).await;
    describe_groups_answer(r, operations)
}

pub(super) fn describe_groups_answer(
    r: wire::DescribeGroupsResponseT,
    operations: i32,
) -> DescribeGroupsResponse {
    DescribeGroupsResponse::default().with_groups(
        r.groups
            .unwrap_or_default()
            .into_iter()
            .map(|g| {
                describe_groups_response::DescribedGroup::default()
                    .with_error_code(code(g.error_code))
                    .with_group_id(GroupId(kstr(g.group_id)))
                    .with_group_state(kstr(g.group_state.unwrap_or_default()))
                    .with_protocol_type(kstr(g.protocol_type.unwrap_or_default()))
                    .with_protocol_data(kstr(g.protocol_data.unwrap_or_default()))
                    .with_authorized_operations(operations)
                    .with_members(
                        g.members
                            .unwrap_or_default()
                            .into_iter()
                            .map(|m| {
                                describe_groups_response::DescribedGroupMember::default()
                                    .with_member_id(kstr(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(kstr))
                                    .with_client_id(kstr(m.client_id.unwrap_or_default()))
                                    .with_client_host(kstr(m.client_host.unwrap_or_default()))
                                    .with_member_metadata(kbytes(m.member_metadata))
                                    .with_member_assignment(kbytes(m.member_assignment))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

pub async fn list_groups(shard: &Rc<Shard>, req: ListGroupsRequest) -> ListGroupsResponse {
    let native = build!(wire::ListGroupsRequestT {
        states_filter: Some(req.states_filter.iter().map(owned).collect()),
    });
    let r = coordinator::list_groups(shard, native).await;
    list_groups_answer(r)
}

pub(super) fn list_groups_answer(r: wire::ListGroupsResponseT) -> ListGroupsResponse {
    ListGroupsResponse::default()
        .with_error_code(code(r.error_code))
        .with_groups(
            r.groups
                .unwrap_or_default()
                .into_iter()
                .map(|g| {
                    list_groups_response::ListedGroup::default()
                        .with_group_id(GroupId(kstr(g.group_id)))
                        .with_protocol_type(kstr(g.protocol_type.unwrap_or_default()))
                        .with_group_state(kstr(g.group_state.unwrap_or_default()))
                })
                .collect(),
        )
}
