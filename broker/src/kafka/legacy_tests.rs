//! The legacy versions and the refusals on a real broker: one `spool serve` (one core, its own
//! ports and data directory) runs in this test process, and each test talks Kafka's bytes to it
//! over TCP — requests written out by hand where the `kafka-protocol` crate no longer carries the
//! version, answers read back the same way.
//!
//! What they show (issue 17, item 2): sarama's OffsetCommit v1 and OffsetFetch v0 reach the same
//! offsets; DescribeConfigs v0 reports `is_default` from the config's source; a refused Produce
//! v2 names each partition with UNSUPPORTED_VERSION and the connection stays open; an API spool
//! does not implement (DescribeProducers) names each partition with it. And DescribeCluster
//! (issue 17, item 3), answered from the same running broker.
//!
//! The broker is started once and left running until the test process exits (its data
//! directory, a few kilobytes under the system temp directory, stays behind).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use spool_protocol::kafka::codec::{decode_response_body, split_response};
use spool_protocol::kafka::legacy_responses::DEFAULT_CONFIG;
use spool_protocol::kafka::primitives::Reader;

use crate::config::{BrokerConfig, ServeArgs};

const UNSUPPORTED: i16 = 35;

/// A response body decoded as a client would, every byte of it.
fn decoded(api_key: ApiKey, version: i16, mut body: Bytes) -> ResponseKind {
    let r = decode_response_body(api_key, version, &mut body)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version}: {e}"));
    assert!(body.is_empty(), "{api_key:?} v{version}: trailing bytes");
    r
}
/// Errors a group coordinator answers while `__consumer_offsets` is being created or loaded.
const COORDINATOR_NOT_READY: [i16; 3] = [14, 15, 16];
const WAIT: Duration = Duration::from_secs(30);

#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

/// The Kafka address of this process's broker, started on first use.
fn broker() -> SocketAddr {
    static KAFKA: OnceLock<SocketAddr> = OnceLock::new();
    *KAFKA.get_or_init(start_broker)
}

fn start_broker() -> SocketAddr {
    // Three distinct free ports: held together, then released for the broker.
    let held: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    let ports: Vec<String> = held
        .iter()
        .map(|l| l.local_addr().unwrap().port().to_string())
        .collect();
    drop(held);
    let dir = tempfile::Builder::new()
        .prefix("spool-kafka-legacy-")
        .tempdir()
        .expect("a data dir")
        .keep();
    let serve = Serve::parse_from([
        "serve",
        "--data-dir",
        dir.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--native-port",
        &ports[0],
        "--admin-port",
        &ports[1],
        "--kafka-port",
        &ports[2],
        "--cores",
        "1",
        "--offsets-topic-partitions",
        "1",
        "--auto-create-topics",
        "true",
    ]);
    let config = BrokerConfig::from_args(&serve.args).expect("a broker config");
    let kafka: SocketAddr = format!("127.0.0.1:{}", ports[2]).parse().unwrap();
    std::thread::spawn(move || {
        if let Err(e) = crate::runtime::serve(config) {
            eprintln!("the test broker stopped: {e}");
        }
    });
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(mut c) = Conn::try_open(kafka) {
            if c.api_versions().is_ok() {
                return kafka;
            }
        }
        assert!(Instant::now() < deadline, "the test broker did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kafka's `string`.
fn s(out: &mut BytesMut, v: &str) {
    out.put_i16(v.len() as i16);
    out.put_slice(v.as_bytes());
}

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_owned()))
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    next_cid: i32,
}

impl Conn {
    fn try_open(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(WAIT))?;
        Ok(Self {
            stream,
            next_cid: 1,
        })
    }

    fn open() -> Self {
        Self::try_open(broker()).expect("connecting to the test broker")
    }

    /// Sends `body` after a request header of `header_version` (client id "legacy-test").
    fn send(&mut self, api_key: ApiKey, version: i16, header_version: i16, body: &[u8]) -> i32 {
        let cid = self.next_cid;
        self.next_cid += 1;
        let mut head = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(cid)
            .with_client_id(Some(StrBytes::from_static_str("legacy-test")))
            .encode(&mut head, header_version)
            .unwrap();
        let mut frame = BytesMut::new();
        frame.put_i32((head.len() + body.len()) as i32);
        frame.put_slice(&head);
        frame.put_slice(body);
        self.stream.write_all(&frame).expect("sending a request");
        cid
    }

    /// The next response frame, whole (length prefix included).
    fn receive(&mut self) -> std::io::Result<Bytes> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let mut rest = vec![0u8; i32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut rest)?;
        let mut frame = BytesMut::from(&prefix[..]);
        frame.put_slice(&rest);
        Ok(frame.freeze())
    }

    /// A legacy (non-flexible) request: header v1 out, header v0 back; the response body.
    fn call(&mut self, api_key: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let cid = self.send(api_key, version, 1, body);
        let frame = self.receive().expect("an answer");
        let (got, body) = split_response(frame, 0).unwrap();
        assert_eq!(got, cid, "{api_key:?} v{version}");
        body
    }

    /// A request the crate encodes, its response decoded as a client would.
    fn call_crate(&mut self, api_key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
        let mut b = BytesMut::new();
        body.encode(&mut b, version).unwrap();
        let cid = self.send(
            api_key,
            version,
            api_key.request_header_version(version),
            &b,
        );
        let frame = self.receive().expect("an answer");
        let (got, body) = split_response(frame, api_key.response_header_version(version)).unwrap();
        assert_eq!(got, cid, "{api_key:?} v{version}");
        decoded(api_key, version, body)
    }

    fn api_versions(&mut self) -> std::io::Result<ApiVersionsResponse> {
        let cid = self.send(ApiKey::ApiVersions, 0, 1, &[]);
        let frame = self.receive()?;
        let (got, body) = split_response(frame, 0).unwrap();
        assert_eq!(got, cid);
        match decoded(ApiKey::ApiVersions, 0, body) {
            ResponseKind::ApiVersions(r) => Ok(r),
            other => panic!("{other:?}"),
        }
    }

    /// Creates `topic` (or finds it there) with `partitions` and `configs`.
    fn create_topic(&mut self, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        use create_topics_request::{CreatableTopic, CreatableTopicConfig};
        let t = CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            );
        let req = CreateTopicsRequest::default()
            .with_topics(vec![t])
            .with_timeout_ms(10_000);
        let ResponseKind::CreateTopics(r) = self.call_crate(ApiKey::CreateTopics, 4, req.into())
        else {
            panic!()
        };
        let code = r.topics[0].error_code;
        assert!(code == 0 || code == 36, "creating {topic}: {code}");
    }
}

/// OffsetCommit v0/v1 of one partition; its error code.
fn commit(c: &mut Conn, version: i16, group: &str, topic: &str, offset: i64) -> i16 {
    let mut b = BytesMut::new();
    s(&mut b, group);
    if version >= 1 {
        b.put_i32(-1); // generation_id: a simple commit
        s(&mut b, ""); // member_id
    }
    b.put_i32(1);
    s(&mut b, topic);
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(offset);
    if version >= 1 {
        b.put_i64(-1); // commit_timestamp
    }
    s(&mut b, "meta");
    // v0–1: topics [name, partitions [partition_index, error_code]].
    let mut r = Reader::new(c.call(ApiKey::OffsetCommit, version, &b));
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.string().unwrap().as_str(), topic);
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.i32().unwrap(), 0);
    let code = r.i16().unwrap();
    assert_eq!(r.remaining(), 0);
    code
}

/// OffsetFetch v0 of partition 0: (offset, metadata, error code).
fn fetch_offset_v0(c: &mut Conn, group: &str, topic: &str) -> (i64, Option<String>, i16) {
    let mut b = BytesMut::new();
    s(&mut b, group);
    b.put_i32(1);
    s(&mut b, topic);
    b.put_i32(1);
    b.put_i32(0);
    // v0 = v1: topics [name, partitions [partition_index, committed_offset, metadata, error_code]].
    let mut r = Reader::new(c.call(ApiKey::OffsetFetch, 0, &b));
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.string().unwrap().as_str(), topic);
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.i32().unwrap(), 0);
    let offset = r.i64().unwrap();
    let metadata = r.nullable_string().unwrap().map(|m| m.as_str().to_owned());
    let code = r.i16().unwrap();
    assert_eq!(r.remaining(), 0);
    (offset, metadata, code)
}

#[test]
fn offset_commit_v1_and_v0_then_offset_fetch_v0_read_the_committed_offset() {
    let mut c = Conn::open();
    let (group, topic) = ("legacy-group", "legacy-offsets");
    c.create_topic(topic, 1, &[]);
    let deadline = Instant::now() + WAIT;
    loop {
        match commit(&mut c, 1, group, topic, 42) {
            0 => break,
            code if COORDINATOR_NOT_READY.contains(&code) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            code => panic!("OffsetCommit v1: error {code}"),
        }
    }
    assert_eq!(
        fetch_offset_v0(&mut c, group, topic),
        (42, Some("meta".into()), 0)
    );
    // v0 commits outside any generation, into the same store.
    assert_eq!(commit(&mut c, 0, group, topic, 43), 0);
    assert_eq!(fetch_offset_v0(&mut c, group, topic).0, 43);
    use offset_fetch_request::OffsetFetchRequestTopic;
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("legacy-group")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]));
    let ResponseKind::OffsetFetch(r) = c.call_crate(ApiKey::OffsetFetch, 5, req.into()) else {
        panic!()
    };
    assert_eq!(r.topics[0].partitions[0].committed_offset, 43);
}

#[test]
fn describe_configs_v0_reports_is_default_from_the_source() {
    let mut c = Conn::open();
    let topic = "legacy-configs";
    c.create_topic(topic, 1, &[("retention.ms", "3600000")]);
    let mut b = BytesMut::new();
    b.put_i32(1);
    b.put_i8(2); // topic
    s(&mut b, topic);
    b.put_i32(-1); // every key
    let body = c.call(ApiKey::DescribeConfigs, 0, &b);
    let ResponseKind::DescribeConfigs(v0) = decoded(ApiKey::DescribeConfigs, 0, body) else {
        panic!()
    };
    let res = &v0.results[0];
    assert_eq!((res.error_code, res.resource_name.as_str()), (0, topic));
    let retention = res
        .configs
        .iter()
        .find(|e| e.name.as_str() == "retention.ms")
        .expect("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    // is_default false reads back as "unknown"; true as DEFAULT_CONFIG.
    assert_ne!(retention.config_source, DEFAULT_CONFIG);
    assert!(res
        .configs
        .iter()
        .any(|e| e.config_source == DEFAULT_CONFIG));

    // The same configs at v1 carry the source itself: is_default is exactly source == default.
    assert_eq!(super::configs::SOURCE_DEFAULT, DEFAULT_CONFIG);
    use describe_configs_request::DescribeConfigsResource;
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("legacy-configs"))
            .with_configuration_keys(None)]);
    let ResponseKind::DescribeConfigs(v1) = c.call_crate(ApiKey::DescribeConfigs, 1, req.into())
    else {
        panic!()
    };
    let defaults = |r: &DescribeConfigsResponse| -> Vec<(String, bool)> {
        r.results[0]
            .configs
            .iter()
            .map(|e| {
                (
                    e.name.as_str().to_owned(),
                    e.config_source == DEFAULT_CONFIG,
                )
            })
            .collect()
    };
    assert_eq!(defaults(&v0), defaults(&v1));
}

#[test]
fn produce_v2_is_refused_per_partition_and_the_connection_stays_open() {
    let mut c = Conn::open();
    let produce = |acks: i16| {
        let mut b = BytesMut::new();
        b.put_i16(acks);
        b.put_i32(5_000);
        b.put_i32(1);
        s(&mut b, "legacy-produce");
        b.put_i32(2);
        for p in [0, 1] {
            b.put_i32(p);
            b.put_i32(4); // a (bogus) message set: never read
            b.put_slice(&[9, 9, 9, 9]);
        }
        b
    };
    // v2: responses [name, partitions [index, error_code, base_offset, log_append_time]],
    // throttle_time_ms.
    let mut r = Reader::new(c.call(ApiKey::Produce, 2, &produce(-1)));
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.string().unwrap().as_str(), "legacy-produce");
    assert_eq!(r.array_len().unwrap(), 2);
    for p in [0, 1] {
        assert_eq!(r.i32().unwrap(), p);
        assert_eq!(r.i16().unwrap(), UNSUPPORTED);
        assert_eq!((r.i64().unwrap(), r.i64().unwrap()), (-1, -1));
    }
    assert_eq!(r.i32().unwrap(), 0);
    assert_eq!(r.remaining(), 0);

    // acks=0 gets no answer: the next frame on the connection answers ApiVersions.
    c.send(ApiKey::Produce, 2, 1, &produce(0));
    let versions = c.api_versions().expect("the connection still answers");
    assert_eq!(versions.error_code, 0);
    let listed = |key: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(listed(ApiKey::OffsetCommit), Some((0, 8)));
    assert_eq!(listed(ApiKey::OffsetFetch), Some((0, 7)));
    assert_eq!(listed(ApiKey::DescribeConfigs), Some((0, 4)));
    assert_eq!(listed(ApiKey::Produce), Some((3, 9)));
}

#[test]
fn unimplemented_apis_and_old_fetches_name_each_item_with_unsupported_version() {
    let mut c = Conn::open();
    // DescribeProducers (KIP-664, transactions' tooling): not implemented yet, and its
    // response has no top-level error code, so each partition named carries the refusal.
    use describe_producers_request::TopicRequest;
    let req = DescribeProducersRequest::default().with_topics(
        ["legacy-a", "legacy-b"]
            .map(|n| {
                TopicRequest::default()
                    .with_name(name(n))
                    .with_partition_indexes(vec![0, 1])
            })
            .to_vec(),
    );
    let ResponseKind::DescribeProducers(r) = c.call_crate(ApiKey::DescribeProducers, 0, req.into())
    else {
        panic!()
    };
    let got: Vec<(&str, i32, i16)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.as_str(), p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(
        got,
        [
            ("legacy-a", 0, UNSUPPORTED),
            ("legacy-a", 1, UNSUPPORTED),
            ("legacy-b", 0, UNSUPPORTED),
            ("legacy-b", 1, UNSUPPORTED)
        ]
    );

    // Fetch v0 (below the crate's range): responses [topic, partitions [partition_index,
    // error_code, high_watermark, records]].
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(100);
    b.put_i32(1);
    b.put_i32(1);
    s(&mut b, "legacy-fetch");
    b.put_i32(1);
    b.put_i32(3);
    b.put_i64(0);
    b.put_i32(1 << 20);
    let mut r = Reader::new(c.call(ApiKey::Fetch, 0, &b));
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!(r.string().unwrap().as_str(), "legacy-fetch");
    assert_eq!(r.array_len().unwrap(), 1);
    assert_eq!((r.i32().unwrap(), r.i16().unwrap()), (3, UNSUPPORTED));
    assert_eq!((r.i64().unwrap(), r.i32().unwrap()), (-1, 0));
    assert_eq!(c.api_versions().unwrap().error_code, 0);
}

#[test]
fn describe_cluster_names_this_broker_at_its_kafka_address_at_every_version() {
    let kafka = broker();
    let mut c = Conn::open();
    for version in 0..=2 {
        let req =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let ResponseKind::DescribeCluster(r) =
            c.call_crate(ApiKey::DescribeCluster, version, req.into())
        else {
            panic!()
        };
        assert_eq!(r.error_code, 0, "v{version}: {r:?}");
        assert_eq!(r.cluster_id.len(), 32, "a cluster id (hex): {r:?}");
        let brokers: Vec<(i32, &str, i32, bool)> = r
            .brokers
            .iter()
            .map(|b| (b.broker_id.0, b.host.as_str(), b.port, b.is_fenced))
            .collect();
        assert_eq!(
            brokers,
            [(
                r.controller_id.0,
                "127.0.0.1",
                i32::from(kafka.port()),
                false
            )],
            "v{version}: the one broker, at its Kafka port, is who clients send changes to"
        );
        assert_ne!(r.cluster_authorized_operations, i32::MIN, "v{version}");
    }
    // KIP-919: controller endpoints are not served (spool's controllers have no listener).
    let req = DescribeClusterRequest::default().with_endpoint_type(2);
    let ResponseKind::DescribeCluster(r) = c.call_crate(ApiKey::DescribeCluster, 1, req.into())
    else {
        panic!()
    };
    assert_eq!(r.error_code, 42, "INVALID_REQUEST: {r:?}");
    assert!(r.brokers.is_empty(), "{r:?}");
}
