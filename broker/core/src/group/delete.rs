//! DeleteGroups and OffsetDelete (part of [`super::Coordinator`]), as Kafka's group coordinator
//! serves them (`GroupCoordinatorShard.deleteGroups`, `OffsetMetadataManager.deleteOffsets`).
//!
//! Both write tombstones to `__consumer_offsets` through the same append path commits use, and
//! answer only once those are durable, so a restart or a new coordinator replays the deletion
//! (the loader drops a tombstoned offset, and a group left with no offsets and no metadata).
//! Promises:
//! - DeleteGroups, per group: GROUP_ID_NOT_FOUND when unknown or already being deleted,
//!   NON_EMPTY_GROUP while it has members, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when
//!   its partition is not served here; otherwise the group and every committed offset go;
//! - while a group's tombstones are in flight it is Dead: joins get COORDINATOR_NOT_AVAILABLE
//!   and commits the same (both retriable), so nothing lands between the tombstones and the
//!   answer; a failed append brings the group back Empty, its offsets untouched, and answers
//!   the append's error;
//! - OffsetDelete: GROUP_ID_NOT_FOUND / NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, or
//!   NON_EMPTY_GROUP for a non-consumer group with members, at the top level; per partition
//!   GROUP_SUBSCRIBED_TO_TOPIC when a member subscribes to its topic, else NONE (a tombstone is
//!   written only where an offset exists or a commit is in flight); memory forgets the offsets
//!   when the append reports, in log order, so a commit queued after the tombstone survives;
//! - an offset whose commit is still in flight is tombstoned too (its record precedes the
//!   tombstone in the log, and its outcome is reported first).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use spool_error_code::ErrorCode;

use super::coordinator::{Coordinator, Pending};
use super::records::{self, RecordKey};
use super::types::{Action, DeleteOffsetsArgs, DeleteWait, GroupState, RequestId, Response};

type Records = Vec<(Bytes, Option<Bytes>)>;

fn offset_tombstone(group: &str, topic: &str, partition: i32) -> (Bytes, Option<Bytes>) {
    let key = records::encode_key(&RecordKey::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    });
    (key, None)
}

impl Coordinator {
    /// The (topic, partition)s of `group_id`'s commits whose appends are in flight.
    fn pending_offsets(&self, group_id: &str) -> BTreeSet<(String, i32)> {
        self.pending
            .values()
            .filter_map(|p| match p {
                Pending::Commit { group, offsets, .. } if group == group_id => Some(offsets),
                _ => None,
            })
            .flatten()
            .map(|(t, p, _)| (t.clone(), *p))
            .collect()
    }

    /// DeleteGroups.
    pub(super) fn delete_groups(
        &mut self,
        id: RequestId,
        groups: Vec<String>,
        now_ms: u64,
        out: &mut Vec<Action>,
    ) {
        let mut decided: HashMap<String, ErrorCode> = HashMap::new();
        let mut results = Vec::with_capacity(groups.len());
        // Per offsets partition: the groups going and their tombstones.
        let mut by_partition: BTreeMap<i32, (Vec<String>, Records)> = BTreeMap::new();
        for gid in groups {
            if let Some(code) = decided.get(&gid) {
                results.push((gid, *code));
                continue;
            }
            let code = match self.check(&gid) {
                // An empty or oversized id names no group (Kafka routes "" and finds nothing).
                Err(ErrorCode::InvalidGroupId) => ErrorCode::GroupIdNotFound,
                Err(c) => c,
                Ok(partition) => {
                    let in_flight = self.pending_offsets(&gid);
                    match self.groups.get_mut(&gid) {
                        None => ErrorCode::GroupIdNotFound,
                        Some(g) => match g.state() {
                            GroupState::Dead => ErrorCode::GroupIdNotFound,
                            GroupState::Empty => {
                                g.set_state(GroupState::Dead, now_ms);
                                let mut all: BTreeSet<(String, i32)> =
                                    g.offsets.keys().cloned().collect();
                                all.extend(in_flight);
                                let entry = by_partition.entry(partition).or_default();
                                for (t, p) in &all {
                                    entry.1.push(offset_tombstone(&gid, t, *p));
                                }
                                let key =
                                    records::encode_key(&RecordKey::Group { group: gid.clone() });
                                entry.1.push((key, None));
                                entry.0.push(gid.clone());
                                ErrorCode::None
                            }
                            _ => ErrorCode::NonEmptyGroup,
                        },
                    }
                }
            };
            decided.insert(gid.clone(), code);
            results.push((gid, code));
        }
        if by_partition.is_empty() {
            return out.push(Action::Respond(id, Response::DeleteGroups(results)));
        }
        let in_flight = by_partition
            .values()
            .flat_map(|(gs, _)| gs.iter().cloned())
            .collect();
        self.deletes.insert(
            id,
            DeleteWait {
                results,
                in_flight,
                remaining: by_partition.len(),
            },
        );
        for (partition, (groups, records)) in by_partition {
            let token = self.token(Pending::DeleteGroups { id, groups });
            out.push(Action::Persist {
                token,
                partition,
                records,
            });
        }
    }

    /// The outcome of one partition's DeleteGroups tombstones.
    pub(super) fn delete_groups_persisted(
        &mut self,
        id: RequestId,
        groups: Vec<String>,
        result: Result<(), ErrorCode>,
        now_ms: u64,
        out: &mut Vec<Action>,
    ) {
        for gid in &groups {
            let dead = self
                .groups
                .get(gid)
                .is_some_and(|g| g.state() == GroupState::Dead);
            match result {
                Ok(()) if dead => {
                    self.groups.remove(gid);
                }
                Err(_) if dead => {
                    if let Some(g) = self.groups.get_mut(gid) {
                        g.set_state(GroupState::Empty, now_ms);
                    }
                }
                _ => {}
            }
        }
        let Some(w) = self.deletes.get_mut(&id) else {
            return;
        };
        for gid in &groups {
            w.in_flight.remove(gid);
            if let Err(code) = result {
                for r in w.results.iter_mut().filter(|r| &r.0 == gid) {
                    r.1 = code;
                }
            }
        }
        w.remaining = w.remaining.saturating_sub(1);
        if w.remaining == 0 {
            if let Some(w) = self.deletes.remove(&id) {
                out.push(Action::Respond(id, Response::DeleteGroups(w.results)));
            }
        }
    }

    /// OffsetDelete.
    pub(super) fn delete_offsets(
        &mut self,
        id: RequestId,
        a: DeleteOffsetsArgs,
        out: &mut Vec<Action>,
    ) {
        let refuse = |out: &mut Vec<Action>, code: ErrorCode| {
            out.push(Action::Respond(
                id,
                Response::DeleteOffsets(code, Vec::new()),
            ))
        };
        let partition = match self.check(&a.group_id) {
            Ok(p) => p,
            Err(c) => return refuse(out, c),
        };
        let in_flight = self.pending_offsets(&a.group_id);
        let Some(g) = self.groups.get(&a.group_id) else {
            return refuse(out, ErrorCode::GroupIdNotFound);
        };
        match g.state() {
            GroupState::Dead => return refuse(out, ErrorCode::GroupIdNotFound),
            GroupState::Empty => {}
            _ if g.protocol_type() != Some(super::subscription::CONSUMER_PROTOCOL_TYPE) => {
                return refuse(out, ErrorCode::NonEmptyGroup)
            }
            _ => {}
        }
        let subscribed = g.subscribed_topics();
        let mut results = Vec::with_capacity(a.partitions.len());
        let mut gone: BTreeSet<(String, i32)> = BTreeSet::new();
        for (topic, p) in a.partitions {
            let code = if g.is_subscribed_to(subscribed.as_ref(), &topic) {
                ErrorCode::GroupSubscribedToTopic
            } else {
                let key = (topic.clone(), p);
                if g.offsets.contains_key(&key) || in_flight.contains(&key) {
                    gone.insert(key);
                }
                ErrorCode::None
            };
            results.push((topic, p, code));
        }
        if gone.is_empty() {
            return out.push(Action::Respond(
                id,
                Response::DeleteOffsets(ErrorCode::None, results),
            ));
        }
        let records = gone
            .iter()
            .map(|(t, p)| offset_tombstone(&a.group_id, t, *p))
            .collect();
        let token = self.token(Pending::DeleteOffsets {
            id,
            group: a.group_id,
            results,
            partitions: gone.into_iter().collect(),
        });
        out.push(Action::Persist {
            token,
            partition,
            records,
        });
    }

    /// The outcome of OffsetDelete's tombstones: memory forgets the offsets now, in log order.
    pub(super) fn delete_offsets_persisted(
        &mut self,
        id: RequestId,
        group: String,
        results: Vec<(String, i32, ErrorCode)>,
        partitions: Vec<(String, i32)>,
        result: Result<(), ErrorCode>,
        out: &mut Vec<Action>,
    ) {
        let answer = match result {
            Ok(()) => {
                if let Some(g) = self.groups.get_mut(&group) {
                    for key in &partitions {
                        g.offsets.remove(key);
                    }
                }
                Response::DeleteOffsets(ErrorCode::None, results)
            }
            Err(code) => Response::DeleteOffsets(code, Vec::new()),
        };
        out.push(Action::Respond(id, answer));
    }

    /// Shutdown: every DeleteGroups still waiting is answered, COORDINATOR_NOT_AVAILABLE for
    /// the groups whose tombstones are in flight.
    pub(super) fn abandon_deletes(&mut self, out: &mut Vec<Action>) {
        for (id, w) in std::mem::take(&mut self.deletes) {
            let results = w
                .results
                .into_iter()
                .map(|(g, c)| {
                    let c = if w.in_flight.contains(&g) {
                        ErrorCode::CoordinatorNotAvailable
                    } else {
                        c
                    };
                    (g, c)
                })
                .collect();
            out.push(Action::Respond(id, Response::DeleteGroups(results)));
        }
    }
}
