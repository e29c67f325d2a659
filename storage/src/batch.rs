//! RecordBatch v2 (magic 2): the one unit spool keeps on disk, replicates and sends on both wires.
//!
//! This module owns the fixed 61-byte header: parsing it, validating a whole batch (length bounds,
//! magic, CRC-32C over attributes..end) and the two in-place edits the broker is allowed to make —
//! `baseOffset` and `partitionLeaderEpoch`, which the CRC does not cover. It never re-encodes or
//! recompresses a batch; building batches lives in `records`.
//!
//! Layout (big-endian):
//! ```text
//!  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32
//! 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64
//! 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records
//! ```

use thiserror::Error;

/// Bytes before the records.
pub const HEADER_BYTES: usize = 61;
/// `baseOffset` + `batchLength`: the prefix that tells how long the batch is.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// `batchLength` counts from `partitionLeaderEpoch` to the end, so its smallest legal value.
pub const MIN_BATCH_LENGTH: i32 = (HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;
/// The only magic spool accepts.
pub const MAGIC_V2: i8 = 2;
/// Where the CRC-covered region starts (attributes).
pub const CRC_START: usize = 21;

const OFF_BASE_OFFSET: usize = 0;
const OFF_BATCH_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORD_COUNT: usize = 57;
/// The leading bytes that hold every field a leader stamps ([`set_base_offset`],
/// [`set_partition_leader_epoch`]); none of them is covered by the CRC.
pub const STAMPED_HEAD_BYTES: usize = OFF_LEADER_EPOCH + 4;
const _: () = assert!(OFF_BASE_OFFSET + 8 <= STAMPED_HEAD_BYTES && STAMPED_HEAD_BYTES <= CRC_START);

/// Attribute bits (Kafka's numbering).
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_LOG_APPEND: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;

/// Compression codec stored in attributes bits 0-2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_attributes(attributes: i16) -> Result<Self, BatchError> {
        match attributes & ATTR_COMPRESSION_MASK {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            other => Err(BatchError::UnknownCompression(other as u8)),
        }
    }

    pub fn attribute_bits(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Gzip => 1,
            Self::Snappy => 2,
            Self::Lz4 => 3,
            Self::Zstd => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }
}

/// Why a batch was refused. Each maps to one protocol error (CORRUPT_MESSAGE for all but size).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("batch truncated: need {needed} bytes, have {have}")]
    Truncated { needed: usize, have: usize },
    #[error("batch length {length} out of bounds (min {min}, max {max})")]
    BadLength { length: i64, min: i64, max: i64 },
    #[error("unsupported magic {0} (only RecordBatch v2, magic 2)")]
    BadMagic(i8),
    #[error("crc mismatch: header says {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    #[error(
        "batch compressed with {0}, which spool stores and serves as is but cannot decompress"
    )]
    UnsupportedCompression(&'static str),
    #[error("malformed records: {0}")]
    MalformedRecords(String),
    #[error("record count {count} or last offset delta {last_offset_delta} invalid")]
    BadCounts { count: i32, last_offset_delta: i32 },
}

/// The parsed 61-byte header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl BatchHeader {
    /// Parses the header fields without checking the CRC. Needs at least [`HEADER_BYTES`].
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::Truncated {
                needed: HEADER_BYTES,
                have: buf.len(),
            });
        }
        Ok(Self {
            base_offset: be_i64(buf, OFF_BASE_OFFSET),
            batch_length: be_i32(buf, OFF_BATCH_LENGTH),
            partition_leader_epoch: be_i32(buf, OFF_LEADER_EPOCH),
            magic: buf[OFF_MAGIC] as i8,
            crc: be_i32(buf, OFF_CRC) as u32,
            attributes: be_i16(buf, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(buf, OFF_LAST_OFFSET_DELTA),
            base_timestamp: be_i64(buf, OFF_BASE_TIMESTAMP),
            max_timestamp: be_i64(buf, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(buf, OFF_PRODUCER_ID),
            producer_epoch: be_i16(buf, OFF_PRODUCER_EPOCH),
            base_sequence: be_i32(buf, OFF_BASE_SEQUENCE),
            record_count: be_i32(buf, OFF_RECORD_COUNT),
        })
    }

    /// Whole batch size on disk, `baseOffset` and `batchLength` included.
    pub fn total_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offsets the batch occupies (Kafka's `lastOffsetDelta + 1`, which compaction keeps even when
    /// it drops records).
    pub fn offset_count(&self) -> u64 {
        u64::try_from(self.last_offset_delta).unwrap_or(0) + 1
    }

    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_attributes(self.attributes)
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
}

/// Reads only the length prefix: how many bytes the batch starting at `buf` claims, or `None`
/// when fewer than 12 bytes are present. Bounds are checked by [`validate`].
pub fn peek_total_bytes(buf: &[u8]) -> Option<i64> {
    if buf.len() < LOG_OVERHEAD_BYTES {
        return None;
    }
    Some(LOG_OVERHEAD_BYTES as i64 + i64::from(be_i32(buf, OFF_BATCH_LENGTH)))
}

/// One batch whose bytes passed [`validate`], kept with the header it gave: the proof that its
/// length, magic, counts and CRC were checked, so the log appends it without computing the CRC
/// again (issue 19: one CRC-32C per produced batch, not two). Only [`Checked::first_of`] makes
/// one, and its bytes cannot change afterwards.
#[derive(Debug, Clone)]
pub struct Checked {
    bytes: bytes::Bytes,
    header: BatchHeader,
}

impl Checked {
    /// Validates the batch at the start of `buf` (see [`validate`]); its bytes are exactly the
    /// batch's, a slice of `buf` (no copy).
    pub fn first_of(buf: &bytes::Bytes, max_batch_bytes: usize) -> Result<Self, BatchError> {
        let header = validate(buf, max_batch_bytes)?;
        Ok(Self {
            bytes: buf.slice(..header.total_bytes()),
            header,
        })
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    pub fn bytes(&self) -> &bytes::Bytes {
        &self.bytes
    }

    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// The CRC-32C Kafka stores: over attributes..end of the batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// Fully validates the batch at the start of `buf`: the length is within
/// `[HEADER_BYTES, max_batch_bytes]` and present, magic is 2, counts are sane and the CRC matches.
/// Returns the header; the batch is `&buf[..header.total_bytes()]`.
pub fn validate(buf: &[u8], max_batch_bytes: usize) -> Result<BatchHeader, BatchError> {
    let Some(total) = peek_total_bytes(buf) else {
        return Err(BatchError::Truncated {
            needed: LOG_OVERHEAD_BYTES,
            have: buf.len(),
        });
    };
    let max = i64::try_from(max_batch_bytes).unwrap_or(i64::MAX);
    if total < HEADER_BYTES as i64 || total > max {
        return Err(BatchError::BadLength {
            length: total,
            min: HEADER_BYTES as i64,
            max,
        });
    }
    // `total` is within [61, max_batch_bytes], so it fits a usize.
    let total = total as usize;
    if buf.len() < total {
        return Err(BatchError::Truncated {
            needed: total,
            have: buf.len(),
        });
    }
    let header = BatchHeader::parse(buf)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic(header.magic));
    }
    let computed = compute_crc(&buf[..total]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    if header.last_offset_delta < 0
        || header.record_count < 0
        || (header.record_count > 0 && header.last_offset_delta < header.record_count - 1)
    {
        return Err(BatchError::BadCounts {
            count: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    header.compression()?;
    Ok(header)
}

/// Writes `baseOffset` in place. Not covered by the CRC, so the batch stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes `partitionLeaderEpoch` in place. Not covered by the CRC either.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Writes the producer id, epoch and base sequence in place and the CRC again (they are covered
/// by it): a client renumbering a batch it knows was not written (OUT_OF_ORDER_SEQUENCE_NUMBER)
/// under a new producer id. The batch must be a whole v2 batch.
pub fn set_producer(batch: &mut [u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) {
    batch[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[OFF_PRODUCER_EPOCH..OFF_PRODUCER_EPOCH + 2]
        .copy_from_slice(&producer_epoch.to_be_bytes());
    batch[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
    write_crc(batch);
}

/// Writes the CRC after a builder has filled the rest of the header.
pub(crate) fn write_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Encodes a header into the first 61 bytes of `out` (the CRC is written separately, last).
pub(crate) fn write_header(out: &mut [u8], h: &BatchHeader) {
    out[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&h.base_offset.to_be_bytes());
    out[OFF_BATCH_LENGTH..OFF_BATCH_LENGTH + 4].copy_from_slice(&h.batch_length.to_be_bytes());
    out[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4]
        .copy_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out[OFF_MAGIC] = h.magic as u8;
    out[OFF_CRC..OFF_CRC + 4].copy_from_slice(&h.crc.to_be_bytes());
    out[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&h.attributes.to_be_bytes());
    out[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4]
        .copy_from_slice(&h.last_offset_delta.to_be_bytes());
    out[OFF_BASE_TIMESTAMP..OFF_BASE_TIMESTAMP + 8]
        .copy_from_slice(&h.base_timestamp.to_be_bytes());
    out[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&h.max_timestamp.to_be_bytes());
    out[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&h.producer_id.to_be_bytes());
    out[OFF_PRODUCER_EPOCH..OFF_PRODUCER_EPOCH + 2]
        .copy_from_slice(&h.producer_epoch.to_be_bytes());
    out[OFF_BASE_SEQUENCE..OFF_BASE_SEQUENCE + 4].copy_from_slice(&h.base_sequence.to_be_bytes());
    out[OFF_RECORD_COUNT..OFF_RECORD_COUNT + 4].copy_from_slice(&h.record_count.to_be_bytes());
}

/// Iterates the batches laid end to end in `buf`, validating each; stops at the first error.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    position: usize,
    max_batch_bytes: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8], max_batch_bytes: usize) -> Self {
        Self {
            buf,
            position: 0,
            max_batch_bytes,
            failed: false,
        }
    }
}

/// One batch found by [`BatchIter`]: its header, position in the buffer, and bytes.
#[derive(Debug, Clone, Copy)]
pub struct BatchRef<'a> {
    pub header: BatchHeader,
    pub position: usize,
    pub bytes: &'a [u8],
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchRef<'a>, (usize, BatchError)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.position..];
        match validate(rest, self.max_batch_bytes) {
            Ok(header) => {
                let total = header.total_bytes();
                let item = BatchRef {
                    header,
                    position: self.position,
                    bytes: &rest[..total],
                };
                self.position += total;
                Some(Ok(item))
            }
            Err(e) => {
                self.failed = true;
                Some(Err((self.position, e)))
            }
        }
    }
}
