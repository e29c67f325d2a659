//! The Fetch response (v4–v11), framed by hand around record bytes the encoder never sees.
//!
//! Why by hand: a fetch answer's records come straight from the log — memory for the hot tail,
//! segment-file ranges that the broker splices to the socket (DESIGN §5). The `kafka-protocol`
//! crate encodes records only from a `Bytes` in memory, so it would force a copy of every file
//! range. This encoder writes everything around the records (prefix, header, topics, partitions,
//! each records length) and leaves a gap of exactly `records_bytes` per partition, which the
//! caller fills with its chunks. v4–v11 share one non-flexible layout, so the framing is small;
//! a proptest decodes the result with the crate's own `FetchResponse` decoder.
//!
//! Layout (v4–v11): throttle_time_ms i32 | [v7+] error_code i16, session_id i32 | topics: i32
//! count, each: name (i16-length string), partitions: i32 count, each: partition_index i32,
//! error_code i16, high_watermark i64, last_stable_offset i64, [v5+] log_start_offset i64,
//! aborted_transactions (i32 count, -1 = null, each producer_id i64 + first_offset i64),
//! [v11+] preferred_read_replica i32, records (i32 length, -1 = null, then the bytes).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;

use super::codec::{put_response_header, KafkaCodecError, LENGTH_PREFIX_BYTES};

pub use super::versions::{FETCH_MAX_VERSION, FETCH_MIN_VERSION};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionFrame {
    pub partition_index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// `None`: a null list (read_uncommitted); `Some`: (producer id, first offset) pairs.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// Bytes of record batches the caller writes after this partition's framing.
    pub records_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicFrame {
    pub name: String,
    pub partitions: Vec<FetchPartitionFrame>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponseFrame {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    pub topics: Vec<FetchTopicFrame>,
}

impl FetchResponseFrame {
    /// Partitions in wire order.
    pub fn partitions(&self) -> impl Iterator<Item = &FetchPartitionFrame> {
        self.topics.iter().flat_map(|t| t.partitions.iter())
    }
}

/// Encodes the framing of `resp`. Returns `partitions + 1` pieces: partition `i`'s records go
/// between piece `i` and piece `i + 1` (in [`FetchResponseFrame::partitions`] order). The length
/// prefix in piece 0 already counts every record byte.
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    resp: &FetchResponseFrame,
) -> Result<Vec<Bytes>, KafkaCodecError> {
    let err = |reason: String| KafkaCodecError::Encode {
        api_key: ApiKey::Fetch,
        version,
        reason,
    };
    if !(FETCH_MIN_VERSION..=FETCH_MAX_VERSION).contains(&version) {
        return Err(err("version outside the hand-framed range 4..=11".into()));
    }
    let count = |n: usize, what: &str| i32::try_from(n).map_err(|_| err(format!("{n} {what}")));
    let mut pieces = Vec::new();
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    put_response_header(&mut out, ApiKey::Fetch, version, correlation_id)?;
    out.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        out.put_i16(resp.error_code);
        out.put_i32(resp.session_id);
    }
    out.put_i32(count(resp.topics.len(), "topics")?);
    let mut records_total: u64 = 0;
    for t in &resp.topics {
        let name = i16::try_from(t.name.len()).map_err(|_| err("topic name too long".into()))?;
        out.put_i16(name);
        out.put_slice(t.name.as_bytes());
        out.put_i32(count(t.partitions.len(), "partitions")?);
        for p in &t.partitions {
            out.put_i32(p.partition_index);
            out.put_i16(p.error_code);
            out.put_i64(p.high_watermark);
            out.put_i64(p.last_stable_offset);
            if version >= 5 {
                out.put_i64(p.log_start_offset);
            }
            match &p.aborted_transactions {
                None => out.put_i32(-1),
                Some(list) => {
                    out.put_i32(count(list.len(), "aborted transactions")?);
                    for (producer_id, first_offset) in list {
                        out.put_i64(*producer_id);
                        out.put_i64(*first_offset);
                    }
                }
            }
            if version >= 11 {
                out.put_i32(-1);
            }
            out.put_i32(count(p.records_bytes as usize, "record bytes")?);
            records_total += u64::from(p.records_bytes);
            pieces.push(out.split().freeze());
        }
    }
    pieces.push(out.split().freeze());
    let framing: u64 = pieces.iter().map(|p| p.len() as u64).sum();
    let length = framing + records_total - LENGTH_PREFIX_BYTES as u64;
    let length = i32::try_from(length).map_err(|_| err(format!("response of {length} bytes")))?;
    let mut first = BytesMut::from(&pieces[0][..]);
    first[..LENGTH_PREFIX_BYTES].copy_from_slice(&length.to_be_bytes());
    pieces[0] = first.freeze();
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::codec::split_response;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;
    use proptest::prelude::*;

    fn partition() -> impl Strategy<Value = (FetchPartitionFrame, Vec<u8>)> {
        (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(any::<(i64, i64)>(), 0..3)),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(i, e, hw, lso, lss, aborted, records)| {
                (
                    FetchPartitionFrame {
                        partition_index: i,
                        error_code: e,
                        high_watermark: hw,
                        last_stable_offset: lso,
                        log_start_offset: lss,
                        aborted_transactions: aborted,
                        records_bytes: records.len() as u32,
                    },
                    records,
                )
            })
    }

    proptest! {
        #[test]
        fn the_crate_decodes_our_framing(
            version in FETCH_MIN_VERSION..=FETCH_MAX_VERSION,
            cid in any::<i32>(),
            throttle in any::<i32>(),
            error in any::<i16>(),
            session in any::<i32>(),
            topics in proptest::collection::vec(
                ("[a-z._-]{1,20}", proptest::collection::vec(partition(), 0..4)), 0..4),
        ) {
            let frame = FetchResponseFrame {
                throttle_time_ms: throttle,
                error_code: error,
                session_id: session,
                topics: topics.iter().map(|(n, ps)| FetchTopicFrame {
                    name: n.clone(),
                    partitions: ps.iter().map(|(p, _)| p.clone()).collect(),
                }).collect(),
            };
            let records: Vec<&Vec<u8>> = topics.iter().flat_map(|(_, ps)| ps.iter().map(|(_, r)| r)).collect();
            let pieces = encode_fetch_response(version, cid, &frame).unwrap();
            prop_assert_eq!(pieces.len(), records.len() + 1);
            let mut wire = BytesMut::new();
            for (i, piece) in pieces.iter().enumerate() {
                wire.extend_from_slice(piece);
                if let Some(r) = records.get(i) {
                    wire.extend_from_slice(r);
                }
            }
            let (got_cid, mut body) = split_response(wire.freeze(), 0).unwrap();
            prop_assert_eq!(got_cid, cid);
            let decoded = FetchResponse::decode(&mut body, version).unwrap();
            prop_assert!(body.is_empty());
            prop_assert_eq!(decoded.throttle_time_ms, throttle);
            if version >= 7 {
                prop_assert_eq!(decoded.error_code, error);
                prop_assert_eq!(decoded.session_id, session);
            }
            prop_assert_eq!(decoded.responses.len(), frame.topics.len());
            let mut at = 0;
            for (t, want) in decoded.responses.iter().zip(&frame.topics) {
                prop_assert_eq!(t.topic.0.as_str(), want.name.as_str());
                for (p, w) in t.partitions.iter().zip(&want.partitions) {
                    prop_assert_eq!(p.partition_index, w.partition_index);
                    prop_assert_eq!(p.error_code, w.error_code);
                    prop_assert_eq!(p.high_watermark, w.high_watermark);
                    prop_assert_eq!(p.last_stable_offset, w.last_stable_offset);
                    if version >= 5 {
                        prop_assert_eq!(p.log_start_offset, w.log_start_offset);
                    }
                    let aborted = p.aborted_transactions.as_ref().map(|l| {
                        l.iter().map(|a| (a.producer_id.0, a.first_offset)).collect::<Vec<_>>()
                    });
                    prop_assert_eq!(&aborted, &w.aborted_transactions);
                    prop_assert_eq!(p.records.as_deref(), Some(&records[at][..]));
                    at += 1;
                }
            }
        }
    }

    #[test]
    fn other_versions_are_refused() {
        let f = FetchResponseFrame::default();
        assert!(encode_fetch_response(3, 1, &f).is_err());
        assert!(encode_fetch_response(12, 1, &f).is_err());
    }
}
