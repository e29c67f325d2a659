//! Tests of the file-range sender: exact bytes of cached and cold ranges under every
//! `ColdRanges` way, slow readers, and short files.

use std::io::Write as _;
use std::path::Path;

use futures_lite::AsyncReadExt;
use glommio::net::TcpListener;

use super::*;

use crate::test_executor::run;

mod direct;
mod direct_files;

/// Deterministic, non-repeating bytes (so a shifted or repeated range cannot pass).
pub(super) fn content(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Writes `bytes` to a file under the tests' temporary directory (a disk file system here, so
/// its pages can be dropped), synced so `POSIX_FADV_DONTNEED` can drop them.
fn segment_like(dir: &Path, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join("00000000000000000000.log");
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("fsync");
    path
}

fn open_fd(path: &Path) -> OwnedFd {
    OwnedFd::from(std::fs::File::open(path).expect("open"))
}

/// A descriptor whose reads bring in only the pages asked for (no readahead), so a test
/// knows which pages are cached after it.
fn open_fd_no_readahead(path: &Path) -> OwnedFd {
    let fd = open_fd(path);
    // SAFETY: fadvise on a descriptor owned by this frame; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    assert_eq!(rc, 0, "posix_fadvise(RANDOM)");
    fd
}

/// Drops the file's clean pages from the page cache; returns (cached, spanned) afterwards.
fn drop_pages(path: &Path) -> io::Result<(u64, u64)> {
    let fd = open_fd(path);
    // SAFETY: fadvise on a descriptor owned by this frame; no memory is passed.
    let rc = unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise(DONTNEED)");
    let len = std::fs::metadata(path)?.len();
    cached_pages(fd.as_raw_fd(), 0, len)
}

/// Loads the whole file into the page cache; returns (cached, spanned) afterwards.
fn load_pages(path: &Path) -> io::Result<(u64, u64)> {
    let bytes = std::fs::read(path).expect("read");
    cached_pages(open_fd(path).as_raw_fd(), 0, bytes.len() as u64)
}

/// Sends `head` and `chunks` over loopback with [`write_chunks_with`] and returns what the
/// peer received (exactly `expect_bytes` of it), or the sender's error. With `slow_reader`
/// the peer waits before reading, so the socket fills and the pipe-drain path runs.
async fn deliver(
    chunks: Vec<FetchChunk>,
    cold: ColdRanges,
    expect_bytes: usize,
    slow_reader: bool,
) -> io::Result<Vec<u8>> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let reader = glommio::spawn_local(async move {
        let mut client = TcpStream::connect(addr).await.expect("connect");
        if slow_reader {
            glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        }
        let mut got = vec![0u8; expect_bytes];
        let r = client.read_exact(&mut got).await;
        r.map(|()| got)
    });
    let server = listener.accept().await.expect("accept");
    let (mut w, _r, fd) = split(server);
    let mut pipe = None;
    let head = Bytes::from_static(b"HEAD");
    let sent = write_chunks_with(&mut w, fd, &mut pipe, &head, chunks, cold).await;
    match sent {
        // The peer may be blocked on bytes that will never come; do not wait for it.
        Err(e) => Err(e),
        Ok(()) => reader.await,
    }
}

fn file_chunk(path: &Path, position: u64, len: u64) -> FetchChunk {
    FetchChunk::File {
        fd: open_fd_no_readahead(path),
        position,
        len,
    }
}

/// A range over three pieces, neither end page-aligned.
const POSITION: u64 = 4097 + 13;
const LEN: usize = 2 * PIECE_BYTES_MAX + 54_321;

fn expected(data: &[u8], position: u64, len: usize) -> Vec<u8> {
    let mut want = b"HEAD".to_vec();
    want.extend_from_slice(&data[position as usize..position as usize + len]);
    want
}

fn stats_delta(before: FileSendStats) -> FileSendStats {
    let now = file_send_stats();
    FileSendStats {
        cached_pieces: now.cached_pieces - before.cached_pieces,
        cached_bytes: now.cached_bytes - before.cached_bytes,
        cold_pieces: now.cold_pieces - before.cold_pieces,
        cold_bytes: now.cold_bytes - before.cold_bytes,
        reactor_splice_ns: now.reactor_splice_ns - before.reactor_splice_ns,
        reactor_splice_max_ns: now.reactor_splice_max_ns,
        cold_wait_ns: now.cold_wait_ns - before.cold_wait_ns,
        cold_wait_max_ns: now.cold_wait_max_ns,
    }
}

#[test]
fn cachestat_counts_the_pages_of_a_range_that_are_cached() {
    let pg = page_bytes();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(64 * pg as usize);
    let path = segment_like(dir.path(), &data);
    let (cached, spanned) = drop_pages(&path).expect("cachestat (Linux >= 6.5)");
    assert_eq!((cached, spanned), (0, 64), "all pages dropped");
    // Read the first 16 pages only.
    let mut f = std::fs::File::from(open_fd_no_readahead(&path));
    let mut buf = vec![0u8; 16 * pg as usize];
    std::io::Read::read_exact(&mut f, &mut buf).expect("read");
    let fd = f.as_raw_fd();
    assert_eq!(cached_pages(fd, 0, 16 * pg).expect("cachestat"), (16, 16));
    // An unaligned range over pages 15 and 16: only page 15 was read.
    assert_eq!(
        cached_pages(fd, 15 * pg + 100, pg).expect("cachestat"),
        (1, 2)
    );
    assert!(
        !is_cached(fd, 60 * pg, pg as usize),
        "a page never read is cold"
    );
    assert!(
        !is_cached(fd, 15 * pg + 100, pg as usize),
        "one missing page is cold"
    );
    assert!(is_cached(fd, pg + 1, 8000), "pages read are cached");
    assert!(
        readable_now(fd, 3 * pg + 5),
        "a filled page is readable now"
    );
    assert!(
        !readable_now(fd, 64 * pg + 5),
        "nothing is readable past the end"
    );
    assert_eq!(load_pages(&path).expect("cachestat"), (64, 64));
}

#[test]
fn a_cached_range_is_spliced_and_arrives_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(3 * PIECE_BYTES_MAX);
    let path = segment_like(dir.path(), &data);
    let (cached, spanned) = load_pages(&path).expect("cachestat");
    assert_eq!(cached, spanned, "precondition: the whole file is cached");
    run(move || async move {
        let before = file_send_stats();
        let got = deliver(
            vec![file_chunk(&path, POSITION, LEN as u64)],
            ColdRanges::Read,
            4 + LEN,
            false,
        )
        .await
        .expect("delivered");
        assert!(
            got == expected(&data, POSITION, LEN),
            "the range's exact bytes"
        );
        let d = stats_delta(before);
        assert_eq!((d.cached_pieces, d.cold_pieces), (3, 0), "{d:?}");
        assert_eq!(d.cached_bytes, LEN as u64);
        assert!(
            d.reactor_splice_ns > 0,
            "cached pieces are spliced on the reactor"
        );
    });
}

/// Delivers `LEN` bytes at `POSITION` of `path` (whose pages are dropped) the `way` given and
/// asserts what every cold way promises: the exact bytes, three cold pieces and none cached,
/// and no byte spliced on the reactor.
fn cold_range_arrives_exactly(path: &Path, data: &[u8], way: ColdRanges) {
    let (p, data) = (path.to_path_buf(), data.to_vec());
    run(move || async move {
        let before = file_send_stats();
        let got = deliver(
            vec![file_chunk(&p, POSITION, LEN as u64)],
            way,
            4 + LEN,
            false,
        )
        .await
        .expect("delivered");
        assert!(
            got == expected(&data, POSITION, LEN),
            "the range's exact bytes"
        );
        let d = stats_delta(before);
        assert_eq!((d.cached_pieces, d.cold_pieces), (0, 3), "{d:?}");
        assert_eq!(d.cold_bytes, LEN as u64);
        assert_eq!(
            d.reactor_splice_ns, 0,
            "no cold byte was spliced on the reactor"
        );
    });
}

#[test]
fn a_cold_range_is_read_through_io_uring_and_arrives_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(3 * PIECE_BYTES_MAX);
    let path = segment_like(dir.path(), &data);
    let (cached, _) = drop_pages(&path).expect("cachestat");
    assert_eq!(cached, 0, "precondition: no page of the file is cached");
    cold_range_arrives_exactly(&path, &data, ColdRanges::Read);
    // The read filled the page cache, as a splice would have: the next fetch splices.
    let fd = open_fd(&path);
    assert!(is_cached(fd.as_raw_fd(), POSITION, LEN));
}

#[test]
fn every_cold_policy_delivers_the_same_bytes_between_memory_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(3 * PIECE_BYTES_MAX);
    let path = segment_like(dir.path(), &data);
    for cold in [
        ColdRanges::Direct,
        ColdRanges::Read,
        ColdRanges::BlockingSplice,
        ColdRanges::Splice,
    ] {
        for force_cold in [false, true] {
            let _ = drop_pages(&path);
            let p = path.clone();
            let data = data.clone();
            run(move || async move {
                FORCE_COLD.with(|c| c.set(force_cold));
                let chunks = vec![
                    FetchChunk::Memory(Bytes::from_static(b"<mem1>")),
                    file_chunk(&p, 0, 10),
                    file_chunk(&p, POSITION, LEN as u64),
                    FetchChunk::Memory(Bytes::from_static(b"<mem2>")),
                    file_chunk(&p, (3 * PIECE_BYTES_MAX - 7) as u64, 7),
                ];
                let mut want = b"HEAD<mem1>".to_vec();
                want.extend_from_slice(&data[..10]);
                want.extend_from_slice(&data[POSITION as usize..POSITION as usize + LEN]);
                want.extend_from_slice(b"<mem2>");
                want.extend_from_slice(&data[3 * PIECE_BYTES_MAX - 7..]);
                let before = file_send_stats();
                let got = deliver(chunks, cold, want.len(), true)
                    .await
                    .expect("delivered");
                assert!(
                    got == want,
                    "{cold:?}, forced cold {force_cold}: exact bytes"
                );
                let d = stats_delta(before);
                if force_cold && cold != ColdRanges::Splice {
                    assert_eq!(d.cold_pieces, 5, "{cold:?}: {d:?}");
                    assert_eq!(
                        d.reactor_splice_ns, 0,
                        "{cold:?}: cold pieces off the reactor"
                    );
                }
                if cold == ColdRanges::Splice {
                    assert_eq!(d.cold_pieces, 0, "splice checks nothing: {d:?}");
                }
            });
        }
    }
}

#[test]
fn a_range_past_the_end_of_the_file_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(100_000);
    let path = segment_like(dir.path(), &data);
    for cold in [
        ColdRanges::Direct,
        ColdRanges::Read,
        ColdRanges::BlockingSplice,
        ColdRanges::Splice,
    ] {
        let p = path.clone();
        run(move || async move {
            let chunks = vec![file_chunk(&p, 90_000, 20_000)];
            let e = deliver(chunks, cold, 4 + 20_000, false)
                .await
                .expect_err("the file is 10,000 bytes short");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{cold:?}: {e}");
        });
    }
}

#[test]
fn the_cold_policy_parses_its_four_names_and_refuses_others() {
    assert_eq!(ColdRanges::parse("direct"), Ok(ColdRanges::Direct));
    assert_eq!(ColdRanges::parse("read"), Ok(ColdRanges::Read));
    assert_eq!(
        ColdRanges::parse("blocking"),
        Ok(ColdRanges::BlockingSplice)
    );
    assert_eq!(ColdRanges::parse("splice"), Ok(ColdRanges::Splice));
    let e = ColdRanges::parse("Read").expect_err("names are exact");
    assert!(e.contains("SPOOL_FETCH_COLD"), "{e}");
}
