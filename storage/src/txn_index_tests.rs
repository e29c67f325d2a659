//! The aborted-transaction index codec and the file of one segment.

use super::*;
use crate::test_util::run;

fn entry(producer_id: i64, first_offset: u64, last_offset: u64) -> AbortedTxnEntry {
    AbortedTxnEntry {
        producer_id,
        first_offset,
        last_offset,
    }
}

fn three() -> Vec<AbortedTxnEntry> {
    vec![
        entry(1, 2, 105),
        entry(-3, 100, 106),
        entry(i64::MAX, 0, 199),
    ]
}

#[test]
fn a_file_round_trips() {
    let bytes = encode_file(100, &three());
    assert_eq!(bytes.len(), HEADER_BYTES + 3 * ENTRY_BYTES);
    let d = decode(&bytes, 100, 200).unwrap();
    assert_eq!(d.entries, three());
    assert!(!d.torn);
    assert_eq!(d.valid_bytes, bytes.len() as u64);
    let empty = decode(&encode_file(7, &[]), 7, 7).unwrap();
    assert!(empty.entries.is_empty() && !empty.torn);
}

#[test]
fn a_torn_tail_is_dropped_and_reported_at_every_cut() {
    let bytes = encode_file(100, &three());
    for cut in 0..bytes.len() {
        match decode(&bytes[..cut], 100, 200) {
            Err(_) => assert!(cut < HEADER_BYTES, "only a short header is refused: {cut}"),
            Ok(d) => {
                let whole = (cut - HEADER_BYTES) / ENTRY_BYTES;
                assert_eq!(d.entries, three()[..whole], "cut at {cut}");
                assert_eq!(d.torn, (cut - HEADER_BYTES) % ENTRY_BYTES != 0);
            }
        }
    }
}

#[test]
fn a_flipped_bit_ends_the_entries_at_the_broken_one() {
    let bytes = encode_file(100, &three());
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x04;
        match decode(&b, 100, 200) {
            Err(_) => assert!(i < HEADER_BYTES),
            Ok(d) => {
                let broken = (i - HEADER_BYTES) / ENTRY_BYTES;
                assert_eq!(d.entries, three()[..broken], "flip at {i}");
                assert!(d.torn);
            }
        }
    }
}

#[test]
fn entries_out_of_order_outside_the_segment_or_of_another_segment_are_refused() {
    let out_of_order = encode_file(100, &[entry(1, 100, 150), entry(2, 100, 150)]);
    let d = decode(&out_of_order, 100, 200).unwrap();
    assert_eq!((d.entries.len(), d.torn), (1, true));
    let past_end = encode_file(100, &[entry(1, 100, 200)]);
    assert!(decode(&past_end, 100, 200).unwrap().torn);
    let first_after_last = encode_file(100, &[entry(1, 160, 150)]);
    assert!(decode(&first_after_last, 100, 200).unwrap().torn);
    assert!(decode(&encode_file(100, &[]), 101, 200).is_err());
    assert!(decode(b"SPTXIX02\0\0\0\0\0\0\0\0", 0, 1).is_err());
}

/// Appends in place, seals, and reads back; a torn tail written behind the log's back makes the
/// file unloadable (so the log rebuilds it) while `read_entries` keeps the whole prefix.
#[test]
fn the_file_of_a_segment_appends_seals_and_detects_a_torn_tail() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(load(d, 100, 200).await.unwrap(), None, "missing");
        let mut len = 0;
        for e in three() {
            len = append_entry(d, 100, len, &e).await.unwrap();
        }
        assert_eq!(len, (HEADER_BYTES + 3 * ENTRY_BYTES) as u64);
        assert_eq!(seal(d, 100, len).await.unwrap(), len);
        assert_eq!(load(d, 100, 200).await.unwrap(), Some(three()));
        assert_eq!(read_entries(d, 100, len).await.unwrap(), three());
        assert_eq!(
            read_entries(d, 100, len - ENTRY_BYTES as u64)
                .await
                .unwrap(),
            three()[..2],
            "only what the summary says was written"
        );

        let path = txn_index_path(d, 100);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(load(d, 100, 200).await.unwrap(), None, "torn: rebuild");

        // A fresh start truncates any leftover behind the new header.
        let fresh = append_entry(d, 100, 0, &entry(9, 150, 150)).await.unwrap();
        assert_eq!(fresh, (HEADER_BYTES + ENTRY_BYTES) as u64);
        assert_eq!(
            load(d, 100, 200).await.unwrap(),
            Some(vec![entry(9, 150, 150)])
        );

        // A segment without aborts seals to a header-only file: present and empty.
        assert_eq!(seal(d, 300, 0).await.unwrap(), HEADER_BYTES as u64);
        assert_eq!(load(d, 300, 300).await.unwrap(), Some(vec![]));
    });
}

/// A file longer than one read window is walked whole, window by window, in order.
#[test]
fn a_file_of_many_windows_reads_back_in_order() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let n = READ_WINDOW_ENTRIES * 2 + 17;
        let entries: Vec<_> = (0..n as u64)
            .map(|i| entry(i as i64 % 5, i, 1000 + i))
            .collect();
        let len = write_whole(dir.path(), 1000, &entries, false)
            .await
            .unwrap();
        let mut windows = Vec::new();
        let mut got = Vec::new();
        for_each_entry(dir.path(), 1000, len, |w| {
            windows.push(w.len());
            got.extend_from_slice(w);
        })
        .await
        .unwrap();
        assert_eq!(got, entries);
        assert_eq!(windows, vec![READ_WINDOW_ENTRIES, READ_WINDOW_ENTRIES, 17]);
    });
}
