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
/// response body. Panics, naming the step, on any failure (for tests).
pub fn kafka_call<Req, Resp>(addr: SocketAddr, api_key: ApiKey, version: i16, request: &Req) -> Resp
where
    Req: Encodable,
    Resp: Decodable,
{
    try_kafka_call(addr, api_key, version, request).unwrap_or_else(|e| panic!("{e}"))
}

/// [`kafka_call`] for a caller that must survive a failure (the fault harness reads brokers
/// that a run has just healed): every failed step is an `Err` naming it.
pub fn try_kafka_call<Req, Resp>(
    addr: SocketAddr,
    api_key: ApiKey,
    version: i16,
    request: &Req,
) -> Result<Resp, String>
where
    Req: Encodable,
    Resp: Decodable,
{
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        format!("{api_key:?} v{version} to {addr}: {what}: {e}")
    };
    let mut body = BytesMut::new();
    body.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_static_str("spool-tests")))
        .encode(&mut body, api_key.request_header_version(version))
        .map_err(|e| fail("encoding the header", &e))?;
    request
        .encode(&mut body, version)
        .map_err(|e| fail("encoding the body", &e))?;
    let length = (body.len() - 4) as i32;
    body[..4].copy_from_slice(&length.to_be_bytes());
    let mut stream = std::net::TcpStream::connect_timeout(&addr, READ_TIMEOUT)
        .map_err(|e| fail("connecting to the Kafka port", &e))?;
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .map_err(|e| fail("a read timeout", &e))?;
    stream.write_all(&body).map_err(|e| fail("sending", &e))?;
    let mut prefix = [0u8; 4];
    stream
        .read_exact(&mut prefix)
        .map_err(|e| fail("a response", &e))?;
    let length =
        usize::try_from(i32::from_be_bytes(prefix)).map_err(|e| fail("a response length", &e))?;
    let mut frame = vec![0u8; length];
    stream
        .read_exact(&mut frame)
        .map_err(|e| fail("the whole response", &e))?;
    let mut frame = Bytes::from(frame);
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| fail("a response header", &e))?;
    if header.correlation_id != CORRELATION_ID {
        return Err(fail("the correlation id", &header.correlation_id));
    }
    Resp::decode(&mut frame, version).map_err(|e| fail("a response body", &e))
}
