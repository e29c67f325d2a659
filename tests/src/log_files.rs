//! Reading a partition's segment files directly, to compare replicas byte for byte.
//!
//! [`batches_below`] walks a partition directory's `*.log` segments in offset order, batch by
//! batch (each batch: base offset i64, length i32, then `length` bytes), and returns the bytes of
//! the whole batches whose base offset is below `offset`. A preallocated segment's zero tail, or
//! a batch cut short, ends the walk.

use std::path::Path;

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
