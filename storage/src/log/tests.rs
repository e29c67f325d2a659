//! The partition log on a real glommio executor and real files.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::batch::BatchIter;
use crate::config::CleanupPolicy;
use crate::records::{read_batch, BatchBuilder};

use crate::test_util::run;

pub(super) fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        write_buffer_bytes: 8192,
        preallocate_bytes: 16384,
        tail_cache_bytes: 2048,
        ..LogConfig::default()
    }
}

/// A batch of `n` records "key{i % keys}" → "value-{tag}-{i}", timestamps from `ts`.
pub(super) fn batch(n: usize, tag: u64, ts: i64) -> BytesMut {
    let mut b = BatchBuilder::new(ts);
    for i in 0..n {
        b.push(
            ts + i as i64,
            Some(Bytes::from(format!("key{}", i % 5))),
            Some(Bytes::from(format!("value-{tag}-{i}"))),
        );
    }
    b.build().unwrap()
}

/// Every record in the log from `from`, as (offset, value), read through `read_copy`.
pub(super) async fn read_all(log: &PartitionLog, from: u64) -> Vec<(u64, Option<Bytes>)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let bytes = log.read_copy(next, 3000, u64::MAX).await.unwrap();
        assert!(
            !bytes.is_empty(),
            "a read below the log end returns a batch"
        );
        for b in BatchIter::new(&bytes, usize::MAX) {
            let b = b.unwrap();
            let (h, recs) = read_batch(&Bytes::copy_from_slice(b.bytes), usize::MAX).unwrap();
            for r in recs {
                let o = h.base_offset as u64 + r.offset_delta as u64;
                if o >= next {
                    out.push((o, r.value));
                }
            }
            next = next.max(h.last_offset() as u64 + 1);
        }
    }
    out
}

fn expected(batches: &[(usize, u64)]) -> Vec<(u64, Option<Bytes>)> {
    let mut out = Vec::new();
    let mut o = 0;
    for &(n, tag) in batches {
        for i in 0..n {
            out.push((o, Some(Bytes::from(format!("value-{tag}-{i}")))));
            o += 1;
        }
    }
    out
}

#[test]
fn append_assigns_offsets_and_reads_back_across_segments() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(!stats.clean);
        let mut batches = Vec::new();
        for tag in 0..100u64 {
            let n = (tag % 7 + 1) as usize;
            let info = log
                .append(batch(n, tag, 1000 + tag as i64 * 10), 3, 0)
                .await
                .unwrap();
            let start: u64 = batches.iter().map(|b: &(usize, u64)| b.0 as u64).sum();
            assert_eq!(info.base_offset, start);
            assert_eq!(info.last_offset, start + n as u64 - 1);
            batches.push((n, tag));
        }
        assert!(log.segment_count() > 3, "small segments rolled");
        assert_eq!(read_all(&log, 0).await, expected(&batches));
        // The header carries the offset and epoch the log assigned.
        let first = log.read_copy(0, 1, u64::MAX).await.unwrap();
        let h = crate::batch::BatchHeader::parse(&first).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (0, 3));
        // The tail is served from memory; the start from a file range.
        let end = log.log_end_offset();
        let tail = log.read(end - 1, 1 << 20, u64::MAX).await.unwrap();
        assert!(matches!(tail.chunks[..], [ReadChunk::Memory(_)]));
        let head = log.read(0, 1 << 20, u64::MAX).await.unwrap();
        assert!(matches!(head.chunks[..], [ReadChunk::File { .. }]));
        // Never past the upper offset (the high watermark), and empty at it.
        let capped = log.read_copy(0, 1 << 20, 5).await.unwrap();
        for b in BatchIter::new(&capped, usize::MAX) {
            assert!(b.unwrap().header.last_offset() < 5);
        }
        assert_eq!(log.read(end, 100, u64::MAX).await.unwrap().chunks.len(), 0);
        assert!(matches!(
            log.read(end + 1, 100, u64::MAX).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        // Durability: sync covers the appended offsets.
        log.sync_to(end).await.unwrap();
        assert!(log.durable_offset() >= end);
        log.close().await.unwrap();
        assert!(
            log.append(batch(1, 0, 0), 3, 0).await.is_err(),
            "a closed log refuses appends"
        );
    });
}

#[test]
fn clean_shutdown_skips_the_scan_and_a_crash_scans_only_the_active_segment() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let mut batches = Vec::new();
        {
            let (log, _) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            for tag in 0..40u64 {
                log.append(batch(3, tag, 0), 1, 0).await.unwrap();
                batches.push((3, tag));
            }
            log.close().await.unwrap();
        }
        let active_bytes;
        {
            let (log, stats) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            assert!(stats.clean);
            assert_eq!(stats.scanned_bytes, 0, "a clean reopen does not scan");
            assert_eq!(read_all(&log, 0).await, expected(&batches));
            log.append(batch(2, 99, 0), 1, 0).await.unwrap();
            batches.push((2, 99));
            log.sync_to(log.log_end_offset()).await.unwrap();
            active_bytes = log.st.borrow().active().size_bytes();
            // No close: a crash.
        }
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(!stats.clean);
        assert_eq!(
            stats.segments_scanned, 1,
            "only the active segment is scanned: {stats:?}"
        );
        assert!(stats.scanned_bytes >= active_bytes, "{stats:?}");
        assert_eq!(stats.rebuilt_indexes, 0);
        assert_eq!(read_all(&log, 0).await, expected(&batches));
    });
}

fn cut_recovery_case(batch_sizes: Vec<usize>, synced: usize, cut_frac: f64, zero_tail: usize) {
    run(move || async move {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1 << 20,
            ..small_config()
        };
        let mut batches = Vec::new();
        let mut ends = Vec::new();
        {
            let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
            for (i, &n) in batch_sizes.iter().enumerate() {
                log.append(batch(n, i as u64, 0), 0, 0).await.unwrap();
                batches.push((n, i as u64));
                ends.push(log.st.borrow().active().size_bytes());
                if i + 1 == synced {
                    log.sync_to(log.log_end_offset()).await.unwrap();
                }
            }
            log.flush().await.unwrap();
        }
        // The crash: the file keeps an arbitrary prefix, maybe followed by never-written space.
        let path = dir.path().join(format!("{:020}.log", 0));
        let bytes = std::fs::read(&path).unwrap();
        let full = *ends.last().unwrap() as usize;
        assert!(
            bytes.len() >= full,
            "a flush puts every appended byte in the file"
        );
        let cut = (full as f64 * cut_frac) as usize;
        let mut cut_bytes = bytes[..cut].to_vec();
        cut_bytes.resize(cut + zero_tail, 0);
        std::fs::write(&path, &cut_bytes).unwrap();

        // A batch survives when the file still holds its exact bytes (a cut only through trailing
        // zero bytes, restored by the zeroed tail, leaves it whole).
        let whole = ends
            .iter()
            .take_while(|&&e| {
                (e as usize) <= cut_bytes.len() && cut_bytes[..e as usize] == bytes[..e as usize]
            })
            .count();
        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert!(!stats.clean);
        assert_eq!(
            read_all(&log, 0).await,
            expected(&batches[..whole]),
            "exactly the whole batches survive"
        );
        // The recovered log keeps working: the next append continues at the recovered end.
        let end = log.log_end_offset();
        let info = log.append(batch(1, 1000, 0), 0, 0).await.unwrap();
        assert_eq!(info.base_offset, end);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A log cut at any byte recovers to the prefix of fully written batches and nothing else.
    #[test]
    fn a_log_cut_at_any_byte_recovers_every_whole_batch(
        batch_sizes in proptest::collection::vec(1usize..30, 1..40),
        synced in 0usize..40,
        cut_frac in 0.0f64..=1.0,
        zero_tail in prop_oneof![Just(0usize), 1usize..9000],
    ) {
        cut_recovery_case(batch_sizes, synced, cut_frac, zero_tail);
    }
}

fn damage(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_corrupt_closed_segment_is_reported_with_file_and_position() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        {
            let (log, _) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            for tag in 0..40 {
                log.append(batch(4, tag, 0), 0, 0).await.unwrap();
            }
            assert!(log.segment_count() >= 2);
            log.close().await.unwrap();
        }
        // A lost index is rebuilt from its log.
        let idx = dir.path().join(format!("{:020}.index", 0));
        std::fs::remove_file(&idx).unwrap();
        {
            let (log, stats) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            assert_eq!(stats.rebuilt_indexes, 1);
            assert_eq!(read_all(&log, 0).await.len(), 160);
            log.close().await.unwrap();
        }
        // A flipped bit in the first closed segment: a copying read names file and position.
        let seg0 = dir.path().join(format!("{:020}.log", 0));
        let second_batch = batch(4, 1, 0).len() as u64;
        damage(&seg0, second_batch + 30);
        {
            let (log, _) = PartitionLog::open(dir.path(), small_config())
                .await
                .unwrap();
            match log.read_copy(4, 1 << 20, u64::MAX).await {
                Err(LogError::Corrupt { file, position, .. }) => {
                    assert_eq!(file, seg0);
                    assert_eq!(position, second_batch);
                }
                other => panic!("expected corruption, got {other:?}"),
            }
            log.close().await.unwrap();
        }
        // And when its index must be rebuilt, open refuses rather than skipping it.
        std::fs::remove_file(&idx).unwrap();
        match PartitionLog::open(dir.path(), small_config()).await {
            Err(LogError::Corrupt { file, position, .. }) => {
                assert_eq!(file, seg0);
                assert_eq!(position, second_batch);
            }
            Err(e) => panic!("expected corruption, got {e:?}"),
            Ok(_) => panic!("expected corruption, got an open log"),
        }
    });
}

#[test]
fn a_second_opener_of_the_same_directory_is_refused() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (_log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(matches!(
            PartitionLog::open(dir.path(), small_config()).await,
            Err(LogError::Locked { .. })
        ));
    });
}

#[test]
fn a_directory_that_cannot_be_created_names_the_operation_and_the_path() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where the partition's parent directory should be.
        let blocker = dir.path().join("not-a-dir");
        std::fs::write(&blocker, b"x").unwrap();
        let wanted = blocker.join("topic-0");
        match PartitionLog::open(&wanted, small_config()).await {
            Err(LogError::Io { context, .. }) => {
                assert_eq!(context, format!("creating {}", wanted.display()));
            }
            Err(e) => panic!("expected an I/O error, got {e:?}"),
            Ok(_) => panic!("expected an error, got an open log"),
        }
    });
}

#[test]
fn closing_releases_the_directory_and_leftovers_are_removed_on_open() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(!stats.clean);
        log.append(batch(3, 1, 1_000), 0, 1_000).await.unwrap();
        log.close().await.unwrap();
        drop(log);
        // Leftovers of an interrupted atomic write and of a compaction.
        let tmp = dir.path().join("leader-epoch-checkpoint.tmp");
        let cleaned = dir.path().join("00000000000000000000.log.cleaned");
        std::fs::write(&tmp, b"torn").unwrap();
        std::fs::write(&cleaned, b"torn").unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        assert!(stats.clean, "the clean marker was found by the listing");
        assert_eq!(log.log_end_offset(), 3);
        assert!(!tmp.exists() && !cleaned.exists(), "leftovers removed");
    });
}

#[test]
fn offset_for_timestamp_agrees_with_a_linear_scan() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        let mut stamps = Vec::new();
        for tag in 0..50u64 {
            // Timestamps mostly rise, with some going back, as real producers' do.
            let ts = 10_000 + (tag as i64 * 37 % 23) * 5 + tag as i64 * 20;
            log.append(batch(3, tag, ts), 0, 0).await.unwrap();
            for i in 0..3 {
                stamps.push(ts + i);
            }
        }
        // The answer carries the found record's own timestamp, not the one asked for.
        let linear = |from: usize, target: i64| {
            (from..stamps.len())
                .find(|&p| stamps[p] >= target)
                .map(|p| (p as u64, stamps[p]))
        };
        for target in (9_990..11_200).step_by(7) {
            assert_eq!(
                log.offset_for_timestamp(target).await.unwrap(),
                linear(0, target),
                "target {target}"
            );
        }
        // Nothing below the log start is answered, even inside a batch that straddles it.
        log.delete_records_before(31).await.unwrap();
        for target in (9_990..11_200).step_by(7) {
            assert_eq!(
                log.offset_for_timestamp(target).await.unwrap(),
                linear(31, target),
                "target {target} after deleting below 31"
            );
        }
    });
}

#[test]
fn retention_truncation_and_delete_records_keep_the_log_consistent() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            retention_bytes: Some(10_000),
            retention_ms: Some(1_000),
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        for tag in 0..150u64 {
            let epoch = if tag < 100 { 1 } else { 2 };
            log.append(batch(5, tag, tag as i64), epoch, 0)
                .await
                .unwrap();
        }
        let total = log.size_bytes();
        let before = log.segment_count();
        let r = log.enforce_retention(0).await.unwrap();
        assert!(r.segments_deleted > 0);
        assert!(log.size_bytes() >= 10_000 && log.size_bytes() < total);
        assert_eq!(log.segment_count(), before - r.segments_deleted);
        assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
        assert!(matches!(
            log.read(0, 100, u64::MAX).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        // Time retention: every closed segment's records are older than now - 1000.
        let r = log.enforce_retention(1_000_000).await.unwrap();
        assert_eq!(
            log.segment_count(),
            1,
            "only the active segment survives: {r:?}"
        );

        // Delete records inside the active segment: the start moves, the segment stays.
        let end = log.log_end_offset();
        assert_eq!(log.delete_records_before(end - 3).await.unwrap(), end - 3);
        assert_eq!(read_all(&log, end - 3).await.len(), 3);

        // Truncation lands on a batch boundary and forgets later epochs.
        let new_end = log.truncate_to(end - 2).await.unwrap();
        assert_eq!(
            new_end,
            end - 5,
            "truncation cuts the whole batch holding the offset"
        );
        let info = log.append(batch(2, 7, 0), 3, 0).await.unwrap();
        assert_eq!(info.base_offset, new_end);
        assert_eq!(log.leader_epochs().latest_epoch(), Some(3));
        log.close().await.unwrap();
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert_eq!(log.log_start_offset(), end - 3);
        assert_eq!(log.log_end_offset(), new_end + 2);
        // Epoch 2's entry started at or after the cut, so only epoch 3 is left, from the cut on.
        assert_eq!(
            log.leader_epochs().entries(),
            &[crate::epoch::EpochEntry {
                epoch: 3,
                start_offset: new_end
            }]
        );
        // An epoch older than the first entry: Kafka answers it with where the log's epochs
        // begin, so the asker truncates there.
        assert_eq!(
            log.leader_epochs().end_offset_for(2, log.log_end_offset()),
            crate::epoch::EpochEndOffset {
                epoch: 2,
                end_offset: new_end as i64
            }
        );
    });
}

#[test]
fn truncation_across_segments_keeps_appending_at_the_cut() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        for tag in 0..120u64 {
            log.append(batch(2, tag, 0), 1, 0).await.unwrap();
        }
        assert!(log.segment_count() > 3);
        assert_eq!(log.truncate_to(21).await.unwrap(), 20);
        assert_eq!(
            log.segment_count(),
            1 + log
                .segment_base_offsets()
                .iter()
                .filter(|&&b| b < 20 && b > 0)
                .count()
        );
        log.append(batch(2, 500, 0), 2, 0).await.unwrap();
        let mut expect = expected(&(0..10).map(|t| (2, t)).collect::<Vec<_>>());
        expect.push((20, Some(Bytes::from("value-500-0"))));
        expect.push((21, Some(Bytes::from("value-500-1"))));
        assert_eq!(read_all(&log, 0).await, expect);
    });
}

#[test]
fn compaction_keeps_the_newest_record_per_key_at_its_offset() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            cleanup_policy: CleanupPolicy::Compact,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let mut newest = std::collections::BTreeMap::new();
        let closed_end = loop {
            let tag = log.log_end_offset();
            let info = log.append(batch(5, tag, 0), 0, 0).await.unwrap();
            for i in 0..5 {
                newest.insert(
                    format!("key{i}"),
                    (info.base_offset + i, format!("value-{tag}-{i}")),
                );
            }
            if log.segment_count() == 4 {
                break log.segment_base_offsets()[3];
            }
        };
        // The batch that rolled into segment 4 is not in the closed segments' map.
        let tag = closed_end;
        for i in 0..5u64 {
            newest.insert(
                format!("key{i}"),
                (closed_end - 5 + i, format!("value-{}-{i}", tag - 5)),
            );
        }
        let stats = log.compact(0).await.unwrap();
        assert_eq!(stats.segments_rewritten, 3);
        assert!(stats.bytes_after < stats.bytes_before);
        let survivors: Vec<_> = read_all(&log, 0)
            .await
            .into_iter()
            .filter(|(o, _)| *o < closed_end)
            .collect();
        let mut expect: Vec<_> = newest
            .values()
            .map(|(o, v)| (*o, Some(Bytes::from(v.clone()))))
            .collect();
        expect.sort();
        assert_eq!(survivors, expect);
        log.close().await.unwrap();
        let (log, stats) = PartitionLog::open(dir.path(), config).await.unwrap();
        assert_eq!(stats.scanned_bytes, 0);
        let again: Vec<_> = read_all(&log, 0)
            .await
            .into_iter()
            .filter(|(o, _)| *o < closed_end)
            .collect();
        assert_eq!(again, expect);
    });
}

#[test]
fn segment_ms_rolls_by_age_of_the_first_append() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1 << 20,
            segment_ms: Some(1_000),
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        log.append(batch(1, 0, 0), 0, 10_000).await.unwrap();
        log.append(batch(1, 1, 0), 0, 10_999).await.unwrap();
        assert_eq!(log.segment_count(), 1, "younger than segment.ms: no roll");
        log.append(batch(1, 2, 0), 0, 11_000).await.unwrap();
        assert_eq!(
            log.segment_base_offsets(),
            vec![0, 2],
            "rolled once the first append is segment.ms old"
        );
    });
}

#[test]
fn topic_settings_apply_to_the_open_log_and_the_largest_batch_only_grows() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1 << 20,
            max_batch_bytes: 64 << 10,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        log.append(batch(4, 0, 0), 0, 0).await.unwrap();
        // segment.bytes and retention.bytes lowered on the open log: the next append rolls, and
        // retention deletes the closed segment.
        let lowered = LogConfig {
            segment_bytes: 4096,
            retention_bytes: Some(1),
            max_batch_bytes: 1024,
            ..config
        };
        log.set_topic_settings(&lowered);
        let now = log.config();
        assert_eq!((now.segment_bytes, now.retention_bytes), (4096, Some(1)));
        assert_eq!(
            now.max_batch_bytes,
            64 << 10,
            "a lowered max.message.bytes must leave stored batches readable"
        );
        log.append(batch(200, 1, 0), 0, 0).await.unwrap();
        log.append(batch(4, 2, 0), 0, 0).await.unwrap();
        assert!(log.segment_count() > 1, "{:?}", log.segment_base_offsets());
        log.enforce_retention(0).await.unwrap();
        assert!(
            log.log_start_offset() > 0,
            "retention.bytes acted on the open log"
        );
        log.set_topic_settings(&LogConfig {
            max_batch_bytes: 1 << 20,
            ..lowered
        });
        assert_eq!(log.config().max_batch_bytes, 1 << 20, "raised: taken");
    });
}

#[test]
fn batches_in_codecs_spool_cannot_decompress_are_stored_and_served_as_they_are() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        let mut lz4 = batch(3, 0, 0);
        // Mark it lz4 (attributes bits 0-2 = 3) and fix its CRC, as an lz4 producer would send.
        lz4[22] = (lz4[22] & !0x07) | 3;
        let crc = crc32c::crc32c(&lz4[21..]);
        lz4[17..21].copy_from_slice(&crc.to_be_bytes());
        let info = log.append(lz4.clone(), 0, 0).await.unwrap();
        assert_eq!(info.last_offset, 2);
        let back = log.read_copy(0, 1 << 20, u64::MAX).await.unwrap();
        assert_eq!(
            &back[16..],
            &lz4[16..],
            "everything but the assigned offset and epoch is untouched"
        );
        // Compaction leaves it alone and says so.
        log.append(batch(1, 1, 0), 0, 0).await.unwrap();
        log.roll().await.unwrap();
        let stats = log.compact(0).await.unwrap();
        assert_eq!(stats.opaque_batches, 1);
    });
}

/// Batches read from a leader's log, one at a time from `from`, as a follower's fetch gets them.
async fn fetched_batches(leader: &PartitionLog, from: u64) -> Vec<BytesMut> {
    let mut out = Vec::new();
    let mut next = from;
    while next < leader.log_end_offset() {
        let bytes = leader.read_copy(next, 3000, u64::MAX).await.unwrap();
        for b in BatchIter::new(&bytes, usize::MAX) {
            let b = b.unwrap();
            if b.header.base_offset as u64 >= next {
                out.push(BytesMut::from(b.bytes));
            }
            next = next.max(b.header.last_offset() as u64 + 1);
        }
    }
    out
}

#[test]
fn a_follower_appends_the_leaders_batches_unchanged_and_refuses_a_gap() {
    run(|| async {
        let (ldir, fdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (leader, _) = PartitionLog::open(ldir.path(), small_config())
            .await
            .unwrap();
        for (tag, epoch) in [(0, 1), (1, 1), (2, 2), (3, 2), (4, 5)] {
            leader.append(batch(3, tag, 0), epoch, 0).await.unwrap();
        }
        let (follower, _) = PartitionLog::open(fdir.path(), small_config())
            .await
            .unwrap();
        let batches = fetched_batches(&leader, 0).await;
        assert_eq!(batches.len(), 5);

        // A batch that does not continue the log is refused, and nothing is written.
        let gap = follower.append_replicated(batches[1].clone(), 0).await;
        assert!(
            matches!(
                gap,
                Err(LogError::NotContiguous {
                    base_offset: 3,
                    log_end_offset: 0,
                    ..
                })
            ),
            "{gap:?}"
        );
        assert_eq!(follower.log_end_offset(), 0);

        for b in &batches {
            follower.append_replicated(b.clone(), 0).await.unwrap();
        }
        assert_eq!(follower.log_end_offset(), leader.log_end_offset());
        assert_eq!(read_all(&follower, 0).await, read_all(&leader, 0).await);
        assert_eq!(
            follower.leader_epochs().entries(),
            leader.leader_epochs().entries(),
            "the follower's epoch cache follows the leader's batches"
        );
        // Byte for byte: offsets and epochs are the leader's (nothing re-stamped).
        let (l, f) = (
            leader.read_copy(0, 1 << 20, u64::MAX).await.unwrap(),
            follower.read_copy(0, 1 << 20, u64::MAX).await.unwrap(),
        );
        assert_eq!(l, f);

        // Truncated back (a diverging epoch), the follower fetches again from its new end.
        let kept = follower.truncate_to(6).await.unwrap();
        assert_eq!(kept, 6);
        for b in fetched_batches(&leader, kept).await {
            follower.append_replicated(b, 0).await.unwrap();
        }
        assert_eq!(read_all(&follower, 0).await, read_all(&leader, 0).await);
        follower.sync_to(follower.log_end_offset()).await.unwrap();
        follower.close().await.unwrap();
        let (reopened, _) = PartitionLog::open(fdir.path(), small_config())
            .await
            .unwrap();
        assert_eq!(
            reopened.leader_epochs().entries(),
            leader.leader_epochs().entries(),
            "the checkpoint survives a restart"
        );
    });
}

#[test]
fn a_checked_batch_appends_as_the_same_batch_would_and_stays_within_the_largest_batch() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            max_batch_bytes: 4096,
            ..small_config()
        };
        let (log, _) = PartitionLog::open(dir.path(), config).await.unwrap();
        let plain = batch(3, 0, 10);
        let info = log.append(plain.clone(), 7, 0).await.unwrap();
        // The same bytes, checked once by the caller (as the broker's produce path does).
        let bytes = batch(3, 1, 20).freeze();
        let checked = crate::batch::Checked::first_of(&bytes, 4096).unwrap();
        let second = log.append_checked(checked, 7, 0).await.unwrap();
        assert_eq!((info.base_offset, second.base_offset), (0, 3));
        assert_eq!(second.log_end_offset, 6);
        let values: Vec<Option<Bytes>> = read_all(&log, 0)
            .await
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let want: Vec<Option<Bytes>> = [0, 1, 2]
            .iter()
            .map(|i| Some(Bytes::from(format!("value-0-{i}"))))
            .chain(
                [0, 1, 2]
                    .iter()
                    .map(|i| Some(Bytes::from(format!("value-1-{i}")))),
            )
            .collect();
        assert_eq!(values, want);
        // Stamped like any leader append: offset and epoch in the stored header, CRC intact.
        let stored = log.read_copy(3, 4096, u64::MAX).await.unwrap();
        let h = crate::batch::validate(&stored, 4096).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (3, 7));
        // Checked against a larger limit than the log's: still refused, nothing appended.
        let big = batch(200, 2, 0).freeze();
        assert!(big.len() > 4096);
        let checked = crate::batch::Checked::first_of(&big, 1 << 20).unwrap();
        assert!(matches!(
            log.append_checked(checked, 7, 0).await,
            Err(LogError::Batch(crate::batch::BatchError::BadLength { .. }))
        ));
        assert_eq!(log.log_end_offset(), 6);
        // And `first_of` itself refuses a damaged batch: the check is real.
        let mut bad = batch(3, 3, 0);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            crate::batch::Checked::first_of(&bad.freeze(), 4096),
            Err(crate::batch::BatchError::CrcMismatch { .. })
        ));
    });
}
