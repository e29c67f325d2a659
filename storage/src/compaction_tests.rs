//! Tests of [`super`]: keys, tombstones and transactions through one compaction pass.
use super::*;
use crate::batch;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Builds a segment of batches of (key, value or tombstone, timestamp) records.
fn image(batches: &[Vec<(u8, bool, i64)>], zstd: bool) -> Bytes {
    let mut out = Vec::new();
    let mut next = 100i64;
    for recs in batches {
        let mut b = BatchBuilder::new(0).compression(if zstd {
            Compression::Zstd
        } else {
            Compression::None
        });
        for &(k, live, ts) in recs {
            let value = live.then(|| Bytes::from(format!("v{next}-{}", b.len())));
            b.push(ts, Some(Bytes::from(vec![k])), value);
        }
        let mut bytes = b.build().unwrap();
        batch::set_base_offset(&mut bytes, next);
        batch::set_partition_leader_epoch(&mut bytes, 7);
        next += recs.len() as i64;
        out.extend_from_slice(&bytes);
    }
    Bytes::from(out)
}

#[test]
fn unknown_transactional_records_supersede_nothing_and_are_kept() {
    // Key 1: a plain value at 100, then a transactional one at 101 (maybe aborted), then a
    // plain one for key 2 superseding nothing of key 1.
    let plain = image(&[vec![(1, true, 0)]], false);
    let mut txn = BatchBuilder::new(0);
    txn.producer_id = 9;
    txn.producer_epoch = 0;
    txn.transactional = true;
    txn.push(
        0,
        Some(Bytes::from(vec![1u8])),
        Some(Bytes::from_static(b"t")),
    );
    let mut txn = txn.build().unwrap();
    batch::set_base_offset(&mut txn, 101);
    batch::set_partition_leader_epoch(&mut txn, 7);
    let mut whole = plain.to_vec();
    whole.extend_from_slice(&txn);
    let whole = Bytes::from(whole);
    let mut map = OffsetMap::new(100);
    map.add_segment(&whole, usize::MAX, &TxnOutcomes::unknown())
        .unwrap();
    assert_eq!(
        map.newest(&[1]),
        Some(100),
        "the transactional record is not learned"
    );
    let out = compact_segment(&whole, &map, 0, 0, usize::MAX, &TxnOutcomes::unknown()).unwrap();
    assert_eq!(out.records_removed, 0);
    assert_eq!(&out.image[..], &whole[..], "both kept, byte for byte");
}

/// A transactional batch of `producer_id` at `base_offset` with one record per key.
fn txn_batch(producer_id: i64, base_offset: i64, keys: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(0);
    b.producer_id = producer_id;
    b.producer_epoch = 0;
    b.base_sequence = 0;
    b.transactional = true;
    for &k in keys {
        b.push(
            0,
            Some(Bytes::from(vec![k])),
            Some(Bytes::from(vec![b'p', k])),
        );
    }
    let mut bytes = b.build().unwrap();
    batch::set_base_offset(&mut bytes, base_offset);
    batch::set_partition_leader_epoch(&mut bytes, 7);
    bytes.to_vec()
}

#[test]
fn committed_records_are_cleaned_by_key_aborted_ones_emptied_undecided_kept() {
    // 100: plain key 1. 101: producer 5 commits keys 1, 2. 103: producer 6 aborts keys 2, 3.
    // 105: producer 7 (still open) writes key 1. 106: plain key 2.
    let mut img = image(&[vec![(1, true, 0)]], false).to_vec();
    img.extend(txn_batch(5, 101, &[1, 2]));
    let aborted = txn_batch(6, 103, &[2, 3]);
    img.extend(&aborted);
    img.extend(txn_batch(7, 105, &[1]));
    let mut plain = BatchBuilder::new(0);
    plain.push(
        0,
        Some(Bytes::from(vec![2u8])),
        Some(Bytes::from_static(b"last")),
    );
    let mut plain = plain.build().unwrap();
    batch::set_base_offset(&mut plain, 106);
    batch::set_partition_leader_epoch(&mut plain, 7);
    img.extend_from_slice(&plain);
    let img = Bytes::from(img);
    let open = [crate::txn_tracker::OpenTxnEntry {
        producer_id: 7,
        producer_epoch: 0,
        first_offset: 105,
    }];
    let abort = [crate::txn_index::AbortedTxnEntry {
        producer_id: 6,
        first_offset: 103,
        last_offset: 110,
    }];
    let txns = TxnOutcomes::new(&open, &abort, true);
    let mut map = OffsetMap::new(100);
    map.add_segment(&img, usize::MAX, &txns).unwrap();
    assert_eq!(
        map.newest(&[1]),
        Some(101),
        "the committed record, not the open one"
    );
    assert_eq!(map.newest(&[2]), Some(106));
    assert_eq!(map.newest(&[3]), None, "aborted records are never learned");
    let out = compact_segment(&img, &map, 0, 0, usize::MAX, &txns).unwrap();
    let out_img = Bytes::from(out.image.clone());
    let kept: Vec<(u64, Option<Bytes>)> = all_records(&out_img)
        .into_iter()
        .map(|(o, k, _, _)| (o, k))
        .collect();
    let key = |k: u8| Some(Bytes::from(vec![k]));
    assert_eq!(
        kept,
        vec![(101, key(1)), (105, key(1)), (106, key(2))],
        "plain 1 superseded by the commit, committed 2 by the plain one, the aborted pair gone, the open one kept"
    );
    assert_eq!(out.records_removed, 4);
    // The aborted batch is still there, empty, with its producer fields and offsets.
    let headers: Vec<BatchHeader> = BatchIter::new(&out_img, usize::MAX)
        .map(|b| b.unwrap().header)
        .collect();
    let empty = headers
        .iter()
        .find(|h| h.producer_id == 6)
        .expect("aborted batch kept");
    assert_eq!(
        (
            empty.record_count,
            empty.base_offset,
            empty.last_offset_delta
        ),
        (0, 103, 1)
    );
    assert!(empty.is_transactional());
    assert!(
        headers
            .iter()
            .any(|h| h.producer_id == 5 && h.record_count == 1),
        "the committed batch stays with the record the plain one did not supersede"
    );
    // Compacting again changes nothing.
    let again = compact_segment(&out_img, &map, 0, 0, usize::MAX, &txns).unwrap();
    assert_eq!(again.image, out.image);
}

fn all_records(img: &Bytes) -> Vec<(u64, Option<Bytes>, Option<Bytes>, i64)> {
    let mut v = Vec::new();
    for b in BatchIter::new(img, usize::MAX) {
        let b = b.unwrap();
        assert_eq!(b.header.partition_leader_epoch, 7);
        let bytes = img.slice(b.position..b.position + b.bytes.len());
        let (h, recs) = records::read_batch(&bytes, usize::MAX).unwrap();
        for r in recs {
            v.push((
                (h.base_offset + i64::from(r.offset_delta)) as u64,
                r.key,
                r.value,
                h.base_timestamp + r.timestamp_delta,
            ));
        }
    }
    v
}

proptest! {
    /// Exactly the newest record per key survives (tombstones too, while young), at its
    /// original offset; older tombstones go.
    #[test]
    fn keeps_exactly_the_newest_record_per_key(
        batches in proptest::collection::vec(
            proptest::collection::vec((0u8..12, proptest::bool::weighted(0.8), 0i64..1000), 1..12), 1..12),
        zstd in any::<bool>(),
        now in 0i64..2000,
    ) {
        let img = image(&batches, zstd);
        let before = all_records(&img);
        let mut map = OffsetMap::new(1000);
        map.add_segment(&img, usize::MAX, &TxnOutcomes::unknown()).unwrap();
        let out = compact_segment(&img, &map, now, 500, usize::MAX, &TxnOutcomes::unknown()).unwrap();
        let after = all_records(&Bytes::from(out.image.clone()));

        let mut newest: BTreeMap<Bytes, (u64, Option<Bytes>, i64)> = BTreeMap::new();
        for (o, k, v, ts) in &before { newest.insert(k.clone().unwrap(), (*o, v.clone(), *ts)); }
        let mut expect: Vec<_> = newest.into_iter()
            .filter(|(_, (_, v, ts))| v.is_some() || ts + 500 > now)
            .map(|(k, (o, v, ts))| (o, Some(k), v, ts)).collect();
        expect.sort_by_key(|e| e.0);
        prop_assert_eq!(&after, &expect);
        prop_assert_eq!(out.records_kept as usize, after.len());
        prop_assert_eq!((out.records_kept + out.records_removed) as usize, before.len());
        // Compacting again changes nothing.
        let again = compact_segment(&Bytes::from(out.image.clone()), &map, now, 500, usize::MAX, &TxnOutcomes::unknown()).unwrap();
        prop_assert_eq!(again.image, out.image);
    }
}
