//! Checks shared by the consumer-group tests: a group settled into a balanced assignment, every
//! acknowledged record printed by some member (at its offset, with its value), what was printed
//! twice and by whom. Each check reads the members' [`Output`]s only; waits are bounded by a
//! deadline that fails the test with every member's state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use spool_protocol::client::TopicPartition;

use crate::checker::Acked;
use crate::group_consumer::{wait_until, Event, GroupConsumer, MemberOptions, Output};
use crate::Broker;

/// Deadline for a group to settle or for records to be printed (far above what it takes).
pub const SETTLE: Duration = Duration::from_secs(60);

pub fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

pub fn all_partitions(topic: &str, partitions: i32) -> BTreeSet<TopicPartition> {
    (0..partitions).map(|p| tp(topic, p)).collect()
}

pub fn start_members(
    broker: &Broker,
    labels: &[&str],
    topic: &str,
    group: &str,
    opts: impl Fn(&str) -> MemberOptions,
) -> Vec<GroupConsumer> {
    labels
        .iter()
        .map(|l| GroupConsumer::start(broker, l, topic, group, &opts(l)))
        .collect()
}

pub fn refs(members: &[GroupConsumer]) -> Vec<&GroupConsumer> {
    members.iter().collect()
}

/// Whether `members` hold `all` between them, disjointly, `all.len() / members` each (±1), all
/// at the same generation. Returns that generation then.
pub fn balanced(members: &[&GroupConsumer], all: &BTreeSet<TopicPartition>) -> Option<i32> {
    let outs: Vec<Output> = members.iter().map(|m| m.snapshot()).collect();
    let generation = outs[0].generation()?;
    let mut union = BTreeSet::new();
    let mut total = 0;
    let fair = all.len() / members.len();
    for o in &outs {
        let owned = o.owned();
        if o.generation() != Some(generation) || owned.len() < fair || owned.len() > fair + 1 {
            return None;
        }
        total += owned.len();
        union.extend(owned);
    }
    (total == all.len() && &union == all).then_some(generation)
}

/// Waits until [`balanced`] holds and returns the generation.
pub fn wait_balanced(
    what: &str,
    members: &[&GroupConsumer],
    all: &BTreeSet<TopicPartition>,
) -> i32 {
    let mut generation = None;
    wait_until(what, SETTLE, members, || {
        generation = balanced(members, all);
        generation.is_some()
    });
    generation.expect("set when the wait ended")
}

/// Every (partition, offset) printed by any of `outs`, with how many times and by whom.
pub fn printed_by(outs: &[(&str, &Output)]) -> BTreeMap<(TopicPartition, i64), Vec<String>> {
    let mut by: BTreeMap<(TopicPartition, i64), Vec<String>> = BTreeMap::new();
    for (label, o) in outs {
        for r in &o.records {
            by.entry((r.tp.clone(), r.offset))
                .or_default()
                .push((*label).to_owned());
        }
    }
    by
}

/// Acknowledged records not printed (at their offset, with their value) by any member.
pub fn missing(topic: &str, acked: &[Acked], outs: &[&Output]) -> Vec<String> {
    let values: HashMap<(TopicPartition, i64), Option<&str>> = outs
        .iter()
        .flat_map(|o| o.records.iter())
        .map(|r| ((r.tp.clone(), r.offset), r.value.as_deref()))
        .collect();
    acked
        .iter()
        .filter_map(|a| {
            let want = std::str::from_utf8(&a.value).expect("test values are UTF-8");
            match values.get(&(tp(topic, a.partition), a.offset)) {
                Some(Some(v)) if *v == want => None,
                got => Some(format!(
                    "{topic}-{} offset {}: acknowledged {want:?}, printed {got:?}",
                    a.partition, a.offset
                )),
            }
        })
        .collect()
}

pub fn all_printed(topic: &str, acked: &[Acked], members: &[&GroupConsumer]) -> bool {
    let outs: Vec<Output> = members.iter().map(|m| m.snapshot()).collect();
    missing(topic, acked, &outs.iter().collect::<Vec<_>>()).is_empty()
}

pub fn tps(list: &BTreeSet<TopicPartition>) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

/// Stops every member with SIGTERM; each must exit 0.
pub fn terminate_all(members: &[GroupConsumer]) {
    for m in members {
        let status = m.terminate();
        assert!(
            status.success(),
            "member {} exited with {status} after SIGTERM\n{}",
            m.label(),
            m.summary()
        );
    }
}

/// `(partition, offset)`s printed more than once across `outs`, with who printed them; the first
/// few come with each member's history of that partition ([`history`]).
pub fn printed_twice(outs: &[(&str, &Output)]) -> Vec<String> {
    printed_by(outs)
        .into_iter()
        .filter(|(_, by)| by.len() > 1)
        .enumerate()
        .map(|(i, ((t, o), by))| {
            let mut line = format!("{t}@{o} printed by {by:?}");
            if i < HISTORIES_SHOWN {
                line.push_str(&history(outs, &t, o));
            }
            line
        })
        .collect()
}

/// Duplicates explained with a history in a failure message.
const HISTORIES_SHOWN: usize = 3;
/// Lines of a member's history shown on each side of the record in question.
const HISTORY_CONTEXT: usize = 4;

/// Each member's lines about partition `t` around its printing of `offset`, in the order they
/// were read (`#seq`): rebalance callbacks naming `t`, commits of `t`, and the record itself.
/// Stdout and stderr are separate pipes, so lines printed within a moment of each other may be
/// read out of order: a diagnosis aid, not evidence on its own.
pub fn history(outs: &[(&str, &Output)], t: &TopicPartition, offset: i64) -> String {
    let mut text = String::new();
    for (label, o) in outs {
        let mut lines: Vec<(u64, String)> = o
            .records
            .iter()
            .filter(|r| &r.tp == t && r.offset == offset)
            .map(|r| (r.seq, format!("printed {t}@{offset}")))
            .collect();
        let prints = lines.len();
        if prints == 0 {
            continue;
        }
        for e in &o.events {
            match e {
                Event::Assigned {
                    generation,
                    partitions,
                    seq,
                } if partitions.contains(t) => {
                    lines.push((*seq, format!("assigned generation={generation} (with {t})")))
                }
                Event::Revoked {
                    generation,
                    partitions,
                    seq,
                } if partitions.contains(t) => {
                    lines.push((*seq, format!("revoked generation={generation} (with {t})")))
                }
                Event::Committed { offsets, seq } => {
                    if let Some((_, c)) = offsets.iter().find(|(p, _)| p == t) {
                        lines.push((*seq, format!("committed {t}@{c}")));
                    }
                }
                _ => {}
            }
        }
        lines.sort();
        let at: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, (_, l))| l.starts_with("printed"))
            .map(|(i, _)| i)
            .collect();
        let from = at[0].saturating_sub(HISTORY_CONTEXT);
        let to = (at[prints - 1] + HISTORY_CONTEXT + 1).min(lines.len());
        text.push_str(&format!("\n      {label}:"));
        for (seq, l) in &lines[from..to] {
            text.push_str(&format!("\n        #{seq} {l}"));
        }
    }
    text
}
