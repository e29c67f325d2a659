//! Reused buffers for large frames, so a frame is not zero-filled before it is read (issue 19
//! item 3): the broker's request frames (`spool-broker`'s `frame_io`) and the client's response
//! frames ([`crate::frame::read_frame_async`], [`crate::frame::read_frame`]), one pool for both.
//!
//! A socket read needs initialised memory (`AsyncRead` takes `&mut [u8]`), so a fresh buffer is
//! zeroed first: for a 512 KiB produce request, or a 4 MiB fetch answer, that is a memset of the
//! whole frame, every frame. A buffer that comes back here keeps its length, so the next frame it
//! carries is read over the previous one's bytes, with no fill. Every byte of a frame is
//! overwritten by the read before the frame is used (a reader returns a frame only once all of it
//! arrived, and [`FrameBuf::into_frame_bytes`] exposes exactly the frame's length, never the
//! buffer's rounded tail), so nothing of an earlier frame is ever seen.
//!
//! As `Bytes` ([`FrameBuf::into_frame_bytes`]) a buffer comes back when the last slice of it drops
//! (a consumer's records are slices of their fetch answer), to the pool of the thread that drops
//! it: each thread's pool has the same bounds, whichever thread filled the buffer.
//!
//! Bounds: frames under [`POOLED_MIN_BYTES`] are plain allocations (their fill is cheap). A
//! buffer of up to [`ROUNDED_MAX_BYTES`] is rounded up to a power of two, so it holds at most
//! twice its frame (8 MiB more at most); a larger one is exactly its frame's size. The pool is per
//! thread, holds at most [`POOL_BUFFERS_MAX`] buffers and [`POOL_BYTES_MAX`] bytes; a buffer that
//! does not fit is freed. In the broker the memory a frame's buffer holds while in use is charged
//! to the request budget at the frame's size; the rounding and the idle pool are on top, bounded
//! here.

use std::cell::RefCell;

/// Frames smaller than this are allocated (and zeroed) as before.
pub const POOLED_MIN_BYTES: usize = 64 * 1024;
/// New buffers up to this size are rounded up to a power of two; larger ones are exact.
pub const ROUNDED_MAX_BYTES: usize = 8 * 1024 * 1024;
/// Idle buffers one thread keeps.
pub const POOL_BUFFERS_MAX: usize = 8;
/// Idle bytes one thread keeps.
pub const POOL_BYTES_MAX: usize = 32 * 1024 * 1024;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A frame's buffer: at least the frame's size, initialised; back to this thread's pool when
/// dropped.
#[derive(Debug)]
pub struct FrameBuf {
    buf: Vec<u8>,
}

impl FrameBuf {
    /// A buffer of at least `size` initialised bytes: a pooled one when one is big enough,
    /// else a new (zeroed) one.
    pub fn take(size: usize) -> Self {
        if size < POOLED_MIN_BYTES {
            return Self {
                buf: vec![0u8; size],
            };
        }
        let reused = POOL.with(|p| {
            let mut p = p.borrow_mut();
            // The smallest that fits, so big buffers stay for big frames.
            let best = p
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= size)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            best.map(|i| p.swap_remove(i))
        });
        // Rounded up so it serves frames of about this size again; a very large frame gets
        // exactly its size (the rounding would be memory no budget charged).
        let rounded = size.next_power_of_two();
        let new_len = if rounded <= ROUNDED_MAX_BYTES {
            rounded
        } else {
            size
        };
        let buf = reused.unwrap_or_else(|| vec![0u8; new_len]);
        debug_assert!(buf.len() >= size);
        Self { buf }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The first `frame_bytes` (filled that far by the caller) as `Bytes`; the buffer goes back
    /// to the pool when the last of them drops.
    pub fn into_frame_bytes(self, frame_bytes: usize) -> bytes::Bytes {
        assert!(frame_bytes <= self.len(), "a frame larger than its buffer");
        bytes::Bytes::from_owner(self).slice(..frame_bytes)
    }

    /// Buffers idle in this thread's pool, and their bytes (for tests and metrics).
    pub fn pooled() -> (usize, usize) {
        POOL.with(|p| {
            let p = p.borrow();
            (p.len(), p.iter().map(Vec::len).sum())
        })
    }
}

impl AsRef<[u8]> for FrameBuf {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for FrameBuf {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        if buf.len() < POOLED_MIN_BYTES {
            return;
        }
        // During thread teardown the pool may be gone: the buffer is then simply freed.
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            let held: usize = p.iter().map(Vec::len).sum();
            if p.len() < POOL_BUFFERS_MAX && held + buf.len() <= POOL_BYTES_MAX {
                p.push(buf);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_comes_back_with_its_bytes_and_small_ones_are_not_kept() {
        std::thread::spawn(|| {
            let mut a = FrameBuf::take(100_000);
            assert_eq!(a.len(), 131_072, "rounded up to a power of two");
            a.as_mut_slice()[..3].copy_from_slice(b"old");
            drop(a);
            assert_eq!(FrameBuf::pooled(), (1, 131_072));
            // Reused as it was: no fill (the reader overwrites every byte of its frame).
            let b = FrameBuf::take(70_000);
            assert_eq!(&b.as_ref()[..3], b"old");
            assert_eq!(FrameBuf::pooled(), (0, 0));
            drop(b);
            let small = FrameBuf::take(100);
            assert_eq!(small.len(), 100);
            drop(small);
            assert_eq!(FrameBuf::pooled(), (1, 131_072), "small buffers are freed");
            // Bigger than anything pooled: a new one.
            let big = FrameBuf::take(200_000);
            assert_eq!(big.len(), 262_144);
            assert_eq!(FrameBuf::pooled(), (1, 131_072));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_pool_is_bounded_in_buffers_and_bytes() {
        std::thread::spawn(|| {
            let bufs: Vec<FrameBuf> = (0..20).map(|_| FrameBuf::take(POOLED_MIN_BYTES)).collect();
            drop(bufs);
            let (n, bytes) = FrameBuf::pooled();
            assert_eq!(n, POOL_BUFFERS_MAX);
            assert!(bytes <= POOL_BYTES_MAX);
            let huge: Vec<FrameBuf> = (0..3).map(|_| FrameBuf::take((16 << 20) + 1)).collect();
            assert_eq!(
                huge[0].len(),
                (16 << 20) + 1,
                "not rounded past ROUNDED_MAX_BYTES"
            );
            drop(huge);
            assert!(FrameBuf::pooled().1 <= POOL_BYTES_MAX);
        })
        .join()
        .unwrap();
    }
}
