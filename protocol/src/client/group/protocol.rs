//! Kafka's ConsumerProtocol bytes: what a consumer puts in JoinGroup's protocol metadata (its
//! subscription) and what the leader puts in SyncGroup's assignments.
//!
//! The layout is Kafka's own (`ConsumerProtocolSubscription` / `ConsumerProtocolAssignment` behind
//! an `i16` version prefix; encoded with the `kafka-protocol` crate, decoded by a small bounded
//! reader here because that crate sizes allocations from untrusted length prefixes), so spool's tools can describe groups
//! of Kafka clients and Kafka's tools can describe spool's. We write subscription v1 (topics,
//! user data, owned partitions) and assignment v1; we read every version Kafka defines, and a
//! version newer than we know is read as the newest we know (its fields are appended, as Kafka's
//! own deserializer assumes). Decoding never panics: malformed bytes are an error.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::consumer_protocol_assignment as cpa;
use kafka_protocol::messages::consumer_protocol_subscription as cps;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::client::{ClientError, TopicPartition};

/// The JoinGroup protocol type of consumer groups.
pub const PROTOCOL_TYPE: &str = "consumer";

/// The subscription version we write (v1 adds owned partitions, which cooperative rebalancing
/// needs).
pub const SUBSCRIPTION_VERSION: i16 = 1;
/// The assignment version we write.
pub const ASSIGNMENT_VERSION: i16 = 1;
/// The newest versions the codec knows.
const SUBSCRIPTION_VERSION_MAX: i16 = 3;
const ASSIGNMENT_VERSION_MAX: i16 = 3;

/// A member's subscription, as sent in JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// Subscribed topics.
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    /// Partitions the member holds now (cooperative rebalancing).
    pub owned_partitions: Vec<TopicPartition>,
}

/// A member's assignment, as sent in SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub partitions: Vec<TopicPartition>,
    pub user_data: Option<Bytes>,
}

fn group_by_topic<'a>(
    tps: impl IntoIterator<Item = &'a TopicPartition>,
) -> BTreeMap<&'a str, Vec<i32>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in tps {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    by_topic
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn versioned<M: Encodable>(message: &M, version: i16) -> Result<Bytes, ClientError> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    message
        .encode(&mut out, version)
        .map_err(|e| ClientError::InvalidConfig(format!("consumer protocol encode: {e}")))?;
    Ok(Bytes::from(out))
}

/// A bounded reader over Kafka's classic (non-flexible) encoding. Every length is checked against
/// the bytes left before anything is allocated, so a hostile member's metadata cannot make the
/// leader allocate more than the bytes it sent.
struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn err(&self, m: &str) -> ClientError {
        ClientError::Corrupt(format!("{}: {m}", self.what))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ClientError> {
        if self.buf.len() < n {
            return Err(self.err(&format!("{n} bytes wanted, {} left", self.buf.len())));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, ClientError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, ClientError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, ClientError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize)?;
        std::str::from_utf8(b)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| self.err("string is not UTF-8"))
    }

    fn string(&mut self) -> Result<String, ClientError> {
        self.nullable_string()?
            .ok_or_else(|| self.err("null where a string is required"))
    }

    fn bytes(&mut self) -> Result<Option<Bytes>, ClientError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(Bytes::copy_from_slice(self.take(len as usize)?)))
    }

    /// An array's length, checked against the bytes left (`min_item_bytes` per element).
    fn array_len(&mut self, min_item_bytes: usize) -> Result<usize, ClientError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(0); // null array: Kafka reads it as empty here
        }
        let len = len as usize;
        if len.saturating_mul(min_item_bytes) > self.buf.len() {
            return Err(self.err(&format!("array of {len} in {} bytes", self.buf.len())));
        }
        Ok(len)
    }

    /// `[topic string, [partition i32]]`.
    fn topic_partitions(&mut self) -> Result<Vec<TopicPartition>, ClientError> {
        let topics = self.array_len(6)?;
        let mut out = Vec::new();
        for _ in 0..topics {
            let topic = self.string()?;
            let n = self.array_len(4)?;
            out.reserve(n);
            for _ in 0..n {
                out.push(TopicPartition::new(topic.clone(), self.i32()?));
            }
        }
        Ok(out)
    }

    /// The version prefix, clamped to `max` (a newer version appends fields we do not know).
    fn version(&mut self, max: i16) -> Result<i16, ClientError> {
        let v = self.i16()?;
        if v < 0 {
            return Err(self.err(&format!("version {v}")));
        }
        Ok(v.min(max))
    }
}

impl Subscription {
    pub fn encode(&self) -> Result<Bytes, ClientError> {
        let owned = group_by_topic(&self.owned_partitions)
            .into_iter()
            .map(|(t, ps)| {
                cps::TopicPartition::default()
                    .with_topic(topic_name(t))
                    .with_partitions(ps)
            })
            .collect();
        let m = ConsumerProtocolSubscription::default()
            .with_topics(
                self.topics
                    .iter()
                    .map(|t| StrBytes::from_string(t.clone()))
                    .collect(),
            )
            .with_user_data(self.user_data.clone())
            .with_owned_partitions(owned);
        versioned(&m, SUBSCRIPTION_VERSION)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, ClientError> {
        let mut r = Reader {
            buf: bytes,
            what: "subscription",
        };
        let version = r.version(SUBSCRIPTION_VERSION_MAX)?;
        let n = r.array_len(2)?;
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            topics.push(r.string()?);
        }
        let user_data = r.bytes()?;
        let owned_partitions = if version >= 1 {
            r.topic_partitions()?
        } else {
            Vec::new()
        };
        // v2 adds generation_id and v3 rack_id: not used by these assignors.
        Ok(Self {
            topics,
            user_data,
            owned_partitions,
        })
    }
}

impl Assignment {
    pub fn encode(&self) -> Result<Bytes, ClientError> {
        let assigned = group_by_topic(&self.partitions)
            .into_iter()
            .map(|(t, ps)| {
                cpa::TopicPartition::default()
                    .with_topic(topic_name(t))
                    .with_partitions(ps)
            })
            .collect();
        let m = ConsumerProtocolAssignment::default()
            .with_assigned_partitions(assigned)
            .with_user_data(self.user_data.clone());
        versioned(&m, ASSIGNMENT_VERSION)
    }

    /// Empty bytes are an empty assignment (Kafka's coordinator sends none to a member the leader
    /// gave nothing).
    pub fn decode(bytes: &[u8]) -> Result<Self, ClientError> {
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        let mut r = Reader {
            buf: bytes,
            what: "assignment",
        };
        let _version = r.version(ASSIGNMENT_VERSION_MAX)?;
        let partitions = r.topic_partitions()?;
        let user_data = r.bytes()?;
        Ok(Self {
            partitions,
            user_data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tps() -> impl Strategy<Value = Vec<TopicPartition>> {
        // Sorted by topic then partition: the order the encoder groups them in.
        proptest::collection::btree_set(("[a-z]{1,8}", 0i32..64), 0..20).prop_map(|s| {
            s.into_iter()
                .map(|(t, p)| TopicPartition::new(t, p))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn subscription_round_trips(
            topics in proptest::collection::vec("[a-z._-]{1,12}", 0..6),
            user_data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            owned in tps(),
        ) {
            let s = Subscription { topics, user_data: user_data.map(Bytes::from), owned_partitions: owned };
            prop_assert_eq!(Subscription::decode(&s.encode().unwrap()).unwrap(), s);
        }

        #[test]
        fn assignment_round_trips(
            partitions in tps(),
            user_data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
        ) {
            let a = Assignment { partitions, user_data: user_data.map(Bytes::from) };
            prop_assert_eq!(Assignment::decode(&a.encode().unwrap()).unwrap(), a);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Subscription::decode(&bytes);
            let _ = Assignment::decode(&bytes);
        }
    }

    #[test]
    fn matches_kafkas_v0_subscription_bytes() {
        // Kafka's ConsumerProtocol v0 for topics ["foo"], no user data: version 0, array of one
        // string, null bytes.
        let bytes = [
            0u8, 0, 0, 0, 0, 1, 0, 3, b'f', b'o', b'o', 0xff, 0xff, 0xff, 0xff,
        ];
        let s = Subscription::decode(&bytes).unwrap();
        assert_eq!(s.topics, vec!["foo".to_owned()]);
        assert!(s.owned_partitions.is_empty() && s.user_data.is_none());
        // Our v1 adds an owned-partitions array (empty here) after the same prefix.
        let ours = Subscription {
            topics: vec!["foo".into()],
            ..Subscription::default()
        }
        .encode()
        .unwrap();
        assert_eq!(&ours[..2], &[0, 1]);
        assert_eq!(&ours[2..], &[&bytes[2..], &[0u8, 0, 0, 0][..]].concat()[..]);
    }

    #[test]
    fn newer_versions_read_as_the_newest_known_and_empty_assignment_is_empty() {
        let a = Assignment {
            partitions: vec![TopicPartition::new("t", 3)],
            user_data: None,
        };
        let mut bytes = a.encode().unwrap().to_vec();
        bytes[1] = 9; // v9: same fields as far as we know them
        assert_eq!(Assignment::decode(&bytes).unwrap(), a);
        assert_eq!(Assignment::decode(&[]).unwrap(), Assignment::default());
        assert!(Subscription::decode(&[0xff, 0xff, 0]).is_err());
        assert!(Subscription::decode(&[0]).is_err());
    }
}
