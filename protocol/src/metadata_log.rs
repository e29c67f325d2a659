//! Controller metadata records (`schemas/metadata.fbs`) to and from bytes.
//!
//! One raft entry holds one `MetadataRecord`. Decoding runs the flatbuffers verifier first (with
//! limits scaled to the entry's size) and refuses a record whose body union is absent or unknown,
//! so replaying a corrupt log yields an error, never a panic.

use flatbuffers::{FlatBufferBuilder, VerifierOptions};
use thiserror::Error;

use crate::metadata_records::{self as records, MetadataRecordBody, MetadataRecordT};

#[derive(Debug, Error)]
pub enum MetadataRecordError {
    #[error("metadata record failed flatbuffers verification: {0}")]
    Invalid(#[from] flatbuffers::InvalidFlatbuffer),
    #[error("metadata record has no body, or one this build does not know")]
    UnknownBody,
}

/// Encodes one record. A record without a body is refused rather than written.
pub fn encode(record: &MetadataRecordT) -> Result<Vec<u8>, MetadataRecordError> {
    if record.body.metadata_record_body_type() == MetadataRecordBody::NONE {
        return Err(MetadataRecordError::UnknownBody);
    }
    let mut fbb = FlatBufferBuilder::with_capacity(128);
    let root = record.pack(&mut fbb);
    fbb.finish_minimal(root);
    Ok(fbb.finished_data().to_vec())
}

/// Verifies and decodes one record.
pub fn decode(bytes: &[u8]) -> Result<MetadataRecordT, MetadataRecordError> {
    let opts = VerifierOptions {
        max_depth: 16,
        max_tables: bytes.len() / 4 + 8,
        max_apparent_size: bytes.len().saturating_mul(16).saturating_add(4096),
        ignore_missing_null_terminator: false,
    };
    let r = records::root_as_metadata_record_with_opts(&opts, bytes)?;
    let record = r.unpack();
    if record.body.metadata_record_body_type() == MetadataRecordBody::NONE {
        return Err(MetadataRecordError::UnknownBody);
    }
    Ok(record)
}
