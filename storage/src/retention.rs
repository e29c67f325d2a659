//! Retention decisions: which whole segments to delete by time (`retention.ms`) and by size
//! (`retention.bytes`). Pure; the log deletes the files.
//!
//! Promises: the active segment is never chosen; segments go oldest first and only as a prefix
//! (the log never gets a hole); a segment is past `retention.ms` when its largest timestamp is
//! older than `now_ms - retention_ms` (Kafka's rule), and size retention deletes the oldest
//! segments while the rest still holds at least `retention_bytes`.

/// What retention needs to know of one closed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStat {
    pub base_offset: u64,
    pub next_offset: u64,
    pub size_bytes: u64,
    pub max_timestamp: i64,
}

/// Returns how many of the oldest `closed` segments (ordered by offset) to delete.
/// `active_size_bytes` counts towards the size limit but the active segment is never deleted.
pub fn segments_to_delete(
    closed: &[SegmentStat],
    active_size_bytes: u64,
    retention_ms: Option<i64>,
    retention_bytes: Option<u64>,
    now_ms: i64,
) -> usize {
    let by_time = match retention_ms {
        Some(ms) if ms >= 0 => closed
            .iter()
            .take_while(|s| s.max_timestamp < now_ms.saturating_sub(ms))
            .count(),
        _ => 0,
    };
    let by_size = match retention_bytes {
        Some(limit) => {
            let mut total: u64 =
                closed.iter().map(|s| s.size_bytes).sum::<u64>() + active_size_bytes;
            let mut n = 0;
            for s in closed {
                if total - s.size_bytes < limit {
                    break;
                }
                total -= s.size_bytes;
                n += 1;
            }
            n
        }
        None => 0,
    };
    by_time.max(by_size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(i: u64, size: u64, ts: i64) -> SegmentStat {
        SegmentStat {
            base_offset: i * 10,
            next_offset: i * 10 + 10,
            size_bytes: size,
            max_timestamp: ts,
        }
    }

    #[test]
    fn time_retention_stops_at_the_first_young_segment() {
        let segs = [
            seg(0, 100, 10),
            seg(1, 100, 50),
            seg(2, 100, 80),
            seg(3, 100, 20),
        ];
        assert_eq!(segments_to_delete(&segs, 0, Some(40), None, 100), 2);
        assert_eq!(segments_to_delete(&segs, 0, Some(95), None, 100), 0);
        assert_eq!(segments_to_delete(&segs, 0, None, None, 100), 0);
    }

    proptest! {
        #[test]
        fn size_retention_keeps_at_least_the_limit(
            sizes in proptest::collection::vec(1u64..1000, 0..30), active in 0u64..1000, limit in 0u64..20_000,
        ) {
            let segs: Vec<_> = sizes.iter().enumerate().map(|(i, &s)| seg(i as u64, s, 0)).collect();
            let n = segments_to_delete(&segs, active, None, Some(limit), 0);
            let total: u64 = sizes.iter().sum::<u64>() + active;
            let kept: u64 = sizes[n..].iter().sum::<u64>() + active;
            prop_assert!(kept >= limit.min(total));
            // Deleting one more would drop below the limit (or there is none left to delete).
            if n < segs.len() { prop_assert!(kept - sizes[n] < limit); }
        }
    }
}
