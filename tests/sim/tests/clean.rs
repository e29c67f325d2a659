//! With every known real bug worked around, a fixed budget of seeds finds no violation — so a
//! planted bug's violation is the planted bug's.

use spool_sim::{SimConfig, Workaround};

#[test]
fn a_fixed_seed_budget_runs_clean_with_the_known_bugs_worked_around() {
    for seed in 0..12 {
        let report = spool_sim::run(SimConfig {
            sim_ms: 30_000,
            quiet_ms: 12_000,
            workarounds: Workaround::ALL.to_vec(),
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
