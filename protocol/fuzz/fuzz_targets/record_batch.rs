//! Fuzz target: arbitrary bytes into the Kafka RecordBatch v2 parser of `spool-storage` — the
//! code every produced or replicated batch passes before it reaches the log: `batch::validate`,
//! `BatchHeader::parse`, `BatchIter` over batches laid end to end, and `records::read_batch`
//! (zstd included) down to each record. Any panic is a bug: a bad batch must come back as a
//! `BatchError`.
//!
//! A random CRC almost never matches, so each input is also tried with its first batch's CRC
//! rewritten: the fuzzer then reaches the count, compression and record checks behind it.
//! Consistency checked where cheap: a validated batch lies inside its buffer, the iterator walks
//! exactly the bytes it validated, and decoded records re-encode into a batch that reads back to
//! the same records.
//!
//! Run with the others: `scripts/fuzz.sh [SECONDS_PER_TARGET]`.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use spool_storage::batch::{self, BatchHeader, BatchIter, CRC_START};
use spool_storage::records::{self, BatchBuilder};

/// Small, so the fuzzer also reaches the length limit.
const MAX_BATCH_BYTES: usize = 1 << 20;
/// Where the CRC sits (Kafka's v2 layout; `batch` keeps its offset private).
const OFF_CRC: usize = 17;

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() > CRC_START {
        let mut fixed = data.to_vec();
        let end = match batch::peek_total_bytes(&fixed) {
            Some(total) if total > CRC_START as i64 && (total as u64) <= fixed.len() as u64 => {
                total as usize
            }
            _ => fixed.len(),
        };
        let crc = batch::compute_crc(&fixed[..end]);
        fixed[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
        check(&fixed);
    }
});

fn check(data: &[u8]) {
    let _ = BatchHeader::parse(data);

    let mut walked = 0usize;
    for item in BatchIter::new(data, MAX_BATCH_BYTES) {
        match item {
            Ok(b) => {
                assert_eq!(b.position, walked, "batches are laid end to end");
                assert_eq!(b.bytes.len(), b.header.total_bytes());
                walked += b.bytes.len();
                assert!(walked <= data.len());
            }
            Err((position, _)) => assert_eq!(position, walked),
        }
    }

    let Ok(header) = batch::validate(data, MAX_BATCH_BYTES) else { return };
    assert!(header.total_bytes() <= data.len() && header.total_bytes() <= MAX_BATCH_BYTES);
    let one = Bytes::copy_from_slice(&data[..header.total_bytes()]);
    let Ok((read_header, recs)) = records::read_batch(&one, MAX_BATCH_BYTES) else { return };
    assert_eq!(read_header, header);
    assert!(recs.len() as i64 == i64::from(header.record_count));

    // Re-encode the records, uncompressed, and read them back: what the parser accepted must be
    // something the builder writes and the parser reads again the same.
    if recs.is_empty() {
        return;
    }
    // Base timestamp 0: the builder adds it to each delta, and a fuzzed base plus a fuzzed delta
    // may overflow where no real producer's clock would.
    let mut builder = BatchBuilder::new(0);
    for r in &recs {
        builder.push_record(r.clone());
    }
    let Ok(built) = builder.build() else { return };
    let built = built.freeze();
    let (_, again) = records::read_batch(&built, usize::MAX).expect("a built batch reads back");
    assert_eq!(again, recs, "records changed across encode/decode");
}
