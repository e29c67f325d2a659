//! [`LogCache`]: raft-rs's [`Storage`] for the metadata group, as an in-memory mirror of what is
//! durable in `<data_dir>/__raft/`.
//!
//! Owns: the hard state, conf state, latest snapshot and the log entries after it, exactly as the
//! disk layer ([`crate::disk`]) holds them. The sans-IO [`crate::MetadataRaft`] updates this
//! mirror only *after* the driver has made the same change durable, so raft-rs never reads an
//! entry from here that a crash could lose. Entries are kept in memory because the log is bounded
//! by snapshot compaction (`snapshot_every_entries`) and metadata entries are small.
//! Promises: never panics on an out-of-range request (raft-rs gets `Compacted`/`Unavailable`);
//! invariant: `entries[i].index == snapshot index + 1 + i`.
//! Never does: I/O.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LogCacheError {
    #[error("append at index {first} leaves a gap or rewrites compacted entries (log holds {log_first}..={log_last})")]
    NotContiguous {
        first: u64,
        log_first: u64,
        log_last: u64,
    },
    #[error("snapshot at index {index} is older than the one held ({held})")]
    SnapshotOutOfDate { index: u64, held: u64 },
    #[error("snapshot at index {index} is past the log's last index {last}")]
    SnapshotPastLog { index: u64, last: u64 },
}

/// The in-memory raft log mirror.
#[derive(Debug, Clone, Default)]
pub struct LogCache {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    entries: Vec<Entry>,
}

impl LogCache {
    /// Builds the mirror from what the disk recovered. Entries at or below the snapshot index are
    /// dropped; the rest must be contiguous from `snapshot index + 1`.
    pub fn new(
        hard_state: HardState,
        conf_state: ConfState,
        snapshot: Option<Snapshot>,
        entries: Vec<Entry>,
    ) -> Result<Self, LogCacheError> {
        let mut cache = LogCache {
            hard_state,
            conf_state,
            snapshot: snapshot.unwrap_or_default(),
            entries: Vec::new(),
        };
        let snap_index = cache.snapshot_index();
        let kept: Vec<Entry> = entries
            .into_iter()
            .filter(|e| e.index > snap_index)
            .collect();
        cache.append(&kept)?;
        if cache.hard_state.commit < snap_index {
            cache.hard_state.commit = snap_index;
        }
        Ok(cache)
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    pub fn snapshot_term(&self) -> u64 {
        self.snapshot.get_metadata().term
    }

    /// The latest snapshot (empty, index 0, when none was taken yet).
    pub fn latest_snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn first(&self) -> u64 {
        self.snapshot_index() + 1
    }

    pub fn last(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot_index(), |e| e.index)
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// Entries `(low, high]`-style helper: the held entries with `from <= index <= to`.
    pub fn entries_between(&self, from: u64, to: u64) -> &[Entry] {
        let first = self.first();
        let lo = from.max(first).saturating_sub(first) as usize;
        let hi = (to.saturating_add(1).min(self.last() + 1)).saturating_sub(first) as usize;
        self.entries.get(lo..hi.max(lo)).unwrap_or(&[])
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.conf_state = cs;
    }

    /// Appends entries, replacing any held entries at or after `entries[0].index` (raft's
    /// conflict resolution on a follower).
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), LogCacheError> {
        let Some(head) = entries.first() else {
            return Ok(());
        };
        let (first, last) = (self.first(), self.last());
        let contiguous = entries.windows(2).all(|w| w[1].index == w[0].index + 1);
        if head.index < first || head.index > last + 1 || !contiguous {
            return Err(LogCacheError::NotContiguous {
                first: head.index,
                log_first: first,
                log_last: last,
            });
        }
        self.entries.truncate((head.index - first) as usize);
        self.entries.extend_from_slice(entries);
        Ok(())
    }

    /// Installs a snapshot received from the leader: everything before it is replaced, and all
    /// held entries are dropped (as raft-rs's own `MemStorage` does).
    pub fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), LogCacheError> {
        let index = snapshot.get_metadata().index;
        if index < self.snapshot_index() {
            return Err(LogCacheError::SnapshotOutOfDate {
                index,
                held: self.snapshot_index(),
            });
        }
        self.hard_state.term = self.hard_state.term.max(snapshot.get_metadata().term);
        self.hard_state.commit = index;
        self.conf_state = snapshot.get_metadata().get_conf_state().clone();
        self.entries.clear();
        self.snapshot = snapshot;
        Ok(())
    }

    /// Records a snapshot this node took of its own applied state and drops the entries it
    /// covers (log compaction).
    pub fn compact_to_snapshot(&mut self, snapshot: Snapshot) -> Result<(), LogCacheError> {
        let index = snapshot.get_metadata().index;
        if index < self.snapshot_index() {
            return Err(LogCacheError::SnapshotOutOfDate {
                index,
                held: self.snapshot_index(),
            });
        }
        if index > self.last() {
            return Err(LogCacheError::SnapshotPastLog {
                index,
                last: self.last(),
            });
        }
        let drop = (index + 1 - self.first()) as usize;
        self.entries.drain(..drop.min(self.entries.len()));
        self.snapshot = snapshot;
        Ok(())
    }
}

impl Storage for LogCache {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let first = self.first();
        let mut out = self.entries[(low - first) as usize..(high - first) as usize].to_vec();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snapshot_index() {
            return Ok(self.snapshot_term());
        }
        if idx < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        // A snapshot taken before `to` joined the configuration would be refused by it (raft-rs
        // restores only a snapshot whose configuration names the node); the node takes a fresh
        // one right after every membership change, so this is only until then.
        let cs = self.snapshot.get_metadata().get_conf_state();
        let names_to = cs.voters.contains(&to) || cs.learners.contains(&to);
        if self.snapshot_index() < request_index || !names_to {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            ..Default::default()
        }
    }

    #[test]
    fn append_truncates_conflicts_and_refuses_gaps() {
        let mut c = LogCache::default();
        c.append(&[entry(1, 1), entry(2, 1), entry(3, 1)]).unwrap();
        c.append(&[entry(2, 2)]).unwrap();
        assert_eq!(c.last(), 2);
        assert_eq!(c.term(2), Ok(2));
        assert!(c.append(&[entry(5, 2)]).is_err());
        assert_eq!(
            c.entries(1, 9, None, GetEntriesContext::empty(false)),
            Err(raft::Error::Store(StorageError::Unavailable))
        );
    }

    #[test]
    fn compaction_keeps_entries_after_the_snapshot() {
        let mut c = LogCache::default();
        c.append(&[entry(1, 1), entry(2, 1), entry(3, 2)]).unwrap();
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 2;
        snap.mut_metadata().term = 1;
        c.compact_to_snapshot(snap).unwrap();
        assert_eq!(c.first(), 3);
        assert_eq!(c.last(), 3);
        assert_eq!(c.term(2), Ok(1));
        assert_eq!(c.term(1), Err(raft::Error::Store(StorageError::Compacted)));
        assert_eq!(c.entries_between(0, 10).len(), 1);
    }
}
