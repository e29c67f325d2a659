//! Restarting a log empty past its end ([`PartitionLog::truncate_fully_and_start_at`]) on real
//! files: it is refused at or below the log end; afterwards the log starts and ends at the
//! offset, reads below answer out of range, appends continue there, and a crash (the log dropped
//! without close, stopped after each step) or a clean restart reopens the old log (only before
//! the first write) or the new empty one — never a gap or a start past the end.

use proptest::prelude::*;

use super::start_at::StartAtStep;
use super::tests::{batch, read_all, small_config};
use super::*;
use crate::test_util::run;

const STEPS: [StartAtStep; 6] = [
    StartAtStep::Sealed,
    StartAtStep::LogStartWritten,
    StartAtStep::EpochsCleared,
    StartAtStep::FirstSegmentDeleted,
    StartAtStep::SegmentsDeleted,
    StartAtStep::SegmentCreated,
];

/// A log in `dir` of `batches` batches of 5 records (epoch 1, then 3), synced, over several
/// segments; returns it.
async fn old_log(dir: &Path, batches: u64) -> Rc<PartitionLog> {
    let (log, _) = PartitionLog::open(dir, small_config()).await.unwrap();
    for tag in 0..batches {
        let epoch = if tag < batches / 2 { 1 } else { 3 };
        log.append(batch(5, tag, 0), epoch, 0).await.unwrap();
    }
    log.sync_to(log.log_end_offset()).await.unwrap();
    log
}

/// The log is the new empty one at `offset`: nothing below, no epochs, one segment.
async fn assert_restarted_at(log: &PartitionLog, dir: &Path, offset: u64) {
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (offset, offset)
    );
    assert_eq!(log.segment_base_offsets(), vec![offset]);
    assert!(log.leader_epochs().entries().is_empty(), "epochs cleared");
    for below in [0, offset - 1] {
        assert!(
            matches!(
                log.read(below, 100, u64::MAX).await,
                Err(LogError::OffsetOutOfRange { .. })
            ),
            "a read at {below} is out of range"
        );
    }
    let segments = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.ends_with(".log").then_some(name)
        })
        .count();
    assert_eq!(segments, 1, "the old segment files are gone");
}

/// The restarted log takes appends at `offset`, and a crash and a clean restart keep them.
async fn assert_appends_at(log: Rc<PartitionLog>, dir: &Path, offset: u64) {
    let info = log.append(batch(5, 999, 0), 4, 0).await.unwrap();
    assert_eq!(
        (info.base_offset, info.log_end_offset),
        (offset, offset + 5)
    );
    log.sync_to(offset + 5).await.unwrap();
    drop(log); // a crash
    let (log, _) = PartitionLog::open(dir, small_config()).await.unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (offset, offset + 5)
    );
    let offsets: Vec<u64> = read_all(&log, offset).await.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (offset..offset + 5).collect::<Vec<_>>());
    assert_eq!(log.leader_epochs().start_offset_of(4), Some(offset));
    log.close().await.unwrap();
    let (log, stats) = PartitionLog::open(dir, small_config()).await.unwrap();
    assert!(stats.clean);
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (offset, offset + 5)
    );
}

#[test]
fn a_log_restarted_past_its_end_starts_and_ends_there_across_restarts() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let log = old_log(dir.path(), 60).await;
        let (end, bases) = (log.log_end_offset(), log.segment_base_offsets());
        assert!(bases.len() >= 3, "{bases:?}");
        for at_or_below in [0, 7, end] {
            assert!(
                matches!(
                    log.truncate_fully_and_start_at(at_or_below).await,
                    Err(LogError::OffsetOutOfRange { .. })
                ),
                "{at_or_below} is not past the end {end}"
            );
        }
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.segment_base_offsets()
            ),
            (0, end, bases.clone()),
            "a refused restart changes nothing"
        );
        assert_eq!(read_all(&log, 0).await.len() as u64, end);

        let offset = end + 1000;
        log.truncate_fully_and_start_at(offset).await.unwrap();
        assert_restarted_at(&log, dir.path(), offset).await;
        assert_eq!(log.durable_offset(), offset);
        drop(log); // a crash right after
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert_restarted_at(&log, dir.path(), offset).await;
        assert_appends_at(log, dir.path(), offset).await;
    });
}

/// One crash case: the log stops after `step` and is dropped without close; reopening gives the
/// old log (before the first write) or the new one at the offset, which then takes appends.
fn crash_case(batches: u64, past_end: u64, step: StartAtStep) {
    run(move || async move {
        let dir = tempfile::tempdir().unwrap();
        let log = old_log(dir.path(), batches).await;
        let end = log.log_end_offset();
        let offset = end + past_end;
        log.crash_restart_after(step);
        assert!(log.truncate_fully_and_start_at(offset).await.is_err());
        assert!(
            log.append(batch(1, 0, 0), 1, 0).await.is_err(),
            "a failed restart leaves the log refusing work"
        );
        drop(log);
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        if step == StartAtStep::Sealed {
            assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, end));
            let offsets: Vec<u64> = read_all(&log, 0).await.iter().map(|r| r.0).collect();
            assert_eq!(offsets, (0..end).collect::<Vec<_>>(), "the old log, whole");
            assert_eq!(log.leader_epochs().latest_epoch(), Some(3));
            return;
        }
        assert_restarted_at(&log, dir.path(), offset).await;
        assert_appends_at(log, dir.path(), offset).await;
    });
}

#[test]
fn a_crash_after_any_step_reopens_the_old_log_or_the_new_one() {
    for step in STEPS {
        crash_case(40, 500, step);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Any log size, any offset past the end, a crash after any step (or none: the step list's
    /// last one leaves only memory undone).
    #[test]
    fn any_log_restarted_anywhere_past_its_end_reopens_whole(
        batches in 1u64..50,
        past_end in 1u64..5000,
        step in 0usize..STEPS.len(),
    ) {
        crash_case(batches, past_end, STEPS[step]);
    }
}
