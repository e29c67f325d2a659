//! The mark a clean shutdown leaves in the data directory (Kafka's previous broker epoch, KIP-966):
//! after every core has flushed and closed its partitions, core 0 writes the broker epoch it had
//! to `<data-dir>/clean-shutdown`; the next start reads and removes it, and registers with it.
//! Under `durability = fsync` the broker also writes it after every registration
//! (`broker_session`), since everything it reports is synced: a crash then loses nothing it
//! counted for, and only a lost or replaced data directory has no mark. A broker without one
//! registers with -1, and the controller knows that its log may be gone (it leaves every ISR
//! and eligible set: `spool_raft::failover::register_broker_records`).
//!
//! Owns: that one file. Promises: the mark is durable before the process exits (written to a
//! temporary file, fsynced, renamed, the directory fsynced), and removed — durably — before the
//! broker registers, so a crash after a start is never mistaken for a clean stop. Never does:
//! decide anything about the epoch (the controller does, in `spool_raft::validate`).

use std::io::Write;
use std::path::Path;

/// The mark's file name in the data directory.
pub const FILE: &str = "clean-shutdown";
/// Largest mark read (a line `broker_epoch=N`).
const MARK_BYTES_MAX: u64 = 64;

/// Reads and removes the mark: the broker epoch of the last clean shutdown, or -1 when there
/// is none (a first start, a crash) or it does not parse. Blocking: call on the blocking pool or
/// before the reactors start.
pub fn take(data_dir: &Path) -> Result<i64, String> {
    let path = data_dir.join(FILE);
    let text = match std::fs::metadata(&path) {
        Ok(m) if m.len() <= MARK_BYTES_MAX => std::fs::read_to_string(&path).unwrap_or_default(),
        Ok(_) => String::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(-1),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let epoch = text
        .trim()
        .strip_prefix("broker_epoch=")
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|e| *e >= 0)
        .unwrap_or(-1);
    std::fs::remove_file(&path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    sync_dir(data_dir)?;
    Ok(epoch)
}

/// Writes the mark for `broker_epoch` durably. Blocking.
pub fn record(data_dir: &Path, broker_epoch: i64) -> Result<(), String> {
    let tmp = data_dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    writeln!(f, "broker_epoch={broker_epoch}").map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.sync_all()
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, data_dir.join(FILE)).map_err(|e| format!("{}: {e}", tmp.display()))?;
    sync_dir(data_dir)
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("syncing {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_read_once_and_anything_else_reads_as_unclean() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            take(dir.path()),
            Ok(-1),
            "no mark: a first start or a crash"
        );
        record(dir.path(), 42).unwrap();
        assert_eq!(take(dir.path()), Ok(42));
        assert_eq!(
            take(dir.path()),
            Ok(-1),
            "taken: a crash after this start is unclean"
        );
        for junk in [
            "",
            "broker_epoch=",
            "broker_epoch=-5",
            "epoch=3",
            "broker_epoch=x",
        ] {
            std::fs::write(dir.path().join(FILE), junk).unwrap();
            assert_eq!(take(dir.path()), Ok(-1), "{junk:?}");
            assert!(!dir.path().join(FILE).exists());
        }
        std::fs::write(dir.path().join(FILE), "x".repeat(1000)).unwrap();
        assert_eq!(take(dir.path()), Ok(-1), "an oversize mark is not read");
    }
}
