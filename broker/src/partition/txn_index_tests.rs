//! read_committed after a restart, for transactions that began long before the tail the producer
//! table is rebuilt from: the aborted one is reported (from the log's aborted-transaction index)
//! and the open one holds the last stable offset at its first batch (from the log's open
//! transactions), on one leader [`Partition`] whose log spans many small segments.

use bytes::Bytes;
use spool_protocol::ErrorCode;
use spool_storage::records::BatchBuilder;
use spool_storage::{Durability, LogConfig, PartitionLog};

use super::{Committed, Partition};
use crate::requests::TopicPartition;
use crate::test_executor::run;

const ABORTED: i64 = 42;
const OPEN: i64 = 43;
const EPOCH: i16 = 0;
/// The tail the producer table is rebuilt from in this test: a few batches.
const TAIL_BYTES: u64 = 2_000;

fn alone() -> Committed {
    Committed {
        leader: 1,
        leader_epoch: 1,
        partition_epoch: 1,
        replicas: vec![1],
        isr: vec![1],
        min_insync_replicas: 1,
        broker_epoch: 10,
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

async fn leader(dir: &std::path::Path) -> std::rc::Rc<Partition> {
    let (log, _) = PartitionLog::open(dir, config()).await.unwrap();
    let p = Partition::new(
        TopicPartition::new("t", 0),
        log,
        1,
        Durability::Replicated,
        false,
    );
    p.learn(&alone(), 0).await;
    p.set_rebuild_bytes_max(TAIL_BYTES);
    p
}

fn txn_batch(producer_id: i64, sequence: i32) -> Bytes {
    let mut b = BatchBuilder::new(0);
    (b.producer_id, b.producer_epoch) = (producer_id, EPOCH);
    (b.base_sequence, b.transactional) = (sequence, true);
    b.push(
        0,
        None,
        Some(Bytes::from(format!("t-{producer_id}-{sequence}"))),
    );
    b.build().unwrap().freeze()
}

fn plain_batch(i: u64) -> Bytes {
    let mut b = BatchBuilder::new(0);
    b.push(0, None, Some(Bytes::from(vec![b'p'; 400 + i as usize % 7])));
    b.build().unwrap().freeze()
}

/// Appends and returns the base offset.
async fn produce(p: &Partition, batch: Bytes, verified: bool, producer_id: i64) -> u64 {
    let token = verified.then(|| p.begin_verification(producer_id, EPOCH));
    let before = p.log.log_end_offset();
    let r = p.produce(batch, -1, 1000, 1 << 20, 0, token).await;
    if let Some(v) = token {
        p.end_verification(v);
    }
    assert_eq!(r.error, ErrorCode::None, "{r:?}");
    before
}

async fn plain(p: &Partition, n: u64) {
    for i in 0..n {
        produce(p, plain_batch(i), false, -1).await;
    }
}

#[test]
fn transactions_begun_segments_before_the_rebuilt_tail_are_known_after_a_restart() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (aborted_first, marker, open_first);
        {
            let p = leader(dir.path()).await;
            aborted_first = produce(&p, txn_batch(ABORTED, 0), true, ABORTED).await;
            plain(&p, 40).await;
            produce(&p, txn_batch(ABORTED, 1), false, ABORTED).await;
            marker = p.log.log_end_offset();
            assert_eq!(
                p.write_marker(ABORTED, EPOCH, false, 0).await,
                ErrorCode::None
            );
            plain(&p, 40).await;
            open_first = produce(&p, txn_batch(OPEN, 0), true, OPEN).await;
            plain(&p, 40).await;
            assert!(
                p.log.segment_count() > 10,
                "{} segments",
                p.log.segment_count()
            );
            p.log.close().await.unwrap();
        }
        let p = leader(dir.path()).await;
        // Something after the restart, so the high watermark covers the log.
        plain(&p, 1).await;
        let end = p.log.log_end_offset();
        assert_eq!(p.high_watermark(), end);

        let f = p.fetch(0, 1 << 20, true).await;
        assert_eq!(f.error, ErrorCode::None);
        assert_eq!(
            f.last_stable_offset, open_first as i64,
            "the open transaction holds the LSO at its first batch, far before the tail"
        );
        assert_eq!(f.aborted, vec![(ABORTED, aborted_first as i64)]);
        assert!(p.open_transactions().contains(&(OPEN, EPOCH, open_first)));
        let after = p.fetch((marker + 1) as i64, 1 << 20, true).await;
        assert_eq!(after.aborted, vec![], "nothing aborted after the marker");

        // A leadership move keeps it: the log (and so its index) is the replica's own.
        let mut moved = alone();
        (moved.leader_epoch, moved.partition_epoch) = (2, 2);
        p.learn(&moved, 0).await;
        let f = p.fetch(1, 1 << 20, true).await;
        assert_eq!(f.aborted, vec![(ABORTED, aborted_first as i64)]);
        assert_eq!(f.last_stable_offset, open_first as i64);
    });
}
