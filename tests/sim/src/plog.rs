//! [`SimLog`]: one replica's simulated partition log — batches with offsets and leader epochs,
//! and an fsync boundary like [`crate::disk`]'s.
//!
//! Owns: the batches (contiguous from offset 0), how many of them are synced, and a generation
//! bumped on every truncation or crash (so checkers know what they verified may have changed).
//! Promises: an append lands exactly at the log end (asserted, the pair of the follower's
//! `check_batches`); a crash that loses data keeps the synced prefix and some of the unsynced
//! batches, the last of which may be torn (dropped, as recovery's CRC check drops a torn batch).
//! Never does: decide what to append or where to truncate (spool-core does), or draw on its own
//! (the world's [`SimRng`] is passed in).

use crate::rng::SimRng;

/// Chance that the last batch surviving a crash is torn.
const TEAR_CHANCE: f64 = 0.3;

/// One batch as the log and the wire carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimBatch {
    pub base_offset: u64,
    pub records: u64,
    /// `partitionLeaderEpoch`: the epoch of the leader that appended it.
    pub leader_epoch: i32,
    /// Unique in the run: what "the same batch" means to the checkers.
    pub id: u64,
    /// `(producer id, producer epoch, first sequence)` of an idempotent producer.
    pub producer: Option<(i64, i16, i32)>,
}

impl SimBatch {
    pub fn last_offset(&self) -> u64 {
        self.base_offset + self.records - 1
    }

    pub fn end_offset(&self) -> u64 {
        self.base_offset + self.records
    }
}

#[derive(Debug, Clone, Default)]
pub struct SimLog {
    batches: Vec<SimBatch>,
    synced: usize,
    generation: u64,
}

impl SimLog {
    pub fn batches(&self) -> &[SimBatch] {
        &self.batches
    }

    pub fn end_offset(&self) -> u64 {
        self.batches.last().map_or(0, SimBatch::end_offset)
    }

    pub fn synced_offset(&self) -> u64 {
        self.synced
            .checked_sub(1)
            .map_or(0, |i| self.batches[i].end_offset())
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn append(&mut self, batch: SimBatch) {
        assert_eq!(
            batch.base_offset,
            self.end_offset(),
            "append off the log end"
        );
        assert!(batch.records > 0);
        self.batches.push(batch);
    }

    /// Removes every batch not wholly below `offset`; returns the new log end (≤ `offset`: a
    /// batch straddling it goes whole).
    pub fn truncate(&mut self, offset: u64) -> u64 {
        let keep = self.batches.partition_point(|b| b.end_offset() <= offset);
        if keep < self.batches.len() {
            self.batches.truncate(keep);
            self.synced = self.synced.min(keep);
            self.generation += 1;
        }
        self.end_offset()
    }

    /// The disk is replaced: nothing is left (a new generation, for the checkers).
    pub fn wipe(&mut self) {
        self.batches.clear();
        self.synced = 0;
        self.generation += 1;
    }

    /// Everything appended so far is durable.
    pub fn sync(&mut self) {
        self.synced = self.batches.len();
    }

    /// Durable through `offset` (an fsync that started when the log ended there completed).
    pub fn synced_through(&mut self, offset: u64) {
        let n = self.batches.partition_point(|b| b.end_offset() <= offset);
        self.synced = self.synced.max(n);
    }

    /// A crash: with `lose_unsynced`, some unsynced batches vanish and the last survivor may be
    /// torn. Whatever survives is what recovery finds, so it counts as synced afterwards.
    pub fn crash(&mut self, lose_unsynced: bool, rng: &mut SimRng) {
        if lose_unsynced && self.synced < self.batches.len() {
            let unsynced = (self.batches.len() - self.synced) as u64;
            let mut keep = self.synced + rng.below(unsynced + 1) as usize;
            if keep > self.synced && rng.chance(TEAR_CHANCE) {
                keep -= 1;
            }
            if keep < self.batches.len() {
                self.batches.truncate(keep);
                self.generation += 1;
            }
        }
        self.sync();
    }

    /// The batch holding `offset`, if any.
    pub fn batch_at(&self, offset: u64) -> Option<&SimBatch> {
        let i = self.batches.partition_point(|b| b.end_offset() <= offset);
        self.batches.get(i).filter(|b| b.base_offset <= offset)
    }

    /// Batches from `offset` (a batch boundary) on, at most `max`, ending at or below `below`.
    pub fn read(&self, offset: u64, below: u64, max: usize) -> Vec<SimBatch> {
        let i = self.batches.partition_point(|b| b.base_offset < offset);
        self.batches[i..]
            .iter()
            .take_while(|b| b.end_offset() <= below)
            .take(max)
            .copied()
            .collect()
    }
}
