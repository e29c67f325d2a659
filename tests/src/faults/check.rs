//! The checker of a fault run: a [`History`] against the log and the group offsets read back
//! once the cluster has healed. It owns the verdict; the workload and the nemeses only record.
//!
//! Promises checked, each violation reported as its own readable line:
//! - lost: every acks=all acknowledged write is in the final log at its acknowledged partition
//!   and offset with its value (acks=1 writes may be lost: only counted in `lost_acks1`);
//! - duplicated: no idempotent producer's value sits at more than one place in the final log
//!   under one producer id and epoch (copies under different epochs are a client's epoch bump:
//!   it numbers its sequences from 0 again, so no broker can tell; they are reported apart, in
//!   `duplicated_across_epochs`, from the batch headers [`super::origins`] reads);
//! - reordered: within a partition, an idempotent producer's records are in increasing seq
//!   order (the "with idempotence": a producer without it may resend — librdkafka does
//!   under pauses even with `retries=0` — so its duplicates and reorders are only counted;
//!   a reorder between two epochs of one producer is reported apart, as duplicates are);
//! - inconsistent: no offset was observed with two values (consumer reads, the final log and
//!   acks=all acknowledgements; acks=1 acknowledgements are not observations, since a new leader
//!   may rightly reuse a lost acks=1 offset), the native and the Kafka port's read-backs agree
//!   on every offset, nothing in the final log that nobody wrote, no
//!   acks=all write found somewhere other than where it was acknowledged;
//! - vanished reads: whatever a consumer read is still in the final log where it read it;
//! - commits backwards: a group's acknowledged offsets never go back, and survive healing;
//! - stalled (liveness): every producer got an acknowledgement; and, reported apart
//!   (`consumers_stalled`), the group's commits reach the end of every partition once the
//!   cluster has healed ([`group_caught_up`]).
//!
//! It also measures availability: the longest stretch without any acknowledgement, overall and
//! per nemesis kind. A checker must be shown to fail on a planted bug before it is trusted:
//! the unit tests plant each bug and assert the exact count. It never panics on any input.

use std::collections::{BTreeMap, BTreeSet};

use super::history::{
    parse_value, Commit, FinalCommits, FinalLog, History, Outcome, Tp, WriteAcks,
};
use super::origins::Origins;

/// The verdict of one run: counts of what happened, and every violation found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Writes acknowledged with acks=all.
    pub acked_all: usize,
    /// Writes acknowledged with acks=1.
    pub acked_leader: usize,
    pub not_acked: usize,
    /// Records in the final log.
    pub read_back: usize,
    pub consumer_reads: usize,
    pub lost: Vec<String>,
    /// Allowed, so only counted.
    pub lost_acks1: usize,
    pub duplicated: Vec<String>,
    /// Values of producers without idempotence found twice: allowed, so only counted.
    pub duplicated_acks1: usize,
    pub reordered: Vec<String>,
    /// Out-of-order records of producers without idempotence: allowed, so only counted.
    pub reordered_acks1: usize,
    /// An idempotent producer's value found under more than one producer id or epoch, once per
    /// epoch: the client bumped its epoch and sent again what the log already held (librdkafka
    /// does, README item 14). Not the broker's to prevent, so not a violation.
    pub duplicated_across_epochs: Vec<String>,
    /// An idempotent producer's record after a higher seq of its own written under another
    /// producer id or epoch: the same epoch bump. Not a violation either.
    pub reordered_across_epochs: Vec<String>,
    pub inconsistent: Vec<String>,
    pub vanished_reads: Vec<String>,
    pub commits_backwards: Vec<String>,
    /// Producers that made no progress in the whole run (a liveness failure: every harm is
    /// healed and the cluster settles between harms, so each client must get through).
    pub stalled: Vec<String>,
    /// The group did not catch up with the healed cluster in time ([`group_caught_up`], asked
    /// by the runner): a liveness failure too, kept apart so that a campaign may tolerate it
    /// while its bug is open (`spool-faults --tolerate consumer-stall`); not among
    /// [`Report::violations`].
    pub consumers_stalled: Option<String>,
    pub max_unavailable_ms: u64,
    /// Every nemesis kind in the history: the longest ack-free stretch overlapping one of its
    /// spans (0 when none does).
    pub unavailable_ms_by_nemesis: BTreeMap<String, u64>,
}

impl Report {
    /// How many promises were broken (`lost_acks1` is allowed, so not among them).
    pub fn violations(&self) -> usize {
        self.lost.len()
            + self.duplicated.len()
            + self.reordered.len()
            + self.inconsistent.len()
            + self.vanished_reads.len()
            + self.commits_backwards.len()
            + self.stalled.len()
    }

    /// One line with every count, for a test's log.
    pub fn summary(&self) -> String {
        let by_nemesis: Vec<String> = self
            .unavailable_ms_by_nemesis
            .iter()
            .map(|(kind, ms)| format!("{kind}:{ms}"))
            .collect();
        format!(
            "acked_all={} acked_acks1={} not_acked={} read_back={} consumer_reads={} lost={} \
             lost_acks1={} duplicated={} duplicated_acks1={} duplicated_across_epochs={} \
             reordered={} reordered_acks1={} reordered_across_epochs={} \
             inconsistent={} vanished_reads={} commits_backwards={} stalled={} \
             consumers_stalled={} max_unavailable_ms={} \
             unavailable_ms_by_nemesis={{{}}}",
            self.acked_all,
            self.acked_leader,
            self.not_acked,
            self.read_back,
            self.consumer_reads,
            self.lost.len(),
            self.lost_acks1,
            self.duplicated.len(),
            self.duplicated_acks1,
            self.duplicated_across_epochs.len(),
            self.reordered.len(),
            self.reordered_acks1,
            self.reordered_across_epochs.len(),
            self.inconsistent.len(),
            self.vanished_reads.len(),
            self.commits_backwards.len(),
            self.stalled.len(),
            u8::from(self.consumers_stalled.is_some()),
            self.max_unavailable_ms,
            by_nemesis.join(","),
        )
    }
}

/// Checks `history` against the log and the group offsets as read back after healing, without
/// the records' writers: every duplicate and reorder of an idempotent producer is a violation.
pub fn check(history: &History, final_log: &FinalLog, final_commits: &FinalCommits) -> Report {
    check_with_origins(history, final_log, final_commits, None)
}

/// [`check`], with the final log's batch writers as the Kafka port read them (`origins`): they
/// must agree with `final_log` on every offset, and they tell a client's epoch bump from the
/// broker's fault.
pub fn check_with_origins(
    history: &History,
    final_log: &FinalLog,
    final_commits: &FinalCommits,
    origins: Option<&Origins>,
) -> Report {
    let mut report = Report {
        read_back: final_log.values().map(Vec::len).sum(),
        consumer_reads: history.reads.len(),
        ..Report::default()
    };
    let log = LogIndex::new(final_log);
    check_writes(history, &log, &mut report);
    check_observations(history, final_log, &mut report);
    if let Some(origins) = origins {
        check_origins(final_log, origins, &mut report);
    }
    check_log(history, final_log, &log, origins, &mut report);
    check_reads(history, &log, &mut report);
    check_commits(history, final_commits, &mut report);
    check_progress(history, &mut report);
    measure_unavailability(history, &mut report);
    report
}

/// The final log looked up both ways. A sound log holds one value per offset; a broken one may
/// list an offset twice, so every value at an offset is kept.
struct LogIndex<'a> {
    at: BTreeMap<(&'a Tp, i64), BTreeSet<&'a str>>,
    places: BTreeMap<&'a str, BTreeSet<(&'a Tp, i64)>>,
}

impl<'a> LogIndex<'a> {
    fn new(final_log: &'a FinalLog) -> Self {
        let mut index = LogIndex {
            at: BTreeMap::new(),
            places: BTreeMap::new(),
        };
        for (tp, records) in final_log {
            for (offset, value) in records {
                index.at.entry((tp, *offset)).or_default().insert(value);
                index.places.entry(value).or_default().insert((tp, *offset));
            }
        }
        index
    }

    fn holds(&self, tp: &Tp, offset: i64, value: &str) -> bool {
        self.at
            .get(&(tp, offset))
            .is_some_and(|values| values.contains(value))
    }

    /// What the final log has at `tp`/`offset`, for a violation's message.
    fn describe(&self, tp: &Tp, offset: i64) -> String {
        match self.at.get(&(tp, offset)) {
            Some(values) => format!("the final log has {}", join(values)),
            None => "the final log has nothing there".to_string(),
        }
    }
}

fn name(tp: &Tp) -> String {
    format!("{}-{}", tp.0, tp.1)
}

fn join<'v>(values: impl IntoIterator<Item = &'v &'v str>) -> String {
    values
        .into_iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn places(places: &BTreeSet<(&Tp, i64)>) -> String {
    let named: Vec<String> = places
        .iter()
        .map(|(tp, offset)| format!("{}@{offset}", name(tp)))
        .collect();
    named.join(", ")
}

fn check_writes(history: &History, log: &LogIndex, report: &mut Report) {
    for w in &history.writes {
        let (tp, offset) = match &w.outcome {
            Outcome::Acked { tp, offset } => (tp, *offset),
            Outcome::NotAcked { .. } => {
                report.not_acked += 1;
                continue;
            }
        };
        let elsewhere = log.places.get(w.value.as_str());
        match w.acks {
            WriteAcks::Leader => {
                report.acked_leader += 1;
                if elsewhere.is_none() {
                    report.lost_acks1 += 1;
                }
            }
            WriteAcks::All => {
                report.acked_all += 1;
                if log.holds(tp, offset, &w.value) {
                    continue;
                }
                // Acknowledged without an offset: anywhere in its partition will do.
                if offset < 0 && elsewhere.is_some_and(|at| at.iter().any(|(t, _)| *t == tp)) {
                    continue;
                }
                let tp_name = name(tp);
                report.lost.push(format!(
                    "acks=all write {:?} (producer {} seq {}) acknowledged at {tp_name}@{offset} \
                     is not there: {}",
                    w.value,
                    w.producer,
                    w.seq,
                    log.describe(tp, offset)
                ));
                // Present but moved: the acknowledgement named an offset that was not the
                // record's, so readers trusting it would read something else.
                if let Some(found) = elsewhere {
                    report.inconsistent.push(format!(
                        "acks=all write {:?} (producer {} seq {}) acknowledged at \
                         {tp_name}@{offset} is in the final log at {} instead",
                        w.value,
                        w.producer,
                        w.seq,
                        places(found)
                    ));
                }
            }
        }
    }
}

/// One entry per offset seen with two values. acks=1 acknowledgements are left out on purpose:
/// losing one and reusing its offset on failover is allowed.
fn check_observations(history: &History, final_log: &FinalLog, report: &mut Report) {
    type Sources = BTreeSet<&'static str>;
    let mut seen: BTreeMap<(&Tp, i64), BTreeMap<&str, Sources>> = BTreeMap::new();
    for (tp, records) in final_log {
        for (offset, value) in records {
            seen.entry((tp, *offset))
                .or_default()
                .entry(value)
                .or_default()
                .insert("final log");
        }
    }
    for r in &history.reads {
        seen.entry((&r.tp, r.offset))
            .or_default()
            .entry(&r.value)
            .or_default()
            .insert("read");
    }
    for w in &history.writes {
        if let (WriteAcks::All, Outcome::Acked { tp, offset }) = (w.acks, &w.outcome) {
            if *offset < 0 {
                continue;
            }
            let observed = seen.entry((tp, *offset)).or_default();
            observed.entry(&w.value).or_default().insert("acks=all ack");
        }
    }
    for ((tp, offset), values) in &seen {
        if values.len() < 2 {
            continue;
        }
        let described: Vec<String> = values
            .iter()
            .map(|(value, sources)| {
                format!(
                    "{value:?} ({})",
                    sources.iter().copied().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        report.inconsistent.push(format!(
            "{}@{offset} observed with {} values: {}",
            name(tp),
            values.len(),
            described.join(" vs ")
        ));
    }
}

/// The Kafka port's read-back holds exactly the native one's records.
fn check_origins(final_log: &FinalLog, origins: &Origins, report: &mut Report) {
    let mut native: BTreeSet<(&Tp, i64)> = BTreeSet::new();
    for (tp, records) in final_log {
        for (offset, value) in records {
            native.insert((tp, *offset));
            match origins.get(&(tp.clone(), *offset)) {
                None => report.inconsistent.push(format!(
                    "{}@{offset} was read back as {value:?}, but the Kafka port's read has \
                     nothing there",
                    name(tp)
                )),
                Some(o) if o.value != *value => report.inconsistent.push(format!(
                    "{}@{offset} was read back as {value:?}, but through the Kafka port as {:?}",
                    name(tp),
                    o.value
                )),
                Some(_) => {}
            }
        }
    }
    // A fenced epoch never writes again: per partition, a producer id's epochs only grow in
    // offset order (the broker refuses an older epoch once it has seen a newer one).
    let mut newest: BTreeMap<(&Tp, i64), (i16, i64)> = BTreeMap::new();
    for ((tp, offset), o) in origins {
        let key = (tp, o.producer_id);
        if o.producer_id >= 0 {
            match newest.get(&key).copied() {
                Some((epoch, at)) if o.producer_epoch < epoch => {
                    report.reordered.push(format!(
                        "{}@{offset}: producer id {} wrote at epoch {} after its epoch {epoch} \
                         at offset {at}: a fenced epoch wrote again",
                        name(tp),
                        o.producer_id,
                        o.producer_epoch
                    ));
                }
                _ => {
                    newest.insert(key, (o.producer_epoch, *offset));
                }
            }
        }
        if !native.contains(&(tp, *offset)) {
            report.inconsistent.push(format!(
                "{}@{offset} was read through the Kafka port as {:?}, but the read-back has \
                 nothing there",
                name(tp),
                o.value
            ));
        }
    }
}

/// The (producer id, epoch) that wrote `tp`/`offset`, when the origins are known.
fn writer(origins: Option<&Origins>, tp: &Tp, offset: i64) -> Option<(i64, i16)> {
    let o = origins?.get(&(tp.clone(), offset))?;
    Some((o.producer_id, o.producer_epoch))
}

fn check_log(
    history: &History,
    final_log: &FinalLog,
    log: &LogIndex,
    origins: Option<&Origins>,
    report: &mut Report,
) {
    // By the exact string: a value that parses but is spelled differently was not written.
    // Unwritten values are left out of the order check: they are already inconsistent.
    let written: BTreeSet<&str> = history.writes.iter().map(|w| w.value.as_str()).collect();
    // Idempotence comes with acks=all (as in Kafka): these producers' order and uniqueness are
    // promises; the others' are only counted.
    let idempotent: BTreeSet<u32> = history
        .writes
        .iter()
        .filter(|w| w.acks == WriteAcks::All)
        .map(|w| w.producer)
        .collect();
    for (tp, records) in final_log {
        let mut by_offset: Vec<&(i64, String)> = records.iter().collect();
        by_offset.sort_by_key(|(offset, _)| *offset);
        let mut last_by_producer: BTreeMap<u32, (u64, i64)> = BTreeMap::new();
        for (offset, value) in by_offset {
            let Some((producer, seq)) = parse_value(value) else {
                report.inconsistent.push(format!(
                    "{}@{offset} holds {value:?}, which is no producer's value",
                    name(tp)
                ));
                continue;
            };
            if !written.contains(value.as_str()) {
                report.inconsistent.push(format!(
                    "{}@{offset} holds {value:?} (producer {producer} seq {seq}), which nobody \
                     wrote",
                    name(tp)
                ));
                // Reported once, as inconsistent; its seq says nothing about anyone's order.
                continue;
            }
            if let Some((last_seq, last_offset)) = last_by_producer.get(&producer) {
                let this_writer = writer(origins, tp, *offset);
                let last_writer = writer(origins, tp, *last_offset);
                let across_epochs =
                    this_writer.is_some() && this_writer != last_writer && last_writer.is_some();
                if seq <= *last_seq && !idempotent.contains(&producer) {
                    report.reordered_acks1 += 1;
                } else if seq <= *last_seq {
                    let line = format!(
                        "{}: producer {producer} seq {seq} at offset {offset} (writer \
                         {this_writer:?}) follows its seq {last_seq} at offset {last_offset} \
                         (writer {last_writer:?})",
                        name(tp)
                    );
                    if across_epochs {
                        report.reordered_across_epochs.push(line);
                    } else {
                        report.reordered.push(line);
                    }
                }
            }
            last_by_producer.insert(producer, (seq, *offset));
        }
    }
    for (value, at) in &log.places {
        let promised = parse_value(value).is_some_and(|(p, _)| idempotent.contains(&p));
        if at.len() > 1 && !promised {
            report.duplicated_acks1 += 1;
        } else if at.len() > 1 {
            let writers: Vec<Option<(i64, i16)>> = at
                .iter()
                .map(|(tp, offset)| writer(origins, tp, *offset))
                .collect();
            let distinct: BTreeSet<(i64, i16)> = writers.iter().flatten().copied().collect();
            let line = format!(
                "{value:?} is in the final log {} times: {} (writers {writers:?})",
                at.len(),
                places(at)
            );
            // Every copy known, each under its own (id, epoch): no broker could have told.
            if distinct.len() == at.len() {
                report.duplicated_across_epochs.push(line);
            } else {
                report.duplicated.push(line);
            }
        }
    }
}

/// One entry per vanished (partition, offset, value), however many consumers read it: groups
/// rebalance and re-read, and that is one loss, not several.
fn check_reads(history: &History, log: &LogIndex, report: &mut Report) {
    let mut reads: BTreeMap<(&Tp, i64, &str), BTreeSet<u32>> = BTreeMap::new();
    for r in &history.reads {
        reads
            .entry((&r.tp, r.offset, &r.value))
            .or_default()
            .insert(r.consumer);
    }
    for ((tp, offset, value), consumers) in reads {
        if !log.holds(tp, offset, value) {
            report.vanished_reads.push(format!(
                "{}@{offset} was read as {value:?} by consumer(s) {consumers:?}, but {}",
                name(tp),
                log.describe(tp, offset)
            ));
        }
    }
}

fn check_commits(history: &History, final_commits: &FinalCommits, report: &mut Report) {
    let mut commits: Vec<_> = history.commits.iter().collect();
    // Stable: commits acknowledged in the same millisecond keep the order they were recorded in.
    commits.sort_by_key(|c| c.at_ms);
    let mut highest: BTreeMap<(&str, &Tp), &Commit> = BTreeMap::new();
    for c in commits {
        let key = (c.group.as_str(), &c.tp);
        match highest.get(&key) {
            Some(top) if c.offset < top.offset => report.commits_backwards.push(format!(
                "committed offset moved backwards: group {:?} on {}: {} (consumer {}, at {} ms) \
                 after {} (consumer {}, at {} ms)",
                c.group,
                name(&c.tp),
                c.offset,
                c.consumer,
                c.at_ms,
                top.offset,
                top.consumer,
                top.at_ms
            )),
            Some(top) if c.offset == top.offset => {}
            _ => {
                highest.insert(key, c);
            }
        }
    }
    for ((group, tp), top) in highest {
        let after = match final_commits.get(&(group.to_string(), tp.clone())) {
            Some(offset) if *offset >= top.offset => continue,
            Some(offset) => format!("the group's offset after healing is {offset}"),
            None => "the group has no offset there after healing".to_string(),
        };
        report.commits_backwards.push(format!(
            "acknowledged commit lost: group {group:?} on {}: {} was acknowledged (consumer {}, \
             at {} ms), but {after}",
            name(tp),
            top.offset,
            top.consumer,
            top.at_ms
        ));
    }
}

/// Liveness: every producer that sent got at least one acknowledgement. A run heals every harm
/// and waits for the cluster to settle before the next, so a producer with nothing to show for
/// the whole run is stuck (one that never gets a producer id). The consumers' liveness is
/// [`group_caught_up`], asked once the cluster has healed.
fn check_progress(history: &History, report: &mut Report) {
    let mut sent: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    for w in &history.writes {
        let e = sent.entry(w.producer).or_default();
        e.0 += 1;
        if matches!(w.outcome, Outcome::Acked { .. }) {
            e.1 += 1;
        }
    }
    for (producer, (writes, acked)) in &sent {
        if *acked == 0 {
            report.stalled.push(format!(
                "producer {producer}: none of its {writes} writes was acknowledged"
            ));
        }
    }
}

/// Whether `group`'s acknowledged commits reach `ends` (each partition's end offset, by
/// partition number) — the group has read everything — or what is still short.
pub fn group_caught_up(
    commits: &[Commit],
    group: &str,
    topic: &str,
    ends: &[i64],
) -> Result<(), String> {
    let mut top: BTreeMap<i32, i64> = BTreeMap::new();
    for c in commits
        .iter()
        .filter(|c| c.group == group && c.tp.0 == topic)
    {
        let t = top.entry(c.tp.1).or_insert(c.offset);
        *t = (*t).max(c.offset);
    }
    let short: Vec<String> = (0..)
        .zip(ends)
        .filter(|(p, end)| **end > 0 && top.get(p).is_none_or(|c| c < *end))
        .map(|(p, end)| match top.get(&p) {
            Some(c) => format!("{topic}-{p} committed {c} of {end}"),
            None => format!("{topic}-{p} nothing committed of {end}"),
        })
        .collect();
    if short.is_empty() {
        Ok(())
    } else {
        Err(short.join(", "))
    }
}

fn measure_unavailability(history: &History, report: &mut Report) {
    let mut acks_ms: Vec<u64> = history
        .writes
        .iter()
        .filter(|w| matches!(w.outcome, Outcome::Acked { .. }))
        .map(|w| w.done_ms)
        .collect();
    acks_ms.sort_unstable();
    // Consecutive and sorted, so both ends rise and overlaps can be found by bisection.
    let mut windows: Vec<(u64, u64)> = Vec::with_capacity(acks_ms.len() + 1);
    let mut from_ms = 0;
    for ack_ms in acks_ms {
        windows.push((from_ms, ack_ms));
        from_ms = ack_ms;
    }
    windows.push((from_ms, history.workload_end_ms.max(from_ms)));
    let length_ms = |&(from, to): &(u64, u64)| to.saturating_sub(from);
    report.max_unavailable_ms = windows.iter().map(length_ms).max().unwrap_or(0);
    for span in &history.nemeses {
        // A zero-length (or backwards) span still happened: give it its millisecond.
        let end_ms = span.end_ms.max(span.start_ms.saturating_add(1));
        let first = windows.partition_point(|&(_, to)| to <= span.start_ms);
        let past = windows.partition_point(|&(from, _)| from < end_ms);
        let longest_ms = windows
            .get(first..past)
            .unwrap_or_default()
            .iter()
            .map(length_ms)
            .max()
            .unwrap_or(0);
        let entry = report
            .unavailable_ms_by_nemesis
            .entry(span.kind.clone())
            .or_insert(0);
        *entry = (*entry).max(longest_ms);
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
