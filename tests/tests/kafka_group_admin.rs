//! DeleteGroups and OffsetDelete on the Kafka port, against a real `spool serve`, with requests
//! encoded by the `kafka-protocol` crate (a client's own encoder, not spool's): a consumer member
//! subscribed to one topic keeps its group (NON_EMPTY_GROUP) and that topic's offsets
//! (GROUP_SUBSCRIBED_TO_TOPIC) while it is in; another topic's offset goes at once; once the
//! member left, OffsetDelete and DeleteGroups succeed, OffsetFetch answers -1, ListGroups no
//! longer lists the group, and an unknown group is GROUP_ID_NOT_FOUND. The broker is then killed
//! and restarted on its data: the deletion holds (offsets still -1, the group still gone), and
//! a new member joins the same group id afresh, at generation 1.
//!
//! Waits are bounded polls on a retriable error (the offsets partitions opening after a start),
//! never a fixed sleep.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteGroupsRequest, DeleteGroupsResponse,
    GroupId, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use spool_tests::kafka_call::kafka_call;
use spool_tests::kafka_clients::start_broker;
use spool_tests::BrokerOptions;

const GROUP: &str = "admin-group";
/// The topic the member subscribes to, and one it does not.
const SUBSCRIBED: &str = "admin-read";
const OTHER: &str = "admin-other";
/// Long enough that the member needs no heartbeat during the test.
const SESSION_TIMEOUT_MS: i32 = 120_000;
/// Bound on waiting out a retriable coordinator error.
const RETRY_FOR: Duration = Duration::from_secs(30);
const RETRY_INTERVAL: Duration = Duration::from_millis(50);

// Kafka's error codes.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
const RETRIABLE: [i16; 3] = [14, 15, 16];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn group() -> GroupId {
    GroupId(s(GROUP))
}

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

/// Calls `f` until its answer's error code (`code_of`) is not a retriable coordinator error.
fn until_served<T>(what: &str, mut f: impl FnMut() -> T, code_of: impl Fn(&T) -> i16) -> T {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let r = f();
        let code = code_of(&r);
        if !RETRIABLE.contains(&code) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still error {code} after {RETRY_FOR:?}"
        );
        std::thread::sleep(RETRY_INTERVAL);
    }
}

/// Kafka's ConsumerProtocolSubscription v0 for `topics`, no user data.
fn subscription(topics: &[&str]) -> bytes::Bytes {
    let mut b = 0i16.to_be_bytes().to_vec();
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    bytes::Bytes::from(b)
}

fn create_topics(addr: SocketAddr) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(
            [SUBSCRIBED, OTHER]
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(topic(t))
                        .with_num_partitions(2)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let r: CreateTopicsResponse = kafka_call(addr, ApiKey::CreateTopics, 5, &req);
    for t in &r.topics {
        assert_eq!(t.error_code, NONE, "creating {:?}", t.name);
    }
}

/// A new consumer member joins (subscribed to [`SUBSCRIBED`]) and syncs: (member id, generation).
fn join_and_sync(addr: SocketAddr) -> (String, i32) {
    let req = JoinGroupRequest::default()
        .with_group_id(group())
        .with_session_timeout_ms(SESSION_TIMEOUT_MS)
        .with_rebalance_timeout_ms(SESSION_TIMEOUT_MS)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(subscription(&[SUBSCRIBED]))]);
    let j: JoinGroupResponse = until_served(
        "JoinGroup",
        || kafka_call(addr, ApiKey::JoinGroup, 5, &req),
        |r: &JoinGroupResponse| r.error_code,
    );
    assert_eq!(j.error_code, NONE, "JoinGroup");
    let member = j.member_id.to_string();
    let req = SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(j.generation_id)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(bytes::Bytes::new())]);
    let r: SyncGroupResponse = kafka_call(addr, ApiKey::SyncGroup, 3, &req);
    assert_eq!(r.error_code, NONE, "SyncGroup");
    (member, j.generation_id)
}

fn commit(addr: SocketAddr, member: &str, generation: i32, offsets: &[(&str, i32, i64)]) {
    let topics = offsets
        .iter()
        .map(|(t, p, o)| {
            OffsetCommitRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)])
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_retention_time_ms(-1)
        .with_topics(topics);
    let r: OffsetCommitResponse = kafka_call(addr, ApiKey::OffsetCommit, 7, &req);
    for t in &r.topics {
        for p in &t.partitions {
            assert_eq!(
                p.error_code, NONE,
                "commit {:?}-{}",
                t.name, p.partition_index
            );
        }
    }
}

/// The committed offset of each (topic, partition), -1 for none.
fn fetch(addr: SocketAddr, partitions: &[(&str, i32)]) -> Vec<i64> {
    let req = OffsetFetchRequest::default()
        .with_group_id(group())
        .with_topics(Some(
            partitions
                .iter()
                .map(|(t, p)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic(t))
                        .with_partition_indexes(vec![*p])
                })
                .collect(),
        ));
    let r: OffsetFetchResponse = until_served(
        "OffsetFetch",
        || kafka_call(addr, ApiKey::OffsetFetch, 5, &req),
        |r: &OffsetFetchResponse| r.error_code,
    );
    assert_eq!(r.error_code, NONE, "OffsetFetch");
    partitions
        .iter()
        .map(|(t, p)| {
            r.topics
                .iter()
                .filter(|x| x.name.0.as_str() == *t)
                .flat_map(|x| x.partitions.iter())
                .find(|x| x.partition_index == *p)
                .map_or_else(
                    || panic!("OffsetFetch did not answer {t}-{p}"),
                    |x| x.committed_offset,
                )
        })
        .collect()
}

fn delete_groups(addr: SocketAddr, groups: &[&str]) -> Vec<(String, i16)> {
    let req = DeleteGroupsRequest::default()
        .with_groups_names(groups.iter().map(|g| GroupId(s(g))).collect());
    // Retried while a group's coordinator is not there yet (after the restart below, its
    // partition may be between leaderships for a moment), as clients retry.
    let r: DeleteGroupsResponse = until_served(
        "DeleteGroups",
        || kafka_call(addr, ApiKey::DeleteGroups, 2, &req),
        |r: &DeleteGroupsResponse| {
            r.results
                .iter()
                .map(|g| g.error_code)
                .find(|c| RETRIABLE.contains(c))
                .unwrap_or(NONE)
        },
    );
    r.results
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.error_code))
        .collect()
}

/// OffsetDelete: (top-level error, per (topic, partition) error in answer order).
fn delete_offsets(addr: SocketAddr, partitions: &[(&str, i32)]) -> (i16, Vec<(String, i32, i16)>) {
    let topics = partitions
        .iter()
        .map(|(t, p)| {
            OffsetDeleteRequestTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                ])
        })
        .collect();
    let req = OffsetDeleteRequest::default()
        .with_group_id(group())
        .with_topics(topics);
    let r: OffsetDeleteResponse = kafka_call(addr, ApiKey::OffsetDelete, 0, &req);
    let per = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    (r.error_code, per)
}

fn listed(addr: SocketAddr) -> Vec<String> {
    let r: ListGroupsResponse =
        kafka_call(addr, ApiKey::ListGroups, 3, &ListGroupsRequest::default());
    assert_eq!(r.error_code, NONE, "ListGroups");
    r.groups.iter().map(|g| g.group_id.0.to_string()).collect()
}

fn leave(addr: SocketAddr, member: &str) {
    let req = LeaveGroupRequest::default()
        .with_group_id(group())
        .with_members(vec![MemberIdentity::default().with_member_id(s(member))]);
    let r: LeaveGroupResponse = kafka_call(addr, ApiKey::LeaveGroup, 3, &req);
    assert_eq!(r.error_code, NONE, "LeaveGroup");
}

#[test]
fn groups_and_offsets_are_deleted_as_kafka_does_and_stay_deleted_across_a_restart() {
    let mut broker =
        start_broker(BrokerOptions::default().arg("--group-initial-rebalance-delay-ms=0"));
    let addr = broker.kafka_addr();
    create_topics(addr);
    let (member, generation) = join_and_sync(addr);
    commit(
        addr,
        &member,
        generation,
        &[(SUBSCRIBED, 0, 10), (SUBSCRIBED, 1, 11), (OTHER, 0, 20)],
    );

    // While the member is in: the group stays, and so do the offsets of the topic it reads.
    assert_eq!(
        delete_groups(addr, &[GROUP, "no-such-group"]),
        vec![
            (GROUP.to_string(), NON_EMPTY_GROUP),
            ("no-such-group".to_string(), GROUP_ID_NOT_FOUND),
        ]
    );
    assert_eq!(
        delete_offsets(addr, &[(SUBSCRIBED, 0), (OTHER, 0), ("no-such-topic", 0)]),
        (
            NONE,
            vec![
                (SUBSCRIBED.to_string(), 0, GROUP_SUBSCRIBED_TO_TOPIC),
                (OTHER.to_string(), 0, NONE),
                ("no-such-topic".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ]
        )
    );
    assert_eq!(
        fetch(addr, &[(SUBSCRIBED, 0), (OTHER, 0)]),
        vec![10, -1],
        "only the unsubscribed topic's offset is gone"
    );
    assert!(listed(addr).contains(&GROUP.to_string()));

    // Once it left: OffsetDelete of the topic it read, then the whole group.
    leave(addr, &member);
    assert_eq!(
        delete_offsets(addr, &[(SUBSCRIBED, 0)]),
        (NONE, vec![(SUBSCRIBED.to_string(), 0, NONE)])
    );
    assert_eq!(
        fetch(addr, &[(SUBSCRIBED, 0), (SUBSCRIBED, 1)]),
        vec![-1, 11]
    );
    assert_eq!(
        delete_groups(addr, &[GROUP]),
        vec![(GROUP.to_string(), NONE)]
    );
    assert_eq!(fetch(addr, &[(SUBSCRIBED, 1)]), vec![-1]);
    assert!(!listed(addr).contains(&GROUP.to_string()), "still listed");
    assert_eq!(
        delete_groups(addr, &[GROUP]),
        vec![(GROUP.to_string(), GROUP_ID_NOT_FOUND)]
    );
    assert_eq!(delete_offsets(addr, &[(OTHER, 0)]).0, GROUP_ID_NOT_FOUND);

    // A restart replays the offsets topic: the deletion holds.
    broker.kill9();
    broker.restart();
    broker.wait_kafka_ready();
    assert_eq!(
        fetch(addr, &[(SUBSCRIBED, 0), (SUBSCRIBED, 1), (OTHER, 0)]),
        vec![-1, -1, -1],
        "offsets came back after the restart\n{}",
        broker.log_tail()
    );
    assert!(!listed(addr).contains(&GROUP.to_string()), "listed again");
    assert_eq!(
        delete_groups(addr, &[GROUP]),
        vec![(GROUP.to_string(), GROUP_ID_NOT_FOUND)]
    );
    // The id is free: a new member starts the group afresh.
    let (_, generation) = join_and_sync(addr);
    assert_eq!(generation, 1, "a new group's first generation");
}
