//! Controlled shutdown on the controller (Kafka's `handleBrokerInControlledShutdown`, DESIGN §7
//! "Controlled shutdown"): a broker that heartbeats with `want_shutdown` is recorded in
//! controlled shutdown (that is [`crate::validate::validate_heartbeat`]'s `BrokerHeartbeat`
//! record); from then on it counts as ineligible — for leadership here, for ISR expansion in
//! `spool_core::isr_change` — and the partition changes [`crate::failover`] writes move its
//! leaderships to other live ISR members and take it out of every ISR, as Kafka does both.
//!
//! Owns: [`decide`], one partition's change given the fenced brokers and those in controlled
//! shutdown — spool-core's [`reconcile`] run twice, once with the shutting-down brokers counted
//! as fenced and, only where that would leave the partition without a leader, once without; and
//! [`should_shut_down`], the heartbeat answer's `should_shutdown`.
//! Promises: pure functions of the image. [`decide`] is a fixpoint, like [`reconcile`]: deciding
//! again over its own result changes nothing, so the active controller's per-tick reconcile pass
//! proposes whatever a lost or throttled proposal left undone and never repeats a change. It
//! never makes an ISR empty, never leaves a partition leaderless when a live broker in its ISR
//! could lead it (a broker in controlled shutdown that is its only live ISR member keeps leading),
//! and never elects uncleanly while such a broker could lead cleanly. [`should_shut_down`] is true
//! exactly when [`decide`] has nothing left to move off the broker in the image it reads.
//! Never does: propose, read a clock, or change what fencing decides: with nobody in controlled
//! shutdown [`decide`] is [`reconcile`] itself.

use std::collections::BTreeSet;

use spool_core::election::{
    reconcile, ElectionPolicy, MalformedPartition, PartitionChange, PartitionView, NO_LEADER,
};

use crate::image::MetadataImage;

/// Registered, unfenced brokers the image shows in controlled shutdown. (A fenced one is
/// already ineligible as fenced.)
pub fn shutting_down_brokers(image: &MetadataImage) -> BTreeSet<i32> {
    image
        .brokers()
        .filter(|b| b.in_controlled_shutdown && !b.fenced)
        .map(|b| b.broker_id)
        .collect()
}

/// The change `partition` needs when `fenced` brokers may neither lead nor stay in an ISR and
/// `shutting_down` brokers should neither, unless nobody else can lead; `Ok(None)`: none.
/// Brokers that registered after an `unclean_shutdown` are never eligible leaders
/// (`spool_core::election`).
///
/// First pass: [`reconcile`] with the shutting-down brokers counted as fenced and unclean
/// election off. If that leaves a leader, it is the answer: leadership moved to (or stayed with)
/// a live ISR member not shutting down, with the leader epoch bumped when it moved, and the
/// shutting-down brokers left the ISR. Otherwise no eligible ISR member exists, and the answer
/// is [`reconcile`] over the fenced brokers alone, with the topic's own policy: a shutting-down
/// leader keeps leading, a shutting-down ISR member may be elected, and an unclean election
/// happens only when no live ISR member at all could lead — so a controlled shutdown never
/// costs acknowledged records.
pub fn decide(
    partition: &PartitionView,
    fenced: &BTreeSet<i32>,
    shutting_down: &BTreeSet<i32>,
    unclean_shutdown: &BTreeSet<i32>,
    policy: &ElectionPolicy,
) -> Result<Option<PartitionChange>, MalformedPartition> {
    if shutting_down.iter().all(|b| fenced.contains(b)) {
        return reconcile(partition, fenced, unclean_shutdown, policy);
    }
    let ineligible: BTreeSet<i32> = fenced.union(shutting_down).copied().collect();
    let clean = ElectionPolicy {
        unclean_leader_election_enable: false,
        ..*policy
    };
    let strict = reconcile(partition, &ineligible, unclean_shutdown, &clean)?;
    let leader_after = strict.as_ref().map_or(partition.leader, |c| c.leader);
    if leader_after != NO_LEADER {
        return Ok(strict);
    }
    // Why this is still a fixpoint: the first pass found no live ISR member outside
    // `shutting_down`, and the fallback's ISR is a subset of this one (or, after an unclean
    // election, just its leader), so the next round's first pass finds none either and comes
    // here again, where `reconcile` over its own result answers `None`.
    reconcile(partition, fenced, unclean_shutdown, policy)
}

/// Whether `broker_id`'s heartbeat answer says it may stop: the image shows it in controlled
/// shutdown (at its current epoch, which the caller has checked) and it leads, or is an ISR
/// member of, no partition that has another eligible ISR member — one registered, unfenced and
/// not shutting down itself. That is, every leadership that could move has moved, and no
/// partition's acks=all waits on it: stopping leaves clients a leader change, not a timeout.
/// Read it from the committed image, so it turns true only once those changes are committed.
pub fn should_shut_down(image: &MetadataImage, broker_id: i32) -> bool {
    let Some(me) = image.broker(broker_id) else {
        return false;
    };
    if !me.in_controlled_shutdown {
        return false;
    }
    let eligible = |b: i32| {
        b != broker_id
            && image
                .broker(b)
                .is_some_and(|r| !r.fenced && !r.in_controlled_shutdown)
    };
    image.topics().all(|t| {
        t.partitions.iter().all(|p| {
            let involved = p.leader == broker_id || p.isr.contains(&broker_id);
            !involved || !p.isr.iter().any(|b| eligible(*b))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: ElectionPolicy = ElectionPolicy {
        unclean_leader_election_enable: false,
        min_insync_replicas: 1,
    };
    const UNCLEAN: ElectionPolicy = ElectionPolicy {
        unclean_leader_election_enable: true,
        min_insync_replicas: 1,
    };

    fn view(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionView {
        PartitionView {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            eligible_leaders: vec![],
            leader,
            leader_epoch: 3,
            partition_epoch: 7,
        }
    }

    /// Nobody registered after an unclean shutdown.
    const NONE: &BTreeSet<i32> = &BTreeSet::new();

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    /// `decide` applied until it answers `None`; panics if that takes more than one change.
    fn settle(
        p: &PartitionView,
        fenced: &[i32],
        shutting: &[i32],
        policy: &ElectionPolicy,
    ) -> PartitionView {
        let (f, s) = (set(fenced), set(shutting));
        let Some(c) = decide(p, &f, &s, NONE, policy).expect("valid") else {
            return p.clone();
        };
        let after = p.with(&c);
        assert_eq!(decide(&after, &f, &s, NONE, policy), Ok(None), "a fixpoint");
        after
    }

    #[test]
    fn a_shutting_down_leader_hands_over_to_the_first_live_isr_replica() {
        let after = settle(&view(&[1, 2, 3], &[1, 2, 3], 1), &[], &[1], &CLEAN);
        assert_eq!((after.leader, after.isr.as_slice()), (2, &[2, 3][..]));
        assert_eq!((after.leader_epoch, after.partition_epoch), (4, 8));
    }

    #[test]
    fn a_shutting_down_follower_leaves_the_isr_and_the_leader_epoch_stays() {
        let after = settle(&view(&[1, 2, 3], &[1, 2, 3], 2), &[], &[1], &CLEAN);
        assert_eq!((after.leader, after.isr.as_slice()), (2, &[2, 3][..]));
        assert_eq!((after.leader_epoch, after.partition_epoch), (3, 8));
    }

    #[test]
    fn the_only_live_isr_member_keeps_leading_even_when_shutting_down() {
        let p = view(&[1, 2], &[1], 1);
        assert_eq!(decide(&p, &set(&[]), &set(&[1]), NONE, &CLEAN), Ok(None));
        // Both ISR members shutting down: neither is a better leader than the other.
        let p = view(&[1, 2, 3], &[1, 2], 1);
        assert_eq!(
            decide(&p, &set(&[3]), &set(&[1, 2]), NONE, &CLEAN),
            Ok(None)
        );
        // The other member fenced: it leaves the ISR, the shutting-down leader stays.
        let after = settle(&view(&[1, 2], &[1, 2], 1), &[2], &[1], &CLEAN);
        assert_eq!((after.leader, after.isr.as_slice()), (1, &[1][..]));
        assert_eq!(after.leader_epoch, 3);
    }

    #[test]
    fn a_leaderless_partition_takes_a_shutting_down_isr_member_over_no_leader() {
        let after = settle(&view(&[1, 2], &[2], NO_LEADER), &[], &[2], &CLEAN);
        assert_eq!((after.leader, after.leader_epoch), (2, 4));
    }

    #[test]
    fn no_unclean_election_while_a_shutting_down_isr_member_can_lead() {
        // Replica 3 is live but out of the ISR; with unclean election on, fencing alone would
        // not pick it either while broker 1 (in the ISR) is alive.
        let after = settle(&view(&[3, 1], &[1], 1), &[], &[1], &UNCLEAN);
        assert_eq!((after.leader, after.isr.as_slice()), (1, &[1][..]));
        // Once broker 1 is fenced, the unclean rule applies as it always does.
        let after = settle(&view(&[3, 1], &[1], 1), &[1], &[], &UNCLEAN);
        assert_eq!(after.leader, 3);
    }

    #[test]
    fn with_nobody_shutting_down_it_is_the_fencing_decision() {
        for (p, fenced) in [
            (view(&[1, 2, 3], &[1, 2, 3], 1), set(&[1])),
            (view(&[1, 2], &[1], NO_LEADER), set(&[])),
            (view(&[1, 2], &[2], 2), set(&[2])),
        ] {
            assert_eq!(
                decide(&p, &fenced, &set(&[]), NONE, &UNCLEAN),
                reconcile(&p, &fenced, NONE, &UNCLEAN)
            );
            // A shutting-down broker that is also fenced adds nothing.
            assert_eq!(
                decide(&p, &fenced, &fenced, NONE, &CLEAN),
                reconcile(&p, &fenced, NONE, &CLEAN)
            );
        }
    }
}
