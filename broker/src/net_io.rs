//! Socket plumbing for one connection: read and write halves over one glommio `TcpStream`
//! (without a lock: the halves share it through an `Rc<RefCell<_>>` borrowed only inside a poll),
//! and sending a response whose payload mixes memory and segment-file ranges.
//!
//! File ranges go out with splice (file → pipe → socket), zero-copy from the page cache. The
//! socket is non-blocking: when it cannot take the rest, what is already in the pipe is read back
//! and written through the async half, so a slow client never stalls the core.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;

use crate::requests::FetchChunk;

pub struct Half(Rc<RefCell<TcpStream>>);

pub fn split(stream: TcpStream) -> (Half, Half, RawFd) {
    let fd = stream.as_raw_fd();
    let rc = Rc::new(RefCell::new(stream));
    (Half(Rc::clone(&rc)), Half(rc), fd)
}

impl AsyncRead for Half {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_read(cx, buf)
    }
}

impl AsyncWrite for Half {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.borrow_mut()).poll_close(cx)
    }
}

/// A pipe for splicing, made once per connection.
pub struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
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

fn splice(
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

/// Writes the chunks in order: memory with the async writer, file ranges with splice.
pub async fn write_chunks(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &mut Option<SplicePipe>,
    head: &Bytes,
    chunks: Vec<FetchChunk>,
) -> io::Result<()> {
    w.write_all(head).await?;
    for chunk in chunks {
        match chunk {
            FetchChunk::Memory(b) => w.write_all(&b).await?,
            FetchChunk::File { fd, position, len } => {
                if pipe.is_none() {
                    *pipe = Some(SplicePipe::new()?);
                }
                let Some(p) = pipe.as_ref() else { continue };
                send_file_range(w, socket_fd, p, &fd, position, len).await?;
            }
        }
    }
    w.flush().await
}

async fn send_file_range(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &SplicePipe,
    file: &OwnedFd,
    position: u64,
    len: u64,
) -> io::Result<()> {
    let mut off = position as i64;
    let mut left = len as usize;
    while left > 0 {
        // file → pipe: a page-cache read (blocking only on a cache miss).
        let want = left.min(pipe.capacity);
        let n = splice(
            file.as_raw_fd(),
            Some(&mut off),
            pipe.write.as_raw_fd(),
            want,
            libc::SPLICE_F_MOVE,
        )?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file shorter than its index",
            ));
        }
        left -= n;
        // pipe → socket, without blocking the core.
        let mut in_pipe = n;
        while in_pipe > 0 {
            let flags = libc::SPLICE_F_MOVE
                | libc::SPLICE_F_NONBLOCK
                | if left > 0 { libc::SPLICE_F_MORE } else { 0 };
            match splice(pipe.read.as_raw_fd(), None, socket_fd, in_pipe, flags) {
                Ok(m) => in_pipe -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The socket is full: drain the pipe into memory and let the async writer
                    // wait for the client.
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
                        if r <= 0 {
                            return Err(io::Error::last_os_error());
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
