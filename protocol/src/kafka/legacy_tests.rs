//! Tests of the legacy versions and the refusals: each hand decoder against a request written out
//! byte by byte from Kafka's message definitions, each hand encoder against the bytes Kafka's
//! layout prescribes, whole frames through [`decode_request`] and [`unsupported_response`], and
//! arbitrary bytes never panicking the hand decoders.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use proptest::prelude::*;

use super::codec::*;
use super::legacy::{Legacy, LEGACY};
use super::legacy_requests::{self, LegacyItems};
use super::legacy_responses::{self, DEFAULT_CONFIG};
use super::primitives::Reader;
use super::versions::{ApiRange, KafkaApiRange};

const UNSUPPORTED: i16 = 35;

/// A response body decoded as a client would, every byte of it.
fn decoded(api_key: ApiKey, version: i16, mut body: Bytes) -> ResponseKind {
    let r = decode_response_body(api_key, version, &mut body)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version}: {e}"));
    assert!(body.is_empty(), "{api_key:?} v{version}: trailing bytes");
    r
}

/// A table serving the legacy versions (as the broker's does) and listing no Produce below v3.
const TABLE: [KafkaApiRange; 4] = [
    row(ApiKey::Produce, 3, 9),
    row(ApiKey::OffsetCommit, 0, 8),
    row(ApiKey::OffsetFetch, 0, 7),
    row(ApiKey::DescribeConfigs, 0, 4),
];

const fn row(api_key: ApiKey, min_version: i16, max_version: i16) -> KafkaApiRange {
    ApiRange {
        api_key,
        min_version,
        max_version,
    }
}

/// Kafka's `string`.
fn s(out: &mut BytesMut, v: &str) {
    out.put_i16(v.len() as i16);
    out.put_slice(v.as_bytes());
}

/// A request frame after the length prefix: header v1 (client id "c") and `body`.
fn frame(api_key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(api_key as i16);
    b.put_i16(version);
    b.put_i32(77);
    s(&mut b, "c");
    b.put_slice(body);
    b.freeze()
}

/// The body of a response frame with header v0, checking the prefix and correlation id.
fn answer_body(frame: Bytes) -> Bytes {
    let (cid, body) = split_response(frame, 0).unwrap();
    assert_eq!(cid, 77);
    body
}

fn refuse(req: &KafkaRequest) -> Option<Bytes> {
    let RequestBody::Unsupported(refused) = &req.body else {
        panic!("{req:?} is not refused")
    };
    unsupported_response(req.api_key, req.version, 77, refused, &TABLE).unwrap()
}

fn offset_commit_v1_body() -> BytesMut {
    let mut b = BytesMut::new();
    s(&mut b, "g");
    b.put_i32(4); // generation_id
    s(&mut b, "m-1"); // member_id
    b.put_i32(1);
    s(&mut b, "t");
    b.put_i32(1);
    b.put_i32(2); // partition_index
    b.put_i64(42); // committed_offset
    b.put_i64(-1); // commit_timestamp
    s(&mut b, "meta");
    b
}

#[test]
fn offset_commit_v0_and_v1_decode_into_the_crates_struct() {
    let RequestKind::OffsetCommit(r) =
        legacy_requests::decode_served(ApiKey::OffsetCommit, 1, offset_commit_v1_body().freeze())
            .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (
            r.group_id.as_str(),
            r.generation_id_or_member_epoch,
            r.member_id.as_str()
        ),
        ("g", 4, "m-1")
    );
    let p = &r.topics[0].partitions[0];
    assert_eq!(r.topics[0].name.as_str(), "t");
    assert_eq!((p.partition_index, p.committed_offset), (2, 42));
    assert_eq!(p.committed_metadata.as_deref(), Some("meta"));

    // v0: no generation, member or timestamp; a null metadata.
    let mut b = BytesMut::new();
    s(&mut b, "g");
    b.put_i32(1);
    s(&mut b, "t");
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(7);
    b.put_i16(-1);
    let RequestKind::OffsetCommit(r) =
        legacy_requests::decode_served(ApiKey::OffsetCommit, 0, b.freeze()).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (r.generation_id_or_member_epoch, r.member_id.as_str()),
        (-1, "")
    );
    let p = &r.topics[0].partitions[0];
    assert_eq!(
        (p.committed_offset, p.committed_metadata.clone()),
        (7, None)
    );
}

#[test]
fn offset_fetch_v0_and_describe_configs_v0_decode() {
    let mut b = BytesMut::new();
    s(&mut b, "g");
    b.put_i32(1);
    s(&mut b, "t");
    b.put_i32(2);
    b.put_i32(0);
    b.put_i32(3);
    let RequestKind::OffsetFetch(r) =
        legacy_requests::decode_served(ApiKey::OffsetFetch, 0, b.freeze()).unwrap()
    else {
        panic!()
    };
    assert_eq!(r.group_id.as_str(), "g");
    let t = &r.topics.as_ref().unwrap()[0];
    assert_eq!(
        (t.name.as_str(), t.partition_indexes.clone()),
        ("t", vec![0, 3])
    );

    let mut b = BytesMut::new();
    b.put_i32(2);
    b.put_i8(2); // topic
    s(&mut b, "t");
    b.put_i32(-1); // every key
    b.put_i8(4); // broker
    s(&mut b, "0");
    b.put_i32(1);
    s(&mut b, "retention.ms");
    let RequestKind::DescribeConfigs(r) =
        legacy_requests::decode_served(ApiKey::DescribeConfigs, 0, b.freeze()).unwrap()
    else {
        panic!()
    };
    assert!(!r.include_synonyms);
    let (a, b) = (&r.resources[0], &r.resources[1]);
    assert_eq!((a.resource_type, a.resource_name.as_str()), (2, "t"));
    assert_eq!(a.configuration_keys, None);
    assert_eq!((b.resource_type, b.resource_name.as_str()), (4, "0"));
    let keys: Vec<&str> = b
        .configuration_keys
        .as_ref()
        .unwrap()
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(keys, ["retention.ms"]);
}

#[test]
fn served_legacy_frames_decode_when_listed_and_are_refused_by_item_when_not() {
    let listed = decode_request(
        frame(ApiKey::OffsetCommit, 1, &offset_commit_v1_body()),
        &TABLE,
    )
    .unwrap();
    assert_eq!(listed.client_id.as_deref(), Some("c"));
    assert!(
        matches!(&listed.body, RequestBody::Decoded(k) if matches!(**k, RequestKind::OffsetCommit(_)))
    );

    let unlisted = decode_request(
        frame(ApiKey::OffsetCommit, 1, &offset_commit_v1_body()),
        &TABLE[..1],
    )
    .unwrap();
    // v0–2 share one response layout: topics [name, partitions [partition_index, error_code]].
    let body = answer_body(refuse(&unlisted).unwrap());
    let mut want = BytesMut::new();
    want.put_i32(1);
    s(&mut want, "t");
    want.put_i32(1);
    want.put_i32(2);
    want.put_i16(UNSUPPORTED);
    assert_eq!(&body[..], &want[..]);
}

#[test]
fn offset_commit_and_offset_fetch_answers_use_the_older_layouts() {
    use offset_commit_response::*;
    let r = OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![OffsetCommitResponsePartition::default()
            .with_partition_index(2)
            .with_error_code(22)])]);
    for v in [0, 1] {
        let f = encode_response(ApiKey::OffsetCommit, v, 77, &r.clone().into()).unwrap();
        let mut want = BytesMut::new();
        want.put_i32(1);
        s(&mut want, "t");
        want.put_i32(1);
        want.put_i32(2);
        want.put_i16(22);
        assert_eq!(&answer_body(f.clone())[..], &want[..], "v{v}");
        let ResponseKind::OffsetCommit(back) = decoded(ApiKey::OffsetCommit, v, answer_body(f))
        else {
            panic!()
        };
        assert_eq!(back, r);
    }

    use offset_fetch_response::*;
    let r = OffsetFetchResponse::default().with_topics(vec![OffsetFetchResponseTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![OffsetFetchResponsePartition::default()
            .with_partition_index(0)
            .with_committed_offset(42)
            .with_metadata(Some(StrBytes::from_static_str("m")))])]);
    let f = encode_response(ApiKey::OffsetFetch, 0, 77, &r.clone().into()).unwrap();
    let mut want = BytesMut::new();
    want.put_i32(1);
    s(&mut want, "t");
    want.put_i32(1);
    want.put_i32(0);
    want.put_i64(42);
    s(&mut want, "m");
    want.put_i16(0);
    assert_eq!(&answer_body(f.clone())[..], &want[..]);
    let ResponseKind::OffsetFetch(back) = decoded(ApiKey::OffsetFetch, 0, answer_body(f)) else {
        panic!()
    };
    assert_eq!(back.topics[0].partitions[0].committed_offset, 42);
}

#[test]
fn describe_configs_v0_answers_is_default_from_the_source() {
    use describe_configs_response::*;
    let config = |name: &'static str, value: &'static str, source: i8| {
        DescribeConfigsResourceResult::default()
            .with_name(StrBytes::from_static_str(name))
            .with_value(Some(StrBytes::from_static_str(value)))
            .with_read_only(true)
            .with_config_source(source)
    };
    let r = DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
        .with_error_message(None)
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("t"))
        .with_configs(vec![
            config("retention.ms", "1000", 1),
            config("segment.bytes", "1", DEFAULT_CONFIG),
        ])]);
    let f = encode_response(ApiKey::DescribeConfigs, 0, 77, &r.into()).unwrap();
    let body = answer_body(f);
    let mut want = BytesMut::new();
    want.put_i32(0); // throttle_time_ms
    want.put_i32(1);
    want.put_i16(0);
    want.put_i16(-1); // error_message
    want.put_i8(2);
    s(&mut want, "t");
    want.put_i32(2);
    s(&mut want, "retention.ms");
    s(&mut want, "1000");
    want.put_slice(&[1, 0, 0]); // read_only, is_default, is_sensitive
    s(&mut want, "segment.bytes");
    s(&mut want, "1");
    want.put_slice(&[1, 1, 0]);
    assert_eq!(&body[..], &want[..]);
    let ResponseKind::DescribeConfigs(back) = decoded(ApiKey::DescribeConfigs, 0, body) else {
        panic!()
    };
    let sources: Vec<i8> = back.results[0]
        .configs
        .iter()
        .map(|c| c.config_source)
        .collect();
    assert_eq!(sources, [legacy_responses::UNKNOWN_CONFIG, DEFAULT_CONFIG]);
}

/// topics [name "t", partitions [each of `partitions`, written by `p`]].
fn one_topic(partitions: &[i32], mut p: impl FnMut(&mut BytesMut, i32)) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_i32(1);
    s(&mut b, "t");
    b.put_i32(partitions.len() as i32);
    for &i in partitions {
        p(&mut b, i);
    }
    b
}

#[test]
fn produce_v0_to_v2_are_refused_per_partition() {
    for v in 0..=2 {
        let mut body = BytesMut::new();
        body.put_i16(-1); // acks
        body.put_i32(1000);
        body.put_slice(&one_topic(&[0, 1], |b, i| {
            b.put_i32(i);
            if i == 0 {
                b.put_i32(3);
                b.put_slice(&[1, 2, 3]);
            } else {
                b.put_i32(-1);
            }
        }));
        let req = decode_request(frame(ApiKey::Produce, v, &body), &TABLE).unwrap();
        let got = answer_body(refuse(&req).unwrap());
        let mut want = one_topic(&[0, 1], |b, i| {
            b.put_i32(i);
            b.put_i16(UNSUPPORTED);
            b.put_i64(-1); // base_offset
            if v >= 2 {
                b.put_i64(-1); // log_append_time_ms
            }
        });
        if v >= 1 {
            want.put_i32(0); // throttle_time_ms
        }
        assert_eq!(&got[..], &want[..], "v{v}");

        // acks=0: the client reads no response.
        body[..2].copy_from_slice(&0i16.to_be_bytes());
        let req = decode_request(frame(ApiKey::Produce, v, &body), &TABLE).unwrap();
        assert_eq!(refuse(&req), None);
    }
}

#[test]
fn fetch_list_offsets_and_offset_for_leader_epoch_are_refused_per_partition() {
    for v in 0..=3 {
        let mut body = BytesMut::new();
        body.put_slice(&[0xff; 4]); // replica_id -1
        body.put_i32(500);
        body.put_i32(1);
        if v >= 3 {
            body.put_i32(1 << 20);
        }
        body.put_slice(&one_topic(&[5], |b, i| {
            b.put_i32(i);
            b.put_i64(10);
            b.put_i32(1 << 20);
        }));
        let req = decode_request(frame(ApiKey::Fetch, v, &body), &TABLE).unwrap();
        let got = answer_body(refuse(&req).unwrap());
        let mut want = BytesMut::new();
        if v >= 1 {
            want.put_i32(0);
        }
        want.put_slice(&one_topic(&[5], |b, i| {
            b.put_i32(i);
            b.put_i16(UNSUPPORTED);
            b.put_i64(-1);
            b.put_i32(0); // empty records
        }));
        assert_eq!(&got[..], &want[..], "Fetch v{v}");
    }

    let mut body = BytesMut::new();
    body.put_i32(-1);
    body.put_slice(&one_topic(&[1], |b, i| {
        b.put_i32(i);
        b.put_i64(-1);
        b.put_i32(1);
    }));
    let req = decode_request(frame(ApiKey::ListOffsets, 0, &body), &TABLE).unwrap();
    let want = one_topic(&[1], |b, i| {
        b.put_i32(i);
        b.put_i16(UNSUPPORTED);
        b.put_i32(0); // old_style_offsets
    });
    assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..]);

    for v in 0..=1 {
        let body = one_topic(&[3], |b, i| {
            b.put_i32(i);
            b.put_i32(9);
        });
        let req = decode_request(frame(ApiKey::OffsetForLeaderEpoch, v, &body), &TABLE).unwrap();
        let want = one_topic(&[3], |b, i| {
            b.put_i16(UNSUPPORTED);
            b.put_i32(i);
            if v >= 1 {
                b.put_i32(-1);
            }
            b.put_i64(-1);
        });
        assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..], "v{v}");
    }
}

#[test]
fn create_and_delete_topics_are_refused_per_topic() {
    for v in 0..=1 {
        let mut body = BytesMut::new();
        body.put_i32(1);
        s(&mut body, "new");
        body.put_i32(3);
        body.put_i16(1);
        body.put_i32(1); // one assignment
        body.put_i32(0);
        body.put_i32(1);
        body.put_i32(0);
        body.put_i32(1); // one config
        s(&mut body, "retention.ms");
        body.put_i16(-1);
        body.put_i32(1000);
        if v >= 1 {
            body.put_u8(0);
        }
        let req = decode_request(frame(ApiKey::CreateTopics, v, &body), &TABLE).unwrap();
        let mut want = BytesMut::new();
        want.put_i32(1);
        s(&mut want, "new");
        want.put_i16(UNSUPPORTED);
        if v >= 1 {
            want.put_i16(-1);
        }
        assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..], "v{v}");
    }
    let mut body = BytesMut::new();
    body.put_i32(2);
    s(&mut body, "a");
    s(&mut body, "b");
    body.put_i32(1000);
    let req = decode_request(frame(ApiKey::DeleteTopics, 0, &body), &TABLE).unwrap();
    let mut want = BytesMut::new();
    want.put_i32(2);
    for n in ["a", "b"] {
        s(&mut want, n);
        want.put_i16(UNSUPPORTED);
    }
    assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..]);
}

#[test]
fn acl_v0_requests_are_refused_per_entry() {
    let mut filter = BytesMut::new();
    filter.put_i8(2);
    filter.put_i16(-1);
    s(&mut filter, "User:a");
    filter.put_i16(-1);
    filter.put_i8(1);
    filter.put_i8(3);
    let req = decode_request(frame(ApiKey::DescribeAcls, 0, &filter), &TABLE).unwrap();
    let mut want = BytesMut::new();
    want.put_i32(0);
    want.put_i16(UNSUPPORTED);
    want.put_i16(-1);
    want.put_i32(0);
    assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..]);

    let mut body = BytesMut::new();
    body.put_i32(2);
    body.put_slice(&filter);
    body.put_slice(&filter);
    let req = decode_request(frame(ApiKey::DeleteAcls, 0, &body), &TABLE).unwrap();
    let mut want = BytesMut::new();
    want.put_i32(0);
    want.put_i32(2);
    for _ in 0..2 {
        want.put_i16(UNSUPPORTED);
        want.put_i16(-1);
        want.put_i32(0);
    }
    assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..]);

    let mut body = BytesMut::new();
    body.put_i32(1);
    body.put_i8(2);
    for v in ["t", "User:a", "*"] {
        s(&mut body, v);
    }
    body.put_i8(2);
    body.put_i8(3);
    let req = decode_request(frame(ApiKey::CreateAcls, 0, &body), &TABLE).unwrap();
    let mut want = BytesMut::new();
    want.put_i32(0);
    want.put_i32(1);
    want.put_i16(UNSUPPORTED);
    want.put_i16(-1);
    assert_eq!(&answer_body(refuse(&req).unwrap())[..], &want[..]);
}

#[test]
fn a_version_the_same_as_the_next_is_refused_in_the_next_ones_shape() {
    // DescribeLogDirs v0 is v1 byte for byte; before v3 it has no top-level error.
    let mut body = BytesMut::new();
    body.put_i32(-1);
    let req = decode_request(frame(ApiKey::DescribeLogDirs, 0, &body), &TABLE).unwrap();
    let answer = answer_body(refuse(&req).unwrap());
    let ResponseKind::DescribeLogDirs(r) = decoded(ApiKey::DescribeLogDirs, 0, answer) else {
        panic!()
    };
    assert_eq!(r.results[0].error_code, UNSUPPORTED);
}

/// A crate-version request frame of `body` at `version`.
fn crate_frame(api_key: ApiKey, version: i16, body: &RequestKind) -> Bytes {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(77)
        .encode(&mut b, api_key.request_header_version(version))
        .unwrap();
    body.encode(&mut b, version).unwrap();
    b.freeze()
}

fn crate_refusal(api_key: ApiKey, version: i16, body: RequestKind) -> Option<ResponseKind> {
    let req = decode_request(crate_frame(api_key, version, &body), &TABLE).unwrap();
    let f = refuse(&req)?;
    let (cid, body) = split_response(f, api_key.response_header_version(version)).unwrap();
    assert_eq!(cid, 77);
    Some(decoded(api_key, version, body))
}

#[test]
fn unimplemented_apis_echo_each_item_with_unsupported_version() {
    use create_partitions_request::CreatePartitionsTopic;
    let topics = ["a", "b"]
        .map(|n| {
            CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(n)))
                .with_count(3)
        })
        .to_vec();
    for v in 0..=3 {
        let req = CreatePartitionsRequest::default().with_topics(topics.clone());
        let Some(ResponseKind::CreatePartitions(r)) =
            crate_refusal(ApiKey::CreatePartitions, v, req.into())
        else {
            panic!()
        };
        let got: Vec<(&str, i16)> = r
            .results
            .iter()
            .map(|t| (t.name.as_str(), t.error_code))
            .collect();
        assert_eq!(got, [("a", UNSUPPORTED), ("b", UNSUPPORTED)], "v{v}");
    }

    // A Produce version the crate knows but the table does not list (v10).
    use produce_request::{PartitionProduceData, TopicProduceData};
    let produce = |acks: i16| {
        ProduceRequest::default()
            .with_acks(acks)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(
                    vec![PartitionProduceData::default().with_index(4)],
                )])
    };
    let Some(ResponseKind::Produce(r)) = crate_refusal(ApiKey::Produce, 10, produce(1).into())
    else {
        panic!()
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(
        (r.responses[0].name.as_str(), p.index, p.error_code),
        ("t", 4, UNSUPPORTED)
    );
    assert_eq!(crate_refusal(ApiKey::Produce, 10, produce(0).into()), None);

    // Top-level error codes still carry it; Fetch 4–6 have none and echo partitions alone.
    let Some(ResponseKind::DeleteGroups(r)) = crate_refusal(
        ApiKey::DeleteGroups,
        1,
        DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_static_str("g"))])
            .into(),
    ) else {
        panic!()
    };
    assert_eq!(
        (r.results[0].group_id.as_str(), r.results[0].error_code),
        ("g", UNSUPPORTED)
    );
    let Some(ResponseKind::SaslHandshake(r)) = crate_refusal(
        ApiKey::SaslHandshake,
        1,
        SaslHandshakeRequest::default().into(),
    ) else {
        panic!()
    };
    assert_eq!(r.error_code, UNSUPPORTED);
}

#[test]
fn every_refused_legacy_row_answers_an_empty_request_in_its_shape() {
    // The smallest valid body of each refused legacy version: empty arrays and null strings.
    for r in LEGACY.iter().filter(|r| r.how == Legacy::Refused) {
        for v in r.min_version..=r.max_version {
            let mut body = BytesMut::new();
            match r.api_key {
                ApiKey::Produce => body.put_slice(&[0, 1, 0, 0, 0, 0]),
                ApiKey::Fetch => body.put_slice(&[0; 16]),
                ApiKey::ListOffsets => body.put_slice(&[0; 4]),
                ApiKey::DescribeAcls => {
                    body.put_slice(&[2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 1])
                }
                _ => {}
            }
            body.put_slice(&[0; 8]); // empty arrays (and any trailing fixed field)
            let req = decode_request(frame(r.api_key, v, &body), &TABLE)
                .unwrap_or_else(|e| panic!("{:?} v{v}: {e}", r.api_key));
            let answer = refuse(&req).unwrap_or_else(|| panic!("{:?} v{v}", r.api_key));
            assert!(answer.len() > 8, "{:?} v{v}", r.api_key);
        }
    }
}

#[test]
fn claimed_counts_are_bounded_by_the_bytes_left() {
    let mut b = BytesMut::new();
    s(&mut b, "g");
    b.put_i32(i32::MAX);
    let e = legacy_requests::decode_served(ApiKey::OffsetFetch, 0, b.freeze()).unwrap_err();
    assert!(e.contains("elements"), "{e}");
    let mut r = Reader::new(Bytes::from_static(&[0xff, 0xfe]));
    assert!(r.nullable_string().is_err());
    assert_eq!(
        legacy_requests::decode_refused(ApiKey::DeleteTopics, 0, Bytes::new()),
        Err(String::from("int32: 4 bytes needed, 0 left"))
    );
    let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 2, 1, 2]));
    assert!(r.array(Reader::i32).is_err());
    assert!(matches!(
        legacy_requests::decode_refused(ApiKey::DeleteTopics, 0, {
            let mut b = BytesMut::new();
            b.put_i32(1);
            s(&mut b, "x");
            b.freeze()
        }),
        Ok(r) if r.items == LegacyItems::Topics(vec![StrBytes::from_static_str("x")])
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Arbitrary bytes into every hand decoder, at every legacy version, and through the whole
    /// frame path: a value or a typed error, never a panic. (Versions the crate decodes at the
    /// next version are left out of the frame path: the crate pre-allocates claimed counts, the
    /// known limit `spool_broker::alloc` guards and tests.)
    #[test]
    fn arbitrary_bytes_never_panic_the_legacy_decoders(
        i in 0..LEGACY.len(),
        pick in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..160),
    ) {
        let r = LEGACY[i];
        let v = r.min_version + (pick % (r.max_version - r.min_version + 1) as u16) as i16;
        let bytes = Bytes::from(body.clone());
        let _ = legacy_requests::decode_served(r.api_key, v, bytes.clone());
        let _ = legacy_requests::decode_refused(r.api_key, v, bytes.clone());
        if r.api_key == ApiKey::DescribeConfigs {
            // The one response decoded by hand (the others are the crate's, at a later version).
            let _ = legacy_responses::decode_served(r.api_key, v, &mut bytes.clone());
        }
        let by_hand = !matches!(r.how, Legacy::SameAs(_));
        let req = if by_hand { decode_request(frame(r.api_key, v, &body), &TABLE).ok() } else { None };
        if let Some(req) = req {
            prop_assert_eq!(req.correlation_id, 77);
            if let RequestBody::Unsupported(refused) = &req.body {
                let _ = unsupported_response(r.api_key, v, 77, refused, &TABLE);
            }
        }
    }
}
