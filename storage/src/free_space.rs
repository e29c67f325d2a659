//! How much room a preallocation step may take from the filesystem a segment lives on.
//!
//! Owns one rule: a segment's next fallocate step (`preallocate_bytes`, 32 MiB by default) is
//! taken only while it is at most [`STEP_SHARE_OF_FREE`] of the space still available; below that
//! the writer reserves exactly what the append needs. Why: the broker's data dir also holds the
//! metadata log (`__raft/`, plain writes), and every partition's active segment preallocates. On a
//! nearly full or small disk, whole steps for many partitions would take every free block as
//! reserved-but-unwritten space — the fault harness saw a broker restarted after its disk was
//! freed fill it again within a second with 32 MiB steps, then stop because its metadata log could
//! not append (issue 15). Reserving exactly near the end still uses all the space for data, but no
//! faster than data arrives, so what is free stays free for whoever needs it next.
//!
//! `fstatvfs` reads the filesystem's in-memory counters (no disk I/O); it runs once per step, not
//! per append.

use std::os::fd::RawFd;

/// A whole step may use at most 1/8 of the available bytes.
pub const STEP_SHARE_OF_FREE: u64 = 8;

/// Whether a preallocation of `step_bytes` may be taken when `available_bytes` are free.
pub fn step_fits(step_bytes: u64, available_bytes: u64) -> bool {
    step_bytes <= available_bytes / STEP_SHARE_OF_FREE
}

/// Bytes available to this (unprivileged-equivalent) process on the filesystem holding `fd`.
pub fn available_bytes(fd: RawFd) -> std::io::Result<u64> {
    // SAFETY: `st` is a plain C struct that fstatvfs fills in completely on success; it is read
    // only after checking the return value, and `fd` is borrowed for the duration of the call.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::fstatvfs(fd, &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        st
    };
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_step_fits_only_within_its_share_of_what_is_free() {
        let step = 32 << 20;
        assert!(step_fits(step, 8 * step));
        assert!(step_fits(step, 100 * step));
        assert!(!step_fits(step, 8 * step - 1));
        assert!(
            !step_fits(step, 108 << 20),
            "a 128 MiB disk takes no whole steps"
        );
        assert!(!step_fits(step, 0));
    }

    #[test]
    fn available_bytes_reads_the_filesystem_of_a_file() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let f = std::fs::File::create(dir.path().join("f")).expect("a file");
        let avail = available_bytes(f.as_raw_fd()).expect("fstatvfs");
        assert!(avail > 0, "the test machine's temp dir has space");
        assert!(available_bytes(-1).is_err(), "a bad descriptor is an error");
    }
}
