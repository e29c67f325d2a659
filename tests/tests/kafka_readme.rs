//! The README's API tables are what a running broker answers. ApiVersions on the Kafka port (v3,
//! the version librdkafka negotiates) and on the native port list exactly the APIs and versions
//! the README's tables give as spool's, and nothing they call "not implemented"; the Kafka table
//! has a row for every Kafka API key (every key the `kafka-protocol` crate knows).
//!
//! The tables' text is generated from the broker's own API tables (`spool_broker::apis`, whose
//! unit test fails when README.md is stale and rewrites it under `SPOOL_WRITE_README=1`); this
//! test checks the process built from them agrees.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use spool_broker::api_readme::{KAFKA_BEGIN, KAFKA_END, NATIVE_BEGIN, NATIVE_END};
use spool_protocol::wire::ResponseBodyT;
use spool_tests::kafka_clients::start_broker;
use spool_tests::wire::{api_versions_body, RawConn, READ_TIMEOUT};
use spool_tests::BrokerOptions;

/// key → (min, max) of each row whose spool column is a `**lo–hi**` range, and every row's key.
fn readme_table(begin: &str, end: &str) -> (BTreeMap<i16, (i16, i16)>, Vec<i16>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).expect("reading README.md");
    let table = readme
        .split_once(begin)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(t, _)| t)
        .unwrap_or_else(|| panic!("README.md lacks {begin} … {end}"));
    let (mut implemented, mut keys) = (BTreeMap::new(), Vec::new());
    for line in table.lines().filter(|l| l.starts_with('|')).skip(2) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let key: i16 = cells[2].parse().unwrap_or_else(|_| panic!("{line:?}"));
        keys.push(key);
        let spool = cells[cells.len() - 2];
        if let Some(range) = spool.strip_prefix("**").and_then(|s| s.strip_suffix("**")) {
            let (lo, hi) = range.split_once('–').unwrap_or_else(|| panic!("{line:?}"));
            let parse = |v: &str| v.parse::<i16>().unwrap_or_else(|_| panic!("{line:?}"));
            implemented.insert(key, (parse(lo), parse(hi)));
        } else {
            assert_eq!(spool, "not implemented", "{line:?}");
        }
    }
    (implemented, keys)
}

/// ApiVersions v3 on the Kafka port, as librdkafka sends it.
fn kafka_api_versions(stream: &mut TcpStream) -> BTreeMap<i16, (i16, i16)> {
    let version = 3;
    let mut body = BytesMut::new();
    body.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(version)
        .with_correlation_id(11)
        .with_client_id(Some(StrBytes::from_static_str("spool-tests")))
        .encode(
            &mut body,
            ApiKey::ApiVersions.request_header_version(version),
        )
        .expect("encoding the header");
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("spool-tests"))
        .with_client_software_version(StrBytes::from_static_str("1"))
        .encode(&mut body, version)
        .expect("encoding the body");
    let length = (body.len() - 4) as i32;
    body[..4].copy_from_slice(&length.to_be_bytes());
    stream.write_all(&body).expect("sending ApiVersions");
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).expect("a response");
    let mut frame = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut frame).expect("the whole response");
    let mut frame = Bytes::from(frame);
    // ApiVersions answers with response header v0 at every version (KIP-511): the correlation id.
    assert_eq!(frame.get_i32(), 11);
    let r = ApiVersionsResponse::decode(&mut frame, version).expect("an ApiVersions v3 body");
    assert_eq!(r.error_code, 0);
    r.api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect()
}

#[test]
fn a_running_broker_answers_api_versions_as_the_readme_tables_say() {
    let broker = start_broker(BrokerOptions::default());

    let (kafka_readme, kafka_rows) = readme_table(KAFKA_BEGIN, KAFKA_END);
    let every_key: Vec<i16> = ApiKey::iter().map(|k| k as i16).collect();
    assert_eq!(
        kafka_rows, every_key,
        "one Kafka row per API key, in key order"
    );
    let mut stream = TcpStream::connect(broker.kafka_addr()).expect("connecting to the Kafka port");
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("timeout");
    assert_eq!(
        kafka_api_versions(&mut stream),
        kafka_readme,
        "Kafka ApiVersions (left) vs README.md's Kafka table (right)"
    );

    let (native_readme, _) = readme_table(NATIVE_BEGIN, NATIVE_END);
    let mut conn = RawConn::connect(broker.native_addr()).expect("connecting to the native port");
    let r = conn
        .request(api_versions_body(), 0, Vec::new())
        .expect("native ApiVersions");
    let ResponseBodyT::ApiVersionsResponse(b) = r.header.body else {
        panic!("not an ApiVersions answer: {:?}", r.header.body);
    };
    let native: BTreeMap<i16, (i16, i16)> = b
        .api_keys
        .unwrap_or_default()
        .iter()
        .map(|k| (k.api_key.0, (k.min_version, k.max_version)))
        .collect();
    assert_eq!(
        native, native_readme,
        "native ApiVersions (left) vs README.md's native table (right)"
    );
}
