//! [`EntryLog`]: the raft log on disk — one append-only file of framed (length + CRC-32C)
//! protobuf `Entry`s with contiguous indexes.
//!
//! Owns: `__raft/log`. Appends are written with one `write` and made durable with `fdatasync`
//! before returning; a follower's conflicting suffix is cut with `set_len` first. Compaction
//! copies the entries after a snapshot into a new file and renames it over the old one.
//! Promises: [`EntryLog::open`] after a crash at any byte returns a valid prefix — every entry
//! whose frame was completely written (and so every entry an append returned for) — and cuts the
//! torn tail off durably, logging its position. It never panics on any file contents.
//! Never does: interpret entries (that is [`crate::MetadataRaft`]'s job).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::eraftpb::Entry;

use super::atomic::write_atomically;
use super::error::DiskError;
use super::faults;
use super::frame::{get_frame, put_frame, FrameFault};

/// The open raft log file.
#[derive(Debug)]
pub struct EntryLog {
    path: PathBuf,
    file: File,
    /// Index of the first entry in the file (meaningless while `starts` is empty).
    first_index: u64,
    /// Byte position of each entry's frame, entry `first_index + i` at `starts[i]`.
    starts: Vec<u64>,
    end_bytes: u64,
}

/// What [`EntryLog::open`] found.
#[derive(Debug)]
pub struct Recovered {
    pub entries: Vec<Entry>,
    /// Bytes cut off the end (a torn or corrupt tail); 0 after a clean shutdown.
    pub truncated_bytes: u64,
}

/// Scans `bytes` as a log: the entries of its longest valid prefix and that prefix's length.
/// Stops at the first frame that is short, fails its CRC, does not decode, or breaks the index
/// sequence.
pub fn scan_log(bytes: &[u8]) -> (Vec<Entry>, Vec<u64>, usize, Option<String>) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut starts = Vec::new();
    let mut pos = 0usize;
    let mut stop = None;
    while pos < bytes.len() {
        let (payload, total) = match get_frame(&bytes[pos..]) {
            Ok(f) => f,
            Err(FrameFault::Short) => {
                stop = Some("incomplete frame".to_string());
                break;
            }
            Err(FrameFault::BadCrc) => {
                stop = Some("CRC-32C mismatch".to_string());
                break;
            }
        };
        let entry = match Entry::parse_from_bytes(payload) {
            Ok(e) => e,
            Err(e) => {
                stop = Some(format!("entry does not decode: {e}"));
                break;
            }
        };
        if let Some(prev) = entries.last() {
            if entry.index != prev.index + 1 {
                stop = Some(format!(
                    "entry index {} follows {}",
                    entry.index, prev.index
                ));
                break;
            }
        }
        starts.push(pos as u64);
        entries.push(entry);
        pos += total;
    }
    (entries, starts, pos, stop)
}

impl EntryLog {
    /// Opens (creating if missing) and recovers the log at `path`.
    pub fn open(path: &Path) -> Result<(EntryLog, Recovered), DiskError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(DiskError::io("open", path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(DiskError::io("read", path))?;
        let (entries, starts, valid_bytes, stop) = scan_log(&bytes);
        let truncated_bytes = (bytes.len() - valid_bytes) as u64;
        if truncated_bytes > 0 {
            tracing::warn!(
                file = %path.display(),
                position = valid_bytes,
                truncated_bytes,
                reason = stop.as_deref().unwrap_or("?"),
                "raft log: cutting a torn tail"
            );
            faults::step("raft log tail truncation")
                .and_then(|()| file.set_len(valid_bytes as u64))
                .map_err(DiskError::io("truncate", path))?;
            faults::step("raft log fdatasync")
                .and_then(|()| file.sync_data())
                .map_err(DiskError::io("fdatasync", path))?;
        }
        file.seek(SeekFrom::End(0))
            .map_err(DiskError::io("seek", path))?;
        let log = EntryLog {
            path: path.to_owned(),
            file,
            first_index: entries.first().map_or(0, |e| e.index),
            starts,
            end_bytes: valid_bytes as u64,
        };
        Ok((
            log,
            Recovered {
                entries,
                truncated_bytes,
            },
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Index of the first entry held, `None` when empty.
    pub fn first_index(&self) -> Option<u64> {
        (!self.starts.is_empty()).then_some(self.first_index)
    }

    /// Index of the last entry held, `None` when empty.
    pub fn last_index(&self) -> Option<u64> {
        (!self.starts.is_empty()).then(|| self.first_index + self.starts.len() as u64 - 1)
    }

    pub fn size_bytes(&self) -> u64 {
        self.end_bytes
    }

    /// Appends `entries` durably. If they start at or before the last held index, the held
    /// entries from `entries[0].index` on are cut first (raft's conflict resolution).
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), DiskError> {
        let Some(head) = entries.first() else {
            return Ok(());
        };
        if let Some(last) = self.last_index() {
            if head.index < self.first_index || head.index > last + 1 {
                return Err(DiskError::corrupt(
                    &self.path,
                    self.end_bytes,
                    format!(
                        "append at index {} does not follow the log {}..={last}",
                        head.index, self.first_index
                    ),
                ));
            }
            if head.index <= last {
                let keep = (head.index - self.first_index) as usize;
                let cut_at = self.starts[keep];
                faults::step("raft log suffix truncation")
                    .and_then(|()| self.file.set_len(cut_at))
                    .map_err(DiskError::io("truncate", &self.path))?;
                self.file
                    .seek(SeekFrom::Start(cut_at))
                    .map_err(DiskError::io("seek", &self.path))?;
                self.starts.truncate(keep);
                self.end_bytes = cut_at;
            }
        } else {
            self.first_index = head.index;
        }
        let mut buf = Vec::new();
        let mut starts = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            if e.index != head.index + i as u64 {
                return Err(DiskError::corrupt(
                    &self.path,
                    self.end_bytes,
                    format!("appended entries are not contiguous at index {}", e.index),
                ));
            }
            starts.push(self.end_bytes + buf.len() as u64);
            let payload = e.write_to_bytes().map_err(|err| {
                DiskError::corrupt(&self.path, self.end_bytes, format!("encode: {err}"))
            })?;
            put_frame(&mut buf, &payload);
        }
        faults::write_all(&mut self.file, &buf, "raft log append")
            .map_err(DiskError::io("write", &self.path))?;
        faults::step("raft log fdatasync")
            .and_then(|()| self.file.sync_data())
            .map_err(DiskError::io("fdatasync", &self.path))?;
        self.starts.extend(starts);
        self.end_bytes += buf.len() as u64;
        Ok(())
    }

    /// Drops every entry with index `<= index` (they are covered by a durable snapshot) by
    /// rewriting the rest into a new file and renaming it over this one.
    pub fn compact_through(&mut self, index: u64) -> Result<(), DiskError> {
        let Some(last) = self.last_index() else {
            return Ok(());
        };
        if index < self.first_index {
            return Ok(());
        }
        let keep_from = if index >= last {
            self.end_bytes
        } else {
            self.starts[(index + 1 - self.first_index) as usize]
        };
        let mut tail = vec![0u8; (self.end_bytes - keep_from) as usize];
        self.file
            .seek(SeekFrom::Start(keep_from))
            .map_err(DiskError::io("seek", &self.path))?;
        self.file
            .read_exact(&mut tail)
            .map_err(DiskError::io("read", &self.path))?;
        write_atomically(&self.path, &tail).map_err(DiskError::io("replace", &self.path))?;
        let (reopened, recovered) = EntryLog::open(&self.path)?;
        if recovered.truncated_bytes != 0 {
            return Err(DiskError::corrupt(
                &self.path,
                0,
                "compacted log does not read back whole",
            ));
        }
        *self = reopened;
        Ok(())
    }
}
