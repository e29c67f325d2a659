//! Socket plumbing for one connection: read and write halves over one glommio `TcpStream`
//! (without a lock: the halves share it through an `Rc<RefCell<_>>` borrowed only inside a poll),
//! and sending a response whose payload mixes memory and segment-file ranges.
//!
//! A file range goes out in pieces of at most [`PIECE_BYTES_MAX`]. Before each piece,
//! `cachestat(2)` asks the page cache whether it holds every page of the piece, and a one-byte
//! `preadv2(RWF_NOWAIT)` at each end whether those pages are filled yet (readahead inserts pages
//! before their read completes): three syscalls that never wait for the disk.
//! - **Cached:** splice, file → pipe → socket, zero-copy. The file side only takes references to
//!   filled pages, so it does not wait for the disk.
//! - **Cold** (a page missing or still being read): a splice would wait for the disk inside the
//!   syscall, on this core's only thread, and every partition and connection of the core would
//!   wait with it. By default (`direct`) the piece is read with O_DIRECT through io_uring,
//!   bypassing the page cache, several pieces of a response at once, and then written: see
//!   [`direct_read`] for why and how (the first touch of freshly read page-cache pages cost a
//!   catch-up consumer most of its CPU here). The `read` way, the default before 2026-12-06,
//!   stays selectable: it reads the piece with glommio's buffered `read_at` — io_uring: the
//!   kernel completes the read asynchronously (and fills the page cache and starts readahead, as
//!   the splice would have) while the reactor runs other tasks — into one buffer, which the
//!   async half then writes. At most [`COLD_READS_IN_FLIGHT_MAX`] such reads are in flight per
//!   core. Memory: one buffer of at most [`PIECE_BYTES_MAX`] per connection at a time (the
//!   connection's writer sends its responses one after another), whatever the fetch's
//!   `max_bytes`, charged to the core's response budget before it is read
//!   ([`crate::response_memory`]; a piece that does not fit waits).
//!
//! Why this and not the alternatives (BENCHMARKS.md, "Fetch of cold segment ranges", measured
//! with `loadgen/fetch_bench.sh`): splicing cold pieces on the reactor (the behaviour before)
//! held the core 4–18× longer per GB inside file splices, up to 11 ms per splice; splicing them
//! on glommio's blocking thread also keeps the reactor free, but that pool is one thread per
//! executor, shared with storage's renames, removals, truncations and partition opens, so a
//! core's cold pieces queue behind each other and behind those (with 16 partitions they waited
//! about twice as long as io_uring reads). Throughput did not separate the two on this machine.
//!
//! Without `cachestat` (Linux < 6.5, or a seccomp filter refusing it) every piece takes the read
//! path: it never stalls, and costs one copy. Left to chance: a page evicted between the check
//! and the splice, or a middle page of the piece still being read while both ends are filled
//! (bios completing out of order), makes that one splice wait; the reactor's time in file splices
//! is measured ([`FileSendStats`], logged at debug level) so such waits show.
//!
//! The socket is non-blocking: when it cannot take the rest, what is already in the pipe is read
//! back and written through the async half, so a slow client never stalls the core either.
//!
//! `SPOOL_FETCH_COLD` (read once, at the first file range; for benchmarks) picks how cold pieces
//! are sent: `direct` (the default), `read` (above), `blocking` (splice on glommio's blocking
//! thread) or `splice` (no check: splice everything on the reactor, as before cold ranges were handled).
//! `--fetch-copy` bypasses all of this: its fetches carry no file ranges.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::io::BufferedFile;
use glommio::net::TcpStream;

use crate::requests::FetchChunk;

mod cold_ranges;
mod direct_files;
mod direct_read;
mod page_cache;
mod send_stats;
mod splice;
pub use cold_ranges::ColdRanges;
pub use direct_files::close_all as close_kept_direct_files;
pub use direct_read::DIRECT_READ_AHEAD_PIECES;
pub use page_cache::cached_pages;
use page_cache::is_cached;
#[cfg(test)]
use page_cache::{page_bytes, readable_now, FORCE_COLD};
use send_stats::{count, maybe_log_interval, note_cold_wait};
pub use send_stats::{file_send_stats, FileSendStats};
use splice::splice_piece;
pub use splice::SplicePipe;

/// The most of a file range checked, and sent, in one go: one residency check per piece, and
/// the bound on the buffer a cold piece is read into.
pub const PIECE_BYTES_MAX: usize = 1 << 20;

/// Cold pieces read at once on one core: a named bound on the disk reads the fetch path keeps
/// in flight. A bound, not a tuned figure: 16 is the deepest queue the fetch bench's fio limit
/// uses, and fio's sequential reads on this disk gained 0.8–1.4× from depth 1 to 16. A read past
/// it waits its turn without holding the reactor.
pub const COLD_READS_IN_FLIGHT_MAX: u64 = 16;

thread_local! {
    static COLD_READS: Rc<glommio::sync::Semaphore> =
        Rc::new(glommio::sync::Semaphore::new(COLD_READS_IN_FLIGHT_MAX));
}

pub struct Half(Rc<RefCell<TcpStream>>);

pub fn split(stream: TcpStream) -> (Half, Half, RawFd) {
    let fd = stream.as_raw_fd();
    let rc = Rc::new(RefCell::new(stream));
    (Half(Rc::clone(&rc)), Half(rc), fd)
}

impl Half {
    /// The connection's socket, for socket options ([`crate::recv_lowat`]).
    pub fn raw_fd(&self) -> RawFd {
        self.0.borrow().as_raw_fd()
    }
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

/// Writes the chunks in order: memory with the async writer, file ranges as the module doc says.
pub async fn write_chunks(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &mut Option<SplicePipe>,
    head: &Bytes,
    chunks: Vec<FetchChunk>,
) -> io::Result<()> {
    // Resolved only for responses that carry file ranges (so `--fetch-copy` never reads it).
    let cold = if chunks.iter().any(|c| matches!(c, FetchChunk::File { .. })) {
        ColdRanges::current()
    } else {
        ColdRanges::Read
    };
    write_chunks_with(w, socket_fd, pipe, head, chunks, cold).await
}

async fn write_chunks_with(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &mut Option<SplicePipe>,
    head: &Bytes,
    chunks: Vec<FetchChunk>,
    cold: ColdRanges,
) -> io::Result<()> {
    if cold == ColdRanges::Direct {
        let sent = direct_read::write_chunks(w, socket_fd, pipe, head, chunks).await;
        maybe_log_interval();
        sent?;
        return w.flush().await;
    }
    w.write_all(head).await?;
    for chunk in chunks {
        match chunk {
            FetchChunk::Memory(b) => w.write_all(&b).await?,
            FetchChunk::File { fd, position, len } => {
                if pipe.is_none() {
                    *pipe = Some(SplicePipe::new()?);
                }
                let Some(p) = pipe.as_ref() else { continue };
                let mut file = RangeFile::new(fd);
                let sent = send_file_range(w, socket_fd, p, &mut file, position, len, cold).await;
                let closed = file.close().await;
                sent?;
                closed?;
            }
        }
    }
    maybe_log_interval();
    w.flush().await
}

/// A file range's descriptor: a plain one while the range is only spliced (closed with close(2),
/// as before), handed to glommio at the first cold piece read through io_uring (glommio then
/// owns it and closes it through the ring).
struct RangeFile {
    raw: RawFd,
    plain: Option<OwnedFd>,
    glommio: Option<BufferedFile>,
}

impl RangeFile {
    fn new(fd: OwnedFd) -> Self {
        Self {
            raw: fd.as_raw_fd(),
            plain: Some(fd),
            glommio: None,
        }
    }

    fn glommio(&mut self) -> io::Result<&BufferedFile> {
        if self.glommio.is_none() {
            let fd = self
                .plain
                .take()
                .ok_or_else(|| io::Error::other("range file closed"))?;
            // SAFETY: `into_raw_fd` gives up the OwnedFd's ownership, so the BufferedFile is the
            // descriptor's only owner and closes it exactly once (in `close`, or on drop).
            self.glommio = Some(unsafe { BufferedFile::from_raw_fd(fd.into_raw_fd()) });
        }
        self.glommio
            .as_ref()
            .ok_or_else(|| io::Error::other("range file closed"))
    }

    async fn close(self) -> io::Result<()> {
        drop(self.plain);
        match self.glommio {
            Some(f) => f.close().await.map_err(io::Error::from),
            None => Ok(()),
        }
    }
}

fn short_file() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "segment file shorter than its index",
    )
}

async fn send_file_range(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &SplicePipe,
    file: &mut RangeFile,
    position: u64,
    len: u64,
    cold: ColdRanges,
) -> io::Result<()> {
    let end = position
        .checked_add(len)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file range past u64"))?;
    let fd = file.raw;
    let mut pos = position;
    while pos < end {
        let piece = (end - pos).min(PIECE_BYTES_MAX as u64) as usize;
        let more = pos + (piece as u64) < end;
        if cold == ColdRanges::Splice || is_cached(fd, pos, piece) {
            splice_piece(w, socket_fd, pipe, fd, pos, piece, more, false).await?;
            count(false, piece);
        } else {
            match cold {
                // `Direct` responses go through `direct_read::write_chunks`, not here.
                ColdRanges::Direct | ColdRanges::Read => {
                    read_piece(w, file.glommio()?, pos, piece).await?
                }
                ColdRanges::BlockingSplice | ColdRanges::Splice => {
                    splice_piece(w, socket_fd, pipe, fd, pos, piece, more, true).await?
                }
            }
            count(true, piece);
        }
        pos += piece as u64;
    }
    Ok(())
}

/// A cold piece: read through io_uring into one buffer (at most `piece` ≤ [`PIECE_BYTES_MAX`]
/// bytes), then written through the async half.
async fn read_piece(w: &mut Half, file: &BufferedFile, pos: u64, piece: usize) -> io::Result<()> {
    // Charged before the buffer exists, given back once it is written (`response_memory`);
    // taken before the read turn, so a wait for memory holds no turn.
    let _charge = crate::response_memory::charge(piece).await?;
    let turns = COLD_READS.with(Rc::clone);
    let end = pos + piece as u64;
    let mut at = pos;
    while at < end {
        let started = std::time::Instant::now();
        // The turn covers the read only, not the write: a slow client does not hold it.
        let turn = turns
            .acquire_static_permit(1)
            .await
            .map_err(io::Error::from)?;
        let got = file
            .read_at(at, (end - at) as usize)
            .await
            .map_err(io::Error::from)?;
        drop(turn);
        note_cold_wait(started.elapsed());
        if got.is_empty() {
            return Err(short_file());
        }
        w.write_all(&got).await?;
        at += got.len() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
