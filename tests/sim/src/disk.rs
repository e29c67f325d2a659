//! [`SimDisk`]: one controller node's `__raft/` directory, in memory, with an explicit fsync
//! boundary.
//!
//! Owns: the durable state (what survives any crash) and the ordered list of writes made since
//! the last sync. The writes are the ones spool-raft's `RaftDisk` makes for the same calls: a
//! received snapshot (replacing the log), appended entries (overwriting a suffix from their
//! first index), a hard state, a conf state, a snapshot this node took (then compacting the log
//! through it).
//! Promises:
//! - [`SimDisk::sync`] makes every write so far durable, in order;
//! - [`SimDisk::crash`] with `lose_unsynced = false` (a process crash: the page cache survives)
//!   keeps every write; with `true` (power loss) it keeps the durable state plus a random prefix
//!   of the unsynced writes, and may *tear* the first write it drops when that write appended
//!   several entries (a prefix of them survives, as the real log's CRC-framed recovery would cut
//!   a torn tail). The state and snapshot files are replaced atomically, so they never tear;
//! - [`SimDisk::recover`] bumps the incarnation durably (as `RaftDisk::open` does) and returns
//!   the [`RecoveredState`] `MetadataRaft::new` takes, or the corruption `RaftDisk::open` would
//!   refuse to start with.
//!
//! Never does: decide when to write or sync (the driver, [`crate::node`], does), or touch a real
//! file.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use spool_raft::RecoveredState;

use crate::rng::SimRng;

#[derive(Debug, Clone)]
pub enum DiskWrite {
    /// A snapshot received from the leader: replaces the log.
    InstallSnapshot(Snapshot),
    Append(Vec<Entry>),
    HardState(HardState),
    ConfState(ConfState),
    /// A snapshot this node took: written, then the log compacted through its index.
    SnapshotTaken(Snapshot),
}

#[derive(Debug, Clone, Default)]
struct DiskState {
    incarnation: u64,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Option<Snapshot>,
    entries: Vec<Entry>,
    /// `RaftDisk`'s `catching-up` file: made at a fresh open, removed once caught up.
    catching_up: bool,
}

impl DiskState {
    fn apply(&mut self, write: &DiskWrite) {
        match write {
            DiskWrite::InstallSnapshot(snap) => {
                let meta = snap.get_metadata();
                self.entries.clear();
                self.conf_state = meta.get_conf_state().clone();
                self.hard_state.commit = self.hard_state.commit.max(meta.index);
                self.hard_state.term = self.hard_state.term.max(meta.term);
                self.snapshot = Some(snap.clone());
            }
            DiskWrite::Append(entries) => {
                if let Some(first) = entries.first() {
                    self.entries.retain(|e| e.index < first.index);
                    self.entries.extend(entries.iter().cloned());
                }
            }
            DiskWrite::HardState(hs) => self.hard_state = hs.clone(),
            DiskWrite::ConfState(cs) => self.conf_state = cs.clone(),
            DiskWrite::SnapshotTaken(snap) => {
                let index = snap.get_metadata().index;
                self.entries.retain(|e| e.index > index);
                self.snapshot = Some(snap.clone());
            }
        }
    }

    fn last_index(&self) -> u64 {
        self.entries.last().map_or_else(
            || self.snapshot.as_ref().map_or(0, |s| s.get_metadata().index),
            |e| e.index,
        )
    }
}

/// What a crash did to the unsynced writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CrashLoss {
    pub unsynced_writes: usize,
    pub kept_writes: usize,
    /// Entries that survived of the torn write (`None`: nothing torn).
    pub torn_kept_entries: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct SimDisk {
    durable: DiskState,
    unsynced: Vec<DiskWrite>,
    syncs: u64,
}

impl SimDisk {
    pub fn write(&mut self, write: DiskWrite) {
        self.unsynced.push(write);
    }

    pub fn sync(&mut self) {
        for w in std::mem::take(&mut self.unsynced) {
            self.durable.apply(&w);
        }
        self.syncs += 1;
    }

    pub fn unsynced_writes(&self) -> usize {
        self.unsynced.len()
    }

    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// The node died. See the module docs for what survives.
    pub fn crash(&mut self, lose_unsynced: bool, rng: &mut SimRng) -> CrashLoss {
        let unsynced = std::mem::take(&mut self.unsynced);
        let n = unsynced.len();
        if !lose_unsynced {
            for w in &unsynced {
                self.durable.apply(w);
            }
            return CrashLoss {
                unsynced_writes: n,
                kept_writes: n,
                torn_kept_entries: None,
            };
        }
        let kept = rng.below(n as u64 + 1) as usize;
        for w in &unsynced[..kept] {
            self.durable.apply(w);
        }
        let mut torn_kept_entries = None;
        if let Some(DiskWrite::Append(entries)) = unsynced.get(kept) {
            if entries.len() > 1 && rng.chance(0.5) {
                let survive = rng.below(entries.len() as u64) as usize;
                self.durable
                    .apply(&DiskWrite::Append(entries[..survive].to_vec()));
                torn_kept_entries = Some(survive);
            }
        }
        CrashLoss {
            unsynced_writes: n,
            kept_writes: kept,
            torn_kept_entries,
        }
    }

    /// Opens the durable state after a crash or at first start: bumps the incarnation durably
    /// and returns what `MetadataRaft::new` takes. `Err`: what `RaftDisk::open` would refuse.
    pub fn recover(&mut self) -> Result<RecoveredState, String> {
        assert!(self.unsynced.is_empty(), "recover() with writes pending");
        let d = &self.durable;
        let snapshot_index = d.snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
        if let Some(first) = d.entries.first() {
            if d.snapshot.is_some() && first.index != snapshot_index + 1 {
                return Err(format!(
                    "log starts at index {} but the snapshot ends at {snapshot_index}",
                    first.index
                ));
            }
        }
        if d.hard_state.commit > d.last_index() {
            return Err(format!(
                "commit index {} is past the log's last durable index {}",
                d.hard_state.commit,
                d.last_index()
            ));
        }
        let fresh = d.entries.is_empty()
            && d.snapshot.is_none()
            && d.hard_state == HardState::default()
            && d.conf_state == ConfState::default();
        if fresh {
            self.durable.catching_up = true;
        }
        self.durable.incarnation += 1;
        let d = &self.durable;
        Ok(RecoveredState {
            incarnation: d.incarnation,
            hard_state: d.hard_state.clone(),
            conf_state: d.conf_state.clone(),
            snapshot: d.snapshot.clone(),
            entries: d.entries.clone(),
            catching_up: d.catching_up,
        })
    }

    /// Whether the `catching-up` file exists.
    pub fn is_catching_up(&self) -> bool {
        self.durable.catching_up
    }

    /// Removes the `catching-up` file (durably, as `RaftDisk::caught_up` does).
    pub fn caught_up(&mut self) {
        self.durable.catching_up = false;
    }

    /// The disk is replaced (a wiped data dir): everything is gone but the incarnation count,
    /// which stands for the fresh random incarnation a real node draws, so it still never
    /// repeats.
    pub fn wipe(&mut self) {
        self.unsynced.clear();
        self.durable = DiskState {
            incarnation: self.durable.incarnation,
            ..DiskState::default()
        };
    }

    /// The durable conf state (the driver writes the initial voters once, as `Controller` does).
    pub fn durable_conf_state(&self) -> &ConfState {
        &self.durable.conf_state
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

    fn hs(term: u64, vote: u64, commit: u64) -> HardState {
        HardState {
            term,
            vote,
            commit,
            ..Default::default()
        }
    }

    #[test]
    fn synced_writes_survive_power_loss_and_unsynced_ones_may_not() {
        let mut disk = SimDisk::default();
        disk.write(DiskWrite::Append(vec![entry(1, 1), entry(2, 1)]));
        disk.write(DiskWrite::HardState(hs(1, 1, 2)));
        disk.sync();
        disk.write(DiskWrite::Append(vec![entry(3, 2)]));
        disk.write(DiskWrite::HardState(hs(2, 3, 2)));
        // Seed 0 may keep any prefix; over many seeds both "all lost" and "kept" happen.
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let mut d = disk.clone();
            let loss = d.crash(true, &mut SimRng::new(seed));
            let r = d.recover().expect("consistent");
            assert!(r.entries.len() >= 2 && r.hard_state.term >= 1);
            assert_eq!(r.incarnation, 1);
            outcomes.insert((loss.kept_writes, r.entries.len(), r.hard_state.term));
        }
        assert!(outcomes.contains(&(0, 2, 1)) && outcomes.contains(&(2, 3, 2)));
        let mut d = disk.clone();
        d.crash(false, &mut SimRng::new(0));
        assert_eq!(d.recover().unwrap().hard_state.vote, 3);
    }

    #[test]
    fn appends_overwrite_a_suffix_and_snapshots_compact() {
        let mut disk = SimDisk::default();
        disk.write(DiskWrite::Append(vec![
            entry(1, 1),
            entry(2, 1),
            entry(3, 1),
        ]));
        disk.write(DiskWrite::Append(vec![entry(2, 2)]));
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 1;
        snap.mut_metadata().term = 1;
        disk.write(DiskWrite::SnapshotTaken(snap));
        disk.sync();
        let r = disk.recover().unwrap();
        let got: Vec<_> = r.entries.iter().map(|e| (e.index, e.term)).collect();
        assert_eq!(got, [(2, 2)]);
        assert_eq!(r.snapshot.unwrap().get_metadata().index, 1);
    }
}
