//! The one framing every `__raft` file uses: `u32 length | u32 crc32c(payload) | payload`,
//! little-endian.
//!
//! Owns: encoding a frame and reading one back from a byte slice with every failure typed.
//! Promises: never panics and never allocates more than the bytes it was given, whatever they
//! hold (the length is checked against the remaining bytes before use).

/// Bytes before a frame's payload.
pub const FRAME_HEADER_BYTES: usize = 8;

/// Why the bytes at a position are not a whole frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFault {
    /// Fewer bytes than a header, or than the header's length says.
    Short,
    /// The payload's CRC-32C is not the one in the header.
    BadCrc,
}

/// Appends one frame holding `payload` to `out`.
pub fn put_frame(out: &mut Vec<u8>, payload: &[u8]) {
    // Callers bound their payloads far below 4 GiB (raft entries by RECORD_BYTES_MAX plus
    // protobuf overhead, snapshots by the image size); saturate rather than wrap if one did not.
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Reads the frame starting at `bytes[0]`: its payload and its total length.
pub fn get_frame(bytes: &[u8]) -> Result<(&[u8], usize), FrameFault> {
    let header = bytes.get(..FRAME_HEADER_BYTES).ok_or(FrameFault::Short)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let total = FRAME_HEADER_BYTES
        .checked_add(len)
        .ok_or(FrameFault::Short)?;
    let payload = bytes
        .get(FRAME_HEADER_BYTES..total)
        .ok_or(FrameFault::Short)?;
    if crc32c::crc32c(payload) != crc {
        return Err(FrameFault::BadCrc);
    }
    Ok((payload, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_faults() {
        let mut buf = Vec::new();
        put_frame(&mut buf, b"hello");
        assert_eq!(get_frame(&buf), Ok((&b"hello"[..], 13)));
        assert_eq!(get_frame(&buf[..12]), Err(FrameFault::Short));
        buf[10] ^= 1;
        assert_eq!(get_frame(&buf), Err(FrameFault::BadCrc));
        assert_eq!(get_frame(&[0xff; 8]), Err(FrameFault::Short));
    }
}
