//! Per-segment sparse indexes and the segment summary, kept in memory and persisted beside the log.
//!
//! [`SegmentIndex`] owns, for one segment: the offset index (relative offset → file position, one
//! entry per `index_interval_bytes` of log), the time index (max timestamp seen *before* a
//! position → that position), and the summary a reopen needs without scanning (size, next offset,
//! max timestamp). It is pure: appends and scans feed it batch headers, lookups return a file
//! position from which a short forward scan finds the answer. It never reads or writes files;
//! `encode`/`decode` give the on-disk form, which ends in a CRC-32C so a torn or corrupt index
//! is detected and rebuilt from its log.
//!
//! On disk: `.index` = `"SPIX"` v1 | summary | entries (rel_offset u32, position u32) | crc u32;
//! `.timeindex` = `"SPTI"` v1 | entries (max_timestamp i64, position u32) | crc u32.

use crate::batch::BatchHeader;

const INDEX_MAGIC: &[u8; 4] = b"SPIX";
const TIME_MAGIC: &[u8; 4] = b"SPTI";
const FORMAT_VERSION: u32 = 1;
const SUMMARY_BYTES: usize = 8 + 8 + 8 + 8;

/// Everything one segment knows about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentIndex {
    pub base_offset: u64,
    /// Bytes of valid batches in the `.log`.
    pub size_bytes: u64,
    /// One past the last offset of the last batch (== base_offset when empty).
    pub next_offset: u64,
    /// Largest `maxTimestamp` of any batch; -1 when empty.
    pub max_timestamp: i64,
    /// (offset − base_offset, position), strictly increasing in both.
    offsets: Vec<(u32, u32)>,
    /// (max timestamp of every batch before `position`, position), non-decreasing timestamps.
    times: Vec<(i64, u32)>,
    index_interval_bytes: u64,
    bytes_since_entry: u64,
}

impl SegmentIndex {
    pub fn new(base_offset: u64, index_interval_bytes: u64) -> Self {
        Self {
            base_offset,
            size_bytes: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offsets: Vec::new(),
            times: Vec::new(),
            index_interval_bytes: index_interval_bytes.max(1),
            bytes_since_entry: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    pub fn offset_entries(&self) -> &[(u32, u32)] {
        &self.offsets
    }

    pub fn time_entries(&self) -> &[(i64, u32)] {
        &self.times
    }

    /// Records the batch about to be written at `size_bytes` (the segment's current end).
    ///
    /// Pair assertions: the batch lands at the end, at or after the segment's next offset.
    pub fn on_append(&mut self, h: &BatchHeader) {
        let base = h.base_offset as u64;
        debug_assert!(base >= self.next_offset, "offsets go forward");
        debug_assert!(base >= self.base_offset);
        let position = self.size_bytes;
        if self.bytes_since_entry >= self.index_interval_bytes && position > 0 {
            // Both fit u32: segments are capped below 4 GiB and offsets within one by the config.
            self.offsets
                .push(((base - self.base_offset) as u32, position as u32));
            if self
                .times
                .last()
                .is_none_or(|&(t, _)| self.max_timestamp > t)
            {
                self.times.push((self.max_timestamp, position as u32));
            }
            self.bytes_since_entry = 0;
        }
        let total = h.total_bytes() as u64;
        self.size_bytes += total;
        self.bytes_since_entry += total;
        self.next_offset = h.last_offset() as u64 + 1;
        self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
    }

    /// File position from which a forward scan reaches the batch holding `offset`: the largest
    /// indexed entry at or below it, else the segment start.
    pub fn lookup_offset(&self, offset: u64) -> u64 {
        if offset < self.base_offset {
            return 0;
        }
        let rel = offset - self.base_offset;
        let idx = self.offsets.partition_point(|&(r, _)| u64::from(r) <= rel);
        if idx == 0 {
            0
        } else {
            u64::from(self.offsets[idx - 1].1)
        }
    }

    /// The file position of the batch whose base offset is exactly `offset`, when an index entry
    /// records it. Every batch before that position ends below `offset`, so a read from `offset`
    /// starts there without reading a header.
    pub fn position_of_base(&self, offset: u64) -> Option<u64> {
        let rel = u32::try_from(offset.checked_sub(self.base_offset)?).ok()?;
        let i = self.offsets.binary_search_by_key(&rel, |&(r, _)| r).ok()?;
        Some(u64::from(self.offsets[i].1))
    }

    /// The farthest batch boundary the index knows in `(from_pos, from_pos + bytes_max]` below
    /// which every batch ends before `upper`: an entry's position (the batches before it end
    /// below the entry's base offset) or the segment's end. Returns `(position, offset after the
    /// bytes before it)`. `from_pos` must be a batch boundary; the bytes in between are then whole
    /// batches, found without reading a header. `None` when the index knows no such boundary
    /// (the caller walks headers instead).
    pub fn boundary_within(&self, from_pos: u64, bytes_max: u64, upper: u64) -> Option<(u64, u64)> {
        let limit = from_pos.saturating_add(bytes_max);
        if self.size_bytes > from_pos && self.size_bytes <= limit && self.next_offset <= upper {
            return Some((self.size_bytes, self.next_offset));
        }
        // Entries are strictly increasing in both offset and position, so the qualifying ones
        // (past `from_pos`, within `limit`, base at or below `upper`) are one contiguous run
        // ending at the last entry meeting both upper bounds.
        let n = self.offsets.partition_point(|&(r, p)| {
            u64::from(p) <= limit && self.base_offset + u64::from(r) <= upper
        });
        let &(r, p) = self.offsets[..n].last()?;
        (u64::from(p) > from_pos).then(|| (u64::from(p), self.base_offset + u64::from(r)))
    }

    /// File position from which a forward scan reaches the first batch whose max timestamp is
    /// `>= timestamp`: every batch before the returned position has a smaller max timestamp.
    pub fn lookup_timestamp(&self, timestamp: i64) -> u64 {
        let idx = self.times.partition_point(|&(t, _)| t < timestamp);
        if idx == 0 {
            0
        } else {
            u64::from(self.times[idx - 1].1)
        }
    }

    /// Serialized `.index`.
    pub fn encode_offsets(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + SUMMARY_BYTES + self.offsets.len() * 8 + 4);
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&self.size_bytes.to_be_bytes());
        out.extend_from_slice(&self.next_offset.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        for &(r, p) in &self.offsets {
            out.extend_from_slice(&r.to_be_bytes());
            out.extend_from_slice(&p.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Serialized `.timeindex`.
    pub fn encode_times(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.times.len() * 12 + 4);
        out.extend_from_slice(TIME_MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
        for &(t, p) in &self.times {
            out.extend_from_slice(&t.to_be_bytes());
            out.extend_from_slice(&p.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Rebuilds from the two files. `None` when either is torn, corrupt, or disagrees with the
    /// segment it claims to describe — the caller then rebuilds from the log.
    pub fn decode(
        offsets_file: &[u8],
        times_file: &[u8],
        base_offset: u64,
        log_size_bytes: u64,
        index_interval_bytes: u64,
    ) -> Option<Self> {
        let offsets_body = checked_body(offsets_file, INDEX_MAGIC)?;
        let times_body = checked_body(times_file, TIME_MAGIC)?;
        if offsets_body.len() < SUMMARY_BYTES || (offsets_body.len() - SUMMARY_BYTES) % 8 != 0 {
            return None;
        }
        let file_base = u64_at(offsets_body, 0)?;
        let size_bytes = u64_at(offsets_body, 8)?;
        let next_offset = u64_at(offsets_body, 16)?;
        let max_ts = u64_at(offsets_body, 24)? as i64;
        if file_base != base_offset || size_bytes != log_size_bytes || next_offset < base_offset {
            return None;
        }
        let mut offsets = Vec::new();
        for e in offsets_body[SUMMARY_BYTES..].chunks_exact(8) {
            let r = u32::from_be_bytes(e[0..4].try_into().ok()?);
            let p = u32::from_be_bytes(e[4..8].try_into().ok()?);
            if let Some(&(pr, pp)) = offsets.last() {
                if r <= pr || p <= pp {
                    return None;
                }
            }
            if u64::from(p) >= size_bytes || base_offset + u64::from(r) >= next_offset {
                return None;
            }
            offsets.push((r, p));
        }
        if times_body.len() % 12 != 0 {
            return None;
        }
        let mut times: Vec<(i64, u32)> = Vec::new();
        for e in times_body.chunks_exact(12) {
            let t = i64::from_be_bytes(e[0..8].try_into().ok()?);
            let p = u32::from_be_bytes(e[8..12].try_into().ok()?);
            if let Some(&(pt, pp)) = times.last() {
                if t < pt || p <= pp {
                    return None;
                }
            }
            if u64::from(p) >= size_bytes || t > max_ts {
                return None;
            }
            times.push((t, p));
        }
        Some(Self {
            base_offset,
            size_bytes,
            next_offset,
            max_timestamp: max_ts,
            offsets,
            times,
            index_interval_bytes: index_interval_bytes.max(1),
            // Unknown after a reload; the next append starts a fresh interval (only density of
            // entries depends on it, never correctness).
            bytes_since_entry: 0,
        })
    }
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn checked_body<'a>(file: &'a [u8], magic: &[u8; 4]) -> Option<&'a [u8]> {
    if file.len() < 12 || &file[0..4] != magic {
        return None;
    }
    if u32::from_be_bytes(file[4..8].try_into().ok()?) != FORMAT_VERSION {
        return None;
    }
    let (body, crc) = file.split_at(file.len() - 4);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
        return None;
    }
    Some(&body[8..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{self, BatchIter};
    use crate::records::BatchBuilder;
    use bytes::Bytes;
    use proptest::prelude::*;

    /// Builds a segment image of batches with the given record counts and timestamps.
    fn segment(base: u64, batches: &[(usize, i64, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut next = base as i64;
        for &(records, ts, value_bytes) in batches {
            let mut b = BatchBuilder::new(ts);
            for i in 0..records {
                b.push(
                    ts + (i as i64 % 3),
                    None,
                    Some(Bytes::from(vec![7u8; value_bytes])),
                );
            }
            let mut bytes = b.build().unwrap();
            batch::set_base_offset(&mut bytes, next);
            next += records as i64;
            out.extend_from_slice(&bytes);
        }
        out
    }

    fn build_index(seg: &[u8], base: u64, interval: u64) -> SegmentIndex {
        let mut idx = SegmentIndex::new(base, interval);
        for b in BatchIter::new(seg, usize::MAX) {
            idx.on_append(&b.unwrap().header);
        }
        idx
    }

    /// The forward scan the log does from an index position.
    fn scan_from(seg: &[u8], pos: u64, pred: impl Fn(&BatchHeader) -> bool) -> Option<u64> {
        BatchIter::new(&seg[pos as usize..], usize::MAX)
            .map(|b| b.unwrap())
            .find(|b| pred(&b.header))
            .map(|b| pos + b.position as u64)
    }

    fn arb_batches() -> impl Strategy<Value = Vec<(usize, i64, usize)>> {
        proptest::collection::vec((1usize..20, 0i64..10_000, 0usize..600), 1..80)
    }

    proptest! {
        #[test]
        fn offset_lookup_agrees_with_linear_scan(
            batches in arb_batches(), base in 0u64..1_000_000, interval in 1u64..20_000, probe in 0u64..2000,
        ) {
            let seg = segment(base, &batches);
            let idx = build_index(&seg, base, interval);
            prop_assert_eq!(idx.size_bytes as usize, seg.len());
            let target = base + probe % (idx.next_offset - base);
            let linear = scan_from(&seg, 0, |h| h.last_offset() as u64 >= target);
            let start = idx.lookup_offset(target);
            let indexed = scan_from(&seg, start, |h| h.last_offset() as u64 >= target);
            prop_assert_eq!(linear, indexed);
            prop_assert!(linear.is_some());
        }

        /// A boundary the index gives is a batch boundary within the limit, every batch before
        /// it ends below `upper`, and its offset is the one after those batches; with an entry
        /// per batch, one is found whenever the next batch fits.
        #[test]
        fn boundary_within_is_a_batch_boundary_within_limits(
            batches in arb_batches(), base in 0u64..1_000_000, interval in 1u64..20_000,
            from in 0usize..80, bytes_max in 0u64..40_000, upper_delta in 0u64..2000,
        ) {
            let seg = segment(base, &batches);
            let idx = build_index(&seg, base, interval);
            let all: Vec<(u64, BatchHeader)> = BatchIter::new(&seg, usize::MAX)
                .map(|b| { let b = b.unwrap(); (b.position as u64, b.header) })
                .collect();
            let from = from % all.len();
            let from_pos = all[from].0;
            let upper = base + upper_delta;
            let got = idx.boundary_within(from_pos, bytes_max, upper);
            if let Some((pos, next)) = got {
                prop_assert!(pos > from_pos && pos <= from_pos + bytes_max);
                let before: Vec<_> = all.iter().filter(|(p, _)| *p >= from_pos && *p < pos).collect();
                let (last_pos, last_h) = before.last().unwrap();
                prop_assert_eq!(last_pos + last_h.total_bytes() as u64, pos, "a batch boundary");
                prop_assert_eq!(last_h.last_offset() as u64 + 1, next);
                prop_assert!(before.iter().all(|(_, h)| (h.last_offset() as u64) < upper));
            }
            if interval == 1 {
                if let Some((p, h)) = all.get(from) {
                    let fits = h.total_bytes() as u64 <= bytes_max && (h.last_offset() as u64) < upper;
                    let next_known = all.get(from + 1).is_none_or(|(_, n)| n.base_offset as u64 <= upper);
                    if fits && next_known && *p == from_pos {
                        prop_assert!(got.is_some(), "every batch is indexed: the next boundary is known");
                    }
                }
            }
        }

        /// The position of a base offset the index records holds the batch starting there.
        #[test]
        fn position_of_base_holds_that_batch(
            batches in arb_batches(), base in 0u64..1_000_000, interval in 1u64..20_000, probe in 0u64..2000,
        ) {
            let seg = segment(base, &batches);
            let idx = build_index(&seg, base, interval);
            for &(r, p) in idx.offset_entries() {
                prop_assert_eq!(idx.position_of_base(base + u64::from(r)), Some(u64::from(p)));
            }
            if let Some(pos) = idx.position_of_base(base + probe) {
                let h = BatchHeader::parse(&seg[pos as usize..]).unwrap();
                prop_assert_eq!(h.base_offset as u64, base + probe);
            }
        }

        #[test]
        fn time_lookup_agrees_with_linear_scan(
            batches in arb_batches(), interval in 1u64..20_000, target in -10i64..10_020,
        ) {
            let seg = segment(0, &batches);
            let idx = build_index(&seg, 0, interval);
            let linear = scan_from(&seg, 0, |h| h.max_timestamp >= target);
            let start = idx.lookup_timestamp(target);
            let indexed = scan_from(&seg, start, |h| h.max_timestamp >= target);
            prop_assert_eq!(linear, indexed);
        }

        #[test]
        fn encode_decode_round_trips(batches in arb_batches(), interval in 1u64..20_000) {
            let seg = segment(42, &batches);
            let idx = build_index(&seg, 42, interval);
            let back = SegmentIndex::decode(&idx.encode_offsets(), &idx.encode_times(), 42, seg.len() as u64, interval);
            let mut expect = idx.clone();
            expect.bytes_since_entry = 0;
            prop_assert_eq!(back, Some(expect));
        }

        /// A torn or flipped index never decodes: the caller rebuilds it from the log.
        #[test]
        fn damaged_index_is_refused(batches in arb_batches(), cut_frac in 0.0f64..1.0, flip in any::<bool>()) {
            let seg = segment(0, &batches);
            let idx = build_index(&seg, 0, 512);
            let mut file = idx.encode_offsets();
            let at = ((file.len() as f64) * cut_frac) as usize;
            if flip { let at = at.min(file.len() - 1); file[at] ^= 0x10; } else { file.truncate(at); }
            prop_assert!(SegmentIndex::decode(&file, &idx.encode_times(), 0, seg.len() as u64, 512).is_none());
        }
    }

    #[test]
    fn index_from_another_log_size_is_refused() {
        let seg = segment(0, &[(3, 10, 100); 50]);
        let idx = build_index(&seg, 0, 512);
        let wrong_size = seg.len() as u64 - 1;
        assert!(SegmentIndex::decode(
            &idx.encode_offsets(),
            &idx.encode_times(),
            0,
            wrong_size,
            512
        )
        .is_none());
    }
}
