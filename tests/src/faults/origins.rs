//! Who wrote each record of the final log: the producer id and epoch its batch header carries,
//! read a second time through the Kafka port with the `kafka-protocol` crate's decoder (spool's
//! client does not expose batch headers, as Kafka's clients do not).
//!
//! The checker needs them to tell a broker's broken deduplication from a client's epoch bump.
//! A broker deduplicates by (producer id, epoch, sequence); a client that bumps its epoch
//! starts its sequences again at 0 (KIP-360), so a batch it sends again under the new epoch is,
//! to any broker, new — librdkafka does that to a batch whose outcome it never learnt (README,
//! fault-harness item 14). Two copies under one (id, epoch) are the broker's fault; two copies
//! under two are the client's, and the checker counts them apart.
//!
//! Each value read here is compared with the first read-back by the checker too, so the two
//! ports must agree on every offset. Bounded: each partition's read has [`READ_DEADLINE`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::history::Tp;
use crate::cluster::Cluster;
use crate::kafka_call::try_kafka_call;

/// Fetch v11: the newest version that names topics (v13 on takes topic ids).
const FETCH_VERSION: i16 = 11;
/// Bytes per fetch: the broker answers at least one whole batch.
const FETCH_MAX_BYTES: i32 = 1 << 20;
const READ_DEADLINE: Duration = Duration::from_secs(30);
/// Kafka's error code for "that broker does not lead this partition (any more)".
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// The writer of one record, from its batch header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The record's value as the Kafka port returned it.
    pub value: String,
}

/// Every record of the final log by (partition, offset).
pub type Origins = BTreeMap<(Tp, i64), Origin>;

/// Reads `topic`'s partitions `0..ends.len()` from offset 0 to `ends[p]` through their leaders'
/// Kafka ports.
pub fn read_origins(cluster: &Cluster, topic: &str, ends: &[i64]) -> Result<Origins, String> {
    let mut origins = Origins::new();
    for (partition, end) in (0i32..).zip(ends.iter().copied()) {
        read_partition(cluster, topic, partition, end, &mut origins)?;
    }
    Ok(origins)
}

fn read_partition(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    end: i64,
    origins: &mut Origins,
) -> Result<(), String> {
    let until = Instant::now() + READ_DEADLINE;
    let mut next = 0i64;
    while next < end {
        if Instant::now() >= until {
            return Err(format!(
                "reading origins of {topic}-{partition}: at {next} of {end} after {READ_DEADLINE:?}"
            ));
        }
        let leader = cluster
            .describe(1, topic)
            .into_iter()
            .find(|r| r.partition == partition)
            .map(|r| r.leader)
            .filter(|l| *l > 0);
        let Some(leader) = leader else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let records = match fetch(cluster, leader, topic, partition, next)? {
            Some(records) => records,
            // Leadership moved since `describe`: ask again.
            None => continue,
        };
        let tp: Tp = (topic.to_string(), partition);
        let before = next;
        for (offset, origin) in decode(&records)? {
            if offset >= next && offset < end {
                next = offset + 1;
                origins.insert((tp.clone(), offset), origin);
            }
        }
        if next == before {
            return Err(format!(
                "reading origins of {topic}-{partition}: no record at or past {next} (of {end})"
            ));
        }
    }
    Ok(())
}

/// One fetch of `partition` at `offset` from broker `leader`: its records' bytes, or `None`
/// when that broker no longer leads it.
fn fetch(
    cluster: &Cluster,
    leader: i32,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<Bytes>, String> {
    let request = FetchRequest::default()
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(FETCH_MAX_BYTES)])]);
    let response: FetchResponse = try_kafka_call(
        cluster.node(leader).kafka_addr(),
        ApiKey::Fetch,
        FETCH_VERSION,
        &request,
    )?;
    let data = response
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| format!("fetch of {topic}-{partition}: the answer lacks the partition"))?;
    match data.error_code {
        0 => Ok(Some(data.records.unwrap_or_default())),
        NOT_LEADER_OR_FOLLOWER => Ok(None),
        code => Err(format!(
            "fetch of {topic}-{partition} at {offset} from broker {leader}: error {code}"
        )),
    }
}

/// Every data record in `records` with its batch's writer. A trailing partial batch (a fetch
/// may end mid-batch) is left for the next fetch.
fn decode(records: &Bytes) -> Result<Vec<(i64, Origin)>, String> {
    let mut rest = records.clone();
    let mut out = Vec::new();
    while let Some(length) = whole_batch_bytes(&rest) {
        let mut batch = rest.split_to(length);
        let set = RecordBatchDecoder::decode(&mut batch)
            .map_err(|e| format!("decoding a fetched batch: {e}"))?;
        for r in set.records.into_iter().filter(|r| !r.control) {
            let value = r
                .value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            out.push((
                r.offset,
                Origin {
                    producer_id: r.producer_id,
                    producer_epoch: r.producer_epoch,
                    value,
                },
            ));
        }
    }
    Ok(out)
}

/// The size of the batch at the front of `bytes` (base offset, length, then `length` bytes),
/// if all of it is there.
fn whole_batch_bytes(bytes: &Bytes) -> Option<usize> {
    let length = i32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?);
    let total = 12usize.checked_add(usize::try_from(length).ok()?)?;
    (bytes.len() >= total).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(base_offset: i64, producer_epoch: i16, values: &[&str]) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .zip(0..)
            .map(|(v, i)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: 7,
                producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: base_offset + i,
                sequence: i as i32,
                timestamp: 0,
                key: None,
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                headers: Default::default(),
            })
            .collect();
        let mut out = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("encoding");
        out.freeze()
    }

    #[test]
    fn whole_batches_decode_with_their_writer_and_a_partial_tail_waits() {
        let mut bytes = batch(0, 0, &["p1-0", "p1-1"]).to_vec();
        let second = batch(2, 1, &["p1-0"]);
        bytes.extend_from_slice(&second);
        let whole = decode(&Bytes::from(bytes.clone())).expect("decodes");
        let seen: Vec<(i64, i16, &str)> = whole
            .iter()
            .map(|(o, origin)| (*o, origin.producer_epoch, origin.value.as_str()))
            .collect();
        assert_eq!(seen, vec![(0, 0, "p1-0"), (1, 0, "p1-1"), (2, 1, "p1-0")]);
        bytes.truncate(bytes.len() - 3);
        let cut = decode(&Bytes::from(bytes)).expect("decodes");
        assert_eq!(cut.len(), 2, "the cut batch waits for the next fetch");
        assert_eq!(
            decode(&Bytes::from_static(&[0; 11])).expect("short"),
            vec![]
        );
    }
}
