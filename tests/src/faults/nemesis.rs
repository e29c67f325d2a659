//! The fault runs' nemeses: what harm each does to a three-node [`Cluster`] and how it is
//! healed. A run's nemeses are chosen from its seed ([`plan`]); the runner applies them in
//! cycles (quiet, harm, hold, heal) and records each active window in the history.
//!
//! Promises: every harm is healed by [`heal`] — processes restarted on the same data dir and
//! address, paused ones continued, iptables chains removed, ballast files deleted — and the
//! [`Harm`] values heal themselves when dropped where that is possible (a [`Cut`] removes its
//! chain); the nemeses touch only this run's brokers (by PID, through [`crate::broker::Broker`])
//! and the links between their loopback addresses.

use std::path::PathBuf;

use crate::cluster::Cluster;
use crate::netfilter::{Cut, Endpoint};
use crate::small_disk::SmallDisk;
use spool_broker::fail_stop::EXIT_METADATA_STORAGE_FAILED;

/// A small seeded generator (splitmix64): one seed gives one run's every choice.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next_u64() % from.len() as u64) as usize]
    }
}

/// One kind of harm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `kill -9` of a random broker; restarted on its data at the heal.
    KillRandom,
    /// `kill -9` of the leader of a random partition of the workload's topic.
    KillLeader,
    /// `kill -9` of the active controller.
    KillController,
    /// SIGSTOP of a random broker past its session timeout; SIGCONT at the heal.
    Pause,
    /// One broker cut from both others (iptables DROP on their internal ports): with three
    /// nodes this is also the majority/minority split.
    Isolate,
    /// One direction of one link cut (a → b dropped, b → a kept).
    OneWay,
    /// The disk under one broker's data dir filled (a loop-mounted filesystem).
    DiskFull,
    /// `kill -9` of a random broker and its data dir wiped; restarted empty at the heal.
    Wipe,
    /// SIGTERM each broker in turn (controlled shutdown), restarting each before the next.
    RollingRestart,
    /// The negative control's nemesis: every broker `kill -9`ed at once.
    KillAll,
}

impl Kind {
    /// The nemeses of ordinary runs ([`Kind::KillAll`] is the negative control's only).
    pub const ALL: [Kind; 9] = [
        Kind::KillRandom,
        Kind::KillLeader,
        Kind::KillController,
        Kind::Pause,
        Kind::Isolate,
        Kind::OneWay,
        Kind::DiskFull,
        Kind::Wipe,
        Kind::RollingRestart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::KillRandom => "kill-random",
            Kind::KillLeader => "kill-leader",
            Kind::KillController => "kill-controller",
            Kind::Pause => "pause",
            Kind::Isolate => "isolate",
            Kind::OneWay => "one-way",
            Kind::DiskFull => "disk-full",
            Kind::Wipe => "wipe",
            Kind::RollingRestart => "rolling-restart",
            Kind::KillAll => "kill-all",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Self::ALL
            .into_iter()
            .chain([Kind::KillAll])
            .find(|k| k.name() == name)
    }

    /// Whether it needs root (iptables or a loop mount).
    pub fn needs_root(self) -> bool {
        matches!(self, Kind::Isolate | Kind::OneWay | Kind::DiskFull)
    }

    /// Whether it can run at the same time as another nemesis (a rolling restart takes every
    /// broker in turn, so it runs alone).
    fn combines(self) -> bool {
        !matches!(self, Kind::RollingRestart | Kind::KillAll)
    }
}

/// The nemeses of run `index` of a campaign: the campaign's seed orders [`Kind::ALL`], run
/// `index` takes the next one, so N ≥ 9 runs cover them all; a third of the runs add a second
/// kind at once. Kinds in `unavailable` (no root here) are skipped.
pub fn plan(campaign_seed: u64, index: u64, unavailable: &[Kind]) -> Vec<Kind> {
    let mut order: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| !unavailable.contains(k))
        .collect();
    let mut rng = Rng::new(campaign_seed);
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let first = order[(index % order.len() as u64) as usize];
    let mut kinds = vec![first];
    let mut rng = Rng::new(campaign_seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
    if first.combines() && rng.between(0, 2) == 0 {
        let others: Vec<Kind> = order
            .iter()
            .copied()
            .filter(|k| *k != first && k.combines())
            .collect();
        if !others.is_empty() {
            kinds.push(rng.pick(&others));
        }
    }
    kinds
}

/// Harm in place, undone by [`heal`].
pub enum Harm {
    /// Node killed (or stopped for a wipe): restart it.
    Down(i32),
    /// Node paused: continue it.
    Paused(i32),
    /// Links cut (the chain goes when this drops).
    Cut(Cut),
    /// Ballast filling a disk: delete it.
    Ballast(PathBuf),
}

/// What a nemesis may use besides the cluster: the loop-mounted disk under one node, if the
/// run has one, and the workload's topic.
pub struct Context<'a> {
    pub topic: &'a str,
    pub small_disk: Option<(i32, &'a SmallDisk)>,
}

fn endpoint(cluster: &Cluster, id: i32) -> Endpoint {
    Endpoint {
        ip: cluster.node(id).ip(),
        internal_port: cluster.internal_port(id),
    }
}

/// Nodes not in `busy`.
fn free_nodes(cluster: &Cluster, busy: &[i32]) -> Vec<i32> {
    (1..=cluster.nodes.len() as i32)
        .filter(|i| !busy.contains(i))
        .collect()
}

/// A node that answers (to ask who leads or controls).
fn live_node(cluster: &Cluster, busy: &[i32]) -> Option<i32> {
    free_nodes(cluster, busy).into_iter().next()
}

/// Applies `kind`, avoiding the nodes in `busy` (another nemesis's targets); returns the harm
/// to heal and the nodes it targeted.
pub fn apply(
    kind: Kind,
    cluster: &mut Cluster,
    rng: &mut Rng,
    ctx: &Context<'_>,
    busy: &[i32],
) -> Result<(Vec<Harm>, Vec<i32>), String> {
    let free = free_nodes(cluster, busy);
    if free.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let random = rng.pick(&free);
    let prefer = |wanted: Option<i32>| wanted.filter(|w| free.contains(w)).unwrap_or(random);
    match kind {
        Kind::KillRandom | Kind::KillLeader | Kind::KillController | Kind::Wipe => {
            let target = match kind {
                Kind::KillLeader => {
                    let asked = live_node(cluster, busy);
                    let rows = asked
                        .map(|a| cluster.describe(a, ctx.topic))
                        .unwrap_or_default();
                    let leaders: Vec<i32> =
                        rows.iter().map(|r| r.leader).filter(|l| *l > 0).collect();
                    prefer((!leaders.is_empty()).then(|| rng.pick(&leaders)))
                }
                Kind::KillController => {
                    let asked = live_node(cluster, busy);
                    prefer(asked.and_then(|a| cluster.info(a).controller))
                }
                _ => random,
            };
            let node = cluster.node_mut(target);
            // It may have stopped by itself already, on a disk another nemesis filled.
            match node.exited_by_itself() {
                None => node.kill9(),
                Some(status) if status.code() == Some(EXIT_METADATA_STORAGE_FAILED) => {}
                Some(status) => {
                    return Err(format!(
                        "node {target} exited by itself ({status})\n{}",
                        node.log_tail()
                    ))
                }
            }
            if kind == Kind::Wipe {
                wipe(node.data_dir())?;
            }
            Ok((vec![Harm::Down(target)], vec![target]))
        }
        Kind::Pause => {
            cluster.node_mut(random).pause();
            Ok((vec![Harm::Paused(random)], vec![random]))
        }
        Kind::Isolate => {
            let others: Vec<Endpoint> = (1..=cluster.nodes.len() as i32)
                .filter(|i| *i != random)
                .map(|i| endpoint(cluster, i))
                .collect();
            let cut = Cut::isolate(endpoint(cluster, random), &others)?;
            Ok((vec![Harm::Cut(cut)], vec![random]))
        }
        Kind::OneWay => {
            let all: Vec<i32> = (1..=cluster.nodes.len() as i32)
                .filter(|i| *i != random)
                .collect();
            let to = rng.pick(&all);
            let cut = Cut::one_way(endpoint(cluster, random), endpoint(cluster, to))?;
            Ok((vec![Harm::Cut(cut)], vec![random]))
        }
        Kind::DiskFull => {
            let Some((node, disk)) = ctx.small_disk else {
                return Err("disk-full needs a run with a small disk".into());
            };
            let name = "ballast";
            disk.fill(name)?;
            Ok((vec![Harm::Ballast(disk.path().join(name))], vec![node]))
        }
        Kind::RollingRestart => {
            for id in 1..=cluster.nodes.len() as i32 {
                cluster.node_mut(id).terminate();
                cluster.node_mut(id).restart();
                cluster.wait_healthy();
            }
            Ok((Vec::new(), Vec::new()))
        }
        Kind::KillAll => {
            let ids: Vec<i32> = (1..=cluster.nodes.len() as i32).collect();
            for &id in &ids {
                cluster.node_mut(id).kill9_reap_only();
            }
            Ok((ids.iter().map(|&id| Harm::Down(id)).collect(), ids))
        }
    }
}

/// Undoes `harms` (every one is tried; the first error is returned): space and links first,
/// so a broker restarted here finds its disk and its peers (a broker started on a full disk
/// cannot persist its registration).
pub fn heal(cluster: &mut Cluster, mut harms: Vec<Harm>) -> Result<(), String> {
    harms.sort_by_key(|h| match h {
        Harm::Ballast(_) => 0,
        Harm::Cut(_) => 1,
        Harm::Paused(_) => 2,
        Harm::Down(_) => 3,
    });
    let mut first_error = None;
    for harm in harms {
        match harm {
            Harm::Down(id) => cluster.node_mut(id).restart(),
            Harm::Paused(id) => cluster.node_mut(id).resume(),
            Harm::Cut(cut) => cut.heal(),
            Harm::Ballast(path) => {
                if let Err(e) = std::fs::remove_file(&path) {
                    first_error.get_or_insert(format!("removing {}: {e}", path.display()));
                }
            }
        }
    }
    // A broker whose metadata log could not be written stops by itself (Kafka's does too);
    // with its disk back, it is started again, as a supervisor would. Any other exit is a bug.
    for id in 1..=cluster.nodes.len() as i32 {
        let Some(status) = cluster.node_mut(id).exited_by_itself() else {
            continue;
        };
        if status.code() == Some(EXIT_METADATA_STORAGE_FAILED) {
            eprintln!("spool-faults: node {id} had stopped on its full disk; starting it again");
            cluster.node_mut(id).restart();
        } else {
            first_error.get_or_insert(format!(
                "node {id} exited by itself ({status})\n{}",
                cluster.node(id).log_tail()
            ));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Removes everything in a data dir (the dir itself stays: it may be a mount point).
fn wipe(dir: &std::path::Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| format!("wiping {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_runs_of_a_campaign_cover_every_nemesis() {
        for seed in [0, 1, 42, u64::MAX] {
            let mut seen: Vec<Kind> = (0..9).map(|i| plan(seed, i, &[])[0]).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), Kind::ALL.len(), "seed {seed}");
        }
    }

    #[test]
    fn plans_follow_the_seed_and_skip_what_cannot_run() {
        assert_eq!(plan(7, 3, &[]), plan(7, 3, &[]));
        let no_root = [Kind::Isolate, Kind::OneWay, Kind::DiskFull];
        for i in 0..50 {
            let kinds = plan(7, i, &no_root);
            assert!(kinds.iter().all(|k| !k.needs_root()), "{kinds:?}");
            assert!(kinds.len() <= 2);
            if kinds.len() == 2 {
                assert_ne!(kinds[0], kinds[1]);
                assert!(kinds.iter().all(|k| k.combines()));
            }
        }
        assert!(
            (0..30).any(|i| plan(7, i, &[]).len() == 2),
            "some runs combine two"
        );
    }

    #[test]
    fn names_parse_back() {
        for k in Kind::ALL.into_iter().chain([Kind::KillAll]) {
            assert_eq!(Kind::parse(k.name()), Some(k));
        }
        assert_eq!(Kind::parse("nope"), None);
    }
}
