//! The records a transaction coordinator writes to `__transaction_state`, in Kafka's layout
//! (TransactionLogKey v0 and TransactionLogValue v0, so Kafka's tools could read the log):
//!
//! | key | value |
//! |---|---|
//! | `i16 0 \| str transactional_id` | `i16 0 \| i64 producer_id \| i16 producer_epoch \| i32 timeout_ms \| i8 state \| i32 n \| n × (str topic \| i32 m \| m × i32 partition) \| i64 last_update_ms \| i64 txn_start_ms` |
//!
//! A null value is a tombstone (the id expired). Decoding never panics: every length is
//! checked against the bytes left (`crate::record_codec`), anything else is a [`RecordError`].

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};

use super::state::{TxnMetadata, TxnState};
pub use crate::record_codec::RecordError;
use crate::record_codec::{put_str, Cursor};
use crate::topic_partition::TopicPartition;

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// Topics, and partitions per topic, a decoded value may claim, checked before allocating.
const DECODED_TOPICS_MAX: usize = 100_000;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(KEY_VERSION);
    put_str(&mut out, transactional_id);
    out.freeze()
}

pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(VALUE_VERSION);
    out.put_i64(m.producer_id);
    out.put_i16(m.producer_epoch);
    out.put_i32(i32::try_from(m.timeout_ms).unwrap_or(i32::MAX));
    out.put_i8(m.state.id());
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &m.partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    out.put_i32(by_topic.len() as i32);
    for (topic, partitions) in by_topic {
        put_str(&mut out, topic);
        out.put_i32(partitions.len() as i32);
        for p in partitions {
            out.put_i32(p);
        }
    }
    out.put_i64(m.last_update_ms as i64);
    out.put_i64(m.txn_start_ms as i64);
    out.freeze()
}

fn state_of(id: i8) -> Result<TxnState, RecordError> {
    TxnState::from_id(id).ok_or(RecordError::Malformed("transaction state"))
}

fn count(c: &mut Cursor, what: &'static str) -> Result<usize, RecordError> {
    let n = c.i32(what)?;
    match usize::try_from(n) {
        Ok(n) if n <= DECODED_TOPICS_MAX => Ok(n),
        // Kafka writes a null array as -1.
        _ if n == -1 => Ok(0),
        _ => Err(RecordError::Malformed(what)),
    }
}

/// The id and its metadata (None: a tombstone) of one record.
pub fn decode(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(String, Option<TxnMetadata>), RecordError> {
    let mut k = Cursor { buf: key };
    match k.i16("key version")? {
        KEY_VERSION => {}
        v => return Err(RecordError::KeyVersion(v)),
    }
    let transactional_id = k.str("transactional id")?;
    let Some(value) = value else {
        return Ok((transactional_id, None));
    };
    let mut c = Cursor { buf: value };
    match c.i16("value version")? {
        VALUE_VERSION => {}
        v => return Err(RecordError::ValueVersion(v)),
    }
    let producer_id = c.i64("producer id")?;
    let producer_epoch = c.i16("producer epoch")?;
    let timeout_ms =
        u32::try_from(c.i32("timeout")?).map_err(|_| RecordError::Malformed("timeout"))?;
    let state = state_of(c.i8("state")?)?;
    let mut partitions = BTreeSet::new();
    for _ in 0..count(&mut c, "topics")? {
        let topic = c.str("topic")?;
        for _ in 0..count(&mut c, "partitions")? {
            partitions.insert(TopicPartition::new(topic.clone(), c.i32("partition")?));
        }
    }
    let time = |v: i64, what| u64::try_from(v).map_err(|_| RecordError::Malformed(what));
    let last_update_ms = time(c.i64("last update")?, "last update")?;
    let txn_start_ms = time(c.i64("start")?, "start")?;
    Ok((
        transactional_id.clone(),
        Some(TxnMetadata {
            transactional_id,
            producer_id,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            txn_start_ms,
            last_update_ms,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn metadata() -> impl Strategy<Value = TxnMetadata> {
        (
            "[a-z]{1,12}",
            any::<i64>(),
            any::<i16>(),
            0..i32::MAX as u32,
            0..8i8,
            prop::collection::btree_set(("[a-z]{1,5}", 0..64i32), 0..6),
            0..i64::MAX as u64,
            0..i64::MAX as u64,
        )
            .prop_map(|(id, pid, epoch, timeout_ms, state, tps, last, start)| {
                TxnMetadata {
                    transactional_id: id,
                    producer_id: pid,
                    producer_epoch: epoch,
                    timeout_ms,
                    state: state_of(state).unwrap(),
                    partitions: tps
                        .into_iter()
                        .map(|(t, p)| TopicPartition::new(t, p))
                        .collect(),
                    txn_start_ms: start,
                    last_update_ms: last,
                }
            })
    }

    proptest! {
        #[test]
        fn records_round_trip(m in metadata()) {
            let key = encode_key(&m.transactional_id);
            let value = encode_value(&m);
            let (id, back) = decode(&key, Some(&value)).unwrap();
            prop_assert_eq!(&id, &m.transactional_id);
            prop_assert_eq!(back, Some(m.clone()));
            prop_assert_eq!(decode(&key, None).unwrap(), (m.transactional_id.clone(), None));
            // Every cut of the value is an error, never a panic.
            for cut in 0..value.len() {
                prop_assert!(decode(&key, Some(&value[..cut])).is_err());
            }
        }

        #[test]
        fn any_bytes_decode_without_panicking(key in prop::collection::vec(any::<u8>(), 0..40), value in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&key, Some(&value));
        }
    }
}
