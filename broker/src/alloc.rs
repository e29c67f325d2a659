//! The broker's global allocator: the system allocator, except that very large allocations only
//! reserve address space (anonymous `mmap` with `MAP_NORESERVE`); their pages are committed when
//! first touched.
//!
//! Why: the `kafka-protocol` crate decodes an array by pre-allocating as many elements as the
//! frame *claims*, before reading any of them. A 30-byte Produce frame claiming 2^31 topics asked
//! for 206 GB, the system allocator refused, and Rust aborts the whole process on a failed
//! allocation — one client could kill the broker. With this allocator that reservation succeeds,
//! the decoder runs out of frame bytes after touching a few pages, returns an error, and the
//! reservation is unmapped; the connection is closed as for any malformed frame. Frames are
//! capped at `--max-frame-bytes`, so what a decode can actually touch stays bounded by the frame.
//!
//! Under `vm.overcommit_memory = 0` (Linux's default) and `1`, `MAP_NORESERVE` mappings are not
//! charged against the commit limit; under `2` (strict) the reservation can still fail, and the
//! process aborts as before — an operator choosing strict overcommit should keep frames small.
//! Allocations below [`RESERVE_ONLY_BYTES`] (everything spool allocates on purpose) are untouched.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large (and at most page-aligned) are reserved, not committed.
pub const RESERVE_ONLY_BYTES: usize = 1 << 30;
/// Alignment an anonymous mapping always satisfies.
const PAGE_BYTES: usize = 4096;

pub struct ReserveLargeAllocator;

fn reserved(layout: &Layout) -> bool {
    layout.size() >= RESERVE_ONLY_BYTES && layout.align() <= PAGE_BYTES
}

// SAFETY: every block comes either from `System` (small or over-aligned layouts) or from a fresh
// anonymous mapping of exactly `layout.size()` bytes (large ones); `dealloc` and `realloc` tell
// the two apart by the same size test on the layout Rust guarantees to pass back unchanged, so a
// block is always returned to the allocator that made it. Mappings are page-aligned, which
// satisfies every alignment `reserved` admits, and zero-filled, as `alloc_zeroed` requires.
unsafe impl GlobalAlloc for ReserveLargeAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !reserved(&layout) {
            // SAFETY: forwarded with the caller's guarantees (non-zero size layout).
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: an anonymous private mapping touches no existing memory; the kernel picks the
        // address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !reserved(&layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // SAFETY: as `alloc`; anonymous mappings are zero-filled.
        unsafe { self.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !reserved(&layout) {
            // SAFETY: `ptr` came from `System` with this layout (see the impl's proof).
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: `ptr` is the start of a mapping of exactly `layout.size()` bytes made by
        // `alloc`, and the caller no longer uses it.
        unsafe {
            libc::munmap(ptr.cast(), layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !reserved(&layout) && !reserved(&new_layout) {
            // SAFETY: both blocks belong to `System`.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // Crossing the threshold: allocate from the right allocator, copy, free the old block.
        // SAFETY: `new_layout` is valid (above); the copy stays inside both blocks.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

/// `M_MMAP_THRESHOLD` for [`keep_freed_memory`]: glibc's largest (`HEAP_MAX_SIZE / 2` on 64-bit).
pub const MMAP_THRESHOLD_BYTES: usize = 32 << 20;
/// `M_TRIM_THRESHOLD` for [`keep_freed_memory`]: free memory an arena keeps at its top.
pub const TRIM_THRESHOLD_BYTES: usize = 256 << 20;

/// Makes glibc's allocator keep freed blocks of up to [`MMAP_THRESHOLD_BYTES`] for reuse, and up
/// to [`TRIM_THRESHOLD_BYTES`] free at the top of each arena, instead of handing them back to
/// the kernel. Called once by `spool serve`, before its executors start; returns whether glibc
/// took both settings (false elsewhere, where the defaults stay).
///
/// Why: every segment write stages its bytes in a fresh 1 MiB O_DIRECT buffer, and glibc's
/// defaults gave each freed one back (munmap, or an arena trimmed below it): each staging then
/// paid ~256 page faults and the kernel's zeroing of every page on its first touch. In
/// fsync'd produce that was 18 % of the broker's samples (`perf record -g`; 0.3 % with these
/// settings; BENCHMARKS.md, 2026-12-07). The memory kept is memory the broker used at its peak,
/// which its request, response and cache budgets already bound.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let as_int = |v: usize| libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes glibc's allocator parameters; it takes no pointers and
        // is safe to call at any time (it takes the allocator's own lock).
        let (mmap, trim) = unsafe {
            (
                libc::mallopt(libc::M_MMAP_THRESHOLD, as_int(MMAP_THRESHOLD_BYTES)),
                libc::mallopt(libc::M_TRIM_THRESHOLD, as_int(TRIM_THRESHOLD_BYTES)),
            )
        };
        mmap == 1 && trim == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The unit tests run under this allocator too, so the hostile-frame test below exercises it.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: ReserveLargeAllocator = ReserveLargeAllocator;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    #[test]
    fn a_frame_claiming_two_billion_topics_is_an_error_not_an_abort() {
        // Produce v3: api key 0, version 3, correlation id 1, null client id, null
        // transactional id, acks 1, timeout 1000, then a topic count of i32::MAX and no topics.
        // Without this allocator the crate's pre-allocation (206 GB) aborts the process.
        for version in [3i16, 9] {
            let mut b = BytesMut::new();
            b.put_i16(0);
            b.put_i16(version);
            b.put_i32(1);
            b.put_i16(-1);
            if version >= 9 {
                b.put_u8(0); // header tagged fields
                b.put_u8(0); // compact null transactional id
                b.put_i16(1);
                b.put_i32(1000);
                b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // varint u32::MAX
            } else {
                b.put_i16(-1);
                b.put_i16(1);
                b.put_i32(1000);
                b.put_i32(i32::MAX);
            }
            let r = spool_protocol::kafka::decode_request(b.freeze(), crate::kafka::KAFKA_APIS);
            assert!(r.is_err(), "v{version}: {r:?}");
        }
    }

    #[test]
    fn large_blocks_are_usable_grow_and_shrink() {
        let a = ReserveLargeAllocator;
        let big = Layout::from_size_align(RESERVE_ONLY_BYTES * 4, 8).unwrap();
        // SAFETY: non-zero layouts; every block is freed with the layout it was made with.
        unsafe {
            let p = a.alloc_zeroed(big);
            assert!(!p.is_null());
            assert_eq!(*p.add(12345), 0);
            *p.add(12345) = 7;
            let small = a.realloc(p, big, 64 * 1024);
            assert!(!small.is_null());
            assert_eq!(*small.add(12345), 7);
            let small_layout = Layout::from_size_align(64 * 1024, 8).unwrap();
            let again = a.realloc(small, small_layout, RESERVE_ONLY_BYTES + 1);
            assert_eq!(*again.add(12345), 7);
            a.dealloc(
                again,
                Layout::from_size_align(RESERVE_ONLY_BYTES + 1, 8).unwrap(),
            );
        }
    }
}
