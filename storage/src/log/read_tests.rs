//! Where a read ends (`ReadSlice::next_offset`, `PartitionLog::next_offset_after`): the offset
//! after the last batch returned, from the tail cache, from a segment file, and from a copy.

use super::tests::{batch, small_config};
use super::*;
use crate::test_util::run;

#[test]
fn a_read_says_where_it_ends_from_memory_from_a_file_and_from_a_copy() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        let mut ends = Vec::new();
        for tag in 0..120 {
            ends.push(
                log.append(batch(3, tag, 0), 0, 0)
                    .await
                    .unwrap()
                    .log_end_offset,
            );
        }
        assert!(log.segment_count() > 2, "reads cross segment files");
        // The newest batches come from the tail cache, the oldest from segment files.
        for (i, &end) in ends.iter().enumerate() {
            let from = end - 3;
            let one = log.read(from, 1, u64::MAX).await.unwrap();
            assert_eq!(
                one.next_offset, end,
                "batch {i}: one batch, read from {from}"
            );
            let copy = log.read_copy(from, 1, u64::MAX).await.unwrap();
            assert_eq!(
                PartitionLog::next_offset_after(&copy),
                Some(end),
                "batch {i}"
            );
            let many = log.read(from, 1 << 20, u64::MAX).await.unwrap();
            assert!(
                many.next_offset >= end && ends.contains(&many.next_offset),
                "batch {i}: a larger read ends at a batch's end at or past {end}: {}",
                many.next_offset
            );
        }
        // Bounded by the upper offset: nothing past it, and an empty read ends nowhere.
        let upper = ends[5];
        let capped = log.read(0, 1 << 20, upper).await.unwrap();
        assert!(capped.next_offset <= upper && capped.next_offset > 0);
        let none = log.read(upper, 1 << 20, upper).await.unwrap();
        assert!(none.chunks.is_empty());
        assert_eq!(none.next_offset, 0);
        assert_eq!(PartitionLog::next_offset_after(&[]), None);
        assert_eq!(
            PartitionLog::next_offset_after(&[0u8; 7]),
            None,
            "a torn header"
        );
    });
}

/// One batch of the model log: (base offset, last offset, bytes).
type ModelBatch = (u64, u64, u64);

/// Checks one read against the model of the log: whole batches from the one holding `offset`,
/// in order, none reaching `upper`, within `max_bytes` unless it is a single batch, and at least
/// one whenever the batch holding `offset` ends below `upper`.
async fn check_read(
    log: &PartitionLog,
    model: &[ModelBatch],
    offset: u64,
    max_bytes: usize,
    upper: u64,
) {
    let end = model.last().map_or(0, |b| b.1 + 1);
    let upper_eff = upper.min(end);
    let what = format!("read({offset}, {max_bytes}, {upper})");
    let slice = log.read(offset, max_bytes, upper).await.unwrap();
    let copy = log.read_copy(offset, max_bytes, upper).await.unwrap();
    let got: Vec<ModelBatch> = crate::batch::BatchIter::new(&copy, usize::MAX)
        .map(|b| {
            let h = b.unwrap().header;
            (
                h.base_offset as u64,
                h.last_offset() as u64,
                h.total_bytes() as u64,
            )
        })
        .collect();
    let first = model.iter().position(|b| b.1 >= offset);
    let Some(first) = first.filter(|&i| offset < upper_eff && model[i].1 < upper_eff) else {
        assert!(
            got.is_empty() && slice.chunks.is_empty(),
            "{what}: nothing below upper"
        );
        return;
    };
    assert!(
        !got.is_empty(),
        "{what}: at least the batch holding the offset"
    );
    assert_eq!(
        &model[first..first + got.len()],
        &got[..],
        "{what}: whole batches in order"
    );
    assert!(
        got.iter().all(|b| b.1 < upper_eff),
        "{what}: none reaches upper"
    );
    let bytes: u64 = got.iter().map(|b| b.2).sum();
    assert!(
        got.len() == 1 || bytes <= max_bytes as u64,
        "{what}: {bytes} bytes"
    );
    assert_eq!(slice.bytes, bytes, "{what}");
    assert_eq!(slice.next_offset, got.last().unwrap().1 + 1, "{what}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Reads from segment files (the tail cache holds little), whether the index answers where
    /// they start and end or batch headers are read, agree with the model of the log.
    #[test]
    fn reads_from_files_agree_with_the_model(
        sizes in proptest::collection::vec(1usize..12, 1..60),
        interval in proptest::sample::select(vec![1u64, 64, 512, 4096]),
        probes in proptest::collection::vec((0u64..400, 1usize..6000, 0u64..450), 1..40),
    ) {
        run(move || async move {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig { segment_bytes: 16384, index_interval_bytes: interval, ..small_config() };
            let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
            let mut model = Vec::new();
            for (tag, &n) in sizes.iter().enumerate() {
                let b = batch(n, tag as u64, 0);
                let bytes = b.len() as u64;
                let end = log.append(b, 0, 0).await.unwrap().log_end_offset;
                model.push((end - n as u64, end - 1, bytes));
            }
            let end = model.last().unwrap().1 + 1;
            for &(offset, max_bytes, upper) in &probes {
                check_read(&log, &model, offset % (end + 1), max_bytes, upper).await;
            }
            // A consumer reading on from where each read ended meets every batch once.
            let mut at = 0;
            let mut seen = 0;
            while at < end {
                let slice = log.read(at, 2048, u64::MAX).await.unwrap();
                check_read(&log, &model, at, 2048, u64::MAX).await;
                seen += slice.chunks.len();
                at = slice.next_offset;
            }
            assert!(seen > 0);
        });
    }
}
