//! Splicing a cached piece of a segment file to the socket, file → pipe → socket, zero-copy,
//! without ever blocking the core on the socket: when it cannot take the rest, what is in the
//! pipe is read back and written through the async half. The file side runs on the reactor for
//! a checked (cached) piece, or on glommio's blocking thread for the `blocking` way.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use futures_lite::AsyncWriteExt;

use super::send_stats::{note_cold_wait, note_reactor_splice};
use super::{short_file, Half};

/// A pipe for splicing, made once per connection.
pub struct SplicePipe {
    pub(super) read: OwnedFd,
    pub(super) write: OwnedFd,
    pub(super) capacity: usize,
}

impl SplicePipe {
    pub fn new() -> io::Result<Self> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own; we take ownership of both.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created by pipe2 and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A bigger pipe moves more per splice; fall back to the default size if refused.
        // SAFETY: fcntl on a descriptor we own.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        let capacity = if size > 0 { size as usize } else { 64 * 1024 };
        Ok(Self {
            read,
            write,
            capacity,
        })
    }
}

pub(super) fn splice(
    from: RawFd,
    from_off: Option<&mut i64>,
    to: RawFd,
    len: usize,
    flags: u32,
) -> io::Result<usize> {
    let off_ptr = from_off.map_or(std::ptr::null_mut(), |o| o as *mut i64);
    // SAFETY: valid descriptors for the call's duration; the offset pointer is null or points to
    // a live i64 owned by the caller; the kernel reads/writes nothing else of ours.
    let n = unsafe { libc::splice(from, off_ptr, to, std::ptr::null_mut(), len, flags) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// file → pipe on glommio's blocking thread. The closure owns duplicates of both descriptors, so
/// it never uses a number this task might close (and the process reuse) while it runs — even if
/// the connection's future is dropped mid-wait.
pub(super) async fn splice_to_pipe_blocking(
    fd: RawFd,
    pos: u64,
    pipe: &SplicePipe,
    want: usize,
) -> io::Result<usize> {
    // SAFETY: `fd` belongs to the RangeFile the caller holds for this whole call.
    let file = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
    let pipe_w = pipe.write.try_clone()?;
    spool_storage::run_blocking(move || {
        let mut off = pos as i64;
        splice(
            file.as_raw_fd(),
            Some(&mut off),
            pipe_w.as_raw_fd(),
            want,
            libc::SPLICE_F_MOVE,
        )
    })
    .await
}

/// Splices one piece: file → pipe (on the reactor, or on the blocking thread when `off_reactor`),
/// then pipe → socket without blocking. `more`: bytes of this range follow the piece.
#[allow(clippy::too_many_arguments)]
pub(super) async fn splice_piece(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &SplicePipe,
    fd: RawFd,
    pos: u64,
    piece: usize,
    more: bool,
    off_reactor: bool,
) -> io::Result<()> {
    let mut off = pos as i64;
    let mut left = piece;
    while left > 0 {
        // file → pipe: only references to cached pages on the reactor path (the piece was
        // checked), a disk read on the blocking thread's.
        let want = left.min(pipe.capacity);
        let n = if off_reactor {
            let started = std::time::Instant::now();
            let n = splice_to_pipe_blocking(fd, off as u64, pipe, want).await?;
            note_cold_wait(started.elapsed());
            off += n as i64;
            n
        } else {
            let started = std::time::Instant::now();
            let n = splice(
                fd,
                Some(&mut off),
                pipe.write.as_raw_fd(),
                want,
                libc::SPLICE_F_MOVE,
            );
            note_reactor_splice(started.elapsed());
            n?
        };
        if n == 0 {
            return Err(short_file());
        }
        left -= n;
        // pipe → socket, without blocking the core.
        let mut in_pipe = n;
        while in_pipe > 0 {
            let flags = libc::SPLICE_F_MOVE
                | libc::SPLICE_F_NONBLOCK
                | if left > 0 || more {
                    libc::SPLICE_F_MORE
                } else {
                    0
                };
            match splice(pipe.read.as_raw_fd(), None, socket_fd, in_pipe, flags) {
                Ok(m) => in_pipe -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The socket is full: drain the pipe into memory (at most the pipe's
                    // capacity, charged to the response budget first) and let the async
                    // writer wait for the client.
                    let _charge = crate::response_memory::charge(in_pipe).await?;
                    let mut buf = vec![0u8; in_pipe];
                    let mut got = 0;
                    while got < in_pipe {
                        // SAFETY: reading into a buffer we own, within its length.
                        let r = unsafe {
                            libc::read(
                                pipe.read.as_raw_fd(),
                                buf[got..].as_mut_ptr().cast(),
                                in_pipe - got,
                            )
                        };
                        if r < 0 {
                            return Err(io::Error::last_os_error());
                        }
                        if r == 0 {
                            return Err(io::Error::other("splice pipe emptied under us"));
                        }
                        got += r as usize;
                    }
                    w.write_all(&buf).await?;
                    in_pipe = 0;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
