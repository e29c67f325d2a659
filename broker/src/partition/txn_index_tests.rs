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
                p.write_marker(ABORTED, EPOCH, false, 0, -1).await,
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

/// Where the per-fetch bound on aborted transactions cuts a read_committed fetch: the list holds
/// the earliest, and the records stop below the first one left out, so a consumer never gets a
/// record of an aborted transaction without its entry; and a fetch reports only the aborted
/// transactions of the records it returns.
#[test]
fn a_fetch_reports_the_aborted_transactions_of_its_records_and_stops_at_the_bound() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), config()).await.unwrap();
        let p = Partition::new(
            TopicPartition::new("t", 0),
            log,
            1,
            Durability::Replicated,
            true,
        );
        p.learn(&alone(), 0).await;
        let mut firsts = Vec::new();
        for pid in 0..4 {
            let producer_id = ABORTED + pid;
            firsts.push(produce(&p, txn_batch(producer_id, 0), true, producer_id).await);
            assert_eq!(
                p.write_marker(producer_id, EPOCH, false, 0, -1).await,
                ErrorCode::None
            );
            plain(&p, 3).await;
        }
        let end = p.log.log_end_offset();
        let records_end = |f: &crate::requests::FetchResult| -> u64 {
            f.chunks
                .iter()
                .filter_map(|c| match c {
                    crate::requests::FetchChunk::Memory(b) => PartitionLog::next_offset_after(b),
                    crate::requests::FetchChunk::File { .. } => panic!("copy reads were asked for"),
                })
                .max()
                .unwrap_or(0)
        };
        let all = p.fetch(0, 1 << 20, true).await;
        assert_eq!(all.error, ErrorCode::None);
        let every: Vec<(i64, i64)> = (0..4)
            .map(|i| (ABORTED + i, firsts[i as usize] as i64))
            .collect();
        assert_eq!(all.aborted, every);
        assert_eq!(records_end(&all), end);

        // Only the first transaction's batch and its marker: only its entry.
        let one = p.fetch(0, 1, true).await;
        assert_eq!(one.aborted, vec![every[0]]);
        assert!(records_end(&one) <= firsts[1]);

        // At most two per fetch: the first two, and nothing at or past the third's first batch.
        p.set_aborted_per_fetch_max(2);
        let cut = p.fetch(0, 1 << 20, true).await;
        assert_eq!(cut.error, ErrorCode::None);
        assert_eq!(cut.aborted, every[..2].to_vec());
        let stop = records_end(&cut);
        assert!(
            stop > firsts[1] && stop <= firsts[2],
            "records end at {stop}, firsts {firsts:?}"
        );
        // The next fetch, from where that one stopped, reports the rest.
        let rest = p.fetch(stop as i64, 1 << 20, true).await;
        assert_eq!(rest.aborted, every[2..].to_vec());
        assert_eq!(records_end(&rest), end);
    });
}
