//! The production code as it stands runs a fixed budget of seeds without a violation — so a
//! planted bug's violation is the planted bug's.

use spool_sim::SimConfig;

#[test]
fn a_fixed_seed_budget_runs_clean() {
    for seed in 0..12 {
        let report = spool_sim::run(SimConfig {
            sim_ms: 30_000,
            quiet_ms: 12_000,
            ..SimConfig::new(seed)
        });
        assert!(
            report.violation.is_none(),
            "seed {seed}: {:?}\n{}",
            report.violation,
            report.tail.join("\n")
        );
        assert!(report.commits_max > 20, "seed {seed} committed little");
    }
}
