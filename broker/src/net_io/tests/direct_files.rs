//! Tests of `direct_files.rs`: a core keeps one O_DIRECT descriptor per segment file for the
//! ranges that follow, never serves a deleted file from it, and stays within its bound.

use std::time::Duration;

use glommio::io::DmaFile;

use super::*;
use crate::net_io::direct_files::{
    close_all, dropped_deleted, insert, kept, lookup, sweep_now, Lookup, DIRECT_FILES_MAX, IDLE_MS,
};

/// Opens the O_DIRECT descriptor `direct_read` would, and keeps it.
async fn open_and_keep(fd: RawFd) -> Rc<DmaFile> {
    let Lookup::Miss(id) = lookup(fd) else {
        panic!("a file not kept yet is a miss");
    };
    let f = Rc::new(
        DmaFile::open(format!("/proc/self/fd/{fd}"))
            .await
            .expect("O_DIRECT open"),
    );
    insert(id, Rc::clone(&f));
    f
}

#[test]
fn another_range_of_the_file_reuses_the_kept_descriptor_but_a_deleted_file_is_never_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = segment_like(dir.path(), &content(8192));
    run(move || async move {
        let (first, second) = (open_fd(&path), open_fd(&path));
        let kept_file = open_and_keep(first.as_raw_fd()).await;
        match lookup(second.as_raw_fd()) {
            Lookup::Hit(f) => assert!(Rc::ptr_eq(&f, &kept_file), "the same descriptor"),
            _ => panic!("a second descriptor of a kept file is a hit"),
        }
        assert_eq!(kept(), 1);
        // Retention deletes the segment while a response still holds a range of it.
        std::fs::remove_file(&path).expect("unlink");
        let dropped = dropped_deleted();
        assert!(
            matches!(lookup(second.as_raw_fd()), Lookup::Uncacheable),
            "a deleted file is not served from the cache"
        );
        assert_eq!(kept(), 0, "its descriptor is let go at once");
        assert_eq!(dropped_deleted(), dropped + 1);
    });
}

#[test]
fn the_cache_keeps_at_most_its_bound_and_the_sweep_drops_deleted_then_idle_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<_> = (0..=DIRECT_FILES_MAX)
        .map(|i| {
            let d = dir.path().join(format!("p{i}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            segment_like(&d, &content(4096))
        })
        .collect();
    run(move || async move {
        let fds: Vec<OwnedFd> = paths.iter().map(|p| open_fd(p)).collect();
        for fd in &fds[..DIRECT_FILES_MAX] {
            open_and_keep(fd.as_raw_fd()).await;
        }
        // Touch the first so the second is the least recently used.
        assert!(matches!(lookup(fds[0].as_raw_fd()), Lookup::Hit(_)));
        open_and_keep(fds[DIRECT_FILES_MAX].as_raw_fd()).await;
        assert_eq!(kept(), DIRECT_FILES_MAX, "the bound holds");
        assert!(
            matches!(lookup(fds[1].as_raw_fd()), Lookup::Miss(_)),
            "LRU went"
        );
        assert!(matches!(lookup(fds[0].as_raw_fd()), Lookup::Hit(_)));
        // A deleted file nobody looks up again: the sweep lets its descriptor go.
        std::fs::remove_file(&paths[2]).expect("unlink");
        let dropped = dropped_deleted();
        assert_eq!(sweep_now(Duration::ZERO), DIRECT_FILES_MAX - 1);
        assert_eq!(dropped_deleted(), dropped + 1);
        // Idle ones go too.
        assert_eq!(sweep_now(Duration::from_millis(IDLE_MS)), 0);
        assert_eq!(kept(), 0);
    });
}

#[test]
fn cold_ranges_of_one_file_in_two_responses_share_one_descriptor_and_arrive_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = content(3 * PIECE_BYTES_MAX);
    let path = segment_like(dir.path(), &data);
    let (cached, _) = drop_pages(&path).expect("cachestat");
    assert_eq!(cached, 0, "precondition: the file is cold");
    run(move || async move {
        for (pos, len) in [(POSITION, LEN), (7, PIECE_BYTES_MAX + 1)] {
            let got = deliver(
                vec![file_chunk(&path, pos, len as u64)],
                ColdRanges::Direct,
                4 + len,
                false,
            )
            .await
            .expect("delivered");
            assert!(
                got[4..] == data[pos as usize..pos as usize + len],
                "exact bytes"
            );
            assert_eq!(kept(), 1, "one descriptor kept for the file");
        }
        close_all().await;
        assert_eq!(kept(), 0);
    });
}
