//! The controller's durable state in `<data_dir>/__raft/`: the raft log, the hard/conf state and
//! the latest snapshot.
//!
//! ```text
//! __raft/log        append-only framed entries (entry_log.rs)
//! __raft/state      term, vote, commit, voters, incarnation — replaced atomically (state_file.rs)
//! __raft/snapshot   latest snapshot — replaced atomically (snapshot_file.rs)
//! __raft/catching-up   present from a fresh start until the node has caught up (lost_log.rs)
//! ```
//!
//! Owns: opening and recovering the three files into a [`RecoveredState`] for
//! [`crate::MetadataRaft::new`], and applying what a raft `Ready` / `Advanced` says must be made
//! durable, in a crash-safe order (snapshot before the log it replaces; entries before the hard
//! state that commits them).
//!
//! **Blocking I/O, on purpose.** These are plain `std::fs` calls with `fdatasync`, run on core 0.
//! Metadata changes are rare (topic creation, broker registration, leader changes) and small, and
//! the raft core itself stays sans-IO, so a glommio DMA path would buy nothing but complexity. The
//! broker must not call this from a hot data-path task; at ~3.5 ms per fdatasync (DESIGN §12) a
//! metadata commit costs a few milliseconds of core 0.

pub mod atomic;
pub mod entry_log;
pub mod error;
pub mod faults;
pub mod frame;
pub mod snapshot_file;
pub mod state_file;

use std::path::{Path, PathBuf};

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

use self::atomic::{sync_dir, write_atomically};
pub use self::entry_log::EntryLog;
pub use self::error::DiskError;
use self::snapshot_file::{read_snapshot, write_snapshot};
use self::state_file::{read_state, write_state, PersistedState};
use crate::node::RecoveredState;

/// The directory under the data dir that holds the controller's files.
pub const RAFT_DIR_NAME: &str = "__raft";

/// Present from the moment a fresh `__raft/` is opened until the node has caught up with its
/// group ([`crate::lost_log`]): a node that restarts meanwhile still owes the catch-up.
const CATCHING_UP_FILE: &str = "catching-up";

/// The open `__raft/` directory.
#[derive(Debug)]
pub struct RaftDisk {
    dir: PathBuf,
    log: EntryLog,
    state: PersistedState,
    snapshot_index: u64,
    /// Whether [`CATCHING_UP_FILE`] exists.
    catching_up: bool,
}

impl RaftDisk {
    /// Opens (creating if needed) `<data_dir>/__raft/`, recovers it, and bumps the incarnation
    /// durably before returning, so proposal ids never repeat across restarts.
    pub fn open(data_dir: &Path) -> Result<(RaftDisk, RecoveredState), DiskError> {
        let dir = data_dir.join(RAFT_DIR_NAME);
        std::fs::create_dir_all(&dir).map_err(DiskError::io("create dir", &dir))?;
        let state_path = dir.join("state");
        let snapshot = read_snapshot(&dir.join("snapshot"))?;
        let (mut log, recovered) = EntryLog::open(&dir.join("log"))?;
        let catching_up_path = dir.join(CATCHING_UP_FILE);
        let state = match read_state(&state_path)? {
            Some(s) => s,
            None if snapshot.is_none() && recovered.entries.is_empty() => {
                // Fresh: a new node or a wiped one. Durable before raft can persist a term.
                write_atomically(&catching_up_path, b"")
                    .map_err(DiskError::io("create", &catching_up_path))?;
                PersistedState::default()
            }
            None => {
                return Err(DiskError::corrupt(
                    &state_path,
                    0,
                    "missing, but the raft log or snapshot exists",
                ))
            }
        };
        let snapshot_index = snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
        let mut entries = recovered.entries;
        if snapshot.is_some() {
            // A crash between writing the snapshot and compacting the log leaves entries the
            // snapshot covers: finish the compaction now.
            if log
                .first_index()
                .is_some_and(|first| first <= snapshot_index)
            {
                log.compact_through(snapshot_index)?;
                entries.retain(|e| e.index > snapshot_index);
            }
            if let Some(first) = entries.first() {
                if first.index != snapshot_index + 1 {
                    return Err(DiskError::corrupt(
                        log.path(),
                        0,
                        format!(
                            "log starts at index {} but the snapshot ends at {snapshot_index}",
                            first.index
                        ),
                    ));
                }
            }
        }
        let last_index = entries.last().map_or(snapshot_index, |e| e.index);
        if state.hard_state.commit > last_index {
            return Err(DiskError::corrupt(
                &state_path,
                0,
                format!(
                    "commit index {} is past the log's last durable index {last_index}",
                    state.hard_state.commit
                ),
            ));
        }
        let catching_up = catching_up_path.exists();
        let mut disk = RaftDisk {
            dir,
            log,
            state,
            snapshot_index,
            catching_up,
        };
        disk.state.incarnation += 1;
        write_state(&state_path, &disk.state)?;
        let recovered = RecoveredState {
            incarnation: disk.state.incarnation,
            hard_state: disk.state.hard_state.clone(),
            conf_state: disk.state.conf_state.clone(),
            snapshot,
            entries,
            catching_up,
        };
        Ok((disk, recovered))
    }

    /// Whether the node still owes a catch-up ([`crate::lost_log`]).
    pub fn is_catching_up(&self) -> bool {
        self.catching_up
    }

    /// The node has caught up: the obligation is gone (if this removal is lost in a crash, the
    /// node only catches up once more).
    pub fn caught_up(&mut self) -> Result<(), DiskError> {
        if !self.catching_up {
            return Ok(());
        }
        let path = self.dir.join(CATCHING_UP_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DiskError::io("remove", &path)(e)),
        }
        sync_dir(&self.dir).map_err(DiskError::io("fsync", &self.dir))?;
        self.catching_up = false;
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn incarnation(&self) -> u64 {
        self.state.incarnation
    }

    /// Bytes in the raft log file (bounded by snapshot compaction).
    pub fn log_size_bytes(&self) -> u64 {
        self.log.size_bytes()
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot_index
    }

    /// Makes a `Ready`'s contents durable: a snapshot received from the leader (which replaces
    /// the whole log), then new entries, then the hard state.
    pub fn persist_ready(
        &mut self,
        snapshot: Option<&Snapshot>,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), DiskError> {
        let mut state_dirty = false;
        if let Some(snap) = snapshot {
            let index = snap.get_metadata().index;
            write_snapshot(&self.dir.join("snapshot"), snap)?;
            self.snapshot_index = index;
            // raft-rs drops every held entry when it installs a snapshot; so does the disk.
            self.log.compact_through(u64::MAX)?;
            self.state.conf_state = snap.get_metadata().get_conf_state().clone();
            self.state.hard_state.commit = self.state.hard_state.commit.max(index);
            self.state.hard_state.term = self.state.hard_state.term.max(snap.get_metadata().term);
            state_dirty = true;
        }
        self.log.append(entries)?;
        if let Some(hs) = hard_state {
            self.state.hard_state = hs.clone();
            state_dirty = true;
        }
        if state_dirty {
            write_state(&self.dir.join("state"), &self.state)?;
        }
        Ok(())
    }

    /// Records the conf state (a fresh group's initial voters) durably.
    pub fn persist_conf_state(&mut self, conf_state: &ConfState) -> Result<(), DiskError> {
        if self.state.conf_state != *conf_state {
            self.state.conf_state = conf_state.clone();
            write_state(&self.dir.join("state"), &self.state)?;
        }
        Ok(())
    }

    /// Makes an `Advanced`'s contents durable: the moved commit index / conf state, then a
    /// snapshot this node took, then the log compaction it allows.
    pub fn persist_advanced(
        &mut self,
        hard_state: Option<&HardState>,
        conf_state: Option<&ConfState>,
        snapshot_taken: Option<&Snapshot>,
    ) -> Result<(), DiskError> {
        if hard_state.is_some() || conf_state.is_some() {
            if let Some(hs) = hard_state {
                self.state.hard_state = hs.clone();
            }
            if let Some(cs) = conf_state {
                self.state.conf_state = cs.clone();
            }
            write_state(&self.dir.join("state"), &self.state)?;
        }
        if let Some(snap) = snapshot_taken {
            let index = snap.get_metadata().index;
            write_snapshot(&self.dir.join("snapshot"), snap)?;
            self.snapshot_index = index;
            self.log.compact_through(index)?;
        }
        Ok(())
    }
}
