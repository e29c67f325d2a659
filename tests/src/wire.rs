//! A raw native-protocol connection for tests that must control every byte: readiness probes
//! (ApiVersions), hand-built requests with any version or payload, and garbage.
//!
//! Requests are encoded with `spool_protocol::codec` and read back with `spool_protocol::frame`,
//! so a well-formed request here is exactly what the client library would send. Every read has a
//! timeout: a broker that never answers fails the test instead of hanging it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use spool_protocol::codec::{self, Response};
use spool_protocol::frame::{self, FrameLimits};
use spool_protocol::payload::PayloadBuilder;
use spool_protocol::wire::{
    self, FetchPartitionT, FetchRequestT, FetchTopicT, PartitionProduceDataT, ProduceRequestT,
    RequestBodyT, ResponseBodyT, TopicProduceDataT,
};

/// How long a read waits for the broker before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);

pub struct RawConn {
    stream: TcpStream,
    next_correlation_id: i32,
    limits: FrameLimits,
}

impl RawConn {
    pub fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        Self::from_stream(TcpStream::connect_timeout(&addr, Duration::from_secs(5))?)
    }

    /// Connects from the loopback address `source` (any 127.x.y.z works on Linux without
    /// configuration), so a test can be more than one client address.
    pub fn connect_from(source: std::net::Ipv4Addr, addr: SocketAddr) -> std::io::Result<Self> {
        Self::from_stream(crate::source_addr::connect_from(source, addr)?)
    }

    /// This end's address (how the broker's log names this connection's peer).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    fn from_stream(stream: TcpStream) -> std::io::Result<Self> {
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            next_correlation_id: 1,
            limits: FrameLimits::default(),
        })
    }

    /// Sends one request (`api_version` as given, whatever the broker supports) and reads its
    /// response, checking the correlation id.
    pub fn request(
        &mut self,
        body: RequestBodyT,
        api_version: i16,
        payload: Vec<Bytes>,
    ) -> std::io::Result<Response> {
        let cid = self.send(body, api_version, payload)?;
        let response = self.read_response()?;
        if response.header.correlation_id != cid {
            return Err(invalid(format!(
                "response to correlation id {} while waiting for {cid}",
                response.header.correlation_id
            )));
        }
        Ok(response)
    }

    /// Sends one request without waiting for its response; returns its correlation id.
    pub fn send(
        &mut self,
        body: RequestBodyT,
        api_version: i16,
        payload: Vec<Bytes>,
    ) -> std::io::Result<i32> {
        let cid = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = codec::request(cid, Some("spool-tests"), body);
        header.api_version = api_version;
        let encoded = codec::encode_request(&header, payload, &self.limits).map_err(invalid)?;
        encoded.write_to(&mut self.stream)?;
        Ok(cid)
    }

    /// Reads one response frame.
    pub fn read_response(&mut self) -> std::io::Result<Response> {
        let raw = frame::read_frame(&mut self.stream, &self.limits)
            .map_err(invalid)?
            .ok_or_else(|| {
                std::io::Error::new(ErrorKind::UnexpectedEof, "broker closed the connection")
            })?;
        codec::decode_response(&raw, &self.limits).map_err(invalid)
    }

    /// ApiVersions v0; `Ok` only when the broker answered with no error.
    pub fn api_versions(&mut self) -> std::io::Result<()> {
        let body = api_versions_body();
        let r = self.request(body, 0, Vec::new())?;
        match r.header.body {
            ResponseBodyT::ApiVersionsResponse(b) if b.error_code == wire::ErrorCode::NONE => {
                Ok(())
            }
            other => Err(invalid(format!("unexpected ApiVersions answer: {other:?}"))),
        }
    }

    /// Writes bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Half-closes: the broker sees the end of the stream.
    pub fn finish_sending(&mut self) -> std::io::Result<()> {
        self.stream.shutdown(Shutdown::Write)
    }

    /// Waits until the broker closes the connection, ignoring anything it still sends. `Err`
    /// when it is still open after [`READ_TIMEOUT`].
    pub fn expect_closed(&mut self) -> Result<(), String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(()),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(format!("still open after {READ_TIMEOUT:?}"))
                }
                Err(e) => return Err(format!("reading: {e}")),
            }
        }
    }
}

/// An ApiVersions request body.
pub fn api_versions_body() -> RequestBodyT {
    RequestBodyT::ApiVersionsRequest(Box::default())
}

/// A fetch of `partitions` of `topic`, each from `offset`, that waits up to `max_wait_ms` for a
/// byte of data.
pub fn fetch_body(topic: &str, partitions: &[i32], offset: i64, max_wait_ms: i32) -> RequestBodyT {
    let mut t = FetchTopicT::default();
    t.topic = topic.to_owned();
    t.partitions = Some(
        partitions
            .iter()
            .map(|&partition| {
                let mut p = FetchPartitionT::default();
                p.partition = partition;
                p.fetch_offset = offset;
                p.partition_max_bytes = 1024 * 1024;
                p
            })
            .collect(),
    );
    let mut r = FetchRequestT::default();
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 1024 * 1024;
    r.topics = Some(vec![t]);
    RequestBodyT::FetchRequest(Box::new(r))
}

/// A produce request for one partition carrying `records` (any bytes) in the payload.
pub fn produce_body(
    topic: &str,
    partition: i32,
    acks: i16,
    records: Bytes,
) -> (RequestBodyT, Vec<Bytes>) {
    let mut payload = PayloadBuilder::new();
    let slice = payload
        .push(records)
        .expect("a test batch fits a u32 offset");
    let mut p = PartitionProduceDataT::default();
    p.index = partition;
    p.records = slice;
    let mut t = TopicProduceDataT::default();
    t.name = topic.to_owned();
    t.partitions = Some(vec![p]);
    let mut r = ProduceRequestT::default();
    r.acks = acks;
    r.timeout_ms = 10_000;
    r.topics = Some(vec![t]);
    (RequestBodyT::ProduceRequest(Box::new(r)), payload.finish())
}

/// The (error, base offset) of the single partition of a produce response.
pub fn produce_outcome(r: &Response) -> Result<(wire::ErrorCode, i64), String> {
    let ResponseBodyT::ProduceResponse(body) = &r.header.body else {
        return Err(format!(
            "not a produce response: error {:?}, body {:?}",
            r.header.error_code, r.header.body
        ));
    };
    let p = body
        .responses
        .iter()
        .flatten()
        .flat_map(|t| t.partitions.iter().flatten())
        .next()
        .ok_or("a produce response without partitions")?;
    Ok((p.error_code, p.base_offset))
}

fn invalid(e: impl ToString) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, e.to_string())
}
