//! Responses whose cold pieces are read with O_DIRECT ([`ColdRanges::Direct`], the default):
//! from the disk into aligned buffers of this process, bypassing the page cache, several pieces
//! of a response at once, each then written to the socket in order.
//!
//! Why not through the page cache (the `read` way): a buffered read of pages that are not cached
//! fills fresh page-cache pages (and starts readahead into more), and the first CPU touch of a
//! freshly filled page-cache page is the expensive step on the machine this was measured on. There
//! `dd` of a 2 GiB file just dropped from the cache spent 3.4 s of system time in `_copy_to_iter`
//! against 0.17 s for the same file cached, while an O_DIRECT read of it into one reused buffer,
//! then read byte by byte, cost 0.29 s (BENCHMARKS.md, "catch-up consume from the disk").
//! Whoever touches those pages first pays: the broker's copy on the `read` way, or the
//! consumer's `recv` when the broker splices readahead pages (a catch-up consumer spent 78 % of
//! its CPU in `_copy_to_iter` receiving them). An O_DIRECT read lands in memory reused piece
//! after piece, and the socket write copies it into socket buffers that are recycled too. It
//! also keeps a catch-up reader from evicting what other readers have in the page cache.
//!
//! Why several at once: without readahead each cold piece is one read the disk serves while
//! nothing else of the response moves, and this disk reads 1 MiB pieces 2.7× faster four at a
//! time than one at a time (fio, same benchmark entry). So up to [`DIRECT_READ_AHEAD_PIECES`]
//! pieces of a response are being read while the writer sends the earliest; the core's bound on
//! cold reads in flight ([`super::COLD_READS_IN_FLIGHT_MAX`]) still holds, each read taking a turn.
//!
//! Memory: each piece read ahead is charged to the core's response budget before its read.
//! Only the piece the writer needs next may wait for memory, and only when nothing else of the
//! response is held; read-ahead takes memory only when it is free now (`response_memory`). A
//! cancelled response (the connection dropped) drops its read tasks, which glommio cancels.
//!
//! Pieces found in the page cache are spliced as on every way. The O_DIRECT descriptor is a second
//! open file description of the range's file (opened through `/proc/self/fd`, asynchronously by
//! glommio), so the segment's own buffered descriptor, which storage's scans share, keeps its
//! flags; the core keeps it for the next ranges of the same file ([`super::direct_files`]).
//! Where O_DIRECT cannot be opened (a filesystem without it) the range's cold pieces go the
//! buffered `read` way, one at a time.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use futures_lite::AsyncWriteExt;
use glommio::io::{DmaFile, ReadResult};

use super::direct_files::{self, Lookup};
use super::{
    count, is_cached, note_cold_wait, read_piece, short_file, splice_piece, Half, RangeFile,
    SplicePipe, COLD_READS, PIECE_BYTES_MAX,
};
use crate::request_memory::Charge;
use crate::requests::FetchChunk;

/// Pieces of one response read at once (the one being written included).
pub const DIRECT_READ_AHEAD_PIECES: usize = 4;

/// O_DIRECT reads start and end on this boundary: a multiple of every logical block size up
/// to 4 KiB, the most a piece is widened at each end.
const DIRECT_ALIGN_BYTES: u64 = 4096;

/// A file range's O_DIRECT descriptor, opened at its first cold piece.
enum DirectFile {
    NotOpened,
    Open(Rc<DmaFile>),
    /// Opening failed: the range's cold pieces go the buffered way without trying again.
    Unavailable,
}

struct Range {
    file: RangeFile,
    direct: DirectFile,
}

impl Range {
    async fn direct(&mut self) -> Option<Rc<DmaFile>> {
        if matches!(self.direct, DirectFile::NotOpened) {
            self.direct = open_direct(self.file.raw).await;
        }
        match &self.direct {
            DirectFile::Open(f) => Some(Rc::clone(f)),
            _ => None,
        }
    }

    async fn close(self) -> io::Result<()> {
        let direct = match self.direct {
            // A descriptor kept by `direct_files` stays open for the next range. A read task
            // cancelled a moment ago may still hold a clone; the last one dropped closes it
            // through the ring.
            DirectFile::Open(f) => match Rc::try_unwrap(f) {
                Ok(f) => f.close().await.map_err(io::Error::from),
                Err(_) => Ok(()),
            },
            _ => Ok(()),
        };
        let buffered = self.file.close().await;
        direct.and(buffered)
    }
}

/// The core's kept O_DIRECT descriptor of the file behind `fd` ([`direct_files`]), or a new
/// one (kept for the next ranges when the file can be kept).
async fn open_direct(fd: RawFd) -> DirectFile {
    let id = match direct_files::lookup(fd) {
        Lookup::Hit(f) => return DirectFile::Open(f),
        Lookup::Miss(id) => Some(id),
        Lookup::Uncacheable => None,
    };
    match DmaFile::open(proc_path(fd)).await {
        Ok(f) => {
            let f = Rc::new(f);
            if let Some(id) = id {
                direct_files::insert(id, Rc::clone(&f));
            }
            DirectFile::Open(f)
        }
        Err(e) => {
            tracing::debug!("file range without O_DIRECT ({e}); reading it buffered");
            DirectFile::Unavailable
        }
    }
}

/// The magic link that reopens the file behind `fd` as a new open file description.
fn proc_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

/// One thing to write, in response order.
enum Step {
    Memory(Bytes),
    Piece {
        range: usize,
        pos: u64,
        len: usize,
        /// Bytes of the same range follow this piece.
        more: bool,
    },
}

/// How a piece goes out, decided when the read-ahead reaches it.
enum Way {
    Cached,
    Buffered,
    Direct {
        read: glommio::Task<io::Result<ReadResult>>,
        _charge: Option<Charge>,
    },
}

/// Writes `head` and then `chunks` in order, the module doc's way.
pub(super) async fn write_chunks(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &mut Option<SplicePipe>,
    head: &Bytes,
    chunks: Vec<FetchChunk>,
) -> io::Result<()> {
    let mut ranges = Vec::new();
    let mut steps = Vec::new();
    for chunk in chunks {
        match chunk {
            FetchChunk::Memory(b) => steps.push(Step::Memory(b)),
            FetchChunk::File { fd, position, len } => {
                let range = ranges.len();
                ranges.push(Range {
                    file: RangeFile::new(fd),
                    direct: DirectFile::NotOpened,
                });
                let end = position.checked_add(len).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "file range past u64")
                })?;
                let mut pos = position;
                while pos < end {
                    let piece = (end - pos).min(PIECE_BYTES_MAX as u64) as usize;
                    pos += piece as u64;
                    steps.push(Step::Piece {
                        range,
                        pos: pos - piece as u64,
                        len: piece,
                        more: pos < end,
                    });
                }
            }
        }
    }
    if !ranges.is_empty() && pipe.is_none() {
        *pipe = Some(SplicePipe::new()?);
    }
    let sent = match pipe.as_ref() {
        Some(p) => send(w, socket_fd, p, head, &mut ranges, steps).await,
        None => send_memory(w, head, steps).await,
    };
    let mut closed = Ok(());
    for r in ranges {
        closed = closed.and(r.close().await);
    }
    sent.and(closed)
}

/// A response with no file ranges.
async fn send_memory(w: &mut Half, head: &Bytes, steps: Vec<Step>) -> io::Result<()> {
    w.write_all(head).await?;
    for step in steps {
        if let Step::Memory(b) = step {
            w.write_all(&b).await?;
        }
    }
    Ok(())
}

async fn send(
    w: &mut Half,
    socket_fd: RawFd,
    pipe: &SplicePipe,
    head: &Bytes,
    ranges: &mut [Range],
    steps: Vec<Step>,
) -> io::Result<()> {
    // The first reads start before the head goes out.
    let mut ways: VecDeque<Way> = VecDeque::new();
    // Steps[..planned] have their way decided (pieces) or need none (memory); `ways` holds the
    // ways of the pieces among steps[next..planned], in order.
    let mut planned = 0;
    plan_ahead(ranges, &steps, &mut planned, &mut ways, 0).await?;
    w.write_all(head).await?;
    for (i, step) in steps.iter().enumerate() {
        plan_ahead(ranges, &steps, &mut planned, &mut ways, i).await?;
        let Step::Piece {
            range,
            pos,
            len,
            more,
        } = *step
        else {
            if let Step::Memory(b) = step {
                w.write_all(b).await?;
            }
            continue;
        };
        let way = ways
            .pop_front()
            .expect("every piece before `planned` has a way");
        let r = &mut ranges[range];
        match way {
            Way::Cached => {
                splice_piece(w, socket_fd, pipe, r.file.raw, pos, len, more, false).await?;
                count(false, len);
            }
            Way::Buffered => {
                read_piece(w, r.file.glommio()?, pos, len).await?;
                count(true, len);
            }
            Way::Direct { read, _charge } => {
                let got = read.await?;
                w.write_all(&got).await?;
                count(true, len);
            }
        }
    }
    Ok(())
}

/// Decides the ways of the steps after `planned` until [`DIRECT_READ_AHEAD_PIECES`] pieces from
/// step `writing` on have one, starting their O_DIRECT reads; stops early when a read-ahead
/// finds no memory free. Always decides step `writing` itself: with nothing held, it waits.
async fn plan_ahead(
    ranges: &mut [Range],
    steps: &[Step],
    planned: &mut usize,
    ways: &mut VecDeque<Way>,
    writing: usize,
) -> io::Result<()> {
    while *planned < steps.len() && ways.len() < DIRECT_READ_AHEAD_PIECES {
        let Step::Piece {
            range, pos, len, ..
        } = steps[*planned]
        else {
            *planned += 1;
            continue;
        };
        let r = &mut ranges[range];
        // A piece sent the other ways may wait for memory while it is written (a full socket's
        // pipe read back, a buffered read), so it is planned only when nothing is held, and
        // nothing is read ahead of it.
        let cached = is_cached(r.file.raw, pos, len);
        let direct = if cached { None } else { r.direct().await };
        let Some(file) = direct else {
            if !ways.is_empty() {
                return Ok(());
            }
            ways.push_back(if cached { Way::Cached } else { Way::Buffered });
            *planned += 1;
            return Ok(());
        };
        let way = {
            let bytes = len + 2 * DIRECT_ALIGN_BYTES as usize;
            let charge = if *planned <= writing && ways.is_empty() {
                crate::response_memory::charge(bytes).await?
            } else {
                match crate::response_memory::try_charge(bytes) {
                    Some(c) => c,
                    None => return Ok(()),
                }
            };
            Way::Direct {
                read: glommio::spawn_local(read_exact(file, pos, len)),
                _charge: charge,
            }
        };
        ways.push_back(way);
        *planned += 1;
    }
    Ok(())
}

/// Reads exactly `[pos, pos + len)` with O_DIRECT (widened to block boundaries) in one read,
/// taking one of the core's cold-read turns for it; a file that ends inside the range is an
/// error (the range came from the index).
async fn read_exact(file: Rc<DmaFile>, pos: u64, len: usize) -> io::Result<ReadResult> {
    let started = std::time::Instant::now();
    let turns = COLD_READS.with(Rc::clone);
    let turn = turns
        .acquire_static_permit(1)
        .await
        .map_err(io::Error::from)?;
    let from = pos - pos % DIRECT_ALIGN_BYTES;
    let skip = (pos - from) as usize;
    let end = pos + len as u64;
    let to = end.div_ceil(DIRECT_ALIGN_BYTES) * DIRECT_ALIGN_BYTES;
    let got = file
        .read_at_aligned(from, (to - from) as usize)
        .await
        .map_err(io::Error::from)?;
    drop(turn);
    note_cold_wait(started.elapsed());
    if got.len() < skip + len {
        return Err(short_file());
    }
    ReadResult::slice(&got, skip, len).ok_or_else(short_file)
}
