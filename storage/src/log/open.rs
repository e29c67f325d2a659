//! Opening a partition log: the directory lock, the clean-shutdown marker, loading or rebuilding
//! each segment's index, and crash recovery of the active segment.
//!
//! After a clean shutdown every index is trusted (its summary must match the file's size) and
//! nothing is scanned. After a crash, closed segments keep trusting their index files (they were
//! synced and trimmed when they rolled), and only the active segment is scanned: the first
//! invalid or incomplete batch and everything after it are truncated. A closed segment whose
//! index is missing or corrupt is rebuilt from its log; if that scan finds anything but a clean
//! end (or never-written zeroes), open fails with the file and position. A log-start checkpoint
//! past every segment's end is an interrupted `truncate_fully_and_start_at`, which open finishes
//! (start_at.rs): the log comes back empty at that start. The transaction index and the open
//! transactions are recovered last (txn.rs).
//!
//! The directory steps io_uring cannot do (create it, resolve it, take the lock file, look for
//! the clean marker, list it) run as one call on glommio's blocking pool, so opening a partition
//! never blocks the core's reactor; everything after goes through glommio's async file API.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::sync::Semaphore;

use super::{
    LogState, PartitionLog, CLEAN_MARKER, EPOCH_CHECKPOINT, LOCK_FILE, LOG_START_CHECKPOINT,
};
use crate::blocking::run_blocking;
use crate::config::{LogConfig, BLOCK_BYTES};
use crate::epoch::LeaderEpochCache;
use crate::error::LogError;
use crate::index::SegmentIndex;
use crate::scan::ScanStop;
use crate::segment::{
    open_reader, parse_segment_name, read_at, read_small_file, remove_if_exists, scan_file,
    segment_file, sync_dir, zero_from, Segment,
};
use crate::tail::TailCache;
use crate::writer::SegmentWriter;

/// What opening found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenStats {
    /// The clean-shutdown marker was present.
    pub clean: bool,
    pub segments: usize,
    /// Segments read by recovery scans (0 after a clean shutdown, 1 after a crash).
    pub segments_scanned: usize,
    /// Bytes read by recovery scans.
    pub scanned_bytes: u64,
    /// Bytes cut from the end of the active segment: a torn tail plus never-written,
    /// preallocated space.
    pub truncated_bytes: u64,
    /// Index files rebuilt from their logs.
    pub rebuilt_indexes: usize,
    /// Aborted-transaction index files rebuilt (`txn`): after a crash the active segment's, and
    /// any found missing or torn.
    pub txn_indexes_rebuilt: usize,
    /// Segments whose batch headers were walked to rebuild the transaction state.
    pub txn_segments_walked: usize,
}

fn lock_dir(dir: &Path) -> Result<std::fs::File, LogError> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LogError::io("opening lock file", &path, e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(LogError::Locked {
                dir: dir.to_path_buf(),
            });
        }
        return Err(LogError::io("locking", &path, e));
    }
    Ok(f)
}

/// What the directory held before anything was opened: the resolved path, the held lock, the
/// clean-shutdown marker, and the entries (name, path) in listing order.
struct DirListing {
    dir: PathBuf,
    lock: std::fs::File,
    clean: bool,
    entries: Vec<(String, PathBuf)>,
}

/// Creates, resolves, locks and lists `dir`. All of it is `std::fs` (io_uring has no mkdir -p,
/// realpath, flock or getdents), so [`PartitionLog::open`] runs it on the blocking pool.
fn prepare_dir(dir: PathBuf) -> Result<DirListing, LogError> {
    std::fs::create_dir_all(&dir).map_err(|e| LogError::io("creating", &dir, e))?;
    // glommio resolves some paths (directories) only when absolute.
    let dir = std::fs::canonicalize(&dir).map_err(|e| LogError::io("resolving", &dir, e))?;
    let lock = lock_dir(&dir)?;
    let clean = dir.join(CLEAN_MARKER).exists();
    let mut entries = Vec::new();
    let listing = std::fs::read_dir(&dir).map_err(|e| LogError::io("listing", &dir, e))?;
    for entry in listing {
        let entry = entry.map_err(|e| LogError::io("listing", &dir, e))?;
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    Ok(DirListing {
        dir,
        lock,
        clean,
        entries,
    })
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`.
    pub async fn open(
        dir: impl Into<PathBuf>,
        config: LogConfig,
    ) -> Result<(Rc<Self>, OpenStats), LogError> {
        let dir = dir.into();
        config.validate().map_err(LogError::Config)?;
        let DirListing {
            dir,
            lock,
            clean,
            entries,
        } = run_blocking(move || prepare_dir(dir)).await?;
        let mut stats = OpenStats {
            clean,
            ..Default::default()
        };

        let mut bases = Vec::new();
        for (name, path) in entries {
            if name.ends_with(".tmp") || name.ends_with(".cleaned") {
                // Leftovers of an interrupted atomic write or compaction: the originals stand.
                remove_if_exists(&path).await?;
            } else if let Some(base) = parse_segment_name(&name) {
                bases.push(base);
            }
        }
        bases.sort_unstable();

        let epochs = match read_small_file(&dir.join(EPOCH_CHECKPOINT)).await? {
            Some(bytes) => {
                LeaderEpochCache::decode(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                    LogError::Corrupt {
                        file: dir.join(EPOCH_CHECKPOINT),
                        position: 0,
                        reason: e.to_string(),
                    }
                })?
            }
            None => LeaderEpochCache::default(),
        };
        let log_start_checkpoint = match read_small_file(&dir.join(LOG_START_CHECKPOINT)).await? {
            Some(bytes) => String::from_utf8_lossy(&bytes).trim().parse::<u64>().ok(),
            None => None,
        };

        let mut segments = BTreeMap::new();
        let last = bases.len().saturating_sub(1);
        for (i, &base) in bases.iter().enumerate() {
            let seg = load_segment(&dir, base, &config, i == last, stats.clean, &mut stats).await?;
            segments.insert(base, seg);
        }
        let log = Rc::new(Self {
            dir: dir.clone(),
            config: Cell::new(config),
            st: RefCell::new(LogState {
                segments,
                log_start_offset: 0,
                log_end_offset: 0,
                durable_offset: 0,
                tail: TailCache::new(config.tail_cache_bytes),
                epochs,
                txns: crate::txn_tracker::OpenTxnTracker::new(crate::txn_tracker::OPEN_TXNS_MAX),
                closed: false,
            }),
            append_lock: Semaphore::new(1),
            maintenance_lock: Semaphore::new(1),
            lock: RefCell::new(Some(lock)),
            syncs: Rc::default(),
            #[cfg(test)]
            crash_after: std::cell::Cell::new(None),
        });
        let loaded_end = log
            .st
            .borrow()
            .segments
            .values()
            .next_back()
            .map(|s| s.next_offset());
        let interrupted_restart =
            log_start_checkpoint.filter(|start| loaded_end.is_some_and(|end| *start > end));
        if let Some(start) = interrupted_restart {
            // A log start past every segment's end is only ever written by
            // `truncate_fully_and_start_at` (start_at.rs): finish it, so the old records (maybe
            // with gaps by now) are never served.
            tracing::warn!(dir = %dir.display(), log_start = start, log_end = ?loaded_end, "finishing an interrupted restart of the log at its checkpointed start");
            log.finish_start_at(start).await?;
        } else if bases.is_empty() {
            let base = log_start_checkpoint.unwrap_or(0);
            let seg = log.create_segment(base).await?;
            log.st.borrow_mut().segments.insert(base, seg);
        } else {
            let active = log.st.borrow().active();
            log.activate(&active).await?;
        }
        let (end, epochs_changed) = {
            let mut st = log.st.borrow_mut();
            let first_base = *st.segments.keys().next().unwrap_or(&0);
            let end = st.active().next_offset();
            st.log_start_offset = log_start_checkpoint
                .unwrap_or(first_base)
                .max(first_base)
                .min(end);
            st.log_end_offset = end;
            st.durable_offset = end;
            (end, st.epochs.truncate_from_end(end) > 0)
        };
        if epochs_changed {
            log.persist_epochs().await?;
        }
        log.recover_txn_state(stats.clean, &mut stats).await?;
        stats.segments = log.segment_count();
        if stats.clean {
            // From here on a crash must scan again.
            remove_if_exists(&dir.join(CLEAN_MARKER)).await?;
            sync_dir(&dir).await?;
        }
        tracing::debug!(dir = %dir.display(), log_end = end, ?stats, "opened partition log");
        Ok((log, stats))
    }

    /// Gives `seg` (the last segment) a writer positioned at its valid end.
    pub(crate) async fn activate(&self, seg: &Rc<Segment>) -> Result<(), LogError> {
        let end = seg.size_bytes();
        let block_start = end / BLOCK_BYTES * BLOCK_BYTES;
        let tail_block = read_at(
            &seg.reader(),
            &seg.log_path,
            block_start,
            (end - block_start) as usize,
        )
        .await?;
        let writer = SegmentWriter::open(
            seg.log_path.clone(),
            end,
            seg.next_offset(),
            &tail_block,
            &self.config.get(),
            Rc::clone(&self.syncs),
        )
        .await?;
        *seg.writer.borrow_mut() = Some(writer);
        Ok(())
    }
}

/// Loads one segment's index, scanning where the rules in the module doc say so.
async fn load_segment(
    dir: &Path,
    base: u64,
    config: &LogConfig,
    is_active: bool,
    clean: bool,
    stats: &mut OpenStats,
) -> Result<Rc<Segment>, LogError> {
    let path = segment_file(dir, base, "log");
    let reader = open_reader(&path).await?;
    let file_bytes = reader
        .file_size()
        .await
        .map_err(|e| LogError::io("stat", &path, e))?;
    let trusted = if !is_active || clean {
        let offsets = read_small_file(&segment_file(dir, base, "index")).await?;
        let times = read_small_file(&segment_file(dir, base, "timeindex")).await?;
        match (offsets, times) {
            (Some(o), Some(t)) => {
                SegmentIndex::decode(&o, &t, base, file_bytes, config.index_interval_bytes)
            }
            _ => None,
        }
    } else {
        None
    };
    let index = match trusted {
        Some(index) => index,
        None => {
            let (index, stop, scanned) = scan_file(
                &reader,
                &path,
                base,
                config.index_interval_bytes,
                config.max_batch_bytes,
            )
            .await?;
            stats.scanned_bytes += scanned;
            stats.segments_scanned += 1;
            let valid = index.size_bytes;
            match &stop {
                ScanStop::End => {}
                _ if is_active => {
                    if !matches!(stop, ScanStop::Zeroes { .. }) {
                        tracing::warn!(file = %path.display(), ?stop, "truncating the torn tail of the active segment");
                    }
                }
                ScanStop::Zeroes { position } if zero_from(&reader, &path, *position).await? => {
                    // A closed segment whose trim after roll did not reach the disk.
                }
                other => {
                    return Err(LogError::Corrupt {
                        file: path,
                        position: other.position().unwrap_or(valid),
                        reason: format!("{other:?}"),
                    })
                }
            }
            if file_bytes != valid {
                if is_active {
                    stats.truncated_bytes += file_bytes - valid;
                }
                reader
                    .truncate(valid)
                    .await
                    .map_err(|e| LogError::io("truncating", &path, e))?;
            }
            if !is_active {
                stats.rebuilt_indexes += 1;
                let seg = Segment::new(base, path, index, reader);
                seg.write_index_files().await?;
                return Ok(seg);
            }
            index
        }
    };
    Ok(Segment::new(base, path, index, reader))
}
