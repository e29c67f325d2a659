//! Partition assignors, as pure functions: the group leader (a client, as in Kafka) runs one over
//! every member's subscription and the partition counts from its metadata, and sends the result
//! through SyncGroup; the broker only forwards it.
//!
//! - `range` (Kafka's RangeAssignor): per topic, the members subscribed to it in order, each taking
//!   a contiguous range; the first `partitions % members` take one extra.
//! - `roundrobin` (Kafka's RoundRobinAssignor): every subscribed partition in (topic, partition)
//!   order dealt to the members in order, skipping members not subscribed to its topic.
//! - `cooperative-sticky`: each member keeps what it owned while the result stays balanced within
//!   one (for members with the same subscription), the rest goes to the least-loaded members;
//!   then, for the cooperative protocol, a partition that changes owner is left out of *both*
//!   assignments in this generation: its old owner revokes it and rejoins, and the next
//!   generation gives it to the new owner.
//!
//! Members are ordered by `group_instance_id` when they have one, else by member id, so a static
//! member keeps its place across restarts. Partitions of topics missing from `partitions` (not in
//! the metadata) are assigned to nobody. Every function is deterministic.

use std::collections::{BTreeMap, BTreeSet};

use crate::client::TopicPartition;

use super::protocol::Subscription;

/// The assignors spool's consumer implements (Kafka's protocol names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Assignor {
    Range,
    RoundRobin,
    CooperativeSticky,
}

impl Assignor {
    /// The JoinGroup protocol name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Range => "range",
            Self::RoundRobin => "roundrobin",
            Self::CooperativeSticky => "cooperative-sticky",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "range" => Self::Range,
            "roundrobin" => Self::RoundRobin,
            "cooperative-sticky" => Self::CooperativeSticky,
            _ => return None,
        })
    }

    /// Whether the assignor rebalances cooperatively (revoking only what moves).
    pub fn is_cooperative(self) -> bool {
        self == Self::CooperativeSticky
    }

    /// Runs the assignor.
    pub fn assign(self, members: &[Member], partitions: &BTreeMap<String, i32>) -> AssignmentMap {
        match self {
            Self::Range => range(members, partitions),
            Self::RoundRobin => round_robin(members, partitions),
            Self::CooperativeSticky => cooperative(members, &sticky(members, partitions)),
        }
    }
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub subscription: Subscription,
}

impl Member {
    fn sort_key(&self) -> (&str, &str) {
        (
            self.group_instance_id.as_deref().unwrap_or(&self.member_id),
            &self.member_id,
        )
    }

    fn subscribes(&self, topic: &str) -> bool {
        self.subscription.topics.iter().any(|t| t == topic)
    }
}

/// member id → its partitions (sorted); every member has an entry, possibly empty.
pub type AssignmentMap = BTreeMap<String, Vec<TopicPartition>>;

fn sorted(members: &[Member]) -> Vec<&Member> {
    let mut m: Vec<&Member> = members.iter().collect();
    m.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    m
}

fn empty_map(members: &[Member]) -> AssignmentMap {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// Every partition some member subscribes to, in (topic, partition) order.
fn subscribed_partitions<'a>(
    members: impl IntoIterator<Item = &'a Member>,
    partitions: &BTreeMap<String, i32>,
) -> Vec<TopicPartition> {
    let topics: BTreeSet<&str> = members
        .into_iter()
        .flat_map(|m| m.subscription.topics.iter().map(String::as_str))
        .collect();
    topics
        .into_iter()
        .flat_map(|t| {
            let n = partitions.get(t).copied().unwrap_or(0).max(0);
            (0..n).map(move |p| TopicPartition::new(t, p))
        })
        .collect()
}

/// Kafka's RangeAssignor.
pub fn range(members: &[Member], partitions: &BTreeMap<String, i32>) -> AssignmentMap {
    let mut out = empty_map(members);
    let members = sorted(members);
    for (topic, &count) in partitions {
        let subscribed: Vec<&&Member> = members.iter().filter(|m| m.subscribes(topic)).collect();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribed.len() as i32;
        let (per, extra) = (count / n, count % n);
        for (i, m) in subscribed.iter().enumerate() {
            let i = i as i32;
            let start = per * i + i.min(extra);
            let len = per + i32::from(i < extra);
            if let Some(list) = out.get_mut(&m.member_id) {
                list.extend((start..start + len).map(|p| TopicPartition::new(topic.clone(), p)));
            }
        }
    }
    out
}

/// Kafka's RoundRobinAssignor.
pub fn round_robin(members: &[Member], partitions: &BTreeMap<String, i32>) -> AssignmentMap {
    let mut out = empty_map(members);
    let members = sorted(members);
    if members.is_empty() {
        return out;
    }
    let mut next = 0usize;
    for tp in subscribed_partitions(members.iter().copied(), partitions) {
        // At most one full turn: someone subscribes to this topic, or it would not be listed.
        for _ in 0..members.len() {
            let m = members[next % members.len()];
            next += 1;
            if m.subscribes(&tp.topic) {
                if let Some(list) = out.get_mut(&m.member_id) {
                    list.push(tp.clone());
                }
                break;
            }
        }
    }
    out
}

/// The sticky, balanced target assignment (before the cooperative adjustment).
pub fn sticky(members: &[Member], partitions: &BTreeMap<String, i32>) -> AssignmentMap {
    let members = sorted(members);
    let all: BTreeSet<TopicPartition> = subscribed_partitions(members.iter().copied(), partitions)
        .into_iter()
        .collect();
    let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    let mut held: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); members.len()];
    // 1. Keep what each member owned, if it still exists, is still subscribed and nobody earlier
    //    in member order claimed it too.
    for (i, m) in members.iter().enumerate() {
        for tp in &m.subscription.owned_partitions {
            if all.contains(tp) && m.subscribes(&tp.topic) && !owner.contains_key(tp) {
                owner.insert(tp.clone(), i);
                held[i].insert(tp.clone());
            }
        }
    }
    // 2. The rest to the least-loaded eligible member.
    for tp in &all {
        if owner.contains_key(tp) {
            continue;
        }
        let best = (0..members.len())
            .filter(|&i| members[i].subscribes(&tp.topic))
            .min_by_key(|&i| (held[i].len(), i));
        if let Some(i) = best {
            owner.insert(tp.clone(), i);
            held[i].insert(tp.clone());
        }
    }
    // 3. Balance: move from a member to an eligible one holding at least two fewer, preferring
    //    partitions the giver did not own before. Each move lowers the sum of squared loads, so
    //    this ends.
    loop {
        let mut moved = false;
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(held[i].len()), i));
        'givers: for &a in &order {
            let owned_before: BTreeSet<&TopicPartition> =
                members[a].subscription.owned_partitions.iter().collect();
            let mut candidates: Vec<TopicPartition> = held[a].iter().cloned().collect();
            candidates.sort_by_key(|tp| (owned_before.contains(tp), std::cmp::Reverse(tp.clone())));
            for tp in candidates {
                let taker = (0..members.len())
                    .filter(|&b| {
                        members[b].subscribes(&tp.topic) && held[b].len() + 1 < held[a].len()
                    })
                    .min_by_key(|&b| (held[b].len(), b));
                if let Some(b) = taker {
                    held[a].remove(&tp);
                    held[b].insert(tp);
                    moved = true;
                    break 'givers;
                }
            }
        }
        if !moved {
            break;
        }
    }
    members
        .iter()
        .zip(held)
        .map(|(m, h)| (m.member_id.clone(), h.into_iter().collect()))
        .collect()
}

/// The cooperative adjustment: a partition owned by one member and targeted at another is given
/// to nobody this generation.
pub fn cooperative(members: &[Member], target: &AssignmentMap) -> AssignmentMap {
    let mut owned_by: BTreeMap<&TopicPartition, &str> = BTreeMap::new();
    for m in sorted(members) {
        for tp in &m.subscription.owned_partitions {
            owned_by.entry(tp).or_insert(&m.member_id);
        }
    }
    target
        .iter()
        .map(|(member, tps)| {
            let kept = tps
                .iter()
                .filter(|tp| owned_by.get(tp).is_none_or(|o| *o == member))
                .cloned()
                .collect();
            (member.clone(), kept)
        })
        .collect()
}

#[cfg(test)]
mod tests;
