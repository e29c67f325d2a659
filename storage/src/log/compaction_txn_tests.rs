//! Compaction of a log holding transactions (`compaction_txn`, `log::maintenance`): committed
//! records are cleaned by key, aborted ones go (their batch stays, empty), an open transaction's
//! are kept, and the aborted-transaction index and open transactions survive the rewrite and a
//! crash after it.

use bytes::{Bytes, BytesMut};

use super::tests::{read_all, small_config};
use super::*;
use crate::batch::BatchIter;
use crate::config::CleanupPolicy;
use crate::control::{marker_batch, Marker};
use crate::records::BatchBuilder;
use crate::test_util::run;

fn txn(producer_id: i64, records: &[(&str, &str)]) -> BytesMut {
    let mut b = BatchBuilder::new(1_000);
    (b.producer_id, b.producer_epoch, b.transactional) = (producer_id, 0, true);
    b.base_sequence = 0;
    for (k, v) in records {
        b.push(
            1_000,
            Some(Bytes::copy_from_slice(k.as_bytes())),
            Some(Bytes::copy_from_slice(v.as_bytes())),
        );
    }
    b.build().unwrap()
}

fn plain(key: &str, value: &str) -> BytesMut {
    let mut b = BatchBuilder::new(1_000);
    b.push(
        1_000,
        Some(Bytes::copy_from_slice(key.as_bytes())),
        Some(Bytes::copy_from_slice(value.as_bytes())),
    );
    b.build().unwrap()
}

fn marker(producer_id: i64, commit: bool) -> BytesMut {
    let m = Marker {
        commit,
        coordinator_epoch: 0,
        decision_offset: -1,
    };
    marker_batch(producer_id, 0, m, 1_000)
}

/// The values of the records the test wrote (not the filler, not the markers' own records,
/// whose values are binary and start with a zero version).
fn values(records: &[(u64, Option<Bytes>)]) -> Vec<String> {
    records
        .iter()
        .filter_map(|(_, v)| v.as_ref())
        .filter(|v| v.first() != Some(&0))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|v| !v.starts_with("fill"))
        .collect()
}

#[test]
fn compaction_cleans_committed_records_by_key_and_aborted_ones_away() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        log.append(txn(5, &[("a", "committed-a"), ("b", "committed-b")]), 0, 0)
            .await
            .unwrap();
        log.append(marker(5, true), 0, 0).await.unwrap();
        let aborted = log
            .append(txn(6, &[("c", "aborted-c")]), 0, 0)
            .await
            .unwrap();
        log.append(marker(6, false), 0, 0).await.unwrap();
        log.append(plain("a", "plain-a"), 0, 0).await.unwrap();
        let open = log.append(txn(7, &[("b", "open-b")]), 0, 0).await.unwrap();
        let mut n = 0;
        while log.segment_count() < 4 {
            log.append(plain("z", &format!("fill-{n}-{}", "x".repeat(200))), 0, 0)
                .await
                .unwrap();
            n += 1;
        }
        let index_before = log.aborted_txns(0, u64::MAX, 10).await.unwrap();
        assert_eq!(index_before.len(), 1, "{index_before:?}");
        let stats = log.compact(0).await.unwrap();
        assert!(stats.segments_rewritten > 0, "{stats:?}");
        let expect = vec!["committed-b", "plain-a", "open-b"];
        assert_eq!(
            values(&read_all(&log, 0).await),
            expect,
            "committed a superseded by the plain one, committed b kept (the open b supersedes \
             nothing), the aborted c gone, the open b kept"
        );
        // The aborted batch is still in the log, empty, with its producer and offsets.
        let bytes = log
            .read_copy(aborted.base_offset, 100_000, aborted.log_end_offset)
            .await
            .unwrap();
        let h = BatchIter::new(&bytes, usize::MAX)
            .next()
            .expect("the aborted batch is kept")
            .unwrap()
            .header;
        assert_eq!(
            (h.base_offset as u64, h.producer_id, h.record_count),
            (aborted.base_offset, 6, 0)
        );
        assert!(h.is_transactional());
        assert_eq!(
            log.aborted_txns(0, u64::MAX, 10).await.unwrap(),
            index_before
        );
        // A crash after the rewrite: recovery walks the compacted segments to the same state.
        drop(log);
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert_eq!(values(&read_all(&log, 0).await), expect);
        assert_eq!(
            log.aborted_txns(0, u64::MAX, 10).await.unwrap(),
            index_before
        );
        let open_now: Vec<(i64, u64)> = log
            .open_txns()
            .iter()
            .map(|o| (o.producer_id, o.first_offset))
            .collect();
        assert_eq!(open_now, vec![(7, open.base_offset)]);
        // Compacting again removes nothing more.
        let again = log.compact(0).await.unwrap();
        assert_eq!(again.records_removed, 0, "{again:?}");
    });
}
