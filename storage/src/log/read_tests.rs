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
