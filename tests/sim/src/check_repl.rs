//! [`ReplChecks`]: the replication invariants (#14 item 2), after every step, over every
//! broker's replicas and the step's [`ReplEvent`]s and client observations.
//!
//! Owns: the committed prefix of each partition (the batches below the highest HW any leader
//! exposed, by batch id), who led each (partition, leader epoch), the epochs, HWs and epoch
//! caches last seen, and every batch acknowledged with acks=all.
//! Promises, each a named [`Violation`]:
//! - at most one broker ever acts as leader of a (partition, leader epoch);
//! - a broker leads a partition at increasing leader epochs, a leader's partition epoch never
//!   decreases, a replica's leader epoch never decreases within an incarnation;
//! - a leader's ISR is a subset of its replicas and holds it; what it counts for a follower of
//!   its epoch the follower holds (but a wiped member the leader still knows by its previous
//!   incarnation), and every such ISR member's log reaches the leader's HW (but one that lost its
//!   disk in the run, which may lack what was committed before);
//! - a leader's HW never decreases within its term; a follower's HW ≤ its log end;
//! - below its HW every replica holds the committed prefix's batches, exactly;
//! - an acks=all batch is committed and on every ISR member's synced log when acknowledged, and
//!   in the log of every leader that takes over afterwards (at a later leader epoch than the
//!   one that acknowledged it);
//! - no follower truncates a committed batch;
//! - no log holds two batches with one (producer id, epoch, sequence);
//! - an epoch cache only grows, except entries past a log cut by truncation or a crash;
//! - a reader sees only committed batches, in order.
//!
//! Incremental: only the replicas a step touched are looked at, and each one's agreement below its HW is verified once per log generation
//! ([`crate::plog::SimLog::generation`]) and offset range.
//! Never does: change anything it looks at.

use std::collections::{BTreeMap, BTreeSet};

use spool_core::epoch_cache::EpochEntry;

use crate::clients::Ack;
use crate::metaview::PartKey;
use crate::plog::SimBatch;
use crate::repl_event::ReplEvent;
use crate::replica_host::ReplicaHost;
use crate::sim_replica::Role;
use crate::violation::*;

#[derive(Default)]
pub struct ReplChecks {
    committed: BTreeMap<PartKey, Vec<SimBatch>>,
    leaders: BTreeMap<(PartKey, i32), i32>,
    /// (broker, key) → the last leader epoch it took.
    led_epoch: BTreeMap<(i32, PartKey), i32>,
    /// (broker, key) → (incarnation, leader epoch) seen.
    seen_epoch: BTreeMap<(i32, PartKey), (u64, i32)>,
    /// (broker, key, leader epoch) → (partition epoch, HW).
    term: BTreeMap<(i32, PartKey, i32), (i32, u64)>,
    /// (broker, key) → (log generation, verified below this offset).
    verified: BTreeMap<(i32, PartKey), (u64, u64)>,
    /// (broker, key) → (log generation, log end, epoch cache).
    caches: BTreeMap<(i32, PartKey), (u64, u64, Vec<EpochEntry>)>,
    acked_all: BTreeMap<PartKey, Vec<SimBatch>>,
    /// (key, batch id) → the leader epoch of the leader that acknowledged it with acks=all.
    acked_at_epoch: BTreeMap<(PartKey, u64), i32>,
    pub stats: ReplStats,
}

/// What a run exercised (so a test can show the checks are not vacuous).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplStats {
    pub leaderships: u64,
    pub truncations: u64,
    pub acked_all: u64,
    pub acked: u64,
    pub read: u64,
    pub committed_batches: u64,
}

impl ReplStats {
    pub fn add(&mut self, o: &ReplStats) {
        self.leaderships += o.leaderships;
        self.truncations += o.truncations;
        self.acked_all += o.acked_all;
        self.acked += o.acked;
        self.read += o.read;
        self.committed_batches += o.committed_batches;
    }
}

fn fail(invariant: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation::new(invariant, detail))
}

/// Whether the leader, which knows `member` by `seen_epoch`, still counts a previous
/// incarnation's reports: the member is down, not registered again since it restarted, or the
/// leader has not seen its new broker epoch in a fetch yet. Such a count says nothing of the log
/// there now — a wiped disk is empty, and a crash keeps what the member synced but also what a
/// truncation under a newer leader epoch cut before it (a restarted member follows no one until
/// metadata arrives, so it no longer looks like a follower of a newer epoch). The leader forgets
/// the old count at the new incarnation's first fetch (KIP-903), which this check then holds it to.
fn old_incarnation_counted(member: &ReplicaHost, seen_epoch: Option<i64>) -> bool {
    !member.is_up()
        || member
            .broker_epoch()
            .is_none_or(|e| seen_epoch.is_none_or(|s| s < e))
}

/// [`old_incarnation_counted`] for a member whose disk was wiped: only a wipe may take what an
/// acknowledgement covered (a crash keeps what was synced, and nothing truncates it).
fn wiped_unknown(member: &ReplicaHost, seen_epoch: Option<i64>) -> bool {
    member.was_wiped() && old_incarnation_counted(member, seen_epoch)
}

fn host(hosts: &[ReplicaHost], id: i32) -> Option<&ReplicaHost> {
    usize::try_from(id - 1).ok().and_then(|i| hosts.get(i))
}

impl ReplChecks {
    pub fn acked_all(&self) -> &BTreeMap<PartKey, Vec<SimBatch>> {
        &self.acked_all
    }

    /// One step's events and observations, then the state of every replica.
    pub fn check(
        &mut self,
        hosts: &[ReplicaHost],
        touched: &[(i32, PartKey)],
        events: &[ReplEvent],
        acks: &[Ack],
        reads: &[(PartKey, SimBatch)],
    ) -> Result<(), Violation> {
        self.stats.acked += acks.len() as u64;
        let touched: BTreeSet<(i32, PartKey)> = touched.iter().copied().collect();
        self.check_replicas(hosts, &touched)?;
        for e in events {
            self.on_event(hosts, e)?;
        }
        for (key, b) in reads {
            self.stats.read += 1;
            if !self.is_committed(key, b) {
                return fail(
                    READS_COMMITTED,
                    format!(
                        "{key}: a reader saw batch {} at {} that is not committed",
                        b.id, b.base_offset
                    ),
                );
            }
        }
        Ok(())
    }

    fn on_event(&mut self, hosts: &[ReplicaHost], e: &ReplEvent) -> Result<(), Violation> {
        match e {
            ReplEvent::LeaderTook {
                broker,
                key,
                leader_epoch,
            } => {
                self.stats.leaderships += 1;
                let last = self.led_epoch.insert((*broker, *key), *leader_epoch);
                if last.is_some_and(|l| l >= *leader_epoch) {
                    return fail(
                        REPL_EPOCHS_MONOTONIC,
                        format!("b{broker} led {key} at epoch {last:?}, now {leader_epoch}"),
                    );
                }
                let Some(r) = host(hosts, *broker).and_then(|h| h.replicas().get(key)) else {
                    return Ok(());
                };
                for a in self.acked_all.get(key).into_iter().flatten() {
                    // Only a leader at a later epoch takes over from the one that acknowledged:
                    // a broker whose metadata lags may still act on an older epoch, but it can
                    // commit nothing (the ISR follows the newer leader) and it is told to step
                    // down once its metadata catches up (the simulator's seed 858).
                    let acked_at = self.acked_at_epoch.get(&(*key, a.id)).copied();
                    if acked_at.is_some_and(|e| e >= *leader_epoch) {
                        continue;
                    }
                    if r.log.batch_at(a.base_offset) != Some(a) {
                        return fail(
                            ACKED_IN_LATER_LEADERS,
                            format!(
                                "b{broker} leads {key} at epoch {leader_epoch} without acked batch {} at {} (it has {:?})",
                                a.id,
                                a.base_offset,
                                r.log.batch_at(a.base_offset)
                            ),
                        );
                    }
                }
            }
            ReplEvent::Truncated {
                broker, key, cut, ..
            } => {
                self.stats.truncations += 1;
                if let Some(b) = cut.iter().find(|b| self.is_committed(key, b)) {
                    return fail(
                        COMMITTED_NEVER_TRUNCATED,
                        format!(
                            "b{broker} truncated committed batch {} at {} of {key}",
                            b.id, b.base_offset
                        ),
                    );
                }
            }
            ReplEvent::Appended { broker, key, batch } => {
                let Some(p) = batch.producer else {
                    return Ok(());
                };
                let Some(r) = host(hosts, *broker).and_then(|h| h.replicas().get(key)) else {
                    return Ok(());
                };
                let copies = r
                    .log
                    .batches()
                    .iter()
                    .filter(|b| b.producer == Some(p))
                    .count();
                if copies > 1 {
                    return fail(
                        NO_DUPLICATE_SEQUENCE,
                        format!("b{broker} {key} holds {copies} batches of producer {p:?}"),
                    );
                }
            }
            ReplEvent::AckedAll {
                broker,
                key,
                batch,
                isr,
            } => {
                self.stats.acked_all += 1;
                if !self.is_committed(key, batch) {
                    return fail(
                        ACKED_IN_LATER_LEADERS,
                        format!(
                            "b{broker} acknowledged {key} batch {} at {} before it was committed",
                            batch.id, batch.base_offset
                        ),
                    );
                }
                // What the acknowledging leader knows of each member's incarnation.
                let seen_epoch = |m: i32| {
                    host(hosts, *broker)
                        .and_then(|h| h.replicas().get(key))
                        .and_then(|r| r.leader())
                        .and_then(|l| l.state.follower(m))
                        .and_then(|f| f.broker_epoch)
                };
                for m in isr {
                    let member = host(hosts, *m);
                    // A member that already dropped the partition (its topic was deleted) holds
                    // nothing to check.
                    if member.is_some_and(|h| !h.view().partitions.contains_key(key)) {
                        continue;
                    }
                    // A member whose disk was wiped after it reported the batch synced: the
                    // leader still counts what that incarnation reported (it cannot know yet), and
                    // the batch is on the other members' disks. Once the new incarnation fetches,
                    // the leader counts from there (KIP-903), which this check then holds it to.
                    if member.is_some_and(|h| wiped_unknown(h, seen_epoch(*m))) {
                        continue;
                    }
                    let log = member.and_then(|h| h.replicas().get(key)).map(|r| &r.log);
                    let durable = log.is_some_and(|l| {
                        l.batch_at(batch.base_offset) == Some(batch)
                            && batch.end_offset() <= l.synced_offset()
                    });
                    if !durable {
                        return fail(
                            ACKED_ON_ISR_DISKS,
                            format!(
                                "b{broker} acknowledged {key} batch {} at {} but ISR member b{m} has not synced it (synced to {:?})",
                                batch.id,
                                batch.base_offset,
                                log.map(|l| l.synced_offset())
                            ),
                        );
                    }
                }
                self.acked_all.entry(*key).or_default().push(*batch);
                if let Some(&e) = self.led_epoch.get(&(*broker, *key)) {
                    self.acked_at_epoch.entry((*key, batch.id)).or_insert(e);
                }
            }
        }
        Ok(())
    }

    /// Whether `b` is the committed batch at its offset.
    fn is_committed(&self, key: &PartKey, b: &SimBatch) -> bool {
        let c = self.committed.get(key).map_or(&[][..], Vec::as_slice);
        let i = c.partition_point(|x| x.end_offset() <= b.base_offset);
        c.get(i) == Some(b)
    }

    fn check_replicas(
        &mut self,
        hosts: &[ReplicaHost],
        touched: &BTreeSet<(i32, PartKey)>,
    ) -> Result<(), Violation> {
        let touched_replicas = || {
            touched.iter().filter_map(|(b, key)| {
                let h = host(hosts, *b).filter(|h| h.is_up())?;
                Some((h, key, h.replicas().get(key)?))
            })
        };
        // Leaders first: what they expose below their HW extends the committed prefix.
        for (h, key, r) in touched_replicas() {
            {
                let Role::Leader(l) = &r.role else {
                    continue;
                };
                let me = h.id();
                let epoch = l.state.leader_epoch();
                let claimed = *self.leaders.entry((*key, epoch)).or_insert(me);
                if claimed != me {
                    return fail(
                        REPL_ONE_LEADER_PER_EPOCH,
                        format!("b{me} and b{claimed} both lead {key} at epoch {epoch}"),
                    );
                }
                let ls = l.state.leadership();
                if !ls.isr.contains(&me) || !ls.isr.iter().all(|b| ls.replicas.contains(b)) {
                    return fail(
                        REPL_ISR_SUBSET,
                        format!("b{me} {key} ISR {:?} replicas {:?}", ls.isr, ls.replicas),
                    );
                }
                let hw = l.state.high_watermark();
                // What the leader counts for a follower it holds, within the epoch (a follower
                // of this epoch only appends; it reported synced offsets) — except one that
                // restarted since, while this leader still counts its previous incarnation
                // (`old_incarnation_counted`). And so every ISR member has what the watermark
                // covers.
                for m in ls.replicas.iter().filter(|m| **m != me) {
                    let Some(mh) = host(hosts, *m).filter(|h| h.is_up()) else {
                        continue;
                    };
                    let Some(mr) = mh.replicas().get(key) else {
                        continue;
                    };
                    let counted = l.state.follower(*m);
                    if old_incarnation_counted(mh, counted.and_then(|f| f.broker_epoch)) {
                        continue;
                    }
                    let end = mr.log.end_offset();
                    if let Some(f) = counted.filter(|f| f.log_end_offset > end) {
                        if mr.leader_epoch() == epoch {
                            return fail(
                                LEADER_COUNTS_WHAT_FOLLOWERS_HOLD,
                                format!(
                                    "b{me} {key} counts {} for b{m}, whose log ends at {end}",
                                    f.log_end_offset
                                ),
                            );
                        }
                    }
                    // A member that lost its disk may lack what the watermark covered before (on
                    // the others' disks); what the leader counts for it is checked above.
                    if !ls.isr.contains(m) || mr.leader_epoch() != epoch || mh.was_wiped() {
                        continue;
                    }
                    if mr.log.end_offset() < hw {
                        return fail(
                            ISR_HOLDS_HW,
                            format!(
                                "b{me} {key} HW {hw} but ISR member b{m}'s log ends at {}",
                                mr.log.end_offset()
                            ),
                        );
                    }
                }
                let last = self
                    .term
                    .insert((me, *key, epoch), (ls.partition_epoch, hw));
                if let Some((pe, last_hw)) = last {
                    if pe > ls.partition_epoch {
                        return fail(
                            REPL_EPOCHS_MONOTONIC,
                            format!("b{me} {key} partition epoch {pe} -> {}", ls.partition_epoch),
                        );
                    }
                    if last_hw > hw {
                        return fail(HW_MONOTONIC, format!("b{me} {key} HW {last_hw} -> {hw}"));
                    }
                }
                let c = self.committed.entry(*key).or_default();
                let c_end = c.last().map_or(0, SimBatch::end_offset);
                if hw > c_end {
                    for b in r.log.read(c_end, hw, usize::MAX) {
                        c.push(b);
                        self.stats.committed_batches += 1;
                    }
                }
            }
        }
        for (h, key, r) in touched_replicas() {
            let me = h.id();
            {
                let epoch = r.leader_epoch();
                let seen = self.seen_epoch.insert((me, *key), (h.incarnation(), epoch));
                if let Some((inc, e)) = seen {
                    if inc == h.incarnation() && e > epoch {
                        return fail(
                            REPL_EPOCHS_MONOTONIC,
                            format!("b{me} {key} leader epoch {e} -> {epoch}"),
                        );
                    }
                }
                let hw = r.high_watermark();
                if hw > r.log.end_offset() {
                    return fail(
                        HW_WITHIN_LOG,
                        format!(
                            "b{me} {key} HW {hw} past its log end {}",
                            r.log.end_offset()
                        ),
                    );
                }
                let gen = r.log.generation();
                let from = match self.verified.get(&(me, *key)) {
                    Some((g, upto)) if *g == gen => *upto,
                    _ => 0,
                };
                if hw > from {
                    let c = self.committed.get(key).map_or(&[][..], Vec::as_slice);
                    for b in r.log.read(from, hw, usize::MAX) {
                        let i = c.partition_point(|x| x.end_offset() <= b.base_offset);
                        if c.get(i) != Some(&b) {
                            return fail(
                                BELOW_HW_AGREES,
                                format!(
                                    "b{me} {key} holds batch {} at {} below its HW {hw}, the committed batch there is {:?}",
                                    b.id,
                                    b.base_offset,
                                    c.get(i).map(|x| (x.id, x.base_offset))
                                ),
                            );
                        }
                    }
                    self.verified.insert((me, *key), (gen, hw));
                }
                let entries = r.epochs().entries();
                let last = self.caches.get(&(me, *key));
                if let Some((g, old_end, old)) = last {
                    // Entries that described no record may go; after a cut (a truncation, whose
                    // safety `Truncated` checks, or a crash losing unsynced batches) so may
                    // those past the log's new end.
                    let mut end = *old_end;
                    if *g != gen {
                        end = end.min(r.log.end_offset());
                    }
                    let kept = old.iter().filter(|e| e.start_offset < end).count();
                    if entries.len() < kept || entries[..kept] != old[..kept] {
                        return fail(
                            EPOCH_CACHE_GROWS,
                            format!("b{me} {key} epoch cache {old:?} -> {entries:?}"),
                        );
                    }
                }
                let log_end = r.log.end_offset();
                if last.is_none_or(|(g, e, old)| {
                    *g != gen || *e != log_end || old.as_slice() != entries
                }) {
                    self.caches
                        .insert((me, *key), (gen, log_end, entries.to_vec()));
                }
            }
        }
        Ok(())
    }
}
