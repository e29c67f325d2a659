//! One seed is one run: the same seed gives the same trace hash, different seeds differ.

use spool_sim::SimConfig;

fn config(seed: u64) -> SimConfig {
    SimConfig {
        sim_ms: 20_000,
        quiet_ms: 8_000,
        ..SimConfig::new(seed)
    }
}

#[test]
fn a_seed_run_twice_gives_the_same_trace_hash_and_other_seeds_differ() {
    let a = spool_sim::run(config(7));
    let b = spool_sim::run(config(7));
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.events, b.events);
    assert!(a.events > 1000, "the run did little: {} events", a.events);
    let c = spool_sim::run(config(8));
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn a_violating_seed_replays_to_the_same_violation() {
    // A planted bug shows within a few seeds (tests/planted.rs).
    let base = SimConfig {
        planted: Some(spool_sim::PlantedBug::SkipFsync),
        ..config(0)
    };
    let found = spool_sim::runner::find_bug(&base, 0, 40).expect("a violation in 40 seeds");
    let again = spool_sim::run(SimConfig {
        seed: found.seed,
        ..base
    });
    assert_eq!(found.violation, again.violation);
    assert_eq!(found.trace_hash, again.trace_hash);
}
