//! Each planted driver bug is caught within a bounded number of seeds, by a safety invariant,
//! and the seed printed replays it.

use spool_sim::runner::{find_bug, replay_command};
use spool_sim::violation::{
    ACKNOWLEDGED_IS_DURABLE, COMMITTED_NEVER_LOST, ELECTION_SAFETY, LEADER_COMPLETENESS,
    LOG_MATCHING, PANIC,
};
use spool_sim::{PlantedBug, SimConfig};

/// Seeds each planted bug must be found within.
const SEEDS_MAX: u64 = 40;

fn caught(bug: PlantedBug) {
    let base = SimConfig {
        sim_ms: 20_000,
        quiet_ms: 8_000,
        planted: Some(bug),
        ..SimConfig::new(0)
    };
    let found = find_bug(&base, 0, SEEDS_MAX)
        .unwrap_or_else(|| panic!("{bug} not found in {SEEDS_MAX} seeds"));
    let (_, v) = found.violation.clone().expect("a violation");
    let safety = [
        ACKNOWLEDGED_IS_DURABLE,
        ELECTION_SAFETY,
        COMMITTED_NEVER_LOST,
        LEADER_COMPLETENESS,
        LOG_MATCHING,
        PANIC,
    ];
    assert!(safety.contains(&v.invariant), "{bug}: unexpected {v}");
    let replay = SimConfig {
        seed: found.seed,
        ..base.clone()
    };
    let cmd = replay_command(&replay);
    assert!(cmd.contains(&format!("--seed {}", found.seed)) && cmd.contains(bug.name()));
    let again = spool_sim::run(replay);
    assert_eq!(again.violation, found.violation, "{cmd} does not replay");
    assert_eq!(again.trace_hash, found.trace_hash);
    println!("{bug}: seed {} -> {v}\n  {cmd}", found.seed);
}

#[test]
fn ack_before_persist_is_caught() {
    caught(PlantedBug::AckBeforePersist);
}

#[test]
fn skip_fsync_is_caught() {
    caught(PlantedBug::SkipFsync);
}
