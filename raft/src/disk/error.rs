//! [`DiskError`]: every way reading or writing `__raft/` can fail, naming the file and, for bad
//! contents, the byte position.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DiskError {
    #[error("{op} {}: {source}", file.display())]
    Io {
        op: &'static str,
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is corrupt at byte {position}: {reason}", file.display())]
    Corrupt {
        file: PathBuf,
        position: u64,
        reason: String,
    },
}

impl DiskError {
    pub fn io(op: &'static str, file: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let file = file.into();
        move |source| DiskError::Io { op, file, source }
    }

    pub fn corrupt(file: impl Into<PathBuf>, position: u64, reason: impl Into<String>) -> Self {
        DiskError::Corrupt {
            file: file.into(),
            position,
            reason: reason.into(),
        }
    }
}
