//! The spool client library: producer, consumer and admin over the native protocol.
//!
//! Built the way DESIGN §3 asks for every decision-maker: each client is a **sans-IO core** — a
//! plain struct that takes inputs (`send`, a decoded response, a lost connection, the current time
//! in ms) and returns [`NetAction`]s to perform. No socket, clock or `.await` inside:
//! - [`partitioner`]: Kafka's murmur2 for keyed records, sticky partitioning for keyless ones;
//! - [`metadata`]: the cluster metadata cache and when to refresh it;
//! - [`accumulator`]: per-partition batches closed at `batch_bytes` or `linger_ms`, in a bounded
//!   buffer;
//! - [`producer`], [`consumer`], [`admin`]: the three cores;
//! - [`group`]: consumer groups — Kafka's ConsumerProtocol bytes, the range / roundrobin /
//!   cooperative-sticky assignors, and the member core that `Consumer::subscribe` drives next to
//!   the fetching core (rebalance callbacks, auto-commit of processed positions, commit on revoke
//!   and on close).
//!
//! Two thin I/O layers drive the very same cores:
//! - [`blocking`]: std threads and `TcpStream`, usable from a plain `fn main()`;
//! - [`glommio_io`]: async, **requires the glommio runtime** (spool's runtime): the client must be
//!   created and used on one glommio `LocalExecutor` thread (its futures are `!Send`).
//!
//! From a plain `fn main()`:
//!
//! ```no_run
//! use spool_protocol::client::admin::{AdminConfig, NewTopic};
//! use spool_protocol::client::blocking::{Admin, Consumer, Producer};
//! use spool_protocol::client::consumer::{ConsumerConfig, SeekTo};
//! use spool_protocol::client::producer::ProducerConfig;
//! use spool_protocol::client::{ProducerRecord, TopicPartition};
//!
//! fn main() -> Result<(), spool_protocol::client::ClientError> {
//!     let brokers = ["127.0.0.1:9093"];
//!     Admin::new(&brokers, AdminConfig::default())?.create_topics(vec![NewTopic::new("orders", 3, 1)])?;
//!
//!     let producer = Producer::new(&brokers, ProducerConfig::default())?;
//!     let delivery = producer.send(ProducerRecord::new("orders", "hello").with_key("customer-7"))?;
//!     let md = delivery.wait()?; // partition (murmur2 of the key) and offset
//!     producer.close(10_000)?;
//!
//!     let mut consumer = Consumer::new(&brokers, ConsumerConfig::default())?;
//!     let tp = TopicPartition::new("orders", md.partition);
//!     consumer.assign([tp.clone()]);
//!     consumer.seek(&tp, SeekTo::Offset(md.offset))?;
//!     for record in consumer.poll(1_000)? {
//!         println!("{} {:?}", record.offset, record.value);
//!     }
//!     Ok(())
//! }
//! ```
//!
//! As a member of a consumer group (offsets committed to the group; partitions shared with the
//! other members):
//!
//! ```no_run
//! use spool_protocol::client::blocking::Consumer;
//! use spool_protocol::client::consumer::ConsumerConfig;
//! use spool_protocol::client::group::RebalanceListener;
//! use spool_protocol::client::TopicPartition;
//!
//! struct Log;
//! impl RebalanceListener for Log {
//!     fn on_assigned(&mut self, generation: i32, partitions: &[TopicPartition]) {
//!         eprintln!("generation {generation}: got {partitions:?}");
//!     }
//! }
//!
//! fn main() -> Result<(), spool_protocol::client::ClientError> {
//!     let config = ConsumerConfig {
//!         group_id: Some("billing".into()),
//!         ..ConsumerConfig::default()
//!     };
//!     let mut consumer = Consumer::new(&["127.0.0.1:9093"], config)?;
//!     consumer.subscribe(&["orders"], Log)?;
//!     for _ in 0..100 {
//!         for record in consumer.poll(1_000)? {
//!             println!("{}-{}@{}", record.topic, record.partition, record.offset);
//!         } // processed: the next poll (or the auto-commit in it) commits past these records
//!     }
//!     consumer.close() // commit, revoke, leave
//! }
//! ```
//!
//! Everything is bounded: the producer's buffer (`buffer_bytes`), requests in flight per broker
//! (`max_in_flight_per_broker`, ≤ 5), the consumer's fetched-but-unread bytes
//! (`max_buffered_bytes`), frame sizes (`FrameLimits`).

pub mod accumulator;
pub mod admin;
pub mod blocking;
pub mod consumer;
pub mod deliveries;
pub mod glommio_io;
pub mod group;
pub mod metadata;
pub mod net;
pub mod oneshot;
pub mod partitioner;
pub mod producer;
#[cfg(test)]
mod test_util;
mod types;

pub use net::{ClientCore, NetAction};
pub use types::{
    ClientError, ConsumerRecord, ProducerRecord, ProducerRecords, RecordMetadata, TopicPartition,
};
