//! The fault schedule: what goes wrong in a run, and when, drawn from the seed before the run
//! starts.
//!
//! Owns: [`Fault`] (every fault the world can inject and its undo), [`FaultProfile`] (per-seed
//! intensities, so some seeds hammer one kind of fault and others mix them) and [`plan`].
//! Promises: every fault that starts before `faults_end_ms` has its undo scheduled (a restart,
//! a resume, a heal, calm links); the world additionally undoes everything at `faults_end_ms`,
//! so liveness can be judged after it. Only undos are ever scheduled after `faults_end_ms`.
//! Never does: inject anything (the world does), or look at the run's state: the schedule is a
//! function of the seed alone (the one fault that follows the run is the world's "crash during
//! an fsync", drawn with [`FaultProfile::fsync_crash_chance`]).

use crate::message::Endpoint;
use crate::net::LinkFaults;
use crate::rng::SimRng;

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// `lose_unsynced`: power loss (unsynced writes may vanish or tear) instead of a process
    /// crash.
    Crash {
        node: u64,
        lose_unsynced: bool,
    },
    /// The node dies and its disk is replaced: it restarts (at its [`Fault::Restart`]) with an
    /// empty raft log, as a voter whose data dir was wiped.
    Wipe {
        node: u64,
    },
    Restart {
        node: u64,
    },
    Pause {
        node: u64,
    },
    Resume {
        node: u64,
    },
    /// Cuts the node off from every other endpoint, both ways.
    Isolate {
        node: u64,
    },
    CutOneWay {
        from: Endpoint,
        to: Endpoint,
    },
    /// Removes every cut.
    Heal,
    NetChaos(LinkFaults),
    NetCalm,
    /// `lose_unsynced`: power loss (the partition logs' unsynced tails may vanish or tear).
    BrokerCrash {
        broker: i32,
        lose_unsynced: bool,
    },
    /// Cuts the broker off from the controllers and the other brokers, both ways, but not from
    /// the clients (undone by [`Fault::Heal`]).
    IsolateBroker {
        broker: i32,
    },
    BrokerRestart {
        broker: i32,
    },
    /// The broker dies and its partition logs are gone: it comes back (at its
    /// [`Fault::BrokerRestart`]) with an empty data directory, a replaced disk — KIP-903's case.
    BrokerWipe {
        broker: i32,
    },
}

impl Fault {
    pub fn describe(&self) -> String {
        match self {
            Fault::NetChaos(f) => format!(
                "NetChaos delay={}..{}ms loss={:.2} dup={:.2} reorder={:.2}",
                f.delay_ms_min, f.delay_ms_max, f.loss, f.duplicate, f.reorder
            ),
            other => format!("{other:?}"),
        }
    }
}

/// The share of broker crashes that also lose the broker's partition logs ([`Fault::BrokerWipe`]).
const WIPE_CHANCE: f64 = 0.2;
/// The controller node whose crashes may lose its disk ([`Fault::Wipe`], with
/// `SimConfig::voter_wipes`), and how often. One node only: with two voters of three empty at
/// once the third cannot be elected (neither may know what was committed), which is raft's
/// majority loss, not a bug liveness should report.
const WIPED_VOTER: u64 = 1;
const VOTER_WIPE_CHANCE: f64 = 0.15;

/// How hard a seed pushes each kind of fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultProfile {
    /// Mean gap between the starts of two scheduled faults.
    pub mean_gap_ms: u64,
    /// Relative weights: node crash, pause, isolate, one-way cut, net chaos, broker crash.
    pub weights: [u64; 6],
    /// Probability that a node power-fails while one of its fsyncs is in flight.
    pub fsync_crash_chance: f64,
    /// Probability a scheduled node crash is a power loss rather than a process crash.
    pub power_loss_chance: f64,
}

impl FaultProfile {
    pub fn draw(rng: &mut SimRng) -> Self {
        let mut weights = [0; 6];
        for w in &mut weights {
            *w = rng.range(0, 3);
        }
        if weights.iter().all(|w| *w == 0) {
            weights[0] = 1;
        }
        FaultProfile {
            mean_gap_ms: *rng.pick(&[300, 800, 1500, 3000]),
            weights,
            fsync_crash_chance: *rng.pick(&[0.0, 0.002, 0.01, 0.03]),
            power_loss_chance: *rng.pick(&[0.0, 0.5, 1.0]),
        }
    }
}

impl FaultProfile {
    /// Keeps the network and broker faults, drops the controller nodes' (a focus for runs that
    /// test replication).
    pub fn only_broker_and_network_faults(&mut self) {
        self.weights[..4].fill(0);
        self.weights[5] = self.weights[5].max(1);
        self.fsync_crash_chance = 0.0;
    }
}

/// The scheduled faults of one run, `(at_ms, fault)`, in no particular order.
pub fn plan(
    rng: &mut SimRng,
    profile: &FaultProfile,
    nodes: u64,
    brokers: i32,
    faults_end_ms: u64,
    voter_wipes: bool,
) -> Vec<(u64, Fault)> {
    let mut out = Vec::new();
    let total: u64 = profile.weights.iter().sum();
    let mut t = rng.range(200, 1000);
    while t < faults_end_ms {
        let mut pick = rng.below(total);
        let kind = profile
            .weights
            .iter()
            .position(|w| {
                if pick < *w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .unwrap_or(0);
        let node = rng.range(1, nodes);
        // Sometimes back at once (a supervisor restarting a killed process), sometimes long.
        let lasting_ms = if rng.chance(0.3) {
            rng.range(10, 300)
        } else {
            rng.range(300, 4000)
        };
        let until = t + lasting_ms;
        match kind {
            0 => {
                let lose_unsynced = rng.chance(profile.power_loss_chance);
                // Drawn only with voter wipes on, so other runs keep their schedules.
                let wiped = voter_wipes && node == WIPED_VOTER && rng.chance(VOTER_WIPE_CHANCE);
                let fault = if wiped {
                    Fault::Wipe { node }
                } else {
                    Fault::Crash {
                        node,
                        lose_unsynced,
                    }
                };
                out.push((t, fault));
                out.push((until, Fault::Restart { node }));
            }
            1 => {
                out.push((t, Fault::Pause { node }));
                out.push((until, Fault::Resume { node }));
            }
            2 => {
                out.push((t, Fault::Isolate { node }));
                out.push((until, Fault::Heal));
            }
            3 => {
                let other = 1 + (node + rng.range(0, nodes.saturating_sub(2))) % nodes;
                let (from, to) = (Endpoint::Node(node), Endpoint::Node(other));
                out.push((t, Fault::CutOneWay { from, to }));
                out.push((until, Fault::Heal));
            }
            4 => {
                let delay_ms_max = rng.range(2, 60);
                let faults = LinkFaults {
                    delay_ms_min: 1,
                    delay_ms_max,
                    loss: *rng.pick(&[0.0, 0.05, 0.2, 0.4]),
                    duplicate: *rng.pick(&[0.0, 0.05, 0.2]),
                    reorder: *rng.pick(&[0.0, 0.1, 0.3]),
                    reorder_delay_ms_max: rng.range(1, 150),
                };
                out.push((t, Fault::NetChaos(faults)));
                out.push((until, Fault::NetCalm));
            }
            _ => {
                let broker = rng.range(1, brokers as u64) as i32;
                if rng.chance(0.5) {
                    let lose_unsynced = rng.chance(profile.power_loss_chance);
                    let fault = if rng.chance(WIPE_CHANCE) {
                        Fault::BrokerWipe { broker }
                    } else {
                        Fault::BrokerCrash {
                            broker,
                            lose_unsynced,
                        }
                    };
                    out.push((t, fault));
                    out.push((until, Fault::BrokerRestart { broker }));
                } else {
                    out.push((t, Fault::IsolateBroker { broker }));
                    out.push((until, Fault::Heal));
                }
            }
        }
        t += rng
            .range(profile.mean_gap_ms / 4, profile.mean_gap_ms * 2)
            .max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_its_undo_and_none_starts_after_the_end() {
        for seed in 0..50 {
            let mut rng = SimRng::new(seed);
            let profile = FaultProfile::draw(&mut rng);
            let plan = plan(&mut rng, &profile, 3, 4, 20_000, seed % 2 == 0);
            for (t, f) in &plan {
                let undo = matches!(
                    f,
                    Fault::Restart { .. }
                        | Fault::Resume { .. }
                        | Fault::Heal
                        | Fault::NetCalm
                        | Fault::BrokerRestart { .. }
                );
                assert!(undo || *t < 20_000, "seed {seed}: {f:?} at {t}");
                if let Fault::CutOneWay { from, to } = f {
                    assert_ne!(from, to, "seed {seed}");
                }
            }
            let starts = plan
                .iter()
                .filter(|(_, f)| {
                    !matches!(
                        f,
                        Fault::Restart { .. }
                            | Fault::Resume { .. }
                            | Fault::Heal
                            | Fault::NetCalm
                            | Fault::BrokerRestart { .. }
                    )
                })
                .count();
            assert_eq!(starts * 2, plan.len(), "seed {seed}");
        }
    }
}
