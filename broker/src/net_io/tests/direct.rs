//! Tests of the `direct` way (`direct_read.rs`): cold pieces read with O_DIRECT arrive exactly,
//! leave the page cache as it was, and a response's read-ahead delivers everything, in order,
//! even when the core's response budget holds only one piece at a time.

use super::*;

/// Two files: one whose pages are dropped (cold), one loaded into the page cache (cached).
fn cold_and_cached(dir: &Path) -> (std::path::PathBuf, Vec<u8>, std::path::PathBuf, Vec<u8>) {
    let cold_data = content(3 * PIECE_BYTES_MAX);
    let cold_dir = dir.join("cold");
    std::fs::create_dir_all(&cold_dir).expect("mkdir");
    let cold = segment_like(&cold_dir, &cold_data);
    let (cached, _) = drop_pages(&cold).expect("cachestat");
    assert_eq!(
        cached, 0,
        "precondition: no page of the cold file is cached"
    );
    let hot_data: Vec<u8> = content(PIECE_BYTES_MAX + 5).into_iter().rev().collect();
    let hot_dir = dir.join("hot");
    std::fs::create_dir_all(&hot_dir).expect("mkdir");
    let hot = segment_like(&hot_dir, &hot_data);
    let (cached, spanned) = load_pages(&hot).expect("cachestat");
    assert_eq!(cached, spanned, "precondition: the hot file is cached");
    (cold, cold_data, hot, hot_data)
}

#[test]
fn a_cold_range_read_with_o_direct_arrives_exactly_and_leaves_the_page_cache_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, data, _, _) = cold_and_cached(dir.path());
    cold_range_arrives_exactly(&path, &data, ColdRanges::Direct);
    // Unlike the `read` way, nothing went through the page cache.
    let fd = open_fd(&path);
    let (cached, _) =
        cached_pages(fd.as_raw_fd(), 0, (3 * PIECE_BYTES_MAX) as u64).expect("cachestat");
    assert_eq!(cached, 0, "an O_DIRECT read fills no page-cache page");
}

#[test]
fn read_ahead_delivers_every_range_in_order_within_a_budget_of_one_piece() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cold, cold_data, hot, hot_data) = cold_and_cached(dir.path());
    run(move || async move {
        // Room for one piece and its alignment slack: every read ahead is refused memory, so
        // the response must go out one piece at a time rather than wait on itself.
        crate::response_memory::install(PIECE_BYTES_MAX + 8192);
        let pieces = [
            (0u64, 10usize),
            (POSITION, PIECE_BYTES_MAX),
            (PIECE_BYTES_MAX as u64 + 1, PIECE_BYTES_MAX - 1),
            (2 * PIECE_BYTES_MAX as u64 - 3, PIECE_BYTES_MAX + 3),
        ];
        let mut chunks = Vec::new();
        let mut want = b"HEAD".to_vec();
        for (i, (pos, len)) in pieces.iter().enumerate() {
            chunks.push(FetchChunk::Memory(Bytes::from(format!("<m{i}>"))));
            want.extend_from_slice(format!("<m{i}>").as_bytes());
            chunks.push(file_chunk(&cold, *pos, *len as u64));
            want.extend_from_slice(&cold_data[*pos as usize..*pos as usize + len]);
            if i == 1 {
                // A cached range between cold ones is spliced, in its place.
                chunks.push(file_chunk(&hot, 3, PIECE_BYTES_MAX as u64));
                want.extend_from_slice(&hot_data[3..3 + PIECE_BYTES_MAX]);
            }
        }
        let before = file_send_stats();
        let got = deliver(chunks, ColdRanges::Direct, want.len(), true)
            .await
            .expect("delivered");
        assert!(got == want, "every range's exact bytes, in order");
        let d = stats_delta(before);
        // The last cold range spans two pieces (it crosses a piece's length).
        assert_eq!((d.cached_pieces, d.cold_pieces), (1, 5), "{d:?}");
        let budget = crate::response_memory::current().expect("installed");
        assert_eq!(budget.budget().in_use_bytes(), 0, "every charge given back");
    });
}

#[test]
fn read_ahead_with_room_delivers_the_same_bytes_as_one_piece_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cold, cold_data, _, _) = cold_and_cached(dir.path());
    run(move || async move {
        crate::response_memory::install(64 * PIECE_BYTES_MAX);
        // More small ranges than the read-ahead holds, so it refills as the writer goes.
        let ranges: Vec<(u64, usize)> = (0..(3 * DIRECT_READ_AHEAD_PIECES as u64))
            .map(|i| (i * 200_003 + 1, 100_000 + i as usize))
            .collect();
        let mut chunks = Vec::new();
        let mut want = b"HEAD".to_vec();
        for (pos, len) in &ranges {
            chunks.push(file_chunk(&cold, *pos, *len as u64));
            want.extend_from_slice(&cold_data[*pos as usize..*pos as usize + len]);
        }
        let got = deliver(chunks, ColdRanges::Direct, want.len(), false)
            .await
            .expect("delivered");
        assert!(got == want, "every range's exact bytes, in order");
        let budget = crate::response_memory::current().expect("installed");
        assert_eq!(budget.budget().in_use_bytes(), 0, "every charge given back");
    });
}
