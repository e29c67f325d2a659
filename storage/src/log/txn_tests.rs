//! The log's aborted-transaction index and open transactions (txn.rs) against a model: the list
//! of batches the test appended, cut by every truncation and crash to what the log kept, and
//! replayed by the simplest rules (a transactional batch opens its producer's transaction, a
//! marker closes it, an abort of an open one is an entry).

use std::collections::BTreeMap;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::tests::small_config;
use super::*;
use crate::control::{marker_batch, Marker};
use crate::records::BatchBuilder;
use crate::test_util::run;
use crate::txn_index::AbortedTxnEntry;

const EPOCH: i16 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Txn(i64),
    Marker { producer_id: i64, commit: bool },
}

/// What the test appended and the log still holds: (base offset, next offset, kind).
#[derive(Debug, Default)]
struct Model {
    batches: Vec<(u64, u64, Kind)>,
}

impl Model {
    fn cut(&mut self, end: u64) {
        self.batches.retain(|&(_, next, _)| next <= end);
    }

    /// (aborted entries by marker, open transactions by producer).
    fn replay(&self) -> (Vec<AbortedTxnEntry>, BTreeMap<i64, u64>) {
        let mut open = BTreeMap::new();
        let mut aborted = Vec::new();
        for &(base, _, kind) in &self.batches {
            match kind {
                Kind::Plain => {}
                Kind::Txn(pid) => {
                    open.entry(pid).or_insert(base);
                }
                Kind::Marker {
                    producer_id,
                    commit,
                } => {
                    if let Some(first) = open.remove(&producer_id) {
                        if !commit {
                            aborted.push(AbortedTxnEntry {
                                producer_id,
                                first_offset: first,
                                last_offset: base,
                            });
                        }
                    }
                }
            }
        }
        (aborted, open)
    }
}

fn data(kind: Kind, records: usize, filler_bytes: usize) -> BytesMut {
    let mut b = BatchBuilder::new(1_000);
    if let Kind::Txn(pid) = kind {
        (b.producer_id, b.producer_epoch, b.transactional) = (pid, EPOCH, true);
        b.base_sequence = 0;
    }
    for i in 0..records {
        b.push(
            1_000,
            None,
            Some(Bytes::from(vec![b'a' + i as u8; filler_bytes])),
        );
    }
    b.build().unwrap()
}

fn bytes_of(kind: Kind, records: usize, filler_bytes: usize) -> BytesMut {
    match kind {
        Kind::Marker {
            producer_id,
            commit,
        } => marker_batch(
            producer_id,
            EPOCH,
            Marker {
                commit,
                coordinator_epoch: 0,
                decision_offset: -1,
            },
            1_000,
        ),
        other => data(other, records, filler_bytes),
    }
}

async fn append(log: &PartitionLog, model: &mut Model, kind: Kind, records: usize, filler: usize) {
    let info = log
        .append(bytes_of(kind, records, filler), 0, 1_000)
        .await
        .unwrap();
    model
        .batches
        .push((info.base_offset, info.log_end_offset, kind));
}

/// The log agrees with the model: every entry, every range query, the open transactions.
async fn check(log: &PartitionLog, model: &Model, ranges: &[(f64, f64)]) {
    let (aborted, open) = model.replay();
    assert_eq!(
        log.aborted_txns(0, u64::MAX, usize::MAX).await.unwrap(),
        sorted(aborted.clone()),
        "every aborted transaction"
    );
    let end = log.log_end_offset();
    for &(a, b) in ranges {
        let (a, b) = (a.min(b), a.max(b));
        let (from, to) = ((a * end as f64) as u64, (b * end as f64) as u64 + 1);
        let want: Vec<_> = aborted
            .iter()
            .filter(|e| e.last_offset >= from && e.first_offset < to)
            .copied()
            .collect();
        let got = log.aborted_txns(from, to, usize::MAX).await.unwrap();
        assert_eq!(got, sorted(want.clone()), "range [{from}, {to})");
        let mut capped = sorted(want);
        capped.truncate(2);
        assert_eq!(
            log.aborted_txns(from, to, 2).await.unwrap(),
            capped,
            "the earliest 2"
        );
    }
    let got: BTreeMap<i64, u64> = log
        .open_txns()
        .into_iter()
        .map(|t| (t.producer_id, t.first_offset))
        .collect();
    assert_eq!(got, open, "open transactions");
}

fn sorted(mut v: Vec<AbortedTxnEntry>) -> Vec<AbortedTxnEntry> {
    v.sort_unstable_by_key(|e| (e.first_offset, e.producer_id, e.last_offset));
    v
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        kind: Kind,
        records: usize,
        filler: usize,
    },
    Truncate(f64),
    Roll,
    /// Drop the log without closing it; cut the active segment's file at a fraction of its bytes
    /// (the crash lost the rest), maybe tear a closed segment's index or lose its snapshot.
    Crash {
        flush: bool,
        cut: Option<f64>,
        tear_index: Option<usize>,
        drop_snapshot: Option<usize>,
    },
    Reopen,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        1 => Just(Kind::Plain),
        3 => (0i64..3).prop_map(Kind::Txn),
        2 => ((0i64..3), any::<bool>()).prop_map(|(producer_id, commit)| Kind::Marker { producer_id, commit }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (kind(), 1usize..4, 1usize..600).prop_map(|(kind, records, filler)| Op::Append { kind, records, filler }),
        1 => (0.0f64..1.0).prop_map(Op::Truncate),
        1 => Just(Op::Roll),
        1 => (any::<bool>(), proptest::option::of(0.0f64..=1.0), proptest::option::of(0usize..8), proptest::option::of(0usize..8))
            .prop_map(|(flush, cut, tear_index, drop_snapshot)| Op::Crash { flush, cut, tear_index, drop_snapshot }),
        1 => Just(Op::Reopen),
    ]
}

fn segment_files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn run_case(ops: Vec<Op>, ranges: Vec<(f64, f64)>) {
    run(move || async move {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 4096,
            ..small_config()
        };
        let (mut log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Append {
                    kind,
                    records,
                    filler,
                } => append(&log, &mut model, kind, records, filler).await,
                Op::Truncate(frac) => {
                    let (start, end) = (log.log_start_offset(), log.log_end_offset());
                    let to = start + ((end - start) as f64 * frac) as u64;
                    let new_end = log.truncate_to(to).await.unwrap();
                    model.cut(new_end);
                }
                Op::Roll => {
                    let _turn = PartitionLog::lock(&log.append_lock, &log.dir)
                        .await
                        .unwrap();
                    if log.st.borrow().active().size_bytes() > 0 {
                        log.roll().await.unwrap();
                    }
                }
                Op::Crash {
                    flush,
                    cut,
                    tear_index,
                    drop_snapshot,
                } => {
                    if flush {
                        log.flush().await.unwrap();
                    }
                    let active = log.st.borrow().active().log_path.clone();
                    drop(log);
                    if let Some(frac) = cut {
                        let bytes = std::fs::read(&active).unwrap();
                        let keep = (bytes.len() as f64 * frac) as usize;
                        std::fs::write(&active, &bytes[..keep]).unwrap();
                    }
                    let indexes = segment_files(dir.path(), "txnindex");
                    if let Some(p) = tear_index.and_then(|i| indexes.get(i)) {
                        let bytes = std::fs::read(p).unwrap();
                        std::fs::write(p, &bytes[..bytes.len().saturating_sub(3)]).unwrap();
                    }
                    let snaps = segment_files(dir.path(), "txnsnap");
                    if let Some(p) = drop_snapshot.and_then(|i| snaps.get(i)) {
                        std::fs::remove_file(p).unwrap();
                    }
                    let (reopened, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
                    assert!(!stats.clean);
                    assert!(
                        stats.txn_indexes_rebuilt >= 1,
                        "the active segment's, at least"
                    );
                    log = reopened;
                    model.cut(log.log_end_offset());
                }
                Op::Reopen => {
                    log.close().await.unwrap();
                    drop(log);
                    let (reopened, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
                    assert!(stats.clean);
                    assert_eq!(
                        (stats.txn_indexes_rebuilt, stats.txn_segments_walked),
                        (0, 0),
                        "a clean reopen trusts the files"
                    );
                    log = reopened;
                }
            }
            assert_eq!(
                model.batches.last().map_or(log.log_start_offset(), |b| b.1),
                log.log_end_offset(),
                "the model holds what the log holds"
            );
        }
        check(&log, &model, &ranges).await;
        log.close().await.unwrap();
        drop(log);
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        check(&log, &model, &ranges).await;
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Appends of three producers' transactions, markers and plain batches, truncations, rolls,
    /// crashes (losing any part of the active segment, a torn index, a lost snapshot) and clean
    /// reopens: the index and the open transactions always equal the model's.
    #[test]
    fn the_index_equals_the_model_of_the_surviving_log(
        ops in proptest::collection::vec(op(), 1..60),
        ranges in proptest::collection::vec((0.0f64..1.0, 0.0f64..1.0), 3),
    ) {
        run_case(ops, ranges);
    }
}

/// An aborted transaction whose first batch is many segments before its marker, and one still
/// open from as far back: both known after a crash and after a clean reopen, and the index file
/// of a deleted segment goes with it.
#[test]
fn a_transaction_begun_many_segments_back_is_known_after_a_reopen() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 4096,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let mut model = Model::default();
        append(&log, &mut model, Kind::Txn(7), 1, 10).await;
        append(&log, &mut model, Kind::Txn(8), 1, 10).await;
        for _ in 0..100 {
            append(&log, &mut model, Kind::Plain, 2, 500).await;
        }
        append(&log, &mut model, Kind::Txn(7), 1, 10).await;
        let marker = Kind::Marker {
            producer_id: 7,
            commit: false,
        };
        append(&log, &mut model, marker, 1, 0).await;
        for _ in 0..40 {
            append(&log, &mut model, Kind::Plain, 2, 500).await;
        }
        assert!(log.segment_count() > 20, "{} segments", log.segment_count());
        let marker_offset = model.batches[102 + 1].0;
        let want = vec![AbortedTxnEntry {
            producer_id: 7,
            first_offset: 0,
            last_offset: marker_offset,
        }];
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap(), want);
        log.flush().await.unwrap();
        drop(log);

        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert!(!stats.clean);
        assert_eq!(
            stats.txn_segments_walked, 1,
            "the active segment from its snapshot"
        );
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap(), want);
        assert_eq!(
            log.aborted_txns(1, 2, 10).await.unwrap(),
            want,
            "a fetch between the two"
        );
        assert_eq!(
            log.aborted_txns(marker_offset + 1, u64::MAX, 10)
                .await
                .unwrap(),
            vec![]
        );
        let open = log.open_txns();
        assert_eq!(
            open.iter()
                .map(|t| (t.producer_id, t.producer_epoch, t.first_offset))
                .collect::<Vec<_>>(),
            vec![(8, EPOCH, 1)]
        );
        check(&log, &model, &[(0.0, 1.0), (0.3, 0.5)]).await;
        log.close().await.unwrap();
        drop(log);

        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert!(stats.clean);
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap(), want);
        assert_eq!(log.open_txns(), open);

        // Records deleted past the marker's segment: its index file goes with it.
        let marker_segment = *log
            .segment_base_offsets()
            .iter()
            .rev()
            .find(|b| **b <= marker_offset)
            .unwrap();
        let index = crate::txn_index::txn_index_path(dir.path(), marker_segment);
        assert!(index.exists());
        let later = log.segment_base_offsets()[log.segment_count() - 2];
        log.delete_records_before(later).await.unwrap();
        assert!(!index.exists(), "deleted with its segment");
        assert_eq!(log.aborted_txns(later, u64::MAX, 10).await.unwrap(), vec![]);
        assert_eq!(log.open_txns(), open, "still open: it still holds the LSO");
    });
}

/// Compaction rewrites closed segments around an aborted transaction (keyed plain records
/// superseded on both sides of it): the index still reports it, before and after a clean reopen
/// that trusts the kept files.
#[test]
fn compaction_keeps_the_index_of_the_segments_it_rewrites() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            cleanup_policy: crate::config::CleanupPolicy::Compact,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let mut model = Model::default();
        for tag in 0..10 {
            keyed(&log, tag).await;
        }
        let plain_end = log.log_end_offset();
        model.batches.push((0, plain_end, Kind::Plain));
        append(&log, &mut model, Kind::Txn(3), 2, 50).await;
        for tag in 10..20 {
            let info = keyed(&log, tag).await;
            model
                .batches
                .push((info.base_offset, info.log_end_offset, Kind::Plain));
        }
        let marker = Kind::Marker {
            producer_id: 3,
            commit: false,
        };
        append(&log, &mut model, marker, 1, 0).await;
        while log.segment_count() < 8 {
            let info = keyed(&log, 99).await;
            model
                .batches
                .push((info.base_offset, info.log_end_offset, Kind::Plain));
        }
        let before = log.aborted_txns(0, u64::MAX, 10).await.unwrap();
        assert_eq!(before.len(), 1);
        let stats = log.compact(0).await.unwrap();
        assert!(stats.segments_rewritten > 0, "{stats:?}");
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap(), before);
        check(&log, &model, &[(0.0, 1.0)]).await;
        log.close().await.unwrap();
        drop(log);
        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert_eq!(stats.txn_indexes_rebuilt, 0);
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap(), before);
    });
}

async fn keyed(log: &PartitionLog, tag: u64) -> AppendInfo {
    log.append(super::tests::batch(5, tag, 0), 0, 0)
        .await
        .unwrap()
}

/// A failed write of an index entry fails that append and makes queries refuse (`Offline`)
/// instead of answering without the entry; the reopen rebuilds the file from the segment.
#[test]
fn a_failed_index_write_is_refused_until_the_reopen_rebuilds_it() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = small_config();
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let mut model = Model::default();
        append(&log, &mut model, Kind::Txn(5), 1, 10).await;
        // The index file cannot be created: a directory stands in its place.
        let base = log.st.borrow().active().base_offset;
        let index = crate::txn_index::txn_index_path(dir.path(), base);
        std::fs::remove_file(&index).unwrap();
        std::fs::create_dir(&index).unwrap();
        let abort = bytes_of(
            Kind::Marker {
                producer_id: 5,
                commit: false,
            },
            1,
            0,
        );
        assert!(log.append(abort, 0, 1_000).await.is_err());
        let marker = model.batches[0].1;
        model.batches.push((
            marker,
            marker + 1,
            Kind::Marker {
                producer_id: 5,
                commit: false,
            },
        ));
        assert_eq!(log.log_end_offset(), marker + 1, "the marker is in the log");
        assert!(matches!(
            log.aborted_txns(0, u64::MAX, 10).await,
            Err(LogError::Offline { .. })
        ));
        log.flush().await.unwrap();
        drop(log);
        std::fs::remove_dir(&index).unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert!(stats.txn_indexes_rebuilt >= 1);
        check(&log, &model, &[(0.0, 1.0)]).await;
        assert_eq!(log.aborted_txns(0, u64::MAX, 10).await.unwrap().len(), 1);
    });
}
