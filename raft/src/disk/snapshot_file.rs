//! `__raft/snapshot`: the latest raft snapshot (metadata + the image bytes), replaced atomically.
//!
//! Format: `b"SPSN" | u32 version | frame(raft-rs Snapshot protobuf)`.
//! Promises: a missing file reads as `None`; a damaged one is an error naming the file (the log
//! before the snapshot was compacted away, so there is nothing to fall back to).

use std::io::ErrorKind;
use std::path::Path;

use protobuf::Message as _;
use raft::eraftpb::Snapshot;

use super::atomic::write_atomically;
use super::error::DiskError;
use super::frame::{get_frame, put_frame};

const MAGIC: &[u8; 4] = b"SPSN";
const VERSION: u32 = 1;

pub fn read_snapshot(path: &Path) -> Result<Option<Snapshot>, DiskError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DiskError::io("read", path)(e)),
    };
    if bytes.get(..4) != Some(MAGIC.as_slice()) {
        return Err(DiskError::corrupt(path, 0, "bad magic"));
    }
    if bytes.get(4..8) != Some(VERSION.to_le_bytes().as_slice()) {
        return Err(DiskError::corrupt(path, 4, "unknown version"));
    }
    let (payload, total) =
        get_frame(&bytes[8..]).map_err(|f| DiskError::corrupt(path, 8, format!("{f:?}")))?;
    if 8 + total != bytes.len() {
        return Err(DiskError::corrupt(
            path,
            (8 + total) as u64,
            "bytes after the snapshot frame",
        ));
    }
    Snapshot::parse_from_bytes(payload)
        .map(Some)
        .map_err(|e| DiskError::corrupt(path, 8, format!("snapshot: {e}")))
}

pub fn write_snapshot(path: &Path, snapshot: &Snapshot) -> Result<(), DiskError> {
    let payload = snapshot
        .write_to_bytes()
        .map_err(|e| DiskError::corrupt(path, 0, format!("encode: {e}")))?;
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    put_frame(&mut out, &payload);
    write_atomically(path, &out).map_err(DiskError::io("replace", path))
}
