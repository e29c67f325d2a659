//! The leader-epoch cache of one partition replica: which leader epoch wrote which range of
//! offsets (Kafka's `LeaderEpochFileCache`, KIP-101 / KIP-279), and its checkpoint file's text.
//!
//! Owns: the entries (epoch, start offset), both strictly increasing; the rules that change them
//! ([`LeaderEpochCache::assign`], [`LeaderEpochCache::truncate_from_end`],
//! [`LeaderEpochCache::truncate_from_start`]); the OffsetForLeaderEpoch lookup
//! ([`LeaderEpochCache::end_offset_for`]); and the `leader-epoch-checkpoint` format (a version
//! line `0`, a count line, then one `epoch start_offset` line per entry).
//!
//! Promises (asserted after every change): epochs and start offsets strictly increase; no epoch is
//! negative. The lookup follows Kafka's rules exactly, including its UNDEFINED answers, because a
//! follower truncates by it: an answer that is too high keeps a divergent suffix, one that is too
//! low throws away committed records.
//!
//! Never does: I/O. The log writes [`LeaderEpochCache::encode`]'s text (atomically, by rename)
//! whenever a change returns "changed", and reads it back with [`LeaderEpochCache::decode`].
//! It also never decides *when* to assign: the leader does at election (epoch, log end), the
//! follower for each appended batch (`follower_state`).
//!
//! `storage/src/epoch.rs` holds an older copy with looser rules (it ignores an older epoch instead
//! of truncating the newer ones, answers a too-new epoch with the latest instead of UNDEFINED);
//! this is the one to keep.

use thiserror::Error;

/// Kafka's `UNDEFINED_EPOCH`: no epoch known.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no end offset known.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
/// The checkpoint format version this code writes and reads.
pub const CHECKPOINT_VERSION: u32 = 0;
/// More entries than this in a checkpoint is a corrupt count line, not a history: one entry per
/// leader change, and retention trims the old ones. Bounds what a bad file can make us allocate.
pub const CHECKPOINT_ENTRIES_MAX: usize = 1 << 20;

/// The first offset written in one leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
}

/// An OffsetForLeaderEpoch answer (and a fetch's diverging epoch): the largest epoch at or below
/// the requested one, and where it ended. Wire-shaped: both are `-1` when undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

impl EpochEndOffset {
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };

    pub fn is_undefined(&self) -> bool {
        self.epoch == UNDEFINED_EPOCH || self.end_offset == UNDEFINED_EPOCH_OFFSET
    }

    /// The end offset, when defined.
    pub fn end(&self) -> Option<u64> {
        u64::try_from(self.end_offset).ok()
    }
}

/// What [`LeaderEpochCache::assign`] did. Anything but `Unchanged` must be checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigned {
    Unchanged,
    Appended,
    /// The new entry replaced `removed` entries that it contradicted (a newer-or-equal epoch, or a
    /// start at or after its own). Kafka logs a warning when this removes more than a same-start
    /// entry: it means the log was not truncated before an older epoch was written.
    Replaced {
        removed: usize,
    },
}

/// Why a checkpoint file was refused. The log treats this as a corrupt file: it rebuilds the
/// cache from the batches' epochs, never guesses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CheckpointError {
    #[error("leader-epoch-checkpoint: line 1: version {0:?}, expected {CHECKPOINT_VERSION}")]
    Version(String),
    #[error("leader-epoch-checkpoint: line 2: count {0:?} is not a number up to {CHECKPOINT_ENTRIES_MAX}")]
    Count(String),
    #[error("leader-epoch-checkpoint: line {line}: {text:?} is not `epoch start_offset`")]
    Malformed { line: usize, text: String },
    #[error("leader-epoch-checkpoint: line {line}: entry {epoch} {start_offset} does not follow the previous one (epochs and offsets must increase)")]
    OutOfOrder {
        line: usize,
        epoch: i32,
        start_offset: u64,
    },
    #[error(
        "leader-epoch-checkpoint: the count line says {expected} entries, the file has {found}"
    )]
    CountMismatch { expected: usize, found: usize },
}

/// One replica's leader-epoch cache (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Where `epoch` started, if the cache has it. The leader's own epoch start decides when a
    /// follower may rejoin the ISR and when ListOffsets may answer (REPLICATION.md).
    pub fn start_offset_of(&self, epoch: i32) -> Option<u64> {
        self.entries
            .binary_search_by_key(&epoch, |e| e.epoch)
            .ok()
            .map(|i| self.entries[i].start_offset)
    }

    /// Records that `epoch` writes from `start_offset` (Kafka's `assign`): nothing changes when
    /// `epoch` is the latest and already starts at or before `start_offset`; otherwise every entry
    /// the new one contradicts (an epoch ≥ `epoch`, or a start ≥ `start_offset`) is removed and
    /// the new one appended.
    ///
    /// Panics on a negative epoch: callers skip batches without one (`follower_state` refuses
    /// them as input before they reach here).
    pub fn assign(&mut self, epoch: i32, start_offset: u64) -> Assigned {
        assert!(epoch >= 0, "leader epoch {epoch} is negative");
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return Assigned::Unchanged;
            }
        }
        let before = self.entries.len();
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        let removed = before - self.entries.len();
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.assert_invariants();
        if removed == 0 {
            Assigned::Appended
        } else {
            Assigned::Replaced { removed }
        }
    }

    /// Kafka's `endOffsetFor`: for OffsetForLeaderEpoch and a fetch's divergence check, the
    /// largest epoch ≤ `requested` and the offset where it ended, given the log end.
    /// - `requested` is UNDEFINED, the cache is empty, or `requested` is newer than every epoch
    ///   here: UNDEFINED (-1, -1);
    /// - `requested` is the latest epoch: (it, `log_end_offset`) — the epoch still being written;
    /// - `requested` is older than the first entry: (`requested`, the first entry's start) — the
    ///   records before it are gone, so the asker resumes from where this log begins;
    /// - otherwise: (the largest epoch ≤ `requested`, the start of the next epoch).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: u64) -> EpochEndOffset {
        if requested == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        let Some(latest) = self.entries.last() else {
            return EpochEndOffset::UNDEFINED;
        };
        if latest.epoch == requested {
            return EpochEndOffset {
                epoch: requested,
                end_offset: to_wire(log_end_offset),
            };
        }
        // The first entry with an epoch above `requested`.
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return EpochEndOffset::UNDEFINED;
        };
        let epoch = if higher == 0 {
            requested
        } else {
            self.entries[higher - 1].epoch
        };
        EpochEndOffset {
            epoch,
            end_offset: to_wire(next.start_offset),
        }
    }

    /// The log was truncated so that `end_offset` is its new end: entries that start at or after
    /// it are removed. Returns how many.
    pub fn truncate_from_end(&mut self, end_offset: u64) -> usize {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let removed = self.entries.len() - keep;
        self.entries.truncate(keep);
        self.assert_invariants();
        removed
    }

    /// Records below `start_offset` were deleted (retention, or a follower starting afresh at the
    /// leader's log start): entries starting at or before it collapse into one, the last of them,
    /// moved to `start_offset`. Returns whether anything changed.
    pub fn truncate_from_start(&mut self, start_offset: u64) -> bool {
        let covered = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if covered == 0 {
            return false;
        }
        let kept_epoch = self.entries[covered - 1].epoch;
        let changed = covered > 1 || self.entries[0].start_offset != start_offset;
        self.entries.drain(..covered - 1);
        self.entries[0] = EpochEntry {
            epoch: kept_epoch,
            start_offset,
        };
        self.assert_invariants();
        changed
    }

    /// The whole log was dropped (a follower that starts again at the leader's log start).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The checkpoint file's text.
    pub fn encode(&self) -> String {
        let mut s = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        s
    }

    /// Reads a checkpoint file's text. Stricter than Kafka's reader, which re-assigns entries and
    /// so silently drops out-of-order ones: here any disorder is a corrupt file.
    pub fn decode(text: &str) -> Result<Self, CheckpointError> {
        let mut lines = text.lines();
        let version = lines.next().unwrap_or("");
        if version.trim() != CHECKPOINT_VERSION.to_string() {
            return Err(CheckpointError::Version(version.to_string()));
        }
        let count_line = lines.next().unwrap_or("");
        let expected: usize = count_line
            .trim()
            .parse()
            .ok()
            .filter(|n| *n <= CHECKPOINT_ENTRIES_MAX)
            .ok_or_else(|| CheckpointError::Count(count_line.to_string()))?;
        let mut entries: Vec<EpochEntry> = Vec::with_capacity(expected.min(1024));
        for (i, text) in lines.enumerate() {
            let line = i + 3;
            if text.trim().is_empty() {
                continue;
            }
            let malformed = || CheckpointError::Malformed {
                line,
                text: text.to_string(),
            };
            let mut parts = text.split_whitespace();
            let epoch: i32 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .filter(|e| *e >= 0)
                .ok_or_else(malformed)?;
            let start_offset: u64 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or_else(malformed)?;
            if parts.next().is_some() {
                return Err(malformed());
            }
            if let Some(prev) = entries.last() {
                if epoch <= prev.epoch || start_offset <= prev.start_offset {
                    return Err(CheckpointError::OutOfOrder {
                        line,
                        epoch,
                        start_offset,
                    });
                }
            }
            if entries.len() == expected {
                return Err(CheckpointError::CountMismatch {
                    expected,
                    found: entries.len() + 1,
                });
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if entries.len() != expected {
            return Err(CheckpointError::CountMismatch {
                expected,
                found: entries.len(),
            });
        }
        let cache = LeaderEpochCache { entries };
        cache.assert_invariants();
        Ok(cache)
    }

    fn assert_invariants(&self) {
        for pair in self.entries.windows(2) {
            assert!(
                pair[0].epoch < pair[1].epoch && pair[0].start_offset < pair[1].start_offset,
                "leader-epoch cache out of order: {:?} then {:?}",
                pair[0],
                pair[1]
            );
        }
        if let Some(first) = self.entries.first() {
            assert!(first.epoch >= 0, "negative epoch {first:?}");
        }
    }
}

/// Offsets above `i64::MAX` do not exist on the wire; the log never gets there.
fn to_wire(offset: u64) -> i64 {
    i64::try_from(offset).expect("offset beyond i64::MAX")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cache(entries: &[(i32, u64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new();
        for &(e, s) in entries {
            c.assign(e, s);
        }
        assert_eq!(c.entries().len(), entries.len());
        c
    }

    fn eo(epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    #[test]
    fn lookups_follow_kafkas_rules() {
        let c = cache(&[(2, 10), (4, 20), (5, 35)]);
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, 50),
            EpochEndOffset::UNDEFINED
        );
        assert_eq!(
            c.end_offset_for(1, 50),
            eo(1, 10),
            "older than the first entry"
        );
        assert_eq!(c.end_offset_for(2, 50), eo(2, 20));
        assert_eq!(
            c.end_offset_for(3, 50),
            eo(2, 20),
            "a gap answers the epoch below it"
        );
        assert_eq!(c.end_offset_for(4, 50), eo(4, 35));
        assert_eq!(
            c.end_offset_for(5, 50),
            eo(5, 50),
            "the latest ends at the log end"
        );
        assert_eq!(
            c.end_offset_for(6, 50),
            EpochEndOffset::UNDEFINED,
            "newer than any"
        );
        assert_eq!(
            LeaderEpochCache::new().end_offset_for(3, 50),
            EpochEndOffset::UNDEFINED
        );
        assert_eq!(c.start_offset_of(4), Some(20));
        assert_eq!(c.start_offset_of(3), None);
    }

    #[test]
    fn assign_keeps_order_and_an_older_epoch_replaces_what_it_contradicts() {
        let mut c = LeaderEpochCache::new();
        assert_eq!(c.assign(1, 0), Assigned::Appended);
        assert_eq!(
            c.assign(1, 5),
            Assigned::Unchanged,
            "same epoch, later start"
        );
        assert_eq!(c.assign(3, 10), Assigned::Appended);
        assert_eq!(
            c.assign(3, 8),
            Assigned::Replaced { removed: 1 },
            "same epoch, earlier start"
        );
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: 8
                }
            ]
        );
        assert_eq!(
            c.assign(4, 8),
            Assigned::Replaced { removed: 1 },
            "same start, newer epoch"
        );
        assert_eq!(
            c.assign(2, 20),
            Assigned::Replaced { removed: 1 },
            "older epoch wins, as Kafka's"
        );
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 2,
                    start_offset: 20
                }
            ]
        );
    }

    #[test]
    fn truncation_from_either_end() {
        let mut c = cache(&[(1, 0), (2, 10), (4, 20)]);
        assert_eq!(c.truncate_from_end(25), 0);
        assert_eq!(c.truncate_from_end(20), 1);
        assert_eq!(c.latest_epoch(), Some(2));
        let mut c = cache(&[(1, 0), (2, 10), (4, 20)]);
        assert!(c.truncate_from_start(15));
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 2,
                    start_offset: 15
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 20
                }
            ]
        );
        assert!(!c.truncate_from_start(15));
        assert!(
            !c.truncate_from_start(3),
            "below the first entry: nothing to drop"
        );
        assert!(c.truncate_from_start(20));
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 4,
                start_offset: 20
            }]
        );
    }

    #[test]
    fn checkpoint_round_trips_and_corrupt_files_say_why() {
        let c = cache(&[(0, 0), (3, 17), (9, 400)]);
        assert_eq!(c.encode(), "0\n3\n0 0\n3 17\n9 400\n");
        assert_eq!(LeaderEpochCache::decode(&c.encode()), Ok(c));
        assert_eq!(
            LeaderEpochCache::decode("0\n0\n"),
            Ok(LeaderEpochCache::new())
        );
        let bad = [
            ("1\n0\n", "version"),
            ("", "version"),
            ("0\nx\n", "count"),
            ("0\n99999999999\n", "count"),
            ("0\n1\n3\n", "not `epoch start_offset`"),
            ("0\n1\n3 4 5\n", "not `epoch start_offset`"),
            ("0\n1\n-1 4\n", "not `epoch start_offset`"),
            ("0\n2\n3 4\n2 9\n", "does not follow"),
            ("0\n2\n3 4\n5 4\n", "does not follow"),
            ("0\n2\n3 4\n", "says 2 entries, the file has 1"),
            ("0\n1\n3 4\n5 9\n", "says 1 entries, the file has 2"),
        ];
        for (text, why) in bad {
            let e = LeaderEpochCache::decode(text).expect_err(text).to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    /// The naive model: a list of (epoch, start) and a linear scan.
    fn naive_end_offset_for(entries: &[(i32, u64)], requested: i32, log_end: u64) -> (i32, i64) {
        if requested < 0 || entries.is_empty() {
            return (-1, -1);
        }
        let latest = entries[entries.len() - 1];
        if latest.0 == requested {
            return (requested, log_end as i64);
        }
        let next = entries.iter().find(|(e, _)| *e > requested);
        let floor = entries.iter().rev().find(|(e, _)| *e <= requested);
        match (floor, next) {
            (_, None) => (-1, -1),
            (None, Some(n)) => (requested, n.1 as i64),
            (Some(f), Some(n)) => (f.0, n.1 as i64),
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Assign(i32, u64),
        TruncateEnd(u64),
        TruncateStart(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0i32..30, 0u64..200).prop_map(|(e, s)| Op::Assign(e, s)),
            1 => (0u64..200).prop_map(Op::TruncateEnd),
            1 => (0u64..200).prop_map(Op::TruncateStart),
        ]
    }

    proptest! {
        #[test]
        fn the_cache_stays_monotonic_and_agrees_with_a_naive_model(
            ops in proptest::collection::vec(op(), 0..60),
            queries in proptest::collection::vec((-1i32..32, 0u64..300), 1..20),
        ) {
            let mut c = LeaderEpochCache::new();
            let mut model: Vec<(i32, u64)> = Vec::new();
            for op in ops {
                match op {
                    Op::Assign(e, s) => {
                        c.assign(e, s);
                        let unchanged = model.last().is_some_and(|l| l.0 == e && l.1 <= s);
                        if !unchanged {
                            model.retain(|(me, ms)| *me < e && *ms < s);
                            model.push((e, s));
                        }
                    }
                    Op::TruncateEnd(o) => {
                        c.truncate_from_end(o);
                        model.retain(|(_, s)| *s < o);
                    }
                    Op::TruncateStart(o) => {
                        c.truncate_from_start(o);
                        if let Some(last_covered) = model.iter().rev().find(|(_, s)| *s <= o).copied() {
                            model.retain(|(_, s)| *s > o);
                            model.insert(0, (last_covered.0, o));
                        }
                    }
                }
                let got: Vec<(i32, u64)> = c.entries().iter().map(|e| (e.epoch, e.start_offset)).collect();
                prop_assert_eq!(&got, &model);
                for w in got.windows(2) {
                    prop_assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1);
                }
                prop_assert_eq!(LeaderEpochCache::decode(&c.encode()), Ok(c.clone()));
            }
            for (requested, extra) in queries {
                let log_end = c.latest().map_or(0, |l| l.start_offset) + extra;
                let got = c.end_offset_for(requested, log_end);
                prop_assert_eq!((got.epoch, got.end_offset), naive_end_offset_for(&model, requested, log_end));
            }
        }
    }
}
