//! The aborted-transaction index of one segment (Kafka's `.txnindex`): `<base>.txnindex` beside
//! `<base>.log`, one fixed-size entry per abort marker that landed in the segment.
//!
//! Owns the file format (pure [`encode_header`], [`encode_entry`], [`decode`]) and the file of one
//! segment on disk ([`append_entry`], [`write_whole`], [`seal`], [`for_each_entry`]). The log
//! (`log/txn.rs`) decides what goes in it.
//!
//! Format, big-endian:
//! - header, [`HEADER_BYTES`] = 16: magic `SPTXIX01` (8 bytes) | the segment's base offset u64;
//! - then entries, [`ENTRY_BYTES`] = 32 each: producer id i64 | first offset u64 (the
//!   transaction's first batch in this partition) | last offset u64 (its abort marker, which lies
//!   in this segment) | CRC-32C of the 24 bytes before u32 | reserved u32 (zero).
//!
//! Promises: [`decode`] never panics; it accepts entries in marker order only (last offsets
//! strictly increasing, inside the segment, first offset at or below last), and stops at the first
//! entry that is short, fails its CRC or breaks those rules, reporting the file `torn` so the caller
//! rebuilds it from the segment. Entries are appended in place without fdatasync while the segment
//! is active (a crash rescans the active segment anyway); [`seal`] makes the file durable when the
//! segment rolls or the log closes, so a closed segment's file is complete or detectably broken.

use std::path::{Path, PathBuf};

use glommio::io::{BufferedFile, OpenOptions};

use crate::error::LogError;
use crate::segment::{read_at, read_small_file, segment_file, write_file_atomically, TxnIndexMeta};

pub const TXN_INDEX_EXT: &str = "txnindex";
const MAGIC: &[u8; 8] = b"SPTXIX01";
pub const HEADER_BYTES: usize = 16;
pub const ENTRY_BYTES: usize = 32;
/// Bytes of an entry its CRC covers.
const CRC_COVERED_BYTES: usize = 24;

/// One aborted transaction: what a read_committed fetch reports for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbortedTxnEntry {
    pub producer_id: i64,
    pub first_offset: u64,
    /// The abort marker's offset.
    pub last_offset: u64,
}

pub fn encode_header(base_offset: u64) -> [u8; HEADER_BYTES] {
    let mut out = [0u8; HEADER_BYTES];
    out[..8].copy_from_slice(MAGIC);
    out[8..].copy_from_slice(&base_offset.to_be_bytes());
    out
}

pub fn encode_entry(e: &AbortedTxnEntry) -> [u8; ENTRY_BYTES] {
    let mut out = [0u8; ENTRY_BYTES];
    out[0..8].copy_from_slice(&e.producer_id.to_be_bytes());
    out[8..16].copy_from_slice(&e.first_offset.to_be_bytes());
    out[16..24].copy_from_slice(&e.last_offset.to_be_bytes());
    let crc = crc32c::crc32c(&out[..CRC_COVERED_BYTES]);
    out[24..28].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A whole file: the header and `entries`.
pub fn encode_file(base_offset: u64, entries: &[AbortedTxnEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + entries.len() * ENTRY_BYTES);
    out.extend_from_slice(&encode_header(base_offset));
    for e in entries {
        out.extend_from_slice(&encode_entry(e));
    }
    out
}

/// What a file held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The valid entries, in marker order.
    pub entries: Vec<AbortedTxnEntry>,
    /// Bytes of the header and the valid entries.
    pub valid_bytes: u64,
    /// Something after the valid entries: a short or broken entry (the file is not whole).
    pub torn: bool,
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Decodes the file of the segment at `base_offset` whose offsets end below `next_offset`. Err
/// (with the reason) when the header is not this segment's; a broken tail is `torn`.
pub fn decode(bytes: &[u8], base_offset: u64, next_offset: u64) -> Result<Decoded, String> {
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(format!(
            "no transaction-index header in {} bytes",
            bytes.len()
        ));
    }
    let base = be_u64(bytes, 8).unwrap_or(u64::MAX);
    if base != base_offset {
        return Err(format!(
            "header names base offset {base}, not {base_offset}"
        ));
    }
    let mut entries: Vec<AbortedTxnEntry> = Vec::new();
    let mut at = HEADER_BYTES;
    while let Some(raw) = bytes.get(at..at + ENTRY_BYTES) {
        let e = AbortedTxnEntry {
            producer_id: be_u64(raw, 0).unwrap_or(0) as i64,
            first_offset: be_u64(raw, 8).unwrap_or(0),
            last_offset: be_u64(raw, 16).unwrap_or(0),
        };
        let crc_ok = be_u32(raw, 24) == Some(crc32c::crc32c(&raw[..CRC_COVERED_BYTES]));
        let in_order = entries.last().is_none_or(|p| p.last_offset < e.last_offset);
        let in_segment = e.last_offset >= base_offset && e.last_offset < next_offset;
        if !crc_ok
            || be_u32(raw, 28) != Some(0)
            || !in_order
            || !in_segment
            || e.first_offset > e.last_offset
        {
            break;
        }
        entries.push(e);
        at += ENTRY_BYTES;
    }
    Ok(Decoded {
        entries,
        valid_bytes: at as u64,
        torn: at != bytes.len(),
    })
}

/// Summaries of a file ([`TxnIndexMeta`] lives with the segment that holds it).
impl TxnIndexMeta {
    /// The summary of a whole file holding `entries`.
    pub fn of(entries: &[AbortedTxnEntry]) -> Self {
        Self {
            entries: entries.len() as u64,
            min_first_offset: entries
                .iter()
                .map(|e| e.first_offset)
                .min()
                .unwrap_or(u64::MAX),
            file_bytes: (HEADER_BYTES + entries.len() * ENTRY_BYTES) as u64,
            failed: false,
        }
    }

    /// After `e` was appended and the file is `file_bytes` long.
    pub fn with(self, e: &AbortedTxnEntry, file_bytes: u64) -> Self {
        Self {
            entries: self.entries + 1,
            min_first_offset: self.min_first_offset.min(e.first_offset),
            file_bytes,
            failed: self.failed,
        }
    }
}

pub(crate) fn txn_index_path(dir: &Path, base_offset: u64) -> PathBuf {
    segment_file(dir, base_offset, TXN_INDEX_EXT)
}

/// The entries of the file, `None` when it is missing, not this segment's, or torn (logged: the
/// caller rebuilds it).
pub(crate) async fn load(
    dir: &Path,
    base_offset: u64,
    next_offset: u64,
) -> Result<Option<Vec<AbortedTxnEntry>>, LogError> {
    let path = txn_index_path(dir, base_offset);
    let Some(bytes) = read_small_file(&path).await? else {
        return Ok(None);
    };
    match decode(&bytes, base_offset, next_offset) {
        Ok(d) if !d.torn => Ok(Some(d.entries)),
        Ok(d) => {
            tracing::warn!(file = %path.display(), valid_bytes = d.valid_bytes, file_bytes = bytes.len(), "torn transaction index: rebuilding it from its segment");
            Ok(None)
        }
        Err(reason) => {
            tracing::warn!(file = %path.display(), "unreadable transaction index ({reason}): rebuilding it from its segment");
            Ok(None)
        }
    }
}

/// Entries one read of [`for_each_entry`] takes (64 KiB): what a query holds of a file at once.
pub const READ_WINDOW_ENTRIES: usize = 2048;

/// Calls `f` with the entries in the first `file_bytes` bytes of the file, a window of at most
/// [`READ_WINDOW_ENTRIES`] at a time, in file order; a broken entry ends the walk (the in-memory
/// summary said how much was written, so only a file changed under the log breaks). A file not
/// this segment's, or missing while `file_bytes` says it was written, is `Corrupt`.
pub(crate) async fn for_each_entry(
    dir: &Path,
    base_offset: u64,
    file_bytes: u64,
    mut f: impl FnMut(&[AbortedTxnEntry]),
) -> Result<(), LogError> {
    let path = txn_index_path(dir, base_offset);
    let corrupt = |reason: String| LogError::Corrupt {
        file: path.clone(),
        position: 0,
        reason,
    };
    let file = BufferedFile::open(&path)
        .await
        .map_err(|e| LogError::io("opening", &path, e))?;
    let walked = async {
        let header = read_at(&file, &path, 0, HEADER_BYTES).await?;
        decode(&header, base_offset, u64::MAX).map_err(corrupt)?;
        let mut pos = HEADER_BYTES as u64;
        while pos < file_bytes {
            let want = (READ_WINDOW_ENTRIES * ENTRY_BYTES).min((file_bytes - pos) as usize);
            let mut window = header.clone();
            window.extend_from_slice(&read_at(&file, &path, pos, want).await?);
            let d = decode(&window, base_offset, u64::MAX).map_err(corrupt)?;
            f(&d.entries);
            if d.torn || d.entries.len() * ENTRY_BYTES < want {
                break;
            }
            pos += want as u64;
        }
        Ok::<(), LogError>(())
    }
    .await;
    let closed = file.close().await;
    walked?;
    closed.map_err(|e| LogError::io("closing", &path, e))
}

/// All of [`for_each_entry`] at once (tests).
#[cfg(test)]
pub(crate) async fn read_entries(
    dir: &Path,
    base_offset: u64,
    file_bytes: u64,
) -> Result<Vec<AbortedTxnEntry>, LogError> {
    let mut out = Vec::new();
    for_each_entry(dir, base_offset, file_bytes, |w| out.extend_from_slice(w)).await?;
    Ok(out)
}

/// Replaces the file with the header and `entries` (atomically; durable with `sync`).
pub(crate) async fn write_whole(
    dir: &Path,
    base_offset: u64,
    entries: &[AbortedTxnEntry],
    sync: bool,
) -> Result<u64, LogError> {
    let bytes = encode_file(base_offset, entries);
    let len = bytes.len() as u64;
    write_file_atomically(&txn_index_path(dir, base_offset), bytes, sync).await?;
    Ok(len)
}

/// Appends one entry at `file_bytes` (the header first, truncating any leftover, when
/// `file_bytes` is 0). Returns the file's new length. No fdatasync ([`seal`] does).
pub(crate) async fn append_entry(
    dir: &Path,
    base_offset: u64,
    file_bytes: u64,
    entry: &AbortedTxnEntry,
) -> Result<u64, LogError> {
    let path = txn_index_path(dir, base_offset);
    let fresh = file_bytes < HEADER_BYTES as u64;
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(fresh)
        .buffered_open(&path)
        .await
        .map_err(|e| LogError::io("opening", &path, e))?;
    let (pos, bytes) = if fresh {
        let mut b = encode_header(base_offset).to_vec();
        b.extend_from_slice(&encode_entry(entry));
        (0, b)
    } else {
        (file_bytes, encode_entry(entry).to_vec())
    };
    let len = bytes.len();
    let wrote = write_and_close(f, &path, bytes, pos).await?;
    if wrote != len {
        return Err(LogError::io(
            "short write",
            &path,
            std::io::Error::other("short write"),
        ));
    }
    Ok(pos + len as u64)
}

async fn write_and_close(
    f: BufferedFile,
    path: &Path,
    bytes: Vec<u8>,
    pos: u64,
) -> Result<usize, LogError> {
    let wrote = f.write_at(bytes, pos).await;
    let closed = f.close().await;
    let wrote = wrote.map_err(|e| LogError::io("writing", path, e))?;
    closed.map_err(|e| LogError::io("closing", path, e))?;
    Ok(wrote)
}

/// Makes the file durable as it is: a segment without entries gets its header-only file (so a
/// closed segment's missing file means lost, not empty); one with entries written in place is
/// fdatasynced.
pub(crate) async fn seal(dir: &Path, base_offset: u64, file_bytes: u64) -> Result<u64, LogError> {
    if file_bytes < HEADER_BYTES as u64 {
        return write_whole(dir, base_offset, &[], true).await;
    }
    let path = txn_index_path(dir, base_offset);
    let f = OpenOptions::new()
        .write(true)
        .buffered_open(&path)
        .await
        .map_err(|e| LogError::io("opening", &path, e))?;
    let synced = f.fdatasync().await;
    let closed = f.close().await;
    synced.map_err(|e| LogError::io("fdatasync", &path, e))?;
    closed.map_err(|e| LogError::io("closing", &path, e))?;
    Ok(file_bytes)
}

#[cfg(test)]
#[path = "txn_index_tests.rs"]
mod tests;
