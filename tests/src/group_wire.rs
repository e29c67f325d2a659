//! The consumer-group protocol spoken by hand over a [`RawConn`]: JoinGroup, SyncGroup,
//! Heartbeat, OffsetCommit and OffsetFetch built from the native schemas, for tests that must
//! control the generation and member id a request carries (a commit from an old generation, from
//! an unknown member) and for reading a group's committed offsets without the CLI.
//!
//! Member metadata and assignments are Kafka's ConsumerProtocol encodings (version 0), so a
//! broker or a `spool group describe` that decodes them sees well-formed data.
//!
//! Requests that meet a coordinator still loading (COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) are retried until [`COORDINATOR_TIMEOUT`]; every
//! other answer is returned to the test as it came.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use spool_protocol::codec::Response;
use spool_protocol::wire::{
    ErrorCode, FindCoordinatorRequestT, HeartbeatRequestT, JoinGroupRequestProtocolT,
    JoinGroupRequestT, JoinGroupResponseT, OffsetCommitRequestPartitionT, OffsetCommitRequestT,
    OffsetCommitRequestTopicT, OffsetFetchRequestT, OffsetFetchRequestTopicT, RequestBodyT,
    ResponseBodyT, SyncGroupRequestAssignmentT, SyncGroupRequestT, SyncGroupResponseT,
};

use crate::wire::RawConn;

/// Bound on waiting for a group coordinator to become available after a broker starts.
pub const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a loading coordinator is asked again (the deadline bounds the wait).
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// The protocol type and the one assignor name the raw members offer.
pub const PROTOCOL_TYPE: &str = "consumer";
pub const PROTOCOL_NAME: &str = "range";

/// A member as the coordinator knows it after a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub member_id: String,
    pub generation: i32,
    pub leader: String,
    /// Member ids (only the leader gets them).
    pub members: Vec<String>,
}

fn retriable(code: ErrorCode) -> bool {
    code == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        || code == ErrorCode::COORDINATOR_NOT_AVAILABLE
        || code == ErrorCode::NOT_COORDINATOR
}

/// Sends `body` (version 0) and returns the response body; a header-level error is an `Err`.
fn call(conn: &mut RawConn, body: RequestBodyT) -> Result<ResponseBodyT, String> {
    let r: Response = conn
        .request(body, 0, Vec::new())
        .map_err(|e| format!("request failed: {e}"))?;
    if r.header.error_code != ErrorCode::NONE {
        return Err(format!(
            "header error {:?} (body {:?})",
            r.header.error_code, r.header.body
        ));
    }
    Ok(r.header.body)
}

/// Repeats `attempt` while it answers a retriable coordinator error, up to the deadline.
fn retrying<T>(
    what: &str,
    mut attempt: impl FnMut() -> Result<(ErrorCode, T), String>,
) -> Result<(ErrorCode, T), String> {
    let deadline = Instant::now() + COORDINATOR_TIMEOUT;
    loop {
        let (code, t) = attempt()?;
        if !retriable(code) {
            return Ok((code, t));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{what}: still {code:?} after {COORDINATOR_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(RETRY_INTERVAL);
    }
}

/// FindCoordinator for `group` until it answers something other than "not available yet".
pub fn find_coordinator(conn: &mut RawConn, group: &str) -> Result<ErrorCode, String> {
    retrying("FindCoordinator", || {
        let mut r = FindCoordinatorRequestT::default();
        r.key = group.to_owned();
        match call(conn, RequestBodyT::FindCoordinatorRequest(Box::new(r)))? {
            ResponseBodyT::FindCoordinatorResponse(b) => Ok((b.error_code, ())),
            other => Err(format!("not a FindCoordinator answer: {other:?}")),
        }
    })
    .map(|(code, ())| code)
}

/// Kafka's ConsumerProtocolSubscription v0: version, topics, no user data.
pub fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend((topics.len() as i32).to_be_bytes());
    for t in topics {
        put_string(&mut b, t);
    }
    b.extend((-1i32).to_be_bytes());
    b
}

/// Kafka's ConsumerProtocolAssignment v0: version, (topic, partitions)*, no user data.
pub fn assignment(topic: &str, partitions: &[i32]) -> Vec<u8> {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend(1i32.to_be_bytes());
    put_string(&mut b, topic);
    b.extend((partitions.len() as i32).to_be_bytes());
    for p in partitions {
        b.extend(p.to_be_bytes());
    }
    b.extend((-1i32).to_be_bytes());
    b
}

fn put_string(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as i16).to_be_bytes());
    b.extend(s.as_bytes());
}

/// A JoinGroup request for `topic` with the given member id ("" for a new member).
pub fn join_body(
    group: &str,
    member_id: &str,
    topic: &str,
    session_timeout_ms: i32,
) -> RequestBodyT {
    let mut p = JoinGroupRequestProtocolT::default();
    p.name = PROTOCOL_NAME.to_owned();
    p.metadata = Some(subscription(&[topic]));
    let mut r = JoinGroupRequestT::default();
    r.group_id = group.to_owned();
    r.session_timeout_ms = session_timeout_ms;
    r.rebalance_timeout_ms = session_timeout_ms;
    r.member_id = Some(member_id.to_owned());
    r.protocol_type = Some(PROTOCOL_TYPE.to_owned());
    r.protocols = Some(vec![p]);
    RequestBodyT::JoinGroupRequest(Box::new(r))
}

/// Reads a JoinGroup answer (after [`join_body`] was sent on `conn`).
pub fn read_join(conn: &mut RawConn) -> Result<JoinGroupResponseT, String> {
    let r = conn
        .read_response()
        .map_err(|e| format!("reading a JoinGroup answer: {e}"))?;
    match r.header.body {
        ResponseBodyT::JoinGroupResponse(b) if r.header.error_code == ErrorCode::NONE => Ok(*b),
        other => Err(format!(
            "not a JoinGroup answer: {:?} {other:?}",
            r.header.error_code
        )),
    }
}

/// Joins `group` as a new member and waits for the generation: MEMBER_ID_REQUIRED (KIP-394) is
/// answered by joining again with the id the coordinator handed out; a loading coordinator is
/// retried. Any other error is returned.
pub fn join_new(
    conn: &mut RawConn,
    group: &str,
    topic: &str,
    session_timeout_ms: i32,
) -> Result<Joined, String> {
    let mut member_id = String::new();
    let deadline = Instant::now() + COORDINATOR_TIMEOUT;
    loop {
        conn.send(
            join_body(group, &member_id, topic, session_timeout_ms),
            0,
            Vec::new(),
        )
        .map_err(|e| format!("sending JoinGroup: {e}"))?;
        let r = read_join(conn)?;
        if r.error_code == ErrorCode::MEMBER_ID_REQUIRED {
            member_id = r.member_id.unwrap_or_default();
            continue;
        }
        if retriable(r.error_code) && Instant::now() < deadline {
            std::thread::sleep(RETRY_INTERVAL);
            continue;
        }
        return joined(r);
    }
}

/// The [`Joined`] of a JoinGroup answer, or its error.
pub fn joined(r: JoinGroupResponseT) -> Result<Joined, String> {
    if r.error_code != ErrorCode::NONE {
        return Err(format!("JoinGroup: {:?}", r.error_code));
    }
    Ok(Joined {
        member_id: r.member_id.unwrap_or_default(),
        generation: r.generation_id,
        leader: r.leader.unwrap_or_default(),
        members: r
            .members
            .unwrap_or_default()
            .into_iter()
            .map(|m| m.member_id)
            .collect(),
    })
}

/// SyncGroup; the leader passes every member's assignment, followers pass none.
pub fn sync(
    conn: &mut RawConn,
    group: &str,
    generation: i32,
    member_id: &str,
    assignments: Vec<(String, Vec<u8>)>,
) -> Result<SyncGroupResponseT, String> {
    let mut r = SyncGroupRequestT::default();
    r.group_id = group.to_owned();
    r.generation_id = generation;
    r.member_id = Some(member_id.to_owned());
    r.protocol_type = Some(PROTOCOL_TYPE.to_owned());
    r.protocol_name = Some(PROTOCOL_NAME.to_owned());
    r.assignments = Some(
        assignments
            .into_iter()
            .map(|(member_id, a)| {
                let mut s = SyncGroupRequestAssignmentT::default();
                s.member_id = member_id;
                s.assignment = Some(a);
                s
            })
            .collect(),
    );
    match call(conn, RequestBodyT::SyncGroupRequest(Box::new(r)))? {
        ResponseBodyT::SyncGroupResponse(b) => Ok(*b),
        other => Err(format!("not a SyncGroup answer: {other:?}")),
    }
}

/// Heartbeat; returns the error code (REBALANCE_IN_PROGRESS tells a member to rejoin).
pub fn heartbeat(
    conn: &mut RawConn,
    group: &str,
    generation: i32,
    member_id: &str,
) -> Result<ErrorCode, String> {
    let mut r = HeartbeatRequestT::default();
    r.group_id = group.to_owned();
    r.generation_id = generation;
    r.member_id = Some(member_id.to_owned());
    match call(conn, RequestBodyT::HeartbeatRequest(Box::new(r)))? {
        ResponseBodyT::HeartbeatResponse(b) => Ok(b.error_code),
        other => Err(format!("not a Heartbeat answer: {other:?}")),
    }
}

/// OffsetCommit of one partition; returns that partition's error code.
pub fn commit(
    conn: &mut RawConn,
    group: &str,
    generation: i32,
    member_id: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<ErrorCode, String> {
    let mut p = OffsetCommitRequestPartitionT::default();
    p.partition_index = partition;
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopicT::default();
    t.name = topic.to_owned();
    t.partitions = Some(vec![p]);
    let mut r = OffsetCommitRequestT::default();
    r.group_id = group.to_owned();
    r.generation_id = generation;
    r.member_id = Some(member_id.to_owned());
    r.topics = Some(vec![t]);
    match call(conn, RequestBodyT::OffsetCommitRequest(Box::new(r)))? {
        ResponseBodyT::OffsetCommitResponse(b) => b
            .topics
            .iter()
            .flatten()
            .flat_map(|t| t.partitions.iter().flatten())
            .find(|p| p.partition_index == partition)
            .map(|p| p.error_code)
            .ok_or_else(|| format!("OffsetCommit answer without partition {partition}")),
        other => Err(format!("not an OffsetCommit answer: {other:?}")),
    }
}

/// OffsetFetch of `partitions` of `topic`: partition → committed offset (-1: none). A
/// partition-level or group-level error is an `Err`.
pub fn fetch_offsets(
    conn: &mut RawConn,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>, String> {
    let (code, body) = retrying("OffsetFetch", || {
        let mut t = OffsetFetchRequestTopicT::default();
        t.name = topic.to_owned();
        t.partition_indexes = Some(partitions.to_vec());
        let mut r = OffsetFetchRequestT::default();
        r.group_id = group.to_owned();
        r.topics = Some(vec![t]);
        match call(conn, RequestBodyT::OffsetFetchRequest(Box::new(r)))? {
            ResponseBodyT::OffsetFetchResponse(b) => Ok((b.error_code, b)),
            other => Err(format!("not an OffsetFetch answer: {other:?}")),
        }
    })?;
    if code != ErrorCode::NONE {
        return Err(format!("OffsetFetch: {code:?}"));
    }
    let mut out = BTreeMap::new();
    for t in body.topics.iter().flatten().filter(|t| t.name == topic) {
        for p in t.partitions.iter().flatten() {
            if p.error_code != ErrorCode::NONE {
                return Err(format!(
                    "OffsetFetch {topic}-{}: {:?}",
                    p.partition_index, p.error_code
                ));
            }
            out.insert(p.partition_index, p.committed_offset);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn consumer_protocol_encodings() {
        assert_eq!(
            super::subscription(&["ab"]),
            [0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            super::assignment("t", &[3]),
            [0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff]
        );
    }
}
