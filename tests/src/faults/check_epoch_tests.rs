//! The checker with the final log's writers ([`Origins`]): copies under two producer epochs are
//! a client's epoch bump and counted apart; copies under one are the broker's fault; and the
//! Kafka port's read must agree with the native read-back at every offset. Each planted case
//! asserts its exact counts.

use super::super::super::origins::{Origin, Origins};
use super::*;

/// Every record of `log` written by producer id 1 at epoch 0.
fn origins_of(log: &FinalLog) -> Origins {
    let mut origins = Origins::new();
    for (tp, records) in log {
        for (offset, value) in records {
            origins.insert((tp.clone(), *offset), origin(0, value));
        }
    }
    origins
}

fn origin(producer_epoch: i16, value: &str) -> Origin {
    Origin {
        producer_id: 1,
        producer_epoch,
        value: value.to_string(),
    }
}

/// The clean log with p0-0 written again at t-0@4, after p0-2, by producer 1 at `epoch`.
fn resent_at(epoch: i16) -> (History, FinalLog, FinalCommits, Origins) {
    let (history, mut log, commits) = clean();
    set(&mut log, 0, 4, "p0-0");
    let mut origins = origins_of(&log);
    origins.insert((tp(0), 4), origin(epoch, "p0-0"));
    (history, log, commits, origins)
}

#[test]
fn agreeing_origins_leave_a_clean_run_clean() {
    let (history, log, commits) = clean();
    let origins = origins_of(&log);
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    assert_eq!(report.violations(), 0, "{report:#?}");
    assert_eq!(report, check(&history, &log, &commits));
}

#[test]
fn a_copy_under_a_new_epoch_is_the_clients_and_counted_apart() {
    let (history, log, commits, origins) = resent_at(1);
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    assert_eq!(report.violations(), 0, "{report:#?}");
    assert_eq!(
        (
            report.duplicated_across_epochs.len(),
            report.reordered_across_epochs.len()
        ),
        (1, 1),
        "{report:#?}"
    );
    assert!(
        report.duplicated_across_epochs[0].contains("t-0@0, t-0@4"),
        "{}",
        report.duplicated_across_epochs[0]
    );
    // Without the writers nothing tells the two apart: the strict verdict.
    let blind = check(&history, &log, &commits);
    assert_eq!((blind.duplicated.len(), blind.reordered.len()), (1, 1));
}

#[test]
fn a_copy_under_the_same_epoch_is_the_brokers_fault() {
    let (history, log, commits, origins) = resent_at(0);
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    assert_eq!(
        (report.duplicated.len(), report.reordered.len()),
        (1, 1),
        "{report:#?}"
    );
    assert_eq!(report.violations(), 2, "{report:#?}");
    assert!(report.duplicated_across_epochs.is_empty(), "{report:#?}");
}

#[test]
fn three_copies_of_which_two_share_an_epoch_are_the_brokers_fault() {
    let (history, mut log, commits, mut origins) = resent_at(1);
    set(&mut log, 1, 3, "p0-0");
    origins.insert((tp(1), 3), origin(1, "p0-0"));
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    assert_eq!(report.duplicated.len(), 1, "{report:#?}");
    assert!(report.duplicated_across_epochs.is_empty(), "{report:#?}");
}

#[test]
fn the_kafka_ports_read_must_agree_with_the_read_back() {
    let (history, log, commits) = clean();
    let mut origins = origins_of(&log);
    origins.insert((tp(0), 1), origin(0, "p0-9"));
    origins.remove(&(tp(1), 0));
    origins.insert((tp(1), 7), origin(0, "p2-3"));
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    assert_eq!(report.inconsistent.len(), 3, "{report:#?}");
    assert_eq!(report.violations(), 3, "{report:#?}");
    let all = report.inconsistent.join("\n");
    for expected in [
        "t-0@1 was read back as \"p0-1\", but through the Kafka port as \"p0-9\"",
        "t-1@0 was read back as \"p2-0\", but the Kafka port's read has nothing there",
        "t-1@7 was read through the Kafka port as \"p2-3\"",
    ] {
        assert!(all.contains(expected), "{expected} in {all}");
    }
}

#[test]
fn an_older_epoch_after_a_newer_one_is_a_fenced_epoch_writing_again() {
    let (history, log, commits) = clean();
    let mut origins = origins_of(&log);
    origins.insert((tp(0), 1), origin(2, "p0-1"));
    let report = check_with_origins(&history, &log, &commits, Some(&origins));
    // t-0@2 and @3 (epoch 0) follow @1 (epoch 2); @0 precedes it and is fine.
    assert_eq!(report.reordered.len(), 2, "{report:#?}");
    assert!(
        report.reordered[0].contains("t-0@2: producer id 1 wrote at epoch 0 after its epoch 2"),
        "{}",
        report.reordered[0]
    );
    // Epochs of other partitions are their own.
    assert!(
        report.reordered.iter().all(|r| r.starts_with("t-0@")),
        "{report:#?}"
    );
}
