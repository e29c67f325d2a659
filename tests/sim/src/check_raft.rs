//! Raft's own safety properties, checked against the real `MetadataRaft` of every node.
//!
//! Owns: the ghost state the checks need and no node keeps — the leader seen in each term, the
//! content of every `(index, term)` ever written anywhere, the one committed history of the
//! cluster, and a shadow of each node's persisted log (raft compacts the real one at snapshots,
//! the shadow keeps everything past the last snapshot the node *installed*).
//! Promises (each a named [`Violation`]):
//! - `election-safety`: at most one leader per term;
//! - `log-matching`: every entry written at the same `(index, term)`, on any node, has the same
//!   content;
//! - `committed-never-lost`: every node's committed prefix (entries at or below its commit
//!   index) agrees with the cluster's committed history — so nothing once committed anywhere is
//!   replaced, on that node or another, across crashes and restarts;
//! - `leader-completeness`: a node leading term L holds every entry committed in a term
//!   before L.
//!
//! Never does: change a node, or read anything but its public accessors and what the driver
//! reports it wrote.

use std::collections::{BTreeMap, HashMap};

use spool_raft::MetadataRaft;

use crate::node::entry_hash;
use crate::out::Observed;
use crate::violation::{
    Violation, COMMITTED_NEVER_LOST, ELECTION_SAFETY, LEADER_COMPLETENESS, LOG_MATCHING,
};

/// A node's log as persisted, past `floor` (the last installed snapshot or recovered start).
#[derive(Debug, Default, Clone)]
struct Shadow {
    floor: u64,
    /// `(term, content hash)` of indexes `floor + 1 ..`.
    entries: Vec<(u64, u64)>,
    /// Committed indexes already compared with the history.
    checked: u64,
    /// The last term this node was seen leading.
    led_term: u64,
}

impl Shadow {
    fn get(&self, index: u64) -> Option<(u64, u64)> {
        index
            .checked_sub(self.floor + 1)
            .and_then(|i| self.entries.get(i as usize).copied())
    }

    fn last(&self) -> u64 {
        self.floor + self.entries.len() as u64
    }
}

#[derive(Default)]
pub struct RaftChecks {
    leaders_by_term: BTreeMap<u64, u64>,
    written: HashMap<(u64, u64), u64>,
    /// `history[i]` is `(term, hash)` of committed index `i + 1`; `None` where no node that
    /// committed it still held the entry (it was inside a snapshot).
    history: Vec<Option<(u64, u64)>>,
    /// `commit_terms[i]`: an upper bound on the term in which index `i + 1` was committed (the
    /// term of the first node seen committing it, at that moment).
    commit_terms: Vec<u64>,
    shadows: BTreeMap<u64, Shadow>,
}

impl RaftChecks {
    /// A node (re)started: its shadow is what it recovered.
    pub fn on_start(&mut self, node: u64, raft: &MetadataRaft) {
        let log = raft.log();
        let floor = log.snapshot_index();
        let entries = log
            .entries_between(floor + 1, log.last())
            .iter()
            .map(|e| (e.term, entry_hash(e)))
            .collect();
        let led_term = self.shadows.get(&node).map_or(0, |s| s.led_term);
        self.shadows.insert(
            node,
            Shadow {
                floor,
                entries,
                checked: floor,
                led_term,
            },
        );
    }

    /// What a driver wrote.
    pub fn observe(&mut self, o: &Observed) -> Result<(), Violation> {
        match *o {
            Observed::Appended {
                node,
                index,
                term,
                content_hash,
            } => {
                let seen = *self.written.entry((index, term)).or_insert(content_hash);
                if seen != content_hash {
                    return Err(Violation::new(
                        LOG_MATCHING,
                        format!("n{node} wrote index {index} term {term} with other content than another node"),
                    ));
                }
                let s = self.shadows.entry(node).or_default();
                if index <= s.floor {
                    return Ok(());
                }
                let keep = (index - s.floor - 1) as usize;
                s.entries.truncate(keep.min(s.entries.len()));
                if s.entries.len() != keep {
                    return Err(Violation::new(
                        LOG_MATCHING,
                        format!("n{node} wrote index {index} past its log end {}", s.last()),
                    ));
                }
                s.entries.push((term, content_hash));
                s.checked = s.checked.min(index - 1);
            }
            Observed::SnapshotInstalled { node, index } => {
                let s = self.shadows.entry(node).or_default();
                s.floor = index;
                s.entries.clear();
                s.checked = s.checked.max(index);
            }
        }
        Ok(())
    }

    /// Checks one live node after a step.
    pub fn check_node(&mut self, node: u64, raft: &MetadataRaft) -> Result<(), Violation> {
        let term = raft.term();
        if raft.is_leader() {
            let leader = *self.leaders_by_term.entry(term).or_insert(node);
            if leader != node {
                return Err(Violation::new(
                    ELECTION_SAFETY,
                    format!("n{leader} and n{node} both lead term {term}"),
                ));
            }
        }
        let commit = raft.log().hard_state().commit;
        let s = self.shadows.entry(node).or_default();
        let from = s.checked.max(s.floor) + 1;
        for index in from..=commit {
            let Some(mine) = s.get(index) else {
                return Err(Violation::new(
                    COMMITTED_NEVER_LOST,
                    format!(
                        "n{node} commits index {index} it never wrote (log end {})",
                        s.last()
                    ),
                ));
            };
            let slot = (index - 1) as usize;
            if self.history.len() <= slot {
                self.history.resize(slot + 1, None);
                self.commit_terms.resize(slot + 1, u64::MAX);
            }
            match self.history[slot] {
                None => {
                    self.history[slot] = Some(mine);
                    self.commit_terms[slot] = term;
                }
                Some(h) if h == mine => {}
                Some((t, _)) => {
                    return Err(Violation::new(
                        COMMITTED_NEVER_LOST,
                        format!(
                            "n{node} has index {index} committed at term {} but term {t} was committed there before",
                            mine.0
                        ),
                    ))
                }
            }
        }
        s.checked = s.checked.max(commit);
        if raft.is_leader() && s.led_term != term {
            s.led_term = term;
            for (i, h) in self.history.iter().enumerate() {
                let index = i as u64 + 1;
                // Raft promises an entry committed in term T to leaders of terms after T only: a
                // stale candidate may still win an older term once the entry has committed.
                if index <= s.floor || self.commit_terms[i] >= term {
                    continue;
                }
                if let Some(h) = h {
                    if s.get(index) != Some(*h) {
                        return Err(Violation::new(
                            LEADER_COMPLETENESS,
                            format!(
                                "n{node} leads term {term} without committed index {index} (term {}); its log ends at {}",
                                h.0,
                                s.last()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
