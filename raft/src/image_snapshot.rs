//! A [`MetadataImage`] as bytes: the payload of a raft snapshot.
//!
//! Owns: the snapshot payload format — `b"SPMI" | u32 version | u32 record count | (u32 length |
//! metadata record)…`, little-endian, each record encoded with `spool_protocol::metadata_log`.
//! The image is written as the records that rebuild it (registrations, heartbeats, unfencings,
//! topics with their current partition state, the last producer-id block), so restoring is just
//! applying them to an empty image — one code path for the log and the snapshot.
//! Promises: `restore(&snapshot(&image)) == image`; restore never panics on any bytes and names
//! the record position that failed. Integrity (CRC) is the snapshot *file's* job
//! ([`crate::disk::snapshot_file`]); this layer only checks structure.
//! Never does: I/O.

use spool_protocol::metadata_log;
use spool_protocol::metadata_records::MetadataRecordT;
use thiserror::Error;

use crate::image::MetadataImage;
use crate::records;

const MAGIC: &[u8; 4] = b"SPMI";
const VERSION: u32 = 1;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ImageSnapshotError {
    #[error("image snapshot too short or bad magic/version")]
    BadHeader,
    #[error("image snapshot truncated at record {record} (byte {position})")]
    Truncated { record: u32, position: usize },
    #[error("image snapshot record {record} (byte {position}) does not decode: {reason}")]
    BadRecord {
        record: u32,
        position: usize,
        reason: String,
    },
    #[error("image snapshot record {record} does not apply: {code:?}")]
    DoesNotApply {
        record: u32,
        code: spool_protocol::ErrorCode,
    },
    #[error("image snapshot has {extra_bytes} bytes after its last record")]
    TrailingBytes { extra_bytes: usize },
    #[error("metadata record cannot be encoded: {0}")]
    Encode(String),
}

/// The records that rebuild `image` when applied, in order, to an empty image.
pub fn image_records(image: &MetadataImage) -> Vec<MetadataRecordT> {
    let mut out = Vec::new();
    if let Some(id) = image.cluster_id() {
        out.push(records::cluster_id(id));
    }
    for b in image.brokers() {
        let listeners = b
            .listeners
            .iter()
            .map(|l| records::listener(&l.name, &l.host, l.port))
            .collect();
        out.push(records::with_unclean_shutdown(
            records::register_broker(
                b.broker_id,
                b.incarnation_id,
                b.broker_epoch,
                listeners,
                b.rack.clone(),
            ),
            b.unclean_shutdown,
        ));
        if let Some(hb) = b.last_heartbeat {
            out.push(records::broker_heartbeat(
                b.broker_id,
                b.broker_epoch,
                hb.current_metadata_offset,
                false,
                b.in_controlled_shutdown,
            ));
        }
        if !b.fenced {
            out.push(records::unfence_broker(b.broker_id, b.broker_epoch));
        }
    }
    for t in image.topics() {
        let configs = t
            .configs
            .iter()
            .map(|(k, v)| records::topic_config(k, Some(v)))
            .collect();
        let partitions = t
            .partitions
            .iter()
            .zip(0i32..)
            .map(|(p, i)| {
                let mut a = records::partition_assignment(
                    i,
                    p.replicas.clone(),
                    p.isr.clone(),
                    p.leader,
                    p.leader_epoch,
                    p.partition_epoch,
                );
                a.eligible_leaders =
                    (!p.eligible_leaders.is_empty()).then(|| p.eligible_leaders.clone());
                a
            })
            .collect();
        out.push(records::create_topic(
            &t.name, t.topic_id, configs, partitions,
        ));
    }
    if let Some(b) = image.last_producer_id_block() {
        out.push(records::producer_id_block(
            b.assigned_broker_id,
            b.broker_epoch,
            b.first_producer_id,
            b.block_size,
        ));
    }
    out
}

/// Serializes the whole image.
pub fn snapshot_image(image: &MetadataImage) -> Result<Vec<u8>, ImageSnapshotError> {
    let records = image_records(image);
    let mut out = Vec::with_capacity(64 + records.len() * 128);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let count = u32::try_from(records.len())
        .map_err(|_| ImageSnapshotError::Encode("more than u32::MAX records".into()))?;
    out.extend_from_slice(&count.to_le_bytes());
    for r in &records {
        let bytes =
            metadata_log::encode(r).map_err(|e| ImageSnapshotError::Encode(e.to_string()))?;
        let len = u32::try_from(bytes.len())
            .map_err(|_| ImageSnapshotError::Encode("record over 4 GiB".into()))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Rebuilds an image from [`snapshot_image`]'s bytes.
pub fn restore_image(bytes: &[u8]) -> Result<MetadataImage, ImageSnapshotError> {
    if bytes.get(0..4) != Some(MAGIC.as_slice()) || read_u32(bytes, 4) != Some(VERSION) {
        return Err(ImageSnapshotError::BadHeader);
    }
    let count = read_u32(bytes, 8).ok_or(ImageSnapshotError::BadHeader)?;
    let mut image = MetadataImage::new();
    let mut pos = 12usize;
    for i in 0..count {
        let truncated = ImageSnapshotError::Truncated {
            record: i,
            position: pos,
        };
        let len = read_u32(bytes, pos).ok_or_else(|| truncated.clone())? as usize;
        let start = pos + 4;
        let body = start
            .checked_add(len)
            .and_then(|end| bytes.get(start..end))
            .ok_or(truncated)?;
        let rec = metadata_log::decode(body).map_err(|e| ImageSnapshotError::BadRecord {
            record: i,
            position: pos,
            reason: e.to_string(),
        })?;
        image
            .apply(&rec)
            .map_err(|code| ImageSnapshotError::DoesNotApply { record: i, code })?;
        pos = start + len;
    }
    if pos != bytes.len() {
        return Err(ImageSnapshotError::TrailingBytes {
            extra_bytes: bytes.len() - pos,
        });
    }
    Ok(image)
}
