//! The loadgen payload: a 32-byte little-endian header — magic, run id, producer id, sequence,
//! intended send time (µs since the Unix epoch) — then filler up to `--message-bytes`. The filler
//! is pseudo-random so zstd cannot shrink it to nothing. Payloads are carved from 1 MiB arenas
//! (one allocation per ~1,000 messages: a per-message allocation was 13 % of the load
//! generator's CPU under `perf`). Pure; decoding never panics.
//!
//! Only `e2e` reads the header back (end-to-end latency, `--verify`), so only `e2e` stamps one:
//! `produce` sends [`Filler`] values, windows of one random block shared by reference, with
//! no copy and no allocation per message. Building a stamped payload (a copy of every value,
//! an arena split) was about 17 % of the load generator's samples in a full-load `produce`
//! run, work that measured the load generator rather than the client library or the broker.

use bytes::{Bytes, BytesMut};

use crate::keys::Rng;

/// "SPLG".
pub const MAGIC: u32 = 0x5350_4C47;
/// Bytes of the header; `--message-bytes` must be at least this.
pub const HEADER_BYTES: usize = 32;
/// Filler is sliced from one random block of this size per producer.
const FILLER_BLOCK_BYTES: usize = 64 * 1024;
/// Payloads are cut from arenas of this size; an arena is freed when its last payload is.
const ARENA_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub run_id: u32,
    pub producer_id: u32,
    pub seq: u64,
    pub send_time_us: u64,
}

impl Header {
    /// Parses the header of a record value; `None` for anything that is not a loadgen payload.
    pub fn decode(value: &[u8]) -> Option<Self> {
        let word32 = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(value.get(at..at + 4)?.try_into().ok()?))
        };
        let word64 = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(value.get(at..at + 8)?.try_into().ok()?))
        };
        if word32(0)? != MAGIC {
            return None;
        }
        Some(Self {
            run_id: word32(4)?,
            producer_id: word32(8)?,
            // bytes 12..16 are reserved (zero).
            seq: word64(16)?,
            send_time_us: word64(24)?,
        })
    }

    fn encode_into(&self, out: &mut BytesMut) {
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&self.run_id.to_le_bytes());
        out.extend_from_slice(&self.producer_id.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.send_time_us.to_le_bytes());
    }
}

/// Builds payloads of one size for one producer.
pub struct PayloadBuilder {
    message_bytes: usize,
    filler: Vec<u8>,
    arena: BytesMut,
}

impl PayloadBuilder {
    /// `message_bytes` below [`HEADER_BYTES`] is raised to it (validated earlier at the CLI).
    pub fn new(message_bytes: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut filler = Vec::with_capacity(FILLER_BLOCK_BYTES);
        while filler.len() < FILLER_BLOCK_BYTES {
            filler.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        Self {
            message_bytes: message_bytes.max(HEADER_BYTES),
            filler,
            arena: BytesMut::new(),
        }
    }

    pub fn build(&mut self, header: &Header) -> Bytes {
        if self.arena.capacity() < self.message_bytes {
            self.arena = BytesMut::with_capacity(ARENA_BYTES.max(self.message_bytes));
        }
        let out = &mut self.arena;
        header.encode_into(out);
        let mut at = (header.seq as usize).wrapping_mul(61) % self.filler.len();
        while out.len() < self.message_bytes {
            let want = (self.message_bytes - out.len()).min(self.filler.len() - at);
            out.extend_from_slice(&self.filler[at..at + want]);
            at = 0;
        }
        out.split().freeze()
    }
}

/// Unstamped values for `produce`: `message_bytes` windows of one random block that lives for the
/// whole process, handed out as `Bytes` that share it by reference.
pub struct Filler {
    block: &'static [u8],
    message_bytes: usize,
}

impl Filler {
    pub fn new(message_bytes: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut block = Vec::with_capacity(FILLER_BLOCK_BYTES + message_bytes + 8);
        while block.len() < FILLER_BLOCK_BYTES + message_bytes {
            block.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        // Leaked on purpose, once per producer of this short-lived process: a `'static` block
        // makes each value a borrowed window (`Bytes::from_static`), with no reference count
        // to touch per message.
        Self {
            block: Box::leak(block.into_boxed_slice()),
            message_bytes,
        }
    }

    /// The value of message `seq`: a window starting at a varying offset, so consecutive
    /// values differ.
    pub fn value(&self, seq: u64) -> Bytes {
        let at = (seq as usize).wrapping_mul(61) % FILLER_BLOCK_BYTES;
        Bytes::from_static(&self.block[at..at + self.message_bytes])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_at_every_size() {
        let h = Header {
            run_id: 7,
            producer_id: 3,
            seq: 123_456_789,
            send_time_us: 1_700_000_000_000_000,
        };
        for size in [0, 32, 33, 1024, 100_000, 3 * 1024 * 1024] {
            let mut builder = PayloadBuilder::new(size, 9);
            // Enough payloads to cross an arena boundary.
            for seq in 0..1500 {
                let h = Header { seq, ..h };
                let b = builder.build(&h);
                assert_eq!(b.len(), size.max(HEADER_BYTES));
                assert_eq!(Header::decode(&b), Some(h));
                if size > 100_000 {
                    break;
                }
            }
        }
    }

    #[test]
    fn filler_values_have_the_size_and_differ() {
        for size in [0, 1, 1024, 100_000] {
            let f = Filler::new(size, 3);
            let (a, b) = (f.value(0), f.value(1));
            assert_eq!((a.len(), b.len()), (size, size));
            if size > 64 {
                assert_ne!(a, b, "consecutive values differ");
                assert_eq!(Header::decode(&a), None, "not a stamped payload");
            }
            assert_eq!(f.value(1_000_003).len(), size);
        }
    }

    #[test]
    fn foreign_or_short_values_decode_to_none() {
        assert_eq!(Header::decode(b""), None);
        assert_eq!(Header::decode(b"hello world, not a loadgen payload"), None);
        let b = PayloadBuilder::new(64, 1).build(&Header {
            run_id: 1,
            producer_id: 1,
            seq: 1,
            send_time_us: 1,
        });
        assert_eq!(Header::decode(&b[..20]), None);
    }
}
