//! This core's O_DIRECT descriptors of segment files, kept from one response to the next.
//!
//! Why: a fetch response's file range carries a descriptor duplicated from the segment's own
//! (so the segment may be closed or deleted while the response is sent). Reading it with
//! O_DIRECT needs a second open file description, opened through `/proc/self/fd`
//! ([`super::direct_read`]). Opened per range, that was an OPENAT and a STATX (one of each
//! punted to io-wq, with its context switches) and a CLOSE per MiB read at catch-up speed: 1,331
//! of each per second at 1.5 GB/s (BENCHMARKS.md, 2026-12-07). Kept here under the file's
//! (device, inode), a range's lookup costs one `fstat` of the range's descriptor, a syscall that
//! never waits for the disk (the inode is in memory while the descriptor is open).
//!
//! Promises:
//! - At most [`DIRECT_FILES_MAX`] descriptors per core; the least recently used goes first.
//! - A file whose last name is gone (`st_nlink == 0`: retention, compaction or truncation
//!   deleted the segment) is never handed out from here. Its descriptor is dropped at its next
//!   lookup, or by the sweep within [`SWEEP_INTERVAL_MS`], so this cache holds a deleted
//!   segment's blocks at most that long. Responses in flight hold their own reference.
//! - An entry not looked up for [`IDLE_MS`] is dropped by the sweep too; the sweep stops when
//!   nothing is cached and starts again with the next entry.
//! - (device, inode) cannot name another file while an entry holds it: an inode stays
//!   allocated while a descriptor of it is open, so its number is not reused meanwhile.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::io::DmaFile;

/// Descriptors kept per core: a bound on open files, not a tuned figure (a core serving more
/// segments' cold ranges at once reopens some of them, as every range did before).
pub const DIRECT_FILES_MAX: usize = 64;

/// How often the sweep checks the kept descriptors for deleted or idle files.
pub const SWEEP_INTERVAL_MS: u64 = 1_000;

/// An entry not looked up for this long is dropped.
pub const IDLE_MS: u64 = 30_000;

/// A file's identity while one of its descriptors is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
}

pub(super) enum Lookup {
    /// This core's O_DIRECT descriptor of the file.
    Hit(Rc<DmaFile>),
    /// Not kept: open one and [`insert`] it under this identity.
    Miss(FileId),
    /// Deleted, or `fstat` failed: open one for this range only.
    Uncacheable,
}

struct Entry {
    id: FileId,
    file: Rc<DmaFile>,
    used: Instant,
}

#[derive(Default)]
struct Cache {
    entries: Vec<Entry>,
    sweeping: bool,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    /// Descriptors dropped by the sweep or a lookup because their file was deleted (read by
    /// the tests).
    static DROPPED_DELETED: Cell<u64> = const { Cell::new(0) };
}

/// (identity, link count) of the file behind `fd`.
fn stat(fd: RawFd) -> Option<(FileId, u64)> {
    // SAFETY: `libc::stat` is a C struct of integers, for which all-zero bytes are a value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `libc::stat` into `st`, which this frame owns, sized and aligned
    // for it; `fd` is only named to the kernel (a bad one fails with EBADF, and `rc` says so).
    let rc = unsafe { libc::fstat(fd, &mut st) };
    let id = FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    (rc == 0).then_some((id, st.st_nlink))
}

/// This core's O_DIRECT descriptor of the file behind `fd`, if kept and the file still has a
/// name.
pub(super) fn lookup(fd: RawFd) -> Lookup {
    let Some((id, links)) = stat(fd) else {
        return Lookup::Uncacheable;
    };
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let at = c.entries.iter().position(|e| e.id == id);
        if links == 0 {
            if let Some(at) = at {
                c.entries.swap_remove(at);
                DROPPED_DELETED.with(|d| d.set(d.get() + 1));
            }
            return Lookup::Uncacheable;
        }
        match at {
            Some(at) => {
                let e = &mut c.entries[at];
                e.used = Instant::now();
                Lookup::Hit(Rc::clone(&e.file))
            }
            None => Lookup::Miss(id),
        }
    })
}

/// Keeps `file` as this core's O_DIRECT descriptor of `id` (the first kept wins when two
/// responses opened one at once), dropping the least recently used beyond the bound.
pub(super) fn insert(id: FileId, file: Rc<DmaFile>) {
    let start_sweep = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.entries.iter().any(|e| e.id == id) {
            return false;
        }
        if c.entries.len() >= DIRECT_FILES_MAX {
            if let Some((oldest, _)) = c.entries.iter().enumerate().min_by_key(|(_, e)| e.used) {
                c.entries.swap_remove(oldest);
            }
        }
        c.entries.push(Entry {
            id,
            file,
            used: Instant::now(),
        });
        debug_assert!(c.entries.len() <= DIRECT_FILES_MAX);
        !std::mem::replace(&mut c.sweeping, true)
    });
    if start_sweep {
        glommio::spawn_local(sweep_while_kept()).detach();
    }
}

/// Every [`SWEEP_INTERVAL_MS`], drops deleted and idle files' descriptors; ends when none is
/// kept.
async fn sweep_while_kept() {
    loop {
        glommio::timer::sleep(Duration::from_millis(SWEEP_INTERVAL_MS)).await;
        if sweep(Instant::now()) == 0 {
            CACHE.with(|c| c.borrow_mut().sweeping = false);
            return;
        }
    }
}

/// Drops the descriptors of deleted files and of files idle since before `now - IDLE_MS`;
/// returns how many are kept.
fn sweep(now: Instant) -> usize {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.entries.retain(|e| {
            let deleted = stat(e.file.as_raw_fd()).is_none_or(|(_, links)| links == 0);
            if deleted {
                DROPPED_DELETED.with(|d| d.set(d.get() + 1));
            }
            let idle = now.saturating_duration_since(e.used) >= Duration::from_millis(IDLE_MS);
            !deleted && !idle
        });
        c.entries.len()
    })
}

/// Closes every kept descriptor: for a core's shutdown, while its reactor still runs (glommio
/// closes a dropped file through the reactor, so one dropped after the executor ended would
/// stay open). A response still holding one closes it when done with it.
pub async fn close_all() {
    let entries = CACHE.with(|c| std::mem::take(&mut c.borrow_mut().entries));
    for e in entries {
        if let Ok(f) = Rc::try_unwrap(e.file) {
            if let Err(err) = f.close().await {
                tracing::debug!("closing a kept O_DIRECT descriptor: {err}");
            }
        }
    }
}

/// Tests: descriptors kept on this core.
#[cfg(test)]
pub(super) fn kept() -> usize {
    CACHE.with(|c| c.borrow().entries.len())
}

/// Tests: descriptors dropped so far on this core because their file was deleted.
#[cfg(test)]
pub(super) fn dropped_deleted() -> u64 {
    DROPPED_DELETED.with(Cell::get)
}

/// Tests: runs the sweep now, as if `ahead` had passed.
#[cfg(test)]
pub(super) fn sweep_now(ahead: Duration) -> usize {
    sweep(Instant::now() + ahead)
}
