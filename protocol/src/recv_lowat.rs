//! A socket's receive low-water mark (`SO_RCVLOWAT`) while the rest of a large frame is on its
//! way: the socket reports itself readable only once that many bytes have arrived, so the reader
//! wakes, and reads, a few times per frame instead of once per burst the sender's TCP stack
//! happened to deliver. Used by the broker for request frames (`frame_io.rs`) and by the glommio
//! clients for response frames (`client/glommio_io/net.rs`).
//!
//! Why: a frame's body is read with one `recv` after another; glommio arms a readiness poll
//! after every partial read, and each completion of that poll is one more turn of the
//! executor's loop (its timers re-armed and cancelled, its rings entered). Over loopback the
//! sender pays too: its TCP stack wakes the reader for every segment it queues. Produce frames
//! of about 1 MB took about six `recv`s per MB; with a mark of up to 1 MiB, 3.5, and the
//! executor's io_uring requests fell by a third (BENCHMARKS.md, 2026-12-07 19:40 UTC).
//!
//! Promises:
//! - The mark never exceeds what is still to come of the frame being read, so the bytes it
//!   waits for are bytes the sender has committed to sending; a frame that stops arriving is
//!   ended by the reader's own timeout, as before. (The kernel also caps the mark at half the
//!   largest receive buffer and wakes the reader when the buffer fills.) A caller reading
//!   through a buffer must count what the buffer already holds as arrived.
//! - Between frames the mark is 1 (the socket's default): the caller asks for
//!   `expect(0)` when a frame is whole, and a [`RecvLowat::new`] also puts it back when dropped
//!   early (an error, a timeout, a cancelled read), so the next frame's prefix, however short,
//!   is read as soon as it arrives.
//! - Where `setsockopt` refuses, reads go on without a mark (nothing depends on it but cost).
//!
//! Why the mark must follow the frame, even for blocking reads: the kernel wakes a reader
//! sleeping in `recv` only once the mark's worth of bytes has arrived (or the connection
//! ends), whatever length that `recv` asked for. A fixed 1 MiB mark on the blocking clients'
//! reader threads (tried, commit 70b7773, reverted) left a 4-byte read of a 108-byte answer
//! asleep until the broker closed the connection: `spool topic create` timed out.

use std::os::fd::RawFd;

/// Frames whose remaining body is shorter than this are read without a mark: the setsockopt
/// calls would cost more than the wakes they save.
pub const LOWAT_MIN_BYTES: usize = 64 * 1024;

/// The most a mark asks for at once. The kernel grows the socket's receive buffer to hold the
/// mark (within `net.ipv4.tcp_rmem`'s maximum, whose half also caps the mark), so this is also
/// what one connection may ask of kernel memory beyond the default. With 1 MiB a produce run took
/// 3.5 `recv`s per MB, with 256 KiB 4.7, without a mark 6.
pub const LOWAT_MAX_BYTES: usize = 1024 * 1024;

/// The mark for a socket while one frame is read; see the module docs.
pub struct RecvLowat {
    fd: RawFd,
    /// The mark last set (1: the socket's default).
    current: usize,
    /// `setsockopt` refused once: leave the socket alone.
    disabled: bool,
    /// Put the default back when dropped: only where the socket is known to outlive this value.
    reset_on_drop: bool,
}

impl RecvLowat {
    /// For a read that borrows the socket's owner, so the socket outlives this value: the
    /// default mark comes back when it drops, whatever ended the read.
    pub fn new(fd: RawFd) -> Self {
        Self {
            fd,
            current: 1,
            disabled: false,
            reset_on_drop: true,
        }
    }

    /// For a reader that may be dropped together with its socket (a cancelled reader task):
    /// nothing is done on drop, since the descriptor may be closed by then (and its number
    /// reused). The caller puts the default back with `expect(0)` after every whole frame.
    pub fn without_reset_on_drop(fd: RawFd) -> Self {
        Self {
            reset_on_drop: false,
            ..Self::new(fd)
        }
    }

    /// Before a read that may wait, with `remaining_bytes` of the frame still to come.
    pub fn expect(&mut self, remaining_bytes: usize) {
        self.set(target_for(remaining_bytes));
    }

    fn set(&mut self, mark: usize) {
        if self.disabled || mark == self.current {
            return;
        }
        debug_assert!((1..=LOWAT_MAX_BYTES).contains(&mark));
        let value = libc::c_int::try_from(mark).unwrap_or(1);
        // SAFETY: `self.fd` is the socket being read, open while this value is used (`new`: the
        // read borrows the socket's owner; `without_reset_on_drop`: only called from the reader
        // that holds the socket, never from `drop`); `value` is a live `c_int` on the stack and
        // the length passed is exactly its size, which is what SO_RCVLOWAT reads.
        let rc = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                std::ptr::addr_of!(value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            self.current = mark;
        } else {
            self.disabled = true;
        }
    }
}

impl Drop for RecvLowat {
    fn drop(&mut self) {
        if self.reset_on_drop {
            self.set(1);
        }
    }
}

/// The socket's mark now (`getsockopt`): for tests and diagnostics.
pub fn current_mark(fd: RawFd) -> std::io::Result<usize> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is the caller's open socket; `value` and `len` are live locals of the sizes
    // getsockopt writes, and `len` says how much room `value` has.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            std::ptr::addr_of_mut!(value).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(usize::try_from(value).unwrap_or(0))
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The mark for `remaining_bytes` still to come: 1 below [`LOWAT_MIN_BYTES`], else the
/// remainder capped at [`LOWAT_MAX_BYTES`] (never more than what is still to come).
pub fn target_for(remaining_bytes: usize) -> usize {
    if remaining_bytes < LOWAT_MIN_BYTES {
        1
    } else {
        remaining_bytes.min(LOWAT_MAX_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn the_mark_never_asks_for_more_than_is_still_to_come() {
        assert_eq!(target_for(0), 1);
        assert_eq!(target_for(LOWAT_MIN_BYTES - 1), 1);
        assert_eq!(target_for(LOWAT_MIN_BYTES), LOWAT_MIN_BYTES);
        assert_eq!(target_for(LOWAT_MAX_BYTES + 1), LOWAT_MAX_BYTES);
        for remaining in [1, 4096, 70_000, 200_000, 300_000, 5 << 20] {
            let t = target_for(remaining);
            assert!(t == 1 || t <= remaining, "{remaining} -> {t}");
        }
    }

    #[test]
    fn the_socket_gets_its_default_back_when_the_frame_read_ends() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let fd = server.as_raw_fd();
        {
            let mut mark = RecvLowat::new(fd);
            mark.expect(1 << 20);
            assert_eq!(current_mark(fd).unwrap(), LOWAT_MAX_BYTES);
            mark.expect(100_000);
            assert_eq!(current_mark(fd).unwrap(), 100_000);
            // Dropped mid-frame (an error, a timeout): the default comes back.
        }
        assert_eq!(current_mark(fd).unwrap(), 1);
        // And a short message after it is read at once.
        client.write_all(b"next").unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"next");
    }
}
