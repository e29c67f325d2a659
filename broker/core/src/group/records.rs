//! The records a group coordinator writes to `__consumer_offsets`, in Kafka's own layout (so
//! Kafka's tools could read a spool offsets log):
//!
//! | record | key | value |
//! |---|---|---|
//! | committed offset | `i16 1 \| str group \| str topic \| i32 partition` | `i16 3 \| i64 offset \| i32 leader_epoch \| str metadata \| i64 commit_timestamp_ms` |
//! | group metadata | `i16 2 \| str group` | `i16 3 \| str protocol_type \| i32 generation \| nstr protocol \| nstr leader \| i64 state_timestamp_ms \| i32 n \| n × member` |
//!
//! member = `str member_id | nstr group_instance_id | str client_id | str client_host |
//! i32 rebalance_timeout_ms | i32 session_timeout_ms | bytes subscription | bytes assignment`.
//! `str` is an i16 length and UTF-8 bytes, `nstr` the same with -1 for null, `bytes` an i32
//! length. A null value is a tombstone: the offset (or the group) is gone, and compaction keeps
//! only the newest record per key.
//!
//! Decoding never panics: every length is checked against the bytes left, and anything else is a
//! [`RecordError`].

use bytes::{BufMut, Bytes, BytesMut};

pub use crate::record_codec::RecordError;
use crate::record_codec::{put_bytes, put_nstr, put_str, Cursor};

/// Key version of an offset-commit record (Kafka's OffsetCommitKey v1).
const OFFSET_KEY_VERSION: i16 = 1;
/// Key version of a group-metadata record (Kafka's GroupMetadataKey v2).
const GROUP_KEY_VERSION: i16 = 2;
/// Value version written for offsets (Kafka's OffsetCommitValue v3).
const OFFSET_VALUE_VERSION: i16 = 3;
/// Value version written for group metadata (Kafka's GroupMetadataValue v3).
const GROUP_VALUE_VERSION: i16 = 3;
/// Members a decoded group-metadata value may claim, checked before allocating.
const DECODED_MEMBERS_MAX: usize = 100_000;

/// A record's key: what compaction deduplicates on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// One member in a group-metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// A group's state after a completed rebalance (or on becoming empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

/// A record's decoded value; `None` in [`decode`]'s answer is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    Offset(OffsetValue),
    Group(GroupValue),
}

pub fn encode_key(key: &RecordKey) -> Bytes {
    let mut out = BytesMut::new();
    match key {
        RecordKey::Offset {
            group,
            topic,
            partition,
        } => {
            out.put_i16(OFFSET_KEY_VERSION);
            put_str(&mut out, group);
            put_str(&mut out, topic);
            out.put_i32(*partition);
        }
        RecordKey::Group { group } => {
            out.put_i16(GROUP_KEY_VERSION);
            put_str(&mut out, group);
        }
    }
    out.freeze()
}

pub fn encode_offset(v: &OffsetValue) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(OFFSET_VALUE_VERSION);
    out.put_i64(v.offset);
    out.put_i32(v.leader_epoch);
    put_str(&mut out, &v.metadata);
    out.put_i64(v.commit_timestamp_ms);
    out.freeze()
}

pub fn encode_group(v: &GroupValue) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(GROUP_VALUE_VERSION);
    put_str(&mut out, &v.protocol_type);
    out.put_i32(v.generation);
    put_nstr(&mut out, v.protocol.as_deref());
    put_nstr(&mut out, v.leader.as_deref());
    out.put_i64(v.state_timestamp_ms);
    out.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_str(&mut out, &m.member_id);
        put_nstr(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.put_i32(m.rebalance_timeout_ms);
        out.put_i32(m.session_timeout_ms);
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out.freeze()
}

pub fn decode_key(key: &[u8]) -> Result<RecordKey, RecordError> {
    let mut c = Cursor { buf: key };
    match c.i16("key version")? {
        0 | OFFSET_KEY_VERSION => Ok(RecordKey::Offset {
            group: c.str("group")?,
            topic: c.str("topic")?,
            partition: c.i32("partition")?,
        }),
        GROUP_KEY_VERSION => Ok(RecordKey::Group {
            group: c.str("group")?,
        }),
        v => Err(RecordError::KeyVersion(v)),
    }
}

fn decode_offset(value: &[u8]) -> Result<OffsetValue, RecordError> {
    let mut c = Cursor { buf: value };
    match c.i16("value version")? {
        OFFSET_VALUE_VERSION => Ok(OffsetValue {
            offset: c.i64("offset")?,
            leader_epoch: c.i32("leader epoch")?,
            metadata: c.str("metadata")?,
            commit_timestamp_ms: c.i64("commit timestamp")?,
        }),
        v => Err(RecordError::ValueVersion(v)),
    }
}

fn decode_group(value: &[u8]) -> Result<GroupValue, RecordError> {
    let mut c = Cursor { buf: value };
    let version = c.i16("value version")?;
    if version != GROUP_VALUE_VERSION {
        return Err(RecordError::ValueVersion(version));
    }
    let protocol_type = c.str("protocol type")?;
    let generation = c.i32("generation")?;
    let protocol = c.nstr("protocol")?;
    let leader = c.nstr("leader")?;
    let state_timestamp_ms = c.i64("state timestamp")?;
    let n = c.i32("member count")?;
    if n < 0 || n as usize > DECODED_MEMBERS_MAX || n as usize > c.buf.len() {
        return Err(RecordError::Malformed("member count"));
    }
    let mut members = Vec::with_capacity(n as usize);
    for _ in 0..n {
        members.push(MemberValue {
            member_id: c.str("member id")?,
            group_instance_id: c.nstr("group instance id")?,
            client_id: c.str("client id")?,
            client_host: c.str("client host")?,
            rebalance_timeout_ms: c.i32("rebalance timeout")?,
            session_timeout_ms: c.i32("session timeout")?,
            subscription: c.bytes("subscription")?,
            assignment: c.bytes("assignment")?,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp_ms,
        members,
    })
}

/// Decodes a record; a `None` value (tombstone) gives `(key, None)`.
pub fn decode(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(RecordKey, Option<RecordValue>), RecordError> {
    let k = decode_key(key)?;
    let v = match (&k, value) {
        (_, None) => None,
        (RecordKey::Offset { .. }, Some(v)) => Some(RecordValue::Offset(decode_offset(v)?)),
        (RecordKey::Group { .. }, Some(v)) => Some(RecordValue::Group(decode_group(v)?)),
    };
    Ok((k, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._-]{0,40}"
    }

    fn member() -> impl Strategy<Value = MemberValue> {
        (
            text(),
            proptest::option::of(text()),
            text(),
            text(),
            any::<i32>(),
            any::<i32>(),
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(m, i, c, h, r, s, sub, a)| MemberValue {
                member_id: m,
                group_instance_id: i,
                client_id: c,
                client_host: h,
                rebalance_timeout_ms: r,
                session_timeout_ms: s,
                subscription: sub,
                assignment: a,
            })
    }

    proptest! {
        #[test]
        fn offset_records_round_trip(g in text(), t in text(), p in any::<i32>(), o in any::<i64>(), e in any::<i32>(), m in text(), ts in any::<i64>()) {
            let key = RecordKey::Offset { group: g, topic: t, partition: p };
            let value = OffsetValue { offset: o, leader_epoch: e, metadata: m, commit_timestamp_ms: ts };
            let (k, v) = decode(&encode_key(&key), Some(&encode_offset(&value))).unwrap();
            prop_assert_eq!(k, key.clone());
            prop_assert_eq!(v, Some(RecordValue::Offset(value)));
            let (k, v) = decode(&encode_key(&key), None).unwrap();
            prop_assert_eq!(k, key);
            prop_assert_eq!(v, None);
        }

        #[test]
        fn group_records_round_trip(g in text(), pt in text(), gen in any::<i32>(), p in proptest::option::of(text()), l in proptest::option::of(text()), ts in any::<i64>(), members in proptest::collection::vec(member(), 0..5)) {
            let key = RecordKey::Group { group: g };
            let value = GroupValue { protocol_type: pt, generation: gen, protocol: p, leader: l, state_timestamp_ms: ts, members };
            let (k, v) = decode(&encode_key(&key), Some(&encode_group(&value))).unwrap();
            prop_assert_eq!(k, key);
            prop_assert_eq!(v, Some(RecordValue::Group(value)));
        }

        #[test]
        fn garbage_never_panics(k in proptest::collection::vec(any::<u8>(), 0..64), v in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..128))) {
            let _ = decode(&k, v.as_deref());
        }

        #[test]
        fn every_cut_of_a_group_value_is_an_error(members in proptest::collection::vec(member(), 1..3), cut in any::<prop::sample::Index>()) {
            let value = GroupValue { protocol_type: "consumer".into(), generation: 3, protocol: Some("range".into()), leader: None, state_timestamp_ms: 1, members };
            let bytes = encode_group(&value);
            let at = cut.index(bytes.len());
            let key = encode_key(&RecordKey::Group { group: "g".into() });
            prop_assert!(decode(&key, Some(&bytes[..at])).is_err());
        }
    }

    #[test]
    fn key_layout_matches_kafka() {
        let k = encode_key(&RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        });
        assert_eq!(&k[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        let k = encode_key(&RecordKey::Group { group: "g".into() });
        assert_eq!(&k[..], &[0, 2, 0, 1, b'g']);
    }
}
