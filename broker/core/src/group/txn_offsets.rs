//! Offsets committed inside transactions (KIP-98's TxnOffsetCommit, part of
//! [`super::Coordinator`]): a transactional producer's offsets for a group are written to the
//! group's `__consumer_offsets` partition as a transactional batch and held per producer id,
//! apart from the committed offsets, until the transaction's marker reaches that partition —
//! a commit marker makes them the group's committed offsets, an abort marker drops them. A
//! group's committed offsets therefore reflect only committed transactions (issue 18 item 4).
//!
//! Replay sees the same: records of a transactional batch are staged under its producer id and
//! decided by the control batch that follows them in the log. OffsetFetch with
//! `require_stable` (KIP-447) answers UNSTABLE_OFFSET_COMMIT for a partition a transaction holds
//! an undecided offset of, so a consumer taking over does not start from an offset that
//! transaction is about to replace; clients retry. Bounded: a producer's staged
//! offsets per group are capped like a group's offsets ([`OFFSETS_PER_GROUP_MAX`]).

use spool_error_code::ErrorCode;

use super::coordinator::{Coordinator, OFFSETS_PER_GROUP_MAX};
use super::state::Group;
use super::types::{FetchedOffset, OffsetValue};

impl Group {
    /// Stages `offsets` of producer `producer_id`'s open transaction.
    pub(crate) fn stage_txn_offsets(
        &mut self,
        producer_id: i64,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) {
        let staged = self.txn_offsets.entry(producer_id).or_default();
        for (t, p, v) in offsets {
            if staged.len() < OFFSETS_PER_GROUP_MAX || staged.contains_key(&(t.clone(), p)) {
                staged.insert((t, p), v);
            }
        }
    }

    /// Producer `producer_id`'s transaction ended: its staged offsets become committed
    /// (`commit`) or go.
    pub(crate) fn end_txn_offsets(&mut self, producer_id: i64, commit: bool) {
        let Some(staged) = self.txn_offsets.remove(&producer_id) else {
            return;
        };
        if commit {
            for (k, v) in staged {
                if self.offsets.len() < OFFSETS_PER_GROUP_MAX || self.offsets.contains_key(&k) {
                    self.offsets.insert(k, v);
                }
            }
        }
    }

    /// Whether producer transactions hold offsets of this group not decided yet.
    pub fn has_pending_txn_offsets(&self) -> bool {
        !self.txn_offsets.is_empty()
    }

    /// Whether a transaction holds an offset of `topic`/`partition` not decided yet.
    pub fn has_pending_txn_offset(&self, topic: &str, partition: i32) -> bool {
        self.txn_offsets
            .values()
            .any(|staged| staged.contains_key(&(topic.to_string(), partition)))
    }
}

impl Coordinator {
    /// OffsetFetch ([`Coordinator::fetch_offsets`]), each partition with its code: with
    /// `require_stable`, UNSTABLE_OFFSET_COMMIT (and no offset) where a transaction holds an
    /// offset not decided yet.
    pub fn fetch_offsets_stable(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
    ) -> Result<Vec<FetchedOffset>, ErrorCode> {
        let group = self.groups.get(group_id);
        Ok(self
            .fetch_offsets(group_id, topics)?
            .into_iter()
            .map(|(topic, partition, committed)| {
                let unstable = require_stable
                    && group.is_some_and(|g| g.has_pending_txn_offset(&topic, partition));
                FetchedOffset {
                    committed: if unstable { None } else { committed },
                    error: if unstable {
                        ErrorCode::UnstableOffsetCommit
                    } else {
                        ErrorCode::None
                    },
                    topic,
                    partition,
                }
            })
            .collect())
    }

    /// A transaction marker of `producer_id` was written to (or replayed from) offsets
    /// partition `partition`: that producer's staged offsets in the partition's groups are
    /// decided.
    pub fn on_txn_marker(&mut self, partition: i32, producer_id: i64, commit: bool) {
        for g in self
            .groups
            .values_mut()
            .filter(|g| g.partition == partition)
        {
            g.end_txn_offsets(producer_id, commit);
        }
    }
}
