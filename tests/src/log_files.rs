//! Reading a partition's segment files directly, to compare replicas byte for byte.
//!
//! [`batches_below`] walks a partition directory's `*.log` segments in offset order, batch by
//! batch (each batch: base offset i64, length i32, then `length` bytes), and returns the bytes of
//! the whole batches whose base offset is below `offset`. A preallocated segment's zero tail, or
//! a batch cut short, ends the walk. [`persisted_log_start`] reads the log start a partition
//! has checkpointed.

use std::path::{Path, PathBuf};

/// See the module docs.
pub fn batches_below(partition_dir: &Path, offset: i64) -> Vec<u8> {
    let mut segments: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(partition_dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", partition_dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .filter_map(|p| {
            let base = p.file_stem()?.to_str()?.parse::<i64>().ok()?;
            Some((base, p))
        })
        .collect();
    segments.sort();
    let mut out = Vec::new();
    for (_, path) in segments {
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut at = 0usize;
        while at + 12 <= bytes.len() {
            let base = i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            let len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
            let Ok(len) = usize::try_from(len) else { break };
            if len == 0 || at + 12 + len > bytes.len() {
                break;
            }
            if base >= offset {
                return out;
            }
            out.extend_from_slice(&bytes[at..at + 12 + len]);
            at += 12 + len;
        }
    }
    out
}

/// The log start `dir` (a broker's data directory) has persisted for `topic`-`partition`.
pub fn persisted_log_start(dir: &Path, topic: &str, partition: i32) -> Option<u64> {
    let want = format!("{topic}-{partition}");
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let path = e.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == want.as_str()) {
                let text = std::fs::read_to_string(path.join("log-start-offset-checkpoint"));
                return text.ok()?.trim().parse().ok();
            }
            stack.push(path);
        }
    }
    None
}
