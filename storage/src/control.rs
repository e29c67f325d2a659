//! Control batches carrying transaction markers (KIP-98): building one and reading its marker.
//!
//! Kafka's layout: a RecordBatch v2 with attributes bits 4 (transactional) and 5 (control) set,
//! uncompressed, the transaction's producer id and epoch, base sequence -1, and exactly one record
//! whose key is `version i16 (0) | type i16 (0 = ABORT, 1 = COMMIT)` and whose value is
//! `version i16 | coordinator_epoch i32`. Like Kafka, a reader accepts key and value versions
//! above 0 (newer versions only append fields) and refuses negative ones.
//!
//! spool writes value version 1: version 0's fields, then `decision_offset i64` — the offset, in
//! `__transaction_state`, of the coordinator's PrepareCommit or PrepareAbort record that decided
//! the transaction. It grows with every transaction of a producer, so a partition can tell a
//! late copy of an old transaction's marker from the marker of the transaction open now
//! (`spool_core::txn::marker_verdict`). Kafka has no version 1 (`EndTxnMarker.json` is v0 only)
//! and its readers parse any newer version as version 0, so Kafka's tools still read these
//! markers; a version-0 marker, or a newer one too short to hold the field, reads as
//! [`DECISION_OFFSET_UNKNOWN`].
//!
//! Pure: no I/O. [`read_marker`] never panics, whatever the bytes.

use bytes::{Bytes, BytesMut};

use crate::batch::{self, BatchError, Compression};
use crate::records::{self, BatchBuilder, Record};

/// Kafka's `ControlRecordType` ids of the two transaction markers.
pub const CONTROL_TYPE_ABORT: i16 = 0;
pub const CONTROL_TYPE_COMMIT: i16 = 1;
/// The key and value versions this module writes.
pub const CONTROL_KEY_VERSION: i16 = 0;
pub const MARKER_VALUE_VERSION: i16 = 1;
/// Key `version i16 | type i16`; value version 0 `version i16 | coordinator_epoch i32`, version
/// 1 that and `decision_offset i64`.
const KEY_BYTES: usize = 4;
const VALUE_V0_BYTES: usize = 6;
const VALUE_V1_BYTES: usize = 14;
/// A marker's `decision_offset` when it does not carry one (version 0, Kafka's layout).
pub const DECISION_OFFSET_UNKNOWN: i64 = -1;
/// The largest control batch a reader reads a marker from: the batch [`marker_batch`] writes is
/// 86 bytes, and newer marker versions add a few fields; past this it is not a marker.
pub const MARKER_BATCH_BYTES_MAX: usize = 512;

/// The end of one transaction in one partition, as its coordinator wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// Which of the producer's transactions this marker ends (module docs);
    /// [`DECISION_OFFSET_UNKNOWN`] when the marker does not say.
    pub decision_offset: i64,
}

/// One control batch: the marker of (producer_id, producer_epoch), timestamped timestamp_ms.
/// Its base offset is 0 and its leader epoch -1, for the log to stamp.
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: Marker,
    timestamp_ms: i64,
) -> BytesMut {
    let kind = if marker.commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    let mut key = Vec::with_capacity(KEY_BYTES);
    key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(VALUE_V1_BYTES);
    value.extend_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    value.extend_from_slice(&marker.decision_offset.to_be_bytes());

    let mut b = BatchBuilder::new(timestamp_ms);
    b.producer_id = producer_id;
    b.producer_epoch = producer_epoch;
    b.base_sequence = -1;
    b.transactional = true;
    b.control = true;
    b.push(
        timestamp_ms,
        Some(Bytes::from(key)),
        Some(Bytes::from(value)),
    );
    // Uncompressed building only encodes into memory: it has no way to fail.
    match b.build() {
        Ok(bytes) => bytes,
        Err(e) => unreachable!("an uncompressed batch always builds: {e}"),
    }
}

fn malformed(what: String) -> BatchError {
    BatchError::MalformedRecords(what)
}

/// The marker a control batch carries, from the batch's bytes (whole batch, header included).
/// Err for a batch that is not a well-formed control batch: not whole, a bad CRC, not control or
/// not transactional, compressed, not exactly one record, a short or negative-version key, a type
/// other than ABORT or COMMIT, a short or negative-version value. Never panics on any input.
pub fn read_marker(batch: &[u8]) -> Result<Marker, BatchError> {
    let header = batch::validate(batch, MARKER_BATCH_BYTES_MAX)?;
    if !header.is_control() || !header.is_transactional() {
        return Err(malformed(format!(
            "not a transaction marker: attributes {:#06x} lack control and transactional",
            header.attributes
        )));
    }
    let compression = header.compression()?;
    if compression != Compression::None {
        return Err(malformed(format!(
            "control batch compressed with {}: markers are uncompressed",
            compression.name()
        )));
    }
    if header.record_count != 1 {
        return Err(malformed(format!(
            "control batch holds {} records, a marker one",
            header.record_count
        )));
    }
    let body = Bytes::copy_from_slice(&batch[batch::HEADER_BYTES..header.total_bytes()]);
    let record = records::decode_records(&body, 1)?
        .pop()
        .ok_or_else(|| malformed("control batch without its record".into()))?;
    marker_of(&record)
}

fn marker_of(record: &Record) -> Result<Marker, BatchError> {
    let key = record.key.as_deref().unwrap_or_default();
    let (Some(key_version), Some(kind)) = (be_i16(key, 0), be_i16(key, 2)) else {
        return Err(malformed(format!(
            "control record key of {} bytes, needs {KEY_BYTES}",
            key.len()
        )));
    };
    if key_version < 0 {
        return Err(malformed(format!("control key version {key_version}")));
    }
    let commit = match kind {
        CONTROL_TYPE_ABORT => false,
        CONTROL_TYPE_COMMIT => true,
        other => return Err(malformed(format!("control type {other} is not a marker"))),
    };
    let value = record.value.as_deref().unwrap_or_default();
    let version = be_i16(value, 0);
    let epoch = value.get(2..VALUE_V0_BYTES).and_then(|b| b.try_into().ok());
    let (Some(version), Some(epoch)) = (version, epoch) else {
        return Err(malformed(format!(
            "marker value of {} bytes, needs {VALUE_V0_BYTES}",
            value.len()
        )));
    };
    if version < 0 {
        return Err(malformed(format!("marker value version {version}")));
    }
    let decision_offset = match value.get(VALUE_V0_BYTES..VALUE_V1_BYTES) {
        Some(b) if version >= 1 => b
            .try_into()
            .map_or(DECISION_OFFSET_UNKNOWN, i64::from_be_bytes),
        _ => DECISION_OFFSET_UNKNOWN,
    };
    Ok(Marker {
        commit,
        coordinator_epoch: i32::from_be_bytes(epoch),
        decision_offset,
    })
}

fn be_i16(b: &[u8], at: usize) -> Option<i16> {
    let two = b.get(at..at + 2)?;
    Some(i16::from_be_bytes([two[0], two[1]]))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::batch::BatchHeader;

    const ABORT: Marker = Marker {
        commit: false,
        coordinator_epoch: 7,
        decision_offset: 0x0102_0304,
    };

    /// A one-record control batch with `key` and `value`, built as `edit` says.
    fn control_with(key: &[u8], value: &[u8], edit: impl FnOnce(&mut BatchBuilder)) -> BytesMut {
        let mut b = BatchBuilder::new(0);
        b.producer_id = 9;
        b.transactional = true;
        b.control = true;
        b.push(
            0,
            Some(Bytes::copy_from_slice(key)),
            Some(Bytes::copy_from_slice(value)),
        );
        edit(&mut b);
        b.build().unwrap()
    }

    #[test]
    fn a_marker_batch_is_kafkas_control_batch_and_passes_validation() {
        let bytes = marker_batch(42, 3, ABORT, 1_000);
        let h = batch::validate(&bytes, usize::MAX).expect("a valid batch, CRC right");
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(h.compression(), Ok(Compression::None));
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 3, -1)
        );
        assert_eq!((h.record_count, h.last_offset_delta), (1, 0));
        assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 1_000));
        assert_eq!(bytes.len(), 86, "Kafka's marker batch, 8 bytes longer");
        let (_, records) = records::read_batch(&bytes.freeze(), usize::MAX).unwrap();
        assert_eq!(records[0].key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        // Version 1: Kafka's version-0 fields first (its readers parse it as version 0).
        assert_eq!(
            records[0].value.as_deref(),
            Some(&[0u8, 1, 0, 0, 0, 7, 0, 0, 0, 0, 1, 2, 3, 4][..])
        );
    }

    #[test]
    fn read_marker_refuses_what_is_not_a_well_formed_marker() {
        let data = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 1], |b| b.control = false);
        let not_txn = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 1], |b| {
            b.transactional = false
        });
        let zstd = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 1], |b| {
            b.compression = Compression::Zstd
        });
        let two = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 1], |b| {
            b.push(0, Some(Bytes::from_static(&[0, 0, 0, 1])), None)
        });
        let short_key = control_with(&[0, 0, 0], &[0, 0, 0, 0, 0, 1], |_| {});
        let unknown = control_with(&[0, 0, 0, 2], &[0, 0, 0, 0, 0, 1], |_| {});
        let bad_key_version = control_with(&[0xff, 0xff, 0, 1], &[0, 0, 0, 0, 0, 1], |_| {});
        let short_value = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 1], |_| {});
        let mut no_record = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 1], |_| {});
        no_record.truncate(batch::HEADER_BYTES);
        let mut h = BatchHeader::parse(&no_record).unwrap();
        (h.batch_length, h.record_count) = (batch::MIN_BATCH_LENGTH, 0);
        batch::write_header(&mut no_record, &h);
        batch::write_crc(&mut no_record);
        for (what, bytes) in [
            ("data", data),
            ("not transactional", not_txn),
            ("compressed", zstd),
            ("two records", two),
            ("no record", no_record),
            ("short key", short_key),
            ("unknown type", unknown),
            ("negative key version", bad_key_version),
            ("short value", short_value),
        ] {
            assert!(
                batch::validate(&bytes, usize::MAX).is_ok(),
                "{what}: a valid batch"
            );
            let e = read_marker(&bytes).expect_err(what);
            assert!(matches!(e, BatchError::MalformedRecords(_)), "{what}: {e}");
        }
        // Newer key and value versions are read as Kafka reads them; a value too short for the
        // decision offset, or Kafka's version 0, does not say which transaction it ends.
        let m = Marker {
            commit: true,
            coordinator_epoch: 5,
            decision_offset: DECISION_OFFSET_UNKNOWN,
        };
        let newer = control_with(&[0, 1, 0, 1], &[0, 1, 0, 0, 0, 5, 0xab], |_| {});
        assert_eq!(read_marker(&newer), Ok(m));
        let kafkas = control_with(&[0, 0, 0, 1], &[0, 0, 0, 0, 0, 5], |_| {});
        assert_eq!(read_marker(&kafkas), Ok(m));
        let v0_longer = control_with(
            &[0, 0, 0, 1],
            &[0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9],
            |_| {},
        );
        assert_eq!(read_marker(&v0_longer), Ok(m));
        let v2 = control_with(
            &[0, 0, 0, 1],
            &[0, 2, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 0xff],
            |_| {},
        );
        assert_eq!(
            read_marker(&v2),
            Ok(Marker {
                decision_offset: 9,
                ..m
            })
        );
    }

    #[test]
    fn read_marker_refuses_a_cut_or_damaged_batch() {
        let bytes = marker_batch(1, 0, ABORT, 0);
        for len in 0..bytes.len() {
            let e = read_marker(&bytes[..len]).expect_err("a cut batch");
            assert!(matches!(e, BatchError::Truncated { .. }), "{len}: {e}");
        }
        let mut damaged = bytes.clone();
        damaged[bytes.len() - 1] ^= 1;
        assert!(matches!(
            read_marker(&damaged),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn markers_round_trip(
            producer_id in any::<i64>(),
            producer_epoch in any::<i16>(),
            coordinator_epoch in any::<i32>(),
            decision_offset in any::<i64>(),
            commit in any::<bool>(),
            timestamp_ms in 0i64..1 << 45,
        ) {
            let marker = Marker { commit, coordinator_epoch, decision_offset };
            let bytes = marker_batch(producer_id, producer_epoch, marker, timestamp_ms);
            let h = batch::validate(&bytes, usize::MAX).unwrap();
            prop_assert_eq!((h.producer_id, h.producer_epoch), (producer_id, producer_epoch));
            prop_assert_eq!(read_marker(&bytes), Ok(marker));
        }

        #[test]
        fn read_marker_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = read_marker(&data);
        }

        /// Any byte of a marker batch changed: refused or still read, never a panic.
        #[test]
        fn a_changed_marker_batch_never_panics(at in 0usize..86, byte in any::<u8>()) {
            let mut bytes = marker_batch(5, 1, ABORT, 0);
            bytes[at] = byte;
            batch::write_crc(&mut bytes);
            let _ = read_marker(&bytes);
        }
    }
}
