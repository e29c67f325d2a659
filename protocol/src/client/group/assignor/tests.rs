//! Assignor tests: Kafka's documented examples for range and round-robin, and properties for all
//! three (every subscribed partition exactly once, balanced within one, sticky keeps what it can,
//! cooperative never hands a partition straight from one owner to another).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn member(id: &str, topics: &[&str], owned: &[(&str, i32)]) -> Member {
    Member {
        member_id: id.into(),
        group_instance_id: None,
        subscription: Subscription {
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            user_data: None,
            owned_partitions: owned
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
        },
    }
}

fn parts(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
}

fn names(tps: &[TopicPartition]) -> Vec<String> {
    tps.iter().map(ToString::to_string).collect()
}

#[test]
fn range_matches_kafkas_example() {
    // Kafka's RangeAssignor javadoc: C0, C1 subscribe t0, t1 with 3 partitions each.
    let m = [
        member("C0", &["t0", "t1"], &[]),
        member("C1", &["t0", "t1"], &[]),
    ];
    let a = range(&m, &parts(&[("t0", 3), ("t1", 3)]));
    assert_eq!(names(&a["C0"]), ["t0-0", "t0-1", "t1-0", "t1-1"]);
    assert_eq!(names(&a["C1"]), ["t0-2", "t1-2"]);
}

#[test]
fn round_robin_matches_kafkas_example() {
    // Kafka's RoundRobinAssignor javadoc, same subscriptions.
    let m = [
        member("C1", &["t0", "t1"], &[]),
        member("C0", &["t0", "t1"], &[]),
    ];
    let a = round_robin(&m, &parts(&[("t0", 3), ("t1", 3)]));
    assert_eq!(names(&a["C0"]), ["t0-0", "t0-2", "t1-1"]);
    assert_eq!(names(&a["C1"]), ["t0-1", "t1-0", "t1-2"]);
}

#[test]
fn round_robin_skips_members_not_subscribed() {
    let m = [member("C0", &["t0"], &[]), member("C1", &["t0", "t1"], &[])];
    let a = round_robin(&m, &parts(&[("t0", 1), ("t1", 2)]));
    assert_eq!(names(&a["C0"]), ["t0-0"]);
    assert_eq!(names(&a["C1"]), ["t1-0", "t1-1"]);
}

#[test]
fn cooperative_moves_in_two_generations() {
    // A owns all 4; B joins. The target gives B two of them; generation 1 gives them to nobody,
    // and once A has revoked them (owns only its two), generation 2 gives them to B.
    let all = [("t", 0), ("t", 1), ("t", 2), ("t", 3)];
    let p = parts(&[("t", 4)]);
    let g1 = Assignor::CooperativeSticky
        .assign(&[member("A", &["t"], &all), member("B", &["t"], &[])], &p);
    assert_eq!(g1["A"].len(), 2);
    assert!(
        g1["B"].is_empty(),
        "nothing moves straight from A to B: {g1:?}"
    );
    let a_kept: Vec<(&str, i32)> = g1["A"].iter().map(|tp| ("t", tp.partition)).collect();
    let g2 = Assignor::CooperativeSticky.assign(
        &[member("A", &["t"], &a_kept), member("B", &["t"], &[])],
        &p,
    );
    assert_eq!(g2["A"], g1["A"]);
    assert_eq!(g2["B"].len(), 2);
}

fn members_strategy() -> impl Strategy<Value = (Vec<Member>, BTreeMap<String, i32>)> {
    let topics = proptest::collection::btree_map("[a-c]", 0i32..12, 1..3);
    (topics, 1usize..7, any::<u64>()).prop_map(|(topics, n, seed)| {
        let names: Vec<String> = topics.keys().cloned().collect();
        let all: Vec<TopicPartition> = topics
            .iter()
            .flat_map(|(t, n)| (0..*n).map(move |p| TopicPartition::new(t.clone(), p)))
            .collect();
        // Previous owners: a pseudo-random member (or none) per partition, so ownership is a
        // valid previous assignment.
        let mut owned: Vec<Vec<TopicPartition>> = vec![Vec::new(); n];
        let mut x = seed | 1;
        for tp in &all {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let who = (x % (n as u64 + 1)) as usize;
            if who < n {
                owned[who].push(tp.clone());
            }
        }
        let members = owned
            .into_iter()
            .enumerate()
            .map(|(i, owned)| Member {
                member_id: format!("m{i}"),
                group_instance_id: None,
                subscription: Subscription {
                    topics: names.clone(),
                    user_data: None,
                    owned_partitions: owned,
                },
            })
            .collect();
        (members, topics)
    })
}

fn check_exactly_once_and_balanced(
    a: &AssignmentMap,
    members: &[Member],
    partitions: &BTreeMap<String, i32>,
    per_topic: bool,
) -> Result<(), TestCaseError> {
    let mut seen = BTreeSet::new();
    for tps in a.values() {
        for tp in tps {
            prop_assert!(seen.insert(tp.clone()), "{tp} assigned twice");
        }
    }
    let expected: BTreeSet<TopicPartition> = subscribed_partitions(members, partitions)
        .into_iter()
        .collect();
    prop_assert_eq!(&seen, &expected);
    prop_assert_eq!(a.len(), members.len());
    let counts = |f: &dyn Fn(&TopicPartition) -> bool| -> Vec<usize> {
        a.values()
            .map(|tps| tps.iter().filter(|tp| f(tp)).count())
            .collect()
    };
    let spreads: Vec<Vec<usize>> = if per_topic {
        partitions
            .keys()
            .map(|t| counts(&|tp: &TopicPartition| &tp.topic == t))
            .collect()
    } else {
        vec![counts(&|_| true)]
    };
    for c in spreads {
        let (min, max) = (
            c.iter().min().copied().unwrap_or(0),
            c.iter().max().copied().unwrap_or(0),
        );
        prop_assert!(max - min <= 1, "unbalanced: {:?}", c);
    }
    Ok(())
}

proptest! {
    #[test]
    fn range_assigns_each_once_balanced_per_topic((members, partitions) in members_strategy()) {
        check_exactly_once_and_balanced(&range(&members, &partitions), &members, &partitions, true)?;
    }

    #[test]
    fn round_robin_assigns_each_once_balanced((members, partitions) in members_strategy()) {
        check_exactly_once_and_balanced(&round_robin(&members, &partitions), &members, &partitions, false)?;
    }

    #[test]
    fn sticky_is_balanced_and_keeps_what_it_can((members, partitions) in members_strategy()) {
        let target = sticky(&members, &partitions);
        check_exactly_once_and_balanced(&target, &members, &partitions, false)?;
        let total: usize = target.values().map(Vec::len).sum();
        let floor = total / members.len();
        for m in &members {
            let owned: BTreeSet<&TopicPartition> = m.subscription.owned_partitions.iter().collect();
            let kept = target[&m.member_id].iter().filter(|tp| owned.contains(tp)).count();
            prop_assert!(kept >= owned.len().min(floor), "{} kept {kept} of {} (floor {floor})", m.member_id, owned.len());
        }
    }

    #[test]
    fn cooperative_never_hands_over_directly((members, partitions) in members_strategy()) {
        let target = sticky(&members, &partitions);
        let adjusted = cooperative(&members, &target);
        let owner: BTreeMap<&TopicPartition, &str> = members
            .iter()
            .flat_map(|m| m.subscription.owned_partitions.iter().map(move |tp| (tp, m.member_id.as_str())))
            .collect();
        for (member, tps) in &adjusted {
            for tp in tps {
                prop_assert!(owner.get(tp).is_none_or(|o| o == member), "{tp} moved straight to {member}");
                prop_assert!(target[member].contains(tp));
            }
        }
        // A second generation, after the old owners revoked what they lost, is complete and
        // balanced, and revokes nothing more.
        let next: Vec<Member> = members
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.subscription.owned_partitions = adjusted[&m.member_id].clone();
                m
            })
            .collect();
        let second = Assignor::CooperativeSticky.assign(&next, &partitions);
        check_exactly_once_and_balanced(&second, &members, &partitions, false)?;
        for m in &next {
            for tp in &m.subscription.owned_partitions {
                prop_assert!(second[&m.member_id].contains(tp), "{} lost {tp} again", m.member_id);
            }
        }
    }
}
