//! The Kafka wire-protocol front (DESIGN §6) on `--kafka-port`: one listener per core
//! (SO_REUSEPORT, like the native one), a connection loop with the native bounds, and the
//! translation of each Kafka API into the broker's internal requests — the same
//! [`crate::ops`] and group functions the native front calls.
//!
//! - [`serve`]: one connection: frames read with the size checked from the prefix before any
//!   allocation, up to `max_in_flight_per_connection` requests handled concurrently, responses
//!   written in request order (Kafka clients match responses by order as well as correlation id).
//! - `dispatch`: the API table ([`KAFKA_APIS`]: each API, its versions, its handler); APIs and
//!   versions it does not list get UNSUPPORTED_VERSION in the API's shape.
//! - `data`: Produce, Fetch (records spliced straight from the log), ListOffsets.
//! - `admin`: ApiVersions, Metadata (with auto-create), CreateTopics, DeleteTopics,
//!   InitProducerId; `configs`: DescribeConfigs (every accepted config, as it acts).
//! - `groups`: the consumer-group APIs, translated to and from `handlers::groups`;
//!   `group_admin`: DeleteGroups and OffsetDelete (`crate::group_admin`).
//! - `topic_admin`: CreatePartitions, AlterConfigs, IncrementalAlterConfigs, ElectLeaders
//!   (through the controller); `delete_records`: DeleteRecords (`crate::delete_records`);
//!   `cluster`: DescribeCluster.
//!
//! Bad input: a frame over `--max-frame-bytes`, one too short for a header, an API key the codec
//! does not know, a version above what the codec can decode (its header may be a newer format),
//! or a body that does not decode is logged and closes only its connection — as Kafka does.
//! Everything that decodes gets an answer, with an error code where needed: old versions below
//! the codec's crate are decoded by hand (`spool_protocol::kafka::legacy`) and either served or
//! refused with UNSUPPORTED_VERSION per item.

mod admin;
mod cluster;
mod configs;
mod data;
mod delete_records;
mod dispatch;
mod group_admin;
mod groups;
#[cfg(test)]
mod legacy_tests;
#[cfg(test)]
mod tests;
mod topic_admin;
mod txn;

pub use dispatch::KAFKA_APIS;

use std::future::Future;
use std::rc::Rc;

use glommio::net::TcpStream;
use kafka_protocol::protocol::StrBytes;
use spool_protocol::kafka::codec;

use bytes::Bytes;

use crate::connection::Front;
use crate::handlers::Outgoing;
use crate::shard::Shard;

/// Who is on the other end of a connection (for JoinGroup's member info and logs).
#[derive(Debug, Clone)]
pub struct Peer {
    /// Kafka's form: `/` and the IP address.
    pub host: String,
    pub addr: String,
}

/// The Kafka front: frames decoded by `kafka-protocol`.
struct Kafka {
    peer: Rc<Peer>,
}

impl Front for Kafka {
    /// The request and the size of its frame.
    type Request = (codec::KafkaRequest, usize);
    const NAME: &'static str = "Kafka";

    fn frame_bytes(
        &self,
        shard: &Shard,
        prefix: [u8; codec::LENGTH_PREFIX_BYTES],
    ) -> Result<usize, String> {
        codec::frame_bytes_from_prefix(prefix, shard.config.max_frame_bytes)
            .map(|n| n + codec::LENGTH_PREFIX_BYTES)
            .map_err(|e| e.to_string())
    }

    fn decode(&mut self, shard: &Shard, frame: Bytes) -> Result<Self::Request, String> {
        let frame_bytes = frame.len();
        // The codec reads from the request header on.
        codec::decode_request(frame.slice(codec::LENGTH_PREFIX_BYTES..), KAFKA_APIS)
            .map(|r| (r, frame_bytes))
            .map_err(|e| {
                crate::front_rules::record_refused(shard);
                format!("a request that does not decode ({:?}): {e}", e.error_code())
            })
    }

    fn handle(
        &self,
        shard: Rc<Shard>,
        (request, frame_bytes): Self::Request,
    ) -> impl Future<Output = Outgoing> + 'static {
        let peer = Rc::clone(&self.peer);
        async move { dispatch::handle(&shard, request, frame_bytes, &peer).await }
    }
}

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let (addr, host) = match stream.peer_addr() {
        Ok(a) => (a.to_string(), format!("/{}", a.ip())),
        Err(_) => (String::new(), String::new()),
    };
    let front = Kafka {
        peer: Rc::new(Peer { host, addr }),
    };
    crate::connection::serve_front(shard, stream, front).await;
}

/// An owned string as the codec's string type.
fn kstr(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
