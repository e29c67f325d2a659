//! `sync_to` returns for any offset: one past the log end asks for the whole log (a caller's
//! offset from before a truncation, say), and never makes the writer wait for a mark no append
//! will record.

use super::tests::{batch, small_config};
use super::*;
use crate::test_util::run;

#[test]
fn a_sync_to_an_offset_past_the_log_end_syncs_the_whole_log_and_returns() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        for tag in 0..3u64 {
            log.append(batch(4, tag, 0), 1, 0).await.unwrap();
        }
        let end = log.log_end_offset();
        assert!(log.durable_offset() < end);
        let synced = crate::test_util::fused(log.sync_to(end + 100)).await;
        assert!(
            matches!(synced, Some(Ok(()))),
            "sync_to past the log end never returned: {synced:?}"
        );
        assert_eq!(log.durable_offset(), end);
    });
}
