//! One core's group coordinator, sans-IO: the groups whose `__consumer_offsets` partitions this
//! core owns, their committed offsets, and the appends in flight.
//!
//! Inputs ([`Input`], [`Coordinator::tick`], [`Coordinator::persisted`], the replay calls) carry
//! `now_ms`; outputs are [`Action`]s: answer request N, or append records to an offsets partition
//! and report back. Promises:
//! - a commit is answered, and its offsets become visible to OffsetFetch, only after its records
//!   were appended durably; a failed append changes nothing and answers an error;
//! - a group's requests are refused with NOT_COORDINATOR when its partition is not on this core,
//!   and COORDINATOR_LOAD_IN_PROGRESS while that partition is being replayed;
//! - the driver must report appends in the order it got them (it appends them one at a time), so
//!   memory and log agree on the newest record per key.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use spool_error_code::ErrorCode;

use super::records::{self, RecordKey};
use super::state::{Group, GroupEffect};
use super::types::*;
use super::{coordinator_partition, GROUP_ID_BYTES_MAX};

/// Groups one core coordinates.
pub const GROUPS_PER_CORE_MAX: usize = 100_000;
/// Partitions one group may hold committed offsets for.
pub const OFFSETS_PER_GROUP_MAX: usize = 100_000;
/// How long an empty group without committed offsets is kept before it is dropped (so a group
/// that empties for a moment keeps its generation count).
pub const EMPTY_GROUP_RETENTION_MS: u64 = 600_000;
/// Kafka's `offsets.retention.minutes` (7 days): an empty group's offsets go this long after the
/// group emptied or the offset was committed, whichever is later.
pub const OFFSETS_RETENTION_MS: u64 = 7 * 24 * 3_600_000;
/// Kafka's `offset.metadata.max.bytes`.
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;
/// Protocols one member may offer in a JoinGroup.
pub const PROTOCOLS_PER_MEMBER_MAX: usize = 32;
/// Longest protocol type, protocol name, client id or client host a member may give.
pub const NAME_BYTES_MAX: usize = 1024;
/// Kafka's limit on `group.instance.id` (and spool's on member ids it is given).
pub const INSTANCE_ID_BYTES_MAX: usize = 249;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Load {
    Loading,
    Active,
}

#[derive(Debug)]
pub(super) enum Pending {
    Commit {
        id: RequestId,
        group: String,
        results: Vec<(String, i32, ErrorCode)>,
        offsets: Vec<(String, i32, OffsetValue)>,
        /// A TxnOffsetCommit's producer id: the offsets wait for its marker.
        producer: Option<i64>,
    },
    Group {
        group: String,
        after_sync: Option<i32>,
    },
    /// One offsets partition's share of DeleteGroups request `id` (`super::delete`).
    DeleteGroups {
        id: RequestId,
        groups: Vec<String>,
    },
    /// OffsetDelete tombstones for `partitions` of `group` (`super::delete`).
    DeleteOffsets {
        id: RequestId,
        group: String,
        results: Vec<(String, i32, ErrorCode)>,
        partitions: Vec<(String, i32)>,
    },
    Nothing,
}

#[derive(Debug)]
pub struct Coordinator {
    config: CoordinatorConfig,
    pub(super) groups: HashMap<String, Group>,
    pub(super) partitions: HashMap<i32, Load>,
    pub(super) pending: BTreeMap<PersistToken, Pending>,
    /// DeleteGroups requests waiting on their appends.
    pub(super) deletes: HashMap<RequestId, DeleteWait>,
    next_token: PersistToken,
    member_seed: u64,
    member_seq: u64,
}

/// splitmix64: spreads a counter into member-id suffixes that look random.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Removes an empty group's offsets past [`OFFSETS_RETENTION_MS`]; returns their tombstones.
fn expire_offsets(g: &mut Group, now_ms: u64) -> Vec<(Bytes, Option<Bytes>)> {
    let since = g.state_timestamp_ms();
    let gone: Vec<(String, i32)> = g
        .offsets
        .iter()
        .filter(|(_, v)| {
            let last = since.max(u64::try_from(v.commit_timestamp_ms).unwrap_or(0));
            now_ms >= last.saturating_add(OFFSETS_RETENTION_MS)
        })
        .map(|(k, _)| k.clone())
        .collect();
    let mut tombstones = Vec::with_capacity(gone.len());
    for (topic, partition) in gone {
        g.offsets.remove(&(topic.clone(), partition));
        let key = records::encode_key(&RecordKey::Offset {
            group: g.id.clone(),
            topic,
            partition,
        });
        tombstones.push((key, None));
    }
    tombstones
}

impl Coordinator {
    /// `member_seed` makes member ids differ across cores and restarts (the driver passes the
    /// start time and core id).
    pub fn new(config: CoordinatorConfig, member_seed: u64) -> Self {
        Self {
            config,
            groups: HashMap::new(),
            partitions: HashMap::new(),
            pending: BTreeMap::new(),
            deletes: HashMap::new(),
            next_token: 1,
            member_seed,
            member_seq: 0,
        }
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The offsets topic exists with this many partitions (it decides where a group lives).
    pub fn set_partition_count(&mut self, partitions: i32) {
        self.config.offsets_partitions = partitions.max(1);
    }

    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.get(id)
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    fn fresh_member_id(&mut self, client_id: &str) -> String {
        self.member_seq += 1;
        let a = mix(self.member_seed ^ self.member_seq);
        let b = mix(a ^ self.member_seq.rotate_left(32));
        let client: String = client_id.chars().take(64).collect();
        format!(
            "{client}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// Whether requests for `group_id` may be served here now.
    pub(super) fn check(&self, group_id: &str) -> Result<i32, ErrorCode> {
        if group_id.is_empty() || group_id.len() > GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        let p = coordinator_partition(group_id, self.config.offsets_partitions);
        match self.partitions.get(&p) {
            Some(Load::Active) => Ok(p),
            Some(Load::Loading) => Err(ErrorCode::CoordinatorLoadInProgress),
            None => Err(ErrorCode::NotCoordinator),
        }
    }

    pub(super) fn token(&mut self, pending: Pending) -> PersistToken {
        let t = self.next_token;
        self.next_token += 1;
        self.pending.insert(t, pending);
        t
    }

    /// Turns a group's effects into actions (metadata appends get tokens).
    fn effects(&mut self, group_id: &str, effects: Vec<GroupEffect>, out: &mut Vec<Action>) {
        for e in effects {
            match e {
                GroupEffect::Respond(id, r) => out.push(Action::Respond(id, r)),
                GroupEffect::Persist { after_sync } => {
                    let Some(g) = self.groups.get(group_id) else {
                        continue;
                    };
                    let key = records::encode_key(&RecordKey::Group {
                        group: group_id.to_string(),
                    });
                    let value = records::encode_group(&g.to_value());
                    let partition = g.partition;
                    let token = self.token(Pending::Group {
                        group: group_id.to_string(),
                        after_sync,
                    });
                    out.push(Action::Persist {
                        token,
                        partition,
                        records: vec![(key, Some(value))],
                    });
                }
            }
        }
    }

    pub fn handle(&mut self, input: Input, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Join(id, args) => self.join(id, args, now_ms, &mut out),
            Input::Sync(id, args) => {
                let code = self.check(&args.group_id).err();
                match (code, self.groups.get_mut(&args.group_id)) {
                    (Some(c), _) => {
                        out.push(Action::Respond(id, Response::Sync(SyncResult::error(c))))
                    }
                    (None, None) => out.push(Action::Respond(
                        id,
                        Response::Sync(SyncResult::error(ErrorCode::UnknownMemberId)),
                    )),
                    (None, Some(g)) => {
                        let mut fx = Vec::new();
                        let gid = args.group_id.clone();
                        g.sync(id, args, now_ms, &mut fx);
                        self.effects(&gid, fx, &mut out);
                    }
                }
            }
            Input::Heartbeat(id, a) => {
                let code = match self.check(&a.group_id) {
                    Err(c) => c,
                    Ok(_) => match self.groups.get_mut(&a.group_id) {
                        None => ErrorCode::UnknownMemberId,
                        Some(g) => g.heartbeat(
                            &a.member_id,
                            a.group_instance_id.as_deref(),
                            a.generation,
                            now_ms,
                        ),
                    },
                };
                out.push(Action::Respond(id, Response::Heartbeat(code)));
            }
            Input::Leave(id, a) => {
                let mut per_member = Vec::new();
                let top = match self.check(&a.group_id) {
                    Err(c) => c,
                    Ok(_) => {
                        let mut fx = Vec::new();
                        for (m, i) in &a.members {
                            let code = match self.groups.get_mut(&a.group_id) {
                                None => ErrorCode::UnknownMemberId,
                                Some(g) => g.leave(m, i.as_deref(), now_ms, &mut fx),
                            };
                            per_member.push((m.clone(), i.clone(), code));
                        }
                        self.effects(&a.group_id, fx, &mut out);
                        ErrorCode::None
                    }
                };
                out.push(Action::Respond(id, Response::Leave(top, per_member)));
            }
            Input::Commit(id, a) => self.commit(id, a, now_ms, &mut out),
            Input::DeleteGroups(id, groups) => self.delete_groups(id, groups, now_ms, &mut out),
            Input::DeleteOffsets(id, a) => self.delete_offsets(id, a, &mut out),
        }
        out
    }

    fn join(&mut self, id: RequestId, mut args: JoinArgs, now_ms: u64, out: &mut Vec<Action>) {
        let refuse = |out: &mut Vec<Action>, code: ErrorCode, member: &str| {
            out.push(Action::Respond(
                id,
                Response::Join(JoinResult::error(code, member)),
            ))
        };
        let partition = match self.check(&args.group_id) {
            Ok(p) => p,
            Err(c) => return refuse(out, c, &args.member_id),
        };
        let session = u64::try_from(args.session_timeout_ms).unwrap_or(0);
        if session < self.config.min_session_timeout_ms
            || session > self.config.max_session_timeout_ms
        {
            return refuse(out, ErrorCode::InvalidSessionTimeout, &args.member_id);
        }
        if args.protocol_type.is_empty()
            || args.protocols.is_empty()
            || args.protocols.len() > PROTOCOLS_PER_MEMBER_MAX
        {
            return refuse(out, ErrorCode::InconsistentGroupProtocol, &args.member_id);
        }
        if args
            .group_instance_id
            .as_ref()
            .is_some_and(|i| i.is_empty() || i.len() > INSTANCE_ID_BYTES_MAX)
            || args.member_id.len() > GROUP_ID_BYTES_MAX
            || args.protocol_type.len() > NAME_BYTES_MAX
            || args.protocols.iter().any(|(n, _)| n.len() > NAME_BYTES_MAX)
        {
            return refuse(out, ErrorCode::InvalidRequest, &args.member_id);
        }
        // Kept for DescribeGroups and written in group records: bounded, cut on a char boundary.
        args.client_id = args.client_id.chars().take(NAME_BYTES_MAX / 4).collect();
        args.client_host = args.client_host.chars().take(NAME_BYTES_MAX / 4).collect();
        if self
            .groups
            .get(&args.group_id)
            .is_some_and(|g| g.state() == GroupState::Dead)
        {
            // Being deleted (Kafka's answer for a Dead group): the member retries and joins the
            // group afresh once the deletion is durable.
            return refuse(out, ErrorCode::CoordinatorNotAvailable, &args.member_id);
        }
        if !self.groups.contains_key(&args.group_id) {
            if !args.member_id.is_empty() {
                return refuse(out, ErrorCode::UnknownMemberId, &args.member_id);
            }
            if self.groups.len() >= GROUPS_PER_CORE_MAX {
                return refuse(out, ErrorCode::CoordinatorNotAvailable, "");
            }
            self.groups.insert(
                args.group_id.clone(),
                Group::new(args.group_id.clone(), partition),
            );
        }
        let fresh = self.fresh_member_id(&args.client_id);
        let delay = self.config.initial_rebalance_delay_ms;
        let gid = args.group_id.clone();
        let mut fx = Vec::new();
        if let Some(g) = self.groups.get_mut(&gid) {
            g.join(id, args, fresh, delay, now_ms, &mut fx);
        }
        self.effects(&gid, fx, out);
    }

    fn commit(&mut self, id: RequestId, a: CommitArgs, now_ms: u64, out: &mut Vec<Action>) {
        let all = |code: ErrorCode| -> Vec<(String, i32, ErrorCode)> {
            a.offsets
                .iter()
                .map(|(t, p, _)| (t.clone(), *p, code))
                .collect()
        };
        let partition = match self.check(&a.group_id) {
            Ok(p) => p,
            Err(c) => return out.push(Action::Respond(id, Response::Commit(all(c)))),
        };
        let checked = match self.groups.get_mut(&a.group_id) {
            // Kafka's TxnOffsetCommit before v3 names no member: it is not checked against the
            // group's generation (the transaction is what fences a zombie).
            Some(g) if a.producer.is_some() && a.generation < 0 && a.member_id.is_empty() => {
                if g.state() == GroupState::Dead {
                    Err(ErrorCode::CoordinatorNotAvailable)
                } else {
                    Ok(())
                }
            }
            Some(g) => g.check_commit(
                a.generation,
                &a.member_id,
                a.group_instance_id.as_deref(),
                now_ms,
            ),
            None if a.generation < 0 => {
                if self.groups.len() >= GROUPS_PER_CORE_MAX {
                    Err(ErrorCode::CoordinatorNotAvailable)
                } else {
                    Ok(())
                }
            }
            None => Err(ErrorCode::IllegalGeneration),
        };
        if let Err(c) = checked {
            return out.push(Action::Respond(id, Response::Commit(all(c))));
        }
        let known = self.groups.get(&a.group_id).map_or(0, |g| g.offsets.len());
        let mut results = Vec::with_capacity(a.offsets.len());
        let mut accepted = Vec::new();
        let mut records = Vec::new();
        for (topic, p, v) in a.offsets {
            let code = if v.metadata.len() > OFFSET_METADATA_MAX_BYTES {
                ErrorCode::OffsetMetadataTooLarge
            } else if known + accepted.len() >= OFFSETS_PER_GROUP_MAX
                && !self
                    .groups
                    .get(&a.group_id)
                    .is_some_and(|g| g.offsets.contains_key(&(topic.clone(), p)))
            {
                // No Kafka code says "too many partitions"; the request is refused as invalid.
                ErrorCode::InvalidRequest
            } else {
                ErrorCode::None
            };
            if code == ErrorCode::None {
                let key = records::encode_key(&RecordKey::Offset {
                    group: a.group_id.clone(),
                    topic: topic.clone(),
                    partition: p,
                });
                records.push((key, Some(records::encode_offset(&v))));
                accepted.push((topic.clone(), p, v));
            }
            results.push((topic, p, code));
        }
        if accepted.is_empty() {
            return out.push(Action::Respond(id, Response::Commit(results)));
        }
        let token = self.token(Pending::Commit {
            id,
            group: a.group_id,
            results,
            offsets: accepted,
            producer: a.producer.map(|(pid, _)| pid),
        });
        out.push(match a.producer {
            None => Action::Persist {
                token,
                partition,
                records,
            },
            Some((producer_id, producer_epoch)) => Action::PersistTxn {
                token,
                partition,
                producer_id,
                producer_epoch,
                records,
            },
        });
    }

    /// The outcome of an append the coordinator asked for.
    pub fn persisted(
        &mut self,
        token: PersistToken,
        result: Result<(), ErrorCode>,
        now_ms: u64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        match self.pending.remove(&token) {
            Some(Pending::Commit {
                id,
                group,
                mut results,
                offsets,
                producer,
            }) => {
                match result {
                    Ok(()) => {
                        let p = coordinator_partition(&group, self.config.offsets_partitions);
                        if self.partitions.get(&p) == Some(&Load::Active) {
                            let g = self
                                .groups
                                .entry(group.clone())
                                .or_insert_with(|| Group::new(group.clone(), p));
                            match producer {
                                None => {
                                    for (t, part, v) in offsets {
                                        g.offsets.insert((t, part), v);
                                    }
                                }
                                Some(pid) => g.stage_txn_offsets(pid, offsets),
                            }
                        }
                    }
                    Err(code) => {
                        for r in results.iter_mut().filter(|r| r.2 == ErrorCode::None) {
                            r.2 = code;
                        }
                    }
                }
                out.push(Action::Respond(id, Response::Commit(results)));
            }
            Some(Pending::Group { group, after_sync }) => {
                if let (Some(generation), Some(g)) = (after_sync, self.groups.get_mut(&group)) {
                    let mut fx = Vec::new();
                    g.sync_persisted(generation, result, now_ms, &mut fx);
                    self.effects(&group, fx, &mut out);
                }
            }
            Some(Pending::DeleteGroups { id, groups }) => {
                self.delete_groups_persisted(id, groups, result, now_ms, &mut out)
            }
            Some(Pending::DeleteOffsets {
                id,
                group,
                results,
                partitions,
            }) => self.delete_offsets_persisted(id, group, results, partitions, result, &mut out),
            Some(Pending::Nothing) | None => {}
        }
        out
    }

    /// Time passes for every active group; empty groups with no offsets are dropped (and their
    /// metadata record tombstoned).
    pub fn tick(&mut self, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        let delay = self.config.initial_rebalance_delay_ms;
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            let mut fx = Vec::new();
            let mut drop_it = None;
            let mut expired = Vec::new();
            if let Some(g) = self.groups.get_mut(&id) {
                if self.partitions.get(&g.partition) != Some(&Load::Active) {
                    continue;
                }
                g.tick(now_ms, delay, &mut fx);
                if g.state() == GroupState::Empty {
                    expired = expire_offsets(g, now_ms);
                }
                if g.state() == GroupState::Empty
                    && g.offsets.is_empty()
                    // A transaction's staged offsets wait for its marker, however long it runs.
                    && !g.has_pending_txn_offsets()
                    && !g.has_waiters()
                    && fx.is_empty()
                    && now_ms >= g.state_timestamp_ms() + EMPTY_GROUP_RETENTION_MS
                {
                    drop_it = Some(g.partition);
                }
            }
            self.effects(&id, fx, &mut out);
            if !expired.is_empty() {
                let partition = coordinator_partition(&id, self.config.offsets_partitions);
                let token = self.token(Pending::Nothing);
                out.push(Action::Persist {
                    token,
                    partition,
                    records: expired,
                });
            }
            if let Some(partition) = drop_it {
                self.groups.remove(&id);
                let key = records::encode_key(&RecordKey::Group { group: id });
                let token = self.token(Pending::Nothing);
                out.push(Action::Persist {
                    token,
                    partition,
                    records: vec![(key, None)],
                });
            }
        }
        out
    }

    /// OffsetFetch: `topics` `None` = every partition the group committed. Unknown partitions
    /// answer offset -1.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<Vec<(String, i32, Option<OffsetValue>)>, ErrorCode> {
        self.check(group_id)?;
        let offsets = self.groups.get(group_id).map(|g| &g.offsets);
        Ok(match topics {
            None => offsets
                .into_iter()
                .flatten()
                .map(|((t, p), v)| (t.clone(), *p, Some(v.clone())))
                .collect(),
            Some(ts) => ts
                .into_iter()
                .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                .map(|(t, p)| {
                    let v = offsets.and_then(|o| o.get(&(t.clone(), p))).cloned();
                    (t, p, v)
                })
                .collect(),
        })
    }

    /// DescribeGroups for one group; an unknown group is described as Dead (Kafka's answer).
    pub fn describe(&self, group_id: &str) -> Result<GroupDescription, ErrorCode> {
        self.check(group_id)?;
        Ok(match self.groups.get(group_id) {
            None => GroupDescription {
                state: GroupState::Dead,
                generation: -1,
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            },
            Some(g) => GroupDescription {
                state: g.state(),
                generation: g.generation(),
                protocol_type: g.protocol_type().unwrap_or_default().to_string(),
                protocol: g.protocol().unwrap_or_default().to_string(),
                members: g.describe_members(),
            },
        })
    }

    /// ListGroups: (group id, protocol type, state) of every active group here.
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        let mut v: Vec<_> = self
            .groups
            .values()
            .filter(|g| self.partitions.get(&g.partition) == Some(&Load::Active))
            .filter(|g| g.state() != GroupState::Dead)
            .map(|g| {
                (
                    g.id.clone(),
                    g.protocol_type().unwrap_or_default().to_string(),
                    g.state(),
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Shutdown: every waiting request is answered COORDINATOR_NOT_AVAILABLE.
    pub fn shutdown(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        for g in self.groups.values_mut() {
            let mut fx = Vec::new();
            g.abandon_waiters(ErrorCode::CoordinatorNotAvailable, &mut fx);
            for e in fx {
                if let GroupEffect::Respond(r, resp) = e {
                    out.push(Action::Respond(r, resp));
                }
            }
        }
        self.abandon_deletes(&mut out);
        for (_, p) in std::mem::take(&mut self.pending) {
            if let Pending::DeleteOffsets { id, .. } = p {
                let r = Response::DeleteOffsets(ErrorCode::CoordinatorNotAvailable, Vec::new());
                out.push(Action::Respond(id, r));
                continue;
            }
            if let Pending::Commit { id, results, .. } = p {
                let r = results
                    .into_iter()
                    .map(|(t, p, c)| {
                        let c = if c == ErrorCode::None {
                            ErrorCode::CoordinatorNotAvailable
                        } else {
                            c
                        };
                        (t, p, c)
                    })
                    .collect();
                out.push(Action::Respond(id, Response::Commit(r)));
            }
        }
        out
    }
}
