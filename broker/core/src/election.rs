//! Leader elections and ISR changes when brokers are fenced or unfenced: the controller's
//! decision for one partition (DESIGN §7 "Elections", REPLICATION.md "Epochs and elections").
//!
//! Owns: [`reconcile`] — given one partition's committed state, the set of fenced brokers and the
//! topic's election policy, the partition change to write, or `None` when the partition already
//! fits. It is one rule for both directions: on fencing it removes fenced brokers from the ISR
//! and moves leadership off them; on unfencing it gives leaderless partitions a leader again. It
//! is a fixpoint: reconciling its own result changes nothing. And [`forget_lost_log`]: the change
//! when a broker registers after an unclean shutdown, its log possibly gone.
//!
//! Promises (asserted on every change it returns, and checked by the proptests below):
//! - the ISR stays a subset of the replicas. Fenced brokers leave it, except that [`reconcile`]
//!   never makes it empty: when every member is fenced, one stays — the leader if it is a member,
//!   else the first member — as Kafka keeps the last one standing, so the partition waits for
//!   the broker most likely to hold every acknowledged record instead of forgetting who did.
//!   Only [`forget_lost_log`] empties it, when that last member comes back without its log
//!   (KIP-903's case): then nobody may lead but an eligible leader, or an unclean election;
//! - a still-valid leader (unfenced, in the ISR) keeps its leadership; otherwise the new leader is
//!   the first replica in assignment order (the preferred replica first) that is in the ISR and
//!   unfenced; with none, the first unfenced eligible leader replica (below), which leads with
//!   an ISR of itself; with none, the partition has no leader ([`NO_LEADER`]) — unless the topic
//!   enables `unclean.leader.election.enable`, when the first unfenced replica leads and the ISR
//!   becomes just that leader (Kafka's rule; it may lack acknowledged records, which is why it is
//!   off by default and [`PartitionChange::unclean`] says so);
//! - eligible leader replicas (KIP-966, always on): while the ISR is smaller than
//!   `min.insync.replicas` the leader's high watermark does not advance (`replica`), so every
//!   member that leaves the ISR then still holds every committed record, and is kept as an
//!   eligible leader ([`eligible_leaders_after`]: the ISR and eligible set before, less the ISR
//!   after) — fenced or not, since a fenced broker that comes back still has its log — except a
//!   broker that registered after an unclean shutdown, which may have lost unsynced records. An
//!   ISR at min ISR or above empties the set. So the partition need not wait for the ISR's last
//!   member standing when another broker that has everything comes back;
//! - a broker that comes back to a leaderless partition whose ISR it is leads it again (the ISR
//!   member kept above, Kafka's behaviour);
//! - every leader change (including to and from [`NO_LEADER`]) bumps `leader_epoch` by exactly
//!   one, every change bumps `partition_epoch` by exactly one, and nothing else moves them.
//!
//! Never does: add a broker to the ISR (rejoining is the leader's request, after it caught up),
//! touch the replica set (reassignment), move a valid leader back to the preferred replica
//! (preferred-leader election is a separate decision), read the image or write records — the
//! controller maps its image to [`PartitionView`] and each [`PartitionChange`] to a record.
//!
//! The leader and the controller must resolve `min.insync.replicas` alike (the topic's value,
//! else the cluster default, which every node must be given the same): a leader that counted a
//! smaller one would advance its watermark with an ISR the controller considers short, and an
//! eligible leader could then lack what it exposed.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::topic_config::ResolvedTopicConfig;

/// A partition without a leader.
pub const NO_LEADER: i32 = -1;

/// One partition's committed replica set and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// Assignment order; the first is the preferred leader.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// KIP-966's eligible leader replicas (module docs): distinct replicas outside the ISR.
    pub eligible_leaders: Vec<i32>,
    /// A broker id, or [`NO_LEADER`].
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

/// The topic settings elections depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionPolicy {
    /// `unclean.leader.election.enable`: a replica outside the ISR may lead when no ISR member
    /// can. Off by default (DESIGN §7).
    pub unclean_leader_election_enable: bool,
    /// `min.insync.replicas`: below it, members leaving the ISR become eligible leaders.
    pub min_insync_replicas: u32,
}

impl From<&ResolvedTopicConfig> for ElectionPolicy {
    fn from(config: &ResolvedTopicConfig) -> Self {
        ElectionPolicy {
            unclean_leader_election_enable: config.unclean_leader_election_enable,
            min_insync_replicas: config.min_insync_replicas,
        }
    }
}

/// The partition's new state, to be written as one partition-change record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChange {
    /// A broker id, or [`NO_LEADER`].
    pub leader: i32,
    pub isr: Vec<i32>,
    pub eligible_leaders: Vec<i32>,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The leader was elected from outside the ISR (unclean election): records acknowledged
    /// before may be missing from it. The broker logs and counts these.
    pub unclean: bool,
}

/// A partition state no committed record should have produced; [`reconcile`] decides nothing
/// for it (the caller reports it).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MalformedPartition {
    #[error("the partition has no replicas")]
    NoReplicas,
    #[error("broker {0} is listed twice in the replicas or the ISR")]
    Duplicate(i32),
    #[error("the ISR is empty while a broker leads")]
    IsrEmpty,
    #[error("ISR member {0} is not a replica")]
    IsrNotReplica(i32),
    #[error("leader {0} is not in the ISR")]
    LeaderNotInIsr(i32),
    #[error("eligible leader {0} is listed twice, is not a replica, or is in the ISR")]
    BadEligibleLeader(i32),
    #[error("the leader or partition epoch cannot be bumped past {0}")]
    EpochExhausted(i32),
}

impl PartitionView {
    /// The invariants every committed partition state keeps: replicas non-empty and distinct,
    /// the ISR a distinct subset of them, the leader (when any) in the ISR. The ISR is empty only
    /// when its last member lost its log ([`forget_lost_log`]); then nobody leads.
    pub fn check(&self) -> Result<(), MalformedPartition> {
        if self.replicas.is_empty() {
            return Err(MalformedPartition::NoReplicas);
        }
        for list in [&self.replicas, &self.isr] {
            if let Some(b) = first_duplicate(list) {
                return Err(MalformedPartition::Duplicate(b));
            }
        }
        if self.isr.is_empty() && self.leader != NO_LEADER {
            return Err(MalformedPartition::IsrEmpty);
        }
        if let Some(b) = self.isr.iter().find(|b| !self.replicas.contains(b)) {
            return Err(MalformedPartition::IsrNotReplica(*b));
        }
        if self.leader != NO_LEADER && !self.isr.contains(&self.leader) {
            return Err(MalformedPartition::LeaderNotInIsr(self.leader));
        }
        let mut seen = BTreeSet::new();
        if let Some(b) = self
            .eligible_leaders
            .iter()
            .find(|b| !seen.insert(**b) || !self.replicas.contains(b) || self.isr.contains(b))
        {
            return Err(MalformedPartition::BadEligibleLeader(*b));
        }
        Ok(())
    }

    /// This partition after `change`.
    pub fn with(&self, change: &PartitionChange) -> PartitionView {
        PartitionView {
            replicas: self.replicas.clone(),
            isr: change.isr.clone(),
            eligible_leaders: change.eligible_leaders.clone(),
            leader: change.leader,
            leader_epoch: change.leader_epoch,
            partition_epoch: change.partition_epoch,
        }
    }
}

fn first_duplicate(list: &[i32]) -> Option<i32> {
    let mut seen = BTreeSet::new();
    list.iter().copied().find(|b| !seen.insert(*b))
}

/// The change `partition` needs given the `fenced` brokers (every registered broker that is
/// fenced, plus any replica id that is not registered at all) and those that registered after an
/// `unclean_shutdown` (never eligible leaders), or `Ok(None)` when it needs none.
pub fn reconcile(
    partition: &PartitionView,
    fenced: &BTreeSet<i32>,
    unclean_shutdown: &BTreeSet<i32>,
    policy: &ElectionPolicy,
) -> Result<Option<PartitionChange>, MalformedPartition> {
    partition.check()?;
    let alive = |b: &i32| !fenced.contains(b);
    let eligible = |b: &i32| {
        alive(b) && partition.eligible_leaders.contains(b) && !unclean_shutdown.contains(b)
    };

    let mut isr: Vec<i32> = partition.isr.iter().copied().filter(alive).collect();
    if isr.is_empty() && !partition.isr.is_empty() {
        // Never empty: keep the member most likely to hold every acknowledged record.
        let kept = if partition.isr.contains(&partition.leader) {
            partition.leader
        } else {
            partition.isr[0]
        };
        isr.push(kept);
    }

    let mut unclean = false;
    let leader_still_valid = partition.leader != NO_LEADER
        && alive(&partition.leader)
        && isr.contains(&partition.leader);
    let leader = if leader_still_valid {
        partition.leader
    } else if let Some(b) = planted_outside_isr(partition, &alive) {
        // Planted `elect-outside-isr`: the first live replica leads, and joins the ISR.
        if !isr.contains(&b) {
            isr.push(b);
        }
        let change = PartitionChange {
            leader: b,
            isr,
            eligible_leaders: Vec::new(),
            leader_epoch: partition.leader_epoch + i32::from(b != partition.leader),
            partition_epoch: partition.partition_epoch + 1,
            unclean: false,
        };
        return Ok(Some(change));
    } else if let Some(&b) = partition
        .replicas
        .iter()
        .find(|b| alive(b) && isr.contains(b))
    {
        b
    } else if let Some(&b) = partition.replicas.iter().find(|b| eligible(b)) {
        // KIP-966: it holds every committed record; it leads alone until others catch up.
        isr = vec![b];
        b
    } else if let Some(&b) = partition
        .replicas
        .iter()
        .find(|b| policy.unclean_leader_election_enable && alive(b))
    {
        unclean = true;
        isr = vec![b];
        b
    } else {
        NO_LEADER
    };

    let min_isr = usize::try_from(policy.min_insync_replicas).unwrap_or(usize::MAX);
    let eligible_leaders = if unclean {
        // The new leader may lack records others have: nobody's log is known to be complete.
        Vec::new()
    } else {
        eligible_leaders_after(partition, &isr, min_isr, |b| unclean_shutdown.contains(&b))
    };
    if leader == partition.leader
        && isr == partition.isr
        && eligible_leaders == partition.eligible_leaders
    {
        return Ok(None);
    }
    let leader_changed = leader != partition.leader;
    let leader_epoch = if leader_changed {
        next_epoch(partition.leader_epoch)?
    } else {
        partition.leader_epoch
    };
    let partition_epoch = next_epoch(partition.partition_epoch)?;
    let change = PartitionChange {
        leader,
        isr,
        eligible_leaders,
        leader_epoch,
        partition_epoch,
        unclean,
    };
    assert_transition(partition, &change, fenced, unclean_shutdown, policy);
    Ok(Some(change))
}

/// KIP-966's eligible leader replicas after the ISR becomes `new_isr` (Kafka's
/// `PartitionChangeBuilder` rule): with the ISR at or above min ISR (capped by the replication
/// factor) there are none; below it, every replica that was in the ISR or already eligible stays
/// eligible unless it is in the new ISR or `unclean_shutdown(broker)` says it registered after an
/// unclean shutdown. Those removed from the ISR while it was below min ISR had every committed
/// record (the watermark did not move without them), so they may lead when the ISR is gone.
pub fn eligible_leaders_after(
    before: &PartitionView,
    new_isr: &[i32],
    min_insync_replicas: usize,
    unclean_shutdown: impl Fn(i32) -> bool,
) -> Vec<i32> {
    let min_isr = min_insync_replicas.clamp(1, before.replicas.len().max(1));
    if new_isr.len() >= min_isr && !planted_eligible_at_min_isr() {
        return Vec::new();
    }
    before
        .replicas
        .iter()
        .copied()
        .filter(|b| before.isr.contains(b) || before.eligible_leaders.contains(b))
        .filter(|b| !new_isr.contains(b) && !unclean_shutdown(*b))
        .collect()
}

/// `epoch` + 1, or why a partition cannot take another.
fn next_epoch(epoch: i32) -> Result<i32, MalformedPartition> {
    epoch
        .checked_add(1)
        .ok_or(MalformedPartition::EpochExhausted(epoch))
}

/// The change for `partition` when `broker` registers after an unclean shutdown with its log
/// possibly gone (an empty or replaced disk: KIP-903's case, Kafka's
/// `handleBrokerUncleanShutdown`): it leaves the ISR — even as its last member, leaving the ISR
/// empty and the partition without a leader, since electing it would silently lose every
/// acknowledged record — and the eligible leaders. `None` when it is in neither, or when it is
/// the partition's only replica: no other copy could be waited for, so it leads again with what
/// it has (as Kafka's unclean recovery elects the last known leader when it is the only one).
/// Called after its previous registration was fenced, so it leads nothing.
pub fn forget_lost_log(
    partition: &PartitionView,
    broker: i32,
) -> Result<Option<PartitionChange>, MalformedPartition> {
    partition.check()?;
    if !partition.isr.contains(&broker) && !partition.eligible_leaders.contains(&broker) {
        return Ok(None);
    }
    if partition.replicas == [broker] {
        return Ok(None);
    }
    assert_ne!(partition.leader, broker, "a fenced broker leads");
    let partition_epoch = next_epoch(partition.partition_epoch)?;
    let change = PartitionChange {
        leader: partition.leader,
        isr: partition
            .isr
            .iter()
            .copied()
            .filter(|b| *b != broker)
            .collect(),
        eligible_leaders: partition
            .eligible_leaders
            .iter()
            .copied()
            .filter(|b| *b != broker)
            .collect(),
        leader_epoch: partition.leader_epoch,
        partition_epoch,
        unclean: false,
    };
    let after = partition.with(&change);
    assert!(after.check().is_ok(), "{partition:?} -> {change:?}");
    Ok(Some(change))
}

/// The leader the planted `elect-outside-isr` picks (`crate::planted`): the first live replica in
/// assignment order, ignoring the ISR. `None` unless this thread selected it.
#[cfg(feature = "planted-bugs")]
fn planted_outside_isr(partition: &PartitionView, alive: &impl Fn(&i32) -> bool) -> Option<i32> {
    use crate::planted::{election_planted, PlantedBug};
    if !election_planted(PlantedBug::ElectOutsideIsr) {
        return None;
    }
    partition.replicas.iter().copied().find(|b| alive(b))
}

#[cfg(not(feature = "planted-bugs"))]
fn planted_outside_isr(_: &PartitionView, _: &impl Fn(&i32) -> bool) -> Option<i32> {
    None
}

/// Whether this thread plants `eligible-at-min-isr` (`crate::planted`).
#[cfg(feature = "planted-bugs")]
fn planted_eligible_at_min_isr() -> bool {
    crate::planted::election_planted(crate::planted::PlantedBug::EligibleAtMinIsr)
}

#[cfg(not(feature = "planted-bugs"))]
fn planted_eligible_at_min_isr() -> bool {
    false
}

/// Pair assertions on what [`reconcile`] returns: a bug here must stop the controller before
/// the record is proposed, not after every broker applied it.
fn assert_transition(
    before: &PartitionView,
    change: &PartitionChange,
    fenced: &BTreeSet<i32>,
    unclean_shutdown: &BTreeSet<i32>,
    policy: &ElectionPolicy,
) {
    if let Err(e) = check_transition(before, change, fenced, unclean_shutdown, policy) {
        panic!("election produced a bad change ({e}): {before:?} -> {change:?}, fenced {fenced:?}");
    }
}

/// The rules every change must keep; `Err` names the first it breaks. Separate from
/// [`reconcile`] so that tests can show it rejects planted bad changes.
fn check_transition(
    before: &PartitionView,
    change: &PartitionChange,
    fenced: &BTreeSet<i32>,
    unclean_shutdown: &BTreeSet<i32>,
    policy: &ElectionPolicy,
) -> Result<(), String> {
    let after = before.with(change);
    after.check().map_err(|e| e.to_string())?;
    if after.isr.is_empty() && !before.isr.is_empty() {
        return Err("the ISR became empty".into());
    }
    if after.leader != NO_LEADER && fenced.contains(&after.leader) {
        return Err(format!("leader {} is fenced", after.leader));
    }
    // A fenced member may stay only as the ISR's last one.
    if after.isr.len() > 1 && after.isr.iter().any(|b| fenced.contains(b)) {
        return Err(format!("fenced brokers left in the ISR {:?}", after.isr));
    }
    let leader_changed = after.leader != before.leader;
    if after.leader_epoch != before.leader_epoch + i32::from(leader_changed) {
        return Err(format!(
            "leader epoch {} -> {} with the leader {}",
            before.leader_epoch,
            after.leader_epoch,
            if leader_changed {
                "changed"
            } else {
                "unchanged"
            }
        ));
    }
    if after.partition_epoch != before.partition_epoch + 1 {
        return Err(format!(
            "partition epoch {} -> {}",
            before.partition_epoch, after.partition_epoch
        ));
    }
    let from_isr = after.leader == NO_LEADER || before.isr.contains(&after.leader);
    let from_eligible = before.eligible_leaders.contains(&after.leader)
        && !unclean_shutdown.contains(&after.leader)
        && after.isr == [after.leader];
    let isr_shrank = after.isr.iter().all(|b| before.isr.contains(b));
    if change.unclean {
        if !policy.unclean_leader_election_enable {
            return Err("unclean election while it is disabled".into());
        }
        if from_isr || after.isr != [after.leader] {
            return Err("an unclean election must lead from outside the ISR, alone".into());
        }
    } else if !(from_eligible || (from_isr && isr_shrank)) {
        return Err(format!(
            "leader {} / ISR {:?} not drawn from the ISR {:?} or the eligible leaders {:?}",
            after.leader, after.isr, before.isr, before.eligible_leaders
        ));
    }
    // Eligible leaders come only from the ISR or the eligible set before, never after an
    // unclean shutdown, and only while the ISR is below min ISR.
    let min_isr = usize::try_from(policy.min_insync_replicas)
        .unwrap_or(usize::MAX)
        .clamp(1, after.replicas.len().max(1));
    if let Some(b) = after.eligible_leaders.iter().find(|b| {
        !(before.isr.contains(b) || before.eligible_leaders.contains(b))
            || unclean_shutdown.contains(b)
    }) {
        return Err(format!("broker {b} became an eligible leader from nowhere"));
    }
    if after.isr.len() >= min_isr && !after.eligible_leaders.is_empty() {
        return Err(format!(
            "eligible leaders {:?} kept with an ISR {:?} at min ISR",
            after.eligible_leaders, after.isr
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLEAN: ElectionPolicy = ElectionPolicy {
        unclean_leader_election_enable: false,
        min_insync_replicas: 2,
    };
    const UNCLEAN: ElectionPolicy = ElectionPolicy {
        unclean_leader_election_enable: true,
        min_insync_replicas: 2,
    };

    fn view(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionView {
        PartitionView {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            eligible_leaders: vec![],
            leader,
            leader_epoch: 4,
            partition_epoch: 9,
        }
    }

    /// Nobody registered after an unclean shutdown.
    const NONE: &BTreeSet<i32> = &BTreeSet::new();

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn fencing_the_leader_elects_the_first_isr_replica_in_assignment_order() {
        let p = view(&[1, 2, 3], &[3, 2, 1], 1);
        let c = reconcile(&p, &set(&[1]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            c,
            PartitionChange {
                leader: 2,
                isr: vec![3, 2],
                eligible_leaders: vec![],
                leader_epoch: 5,
                partition_epoch: 10,
                unclean: false,
            }
        );
        assert_eq!(reconcile(&p.with(&c), &set(&[1]), NONE, &CLEAN), Ok(None));
    }

    #[test]
    fn fencing_a_follower_shrinks_the_isr_and_keeps_the_leader_epoch() {
        let p = view(&[1, 2, 3], &[1, 2, 3], 1);
        let c = reconcile(&p, &set(&[3]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.isr.as_slice()), (1, &[1, 2][..]));
        assert_eq!((c.leader_epoch, c.partition_epoch), (4, 10));
        // A fenced broker outside the ISR, or outside the replicas, changes nothing.
        let p = view(&[1, 2, 3], &[1, 2], 1);
        assert_eq!(reconcile(&p, &set(&[3, 7]), NONE, &CLEAN), Ok(None));
    }

    #[test]
    fn the_last_isr_member_stays_and_leads_again_when_it_comes_back() {
        let p = view(&[1, 2, 3], &[2], 2);
        let c = reconcile(&p, &set(&[2]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.isr.as_slice()), (NO_LEADER, &[2][..]));
        assert_eq!((c.leader_epoch, c.partition_epoch), (5, 10));
        let leaderless = p.with(&c);
        // Replicas 1 and 3 are alive but out of the ISR: with unclean election off they wait.
        assert_eq!(reconcile(&leaderless, &set(&[2]), NONE, &CLEAN), Ok(None));
        // Broker 2 comes back.
        let back = reconcile(&leaderless, &set(&[]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((back.leader, back.isr.as_slice()), (2, &[2][..]));
        assert_eq!((back.leader_epoch, back.partition_epoch), (6, 11));
    }

    #[test]
    fn fencing_every_isr_member_at_once_keeps_the_leader() {
        let p = view(&[1, 2, 3], &[1, 3], 3);
        let c = reconcile(&p, &set(&[1, 3]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.isr.as_slice()), (NO_LEADER, &[3][..]));
    }

    #[test]
    fn unclean_election_only_when_enabled_and_then_the_isr_is_the_new_leader() {
        let p = view(&[1, 2, 3], &[1], NO_LEADER);
        assert_eq!(reconcile(&p, &set(&[1]), NONE, &CLEAN), Ok(None));
        let c = reconcile(&p, &set(&[1]), NONE, &UNCLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.isr.as_slice(), c.unclean), (2, &[2][..], true));
        // With an ISR member alive, the election is clean even when unclean is enabled.
        let p = view(&[1, 2, 3], &[1, 3], 1);
        let c = reconcile(&p, &set(&[1]), NONE, &UNCLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.unclean), (3, false));
    }

    /// KIP-966: members that leave an ISR below min ISR stay eligible (fenced or not); an
    /// eligible one leads when no ISR member can, alone; one that registered after an unclean
    /// shutdown is dropped and never elected; an ISR back at min ISR empties the set.
    #[test]
    fn eligible_leader_replicas_lead_when_the_isr_cannot() {
        // min ISR 2: fencing 3 leaves [1, 2], at min ISR: nobody eligible.
        let p = view(&[1, 2, 3], &[1, 2, 3], 1);
        let c = reconcile(&p, &set(&[3]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert!(c.eligible_leaders.is_empty());
        // Fencing 2 as well: [1] is below min ISR, so 2 (which left it then) is eligible; 3
        // left earlier, while the watermark still moved without it, so it is not.
        let p = p.with(&c);
        let c = reconcile(&p, &set(&[2, 3]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            (c.isr.as_slice(), c.eligible_leaders.as_slice()),
            (&[1][..], &[2][..])
        );
        // The last member standing is fenced: leaderless, it stays in the ISR.
        let p = p.with(&c);
        let all = set(&[1, 2, 3]);
        let c = reconcile(&p, &all, NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!((c.leader, c.isr.as_slice()), (NO_LEADER, &[1][..]));
        assert_eq!(c.eligible_leaders, [2]);
        let leaderless = p.with(&c);
        // 3 comes back: not eligible, so it waits (unclean election off).
        assert_eq!(
            reconcile(&leaderless, &set(&[1, 2]), NONE, &CLEAN),
            Ok(None)
        );
        // 2 comes back, but it registered after an unclean shutdown: it is dropped from the
        // eligible set and leads nothing.
        let unclean = reconcile(&leaderless, &set(&[1, 3]), &set(&[2]), &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            (unclean.leader, unclean.eligible_leaders.as_slice()),
            (NO_LEADER, &[][..])
        );
        // 2 comes back clean: it leads alone, one epoch later, and 1 becomes eligible.
        let c = reconcile(&leaderless, &set(&[1, 3]), NONE, &CLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            (
                c.leader,
                c.isr.as_slice(),
                c.eligible_leaders.as_slice(),
                c.unclean
            ),
            (2, &[2][..], &[1][..], false)
        );
        assert_eq!(c.leader_epoch, leaderless.leader_epoch + 1);
        let led = leaderless.with(&c);
        assert_eq!(
            reconcile(&led, &set(&[1, 3]), NONE, &CLEAN),
            Ok(None),
            "a fixpoint"
        );
        // An unclean election trusts nobody's log: the eligible set empties.
        let c = reconcile(&led, &set(&[1, 2]), NONE, &UNCLEAN)
            .expect("valid")
            .expect("a change");
        assert_eq!(
            (c.leader, c.unclean, c.eligible_leaders.as_slice()),
            (3, true, &[][..])
        );
    }

    /// KIP-903: a broker back without its log leaves the ISR even as its last member (nobody
    /// leads then, and an eligible replica may), and the eligible set; a sole replica stays.
    #[test]
    fn a_broker_that_lost_its_log_leaves_every_isr_but_a_sole_replica_stays() {
        let last = view(&[1, 2, 3], &[1], NO_LEADER);
        let c = forget_lost_log(&last, 1).expect("valid").expect("a change");
        assert_eq!((c.leader, c.isr.as_slice()), (NO_LEADER, &[][..]));
        assert_eq!((c.leader_epoch, c.partition_epoch), (4, 10));
        let lost = last.with(&c);
        assert_eq!(lost.check(), Ok(()));
        // Brokers 2 and 3 come back: neither is in the ISR or eligible, so nobody leads.
        assert_eq!(reconcile(&lost, &set(&[1]), NONE, &CLEAN), Ok(None));
        let p = PartitionView {
            eligible_leaders: vec![2],
            ..view(&[1, 2, 3], &[3], 3)
        };
        let c = forget_lost_log(&p, 2).expect("valid").expect("a change");
        assert_eq!(
            (c.leader, c.isr.as_slice(), c.eligible_leaders.as_slice()),
            (3, &[3][..], &[][..])
        );
        assert_eq!(forget_lost_log(&p, 1), Ok(None), "in neither");
        assert_eq!(
            forget_lost_log(&view(&[1], &[1], NO_LEADER), 1),
            Ok(None),
            "sole replica"
        );
    }

    #[test]
    fn malformed_partitions_are_refused_not_decided() {
        let cases = [
            (view(&[], &[], NO_LEADER), MalformedPartition::NoReplicas),
            (view(&[1, 1], &[1], 1), MalformedPartition::Duplicate(1)),
            (view(&[1, 2], &[], 1), MalformedPartition::IsrEmpty),
            (
                view(&[1, 2], &[1, 5], 1),
                MalformedPartition::IsrNotReplica(5),
            ),
            (
                view(&[1, 2], &[1], 2),
                MalformedPartition::LeaderNotInIsr(2),
            ),
            (
                PartitionView {
                    eligible_leaders: vec![1],
                    ..view(&[1, 2], &[1], 1)
                },
                MalformedPartition::BadEligibleLeader(1),
            ),
            (
                PartitionView {
                    eligible_leaders: vec![7],
                    ..view(&[1, 2], &[1], 1)
                },
                MalformedPartition::BadEligibleLeader(7),
            ),
        ];
        for (p, e) in cases {
            assert_eq!(reconcile(&p, &set(&[1]), NONE, &CLEAN), Err(e));
        }
        let p = PartitionView {
            leader_epoch: i32::MAX,
            ..view(&[1, 2], &[1, 2], 1)
        };
        assert_eq!(
            reconcile(&p, &set(&[1]), NONE, &CLEAN),
            Err(MalformedPartition::EpochExhausted(i32::MAX))
        );
    }

    /// The checker behind the assertions and the proptest rejects each planted bad change.
    #[test]
    fn the_checker_rejects_planted_bad_changes() {
        let before = view(&[1, 2, 3], &[1, 2], 1);
        let fenced = set(&[1]);
        let good = reconcile(&before, &fenced, NONE, &CLEAN)
            .expect("valid")
            .expect("change");
        assert_eq!(
            check_transition(&before, &good, &fenced, NONE, &CLEAN),
            Ok(())
        );
        let bad = [
            // The fenced broker still leads.
            PartitionChange {
                leader: 1,
                isr: vec![1, 2],
                leader_epoch: 4,
                ..good.clone()
            },
            // Leader from outside the ISR without saying unclean.
            PartitionChange {
                leader: 3,
                isr: vec![3],
                ..good.clone()
            },
            // An unclean election while it is disabled.
            PartitionChange {
                leader: 3,
                isr: vec![3],
                unclean: true,
                ..good.clone()
            },
            // The leader changed but its epoch did not.
            PartitionChange {
                leader_epoch: 4,
                ..good.clone()
            },
            // The epoch jumped by two.
            PartitionChange {
                leader_epoch: 6,
                ..good.clone()
            },
            // The partition epoch did not move.
            PartitionChange {
                partition_epoch: 9,
                ..good.clone()
            },
            // An empty ISR.
            PartitionChange {
                leader: NO_LEADER,
                isr: vec![],
                ..good.clone()
            },
            // A fenced broker left in the ISR.
            PartitionChange {
                isr: vec![1, 2],
                ..good.clone()
            },
            // The ISR grew.
            PartitionChange {
                isr: vec![2, 3],
                ..good.clone()
            },
            // The leader is not in the ISR.
            PartitionChange {
                isr: vec![1],
                ..good.clone()
            },
            // An eligible leader from nowhere (3 was never in the ISR).
            PartitionChange {
                eligible_leaders: vec![3],
                ..good.clone()
            },
        ];
        for change in bad {
            assert!(
                check_transition(&before, &change, &fenced, NONE, &CLEAN).is_err(),
                "{change:?}"
            );
        }
        // Eligible leaders: kept at min ISR; elected without being eligible, or after an
        // unclean shutdown; elected but not alone in the ISR.
        let before = PartitionView {
            eligible_leaders: vec![3],
            ..view(&[1, 2, 3], &[1], NO_LEADER)
        };
        let fenced = set(&[1]);
        let good = reconcile(&before, &fenced, NONE, &CLEAN)
            .expect("valid")
            .expect("change");
        assert_eq!((good.leader, good.isr.as_slice()), (3, &[3][..]));
        assert_eq!(
            check_transition(&before, &good, &fenced, NONE, &CLEAN),
            Ok(())
        );
        assert!(check_transition(&before, &good, &fenced, &set(&[3]), &CLEAN).is_err());
        let at_min = view(&[1, 2, 3], &[1, 2, 3], 1);
        let kept = PartitionChange {
            leader: 1,
            isr: vec![1, 2],
            eligible_leaders: vec![3],
            leader_epoch: 4,
            partition_epoch: 10,
            unclean: false,
        };
        assert!(check_transition(&at_min, &kept, &set(&[3]), NONE, &CLEAN).is_err());
        let not_eligible = PartitionChange {
            leader: 2,
            isr: vec![2],
            ..good.clone()
        };
        assert!(check_transition(&before, &not_eligible, &fenced, NONE, &CLEAN).is_err());
        let not_alone = PartitionChange {
            isr: vec![3, 1],
            ..good.clone()
        };
        assert!(check_transition(&before, &not_alone, &fenced, NONE, &CLEAN).is_err());
    }

    fn any_partition() -> impl Strategy<Value = PartitionView> {
        // Replicas: a shuffled distinct subset of brokers 0..6; ISR: a non-empty shuffled subset
        // of them; leader: an ISR member or none.
        (
            Just((0..6).collect::<Vec<i32>>()).prop_shuffle(),
            1usize..=5,
            any::<u64>(),
            any::<prop::sample::Index>(),
            0i32..100,
            0i32..100,
        )
            .prop_flat_map(|(all, n, isr_bits, leader_pick, le, pe)| {
                let replicas: Vec<i32> = all[..n].to_vec();
                let mut isr: Vec<i32> = replicas
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| isr_bits >> i & 1 == 1)
                    .map(|(_, b)| *b)
                    .collect();
                if isr.is_empty() {
                    isr.push(replicas[0]);
                }
                let leader_options: Vec<i32> = isr.iter().copied().chain([NO_LEADER]).collect();
                let leader = *leader_pick.get(&leader_options);
                Just(isr).prop_shuffle().prop_map(move |isr| PartitionView {
                    replicas: replicas.clone(),
                    isr,
                    eligible_leaders: vec![],
                    leader,
                    leader_epoch: le,
                    partition_epoch: pe,
                })
            })
            .prop_filter("leader must be an ISR member", |p| p.check().is_ok())
    }

    proptest! {
        #[test]
        fn fence_and_unfence_sequences_keep_every_invariant(
            start in any_partition(),
            initially_fenced in proptest::collection::btree_set(0i32..7, 0..3),
            events in proptest::collection::vec((any::<bool>(), 0i32..7), 1..40),
            unclean_enabled in any::<bool>(),
            unclean_shutdown in proptest::collection::btree_set(0i32..7, 0..2),
        ) {
            let policy = ElectionPolicy { unclean_leader_election_enable: unclean_enabled, min_insync_replicas: 2 };
            let mut p = start;
            let mut fenced = initially_fenced;
            for (fence, broker) in events {
                if fence { fenced.insert(broker); } else { fenced.remove(&broker); }
                let before = p.clone();
                match reconcile(&before, &fenced, &unclean_shutdown, &policy).map_err(|e| TestCaseError::fail(e.to_string()))? {
                    None => {}
                    Some(change) => {
                        if let Err(e) = check_transition(&before, &change, &fenced, &unclean_shutdown, &policy) {
                            return Err(TestCaseError::fail(e));
                        }
                        p = before.with(&change);
                        prop_assert_eq!(reconcile(&p, &fenced, &unclean_shutdown, &policy), Ok(None), "not a fixpoint");
                    }
                }
                // Whatever happened, the partition now fits the fenced set:
                prop_assert!(p.check().is_ok());
                prop_assert!(p.leader == NO_LEADER || !fenced.contains(&p.leader));
                prop_assert!(
                    p.isr.len() == 1 || p.isr.iter().all(|b| !fenced.contains(b)),
                    "fenced brokers left in the ISR: {:?}", p
                );
                prop_assert!(p.leader_epoch >= before.leader_epoch);
                prop_assert!(p.partition_epoch >= before.partition_epoch);
                // ... and is available whenever it may be: a live ISR member, or (unclean on)
                // any live replica, means a leader.
                let live_isr = p.isr.iter().any(|b| !fenced.contains(b));
                let live_replica = p.replicas.iter().any(|b| !fenced.contains(b));
                if live_isr || (unclean_enabled && live_replica) {
                    prop_assert!(p.leader != NO_LEADER, "leaderless with a candidate: {:?}", p);
                }
            }
        }
    }
}
