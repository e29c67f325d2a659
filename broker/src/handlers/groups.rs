//! Consumer-group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, DescribeGroups, ListGroups): the contract both fronts call.
//!
//! Stubs for now: every call answers COORDINATOR_NOT_AVAILABLE until the coordinator lands.

use std::rc::Rc;

use spool_protocol::wire::{
    self, DescribeGroupsRequestT, DescribeGroupsResponseT, FindCoordinatorRequestT,
    FindCoordinatorResponseT, HeartbeatRequestT, HeartbeatResponseT, JoinGroupRequestT,
    JoinGroupResponseT, LeaveGroupRequestT, LeaveGroupResponseT, ListGroupsRequestT,
    ListGroupsResponseT, OffsetCommitRequestT, OffsetCommitResponseT, OffsetFetchRequestT,
    OffsetFetchResponseT, SyncGroupRequestT, SyncGroupResponseT,
};
use spool_protocol::ErrorCode;

use crate::shard::Shard;

/// Who sent a JoinGroup (kept per member for DescribeGroups).
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub client_id: String,
    pub client_host: String,
}

fn unavailable() -> wire::ErrorCode {
    wire::ErrorCode::from(ErrorCode::CoordinatorNotAvailable)
}

pub async fn find_coordinator(
    _shard: &Rc<Shard>,
    _req: FindCoordinatorRequestT,
) -> FindCoordinatorResponseT {
    build!(FindCoordinatorResponseT {
        error_code: unavailable()
    })
}

pub async fn join_group(
    _shard: &Rc<Shard>,
    _req: JoinGroupRequestT,
    client: ClientInfo,
) -> JoinGroupResponseT {
    tracing::debug!(client_id = %client.client_id, client_host = %client.client_host, "join group");
    build!(JoinGroupResponseT {
        error_code: unavailable()
    })
}

pub async fn sync_group(_shard: &Rc<Shard>, _req: SyncGroupRequestT) -> SyncGroupResponseT {
    build!(SyncGroupResponseT {
        error_code: unavailable()
    })
}

pub async fn heartbeat(_shard: &Rc<Shard>, _req: HeartbeatRequestT) -> HeartbeatResponseT {
    build!(HeartbeatResponseT {
        error_code: unavailable()
    })
}

pub async fn leave_group(_shard: &Rc<Shard>, _req: LeaveGroupRequestT) -> LeaveGroupResponseT {
    build!(LeaveGroupResponseT {
        error_code: unavailable()
    })
}

pub async fn offset_commit(
    _shard: &Rc<Shard>,
    _req: OffsetCommitRequestT,
) -> OffsetCommitResponseT {
    build!(OffsetCommitResponseT {
        topics: Some(Vec::new())
    })
}

pub async fn offset_fetch(_shard: &Rc<Shard>, _req: OffsetFetchRequestT) -> OffsetFetchResponseT {
    build!(OffsetFetchResponseT {
        error_code: unavailable()
    })
}

pub async fn describe_groups(
    _shard: &Rc<Shard>,
    _req: DescribeGroupsRequestT,
) -> DescribeGroupsResponseT {
    build!(DescribeGroupsResponseT {
        groups: Some(Vec::new())
    })
}

pub async fn list_groups(_shard: &Rc<Shard>, _req: ListGroupsRequestT) -> ListGroupsResponseT {
    build!(ListGroupsResponseT {
        error_code: unavailable()
    })
}
