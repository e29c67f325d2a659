//! Loading and dropping a core's share of `__consumer_offsets` (part of
//! [`super::Coordinator`]): replaying a partition's records in log order into groups and
//! offsets, serving its groups once the replay is done, forgetting them when the partition goes,
//! and a deleted topic's offsets (tombstoned).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::coordinator::{Coordinator, Load, Pending, GROUPS_PER_CORE_MAX, OFFSETS_PER_GROUP_MAX};
use super::records::{self, RecordKey, RecordValue};
use super::state::{Group, GroupEffect};
use super::types::{Action, GroupState};
use super::GROUP_ID_BYTES_MAX;
use spool_error_code::ErrorCode;

impl Coordinator {
    /// A core opened offsets partition `partition`: replay follows; requests wait.
    pub fn begin_load(&mut self, partition: i32) {
        self.partitions.insert(partition, Load::Loading);
        self.groups.retain(|_, g| g.partition != partition);
    }

    /// Whether `partition` is being replayed.
    pub fn is_loading(&self, partition: i32) -> bool {
        self.partitions.get(&partition) == Some(&Load::Loading)
    }

    /// One replayed record (key, value; `None` = tombstone), in log order; `txn_producer` is
    /// the producer id of a transactional batch's record (a TxnOffsetCommit, staged until its
    /// marker: `super::txn_offsets`). An undecodable record is skipped (returned as an error
    /// for the driver to log).
    pub fn load_record(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        txn_producer: Option<i64>,
    ) -> Result<(), records::RecordError> {
        let (k, v) = records::decode(key, value)?;
        let group_id = match &k {
            RecordKey::Offset { group, .. } | RecordKey::Group { group } => group.clone(),
        };
        if group_id.is_empty() || group_id.len() > GROUP_ID_BYTES_MAX {
            return Err(records::RecordError::Malformed("group id"));
        }
        if !self.groups.contains_key(&group_id) && self.groups.len() >= GROUPS_PER_CORE_MAX {
            return Err(records::RecordError::Malformed("too many groups"));
        }
        let g = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(|| Group::new(group_id, partition));
        match (k, v) {
            (
                RecordKey::Offset {
                    topic, partition, ..
                },
                Some(RecordValue::Offset(o)),
            ) if txn_producer.is_some() => {
                g.stage_txn_offsets(txn_producer.unwrap_or(-1), vec![(topic, partition, o)]);
            }
            (
                RecordKey::Offset {
                    topic, partition, ..
                },
                Some(RecordValue::Offset(o)),
            ) => {
                if g.offsets.len() < OFFSETS_PER_GROUP_MAX
                    || g.offsets.contains_key(&(topic.clone(), partition))
                {
                    g.offsets.insert((topic, partition), o);
                }
            }
            (
                RecordKey::Offset {
                    topic, partition, ..
                },
                None,
            ) => {
                g.offsets.remove(&(topic, partition));
            }
            (RecordKey::Group { .. }, Some(RecordValue::Group(v))) => g.restore(v),
            (RecordKey::Group { .. }, None) => {
                let offsets = std::mem::take(&mut g.offsets);
                let txn_offsets = std::mem::take(&mut g.txn_offsets);
                *g = Group::new(g.id.clone(), g.partition);
                g.offsets = offsets;
                g.txn_offsets = txn_offsets;
            }
            _ => {
                return Err(records::RecordError::Malformed(
                    "key and value kinds differ",
                ))
            }
        }
        Ok(())
    }

    /// Replay of `partition` is done: its groups are served, restored members' sessions start.
    pub fn finish_load(&mut self, partition: i32, now_ms: u64) {
        if self.partitions.get(&partition) != Some(&Load::Loading) {
            return;
        }
        self.partitions.insert(partition, Load::Active);
        for g in self
            .groups
            .values_mut()
            .filter(|g| g.partition == partition)
        {
            g.start_sessions(now_ms);
        }
        self.groups
            .retain(|_, g| !(g.state() == GroupState::Empty && g.offsets.is_empty()));
    }

    /// The partition left this core (deleted): its groups go, waiters get NOT_COORDINATOR.
    pub fn unload(&mut self, partition: i32) -> Vec<Action> {
        self.partitions.remove(&partition);
        let mut out = Vec::new();
        let ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .map(|g| g.id.clone())
            .collect();
        for id in ids {
            if let Some(mut g) = self.groups.remove(&id) {
                let mut fx = Vec::new();
                g.abandon_waiters(ErrorCode::NotCoordinator, &mut fx);
                for e in fx {
                    if let GroupEffect::Respond(r, resp) = e {
                        out.push(Action::Respond(r, resp));
                    }
                }
            }
        }
        out
    }

    /// A topic was deleted: every group drops its offsets and tombstones them.
    pub fn topic_deleted(&mut self, topic: &str) -> Vec<Action> {
        let mut by_partition: BTreeMap<i32, Vec<(Bytes, Option<Bytes>)>> = BTreeMap::new();
        for g in self.groups.values_mut() {
            let gone: Vec<(String, i32)> = g
                .offsets
                .keys()
                .filter(|(t, _)| t == topic)
                .cloned()
                .collect();
            for (t, p) in gone {
                g.offsets.remove(&(t.clone(), p));
                let key = records::encode_key(&RecordKey::Offset {
                    group: g.id.clone(),
                    topic: t,
                    partition: p,
                });
                by_partition
                    .entry(g.partition)
                    .or_default()
                    .push((key, None));
            }
        }
        let mut out = Vec::new();
        for (partition, records) in by_partition {
            let token = self.token(Pending::Nothing);
            out.push(Action::Persist {
                token,
                partition,
                records,
            });
        }
        out
    }
}
