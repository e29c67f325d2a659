//! The Kafka front's answers, built from fully populated internal results, encode at every version
//! spool advertises and decode back with the `kafka-protocol` crate's client-side decoder (a field
//! set that a version lacks would make the crate refuse to encode: these tests catch that), with
//! the fields each version carries.

// The native object-API structs are non-exhaustive: built as default plus fields.
#![allow(clippy::field_reassign_with_default)]

use kafka_protocol::messages::{ApiKey, ResponseKind};
use spool_protocol::kafka::codec::{encode_response, split_response};
use spool_protocol::kafka::versions::{self, codec_range};
use spool_protocol::wire;
use spool_protocol::ErrorCode;

use super::data::{list_offsets_partition_answer, produce_partition_answer};
use super::groups::*;
use super::KAFKA_APIS;
use crate::requests::{ListOffsetsResult, ProduceResult};

fn versions_of(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let r = versions::range(KAFKA_APIS, api_key).expect("implemented");
    r.min_version..=r.max_version
}

#[test]
fn every_range_is_inside_what_the_codec_carries() {
    for a in KAFKA_APIS {
        let (lo, hi) = codec_range(a.api_key);
        assert!(a.min_version <= a.max_version, "{a:?}");
        assert!(
            lo <= a.min_version && a.max_version <= hi,
            "{a:?} vs the codec's {lo}..={hi}"
        );
    }
}

#[test]
fn each_api_is_listed_once_in_key_order() {
    for w in KAFKA_APIS.windows(2) {
        let (a, b) = (w[0].api_key as i16, w[1].api_key as i16);
        assert!(a < b, "{:?} before {:?}", w[0].api_key, w[1].api_key);
    }
    assert!(versions::is_supported(KAFKA_APIS, ApiKey::ApiVersions, 3));
    assert!(!versions::is_supported(KAFKA_APIS, ApiKey::ApiVersions, 4));
    assert!(!versions::is_supported(KAFKA_APIS, ApiKey::Produce, 2));
    assert!(!versions::is_supported(
        KAFKA_APIS,
        ApiKey::SaslHandshake,
        0
    ));
}

/// Encodes `body` at `version` and decodes it back as a client would.
fn round_trip(api_key: ApiKey, version: i16, body: ResponseKind) -> ResponseKind {
    let frame = encode_response(api_key, version, 77, &body)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version}: {e}"));
    let (cid, mut rest) =
        split_response(frame, api_key.response_header_version(version)).expect("frame");
    assert_eq!(cid, 77);
    let decoded = spool_protocol::kafka::codec::decode_response_body(api_key, version, &mut rest)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version} decode: {e}"));
    assert!(rest.is_empty(), "{api_key:?} v{version}: trailing bytes");
    decoded
}

fn wire_code(c: ErrorCode) -> wire::ErrorCode {
    wire::ErrorCode::from(c)
}

#[test]
fn produce_answers_encode_at_every_version() {
    for v in versions_of(ApiKey::Produce) {
        let r = ProduceResult::error(ErrorCode::NotEnoughReplicas, "isr too small");
        let part = produce_partition_answer(3, r, v);
        let body = kafka_protocol::messages::ProduceResponse::default().with_responses(vec![
            kafka_protocol::messages::produce_response::TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(super::kstr("t")))
                .with_partition_responses(vec![part]),
        ]);
        let ResponseKind::Produce(d) = round_trip(ApiKey::Produce, v, body.into()) else {
            panic!()
        };
        let p = &d.responses[0].partition_responses[0];
        assert_eq!((p.index, p.error_code), (3, 19));
        assert_eq!(p.error_message.is_some(), v >= 8);
    }
}

#[test]
fn list_offsets_answers_encode_at_every_version() {
    for v in versions_of(ApiKey::ListOffsets) {
        let r = ListOffsetsResult {
            error: ErrorCode::None,
            timestamp: 1_700_000_000_000,
            offset: 42,
            leader_epoch: 5,
        };
        let body = kafka_protocol::messages::ListOffsetsResponse::default().with_topics(vec![
            kafka_protocol::messages::list_offsets_response::ListOffsetsTopicResponse::default()
                .with_name(kafka_protocol::messages::TopicName(super::kstr("t")))
                .with_partitions(vec![list_offsets_partition_answer(1, r, v)]),
        ]);
        let ResponseKind::ListOffsets(d) = round_trip(ApiKey::ListOffsets, v, body.into()) else {
            panic!()
        };
        let p = &d.topics[0].partitions[0];
        assert_eq!((p.offset, p.timestamp), (42, 1_700_000_000_000));
        assert_eq!(p.leader_epoch, if v >= 4 { 5 } else { -1 });
    }
}

#[test]
fn find_coordinator_points_at_the_advertised_kafka_address() {
    for v in versions_of(ApiKey::FindCoordinator) {
        let mut r = wire::FindCoordinatorResponseT::default();
        r.node_id = 0;
        r.host = Some("127.0.0.1".into());
        r.port = 9093;
        let a = find_coordinator_answer(r, "broker.example", 19092);
        let ResponseKind::FindCoordinator(d) = round_trip(ApiKey::FindCoordinator, v, a.into())
        else {
            panic!()
        };
        assert_eq!(
            (d.host.as_str(), d.port, d.node_id.0),
            ("broker.example", 19092, 0)
        );
        let mut r = wire::FindCoordinatorResponseT::default();
        r.error_code = wire_code(ErrorCode::CoordinatorNotAvailable);
        let a = find_coordinator_answer(r, "broker.example", 19092);
        let ResponseKind::FindCoordinator(d) = round_trip(ApiKey::FindCoordinator, v, a.into())
        else {
            panic!()
        };
        assert_eq!((d.error_code, d.node_id.0, d.port), (15, -1, -1));
    }
}

fn join_response() -> wire::JoinGroupResponseT {
    let mut m = wire::JoinGroupResponseMemberT::default();
    m.member_id = "m-1".into();
    m.group_instance_id = None;
    m.metadata = Some(vec![0, 1, 2]);
    let mut r = wire::JoinGroupResponseT::default();
    r.generation_id = 4;
    r.protocol_type = Some("consumer".into());
    r.protocol_name = Some("range".into());
    r.leader = Some("m-1".into());
    r.member_id = Some("m-1".into());
    r.members = Some(vec![m]);
    r
}

#[test]
fn group_answers_encode_at_every_version() {
    for v in versions_of(ApiKey::JoinGroup) {
        let ResponseKind::JoinGroup(d) = round_trip(
            ApiKey::JoinGroup,
            v,
            join_group_answer(join_response(), v).into(),
        ) else {
            panic!()
        };
        assert_eq!((d.generation_id, d.member_id.as_str()), (4, "m-1"));
        assert_eq!(d.members[0].metadata.as_ref(), &[0, 1, 2]);
        assert_eq!(d.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    }
    for v in versions_of(ApiKey::SyncGroup) {
        let mut r = wire::SyncGroupResponseT::default();
        r.assignment = Some(vec![9, 9]);
        r.protocol_name = Some("range".into());
        let ResponseKind::SyncGroup(d) =
            round_trip(ApiKey::SyncGroup, v, sync_group_answer(r).into())
        else {
            panic!()
        };
        assert_eq!(d.assignment.as_ref(), &[9, 9]);
    }
    for v in versions_of(ApiKey::Heartbeat) {
        let mut r = wire::HeartbeatResponseT::default();
        r.error_code = wire_code(ErrorCode::RebalanceInProgress);
        let ResponseKind::Heartbeat(d) =
            round_trip(ApiKey::Heartbeat, v, heartbeat_answer(r).into())
        else {
            panic!()
        };
        assert_eq!(d.error_code, 27);
    }
    for v in versions_of(ApiKey::LeaveGroup) {
        let mut m = wire::LeaveGroupMemberResponseT::default();
        m.member_id = Some("m-1".into());
        m.error_code = wire_code(ErrorCode::UnknownMemberId);
        let mut r = wire::LeaveGroupResponseT::default();
        r.members = Some(vec![m]);
        let ResponseKind::LeaveGroup(d) =
            round_trip(ApiKey::LeaveGroup, v, leave_group_answer(r, v).into())
        else {
            panic!()
        };
        if v >= 3 {
            assert_eq!((d.error_code, d.members[0].error_code), (0, 25));
        } else {
            // One member before v3: its outcome is the top-level error.
            assert_eq!(d.error_code, 25);
        }
    }
}

#[test]
fn offset_and_listing_answers_encode_at_every_version() {
    for v in versions_of(ApiKey::OffsetCommit) {
        let mut p = wire::OffsetCommitResponsePartitionT::default();
        p.partition_index = 2;
        p.error_code = wire_code(ErrorCode::IllegalGeneration);
        let mut t = wire::OffsetCommitResponseTopicT::default();
        t.name = "t".into();
        t.partitions = Some(vec![p]);
        let mut r = wire::OffsetCommitResponseT::default();
        r.topics = Some(vec![t]);
        let ResponseKind::OffsetCommit(d) =
            round_trip(ApiKey::OffsetCommit, v, offset_commit_answer(r).into())
        else {
            panic!()
        };
        assert_eq!(d.topics[0].partitions[0].error_code, 22);
    }
    for v in versions_of(ApiKey::OffsetFetch) {
        let mut p = wire::OffsetFetchResponsePartitionT::default();
        p.partition_index = 1;
        p.committed_offset = 1234;
        p.metadata = Some("m".into());
        let mut t = wire::OffsetFetchResponseTopicT::default();
        t.name = "t".into();
        t.partitions = Some(vec![p]);
        let mut r = wire::OffsetFetchResponseT::default();
        r.topics = Some(vec![t]);
        let ResponseKind::OffsetFetch(d) =
            round_trip(ApiKey::OffsetFetch, v, offset_fetch_answer(r, v).into())
        else {
            panic!()
        };
        assert_eq!(d.topics[0].partitions[0].committed_offset, 1234);
        // v1 carries a group error on the partitions instead.
        let mut r = wire::OffsetFetchResponseT::default();
        r.error_code = wire_code(ErrorCode::CoordinatorLoadInProgress);
        let mut t = wire::OffsetFetchResponseTopicT::default();
        t.name = "t".into();
        t.partitions = Some(vec![wire::OffsetFetchResponsePartitionT::default()]);
        r.topics = Some(vec![t]);
        let ResponseKind::OffsetFetch(d) =
            round_trip(ApiKey::OffsetFetch, v, offset_fetch_answer(r, v).into())
        else {
            panic!()
        };
        if v >= 2 {
            assert_eq!(d.error_code, 14);
        } else {
            assert_eq!(d.topics[0].partitions[0].error_code, 14);
        }
    }
    for v in versions_of(ApiKey::DescribeGroups) {
        let mut m = wire::DescribedGroupMemberT::default();
        m.member_id = "m-1".into();
        m.client_id = Some("rdkafka".into());
        m.client_host = Some("/127.0.0.1".into());
        m.member_assignment = Some(vec![1]);
        let mut g = wire::DescribedGroupT::default();
        g.group_id = "g".into();
        g.group_state = Some("Stable".into());
        g.members = Some(vec![m]);
        let mut r = wire::DescribeGroupsResponseT::default();
        r.groups = Some(vec![g]);
        let ops = if v >= 3 { 328 } else { i32::MIN };
        let ResponseKind::DescribeGroups(d) = round_trip(
            ApiKey::DescribeGroups,
            v,
            describe_groups_answer(r, ops).into(),
        ) else {
            panic!()
        };
        assert_eq!(d.groups[0].group_state.as_str(), "Stable");
        assert_eq!(d.groups[0].members[0].client_host.as_str(), "/127.0.0.1");
    }
    for v in versions_of(ApiKey::ListGroups) {
        let mut g = wire::ListedGroupT::default();
        g.group_id = "g".into();
        g.protocol_type = Some("consumer".into());
        g.group_state = Some("Empty".into());
        let mut r = wire::ListGroupsResponseT::default();
        r.groups = Some(vec![g]);
        let ResponseKind::ListGroups(d) =
            round_trip(ApiKey::ListGroups, v, list_groups_answer(r).into())
        else {
            panic!()
        };
        assert_eq!(d.groups[0].group_id.0.as_str(), "g");
    }
}

mod malformed {
    use bytes::{BufMut, BytesMut};
    use proptest::prelude::*;
    use spool_protocol::kafka::codec::decode_request;

    use crate::kafka::KAFKA_APIS as SUPPORTED;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random bytes after a valid fixed header, for every implemented API and version: the
        /// decoder answers Ok or a typed error, never a panic. (Forged huge array counts are
        /// `crate::alloc`'s test: random bytes rarely claim more than memory holds.)
        #[test]
        fn random_bodies_never_panic_or_abort(
            i in 0..SUPPORTED.len(),
            version_pick in any::<u16>(),
            body in proptest::collection::vec(any::<u8>(), 0..96),
        ) {
            let a = SUPPORTED[i];
            let (key, lo, hi) = (a.api_key, a.min_version, a.max_version);
            let version = lo + (version_pick % (hi - lo + 1) as u16) as i16;
            let mut b = BytesMut::new();
            b.put_i16(key as i16);
            b.put_i16(version);
            b.put_i32(7);
            b.put_slice(&body);
            match decode_request(b.freeze(), SUPPORTED) {
                Ok(r) => prop_assert_eq!(r.correlation_id, 7),
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
