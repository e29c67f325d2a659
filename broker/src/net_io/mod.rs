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

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use glommio::io::BufferedFile;
use glommio::net::TcpStream;

use crate::requests::FetchChunk;

mod cold_ranges;
mod direct_files;
mod direct_read;
pub use cold_ranges::ColdRanges;
pub use direct_files::close_all as close_kept_direct_files;
pub use direct_read::DIRECT_READ_AHEAD_PIECES;

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

/// What this core's connections sent from files: pieces spliced from the page cache, pieces
/// that were cold (sent the [`ColdRanges`] way; with `splice`, nothing is checked and every
/// piece counts as cached), and the wall time the reactor spent inside file → pipe splices —
/// time in which no other task of the core ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileSendStats {
    pub cached_pieces: u64,
    pub cached_bytes: u64,
    pub cold_pieces: u64,
    pub cold_bytes: u64,
    pub reactor_splice_ns: u64,
    /// The longest single file → pipe splice on the reactor.
    pub reactor_splice_max_ns: u64,
    /// Wall time cold pieces took to come off the disk (io_uring reads, or splices on the
    /// blocking thread), while the reactor ran other tasks; and the longest one.
    pub cold_wait_ns: u64,
    pub cold_wait_max_ns: u64,
}

impl FileSendStats {
    fn add(&mut self, other: &Self) {
        self.cached_pieces += other.cached_pieces;
        self.cached_bytes += other.cached_bytes;
        self.cold_pieces += other.cold_pieces;
        self.cold_bytes += other.cold_bytes;
        self.reactor_splice_ns += other.reactor_splice_ns;
        self.reactor_splice_max_ns = self.reactor_splice_max_ns.max(other.reactor_splice_max_ns);
        self.cold_wait_ns += other.cold_wait_ns;
        self.cold_wait_max_ns = self.cold_wait_max_ns.max(other.cold_wait_max_ns);
    }
}

/// The probe that owns those counters: totals since start, and the interval logged at debug
/// level (target `spool_broker::net_io`) at most once per [`PROBE_LOG_INTERVAL`].
#[derive(Default)]
struct FileSendProbe {
    total: FileSendStats,
    interval: FileSendStats,
    interval_from: Option<std::time::Instant>,
}

const PROBE_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    static PROBE: RefCell<FileSendProbe> = RefCell::new(FileSendProbe::default());
    /// Set once `cachestat` is found missing (ENOSYS) or refused (EPERM) on this thread.
    static NO_CACHESTAT: Cell<bool> = const { Cell::new(false) };
    /// Tests: treat every piece as cold, whatever the page cache holds.
    #[cfg(test)]
    static FORCE_COLD: Cell<bool> = const { Cell::new(false) };
}

/// This core's totals (executors are threads, so each core has its own).
pub fn file_send_stats() -> FileSendStats {
    PROBE.with(|p| p.borrow().total)
}

fn record(delta: FileSendStats) {
    PROBE.with(|p| {
        let mut p = p.borrow_mut();
        p.total.add(&delta);
        p.interval.add(&delta);
        p.interval_from.get_or_insert_with(std::time::Instant::now);
    });
}

fn count(cold: bool, bytes: usize) {
    let mut d = FileSendStats::default();
    if cold {
        d.cold_pieces = 1;
        d.cold_bytes = bytes as u64;
    } else {
        d.cached_pieces = 1;
        d.cached_bytes = bytes as u64;
    }
    record(d);
}

fn nanos(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

fn note_reactor_splice(elapsed: std::time::Duration) {
    let ns = nanos(elapsed);
    record(FileSendStats {
        reactor_splice_ns: ns,
        reactor_splice_max_ns: ns,
        ..FileSendStats::default()
    });
}

fn note_cold_wait(elapsed: std::time::Duration) {
    let ns = nanos(elapsed);
    record(FileSendStats {
        cold_wait_ns: ns,
        cold_wait_max_ns: ns,
        ..FileSendStats::default()
    });
}

/// Logs and resets the interval once it is [`PROBE_LOG_INTERVAL`] old.
fn maybe_log_interval() {
    PROBE.with(|p| {
        let mut p = p.borrow_mut();
        let Some(from) = p.interval_from else { return };
        let elapsed = from.elapsed();
        if elapsed < PROBE_LOG_INTERVAL {
            return;
        }
        let i = std::mem::take(&mut p.interval);
        p.interval_from = None;
        tracing::debug!(
            interval_ms = elapsed.as_millis() as u64,
            cached_pieces = i.cached_pieces,
            cached_bytes = i.cached_bytes,
            cold_pieces = i.cold_pieces,
            cold_bytes = i.cold_bytes,
            reactor_splice_us = i.reactor_splice_ns / 1000,
            reactor_splice_max_us = i.reactor_splice_max_ns / 1000,
            cold_wait_us = i.cold_wait_ns / 1000,
            cold_wait_max_us = i.cold_wait_max_ns / 1000,
            "file sends"
        );
    });
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

fn page_bytes() -> u64 {
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
fn readable_now(fd: RawFd, pos: u64) -> bool {
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
fn is_cached(fd: RawFd, pos: u64, len: usize) -> bool {
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

/// file → pipe on glommio's blocking thread. The closure owns duplicates of both descriptors, so
/// it never uses a number this task might close (and the process reuse) while it runs — even if
/// the connection's future is dropped mid-wait.
async fn splice_to_pipe_blocking(
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
async fn splice_piece(
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

#[cfg(test)]
mod tests;
