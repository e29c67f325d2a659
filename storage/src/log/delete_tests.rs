//! DeleteRecords in the log ([`PartitionLog::delete_records_before`]) on real files: the log
//! start only rises, is durable when the call returns, the segments wholly below it are deleted,
//! reads below it answer out of range, and it survives a crash, retention and a clean restart.

use super::tests::{batch, read_all, small_config};
use super::*;
use crate::test_util::run;

#[test]
fn deleted_records_stay_deleted_across_a_crash_retention_and_a_clean_restart() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let target;
        {
            let (log, _) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            for tag in 0..120u64 {
                log.append(batch(5, tag, 0), 1, 0).await.unwrap();
            }
            log.sync_to(log.log_end_offset()).await.unwrap();
            let bases = log.segment_base_offsets();
            assert!(bases.len() >= 4, "{bases:?}");
            // Inside the third segment, not on a batch boundary.
            target = bases[2] + 7;
            assert_eq!(log.delete_records_before(target).await.unwrap(), target);
            assert_eq!(log.log_start_offset(), target);
            assert_eq!(
                log.segment_base_offsets()[0],
                bases[2],
                "the segments wholly below go, the one holding the offset stays"
            );
            for b in &bases[..2] {
                assert!(!segment_file(dir.path(), *b, "log").exists(), "segment {b}");
            }
            assert!(matches!(
                log.read(target - 1, 100, u64::MAX).await,
                Err(LogError::OffsetOutOfRange { .. })
            ));
            assert_eq!(
                read_all(&log, target).await.first().map(|r| r.0),
                Some(target)
            );
            assert_eq!(
                log.delete_records_before(3).await.unwrap(),
                target,
                "never lowered"
            );
            let end = log.log_end_offset();
            assert!(matches!(
                log.delete_records_before(end + 1).await,
                Err(LogError::OffsetOutOfRange { .. })
            ));
            // No close: a crash.
        }
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(!stats.clean);
        assert_eq!(
            log.log_start_offset(),
            target,
            "recovery reads the checkpoint"
        );
        assert!(matches!(
            log.read(target - 1, 100, u64::MAX).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        // Retention with nothing expired keeps the start where DeleteRecords put it.
        let r = log.enforce_retention(0).await.unwrap();
        assert_eq!((r.segments_deleted, r.log_start_offset), (0, target));
        log.close().await.unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(stats.clean);
        assert_eq!(log.log_start_offset(), target);
        assert_eq!(
            read_all(&log, target).await.first().map(|r| r.0),
            Some(target)
        );
    });
}
