//! Fuzz target: arbitrary bytes as one request frame on the Kafka port, through the decoding the
//! broker's Kafka front serves (`spool_broker::kafka`'s `Front::decode`):
//! `kafka::codec::frame_bytes_from_prefix` on the length prefix, then `kafka::codec::decode_request`
//! on the bytes after it (request header, then the body through the `kafka-protocol` crate). Any
//! panic is a bug: a client's bytes must come back as a `KafkaCodecError`.
//!
//! The broker passes its API table (`KAFKA_APIS`) to `decode_request`; here the table lists every
//! version the codec carries (`versions::codec_range` for every API), a superset of the broker's,
//! so every body the broker would decode is decoded here too, without starting a broker. A decoded
//! request that re-encodes into bytes that decode again must be the same request.
//!
//! Run with the others: `scripts/fuzz.sh [SECONDS_PER_TARGET]`. Seeds (valid requests of each
//! API) come from this crate's `write_seeds` binary (`src/write_seeds.rs`), which `scripts/fuzz.sh` runs when a corpus is empty.
#![no_main]

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use spool_protocol::kafka::codec::{self, RequestBody, LENGTH_PREFIX_BYTES};
use spool_protocol::kafka::versions::{codec_range, KafkaApiRange};

/// The broker's allocator (`spool_broker::alloc`): the `kafka-protocol` crate pre-allocates as
/// many array elements as a frame claims, and a frame claiming billions only reserves address
/// space there, so its decode fails cleanly instead of aborting. Under the system allocator (and
/// ASan's) the same 23-byte Metadata frame is an out-of-memory abort: that is the broker's real
/// behaviour only if it ran without this allocator.
#[global_allocator]
static ALLOCATOR: spool_broker::alloc::ReserveLargeAllocator = spool_broker::alloc::ReserveLargeAllocator;

/// The broker's default `max_frame_bytes` is larger; small here so the limit is reached too.
const MAX_FRAME_BYTES: usize = 1 << 20;

fn full_table() -> &'static [KafkaApiRange] {
    static TABLE: OnceLock<Vec<KafkaApiRange>> = OnceLock::new();
    TABLE.get_or_init(|| {
        ApiKey::iter()
            .map(|api_key| {
                let (min_version, max_version) = codec_range(api_key);
                KafkaApiRange { api_key, min_version, max_version }
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() >= LENGTH_PREFIX_BYTES {
        let prefix = [data[0], data[1], data[2], data[3]];
        if let Ok(n) = codec::frame_bytes_from_prefix(prefix, MAX_FRAME_BYTES) {
            assert!(n + LENGTH_PREFIX_BYTES <= MAX_FRAME_BYTES);
        }
    }
    // The whole input is the frame after the prefix, as the broker hands it to the codec.
    let frame = Bytes::copy_from_slice(data);
    let Ok(request) = codec::decode_request(frame, full_table()) else { return };
    let RequestBody::Decoded(body) = &request.body else { return };

    let mut out = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(request.api_key as i16)
        .with_request_api_version(request.version)
        .with_correlation_id(request.correlation_id)
        .with_client_id(request.client_id.clone().map(StrBytes::from_string));
    if header.encode(&mut out, request.api_key.request_header_version(request.version)).is_err() {
        return;
    }
    if body.encode(&mut out, request.version).is_err() {
        return;
    }
    // The `kafka-protocol` crate re-encodes some malformed flexible-version bodies (unknown tagged
    // fields it kept from garbage) into bytes it cannot decode again (found by this target: a
    // DescribeCluster v0). The broker never re-encodes a request, so only what does decode again
    // is held to being the same request.
    let Ok(again) = codec::decode_request(out.freeze(), full_table()) else { return };
    assert_eq!(again, request, "Kafka request changed across encode/decode");
});
