//! One Kafka request on a connection of its own, encoded and its answer decoded with the
//! `kafka-protocol` crate: for the tests that must send an exact API version or read a field no
//! client library exposes (DeleteRecords' low watermark, OffsetDelete, OffsetForLeaderEpoch).
//! Bounded: the answer must come within [`READ_TIMEOUT`]; anything else panics with the step.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long one answer may take (a DeleteRecords waits for the followers; a group call for
/// `__consumer_offsets` to load).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

const CORRELATION_ID: i32 = 7;

/// Sends `request` as `api_key` at `version` to the Kafka port at `addr`; returns the decoded
/// response body.
pub fn kafka_call<Req, Resp>(addr: SocketAddr, api_key: ApiKey, version: i16, request: &Req) -> Resp
where
    Req: Encodable,
    Resp: Decodable,
{
    let mut body = BytesMut::new();
    body.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str("spool-tests")))
        .encode(&mut body, api_key.request_header_version(version))
        .expect("encoding the header");
    request
        .encode(&mut body, version)
        .expect("encoding the body");
    let length = (body.len() - 4) as i32;
    body[..4].copy_from_slice(&length.to_be_bytes());
    let mut stream = std::net::TcpStream::connect(addr).expect("connecting to the Kafka port");
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("a read timeout");
    stream.write_all(&body).expect("sending");
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).expect("a response");
    let mut frame = vec![0u8; i32::from_be_bytes(prefix) as usize];
    stream.read_exact(&mut frame).expect("the whole response");
    let mut frame = Bytes::from(frame);
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .expect("a response header");
    assert_eq!(header.correlation_id, CORRELATION_ID, "the correlation id");
    Resp::decode(&mut frame, version).expect("a response body")
}
