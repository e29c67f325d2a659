//! Whether a piece of a segment file can be spliced without waiting for the disk: every page
//! in the page cache (`cachestat(2)`) and both ends filled (a one-byte `preadv2(RWF_NOWAIT)`):
//! syscalls that never wait for the disk. Unknown counts as cold (module docs of `net_io`).

use std::cell::Cell;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

thread_local! {
    /// Set once `cachestat` is found missing (ENOSYS) or refused (EPERM) on this thread.
    static NO_CACHESTAT: Cell<bool> = const { Cell::new(false) };
    /// Tests: treat every piece as cold, whatever the page cache holds.
    #[cfg(test)]
    pub(super) static FORCE_COLD: Cell<bool> = const { Cell::new(false) };
}

/// `struct cachestat_range` of `cachestat(2)` (include/uapi/linux/mman.h).
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` of `cachestat(2)`.
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// `cachestat`'s number: one table for every architecture since Linux 5.1's unification, not yet
/// in the `libc` crate for x86_64.
const SYS_CACHESTAT: libc::c_long = 451;

pub(super) fn page_bytes() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf takes no pointers and only reads process state.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if n > 0 {
            n as u64
        } else {
            4096
        }
    })
}

/// Pages of `[pos, pos + len)` (`len > 0`) in the page cache, and pages the range spans.
pub fn cached_pages(fd: RawFd, pos: u64, len: u64) -> io::Result<(u64, u64)> {
    let page = page_bytes();
    let last = pos
        .checked_add(len.max(1) - 1)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "range past u64"))?;
    let spanned = last / page - pos / page + 1;
    let range = CachestatRange { off: pos, len };
    let mut stat = Cachestat::default();
    // SAFETY: `fd` is open for the call (the caller holds its owner). The kernel reads one
    // `cachestat_range` (two u64, as `CachestatRange` is laid out by repr(C)) from `&range` and
    // writes one `cachestat` (five u64, as `Cachestat`) to `&mut stat`; both live on this stack
    // frame for the whole call, and the kernel keeps neither pointer after it returns.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd as libc::c_uint,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((stat.nr_cache, spanned))
}

/// Whether the byte at `pos` can be read without waiting: its page is cached *and* up to date.
/// `cachestat` also counts pages that readahead has inserted but not yet filled (they stay
/// locked until their read completes), and a splice of those waits for the disk; a one-byte
/// `preadv2(RWF_NOWAIT)` answers EAGAIN for them instead of waiting.
pub(super) fn readable_now(fd: RawFd, pos: u64) -> bool {
    let Ok(offset) = libc::off_t::try_from(pos) else {
        return false;
    };
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: `fd` is open for the call (the caller holds its owner); the kernel writes at most
    // `iov_len` = 1 byte to `iov_base`, which points to `byte` on this stack frame, and keeps
    // neither pointer after the call.
    let n = unsafe { libc::preadv2(fd, &iov, 1, offset, libc::RWF_NOWAIT) };
    n == 1
}

/// Whether the piece can be spliced without waiting for the disk: every page is in the page
/// cache (`cachestat`) and its first and last bytes are readable now (not still being read in —
/// readahead fills a window front to back, so a filled last page means the window is done, bar
/// bios completing out of order). Unknown counts as cold: the read path works for any file and
/// never blocks.
pub(super) fn is_cached(fd: RawFd, pos: u64, len: usize) -> bool {
    #[cfg(test)]
    if FORCE_COLD.with(Cell::get) {
        return false;
    }
    if len == 0 || NO_CACHESTAT.with(Cell::get) {
        return false;
    }
    match cached_pages(fd, pos, len as u64) {
        Ok((cached, spanned)) => {
            cached >= spanned && readable_now(fd, pos) && readable_now(fd, pos + len as u64 - 1)
        }
        Err(e) => {
            if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
                tracing::info!("cachestat unavailable ({e}): file ranges are read, not spliced");
                NO_CACHESTAT.with(|c| c.set(true));
            }
            false
        }
    }
}
