//! The log's errors. Each carries its context (partition directory, file, position, offsets) and
//! maps to one protocol error code in the broker.

use std::path::PathBuf;

use crate::batch::BatchError;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The batch itself is bad (CORRUPT_MESSAGE, or MESSAGE_TOO_LARGE for `BadLength`).
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
    /// OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
    /// A closed segment (or an index rebuild) found bytes that are not valid batches. Never skipped.
    #[error("corrupt segment {}: at position {position}: {reason}", file.display())]
    Corrupt {
        file: PathBuf,
        position: u64,
        reason: String,
    },
    /// KAFKA_STORAGE_ERROR; reads keep working.
    #[error("disk full while writing {}", path.display())]
    DiskFull { path: PathBuf },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("invalid log config: {0}")]
    Config(String),
    /// An earlier write failed; the log refuses appends until it is reopened (its tail is unknown).
    #[error("log {} is offline after a failed write: {reason}", dir.display())]
    Offline { dir: PathBuf, reason: String },
    /// Another process holds the partition directory.
    #[error("log directory {} is in use by another process", dir.display())]
    Locked { dir: PathBuf },
    /// A replicated batch does not start at the log end (a follower must truncate, or fetch from
    /// its log end, first): nothing was written.
    #[error("replicated batch at offset {base_offset} does not continue the log {} at {log_end_offset}", dir.display())]
    NotContiguous {
        dir: PathBuf,
        base_offset: i64,
        log_end_offset: u64,
    },
}

impl LogError {
    /// Wraps an I/O error with what was being done, turning ENOSPC into [`LogError::DiskFull`].
    pub fn io(
        context: impl Into<String>,
        path: &std::path::Path,
        e: impl Into<std::io::Error>,
    ) -> Self {
        let e: std::io::Error = e.into();
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return LogError::DiskFull {
                path: path.to_path_buf(),
            };
        }
        LogError::Io {
            context: format!("{} {}", context.into(), path.display()),
            source: e,
        }
    }
}
