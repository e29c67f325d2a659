//! The spool client library: producer, consumer and admin over the native protocol.
//!
//! Built the way DESIGN §3 asks for every decision-maker: each client is a **sans-IO core** — a
//! plain struct that takes inputs (`send`, a decoded response, a lost connection, the current time
//! in ms) and returns [`NetAction`]s to perform. No socket, clock or `.await` inside:
//! - [`partitioner`]: Kafka's murmur2 for keyed records, sticky partitioning for keyless ones;
//! - [`metadata`]: the cluster metadata cache and when to refresh it;
//! - [`accumulator`]: per-partition batches closed at `batch_bytes` or `linger_ms`, in a bounded
//!   buffer;
//! - [`producer`], [`consumer`], [`admin`]: the three cores.
//!
//! Two thin I/O layers drive the very same cores:
//! - [`blocking`]: std threads and `TcpStream`, usable from a plain `fn main()`;
//! - [`glommio_io`]: async, **requires the glommio runtime** (spool's runtime): the client must be
//!   created and used on one glommio `LocalExecutor` thread (its futures are `!Send`).
//!
//! Everything is bounded: the producer's buffer (`buffer_bytes`), requests in flight per broker
//! (`max_in_flight_per_broker`, ≤ 5), the consumer's fetched-but-unread bytes
//! (`max_buffered_bytes`), frame sizes (`FrameLimits`).

pub mod accumulator;
pub mod admin;
pub mod blocking;
pub mod consumer;
pub mod glommio_io;
pub mod metadata;
pub mod net;
pub mod oneshot;
pub mod partitioner;
pub mod producer;
#[cfg(test)]
mod test_util;
mod types;

pub use net::{ClientCore, NetAction};
pub use types::{ClientError, ConsumerRecord, ProducerRecord, RecordMetadata, TopicPartition};
