//! The admin client's consumer-group operations: list and describe groups, fetch a group's
//! committed offsets, commit offsets from outside any generation (reset-offsets), delete a group
//! and delete a group's offsets of some partitions.
//!
//! Every operation but ListGroups goes to the group's coordinator, found with FindCoordinator
//! and cached per group; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS
//! drop the cached coordinator and retry within the operation's timeout. ListGroups asks one
//! broker, which on a single node is every group (a cluster-wide list would ask every broker).

use crate::client::group::protocol::Assignment;
use crate::client::group::requests::{self as rq, Identity};
use crate::client::{ClientError, TopicPartition};
use crate::wire::{
    DeleteGroupsRequestT, DescribeGroupsRequestT, OffsetDeleteRequestT, PartitionRefT,
    RequestBodyT, ResponseBodyT,
};
use crate::ErrorCode;

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
}

/// One member as DescribeGroups reports it; `assignment` decoded from Kafka's ConsumerProtocol
/// (empty when the group is not a consumer group or the bytes do not decode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub assignment: Vec<TopicPartition>,
}

/// Per-partition outcomes of an offset commit.
pub type CommitResults = Vec<(TopicPartition, Result<(), ClientError>)>;

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    /// Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
    pub protocol_type: String,
    /// The assignor in use ("" when none).
    pub protocol: String,
    /// The group's generation (-1 for an unknown group, or a broker that does not say).
    pub generation: i32,
    pub members: Vec<MemberDescription>,
}

/// The group an operation is about, when it must go to the group's coordinator.
pub(crate) fn coordinator_key(op: &super::AdminOp) -> Option<&str> {
    match op {
        super::AdminOp::DescribeGroup { group_id }
        | super::AdminOp::FetchOffsets { group_id, .. }
        | super::AdminOp::CommitOffsets { group_id, .. }
        | super::AdminOp::DeleteGroup { group_id }
        | super::AdminOp::DeleteOffsets { group_id, .. } => Some(group_id),
        _ => None,
    }
}

pub(crate) fn find_coordinator(group_id: &str) -> RequestBodyT {
    rq::find_coordinator(group_id)
}

/// The coordinator's `host:port` from a FindCoordinator response, or the error to retry on.
pub(crate) fn coordinator_addr(body: &ResponseBodyT) -> Result<String, ErrorCode> {
    let ResponseBodyT::FindCoordinatorResponse(r) = body else {
        return Err(ErrorCode::UnknownServerError);
    };
    let code = ErrorCode::from(r.error_code);
    match (&r.host, code.is_ok() && r.port > 0) {
        (Some(h), true) => Ok(format!("{h}:{}", r.port)),
        _ if code.is_ok() => Err(ErrorCode::CoordinatorNotAvailable),
        _ => Err(code),
    }
}

pub(crate) fn body(op: &super::AdminOp) -> Option<RequestBodyT> {
    Some(match op {
        super::AdminOp::ListGroups => RequestBodyT::ListGroupsRequest(Box::default()),
        super::AdminOp::DescribeGroup { group_id } => {
            let mut r = DescribeGroupsRequestT::default();
            r.groups = Some(vec![group_id.clone()]);
            RequestBodyT::DescribeGroupsRequest(Box::new(r))
        }
        super::AdminOp::FetchOffsets {
            group_id,
            partitions,
        } => rq::offset_fetch(group_id, partitions.as_deref()),
        super::AdminOp::CommitOffsets { group_id, offsets } => rq::offset_commit(
            &Identity {
                group_id,
                member_id: "",
                generation: -1,
                group_instance_id: None,
            },
            offsets,
        ),
        super::AdminOp::DeleteGroup { group_id } => {
            let mut r = DeleteGroupsRequestT::default();
            r.group_ids = Some(vec![group_id.clone()]);
            RequestBodyT::DeleteGroupsRequest(Box::new(r))
        }
        super::AdminOp::DeleteOffsets {
            group_id,
            partitions,
        } => {
            let mut r = OffsetDeleteRequestT::default();
            r.group_id = group_id.clone();
            r.partitions = Some(
                partitions
                    .iter()
                    .map(|tp| {
                        let mut p = PartitionRefT::default();
                        p.topic = tp.topic.clone();
                        p.partition = tp.partition;
                        p
                    })
                    .collect(),
            );
            RequestBodyT::OffsetDeleteRequest(Box::new(r))
        }
        _ => return None,
    })
}

/// Whether an error means the cached coordinator is wrong.
pub(crate) fn is_coordinator_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
    )
}

/// The outcome of a group operation, or the error code to retry or fail with.
pub(crate) fn outcome(
    op: &super::AdminOp,
    body: ResponseBodyT,
) -> Option<Result<super::AdminOutcome, ErrorCode>> {
    use super::{AdminOp, AdminOutcome};
    Some(match (op, body) {
        (AdminOp::ListGroups, ResponseBodyT::ListGroupsResponse(r)) => {
            let code = ErrorCode::from(r.error_code);
            if !code.is_ok() {
                return Some(Err(code));
            }
            let mut groups: Vec<ListedGroup> = r
                .groups
                .iter()
                .flatten()
                .map(|g| ListedGroup {
                    group_id: g.group_id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.group_state.clone().unwrap_or_default(),
                })
                .collect();
            groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            Ok(AdminOutcome::ListGroups(groups))
        }
        (AdminOp::DescribeGroup { group_id }, ResponseBodyT::DescribeGroupsResponse(r)) => {
            let Some(g) = r.groups.iter().flatten().find(|g| &g.group_id == group_id) else {
                return Some(Err(ErrorCode::UnknownServerError));
            };
            let code = ErrorCode::from(g.error_code);
            if !code.is_ok() {
                return Some(Err(code));
            }
            let consumer = g.protocol_type.as_deref() == Some("consumer");
            Ok(AdminOutcome::DescribeGroup(GroupDescription {
                group_id: g.group_id.clone(),
                state: g.group_state.clone().unwrap_or_default(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocol: g.protocol_data.clone().unwrap_or_default(),
                generation: g.generation_id,
                members: g
                    .members
                    .iter()
                    .flatten()
                    .map(|m| MemberDescription {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone().unwrap_or_default(),
                        host: m.client_host.clone().unwrap_or_default(),
                        assignment: if consumer {
                            Assignment::decode(m.member_assignment.as_deref().unwrap_or_default())
                                .map(|a| a.partitions)
                                .unwrap_or_default()
                        } else {
                            Vec::new()
                        },
                    })
                    .collect(),
            }))
        }
        (AdminOp::FetchOffsets { .. }, ResponseBodyT::OffsetFetchResponse(r)) => {
            match rq::offset_fetch_result(&r) {
                Ok(mut offsets) => {
                    offsets.sort();
                    Ok(AdminOutcome::FetchOffsets(offsets))
                }
                Err(code) => Err(code),
            }
        }
        (AdminOp::CommitOffsets { .. }, ResponseBodyT::OffsetCommitResponse(r)) => {
            let mut results = Vec::new();
            for t in r.topics.iter().flatten() {
                for p in t.partitions.iter().flatten() {
                    let code = ErrorCode::from(p.error_code);
                    if is_coordinator_error(code) {
                        return Some(Err(code));
                    }
                    let tp = TopicPartition::new(t.name.clone(), p.partition_index);
                    let res = if code.is_ok() {
                        Ok(())
                    } else {
                        Err(ClientError::broker(code, format!("commit offset of {tp}")))
                    };
                    results.push((tp, res));
                }
            }
            results.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(AdminOutcome::CommitOffsets(results))
        }
        (AdminOp::DeleteGroup { group_id }, ResponseBodyT::DeleteGroupsResponse(r)) => {
            let Some(g) = r.results.iter().flatten().find(|g| &g.group_id == group_id) else {
                return Some(Err(ErrorCode::UnknownServerError));
            };
            let code = ErrorCode::from(g.error_code);
            if is_coordinator_error(code) {
                return Some(Err(code));
            }
            Ok(AdminOutcome::DeleteGroup(if code.is_ok() {
                Ok(())
            } else {
                Err(ClientError::broker(
                    code,
                    format!("delete group {group_id}"),
                ))
            }))
        }
        (AdminOp::DeleteOffsets { group_id, .. }, ResponseBodyT::OffsetDeleteResponse(r)) => {
            let code = ErrorCode::from(r.error_code);
            if is_coordinator_error(code) {
                return Some(Err(code));
            }
            if !code.is_ok() {
                return Some(Ok(AdminOutcome::DeleteOffsets(Err(ClientError::broker(
                    code,
                    format!("delete offsets of group {group_id}"),
                )))));
            }
            Ok(AdminOutcome::DeleteOffsets(Ok(
                super::changes::partition_results(r.partitions, "delete the offset of"),
            )))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{AdminConfig, AdminCore, AdminOp, AdminOutcome};
    use super::*;
    use crate::client::net::ClientCore;
    use crate::client::test_util::{next_request, respond};
    use crate::wire::{
        DescribeGroupsResponseT, DescribedGroupMemberT, DescribedGroupT, FindCoordinatorResponseT,
    };

    fn coordinator(host: &str) -> ResponseBodyT {
        let mut r = FindCoordinatorResponseT::default();
        r.host = Some(host.into());
        r.port = 1;
        ResponseBodyT::FindCoordinatorResponse(Box::new(r))
    }

    fn described(code: ErrorCode) -> ResponseBodyT {
        let mut m = DescribedGroupMemberT::default();
        m.member_id = "m1".into();
        m.client_id = Some("c".into());
        m.member_assignment = Some(
            Assignment {
                partitions: vec![TopicPartition::new("t", 2)],
                user_data: None,
            }
            .encode()
            .unwrap()
            .to_vec(),
        );
        let mut g = DescribedGroupT::default();
        g.error_code = code.into();
        g.group_id = "g".into();
        g.group_state = Some("Stable".into());
        g.protocol_type = Some("consumer".into());
        g.protocol_data = Some("range".into());
        g.generation_id = 7;
        g.members = Some(vec![m]);
        let mut r = DescribeGroupsResponseT::default();
        r.groups = Some(vec![g]);
        ResponseBodyT::DescribeGroupsResponse(Box::new(r))
    }

    #[test]
    fn describe_goes_to_the_coordinator_and_finds_it_again_after_not_coordinator() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        let id = core
            .submit(
                AdminOp::DescribeGroup {
                    group_id: "g".into(),
                },
                0,
            )
            .unwrap();
        let mut now = 0u64;
        // find → "c1", describe → NOT_COORDINATOR, find → "c2", describe → ok.
        for (expect_find, expect_addr, answer) in [
            (true, None, coordinator("c1")),
            (false, Some("c1:1"), described(ErrorCode::NotCoordinator)),
            (true, None, coordinator("c2")),
            (false, Some("c2:1"), described(ErrorCode::None)),
        ] {
            let (addr, req) = next_request(&mut core, &mut now);
            let is_find = matches!(req.header.body, RequestBodyT::FindCoordinatorRequest(_));
            assert_eq!(is_find, expect_find, "{req:?}");
            if let Some(a) = expect_addr {
                assert_eq!(addr, a);
            }
            core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), now);
        }
        let results = core.take_results();
        let [(rid, Ok(AdminOutcome::DescribeGroup(g)))] = results.as_slice() else {
            panic!("{results:?}")
        };
        assert_eq!(*rid, id);
        assert_eq!(
            (g.state.as_str(), g.protocol.as_str(), g.generation),
            ("Stable", "range", 7)
        );
        assert_eq!(g.members[0].assignment, vec![TopicPartition::new("t", 2)]);
    }
}
