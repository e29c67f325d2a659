//! Fuzz target: arbitrary bytes as one whole internal-protocol frame (port 9094, prefix included),
//! into both of the broker-to-broker decoders, `internal::decode` and
//! `internal::decode_with_payload`. Any panic is a bug: a peer's bytes must come back as an
//! `InternalError`. Anything that decodes must re-encode under the same limits and decode again
//! to the same frame (and payload), so encoder and decoder cannot drift apart.
//!
//! Run with the others: `scripts/fuzz.sh [SECONDS_PER_TARGET]`. Seeds (valid frames of each
//! message kind) come from this crate's `write_seeds` binary (`src/write_seeds.rs`), which `scripts/fuzz.sh` runs when a corpus is empty.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use spool_protocol::frame::FrameLimits;
use spool_protocol::internal;

fuzz_target!(|data: &[u8]| {
    // Small limits so the fuzzer also reaches the size checks.
    let limits = FrameLimits { max_frame_bytes: 1 << 20, max_header_bytes: 1 << 16 };

    if let Ok(frame) = internal::decode(data, &limits) {
        // An empty payload round trip: what decodes must encode and read back the same.
        if let Ok(encoded) = internal::encode_with_limits(&frame, &limits) {
            let again = internal::decode(&encoded, &limits).expect("a re-encoded frame decodes");
            assert_eq!(again, frame, "internal frame changed across encode/decode");
        }
    }

    let bytes = Bytes::copy_from_slice(data);
    if let Ok((frame, payload)) = internal::decode_with_payload(&bytes, &limits) {
        assert!(payload.len() <= bytes.len());
        if let internal::InternalMessage::ReplicaFetchAnswer(answer) = &frame.message {
            // The decoder promised the payload matches the partitions' sizes.
            let split = answer.split_records(&payload).expect("payload matches records_bytes");
            assert_eq!(split.len(), answer.partitions.len());
        } else {
            assert!(payload.is_empty(), "only a ReplicaFetchAnswer carries a payload");
        }
        if let Ok(encoded) = internal::encode_with_payload(&frame, vec![payload.clone()], &limits) {
            let mut whole = encoded.head.to_vec();
            for chunk in &encoded.payload {
                whole.extend_from_slice(chunk);
            }
            let whole = Bytes::from(whole);
            let (again, again_payload) = internal::decode_with_payload(&whole, &limits)
                .expect("a re-encoded frame with payload decodes");
            assert_eq!(again, frame, "internal frame changed across encode/decode");
            assert_eq!(again_payload, payload, "payload changed across encode/decode");
        }
    }
});
