//! Fuzz target: arbitrary bytes into the native frame decoder, then every frame it yields into the
//! request and response decoders and the metadata-record decoder. Any panic is a bug: malformed
//! input must come back as a `FrameError`.
//!
//! Build / run (stable toolchain; cargo-fuzz needs nightly flags, which RUSTC_BOOTSTRAP allows):
//!   cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build
//!   cd protocol/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run frame_decoder corpus/frame_decoder seeds -- -max_total_time=60
//!
//! `seeds/` holds valid frames of every request, response and metadata record (regenerate with
//! `SPOOL_WRITE_FUZZ_SEEDS=protocol/fuzz/seeds cargo test -p spool-protocol --lib write_fuzz_seeds`),
//! so the fuzzer starts past the verifier instead of rediscovering flatbuffers from nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spool_protocol::frame::{FrameDecoder, FrameLimits};
use spool_protocol::{decode_request, decode_response, metadata_log};

fuzz_target!(|data: &[u8]| {
    // Small limits so the fuzzer also reaches the size checks.
    let limits = FrameLimits { max_frame_bytes: 1 << 20, max_header_bytes: 1 << 16 };
    let mut decoder = FrameDecoder::new(limits);
    let mut rest = data;
    while !rest.is_empty() {
        let Ok(taken) = decoder.push(rest) else { return };
        rest = &rest[taken..];
        match decoder.next_frame() {
            Ok(Some(frame)) => {
                if let Ok(req) = decode_request(&frame, &limits) {
                    // Walk every payload slice the way a broker would.
                    if let spool_protocol::wire::RequestBodyT::ProduceRequest(p) = &req.header.body {
                        for t in p.topics.iter().flatten() {
                            for part in t.partitions.iter().flatten() {
                                let _ = spool_protocol::payload::slice(&req.payload, &part.records);
                            }
                        }
                    }
                }
                let _ = decode_response(&frame, &limits);
            }
            Ok(None) => {}
            Err(_) => return,
        }
    }
    let _ = metadata_log::decode(data);
});
