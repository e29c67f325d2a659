//! Builders for the group member's requests and readers for the parts of the responses it needs,
//! so the member core reads as decisions only.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::client::TopicPartition;
use crate::wire::{
    CoordinatorType, FindCoordinatorRequestT, HeartbeatRequestT, JoinGroupRequestProtocolT,
    JoinGroupRequestT, LeaveGroupRequestT, MemberIdentityT, OffsetCommitRequestPartitionT,
    OffsetCommitRequestT, OffsetCommitRequestTopicT, OffsetCommitResponseT, OffsetFetchRequestT,
    OffsetFetchRequestTopicT, OffsetFetchResponseT, RequestBodyT, SyncGroupRequestAssignmentT,
    SyncGroupRequestT,
};
use crate::ErrorCode;

use super::protocol::PROTOCOL_TYPE;

/// Who the member is, as every group request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub generation: i32,
    pub group_instance_id: Option<&'a str>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

pub fn find_coordinator(group_id: &str) -> RequestBodyT {
    let mut r = FindCoordinatorRequestT::default();
    r.key = group_id.to_owned();
    r.key_type = CoordinatorType::Group;
    RequestBodyT::FindCoordinatorRequest(Box::new(r))
}

pub fn join_group(
    id: &Identity<'_>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_name: &str,
    metadata: Bytes,
    reason: &str,
) -> RequestBodyT {
    let mut r = JoinGroupRequestT::default();
    r.group_id = id.group_id.to_owned();
    r.session_timeout_ms = session_timeout_ms;
    r.rebalance_timeout_ms = rebalance_timeout_ms;
    r.member_id = Some(id.member_id.to_owned());
    r.group_instance_id = id.group_instance_id.map(str::to_owned);
    r.protocol_type = Some(PROTOCOL_TYPE.to_owned());
    r.protocols = Some(vec![JoinGroupRequestProtocolT {
        name: protocol_name.to_owned(),
        metadata: Some(metadata.to_vec()),
    }]);
    r.reason = non_empty(reason);
    RequestBodyT::JoinGroupRequest(Box::new(r))
}

pub fn sync_group(
    id: &Identity<'_>,
    protocol_name: &str,
    assignments: Vec<(String, Bytes)>,
) -> RequestBodyT {
    let mut r = SyncGroupRequestT::default();
    r.group_id = id.group_id.to_owned();
    r.generation_id = id.generation;
    r.member_id = Some(id.member_id.to_owned());
    r.group_instance_id = id.group_instance_id.map(str::to_owned);
    r.protocol_type = Some(PROTOCOL_TYPE.to_owned());
    r.protocol_name = Some(protocol_name.to_owned());
    r.assignments = Some(
        assignments
            .into_iter()
            .map(|(member_id, a)| SyncGroupRequestAssignmentT {
                member_id,
                assignment: Some(a.to_vec()),
            })
            .collect(),
    );
    RequestBodyT::SyncGroupRequest(Box::new(r))
}

pub fn heartbeat(id: &Identity<'_>) -> RequestBodyT {
    let mut r = HeartbeatRequestT::default();
    r.group_id = id.group_id.to_owned();
    r.generation_id = id.generation;
    r.member_id = Some(id.member_id.to_owned());
    r.group_instance_id = id.group_instance_id.map(str::to_owned);
    RequestBodyT::HeartbeatRequest(Box::new(r))
}

pub fn leave_group(id: &Identity<'_>, reason: &str) -> RequestBodyT {
    let mut r = LeaveGroupRequestT::default();
    r.group_id = id.group_id.to_owned();
    r.members = Some(vec![MemberIdentityT {
        member_id: Some(id.member_id.to_owned()),
        group_instance_id: id.group_instance_id.map(str::to_owned),
        reason: non_empty(reason),
    }]);
    RequestBodyT::LeaveGroupRequest(Box::new(r))
}

fn by_topic<T: Clone>(items: &[(TopicPartition, T)]) -> BTreeMap<String, Vec<(i32, T)>> {
    let mut m: BTreeMap<String, Vec<(i32, T)>> = BTreeMap::new();
    for (tp, v) in items {
        m.entry(tp.topic.clone())
            .or_default()
            .push((tp.partition, v.clone()));
    }
    m
}

/// An OffsetCommit; generation -1 and an empty member id make it a "simple" commit from outside
/// any generation (the admin's reset-offsets).
pub fn offset_commit(id: &Identity<'_>, offsets: &[(TopicPartition, i64)]) -> RequestBodyT {
    let mut r = OffsetCommitRequestT::default();
    r.group_id = id.group_id.to_owned();
    r.generation_id = id.generation;
    r.member_id = Some(id.member_id.to_owned());
    r.group_instance_id = id.group_instance_id.map(str::to_owned);
    r.topics = Some(
        by_topic(offsets)
            .into_iter()
            .map(|(name, ps)| OffsetCommitRequestTopicT {
                name,
                partitions: Some(
                    ps.into_iter()
                        .map(|(p, offset)| {
                            let mut c = OffsetCommitRequestPartitionT::default();
                            c.partition_index = p;
                            c.committed_offset = offset;
                            c
                        })
                        .collect(),
                ),
            })
            .collect(),
    );
    RequestBodyT::OffsetCommitRequest(Box::new(r))
}

/// The first error in an OffsetCommit response (`None` when every partition is committed).
pub fn offset_commit_error(r: &OffsetCommitResponseT) -> ErrorCode {
    r.topics
        .iter()
        .flatten()
        .flat_map(|t| t.partitions.iter().flatten())
        .map(|p| ErrorCode::from(p.error_code))
        .find(|c| !c.is_ok())
        .unwrap_or(ErrorCode::None)
}

/// An OffsetFetch for `partitions`, or for everything the group committed when `None`.
pub fn offset_fetch(group_id: &str, partitions: Option<&[TopicPartition]>) -> RequestBodyT {
    let mut r = OffsetFetchRequestT::default();
    r.group_id = group_id.to_owned();
    r.require_stable = true;
    r.topics = partitions.map(|ps| {
        let pairs: Vec<(TopicPartition, ())> = ps.iter().map(|tp| (tp.clone(), ())).collect();
        by_topic(&pairs)
            .into_iter()
            .map(|(name, ps)| OffsetFetchRequestTopicT {
                name,
                partition_indexes: Some(ps.into_iter().map(|(p, ())| p).collect()),
            })
            .collect()
    });
    RequestBodyT::OffsetFetchRequest(Box::new(r))
}

/// An OffsetFetch response's committed offsets (-1: none), or its first error.
pub fn offset_fetch_result(
    r: &OffsetFetchResponseT,
) -> Result<Vec<(TopicPartition, i64)>, ErrorCode> {
    let top = ErrorCode::from(r.error_code);
    if !top.is_ok() {
        return Err(top);
    }
    let mut out = Vec::new();
    for t in r.topics.iter().flatten() {
        for p in t.partitions.iter().flatten() {
            let code = ErrorCode::from(p.error_code);
            if !code.is_ok() {
                return Err(code);
            }
            out.push((
                TopicPartition::new(t.name.clone(), p.partition_index),
                p.committed_offset,
            ));
        }
    }
    Ok(out)
}

/// Errors after which the coordinator must be found again.
pub fn is_coordinator_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::NetworkException
    )
}
