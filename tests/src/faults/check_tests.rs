//! The checker against a clean run, then against one planted bug at a time: each test asserts
//! the exact count the bug must produce, so a checker that misses it (or double-counts) fails.

use super::super::history::{value_of, Commit, NemesisSpan, Read, Write};
use super::*;

fn tp(partition: i32) -> Tp {
    ("t".to_string(), partition)
}

fn write(producer: u32, seq: u64, acks: WriteAcks, outcome: Outcome, done_ms: u64) -> Write {
    Write {
        producer,
        seq,
        value: value_of(producer, seq),
        acks,
        outcome,
        done_ms,
    }
}

fn acked(
    producer: u32,
    seq: u64,
    acks: WriteAcks,
    partition: i32,
    offset: i64,
    done_ms: u64,
) -> Write {
    write(
        producer,
        seq,
        acks,
        Outcome::Acked {
            tp: tp(partition),
            offset,
        },
        done_ms,
    )
}

fn not_acked(producer: u32, seq: u64, done_ms: u64) -> Write {
    write(
        producer,
        seq,
        WriteAcks::All,
        Outcome::NotAcked {
            error: "timed out".into(),
        },
        done_ms,
    )
}

fn read(consumer: u32, partition: i32, offset: i64, value: &str, at_ms: u64) -> Read {
    Read {
        consumer,
        tp: tp(partition),
        offset,
        value: value.to_string(),
        at_ms,
    }
}

fn commit(consumer: u32, partition: i32, offset: i64, at_ms: u64) -> Commit {
    Commit {
        group: "g".into(),
        consumer,
        tp: tp(partition),
        offset,
        at_ms,
    }
}

fn span(kind: &str, start_ms: u64, end_ms: u64) -> NemesisSpan {
    NemesisSpan {
        kind: kind.to_string(),
        start_ms,
        end_ms,
    }
}

/// Puts `value` at `offset`, replacing what was there.
fn set(log: &mut FinalLog, partition: i32, offset: i64, value: &str) {
    let records = log.entry(tp(partition)).or_default();
    records.retain(|(o, _)| *o != offset);
    records.push((offset, value.to_string()));
    records.sort();
}

fn remove(log: &mut FinalLog, partition: i32, offset: i64) {
    log.entry(tp(partition))
        .or_default()
        .retain(|(o, _)| *o != offset);
}

/// Three producers on t-0 and t-1, acks=all and acks=1, two consumers, one group, two nemeses;
/// p2-1 and p2-3 were not acknowledged and are absent, p2-2 was not acknowledged but landed.
fn clean() -> (History, FinalLog, FinalCommits) {
    use WriteAcks::{All, Leader};
    let history = History {
        txns: Vec::new(),
        ctp: Default::default(),
        writes: vec![
            acked(0, 0, All, 0, 0, 10),
            acked(0, 1, All, 0, 1, 20),
            acked(1, 0, Leader, 0, 2, 30),
            acked(0, 2, All, 0, 3, 40),
            acked(2, 0, All, 1, 0, 15),
            not_acked(2, 1, 45),
            not_acked(2, 2, 50),
            acked(1, 1, Leader, 1, 2, 60),
            not_acked(2, 3, 62),
        ],
        reads: vec![
            read(0, 0, 0, "p0-0", 41),
            read(0, 0, 1, "p0-1", 42),
            read(0, 0, 2, "p1-0", 43),
            read(0, 0, 3, "p0-2", 44),
            read(1, 1, 0, "p2-0", 51),
            read(1, 1, 1, "p2-2", 52),
        ],
        commits: vec![
            commit(0, 0, 2, 25),
            commit(0, 0, 4, 45),
            commit(1, 1, 2, 55),
            commit(0, 0, 4, 70),
        ],
        nemeses: vec![span("kill-leader", 35, 48), span("pause", 52, 52)],
        workload_end_ms: 100,
    };
    let mut log = FinalLog::new();
    for (offset, value) in ["p0-0", "p0-1", "p1-0", "p0-2"].into_iter().enumerate() {
        set(&mut log, 0, offset as i64, value);
    }
    for (offset, value) in ["p2-0", "p2-2", "p1-1"].into_iter().enumerate() {
        set(&mut log, 1, offset as i64, value);
    }
    let commits = FinalCommits::from([(("g".into(), tp(0)), 4), (("g".into(), tp(1)), 2)]);
    (history, log, commits)
}

#[test]
fn a_clean_run_has_no_violations() {
    let (history, log, commits) = clean();
    let report = check(&history, &log, &commits);
    assert_eq!(report.violations(), 0, "{report:#?}");
    assert_eq!(
        (
            report.acked_all,
            report.acked_leader,
            report.not_acked,
            report.read_back
        ),
        (4, 2, 3, 7)
    );
    assert_eq!((report.consumer_reads, report.lost_acks1), (6, 0));
    // Acks at 10,15,20,30,40,60; NotAcked outcomes (45, 50, 62) do not end a window.
    assert_eq!(report.max_unavailable_ms, 40);
    let by_nemesis = BTreeMap::from([("kill-leader".to_string(), 20), ("pause".to_string(), 20)]);
    assert_eq!(report.unavailable_ms_by_nemesis, by_nemesis);
}

#[test]
fn a_lost_acks_all_record_is_lost() {
    let (history, mut log, commits) = clean();
    remove(&mut log, 0, 3);
    // Nobody read t-0@3 in this variant, so only the loss shows.
    let history = History {
        reads: history.reads[..3].to_vec(),
        ..history
    };
    let report = check(&history, &log, &commits);
    assert_eq!(report.lost.len(), 1, "{report:#?}");
    assert_eq!(report.violations(), 1, "{report:#?}");
    assert!(
        report.lost[0].contains("t-0@3") && report.lost[0].contains("p0-2"),
        "{}",
        report.lost[0]
    );
}

#[test]
fn a_lost_acks1_record_is_counted_but_allowed() {
    let (history, mut log, commits) = clean();
    remove(&mut log, 1, 2);
    let report = check(&history, &log, &commits);
    assert_eq!(report.lost_acks1, 1, "{report:#?}");
    assert_eq!(report.violations(), 0, "{report:#?}");
}

#[test]
fn an_acks1_offset_reused_after_failover_is_not_inconsistent() {
    let (history, mut log, commits) = clean();
    set(&mut log, 1, 2, "p2-3");
    let report = check(&history, &log, &commits);
    assert_eq!(report.lost_acks1, 1, "{report:#?}");
    assert_eq!(report.inconsistent.len(), 0, "{report:#?}");
    assert_eq!(report.violations(), 0, "{report:#?}");
}

#[test]
fn a_value_twice_is_duplicated() {
    let (history, mut log, commits) = clean();
    set(&mut log, 1, 3, "p0-0");
    let report = check(&history, &log, &commits);
    assert_eq!(report.duplicated.len(), 1, "{report:#?}");
    assert_eq!(report.violations(), 1, "{report:#?}");
}

#[test]
fn a_producers_records_swapped_are_reordered() {
    let (history, mut log, commits) = clean();
    set(&mut log, 0, 0, "p0-1");
    set(&mut log, 0, 1, "p0-0");
    let report = check(&history, &log, &commits);
    assert_eq!(report.reordered.len(), 1, "{report:#?}");
    assert!(
        report.reordered[0].contains("producer 0 seq 0 at offset 1"),
        "{}",
        report.reordered[0]
    );
}

#[test]
fn a_read_of_a_rewritten_offset_vanished_and_is_inconsistent() {
    let (history, mut log, commits) = clean();
    // t-0@2 held the acks=1 p1-0, which consumer 0 read; a new leader lost it and reused 2.
    set(&mut log, 0, 2, "p2-3");
    let report = check(&history, &log, &commits);
    assert_eq!(report.vanished_reads.len(), 1, "{report:#?}");
    assert_eq!(report.inconsistent.len(), 1, "{report:#?}");
    assert_eq!(
        (report.lost_acks1, report.violations()),
        (1, 2),
        "{report:#?}"
    );
}

#[test]
fn a_read_beyond_the_log_end_vanished() {
    let (mut history, log, commits) = clean();
    history.reads.push(read(1, 1, 5, "p2-3", 80));
    let report = check(&history, &log, &commits);
    assert_eq!(report.vanished_reads.len(), 1, "{report:#?}");
    assert_eq!(report.violations(), 1, "{report:#?}");
}

#[test]
fn a_value_nobody_wrote_is_inconsistent() {
    for junk in ["p9-9", "garbage", "p01-0"] {
        let (history, mut log, commits) = clean();
        set(&mut log, 1, 3, junk);
        let report = check(&history, &log, &commits);
        assert_eq!(report.inconsistent.len(), 1, "{junk}: {report:#?}");
        assert_eq!(report.violations(), 1, "{junk}: {report:#?}");
    }
}

#[test]
fn an_acks_all_record_at_another_offset_is_lost_and_inconsistent() {
    let (history, mut log, commits) = clean();
    remove(&mut log, 1, 0);
    set(&mut log, 1, 3, "p2-0");
    let history = History {
        reads: history.reads[..4].to_vec(),
        ..history
    };
    let report = check(&history, &log, &commits);
    assert_eq!(
        (report.lost.len(), report.inconsistent.len()),
        (1, 1),
        "{report:#?}"
    );
    // p2-0 now follows p2-2 in t-1.
    assert_eq!(
        (report.reordered.len(), report.violations()),
        (1, 3),
        "{report:#?}"
    );
}

#[test]
fn a_commit_below_an_acknowledged_one_moved_backwards() {
    let (mut history, log, commits) = clean();
    // Recorded first but acknowledged last: the checker goes by time.
    history.commits.insert(0, commit(1, 0, 3, 90));
    let report = check(&history, &log, &commits);
    assert_eq!(report.commits_backwards.len(), 1, "{report:#?}");
    assert!(report.commits_backwards[0].contains("moved backwards"));
}

#[test]
fn final_commits_below_or_missing_lost_an_acknowledged_commit() {
    let (history, log, mut commits) = clean();
    commits.insert(("g".into(), tp(0)), 3);
    let report = check(&history, &log, &commits);
    assert_eq!(report.commits_backwards.len(), 1, "{report:#?}");
    commits.remove(&("g".to_string(), tp(0)));
    let report = check(&history, &log, &commits);
    assert_eq!(report.commits_backwards.len(), 1, "{report:#?}");
    assert!(report.commits_backwards[0].contains("acknowledged commit lost"));
}

#[test]
fn unavailability_is_the_longest_ack_free_window_per_nemesis() {
    // Windows: [0,100] [100,150] [150,600] [600,1000]; the NotAcked at 300 splits nothing.
    let history = History {
        writes: vec![
            acked(0, 0, WriteAcks::All, 0, 0, 150),
            acked(0, 1, WriteAcks::Leader, 0, 1, 100),
            not_acked(0, 2, 300),
            acked(0, 3, WriteAcks::All, 0, 2, 600),
        ],
        nemeses: vec![
            span("kill-leader", 120, 130),
            span("kill-leader", 700, 800),
            span("pause", 150, 150),
            span("disk-full", 0, 100),
            span("isolate", 1000, 1200),
        ],
        workload_end_ms: 1000,
        ..History::default()
    };
    let report = check(&history, &FinalLog::new(), &FinalCommits::new());
    assert_eq!(report.max_unavailable_ms, 450);
    let expected = BTreeMap::from([
        ("disk-full".to_string(), 100),
        ("isolate".to_string(), 0),
        ("kill-leader".to_string(), 400),
        ("pause".to_string(), 450),
    ]);
    assert_eq!(report.unavailable_ms_by_nemesis, expected);

    let no_acks = History {
        writes: vec![not_acked(0, 0, 5)],
        ..history
    };
    let report = check(&no_acks, &FinalLog::new(), &FinalCommits::new());
    assert_eq!(report.max_unavailable_ms, 1000);
    assert_eq!(report.unavailable_ms_by_nemesis["kill-leader"], 1000);
}

#[test]
fn empty_and_odd_input_does_not_panic() {
    let report = check(&History::default(), &FinalLog::new(), &FinalCommits::new());
    assert_eq!(report, Report::default());
    assert!(report.summary().contains("lost=0"));

    let history = History {
        txns: Vec::new(),
        ctp: Default::default(),
        writes: vec![acked(0, 0, WriteAcks::All, -1, -5, u64::MAX)],
        reads: vec![read(0, -1, i64::MIN, "", 0)],
        commits: vec![commit(0, 0, i64::MIN, u64::MAX), commit(0, 0, i64::MAX, 0)],
        nemeses: vec![span("backwards", u64::MAX, 3)],
        workload_end_ms: 10,
    };
    let mut log = FinalLog::new();
    log.insert(
        tp(-1),
        vec![
            (i64::MAX, "".into()),
            (i64::MIN, "p0-0".into()),
            (i64::MIN, "x".into()),
        ],
    );
    let report = check(&history, &log, &FinalCommits::new());
    assert!(report.violations() > 0);
    assert_eq!(report.max_unavailable_ms, u64::MAX);
    assert!(
        report.summary().contains("backwards:0"),
        "{}",
        report.summary()
    );
}

#[test]
fn a_producer_without_idempotence_may_duplicate_and_reorder_but_it_is_counted() {
    let (history, mut log, commits) = clean();
    // p1 (acks=1) wrote p1-1 at t-1@2; a resend lands it again after p1-0's second copy.
    set(&mut log, 1, 3, "p1-0");
    set(&mut log, 1, 4, "p1-1");
    let report = check(&history, &log, &commits);
    assert_eq!(report.violations(), 0, "{report:#?}");
    assert_eq!(report.duplicated_acks1, 2, "{report:#?}");
    assert_eq!(report.reordered_acks1, 1, "{report:#?}");
}

#[test]
fn an_acknowledgement_without_an_offset_needs_the_value_in_its_partition() {
    let (mut history, log, commits) = clean();
    // p0-2 sits at t-0@3; its acknowledgement named no offset.
    history.writes[3] = acked(0, 2, WriteAcks::All, 0, -1001, 40);
    let report = check(&history, &log, &commits);
    assert_eq!(report.violations(), 0, "{report:#?}");
    // In another partition than acknowledged: lost there, and the acknowledgement was wrong.
    history.writes[3] = acked(0, 2, WriteAcks::All, 1, -1001, 40);
    let report = check(&history, &log, &commits);
    assert_eq!(report.lost.len(), 1, "{report:#?}");
    assert_eq!(report.inconsistent.len(), 1, "{report:#?}");
}

#[test]
fn a_producer_without_one_acknowledgement_stalled() {
    let (mut history, log, commits) = clean();
    history.writes.push(not_acked(4, 0, 70));
    history.writes.push(not_acked(4, 1, 71));
    let report = check(&history, &log, &commits);
    assert_eq!(report.stalled.len(), 1, "{report:#?}");
    assert!(
        report.stalled[0].contains("producer 4: none of its 2 writes"),
        "{}",
        report.stalled[0]
    );
    assert_eq!(report.violations(), 1, "{report:#?}");
}

#[test]
fn a_group_caught_up_only_when_its_commits_reach_every_end() {
    let (history, _, _) = clean();
    // clean() commits t-0 up to 4 and t-1 up to 2 (group "g").
    assert_eq!(group_caught_up(&history.commits, "g", "t", &[4, 2]), Ok(()));
    assert_eq!(
        group_caught_up(&history.commits, "g", "t", &[4, 2, 0]),
        Ok(()),
        "an empty partition needs nothing"
    );
    assert_eq!(
        group_caught_up(&history.commits, "g", "t", &[5, 2, 3]),
        Err("t-0 committed 4 of 5, t-2 nothing committed of 3".to_string())
    );
    assert!(
        group_caught_up(&history.commits, "other", "t", &[1]).is_err(),
        "another group's commits do not count"
    );
    assert!(
        group_caught_up(&history.commits, "g", "u", &[1]).is_err(),
        "nor another topic's"
    );
}

#[path = "check_epoch_tests.rs"]
mod epochs;
