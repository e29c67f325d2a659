//! Record-batch bytes in a frame's payload: placing them ([`PayloadBuilder`]) and finding them
//! again ([`slice()`]).
//!
//! A payload is the concatenation of chunks, each chunk whole RecordBatch v2 batches (built and
//! validated by `spool_storage`); a `PayloadSlice { offset, length }` in the header names each
//! partition's bytes. Chunks are kept as they are — never copied into the flatbuffer — so a writer
//! can send them vectored and a broker can splice a fetch payload from a segment file.

use bytes::Bytes;

use crate::frame::FrameError;
use crate::wire::PayloadSliceT;

/// Collects payload chunks and hands out the slice each one occupies.
#[derive(Debug, Default, Clone)]
pub struct PayloadBuilder {
    chunks: Vec<Bytes>,
    payload_bytes: u64,
}

impl PayloadBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one chunk (one or more whole batches) and returns where it lies. Fails when the
    /// payload would outgrow a `u32` offset (frames are far smaller: 100 MiB by default).
    pub fn push(&mut self, chunk: Bytes) -> Result<PayloadSliceT, FrameError> {
        let end = self.payload_bytes + chunk.len() as u64;
        if end > u64::from(u32::MAX) {
            return Err(FrameError::FrameTooLarge {
                frame_bytes: end,
                max_frame_bytes: u32::MAX as usize,
            });
        }
        // Both fit a u32: checked just above.
        let slice = PayloadSliceT {
            offset: self.payload_bytes as u32,
            length: chunk.len() as u32,
        };
        self.payload_bytes = end;
        if !chunk.is_empty() {
            self.chunks.push(chunk);
        }
        Ok(slice)
    }

    /// Payload bytes so far.
    pub fn len(&self) -> usize {
        self.payload_bytes as usize
    }

    pub fn is_empty(&self) -> bool {
        self.payload_bytes == 0
    }

    /// The chunks, in order, for [`crate::encode_request`] / [`crate::encode_response`].
    pub fn finish(self) -> Vec<Bytes> {
        self.chunks
    }
}

/// The bytes a slice names, without copying. Decoded frames have had their slices checked, but
/// this checks again so it is safe on any header.
pub fn slice(payload: &Bytes, s: &PayloadSliceT) -> Result<Bytes, FrameError> {
    let start = s.offset as usize;
    let end = start as u64 + u64::from(s.length);
    if end > payload.len() as u64 {
        return Err(FrameError::SliceOutOfBounds {
            topic: String::new(),
            partition: -1,
            offset: s.offset,
            length: s.length,
            payload_bytes: payload.len(),
        });
    }
    Ok(payload.slice(start..end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_locate_their_chunks() {
        let mut b = PayloadBuilder::new();
        let a = b.push(Bytes::from_static(b"first")).unwrap();
        let e = b.push(Bytes::new()).unwrap();
        let c = b.push(Bytes::from_static(b"second")).unwrap();
        let payload: Bytes = b.finish().concat().into();
        assert_eq!(&slice(&payload, &a).unwrap()[..], b"first");
        assert_eq!(slice(&payload, &e).unwrap().len(), 0);
        assert_eq!(&slice(&payload, &c).unwrap()[..], b"second");
        let bad = PayloadSliceT {
            offset: 8,
            length: 10,
        };
        assert!(slice(&payload, &bad).is_err());
        let overflow = PayloadSliceT {
            offset: u32::MAX,
            length: u32::MAX,
        };
        assert!(slice(&payload, &overflow).is_err());
    }
}
