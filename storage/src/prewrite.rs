//! Which blocks of an active segment to write with zeros before its appends reach them.
//!
//! Owns one rule, [`next_zero_range`]; the writer (`writer.rs`) does the writes. Why: appends go
//! to preallocated space, which the filesystem keeps as *unwritten* extents. An O_DIRECT write
//! there converts the extent, and the next fdatasync must then write that metadata (ext4 writes
//! the inode, XFS commits its log) before its cache flush: two device round trips per sync
//! instead of one. On this machine's ext4 (`fio --direct=1 --fdatasync=1 --bs=64k`), writes into
//! fallocated space synced at p50 112 µs and reached 312 MB/s; the same writes over blocks
//! already written synced at p50 43 µs and reached 589 MB/s. Every fsync-acknowledged produce,
//! transaction record and marker waits for such a sync, so the writer keeps the blocks just ahead
//! of the log end written (with zeros) and the syncs that acknowledge appends find only data to
//! flush. The zeros are ordinary writes: they cost disk bandwidth (each block is written twice),
//! so the broker turns this on only where acknowledgements wait for fdatasync
//! (`durability = fsync`).
//!
//! Zeros are what recovery already reads past a log's end (unwritten extents read as zeros), so a
//! crash before, during or after a zero write leaves the same log.
//!
//! Only while syncs are small ([`worth_it`], below [`SYNC_BYTES_MAX`] each on average): when each
//! fdatasync covers hundreds of kilobytes (a segment written near the disk's bandwidth, its syncs
//! grouped), one metadata write per sync is a small cost and the zeros' second write of every
//! block the larger one. Measured on this machine: `storage-bench` with one appender syncing
//! each 64 KiB append went from 168–194 to 264–315 MB/s with zeros; with 64 appenders (≈ 3.6
//! MiB per sync) from 1.6–1.7 to 0.9–1.2 GB/s with zeros always on. The broker's fsync'd
//! produce at full load (8 partitions, ≈ 515 KB per sync) went from 899 to 775 MB/s, and its
//! CPU per GB from 0.68 to 0.84 s, with zeros on below 1 MiB per sync; hence 128 KiB.
//!
//! The promises the rule keeps, which the writer relies on:
//! - a range starts at or after `align_up(logical_end)`: it never covers a byte that an append
//!   has staged or written, so it can be issued whatever data writes are in flight;
//! - it stays inside the preallocated space (no zero write ever extends the file or can meet a
//!   full disk) and at most `ahead_bytes` past the log end;
//! - it is exactly `chunk_bytes` long, so the disk sees few, large zero writes rather than one
//!   per append, and the writer can write every range from one shared buffer of zeros.

use crate::config::BLOCK_BYTES;

fn align_up(v: u64) -> u64 {
    v.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

fn align_down(v: u64) -> u64 {
    v / BLOCK_BYTES * BLOCK_BYTES
}

/// The next range `[start, end)` to write with zeros, or `None` when the blocks up to
/// `ahead_bytes` past the log end (or up to the preallocated end) are written already.
/// `zeroed_end` is where the zeros written so far end (at least `align_up(logical_end)` after a
/// restart: what lies beyond is unknown and simply written again).
pub fn next_zero_range(
    logical_end: u64,
    zeroed_end: u64,
    preallocated_end: u64,
    ahead_bytes: u64,
    chunk_bytes: u64,
) -> Option<(u64, u64)> {
    if ahead_bytes == 0 || chunk_bytes == 0 {
        return None;
    }
    let data_end = align_up(logical_end);
    let start = align_up(zeroed_end.max(data_end));
    let cap = align_down(preallocated_end);
    let target = data_end.saturating_add(ahead_bytes).min(cap);
    if start >= target {
        return None;
    }
    let end = start.saturating_add(chunk_bytes);
    // Whole chunks only: near the preallocated end, the next step (taken ahead) makes room.
    (end <= target && chunk_bytes % BLOCK_BYTES == 0).then_some((start, end))
}

/// Zeros ahead stop once a segment's fdatasyncs cover this many bytes each on average.
pub const SYNC_BYTES_MAX: u64 = 128 << 10;

/// Whether zeros ahead pay for a segment whose fdatasyncs covered `sync_bytes_avg` bytes each on
/// average.
pub fn worth_it(sync_bytes_avg: u64) -> bool {
    sync_bytes_avg < SYNC_BYTES_MAX
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_fresh_segment_zeroes_a_chunk_at_a_time_up_to_the_lead() {
        assert_eq!(
            next_zero_range(0, 0, 32 * MIB, 4 * MIB, MIB),
            Some((0, MIB))
        );
        assert_eq!(
            next_zero_range(100, MIB, 32 * MIB, 4 * MIB, MIB),
            Some((MIB, 2 * MIB))
        );
        // Four MiB ahead of the end: done until the end moves a whole chunk on.
        assert_eq!(next_zero_range(100, 4 * MIB, 32 * MIB, 4 * MIB, MIB), None);
        assert_eq!(
            next_zero_range(MIB - 4097, 4 * MIB, 32 * MIB, 4 * MIB, MIB),
            None
        );
        assert_eq!(
            next_zero_range(MIB, 4 * MIB, 32 * MIB, 4 * MIB, MIB),
            Some((4 * MIB, 5 * MIB))
        );
    }

    #[test]
    fn the_preallocated_end_caps_the_range() {
        assert_eq!(
            next_zero_range(0, 30 * MIB + 4096, 31 * MIB, 4 * MIB, MIB),
            None,
            "beyond the lead"
        );
        assert_eq!(
            next_zero_range(28 * MIB, 30 * MIB + 4096, 31 * MIB, 4 * MIB, MIB),
            None,
            "less than a chunk left before the preallocated end"
        );
        assert_eq!(
            next_zero_range(28 * MIB, 29 * MIB, 31 * MIB, 4 * MIB, MIB),
            Some((29 * MIB, 30 * MIB))
        );
        assert_eq!(
            next_zero_range(28 * MIB, 31 * MIB, 31 * MIB, 4 * MIB, MIB),
            None
        );
    }

    #[test]
    fn worth_it_only_for_small_syncs() {
        assert!(worth_it(0));
        assert!(worth_it(64 << 10));
        assert!(!worth_it(SYNC_BYTES_MAX));
        assert!(!worth_it(515_000));
    }

    #[test]
    fn an_end_that_overtook_the_zeros_restarts_them_past_the_data() {
        assert_eq!(
            next_zero_range(10 * MIB + 5, 2 * MIB, 32 * MIB, 4 * MIB, MIB),
            Some((10 * MIB + 4096, 11 * MIB + 4096))
        );
    }

    #[test]
    fn off_when_no_lead_or_chunk() {
        assert_eq!(next_zero_range(0, 0, 32 * MIB, 0, MIB), None);
        assert_eq!(next_zero_range(0, 0, 32 * MIB, 4 * MIB, 0), None);
    }

    proptest! {
        #[test]
        fn ranges_never_touch_data_nor_leave_the_preallocation(
            logical_end in 0u64..(64 * MIB),
            zeroed_extra in 0u64..(8 * MIB),
            zeroed_below in any::<bool>(),
            prealloc in 0u64..(80 * MIB),
            ahead in 0u64..(16 * MIB),
            chunk_blocks in 0u64..512,
        ) {
            let chunk = chunk_blocks * BLOCK_BYTES;
            let zeroed = if zeroed_below {
                logical_end.saturating_sub(zeroed_extra)
            } else {
                align_up(logical_end) + align_down(zeroed_extra)
            };
            if let Some((s, e)) = next_zero_range(logical_end, zeroed, prealloc, ahead, chunk) {
                prop_assert!(s < e);
                prop_assert!(s >= align_up(logical_end), "covers data");
                prop_assert!(s >= zeroed);
                prop_assert!(e <= prealloc, "past the preallocation");
                prop_assert!(e <= align_up(logical_end) + ahead, "past the lead");
                prop_assert_eq!(e - s, chunk);
                prop_assert_eq!(s % BLOCK_BYTES, 0);
                prop_assert_eq!(e % BLOCK_BYTES, 0);
            }
        }
    }
}
