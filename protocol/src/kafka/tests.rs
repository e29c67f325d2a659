//! Codec tests: every implemented request round-trips through the crate's encoder and our decoder;
//! ApiVersions v0–v3 answers decode with the crate's client-side decoder (and the KIP-511
//! fallback for newer versions); unknown keys and versions fail in a typed way; truncated and
//! garbled frames never panic.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;

use super::codec::*;
use super::versions::{ApiRange, KafkaApiRange};
use crate::ErrorCode;

/// An example server's API table for these codec tests (the broker's own is in
/// `spool_broker::kafka::dispatch`; its tests run the decoder over that one). It lists every API
/// [`sample`] can build, at versions where the sample is valid.
const SUPPORTED: [KafkaApiRange; 18] = [
    range(ApiKey::Produce, 3, 9),
    range(ApiKey::Fetch, 4, 11),
    range(ApiKey::ListOffsets, 1, 7),
    range(ApiKey::Metadata, 0, 9),
    range(ApiKey::OffsetCommit, 2, 8),
    range(ApiKey::OffsetFetch, 1, 7),
    range(ApiKey::FindCoordinator, 0, 3),
    range(ApiKey::JoinGroup, 0, 9),
    range(ApiKey::Heartbeat, 0, 4),
    range(ApiKey::LeaveGroup, 0, 5),
    range(ApiKey::SyncGroup, 0, 5),
    range(ApiKey::DescribeGroups, 0, 5),
    range(ApiKey::ListGroups, 0, 4),
    range(ApiKey::ApiVersions, 0, 3),
    range(ApiKey::CreateTopics, 2, 7),
    range(ApiKey::DeleteTopics, 1, 5),
    range(ApiKey::InitProducerId, 0, 4),
    range(ApiKey::DescribeConfigs, 1, 4),
];

const fn range(api_key: ApiKey, min_version: i16, max_version: i16) -> KafkaApiRange {
    ApiRange {
        api_key,
        min_version,
        max_version,
    }
}

fn decode(frame: Bytes) -> Result<KafkaRequest, KafkaCodecError> {
    decode_request(frame, &SUPPORTED)
}

fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A request of `api_key` with a few non-default fields, valid at every version we implement.
fn sample(api_key: ApiKey, n: i32) -> RequestKind {
    match api_key {
        ApiKey::Produce => RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(n)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(topic("t"))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(n)
                            .with_records(Some(Bytes::from_static(b"batch"))),
                    ])]),
        ),
        ApiKey::Fetch => RequestKind::Fetch(
            FetchRequest::default()
                .with_max_wait_ms(n)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(topic("t"))
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(n)
                        .with_fetch_offset(7)
                        .with_partition_max_bytes(1024)])]),
        ),
        ApiKey::ListOffsets => {
            RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic("t"))
                    .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(n)
                        .with_timestamp(-2)]),
            ]))
        }
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic("t"))),
            ])))
        }
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id_or_member_epoch(n),
        ),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
        ),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_session_timeout_ms(n)
                .with_protocol_type(StrBytes::from_static_str("consumer")),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id(n),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id(n),
        ),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str("g"))]),
        ),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("librdkafka"))
                .with_client_software_version(StrBytes::from_static_str("2.0.2")),
        ),
        ApiKey::CreateTopics => RequestKind::CreateTopics(
            CreateTopicsRequest::default()
                .with_timeout_ms(n)
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(topic("t"))
                    .with_num_partitions(3)
                    .with_replication_factor(1)]),
        ),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(
            DeleteTopicsRequest::default()
                .with_timeout_ms(n)
                .with_topic_names(vec![topic("t")]),
        ),
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default().with_transaction_timeout_ms(n),
        ),
        ApiKey::DescribeConfigs => {
            RequestKind::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t")),
            ]))
        }
        other => panic!("no sample for {other:?}"),
    }
}

fn encode_request(
    api_key: ApiKey,
    version: i16,
    cid: i32,
    client_id: &str,
    body: &RequestKind,
) -> Bytes {
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(cid)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())))
        .encode(&mut out, api_key.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

fn supported_request() -> impl Strategy<Value = (ApiKey, i16)> {
    (0..SUPPORTED.len()).prop_flat_map(|i| {
        let a = SUPPORTED[i];
        (Just(a.api_key), a.min_version..=a.max_version)
    })
}

proptest! {
    #[test]
    fn every_implemented_request_round_trips(
        (api_key, version) in supported_request(),
        cid in any::<i32>(),
        client_id in "[a-z0-9.-]{0,16}",
        n in 0..1000i32,
    ) {
        let body = sample(api_key, n);
        let frame = encode_request(api_key, version, cid, &client_id, &body);
        let req = decode(frame).unwrap();
        prop_assert_eq!(req.api_key, api_key);
        prop_assert_eq!(req.version, version);
        prop_assert_eq!(req.correlation_id, cid);
        prop_assert_eq!(req.client_id.as_deref(), Some(client_id.as_str()));
        // What the decoder returns re-encodes to the same bytes the client sent.
        let RequestBody::Decoded(kind) = req.body else {
            return Err(TestCaseError::fail("not decoded"));
        };
        let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
        kind.encode(&mut a, version).unwrap();
        body.encode(&mut b, version).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn truncated_frames_are_typed_errors(
        (api_key, version) in supported_request(),
        cut_permille in 0..1000usize,
    ) {
        let frame = encode_request(api_key, version, 1, "c", &sample(api_key, 3));
        let cut = frame.len() * cut_permille / 1000;
        // A cut inside the body either fails or (trailing optional tagged fields) still decodes.
        let _ = decode(frame.slice(..cut));
        if cut < REQUEST_FIXED_BYTES {
            let short = matches!(
                decode(frame.slice(..cut)),
                Err(KafkaCodecError::FrameTooShort { .. })
            );
            prop_assert!(short);
        }
    }

    #[test]
    fn garbled_headers_never_panic(key in any::<i16>(), version in any::<i16>(), cid in any::<i32>(),
                                   rest in proptest::collection::vec(any::<u8>(), 0..6)) {
        // Only the fixed header and a few bytes are random: random array counts in a body could
        // ask the crate for huge allocations (see the codec's module docs).
        let mut b = BytesMut::new();
        b.put_i16(key);
        b.put_i16(version);
        b.put_i32(cid);
        b.extend_from_slice(&rest);
        match decode(b.freeze()) {
            Ok(r) => prop_assert_eq!(r.correlation_id, cid),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn frame_prefix_is_checked_before_allocation(length in any::<i32>(), max in 8usize..1_000_000) {
        match frame_bytes_from_prefix(length.to_be_bytes(), max) {
            Ok(n) => prop_assert!(n >= REQUEST_FIXED_BYTES && n + 4 <= max),
            Err(KafkaCodecError::FrameTooShort { .. }) => prop_assert!(length < 8),
            Err(KafkaCodecError::FrameTooLarge { .. }) => prop_assert!(length as u64 + 4 > max as u64),
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
    }
}

fn api_versions_request(version: i16) -> Bytes {
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("librdkafka"))
        .with_client_software_version(StrBytes::from_static_str("2.0.2"));
    if version <= 3 {
        return encode_request(
            ApiKey::ApiVersions,
            version,
            42,
            "rdkafka",
            &RequestKind::ApiVersions(body),
        );
    }
    // A future version: header v2 and some body this build cannot know.
    let mut out = BytesMut::new();
    out.put_i16(ApiKey::ApiVersions as i16);
    out.put_i16(version);
    out.put_i32(42);
    out.put_slice(&[0, 7, b'r', b'd', b'k', b'a', b'f', b'k', b'a', 0, 1, 2, 3]);
    out.freeze()
}

#[test]
fn api_versions_v0_to_v3_decode_with_the_crates_client_decoder() {
    for version in 0..=3 {
        let req = decode(api_versions_request(version)).unwrap();
        assert!(matches!(req.body, RequestBody::Decoded(_)));
        let body = ResponseKind::ApiVersions(api_versions_body(ErrorCode::None, &SUPPORTED));
        let frame = encode_response(ApiKey::ApiVersions, version, 42, &body).unwrap();
        // Response header v0 at every version: the body starts right after the correlation id.
        assert_eq!(&frame[4..8], &42i32.to_be_bytes());
        assert_eq!(
            &frame[8..10],
            &0i16.to_be_bytes(),
            "error code follows the header"
        );
        let (cid, mut rest) = split_response(frame, 0).unwrap();
        assert_eq!(cid, 42);
        let decoded = ApiVersionsResponse::decode(&mut rest, version).unwrap();
        assert!(rest.is_empty(), "v{version}: {} bytes left", rest.len());
        assert_eq!(decoded.error_code, 0);
        assert_eq!(decoded.api_keys.len(), SUPPORTED.len());
        let fetch = decoded
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Fetch as i16)
            .unwrap();
        assert_eq!((fetch.min_version, fetch.max_version), (4, 11));
    }
}

#[test]
fn api_versions_v3_bytes_are_what_librdkafka_reads() {
    let body = ResponseKind::ApiVersions(api_versions_body(ErrorCode::None, &SUPPORTED));
    let frame = encode_response(ApiKey::ApiVersions, 3, 7, &body).unwrap();
    // length | correlation id | error_code | compact array length (n + 1) | first entry ...
    assert_eq!(&frame[4..8], &7i32.to_be_bytes());
    assert_eq!(&frame[8..10], &[0, 0]);
    assert_eq!(frame[10] as usize, SUPPORTED.len() + 1);
    // api_key 0 (Produce), min 3, max 9, no tagged fields.
    assert_eq!(&frame[11..18], &[0, 0, 0, 3, 0, 9, 0]);
    // ... throttle_time_ms (i32 0) and an empty tagged-field section end the frame.
    assert_eq!(&frame[frame.len() - 5..], &[0, 0, 0, 0, 0]);
    let length = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    assert_eq!(length as usize, frame.len() - 4);
}

#[test]
fn newer_api_versions_get_a_v0_answer_with_unsupported_version() {
    for version in [4, 5, 100] {
        let req = decode(api_versions_request(version)).unwrap();
        assert_eq!(req.body, RequestBody::Unsupported(Refused::Whole));
        assert_eq!(req.correlation_id, 42);
        let frame = unsupported_response(req.api_key, req.version, 42, &Refused::Whole, &SUPPORTED)
            .unwrap()
            .unwrap();
        let (cid, mut rest) = split_response(frame, 0).unwrap();
        assert_eq!(cid, 42);
        let decoded = ApiVersionsResponse::decode(&mut rest, 0).unwrap();
        assert!(rest.is_empty());
        assert_eq!(decoded.error_code, ErrorCode::UnsupportedVersion as i16);
        assert_eq!(decoded.api_keys.len(), SUPPORTED.len());
    }
}

#[test]
fn a_version_we_do_not_implement_is_answered_in_its_shape() {
    // The crate knows these versions; spool does not implement them.
    for (api_key, version) in [
        (ApiKey::Metadata, 12),
        (ApiKey::FindCoordinator, 4),
        (ApiKey::SaslHandshake, 1),
    ] {
        let mut out = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(9)
            .encode(&mut out, api_key.request_header_version(version))
            .unwrap();
        let req = decode(out.freeze()).unwrap();
        // No body follows the header: nothing to echo, the empty shape answers.
        assert_eq!(req.body, RequestBody::Unsupported(Refused::Whole));
        let frame = unsupported_response(api_key, version, 9, &Refused::Whole, &SUPPORTED)
            .unwrap()
            .unwrap();
        let (cid, mut rest) =
            split_response(frame, api_key.response_header_version(version)).unwrap();
        assert_eq!(cid, 9);
        let decoded = ResponseKind::decode(api_key, &mut rest, version).unwrap();
        assert!(rest.is_empty());
        match decoded {
            ResponseKind::FindCoordinator(r) => assert!(r.coordinators.is_empty()),
            ResponseKind::SaslHandshake(r) => assert_eq!(r.error_code, 35),
            ResponseKind::Metadata(r) => assert!(r.topics.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn unknown_keys_and_versions_outside_the_codec_are_errors() {
    let mut b = BytesMut::new();
    b.put_i16(9999);
    b.put_i16(0);
    b.put_i32(5);
    assert!(matches!(
        decode(b.freeze()),
        Err(KafkaCodecError::UnknownApiKey {
            api_key: 9999,
            correlation_id: 5
        })
    ));
    // Above the crate's range: its header may not even parse.
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::Produce as i16);
    b.put_i16(ApiKey::Produce.valid_versions().max + 1);
    b.put_i32(5);
    let e = decode(b.freeze()).unwrap_err();
    assert!(matches!(e, KafkaCodecError::VersionOutsideCodec { .. }));
    assert_eq!(e.error_code(), ErrorCode::UnsupportedVersion);
}
